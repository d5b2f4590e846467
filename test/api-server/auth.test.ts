/**
 * Authentication (spec: Authentication; docs/security.md#api-keys): both key headers, every kind of
 * rejected key, revocation within the cache TTL, hashed storage, batched last_used_at,
 * auth metrics, per-key rate limits, the public endpoints, the OpenAPI document and
 * request ids.
 */
import t, { type Test } from "tap";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LightMyRequestResponse } from "fastify";
import { createLocalObjectStore } from "../../adapters/local/object-store.js";
import { ServiceStore } from "../../services/store.js";
import type { ObjectStore } from "../../core/ports.js";
import { SECRET, testApp, type TestApp } from "../support/app.js";

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

async function open(tt: Test, options: Parameters<typeof testApp>[0] = {}): Promise<TestApp> {
  const h = await testApp(options);
  tt.teardown(() => h.close());
  await h.service.createWorkspace("acme", "w1");
  return h;
}

/** The error envelope, with `x-request-id` equal to `request_id`. */
function expectError(tt: Test, res: LightMyRequestResponse, status: number, code: string, message?: RegExp, label = `${status} ${code}`): void {
  tt.equal(res.statusCode, status, `${label}: status`);
  const body = res.json() as Record<string, unknown>;
  tt.equal(body.error, code, `${label}: error code`);
  tt.same(Object.keys(body).filter((k) => k !== "details").sort(), ["error", "message", "request_id"], `${label}: envelope`);
  tt.type(body.message, "string", `${label}: message`);
  tt.equal(res.headers["x-request-id"], body.request_id, `${label}: x-request-id equals request_id`);
  if (message) tt.match(body.message, message, `${label}: message says why`);
}

/** Files on disk under `dir`, recursively. */
function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)]));
}

const get = (h: TestApp, headers: Record<string, string> = {}, url = "/v1/workspaces") => h.app.inject({ method: "GET", url, headers });
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

t.test("a key works in either header", async (tt) => {
  const h = await open(tt);
  const key = await h.key("acme", ["files"]);
  for (const headers of [bearer(key), { "x-api-key": key }, { authorization: `bearer ${key}` }]) {
    const res = await get(h, headers);
    tt.equal(res.statusCode, 200, `${Object.keys(headers)[0]}: 200`);
    tt.same((res.json() as { data: Array<{ id: string }> }).data.map((w) => w.id), ["w1"]);
  }
  // And on a workspace endpoint, not only on /v1/workspaces.
  const files = await get(h, { "x-api-key": key }, "/v1/files?workspace_id=w1");
  tt.equal(files.statusCode, 200, "X-API-Key on GET /v1/files");
});

t.test("missing, malformed, unknown and revoked keys are 401 unauthorized, saying which", async (tt) => {
  const h = await open(tt);
  const good = await h.key("acme", ["files"]);
  const body32 = good.slice("sk_live_".length);
  tt.equal(body32.length, 32, "a generated key is sk_live_ + 32 characters");
  tt.match(good, /^sk_live_[A-Za-z0-9]{32}$/);

  expectError(tt, await get(h), 401, "unauthorized", /required/, "no header");
  expectError(tt, await get(h, { authorization: "" }), 401, "unauthorized", /required/, "empty Authorization");

  const malformed: Array<[string, Record<string, string>]> = [
    ["Bearer without a key", { authorization: "Bearer" }],
    ["Bearer and spaces", { authorization: "Bearer   " }],
    ["another scheme", { authorization: `Basic ${good}` }],
    ["bare key in Authorization", { authorization: good }],
    ["wrong prefix", bearer(`sk_test_${body32}`)],
    ["no prefix", bearer(body32)],
    ["31 characters", bearer(good.slice(0, -1))],
    ["33 characters", bearer(`${good}a`)],
    ["non-alphanumeric", bearer(`${good.slice(0, -1)}!`)],
    ["non-alphanumeric (underscore)", bearer(`${good.slice(0, -1)}_`)],
    ["two tokens", { authorization: `Bearer ${good} ${good}` }],
    ["X-API-Key 31 characters", { "x-api-key": good.slice(0, -1) }],
    ["X-API-Key wrong prefix", { "x-api-key": `sk_test_${body32}` }],
    ["X-API-Key non-alphanumeric", { "x-api-key": `${good.slice(0, -1)}-` }],
  ];
  for (const [label, headers] of malformed) expectError(tt, await get(h, headers), 401, "unauthorized", /malformed/, label);

  const unknown = `sk_live_${"A".repeat(32)}`;
  expectError(tt, await get(h, bearer(unknown)), 401, "unauthorized", /not valid/, "unknown (Bearer)");
  expectError(tt, await get(h, { "x-api-key": unknown }), 401, "unauthorized", /not valid/, "unknown (X-API-Key)");

  const { record, key: revoked } = await h.service.createKey({ organization: "acme", scopes: ["files"], workspaces: null });
  await h.service.revokeKey(record.id);
  expectError(tt, await get(h, bearer(revoked)), 401, "unauthorized", /revoked/, "revoked (Bearer)");
  expectError(tt, await get(h, { "x-api-key": revoked }), 401, "unauthorized", /revoked/, "revoked (X-API-Key)");

  // 401 comes before anything else: a workspace endpoint with a bad key is 401, not 403/404.
  expectError(tt, await get(h, bearer(unknown), "/v1/files?workspace_id=nope"), 401, "unauthorized", /not valid/, "unknown key on /v1/files");
  expectError(tt, await get(h, {}, "/v1/conversations/x?workspace_id=w1"), 401, "unauthorized", /required/, "no key on /v1/conversations/:id");
  // The good key still works after all that.
  tt.equal((await get(h, bearer(good))).statusCode, 200, "good key");
});

