/**
 * Security matrix of the api-server: organization × workspace restriction × scope ×
 * endpoint × target workspace. Every cell's status and error code is compared with a
 * small pure function (`expectedFor`), every error body is checked for the envelope, and
 * successful cells are checked to act on the key's own organization's workspace (and
 * denied cells to leave storage untouched).
 */
import t, { type Test } from "tap";
import { createHash } from "node:crypto";
import type { InjectOptions, LightMyRequestResponse } from "fastify";
import { testApp, multipartBody } from "../support/app.js";
import { SCOPES, type Scope } from "../../services/store.js";

/* ------------------------------------------------------------------ the world */

const ORGS: Record<string, string[]> = { acme: ["w1", "w2"], globex: ["g1"] };
/** Workspace ids named in requests: own, sibling, another org's, nonexistent. */
const TARGETS = ["w1", "w2", "g1", "nope"] as const;
/** A restricted key of each organization is limited to its first workspace. */
const RESTRICTED_TO: Record<string, string[]> = { acme: ["w1"], globex: ["g1"] };

type Restriction = "all" | "restricted";
type Variant = "other" | "needed" | "all";
const RESTRICTIONS: Restriction[] = ["all", "restricted"];
const VARIANTS: Variant[] = ["other", "needed", "all"];

/** The scopes of the key used for a cell: a different scope only, exactly the needed one, or all four. */
function scopesFor(variant: Variant, needed: Scope | "any"): Scope[] {
  if (variant === "other") return ["query"];
  if (variant === "all") return [...SCOPES];
  return [needed === "any" ? "conversations" : needed];
}

const content = (org: string, ws: string) => `file of ${org}/${ws}\n`;
const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const root = (org: string, ws: string) => `orgs/${org}/workspaces/${ws}/`;

/* ------------------------------------------------------------------ expectations */

interface Expected { status: number; error: string | null }

/** The whole security policy in a few lines (spec: Authentication; docs/security.md#api-keys). */
function expectedFor(cell: { org: string; restriction: Restriction; scopes: Scope[]; endpointScope: Scope | "any"; okStatus: number; target: string | null }): Expected {
  if (cell.endpointScope !== "any" && !cell.scopes.includes(cell.endpointScope)) return { status: 403, error: "insufficient_scope" };
  if (cell.target === null) return { status: cell.okStatus, error: null };
  if (cell.restriction === "restricted" && !(RESTRICTED_TO[cell.org] ?? []).includes(cell.target)) return { status: 403, error: "workspace_access_denied" };
  if (!(ORGS[cell.org] ?? []).includes(cell.target)) return { status: 404, error: "not_found" };
  return { status: cell.okStatus, error: null };
}

/* ------------------------------------------------------------------ endpoints */

const h = await testApp();
t.teardown(() => h.close());

const exists = async (key: string) => (await h.store.head(key)) !== undefined;
/** Every storage key a cell could conceivably have written to for a workspace-relative key. */
const everywhere = (rel: string) => Object.keys(ORGS).flatMap((org) => TARGETS.map((ws) => ({ org, ws, key: root(org, ws) + rel })));
const path = (url: string) => { const u = new URL(url); return u.pathname + u.search; };

interface Ctx { t: Test; org: string; target: string; n: number; allowed: boolean; label: string }
interface Endpoint {
  name: string;
  scope: Scope | "any";
  okStatus: number;
  targeted: boolean;
  request(target: string, n: number): InjectOptions;
  before?(ctx: Ctx): Promise<void>;
  /** Called for every cell of a targeted endpoint: checks the body of a success, or that a denial changed nothing. */
  after?(ctx: Ctx, res: LightMyRequestResponse): Promise<void>;
}

const q = (o: Record<string, string>) => new URLSearchParams(o).toString();

