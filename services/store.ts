/**
 * Service data kept in the object store under `_system/` (docs/storage.md#service-data): API keys (only their
 * SHA-256 is stored, with a hash index for lookup), organizations' workspaces, and
 * conversations. One implementation for both modes, since it only speaks the ObjectStore port.
 *
 * Listings read only what they return, through index objects whose keys sort the way the
 * listing does (the store lists keys in byte order, and a cursor is a key to start after):
 * - Keys of an organization: `_system/orgs/<org>/keys/<key id>`, written before the key's
 *   record; `keys list` reads the records of that organization only.
 * - Conversations by last activity: `_system/orgs/<org>/conversation-activity/<ws>/<rank>.<id>`
 *   with rank = 9999999999999 − updated_at in ms, 13 digits, so the most recent sorts first
 *   (ties: by id, ascending). Saving a conversation writes its new entry, then the record,
 *   then deletes its previous entry. A page lists `limit + 1` entries from the `before`
 *   conversation's own entry and reads only the conversations they name; an entry that does
 *   not match its conversation's current activity (left by an interrupted or concurrent save)
 *   is skipped, never shown twice. `before` is resolved to the conversation's current rank,
 *   so a conversation active again since the previous page moves that page's boundary.
 * This was chosen over one index object per workspace: no read-modify-write of a shared
 * object on every message, and a page costs the same however many conversations there are.
 * Data written before an index existed is indexed once, on the first listing that needs it
 * (a marker under `_system/indexes/` records it; a new workspace gets its marker at once).
 */
import { readJson, updateJson, writeJson } from "../adapters/json-store.js";
import { createHash, randomBytes, randomInt } from "node:crypto";
import type { ObjectStore } from "../core/ports.js";
import { StoreError } from "../core/ports.js";
import { OperonError } from "../core/errors.js";
import { ID_PATTERN } from "../core/ids.js";
import {
  KEY_RECORDS_PREFIX, KEYS_BY_ORGANIZATION_INDEX_MARKER, conversationActivityEntry, conversationActivityIndexMarker, conversationActivityPrefix, conversationKey, conversationsPrefix,
  keyHashKey, keyRecordKey, organizationKeyEntry, organizationKeysPrefix, workspaceRecordKey, workspaceRecordsPrefix,
} from "../core/layout.js";

export const SCOPES = ["query", "tools", "conversations", "files"] as const;
export type Scope = (typeof SCOPES)[number];
export { ID_PATTERN } from "../core/ids.js";

export interface KeyRecord {
  id: string;
  organization: string;
  scopes: Scope[];
  /** null: every workspace of the organization. */
  workspaces: string[] | null;
  name: string;
  created_at: string;
  revoked_at: string | null;
  last_used_at: string | null;
  /** sha256 of the whole key, hex. */
  hash: string;
}

export interface WorkspaceRecord { id: string; organization: string; name: string; created_at: string }

export interface Message { role: string; content: string; created_at?: string }
export interface ConversationRecord {
  id: string;
  organization: string;
  workspace_id: string;
  title: string;
  created_at: string;
  updated_at: string;
  messages: Message[];
}

const KEY_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
export const KEY_PATTERN = /^sk_live_[A-Za-z0-9]{32}$/;

/** `sk_live_` + 32 characters from [A-Za-z0-9], uniformly from a CSPRNG. */
export function generateKey(): string {
  let s = "sk_live_";
  for (let i = 0; i < 32; i++) s += KEY_ALPHABET[randomInt(KEY_ALPHABET.length)];
  return s;
}

export const hashKey = (key: string) => createHash("sha256").update(key).digest("hex");

/** Conversation activity ranks: the most recent activity sorts first. */
const RANK_MAX = 9_999_999_999_999;
function activityRank(updatedAt: string): string {
  const ms = Date.parse(updatedAt);
  return String(RANK_MAX - Math.min(RANK_MAX, Math.max(0, Number.isFinite(ms) ? ms : 0))).padStart(13, "0");
}

async function listAll(store: ObjectStore, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await store.list(prefix, { limit: 1000, ...(cursor ? { cursor } : {}) });
    keys.push(...page.items.map((i) => i.key));
    cursor = page.nextCursor;
  } while (cursor);
  return keys;
}

export class ServiceStore {
  constructor(readonly store: ObjectStore, private readonly now: () => Date = () => new Date()) {}

  /** Index markers known to exist (an index, once built, stays built). */
  private readonly indexed = new Set<string>();

  /** Runs `build` unless the index `marker` names was built already, then records it. */
  private async ensureIndexed(marker: string, build: () => Promise<void>): Promise<void> {
    if (this.indexed.has(marker)) return;
    if (!(await this.store.head(marker))) {
      await build();
      await this.store.put(marker, this.now().toISOString(), { contentType: "text/plain" });
    }
    this.indexed.add(marker);
  }