t.test("a revoked key stops working within the cache TTL (1 s)", async (tt) => {
  const h = await open(tt, { ttlSeconds: 1 });
  const { record, key } = await h.service.createKey({ organization: "acme", scopes: ["files"], workspaces: null });
  tt.equal((await get(h, bearer(key))).statusCode, 200, "works before revocation");
  const revoked = await h.service.revokeKey(record.id);
  tt.type(revoked?.revoked_at, "string", "revoked_at recorded");
  tt.equal((await get(h, bearer(key))).statusCode, 200, "still works right after revocation (cached)");
  h.clock.advance(500);
  tt.equal((await get(h, bearer(key))).statusCode, 200, "still cached after 0.5 s");
  h.clock.advance(600);
  expectError(tt, await get(h, bearer(key)), 401, "unauthorized", /revoked/, "after 1.1 s");
  expectError(tt, await get(h, { "x-api-key": key }), 401, "unauthorized", /revoked/, "after 1.1 s (X-API-Key)");
});

t.test("keys are stored hashed", async (tt) => {
  const h = await open(tt);
  const { record, key } = await h.service.createKey({ organization: "acme", scopes: ["files", "query"], workspaces: ["w1"], name: "laptop" });
  // Use it, so everything the server writes on use (last_used_at) is on disk too.
  tt.equal((await get(h, bearer(key))).statusCode, 200);
  tt.equal((await get(h, { "x-api-key": key }, "/v1/files?workspace_id=w1")).statusCode, 200);
  await h.app.operon.auth.flush();
  tt.type((await h.service.getKey(record.id))?.last_used_at, "string", "last use written");

  const files = walk(h.dir);
  tt.ok(files.length > 0, "the store wrote files");
  const hash = sha256(key);
  tt.equal(record.hash, hash, "the record's hash is sha256 of the whole key");
  const secret = key.slice("sk_live_".length);
  const withHash: string[] = [];
  for (const f of files) {
    const text = readFileSync(f, "latin1");
    tt.notOk(text.includes(key), `${f.slice(h.dir.length)} does not contain the key`);
    tt.notOk(text.includes(secret), `${f.slice(h.dir.length)} does not contain the key's secret part`);
    tt.notOk(f.includes(secret), `${f.slice(h.dir.length)}: the key is not in the file name`);
    if (text.includes(hash)) withHash.push(f);
  }
  tt.ok(withHash.length > 0, `the sha256 is stored (${withHash.map((f) => f.slice(h.dir.length)).join(", ")})`);
  tt.notOk(JSON.stringify(await h.service.getKey(record.id)).includes(secret), "the key record does not hold the key");
});

t.test("last_used_at is batched, not written per request", async (tt) => {
  const h = await open(tt);
  const { record, key } = await h.service.createKey({ organization: "acme", scopes: ["files"], workspaces: null });
  for (let i = 0; i < 20; i++) tt.equal((await get(h, bearer(key), i % 2 ? "/v1/workspaces" : "/v1/files?workspace_id=w1")).statusCode, 200, `request ${i + 1}`);
  tt.equal((await h.service.getKey(record.id))?.last_used_at, null, "not written after 20 requests");
  const before = Date.now();
  await h.app.operon.auth.flush();
  const after = await h.service.getKey(record.id);
  tt.type(after?.last_used_at, "string", "written by flush");
  tt.ok(Math.abs(Date.parse(after?.last_used_at ?? "") - before) < 60_000, "a recent ISO time");
  tt.equal(after?.revoked_at, null, "flush changes nothing else");
  tt.same(after?.scopes, ["files"]);
});