const ENDPOINTS: Endpoint[] = [
  {
    name: "GET /v1/workspaces", scope: "any", okStatus: 200, targeted: false,
    request: () => ({ method: "GET", url: "/v1/workspaces" }),
  },
  {
    name: "GET /v1/files", scope: "files", okStatus: 200, targeted: true,
    request: (ws) => ({ method: "GET", url: `/v1/files?${q({ workspace_id: ws, limit: "1000" })}` }),
    async after(c, res) {
      if (!c.allowed) return;
      const files = (res.json() as { data: Array<{ key: string; sha256: string | null }> }).data;
      const x = files.find((f) => f.key === "data/x.txt");
      c.t.equal(x?.sha256, sha(content(c.org, c.target)), `${c.label}: lists the file of ${c.org}/${c.target}`);
    },
  },
  {
    name: "GET /v1/files/download", scope: "files", okStatus: 200, targeted: true,
    request: (ws) => ({ method: "GET", url: `/v1/files/download?${q({ workspace_id: ws, key: "data/x.txt" })}` }),
    async after(c, res) {
      if (!c.allowed) return;
      const { downloadUrl } = (res.json() as { data: { downloadUrl: string } }).data;
      const got = await h.app.inject({ method: "GET", url: path(downloadUrl) });
      c.t.equal(got.statusCode, 200, `${c.label}: presigned GET works`);
      c.t.equal(got.body, content(c.org, c.target), `${c.label}: downloads the file of ${c.org}/${c.target}`);
    },
  },
  {
    // A real file named victim.txt exists in every real workspace before each cell; only an
    // allowed cell may delete it, and only in the key's own organization's target workspace.
    name: "DELETE /v1/files", scope: "files", okStatus: 200, targeted: true,
    request: (ws) => ({ method: "DELETE", url: `/v1/files?${q({ workspace_id: ws, key: "data/victim.txt" })}` }),
    async before() {
      for (const [org, wss] of Object.entries(ORGS)) for (const ws of wss) await h.store.put(root(org, ws) + "data/victim.txt", "victim");
    },
    async after(c) {
      for (const [org, wss] of Object.entries(ORGS)) for (const ws of wss) {
        const gone = c.allowed && org === c.org && ws === c.target;
        c.t.equal(await exists(root(org, ws) + "data/victim.txt"), !gone, `${c.label}: victim.txt in ${org}/${ws} ${gone ? "deleted" : "untouched"}`);
      }
    },
  },
  {
    name: "POST /v1/files/upload", scope: "files", okStatus: 201, targeted: true,
    request: (ws, n) => {
      const body = multipartBody([["workspace_id", ws], ["path", "up"]], { name: "file", filename: `cell-${n}.txt`, content: `cell ${n}`, type: "text/plain" });
      return { method: "POST", url: "/v1/files/upload", payload: body.payload, headers: body.headers };
    },
    async after(c, res) {
      if (c.allowed) c.t.equal((res.json() as { data: { key: string } }).data.key, `up/cell-${c.n}.txt`, `${c.label}: upload answers its key`);
      for (const w of everywhere(`up/cell-${c.n}.txt`)) {
        const here = c.allowed && w.org === c.org && w.ws === c.target;
        c.t.equal(await exists(w.key), here, `${c.label}: upload ${here ? "stored" : "absent"} at ${w.key}`);
      }
    },
  },
  {
    name: "POST /v1/files/upload-url", scope: "files", okStatus: 200, targeted: true,
    request: (ws, n) => ({ method: "POST", url: "/v1/files/upload-url", payload: { filename: `url-${n}.txt`, workspace_id: ws, path: "up" } }),
    async after(c, res) {
      if (c.allowed) {
        // The presigned URL must write into the key's own organization's workspace.
        const { uploadUrl, fileKey } = (res.json() as { data: { uploadUrl: string; fileKey: string } }).data;
        c.t.equal(fileKey, `up/url-${c.n}.txt`, `${c.label}: fileKey`);
        const put = await h.app.inject({ method: "PUT", url: path(uploadUrl), payload: "large", headers: { "content-type": "application/octet-stream" } });
        c.t.equal(put.statusCode, 200, `${c.label}: presigned PUT works`);
      }
      for (const w of everywhere(`up/url-${c.n}.txt`)) {
        const here = c.allowed && w.org === c.org && w.ws === c.target;
        c.t.equal(await exists(w.key), here, `${c.label}: presigned object ${here ? "stored" : "absent"} at ${w.key}`);
      }
    },
  },
  {
    name: "POST /v1/files/upload-confirm", scope: "files", okStatus: 200, targeted: true,
    request: (ws) => ({ method: "POST", url: "/v1/files/upload-confirm", payload: { file_key: "data/x.txt", workspace_id: ws } }),
    async after(c, res) {
      if (!c.allowed) return;
      const d = (res.json() as { data: { key: string; sha256: string | null } }).data;
      c.t.same({ key: d.key, sha256: d.sha256 }, { key: "data/x.txt", sha256: sha(content(c.org, c.target)) }, `${c.label}: confirms the file of ${c.org}/${c.target}`);
    },
  },
  {
    name: "GET /v1/conversations", scope: "conversations", okStatus: 200, targeted: true,
    request: (ws) => ({ method: "GET", url: `/v1/conversations?${q({ workspace_id: ws })}` }),
    async after(c, res) {
      if (!c.allowed) return;
      const d = (res.json() as { data: Array<{ id: string; title: string }> }).data;
      c.t.same(d.map((x) => [x.id, x.title]), [["conv1", `${c.org}/${c.target}`]], `${c.label}: lists the conversation of ${c.org}/${c.target} only`);
    },
  },
  {
    name: "GET /v1/conversations/:id", scope: "conversations", okStatus: 200, targeted: true,
    request: (ws) => ({ method: "GET", url: `/v1/conversations/conv1?${q({ workspace_id: ws })}` }),
    async after(c, res) {
      if (!c.allowed) return;
      const d = (res.json() as { data: { id: string; title: string; messages: unknown[] } }).data;
      c.t.same({ id: d.id, title: d.title, n: d.messages.length }, { id: "conv1", title: `${c.org}/${c.target}`, n: 2 }, `${c.label}: the conversation of ${c.org}/${c.target}`);
    },
  },
];

