/**
 * The OpenAPI document (GET /v1/openapi.json) is complete and true: it validates as OpenAPI
 * 3.1; every route the app registers is in it (and nothing else); each operation has an id,
 * tags, a summary, a success response with a schema and its error responses as the `Error`
 * component; the upload is multipart/form-data; the inline pipeline `spec` is the spec's own
 * schema; and, for a scenario that calls every operation, each status and content type the
 * app answered with is documented for that operation, each JSON body matches the declared
 * schema with nothing undocumented, and the documented success statuses are exactly the ones
 * sent (201 where the handler sends 201).
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import { Validator } from "@seriousme/openapi-schema-validator";
import type { z } from "zod";
import { PRESIGNED_PATH } from "../../adapters/local/presign.js";
import { MAX_STEPS } from "../../core/spec/schema.js";
import { multipartBody, testApp, type TestApp } from "../support/app.js";
import type { LlmProvider } from "../../assistant/providers/types.js";

type Json = Record<string, unknown>;
interface MediaType { schema?: Json }
interface Response { description?: string; content?: Record<string, MediaType>; headers?: Json }
interface Operation { operationId?: string; summary?: string; tags?: string[]; security?: unknown[]; requestBody?: { content?: Record<string, MediaType> }; responses: Record<string, Response> }
interface Document { openapi: string; servers?: Array<{ url: string; description?: string }>; paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, Json>; securitySchemes: Record<string, Json> }; security: Array<Record<string, string[]>>; tags: Array<{ name: string }> }

/**
 * Routes that are not in the document, each for a reason: signed links and the protocol's
 * refusals, none of which a client builds itself, and the old definition paths.
 */
const NOT_API: Record<string, string> = {
  // Kept for clients written against them; the document has /v1/pipeline-definitions, which
  // cannot overlap a run's paths (docs/api.md#pipeline-definitions).
  "GET /v1/pipelines/definitions": "old path of GET /v1/pipeline-definitions",
  "GET /v1/pipelines/definitions/:pipeline_id": "old path of GET /v1/pipeline-definitions/{pipeline_id}",
  // Embedded mode's presigned URLs: clients never build them, they use the uploadUrl and
  // downloadUrl that upload-url and download return (documented there), signed, not keyed.
  [`GET ${PRESIGNED_PATH}`]: "presigned download URL target",
  [`PUT ${PRESIGNED_PATH}`]: "presigned upload URL target",
  "PUT /v1/storage/part": "presigned part URL target of a multipart upload",
  // Viewer links: the page and what it loads, reached through the viewer_url that
  // POST /v1/visualizations/viewer-url returns (documented there), signed, not keyed.
  // MCP (JSON-RPC over Streamable HTTP, its own protocol; docs/api.md "MCP"), not a JSON API route.
  "GET /mcp": "MCP endpoint: answers 405 (stateless server, no SSE stream)",
  "DELETE /mcp": "MCP endpoint: answers 405 (stateless server, no sessions)",
  "GET /view/assets/:name": "viewer pages' scripts and styles",
  "GET /view/:token": "viewer page",
  "GET /view/:token/meta": "viewer page data",
  "GET /view/:token/data/:name": "viewer page data",
  "GET /view/:token/chrom.sizes": "viewer page data",
  "GET /view/:token/rows": "viewer page data",
  "GET /view/:token/reads": "viewer page data",
};

/** The operations that need no key (tag `system`): probes, metrics and the document itself. */
const PUBLIC_OPERATIONS = ["GET /healthz", "GET /readyz", "GET /metrics", "GET /v1/openapi.json"];

/**
 * Operations whose reply is written by another protocol's library after the route hijacks the
 * reply, so the onSend hook does not see it: their answers are checked in their own tests.
 */
const HIJACKED: Record<string, string> = { "POST /mcp": "the MCP SDK's transport writes the reply (test/assistant/mcp.test.ts)" };

const toPath = (url: string) => url.replace(/:([A-Za-z0-9_]+)/g, "{$1}");