t.test("a revocation made while last_used_at is being flushed is not lost", async (tt) => {
  // The CLI revokes keys by writing the key record directly (docs/security.md#api-keys), from another
  // process, while the server's periodic flush read-modify-writes the same record. Here the
  // revocation lands between the flush's read and its write.
  const dir = mkdtempSync(join(tmpdir(), "operon-auth-race-"));
  tt.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const inner = createLocalObjectStore({ root: dir, publicUrl: "http://localhost", signingSecret: SECRET });
  let onRead: { key: string; run: () => Promise<void> } | undefined;
  const store: ObjectStore = {
    ...inner,
    get: async (key, range) => {
      const got = await inner.get(key, range);
      const hook = onRead;
      if (!hook || hook.key !== key) return got;
      onRead = undefined;
      const chunks: Uint8Array[] = [];
      for await (const c of got.body) chunks.push(c);
      await hook.run();
      return { ...got, body: (async function* () { yield* chunks; })() };
    },
  };
  const h = await open(tt, { store, ttlSeconds: 1 });
  const cli = new ServiceStore(inner);
  const { record, key } = await h.service.createKey({ organization: "acme", scopes: ["files"], workspaces: null });
  tt.equal((await get(h, bearer(key))).statusCode, 200, "key used once (a last use is pending)");
  onRead = { key: `_system/keys/${record.id}.json`, run: async () => { await cli.revokeKey(record.id); } };
  await h.app.operon.auth.flush();
  tt.equal(onRead, undefined, "the revocation ran during the flush");
  const after = await h.service.getKey(record.id);
  tt.type(after?.revoked_at, "string", "revoked_at survives the flush");
  h.clock.advance(1100);
  const res = await get(h, bearer(key));
  tt.equal(res.statusCode, 401, "the revoked key is refused once the cache expires");
});

t.test("metrics: auth failures by reason and request durations by route", async (tt) => {
  const h = await open(tt);
  const key = await h.key("acme", ["files"]);
  expectError(tt, await get(h, bearer(`sk_live_${"Z".repeat(32)}`)), 401, "unauthorized", /not valid/, "unknown key");
  expectError(tt, await get(h, {}), 401, "unauthorized", /required/, "no key");
  expectError(tt, await get(h, bearer("nope")), 401, "unauthorized", /malformed/, "malformed key");
  tt.equal((await get(h, bearer(key), "/v1/files?workspace_id=w1")).statusCode, 200);
  const res = await h.app.inject({ method: "GET", url: "/metrics" });
  tt.equal(res.statusCode, 200);
  tt.match(res.headers["content-type"], /text\/plain/);
  tt.match(res.body, /^operon_auth_failures_total\{reason="unknown"\} 1$/m, "unknown counted");
  tt.match(res.body, /^operon_auth_failures_total\{reason="missing"\} 1$/m, "missing counted");
  tt.match(res.body, /^operon_auth_failures_total\{reason="malformed"\} 1$/m, "malformed counted");
  tt.match(res.body, /^operon_http_request_duration_seconds_count\{[^}]*route="\/v1\/files"[^}]*\} 1$/m, "duration histogram with a route label (parameterless route)");
  tt.match(res.body, /^operon_http_request_duration_seconds_bucket\{[^}]*route="\/v1\/workspaces"[^}]*status="401"[^}]*\}/m, "rejected requests are timed too");
  // The route label is the route pattern, never the raw URL (bounded cardinality).
  tt.equal((await get(h, bearer(await h.key("acme", ["conversations"])), "/v1/conversations/abc123?workspace_id=w1")).statusCode, 404);
  const res2 = await h.app.inject({ method: "GET", url: "/metrics" });
  tt.match(res2.body, /route="\/v1\/conversations\/:id"/, "pattern label");
  tt.notMatch(res2.body, /abc123|workspace_id=/, "no raw URL in labels");
});

t.test("per-key rate limiting", async (tt) => {
  const h = await open(tt, { rateLimit: 3 });
  const a = await h.key("acme", ["files"]);
  const b = await h.key("acme", ["files"]);
  for (let i = 1; i <= 3; i++) tt.equal((await get(h, bearer(a))).statusCode, 200, `key A request ${i}`);
  const limited = await get(h, bearer(a));
  expectError(tt, limited, 429, "rate_limited", /rate limit/, "key A request 4");
  tt.ok(limited.headers["retry-after"], "retry-after header");
  tt.ok(Number(limited.headers["retry-after"]) > 0, "retry-after is a positive number of seconds");
  tt.equal((await get(h, { "x-api-key": a }, "/v1/files?workspace_id=w1")).statusCode, 429, "key A is limited whichever header and endpoint");
  tt.equal((await get(h, bearer(b))).statusCode, 200, "key B still gets 200");
  for (const url of ["/healthz", "/readyz", "/metrics", "/v1/openapi.json"]) {
    for (let i = 0; i < 4; i++) tt.equal((await h.app.inject({ method: "GET", url })).statusCode, 200, `${url} is not rate limited (${i + 1})`);
  }
});