  /* ---------- workspaces ---------- */
  async createWorkspace(organization: string, id: string, name?: string): Promise<WorkspaceRecord> {
    for (const [field, v] of [["org", organization], ["id", id]] as const) {
      if (!ID_PATTERN.test(v)) throw new OperonError("invalid_request", `${field} ${JSON.stringify(v)}: use 1-63 letters, digits, _ or -, starting with a letter or digit`);
    }
    const rec: WorkspaceRecord = { id, organization, name: name ?? id, created_at: this.now().toISOString() };
    try {
      await writeJson(this.store, workspaceRecordKey(organization, id), rec, true);
    } catch (e) {
      if (e instanceof StoreError && e.code === "PreconditionFailed") throw new OperonError("conflict", `workspace ${organization}/${id} already exists`, undefined, { cause: e });
      throw e;
    }
    // A new workspace has no conversations stored before the activity index.
    await this.store.put(conversationActivityIndexMarker(organization, id), rec.created_at, { contentType: "text/plain" });
    return rec;
  }

  getWorkspace(organization: string, id: string): Promise<WorkspaceRecord | undefined> {
    if (!ID_PATTERN.test(organization) || !ID_PATTERN.test(id)) return Promise.resolve(undefined);
    return readJson<WorkspaceRecord>(this.store, workspaceRecordKey(organization, id));
  }

  async listWorkspaces(organization: string): Promise<WorkspaceRecord[]> {
    const keys = await listAll(this.store, workspaceRecordsPrefix(organization));
    const recs = await Promise.all(keys.filter((k) => /\/workspaces\/[^/]+\.json$/.test(k)).map((k) => readJson<WorkspaceRecord>(this.store, k)));
    return recs.filter((r): r is WorkspaceRecord => r !== undefined).sort((a, b) => a.id.localeCompare(b.id));
  }

  /* ---------- keys ---------- */
  async createKey(input: { organization: string; scopes: Scope[]; workspaces: string[] | null; name?: string }): Promise<{ record: KeyRecord; key: string }> {
    if (!ID_PATTERN.test(input.organization)) throw new OperonError("invalid_request", `org ${JSON.stringify(input.organization)} is not a valid id`);
    if (input.scopes.length === 0) throw new OperonError("invalid_request", "a key needs at least one scope");
    for (const s of input.scopes) if (!SCOPES.includes(s)) throw new OperonError("invalid_request", `unknown scope ${JSON.stringify(s)} (scopes: ${SCOPES.join(", ")})`);
    for (const w of input.workspaces ?? []) if (!(await this.getWorkspace(input.organization, w))) throw new OperonError("not_found", `workspace ${input.organization}/${w} does not exist`);
    const key = generateKey();
    const record: KeyRecord = {
      id: `key_${randomBytes(8).toString("hex")}`,
      organization: input.organization,
      scopes: [...new Set(input.scopes)],
      workspaces: input.workspaces,
      name: input.name ?? "",
      created_at: this.now().toISOString(),
      revoked_at: null,
      last_used_at: null,
      hash: hashKey(key),
    };
    // The organization's index entry first: a key is never missing from `keys list`.
    await writeJson(this.store, organizationKeyEntry(record.organization, record.id), { id: record.id });
    await writeJson(this.store, keyRecordKey(record.id), record, true);
    await writeJson(this.store, keyHashKey(record.hash), { id: record.id }, true);
    return { record, key };
  }

  getKey(id: string): Promise<KeyRecord | undefined> {
    if (!/^key_[0-9a-f]{16}$/.test(id)) return Promise.resolve(undefined);
    return readJson<KeyRecord>(this.store, keyRecordKey(id));
  }

  async findKeyByHash(hash: string): Promise<KeyRecord | undefined> {
    const idx = await readJson<{ id: string }>(this.store, keyHashKey(hash));
    return idx ? this.getKey(idx.id) : undefined;
  }

  /** The organization's keys, oldest first: read through its index, never other organizations' keys. */
  async listKeys(organization: string): Promise<KeyRecord[]> {
    if (!ID_PATTERN.test(organization)) return [];
    await this.ensureIndexed(KEYS_BY_ORGANIZATION_INDEX_MARKER, async () => {
      for (const k of await listAll(this.store, KEY_RECORDS_PREFIX)) {
        const rec = await readJson<KeyRecord>(this.store, k);
        if (rec && ID_PATTERN.test(rec.organization)) await writeJson(this.store, organizationKeyEntry(rec.organization, rec.id), { id: rec.id });
      }
    });
    const prefix = organizationKeysPrefix(organization);
    const ids = (await listAll(this.store, prefix)).map((k) => k.slice(prefix.length));
    const recs = await Promise.all(ids.map((id) => this.getKey(id)));
    return recs.filter((r): r is KeyRecord => r !== undefined && r.organization === organization).sort((a, b) => a.created_at.localeCompare(b.created_at));
  }

