/**
 * Authentication and authorization (spec: Authentication; docs/security.md#api-keys). Keys arrive as
 * `Authorization: Bearer` or `X-API-Key`; only their SHA-256 is looked up. Records are
 * cached for OPERON_KEY_CACHE_TTL_SECONDS (≤ 30), so a revoked key stops working within
 * that time. Unknown keys are cached too, briefly and apart, so that a burst of one bad key
 * costs one store read and a flood of random ones never evicts the known keys; concurrent
 * lookups of one key share one read. `last_used_at` is collected in memory and written in
 * batches, never per request.
 */
import type { Clock } from "../core/ports.js";
import { WorkspaceAccess, requireScope, type AuthContext } from "../services/access.js";
import { KEY_PATTERN, hashKey, type KeyRecord, type Scope, type ServiceStore, type WorkspaceRecord } from "../services/store.js";

export type { AuthContext } from "../services/access.js";

export type AuthFailure = "missing" | "malformed" | "unknown" | "revoked";

/** Entries of each key cache; beyond, the oldest entry goes. */
export const KEY_CACHE_MAX_ENTRIES = 10_000;
/** How long an unknown key is remembered (and at most the key cache TTL): a key created meanwhile works after this. */
export const NEGATIVE_KEY_CACHE_MS = 5_000;

export class Authenticator {
  /** Known keys (revoked ones included), by hash. Only a record found in the store enters. */
  private readonly cache = new Map<string, { record: KeyRecord; at: number }>();
  /** Unknown key hashes and when they were looked up: separate, so they cannot push out known keys. */
  private readonly unknown = new Map<string, number>();
  /** Lookups in flight, so that concurrent requests with one key cause one store read. */
  private readonly inflight = new Map<string, Promise<KeyRecord | undefined>>();
  private readonly lastUsed = new Map<string, string>();
  private timer: ReturnType<typeof setInterval> | undefined;

  /** The workspace check (services/access.ts), shared with the assistant tools. */
  readonly access: WorkspaceAccess;

  constructor(private readonly service: ServiceStore, private readonly ttlSeconds: number, private readonly clock: Clock) {
    this.access = new WorkspaceAccess(service, ttlSeconds, clock);
  }

  /** Resolves the request's key or says why not. */
  async authenticate(headers: Record<string, string | string[] | undefined>): Promise<AuthContext | { failure: AuthFailure }> {
    const auth = headers["authorization"];
    const xkey = headers["x-api-key"];
    let key: string | undefined;
    if (typeof auth === "string" && auth.length > 0) {
      const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
      if (!m) return { failure: "malformed" };
      key = m[1];
    } else if (typeof xkey === "string" && xkey.length > 0) key = xkey.trim();
    if (key === undefined) return { failure: "missing" };
    if (!KEY_PATTERN.test(key)) return { failure: "malformed" };
    const record = await this.lookup(hashKey(key));
    if (!record) return { failure: "unknown" };
    if (record.revoked_at) return { failure: "revoked" };
    this.lastUsed.set(record.id, new Date(this.clock.now()).toISOString());
    return {
      keyId: record.id,
      organization: record.organization,
      scopes: new Set(record.scopes),
      workspaces: record.workspaces ? new Set(record.workspaces) : null,
    };
  }

  private lookup(hash: string): Promise<KeyRecord | undefined> {
    const now = this.clock.now();
    const ttl = this.ttlSeconds * 1000;
    const hit = this.cache.get(hash);
    if (hit && now - hit.at < ttl) return Promise.resolve(hit.record);
    const missed = this.unknown.get(hash);
    if (missed !== undefined && now - missed < Math.min(ttl, NEGATIVE_KEY_CACHE_MS)) return Promise.resolve(undefined);
    let pending = this.inflight.get(hash);
    if (!pending) {
      // A failed read (the store is unavailable) is not remembered: the next request asks again.
      pending = this.service.findKeyByHash(hash).then((record) => {
        if (record) {
          remember(this.cache, hash, { record, at: now });
          this.unknown.delete(hash);
        } else {
          remember(this.unknown, hash, now);
          this.cache.delete(hash);
        }
        return record;
      }).finally(() => this.inflight.delete(hash));
      this.inflight.set(hash, pending);
    }
    return pending;
  }

  /**
   * The workspace a request names, checked for this key: a restricted key naming another
   * workspace gets workspace_access_denied; a workspace of no concern to the key's
   * organization is not_found (another organization's workspaces are never revealed).
   */
  workspace(ctx: AuthContext, workspaceId: string): Promise<WorkspaceRecord> {
    return this.access.workspace(ctx, workspaceId);
  }

  requireScope(ctx: AuthContext, scope: Scope | "any"): void {
    requireScope(ctx, scope);
  }

  /** Writes collected last_used_at values; called on an interval and at shutdown. */
  async flush(): Promise<void> {
    if (this.lastUsed.size === 0) return;
    const batch = new Map(this.lastUsed);
    this.lastUsed.clear();
    await this.service.touchKeys(batch);
  }

  start(intervalMs = 60_000): void {
    this.timer = setInterval(() => { void this.flush().catch(() => undefined); }, intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.flush();
  }
}

/** Sets `key` as the newest entry of `map`, dropping the oldest beyond KEY_CACHE_MAX_ENTRIES. */
function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > KEY_CACHE_MAX_ENTRIES) map.delete(map.keys().next().value as string);
}
