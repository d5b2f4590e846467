/**
 * The assistant tools over MCP with the SDK's own client: Streamable HTTP at /mcp on a
 * listening api-server, and `operon mcp` (stdio) proxying to it. Tools are listed with their
 * annotations and JSON Schemas; bwa-align runs end to end on real data (wgsim reads) through
 * service_run_pipeline + service_get_run, is saved (conflict, then overwrite) and listed;
 * scopes, workspace restrictions and the organization boundary hold as over HTTP; bad
 * arguments are tool errors naming the field; two clients call at once.
 */
import t from "tap";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { testApp, type TestApp } from "../support/app.js";
import { simulateReads } from "../support/reads.js";

const data = mkdtempSync(join(tmpdir(), "operon-mcp-"));
t.teardown(() => rmSync(data, { recursive: true, force: true }));
simulateReads(data, { seed: 21 });

const a: TestApp = await testApp({ engine: {} });
t.teardown(() => a.close());
await a.service.createWorkspace("acme", "ws1");
await a.service.createWorkspace("acme", "ws2");
await a.service.createWorkspace("other", "ws1");
for (const f of ["ref.fa", "r1.fastq", "r2.fastq"]) await a.store.put(`orgs/acme/workspaces/ws1/data/${f}`, readFileSync(join(data, f)));
await a.app.listen({ port: 0, host: "127.0.0.1" });
const addr = a.app.server.address();
const base = `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`;

const allKey = await a.key("acme", ["tools", "files"]);
const filesOnly = await a.key("acme", ["files"]);
const ws2Only = await a.key("acme", ["tools", "files"], ["ws2"]);
const otherOrg = await a.key("other", ["tools", "files"]);

async function connect(key: string, header: "bearer" | "x-api-key" = "bearer"): Promise<Client> {
  const client = new Client({ name: "operon-test", version: "1.0.0" });
  const headers: Record<string, string> = header === "bearer" ? { authorization: `Bearer ${key}` } : { "x-api-key": key };
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers } }));
  t.teardown(() => client.close());
  return client;
}

const text = (r: CallToolResult) => r.content.map((c) => (c.type === "text" ? c.text : "")).join("");
const call = async (c: Client, name: string, args: Record<string, unknown>) => (await c.callTool({ name, arguments: args })) as CallToolResult;

const main = await connect(allKey);

t.test("tools/list: annotations on every tool, JSON Schema inputs, scopes filter the list", async (t) => {
  const { tools } = await main.listTools();
  // Few enough for a model's context: the spec's flows (files in three upload steps, pipelines, runs, charts) and no more.
  t.ok(tools.length >= 10 && tools.length <= 17, `${tools.length} tools`);
  for (const tool of tools) {
    t.equal(tool.inputSchema.type, "object", `${tool.name}: inputSchema is a JSON Schema object`);
    t.ok(tool.description && tool.description.length > 40, `${tool.name}: a description`);
    for (const hint of ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] as const) t.type(tool.annotations?.[hint], "boolean", `${tool.name}: ${hint}`);
  }
  const names = tools.map((x) => x.name);
  for (const n of ["service_list_pipelines", "service_get_pipeline", "service_run_pipeline", "service_save_pipeline", "service_list_files", "service_get_run"]) t.ok(names.includes(n), n);
  const run = tools.find((x) => x.name === "service_run_pipeline");
  t.ok((run?.inputSchema.properties as Record<string, unknown>).pipeline_id, "run's schema names pipeline_id");

  const limited = await connect(filesOnly, "x-api-key");
  const lnames = (await limited.listTools()).tools.map((x) => x.name);
  t.ok(lnames.includes("service_list_files") && lnames.includes("service_list_workspaces"), "a files key sees the file tools (X-API-Key works)");
  t.notOk(lnames.some((n) => /pipeline|_run|tool/.test(n)), `no pipeline or tool tools for a files-only key: ${lnames.join(", ")}`);
  const denied = await call(limited, "service_run_pipeline", { workspace_id: "ws1", pipeline_id: "bwa-align" });
  t.ok(denied.isError, "calling a pipeline tool without the tools scope is an error");
  t.match(text(denied), /^not_found: name: no tool "service_run_pipeline" for this key/, "the tool is unknown to this key");
});

t.test("an upload in three steps over MCP: the URL, the client's PUT, service_confirm_upload", async (t) => {
  const made = await call(main, "service_create_upload_url", { workspace_id: "ws1", filename: "notes.txt", path: "up/", size: 6 });
  t.notOk(made.isError, text(made));
  const { uploadUrl, fileKey } = made.structuredContent as { uploadUrl: string; fileKey: string };
  t.equal(fileKey, "up/notes.txt");
  // The test server's public URL is http://localhost; it listens on `base`.
  const target = base + uploadUrl.slice(new URL(uploadUrl).origin.length);
  const put = await fetch(target, { method: "PUT", body: "hello\n" });
  t.equal(put.status, 200);
  const done = await call(main, "service_confirm_upload", { workspace_id: "ws1", file_key: fileKey, size: 6 });
  t.notOk(done.isError, text(done));
  t.match(done.structuredContent, { key: "up/notes.txt", size: 6, sha256: "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03" }, "the file, with its checksum");
  const wrong = await call(main, "service_confirm_upload", { workspace_id: "ws1", file_key: fileKey, size: 7 });
  t.ok(wrong.isError, "a different size is refused");
  t.match(text(wrong), /size/);
  const again = await fetch(target, { method: "PUT", body: "HELLO\n" });
  t.equal(again.status, 409, "the URL set its file once");
  const read = await call(main, "service_read_file", { workspace_id: "ws1", key: fileKey });
  t.equal((read.structuredContent as { text: string }).text, "hello\n", "the file is what was confirmed");
});