/* ------------------------------------------------------------------ setup */

const created = new Date("2026-01-01T00:00:00Z").toISOString();
for (const [org, wss] of Object.entries(ORGS)) {
  for (const ws of wss) {
    await h.service.createWorkspace(org, ws);
    await h.store.put(root(org, ws) + "data/x.txt", content(org, ws), { contentType: "text/plain" });
    await h.service.saveConversation({
      id: "conv1", organization: org, workspace_id: ws, title: `${org}/${ws}`, created_at: created, updated_at: created,
      messages: [{ role: "user", content: `hello ${org}/${ws}` }, { role: "assistant", content: "hi" }],
    });
  }
}

/** One key per organization × restriction × distinct scope set, made once. */
const keys = new Map<string, string>();
async function keyFor(org: string, restriction: Restriction, scopes: Scope[]): Promise<string> {
  const id = `${org}|${restriction}|${[...scopes].sort().join(",")}`;
  let k = keys.get(id);
  if (!k) {
    k = await h.key(org, scopes, restriction === "restricted" ? RESTRICTED_TO[org] ?? [] : null);
    keys.set(id, k);
  }
  return k;
}

/* ------------------------------------------------------------------ checks shared by every cell */

function checkEnvelope(t: Test, res: LightMyRequestResponse, label: string, keyOrg: string): void {
  const rid = res.headers["x-request-id"];
  t.type(rid, "string", `${label}: x-request-id header`);
  if (res.statusCode < 400) return;
  const body = res.json() as Record<string, unknown>;
  t.same(Object.keys(body).filter((k) => k !== "details").sort(), ["error", "message", "request_id"], `${label}: error envelope keys`);
  t.type(body.error, "string", `${label}: error is a string`);
  t.type(body.message, "string", `${label}: message is a string`);
  t.equal(body.request_id, rid, `${label}: request_id equals x-request-id`);
  // Another organization's name never shows up in what a key is told.
  for (const other of Object.keys(ORGS).filter((o) => o !== keyOrg)) {
    t.notMatch(res.body, other, `${label}: body does not mention ${other}`);
  }
}

/* ------------------------------------------------------------------ the matrix */

let cells = 0;
let n = 0;
const tally: Record<string, number> = {};

for (const org of Object.keys(ORGS)) {
  for (const restriction of RESTRICTIONS) {
    for (const variant of VARIANTS) {
      await t.test(`${org} key, ${restriction === "all" ? "all workspaces" : `restricted to [${(RESTRICTED_TO[org] ?? []).join(",")}]`}, ${variant} scope(s)`, async (tt) => {
        for (const ep of ENDPOINTS) {
          const scopes = scopesFor(variant, ep.scope);
          const key = await keyFor(org, restriction, scopes);
          for (const target of ep.targeted ? TARGETS : [null]) {
            n++;
            cells++;
            const label = `${org}/${restriction}/[${scopes.join(",")}] ${ep.name} ${target === null ? "" : `workspace_id=${target}`}`.trim();
            const exp = expectedFor({ org, restriction, scopes, endpointScope: ep.scope, okStatus: ep.okStatus, target });
            const ctx: Ctx = { t: tt, org, target: target ?? "", n, allowed: exp.error === null, label };
            if (target !== null) await ep.before?.(ctx);
            const req = ep.request(target ?? "", n);
            const res = await h.app.inject({ ...req, headers: { ...(req.headers ?? {}), authorization: `Bearer ${key}` } });
            const error = res.statusCode >= 400 ? (res.json() as { error?: string }).error ?? "(none)" : null;
            tt.same({ status: res.statusCode, error }, exp, label);
            tally[error ?? "ok"] = (tally[error ?? "ok"] ?? 0) + 1;
            checkEnvelope(tt, res, label, org);
            if (target !== null) await ep.after?.(ctx, res);
            else if (res.statusCode === 200) {
              // GET /v1/workspaces: exactly the key's organization's workspaces, filtered to its allowed set.
              const ids = (res.json() as { data: Array<{ id: string }> }).data.map((w) => w.id);
              const want = (ORGS[org] ?? []).filter((w) => restriction === "all" || (RESTRICTED_TO[org] ?? []).includes(w));
              tt.same(ids, want, `${label}: lists ${JSON.stringify(want)}`);
            }
          }
        }
      });
    }
  }
}

// 2 orgs × 2 restrictions × 3 scope sets × (8 workspace-taking endpoints × 4 targets + GET /v1/workspaces)
t.equal(cells, 2 * 2 * 3 * (8 * 4 + 1), "matrix size");
t.equal(cells, 396, "matrix size is 396 cells");
t.same(tally, { ok: 92, insufficient_scope: 128, workspace_access_denied: 96, not_found: 80 }, "outcome distribution");
t.equal(keys.size, 16, "16 distinct keys (2 orgs × 2 restrictions × 4 scope sets)");