t.test("public endpoints need no key", async (tt) => {
  const h = await open(tt);
  for (const url of ["/healthz", "/readyz", "/metrics", "/v1/openapi.json"]) {
    const res = await h.app.inject({ method: "GET", url });
    tt.equal(res.statusCode, 200, `${url}: 200 without a key`);
    tt.type(res.headers["x-request-id"], "string", `${url}: x-request-id`);
  }
  tt.same((await h.app.inject({ method: "GET", url: "/healthz" })).json(), { status: "ok" });
  tt.same((await h.app.inject({ method: "GET", url: "/readyz" })).json(), { status: "ready" });
  // ...while every /v1 API endpoint does.
  for (const [method, url] of [["GET", "/v1/workspaces"], ["GET", "/v1/files?workspace_id=w1"], ["GET", "/v1/conversations?workspace_id=w1"], ["POST", "/v1/files/upload-url"], ["DELETE", "/v1/files?workspace_id=w1&key=x"]] as const) {
    expectError(tt, await h.app.inject({ method, url }), 401, "unauthorized", /required/, `${method} ${url}`);
  }
});

t.test("every documented endpoint needs a key, but those documented as public (security: [])", async (tt) => {
  const h = await open(tt);
  const doc = (await h.app.inject({ method: "GET", url: "/v1/openapi.json" })).json() as { paths: Record<string, Record<string, { security?: unknown[] }>> };
  let n = 0;
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      if (op.security?.length === 0) {
        tt.ok(["/healthz", "/readyz", "/metrics", "/v1/openapi.json"].includes(path), `${path} is public and is one of the probes, metrics or the document`);
        continue;
      }
      const url = path.replace(/\{[^}]+\}/g, "x") + "?workspace_id=w1";
      const m = method.toUpperCase() as "GET" | "POST" | "DELETE" | "PUT" | "PATCH";
      expectError(tt, await h.app.inject({ method: m, url }), 401, "unauthorized", /required/, `${m} ${path} without a key`);
      n++;
    }
  }
  tt.ok(n >= 9, `${n} operations checked`);
});

t.test("the OpenAPI document", async (tt) => {
  const h = await open(tt);
  const res = await h.app.inject({ method: "GET", url: "/v1/openapi.json" });
  tt.equal(res.statusCode, 200);
  tt.match(res.headers["content-type"], /application\/json/);
  const doc = res.json() as { openapi: string; paths: Record<string, Record<string, { parameters?: Array<{ name: string; in: string; required?: boolean }> }>> };
  tt.match(doc.openapi, /^3\./, "OpenAPI 3");
  for (const p of ["/v1/files", "/v1/files/upload", "/v1/workspaces", "/v1/conversations"]) tt.ok(doc.paths[p], `path ${p}`);
  tt.ok(doc.paths["/v1/files"]?.get, "GET /v1/files");
  tt.ok(doc.paths["/v1/files/upload"]?.post, "POST /v1/files/upload");
  const wsParam = doc.paths["/v1/files"]?.get?.parameters?.find((p) => p.name === "workspace_id");
  tt.match(wsParam, { in: "query", required: true }, "workspace_id is a required query parameter of GET /v1/files");
  tt.notOk(Object.keys(doc.paths).some((p) => p.startsWith("/v1/storage") || p.startsWith("/view/")), "signed-link routes hidden");
  for (const p of ["/healthz", "/readyz", "/metrics"]) tt.ok(doc.paths[p]?.get, `the public ${p} is documented`);
});

t.test("request ids", async (tt) => {
  const h = await open(tt);
  const key = await h.key("acme", ["files"]);
  const echoed = await get(h, { ...bearer(key), "x-request-id": "abc-123" });
  tt.equal(echoed.statusCode, 200);
  tt.equal(echoed.headers["x-request-id"], "abc-123", "a well-formed id is echoed");
  const echoedErr = await get(h, { "x-request-id": "abc-123" });
  expectError(tt, echoedErr, 401, "unauthorized", /required/, "error with incoming id");
  tt.equal((echoedErr.json() as { request_id: string }).request_id, "abc-123", "and used in error bodies");

  for (const bad of ["a b\nc", "a b", "x".repeat(65), "<script>", "abc;rm"]) {
    const res = await get(h, { ...bearer(key), "x-request-id": bad });
    const rid = res.headers["x-request-id"];
    tt.type(rid, "string", `${JSON.stringify(bad)}: an id is still given`);
    tt.not(rid, bad, `${JSON.stringify(bad)}: replaced`);
    tt.match(rid, /^[A-Za-z0-9._:-]{1,64}$/, `${JSON.stringify(bad)}: replaced by a safe id`);
  }
  const a = await get(h, bearer(key));
  const b = await get(h, bearer(key));
  tt.not(a.headers["x-request-id"], b.headers["x-request-id"], "generated ids differ");
});