t.test("bwa-align end to end: run, wait, save (conflict, overwrite), listed", async (t) => {
  const started = await call(main, "service_run_pipeline", { workspace_id: "ws1", pipeline_id: "bwa-align", input: { reads1: "data/r1.fastq", reads2: "data/r2.fastq", reference: "data/ref.fa", sampleName: "s1" } });
  t.notOk(started.isError, text(started));
  const runId = (started.structuredContent as { run: { id: string; status: string } }).run.id;
  t.match(runId, /^run-/);
  t.equal((started.structuredContent as { run: { status: string } }).run.status, "queued", "returns at once, queued");
  let status: { run: { status: string; output_paths: string[]; steps: unknown[] }; finished: boolean } | undefined;
  const begun = Date.now();
  for (let i = 0; i < 6 && !status?.finished; i++) {
    const before = Date.now();
    const r = await call(main, "service_get_run", { run_id: runId, wait_seconds: 20 });
    t.notOk(r.isError, text(r));
    status = r.structuredContent as typeof status;
    t.ok(Date.now() - before < 25_000, "the wait is bounded");
  }
  t.equal(status?.run.status, "completed", `completed in ${Date.now() - begun} ms`);
  t.ok(status?.run.output_paths.some((p) => p.endsWith(".bam")), "a BAM among the outputs");

  const logs = await call(main, "service_get_step_logs", { run_id: runId, step_id: "align", tail: 5 });
  t.notOk(logs.isError, text(logs));
  const flagstat = status?.run.output_paths.find((p) => p.endsWith("flagstat.txt") || p.includes("flagstat"));
  if (flagstat) {
    const head = await call(main, "service_read_file", { workspace_id: "ws1", key: flagstat });
    t.match((head.structuredContent as { text: string }).text, /mapped/, "read_file shows the flagstat report");
  }

  const saved = await call(main, "service_save_pipeline", { run_id: runId, name: "my align" });
  t.notOk(saved.isError, text(saved));
  t.equal((saved.structuredContent as { path: string }).path, "pipelines/specs/my-align.pipeline.json");
  const again = await call(main, "service_save_pipeline", { run_id: runId, name: "my align" });
  t.ok(again.isError, "a taken name is an error");
  t.match(text(again), /^conflict: .*overwrite/);
  const over = await call(main, "service_save_pipeline", { run_id: runId, name: "my align", overwrite: true });
  t.notOk(over.isError, "overwrite replaces it");

  // workspace_id, which agents pass to every tool, is taken by every run tool when it names the run's workspace…
  const inWs = await call(main, "service_save_pipeline", { run_id: runId, workspace_id: "ws1", name: "my align 2" });
  t.notOk(inWs.isError, `save with the run's workspace_id: ${text(inWs)}`);
  t.equal((inWs.structuredContent as { path: string }).path, "pipelines/specs/my-align-2.pipeline.json");
  for (const [tool, args] of [["service_get_run", {}], ["service_get_step_logs", { step_id: "align" }], ["service_cancel_run", {}]] as const) {
    const ok = await call(main, tool, { run_id: runId, workspace_id: "ws1", ...args });
    t.notOk(ok.isError, `${tool} with the run's workspace_id: ${text(ok)}`);
    // …and refused, naming the field, when it names another workspace (one the key may use).
    const wrong = await call(main, tool, { run_id: runId, workspace_id: "ws2", ...args });
    t.ok(wrong.isError, `${tool} with another workspace_id is an error`);
    t.match(text(wrong), /^not_found: workspace_id: run .* not found in workspace "ws2"/, `${tool}: the error names workspace_id`);
  }
  const wrongSave = await call(main, "service_save_pipeline", { run_id: runId, workspace_id: "ws2", name: "elsewhere" });
  t.match(text(wrongSave), /^not_found: workspace_id:/, "save with another workspace_id names the field");
  const toolsWithRunId = (await main.listTools()).tools.filter((x) => (x.inputSchema.properties as Record<string, unknown> | undefined)?.run_id);
  t.ok(toolsWithRunId.length >= 4, `${toolsWithRunId.length} run tools`);
  for (const x of toolsWithRunId) t.ok((x.inputSchema.properties as Record<string, unknown>).workspace_id, `${x.name} declares workspace_id`);

  const list = await call(main, "service_list_pipelines", { workspace_id: "ws1" });
  const entries = (list.structuredContent as { pipelines: Array<{ origin: string; spec_file?: string; id: string | null }> }).pipelines;
  t.ok(entries.some((p) => p.origin === "workspace" && p.spec_file === "pipelines/specs/my-align.pipeline.json"), "the saved spec is listed");
  t.ok(entries.some((p) => p.id === "bwa-align"), "with the built-ins");
  const got = await call(main, "service_get_pipeline", { workspace_id: "ws1", spec_file: "pipelines/specs/my-align.pipeline.json" });
  t.notOk(got.isError, text(got));

  // The same run, seen from another organization, does not exist.
  const other = await connect(otherOrg);
  const foreign = await call(other, "service_get_run", { run_id: runId });
  t.ok(foreign.isError);
  t.match(text(foreign), /^not_found: run/);
  const foreignSave = await call(other, "service_save_pipeline", { run_id: runId });
  t.match(text(foreignSave), /^not_found/);
});