/** Every route the app registers (printRoutes' tree, each one confirmed with hasRoute), HEAD excluded. */
function registeredRoutes(app: FastifyInstance): Array<{ method: string; url: string }> {
  const out: Array<{ method: string; url: string }> = [];
  const prefixes: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split("\n")) {
    const m = /^((?:│ {3}| {4})*)(?:├── |└── )(\S+)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!m) continue;
    const depth = (m[1] ?? "").length / 4;
    const url = (depth > 0 ? (prefixes[depth - 1] ?? "") : "") + m[2];
    prefixes[depth] = url;
    prefixes.length = depth + 1;
    for (const method of m[3]?.split(", ") ?? []) if (method !== "HEAD") out.push({ method, url });
  }
  return out;
}

/** Follows a `#/components/schemas/` reference. */
function deref(doc: Document, schema: Json | undefined): Json | undefined {
  const ref = schema?.$ref;
  return typeof ref === "string" && ref.startsWith("#/components/schemas/") ? doc.components.schemas[ref.slice("#/components/schemas/".length)] : schema;
}

function operations(doc: Document): Array<{ method: string; path: string; op: Operation }> {
  return Object.entries(doc.paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => ({ method: method.toUpperCase(), path, op })));
}

/** What the app answered, per request: route pattern, status, content type, JSON body and the route's declared responses. */
interface Seen { method: string; route: string; status: number; type: string; payload: string | undefined; declared: unknown }
function record(app: FastifyInstance, into: Seen[]): void {
  app.addHook("onSend", async (req, reply, payload) => {
    const route = req.routeOptions.url;
    if (route !== undefined && req.method !== "HEAD") {
      const type = String(reply.getHeader("content-type") ?? "").split(";")[0]?.trim() ?? "";
      into.push({ method: req.method, route, status: reply.statusCode, type, payload: typeof payload === "string" ? payload : undefined, declared: req.routeOptions.schema?.response });
    }
    return payload;
  });
}

// The agent's provider, in process: the wire formats are agent.test.ts's; here only the route's answers matter.
// A prompt "wait" waits until the turn is stopped (POST /v1/query/stop); "upload" calls a tool that needs confirmation.
const provider: LlmProvider = {
  name: "openai", model: "fake",
  send: async (o) => {
    const last = o.messages[o.messages.length - 1];
    if (last?.role === "user" && last.content === "wait") await new Promise((ok) => { o.signal.addEventListener("abort", ok, { once: true }); });
    if (last?.role === "user" && last.content === "upload") {
      return { text: "", tool_calls: [{ id: "c1", name: "service_create_upload_url", arguments: { workspace_id: "ws1", filename: "u.txt" } }], usage: { input_tokens: 1, output_tokens: 1 }, model: "fake", stop: "tool_calls" };
    }
    return { text: "Hello.", tool_calls: [], usage: { input_tokens: 1, output_tokens: 1 }, model: "fake", stop: "end" };
  },
};
const a: TestApp = await testApp({ engine: {}, llm: { provider } });
t.teardown(() => a.close());
const seen: Seen[] = [];
record(a.app, seen);
const res = await a.app.inject({ method: "GET", url: "/v1/openapi.json" });
const doc = res.json() as Document;

t.test("the document is served and is valid OpenAPI 3.1", async (t) => {
  t.equal(res.statusCode, 200);
  t.match(res.headers["content-type"], /application\/json/);
  t.match(doc.openapi, /^3\.1\./);
  const result = await new Validator().validate(doc as unknown as Json);
  t.ok(result.valid, `valid: ${JSON.stringify(result.errors, null, 1)}`);
  // The validator checks the shape; a reference to a missing component is checked here.
  const dangling: string[] = [];
  JSON.stringify(doc, (k, v: unknown) => {
    if (k === "$ref" && typeof v === "string" && !(v.startsWith("#/components/schemas/") && doc.components.schemas[v.slice(21)])) dangling.push(v);
    return v;
  });
  t.same(dangling, [], "every $ref resolves");
});