  async revokeKey(id: string): Promise<KeyRecord | undefined> {
    if (!/^key_[0-9a-f]{16}$/.test(id)) return undefined;
    const at = this.now().toISOString();
    return updateJson<KeyRecord>(this.store, keyRecordKey(id), (rec) => (rec.revoked_at ? undefined : { ...rec, revoked_at: at }));
  }

  /** Records last use of many keys at once (the auth layer batches these); never undoes a revocation. */
  async touchKeys(uses: ReadonlyMap<string, string>): Promise<void> {
    for (const [id, at] of uses) {
      if (!/^key_[0-9a-f]{16}$/.test(id)) continue;
      await updateJson<KeyRecord>(this.store, keyRecordKey(id),
        (rec) => (!rec.last_used_at || rec.last_used_at < at ? { ...rec, last_used_at: at } : undefined));
    }
  }

  /* ---------- conversations ---------- */
  private activityEntry(rec: Pick<ConversationRecord, "organization" | "workspace_id" | "id" | "updated_at">) {
    return conversationActivityEntry(rec.organization, rec.workspace_id, activityRank(rec.updated_at), rec.id);
  }

  async saveConversation(rec: ConversationRecord): Promise<void> {
    for (const [field, v] of [["organization", rec.organization], ["workspace_id", rec.workspace_id], ["id", rec.id]] as const) {
      if (!ID_PATTERN.test(v)) throw new OperonError("invalid_request", `conversation ${field} ${JSON.stringify(v)} is not a valid id`);
    }
    const key = conversationKey(rec.organization, rec.workspace_id, rec.id);
    const previous = await readJson<ConversationRecord>(this.store, key);
    const entry = this.activityEntry(rec);
    await this.store.put(entry, rec.id, { contentType: "text/plain" });
    await writeJson(this.store, key, rec);
    if (previous && this.activityEntry(previous) !== entry) await this.store.delete(this.activityEntry(previous));
  }

  async getConversation(org: string, ws: string, id: string): Promise<ConversationRecord | undefined> {
    if (!ID_PATTERN.test(id)) return undefined;
    return readJson<ConversationRecord>(this.store, conversationKey(org, ws, id));
  }

  /**
   * Most recent activity first; `before` is a conversation id, exclusive (undefined when it is
   * not a conversation of this workspace). Reads `limit + 1` index entries and the
   * conversations they name (more only past stale entries), whatever the workspace holds.
   */
  async listConversations(org: string, ws: string, limit: number, before?: string): Promise<{ items: ConversationRecord[]; hasMore: boolean } | undefined> {
    if (!ID_PATTERN.test(org) || !ID_PATTERN.test(ws)) return before === undefined ? { items: [], hasMore: false } : undefined;
    await this.ensureIndexed(conversationActivityIndexMarker(org, ws), async () => {
      for (const k of await listAll(this.store, conversationsPrefix(org, ws))) {
        const rec = await readJson<ConversationRecord>(this.store, k);
        if (rec && rec.organization === org && rec.workspace_id === ws && ID_PATTERN.test(rec.id)) await this.store.put(this.activityEntry(rec), rec.id, { contentType: "text/plain" });
      }
    });
    const prefix = conversationActivityPrefix(org, ws);
    let cursor: string | undefined;
    if (before !== undefined) {
      const from = await this.getConversation(org, ws, before);
      if (!from) return undefined;
      cursor = this.activityEntry(from);
    }
    const items: ConversationRecord[] = [];
    for (;;) {
      // One entry more than the page needs: whether another conversation follows.
      const page = await this.store.list(prefix, { limit: Math.min(1000, limit + 1 - items.length), ...(cursor !== undefined ? { cursor } : {}) });
      const recs = await Promise.all(page.items.map((i) => {
        const m = /^\d{13}\.(.+)$/.exec(i.key.slice(prefix.length));
        return m?.[1] !== undefined ? this.getConversation(org, ws, m[1]) : Promise.resolve(undefined);
      }));
      for (const [n, rec] of recs.entries()) {
        if (!rec || this.activityEntry(rec) !== page.items[n]?.key) continue; // stale entry
        if (items.length === limit) return { items, hasMore: true };
        items.push(rec);
      }
      if (page.nextCursor === undefined) return { items, hasMore: false };
      cursor = page.nextCursor;
    }
  }
}