t.test("a workspace-limited key gets workspace_access_denied, as over HTTP", async (t) => {
  const limited = await connect(ws2Only);
  const r = await call(limited, "service_list_files", { workspace_id: "ws1" });
  t.ok(r.isError);
  t.match(text(r), /^workspace_access_denied:/);
  const http = await fetch(`${base}/v1/files?workspace_id=ws1`, { headers: { authorization: `Bearer ${ws2Only}` } });
  t.equal(http.status, 403);
  t.equal(((await http.json()) as { error: string }).error, "workspace_access_denied");
  const run = await call(limited, "service_run_pipeline", { workspace_id: "ws1", pipeline_id: "bwa-align" });
  t.match(text(run), /^workspace_access_denied:/);
  const ws = await call(limited, "service_list_workspaces", {});
  t.same((ws.structuredContent as { workspaces: Array<{ id: string }> }).workspaces.map((w) => w.id), ["ws2"]);
});

t.test("malformed arguments are tool errors naming the field, never a crash", async (t) => {
  const missing = await call(main, "service_list_files", {});
  t.ok(missing.isError);
  t.match(text(missing), /workspace_id/);
  const wrongType = await call(main, "service_get_run", { run_id: 42 });
  t.match(text(wrongType), /run_id/);
  const tooLong = await call(main, "service_get_run", { run_id: "run-x", wait_seconds: 500 });
  t.match(text(tooLong), /wait_seconds/);
  const both = await call(main, "service_run_pipeline", { workspace_id: "ws1", pipeline_id: "bwa-align", spec_file: "x.json" });
  t.match(text(both), /pipeline_id: give exactly one of pipeline_id or spec_file/);
  const unknownField = await call(main, "service_list_workspaces", { nope: 1 });
  t.match(text(unknownField), /nope/);
  const escape = await call(main, "service_read_file", { workspace_id: "ws1", key: "../../other/ws1/x" });
  t.match(text(escape), /^invalid_request: key:/);
  const still = await call(main, "service_list_workspaces", {});
  t.notOk(still.isError, "the server still answers");
});

t.test("two clients call concurrently", async (t) => {
  const second = await connect(allKey);
  const results = await Promise.all(Array.from({ length: 8 }, (_, i) => call(i % 2 ? main : second, "service_list_files", { workspace_id: "ws1", prefix: "data/" })));
  for (const r of results) t.same((r.structuredContent as { files: Array<{ key: string }> }).files.map((f) => f.key), ["data/r1.fastq", "data/r2.fastq", "data/ref.fa"]);
});

t.test("HTTP: 401 with WWW-Authenticate without a key; GET and DELETE are 405", async (t) => {
  const none = await fetch(`${base}/mcp`, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }) });
  t.equal(none.status, 401);
  t.match(none.headers.get("www-authenticate") ?? "", /^Bearer/);
  const other = await fetch(`${base}/v1/workspaces`);
  t.equal(other.headers.get("www-authenticate"), null, "only /mcp adds the header");
  for (const method of ["GET", "DELETE"]) t.equal((await fetch(`${base}/mcp`, { method, headers: { authorization: `Bearer ${allKey}` } })).status, 405, method);
});

t.test("operon mcp: the same tools over stdio, proxied to the server", async (t) => {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ["--import", "tsx", "cli/main.ts", "mcp"],
    env: { PATH: process.env.PATH ?? "", OPERON_URL: base, OPERON_API_KEY: allKey },
    stderr: "pipe",
  });
  const client = new Client({ name: "operon-stdio-test", version: "1.0.0" });
  await client.connect(transport);
  t.teardown(() => client.close());
  const remote = (await main.listTools()).tools.map((x) => x.name).sort();
  t.same((await client.listTools()).tools.map((x) => x.name).sort(), remote, "exactly the server's tools");
  const r = (await client.callTool({ name: "service_list_workspaces", arguments: {} })) as CallToolResult;
  t.same((r.structuredContent as { workspaces: Array<{ id: string }> }).workspaces.map((w) => w.id), ["ws1", "ws2"]);
  const denied = (await client.callTool({ name: "service_list_files", arguments: {} })) as CallToolResult;
  t.ok(denied.isError);
  t.match(text(denied), /workspace_id/);
});