t.test("Redocly's recommended rules find nothing: servers, no ambiguous paths, a licence", async (t) => {
  t.same(doc.servers, [{ url: "http://localhost", description: doc.servers?.[0]?.description }], "servers: the public URL");
  // The rules flag a localhost server as a placeholder: lint a server's document with the public URL `operon serve` has by default.
  const served = await testApp({ publicUrl: "http://127.0.0.1:8080" });
  t.teardown(() => served.close());
  const dir = mkdtempSync(join(tmpdir(), "operon-openapi-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, "openapi.json"), (await served.app.inject({ method: "GET", url: "/v1/openapi.json" })).body);
  // The repository's redocly.yaml (recommended, one rule off, each reason written there). Telemetry off (a closed network here).
  const lint = spawnSync(join(process.cwd(), "node_modules/.bin/redocly"), ["lint", "--format=json", "--config", join(process.cwd(), "redocly.yaml"), "openapi.json"], {
    cwd: dir, encoding: "utf8", env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" }, timeout: 120_000,
  });
  const report = JSON.parse(lint.stdout || "{}") as { totals?: { errors: number; warnings: number }; problems?: Array<{ ruleId: string; message: string }> };
  t.same(report.problems?.map((p) => `${p.ruleId}: ${p.message}`), [], "no problem");
  t.same(report.totals, { errors: 0, warnings: 0, ignored: 0 });
  t.equal(lint.status, 0, lint.stderr);
});

t.test("every route the app registers is documented, and nothing else", async (t) => {
  const routes = registeredRoutes(a.app);
  for (const r of routes) t.ok(a.app.hasRoute({ method: r.method as "GET", url: r.url }), `${r.method} ${r.url} is a route (parsed right)`);
  t.ok(routes.some((r) => r.method === "POST" && r.url === "/v1/files/upload-url"), "nested routes are found");
  t.ok(routes.some((r) => r.method === "GET" && r.url === "/v1/pipelines/:id/steps/:stepId/logs"), "routes with parameters are found");
  const api = routes.filter((r) => !(`${r.method} ${r.url}` in NOT_API));
  t.ok(api.length >= 20, `${api.length} API routes`);
  const missing = api.filter((r) => !doc.paths[toPath(r.url)]?.[r.method.toLowerCase()]).map((r) => `${r.method} ${r.url}`);
  t.same(missing, [], "every API route is in the document");
  const documented = operations(doc).map((o) => `${o.method} ${o.path}`).sort();
  t.same(documented, api.map((r) => `${r.method} ${toPath(r.url)}`).sort(), "the document has no operation the app does not serve");
  for (const k of Object.keys(NOT_API)) t.ok(routes.some((r) => `${r.method} ${r.url}` === k), `${k} (not documented: ${NOT_API[k]}) is still a route`);
});

t.test("every operation has an id, tags, a summary, a success schema and the Error component for its errors", async (t) => {
  const ids = new Set<string>();
  const tagNames = new Set(doc.tags.map((x) => x.name));
  for (const { method, path, op } of operations(doc)) {
    const name = `${method} ${path}`;
    t.match(op.operationId, /^[a-z][A-Za-z]+$/, `${name}: operationId`);
    t.notOk(ids.has(op.operationId ?? ""), `${name}: operationId is unique`);
    ids.add(op.operationId ?? "");
    t.ok(op.summary && op.summary.length <= 100, `${name}: a short summary`);
    t.ok(op.tags && op.tags.length > 0 && op.tags.every((x) => tagNames.has(x)), `${name}: tags, declared in the document's tags`);
    const isPublic = PUBLIC_OPERATIONS.includes(name);
    if (isPublic) t.same(op.security, [], `${name}: public (no key)`);
    else t.equal(op.security, undefined, `${name}: the document's security (a key) applies`);
    const success = Object.entries(op.responses).filter(([s]) => /^2\d\d$/.test(s));
    t.ok(success.some(([, r]) => Object.values(r.content ?? {}).some((m) => m.schema && Object.keys(m.schema).length > 0)), `${name}: a 2xx response with a schema`);
    const errors = Object.entries(op.responses).filter(([s]) => /^[45]\d\d$/.test(s));
    for (const s of isPublic ? ["500"] : ["401", "429", "500"]) t.ok(op.responses[s], `${name}: documents ${s}`);
    for (const [s, r] of errors) {
      t.same(Object.keys(r.content ?? {}), ["application/json"], `${name} ${s}: JSON`);
      t.equal(r.content?.["application/json"]?.schema?.$ref, "#/components/schemas/Error", `${name} ${s}: the Error component`);
      t.ok(r.description && r.description !== "Default Response", `${name} ${s}: described`);
    }
    for (const s of ["429", "503"]) if (op.responses[s]) t.ok(op.responses[s]?.headers?.["retry-after"], `${name} ${s}: Retry-After`);
  }
  const error = doc.components.schemas.Error as { properties?: Json; required?: string[] } | undefined;
  t.same(Object.keys(error?.properties ?? {}).sort(), ["details", "error", "message", "request_id"], "Error: the envelope's fields");
  t.same([...(error?.required ?? [])].sort(), ["error", "message", "request_id"], "Error: required fields");
});

t.test("the API key: Authorization: Bearer or X-API-Key, as the app accepts", async (t) => {
  t.match(doc.components.securitySchemes.bearer, { type: "http", scheme: "bearer" });
  t.match(doc.components.securitySchemes.apiKey, { type: "apiKey", in: "header", name: "X-API-Key" });
  t.same(doc.security, [{ bearer: [] }, { apiKey: [] }], "either scheme");
  await a.service.createWorkspace("acme", "ws0");
  const key = await a.key("acme", ["files"]);
  t.equal((await a.app.inject({ method: "GET", url: "/v1/workspaces", headers: { authorization: `Bearer ${key}` } })).statusCode, 200, "Bearer works");
  t.equal((await a.app.inject({ method: "GET", url: "/v1/workspaces", headers: { "x-api-key": key } })).statusCode, 200, "X-API-Key works");
});

t.test("the upload is documented as multipart/form-data with its file part and fields", async (t) => {
  const body = doc.paths["/v1/files/upload"]?.post?.requestBody;
  t.same(Object.keys(body?.content ?? {}), ["multipart/form-data"]);
  const schema = body?.content?.["multipart/form-data"]?.schema as { properties?: Record<string, Json>; required?: string[] } | undefined;
  t.match(schema?.properties?.file, { type: "string", format: "binary" }, "the file part");
  t.ok(schema?.required?.includes("file"), "the file part is required");
  for (const f of ["workspace_id", "path", "description"]) t.ok(schema?.properties?.[f], `field ${f}`);
});

t.test("the inline pipeline spec is the spec's own schema", async (t) => {
  for (const path of ["/v1/pipelines", "/v1/pipelines/validate"]) {
    const body = doc.paths[path]?.post?.requestBody?.content?.["application/json"]?.schema as { properties?: Record<string, Json> } | undefined;
    const spec = deref(doc, body?.properties?.spec) as { type?: string; properties?: Record<string, Json>; required?: string[] } | undefined;
    t.ok(spec && Object.keys(spec).length > 0, `${path}: spec is not an empty schema`);
    t.equal(spec?.type, "object", `${path}: spec is an object`);
    t.match(spec?.properties?.steps, { type: "array", maxItems: MAX_STEPS }, `${path}: spec.steps, as core/spec/schema.ts says`);
    t.ok(spec?.required?.includes("steps"), `${path}: steps are required`);
    const step = (spec?.properties?.steps as { items?: { properties?: Json } } | undefined)?.items;
    for (const f of ["stepId", "toolName", "parameters", "dependsOn"]) t.ok(step?.properties?.[f], `${path}: a step's ${f}`);
  }
});

t.test("what the app answers is what the document says", async (t) => {
  await a.service.createWorkspace("acme", "ws1");
  const all = { authorization: `Bearer ${await a.key("acme", ["files", "tools", "conversations", "query"])}` };
  const convOnly = { authorization: `Bearer ${await a.key("acme", ["conversations"])}` };
  const call = (method: "GET" | "POST" | "DELETE", url: string, payload?: object, headers: Record<string, string> = all) =>
    a.app.inject({ method, url, headers, ...(payload ? { payload } : {}) });
  const expect = async <R extends { statusCode: number; body: string }>(p: Promise<R>, status: number, what: string): Promise<R> => {
    const r = await p;
    t.equal(r.statusCode, status, `${what}: ${status} (${r.body.slice(0, 200)})`);
    return r;
  };

  // Workspaces and files.
  await expect(call("GET", "/v1/workspaces"), 200, "list workspaces");
  await expect(call("GET", "/v1/workspaces", undefined, {}), 401, "no key");
  await expect(call("GET", "/v1/files?workspace_id=ws1", undefined, convOnly), 403, "wrong scope");
  const upload = multipartBody([["workspace_id", "ws1"], ["path", "data"], ["description", "d"]], { name: "file", filename: "ok.txt", content: "hello\n", type: "text/plain" });
  await expect(a.app.inject({ method: "POST", url: "/v1/files/upload", headers: { ...all, ...upload.headers }, payload: upload.payload }), 201, "upload");
  const other = multipartBody([["workspace_id", "ws1"]], { name: "file", filename: "gone.txt", content: "x" });
  await expect(a.app.inject({ method: "POST", url: "/v1/files/upload", headers: { ...all, ...other.headers }, payload: other.payload }), 201, "upload another");
  await expect(call("POST", "/v1/files/upload", { workspace_id: "ws1" }), 415, "upload without multipart");
  await expect(call("GET", "/v1/files?workspace_id=ws1"), 200, "list files");
  await expect(call("GET", "/v1/files"), 400, "list files without workspace_id");
  await expect(call("GET", "/v1/files?workspace_id=nope"), 404, "unknown workspace");
  await expect(call("GET", "/v1/files/download?workspace_id=ws1&key=data/ok.txt"), 200, "download URL");
  await expect(call("DELETE", "/v1/files?workspace_id=ws1&key=gone.txt"), 200, "delete");
  await expect(call("POST", "/v1/files/upload-url", { workspace_id: "ws1", filename: "big.bin", size: 6 * 1024 ** 4 }), 413, "upload-url over 5 TiB");
  const parts = await expect(call("POST", "/v1/files/upload-url", { workspace_id: "ws1", filename: "big.bin", size: 6 * 1024 ** 3 }), 200, "upload-url over 5 GiB: by parts");
  const uploadId = (JSON.parse(parts.body) as { data: { uploadId: string } }).data.uploadId;
  await expect(call("GET", `/v1/files/upload-parts?workspace_id=ws1&upload_id=${uploadId}`), 200, "parts received");
  await expect(call("POST", "/v1/files/upload-parts", { workspace_id: "ws1", upload_id: uploadId, part_numbers: [96] }), 200, "part URLs");
  await expect(call("POST", "/v1/files/upload-confirm", { workspace_id: "ws1", file_key: "big.bin", upload_id: uploadId, parts: [{ part_number: 1, etag: "0".repeat(32) }] }), 409, "confirm of a multipart upload with parts missing");
  await expect(call("POST", "/v1/files/upload-abort", { workspace_id: "ws1", upload_id: uploadId }), 200, "abort");
  await expect(call("GET", "/v1/files/upload-parts?workspace_id=ws1&upload_id=mpu-00000000000000000000000000000000"), 404, "parts of an unknown upload");
  await expect(call("POST", "/v1/files/upload-parts", { workspace_id: "ws1", upload_id: "mpu-00000000000000000000000000000000", part_numbers: [1] }), 404, "part URLs of an unknown upload");
  await expect(call("POST", "/v1/files/upload-abort", { workspace_id: "ws1", upload_id: "nope" }), 400, "abort with a malformed upload id");
  await expect(call("POST", "/v1/files/upload-url", { workspace_id: "ws1", filename: "big.bin", content_type: "application/octet-stream" }), 200, "upload-url");
  await expect(call("POST", "/v1/files/upload-confirm", { workspace_id: "ws1", file_key: "big.bin" }), 409, "confirm before the PUT");
  await expect(call("POST", "/v1/files/upload-confirm", { workspace_id: "ws1", file_key: "data/ok.txt" }), 200, "confirm");

  // Visualizations.
  await a.store.put("orgs/acme/workspaces/ws1/data/t.csv", "a,b\n1,2\n");
  await expect(call("POST", "/v1/visualizations/viewer-url", { workspace_id: "ws1", file_path: "data/t.csv" }), 200, "viewer link");
  await expect(call("POST", "/v1/visualizations/viewer-url", { workspace_id: "ws1", file_path: "data/ok.txt", expires_in: 0 }), 400, "viewer link, bad expires_in");
  await expect(call("POST", "/v1/visualizations/viewer-url", { workspace_id: "ws1", file_path: "data/none.csv" }), 404, "viewer link, no such file");
  await a.store.put("orgs/acme/workspaces/ws1/data/de.csv", "gene_name,log2FoldChange,padj\nA,2.5,0.001\nB,-3,0.0001\nC,0.1,0.8\n");
  const rendered = await expect(call("POST", "/v1/visualizations/render", { type: "volcano_plot", workspace_id: "ws1", file_path: "data/de.csv", output_format: "svg" }), 202, "render");
  await expect(call("POST", "/v1/visualizations/render", { type: "pie", workspace_id: "ws1", file_path: "data/de.csv" }), 400, "render, unknown type");
  await expect(call("POST", "/v1/visualizations/render", { type: "volcano_plot", workspace_id: "ws1", file_path: "data/none.csv" }), 404, "render, no such file");
  const jobId = (rendered.json() as { data: { job_id: string } }).data.job_id;
  for (let end = Date.now() + 60_000; Date.now() < end;) {
    const r = await call("GET", `/v1/visualizations/${jobId}?workspace_id=ws1`);
    if (["completed", "failed"].includes((r.json() as { data: { status: string } }).data.status)) break;
    await new Promise((res) => setTimeout(res, 100));
  }
  await expect(call("GET", `/v1/visualizations/${jobId}?workspace_id=ws1`), 200, "render job");
  await expect(call("GET", "/v1/visualizations/render-01jz0000000000000000000000?workspace_id=ws1"), 404, "unknown render job");
  await expect(call("GET", "/v1/visualizations?workspace_id=ws1"), 200, "render jobs");

  // Conversations.
  const now = new Date().toISOString();
  await a.service.saveConversation({ id: "c1", organization: "acme", workspace_id: "ws1", title: "T", created_at: now, updated_at: now, messages: [{ role: "user", content: "hi", created_at: now }] });
  await expect(call("GET", "/v1/conversations?workspace_id=ws1"), 200, "list conversations");
  await expect(call("GET", "/v1/conversations/c1?workspace_id=ws1"), 200, "get a conversation");
  await expect(call("GET", "/v1/conversations/c2?workspace_id=ws1"), 404, "unknown conversation");

  // The agent.
  const asked = await expect(call("POST", "/v1/query", { prompt: "hello", workspace_id: "ws1" }), 200, "query");
  await expect(call("POST", "/v1/query", { workspace_id: "ws1" }), 400, "query without a prompt");
  const convId = (asked.json() as { data: { conversation_id: string } }).data.conversation_id;
  const streamed = call("POST", "/v1/query/stream", { prompt: "wait", workspace_id: "ws1", conversation_id: convId });
  for (let end = Date.now() + 10_000; Date.now() < end;) {
    if ((await call("POST", "/v1/query/stop", { conversation_id: convId })).statusCode === 200) break;
    await new Promise((res) => setTimeout(res, 20));
  }
  const events = await expect(streamed, 200, "query stream (stopped)");
  t.match(events.headers["content-type"], /^text\/event-stream/);
  await expect(call("GET", `/v1/query/stream?conversation_id=${convId}`), 200, "resume a stream");
  await expect(call("GET", "/v1/query/stream?conversation_id=conv-nope"), 404, "resume an unknown stream");
  await expect(call("POST", "/v1/query/stream", { workspace_id: "ws1" }), 400, "query stream without a prompt");
  const paused = await expect(call("POST", "/v1/query", { prompt: "upload", workspace_id: "ws1", require_confirmation: true }), 200, "query paused for confirmation");
  const pending = (paused.json() as { data: { conversation_id: string; pending_action?: { action_id: string } } }).data;
  t.ok(pending.pending_action, "a pending action");
  const decision = { conversation_id: pending.conversation_id, action_id: pending.pending_action?.action_id ?? "" };
  await expect(call("POST", "/v1/query/confirm", { ...decision, approve: true }), 200, "confirm");
  await expect(call("POST", "/v1/query/confirm", { ...decision, approve: true }), 404, "confirm an ended turn");

  // Tools.
  await expect(call("GET", "/v1/tools"), 200, "list tools");
  await expect(call("POST", "/v1/tools/nope/run", { input: {} }), 404, "unknown tool");
  await expect(call("POST", "/v1/tools/tabix/run", { input: { command: "bgzip", inputFile: "data/ok.txt" }, workspace_id: "ws1" }), 200, "run a tool");

  // Pipelines.
  const spec = { steps: [{ stepId: "zip", toolName: "tabix", parameters: { command: "bgzip", inputFile: "data/ok.txt" } }] };
  await expect(call("POST", "/v1/pipelines/validate", { workspace_id: "ws1", spec }), 200, "validate");
  await expect(call("POST", "/v1/pipelines/validate", { workspace_id: "ws1" }), 400, "validate without a spec");
  await expect(call("POST", "/v1/pipelines", { workspace_id: "ws1", spec: { steps: [{ stepId: "s", toolName: "nosuchtool" }] } }), 422, "an invalid spec");
  const created = await expect(call("POST", "/v1/pipelines", { workspace_id: "ws1", spec }), 201, "start a run");
  const id = (created.json() as { data: { id: string } }).data.id;
  for (let end = Date.now() + 60_000; Date.now() < end;) {
    const r = await call("GET", `/v1/pipelines/${id}?workspace_id=ws1`);
    if (["completed", "failed", "cancelled"].includes((r.json() as { data: { status: string } }).data.status)) break;
    await new Promise((res) => setTimeout(res, 100));
  }
  await expect(call("GET", `/v1/pipelines/${id}?workspace_id=ws1`), 200, "poll");
  await expect(call("GET", "/v1/pipelines/run-nope?workspace_id=ws1"), 404, "unknown run");
  await expect(call("GET", "/v1/pipelines?workspace_id=ws1"), 200, "list runs");
  await expect(call("GET", `/v1/pipelines/${id}/steps/zip/logs?workspace_id=ws1`), 200, "step log");
  await expect(call("POST", `/v1/pipelines/${id}/save-spec`, { workspace_id: "ws1", name: "zipped" }), 201, "save-spec");
  await expect(call("POST", `/v1/pipelines/${id}/save-spec`, { workspace_id: "ws1", name: "zipped" }), 409, "save-spec, name taken");
  await expect(call("DELETE", `/v1/pipelines/${id}?workspace_id=ws1`), 200, "cancel (an ended run)");
  await expect(call("GET", "/v1/pipeline-definitions?workspace_id=ws1"), 200, "definitions");
  const builtin = [...(a.engine?.builtins.keys() ?? [])][0] ?? "";
  await expect(call("GET", `/v1/pipeline-definitions/${builtin}`), 200, "a definition");
  await expect(call("GET", "/v1/pipeline-definitions/nope"), 404, "unknown definition");
  const old = await expect(call("GET", `/v1/pipelines/definitions/${builtin}`), 200, "a definition by its old path");
  t.same(old.json(), (await call("GET", `/v1/pipeline-definitions/${builtin}`)).json(), "the old path answers the same");

  // No key: probes, metrics, the document.
  for (const url of ["/healthz", "/readyz", "/metrics", "/v1/openapi.json"]) await expect(call("GET", url, undefined, {}), 200, `${url} without a key`);

  // MCP (its reply is the SDK's; only the 401 goes through the app).
  await expect(call("POST", "/mcp", { jsonrpc: "2.0", id: 1, method: "tools/list" }, {}), 401, "MCP without a key");

  // Rate limited (another app, limited to one request a minute).
  const limited = await testApp({ rateLimit: 1 });
  t.teardown(() => limited.close());
  record(limited.app, seen);
  const lkey = { authorization: `Bearer ${await limited.key("acme", ["files"])}` };
  await limited.app.inject({ method: "GET", url: "/v1/workspaces", headers: lkey });
  await expect(limited.app.inject({ method: "GET", url: "/v1/workspaces", headers: lkey }), 429, "rate limited");

  const api = seen.filter((s) => !(`${s.method} ${s.route}` in NOT_API));
  const opOf = (s: Seen) => doc.paths[toPath(s.route)]?.[s.method.toLowerCase()];
  t.same(api.filter((s) => !opOf(s)).map((s) => `${s.method} ${s.route}`), [], "every route answered is documented");
  t.same(api.filter((s) => !opOf(s)?.responses[String(s.status)]).map((s) => `${s.method} ${s.route} ${s.status}`), [], "every status answered is documented for its operation");
  t.same(api.filter((s) => !opOf(s)?.responses[String(s.status)]?.content?.[s.type]).map((s) => `${s.method} ${s.route} ${s.status} ${s.type}`), [], "every content type answered is documented for its status");

  // Each JSON body parses with the route's declared zod schema (the document's source) to itself: nothing undocumented.
  const mismatches: string[] = [];
  for (const s of api.filter((x) => x.type === "application/json" && x.payload !== undefined)) {
    const declared = (s.declared as Record<string, { content?: Record<string, { schema?: z.ZodType }> }> | undefined)?.[s.status]?.content?.["application/json"]?.schema;
    const body: unknown = JSON.parse(s.payload ?? "null");
    const parsed = declared?.safeParse(body);
    if (!parsed?.success) mismatches.push(`${s.method} ${s.route} ${s.status}: ${parsed ? JSON.stringify(parsed.error.issues).slice(0, 300) : "no schema declared"}`);
    else if (JSON.stringify(parsed.data) !== JSON.stringify(body)) mismatches.push(`${s.method} ${s.route} ${s.status}: fields the schema does not declare in ${s.payload?.slice(0, 300)}`);
  }
  t.same(mismatches, [], "every JSON body is what its schema documents");

  // Success statuses: each operation answered with a 2xx, and documents exactly the 2xx it sent (201, not 200, where the handler sends 201).
  for (const { method, path, op } of operations(doc)) {
    if (`${method} ${path}` in HIJACKED) continue;
    const sent = [...new Set(api.filter((s) => s.method === method && toPath(s.route) === path && s.status < 300).map((s) => String(s.status)))].sort();
    t.ok(sent.length > 0, `${method} ${path}: called with success in this scenario`);
    t.same(Object.keys(op.responses).filter((s) => /^2\d\d$/.test(s)).sort(), sent, `${method} ${path}: documents the success status it sends (${sent.join(", ")})`);
  }
  t.same(operations(doc).filter((o) => o.op.security?.length === 0).map((o) => `${o.method} ${o.path}`).sort(), [...PUBLIC_OPERATIONS].sort(), "exactly the probes, metrics and the document are public");
  for (const [method, path] of [["post", "/v1/files/upload"], ["post", "/v1/pipelines"], ["post", "/v1/pipelines/{id}/save-spec"]] as const) {
    t.ok(doc.paths[path]?.[method]?.responses["201"], `${method} ${path}: 201`);
    t.notOk(doc.paths[path]?.[method]?.responses["200"], `${method} ${path}: not 200`);
  }
});
