/**
 * Attacks from an ordinary key of organization "beta" (tools + files scopes, and one limited
 * to its workspace) on every place a user value becomes a storage key, a path or an argv
 * element: file parameters, `inputFiles` lists, `args`, outputs, spec inputs, `spec_file`,
 * save-spec names, the tools route and the files API, each with a table of hostile values.
 * Canaries are planted in organization acme's workspace, in the data directory (a signing
 * secret and a plain file), in the store's `_system/` and in the host's /tmp. Every attack
 * must answer 4xx naming its field, and no byte of a canary may appear in any response,
 * run folder, step log or output; no file may appear outside the data directory.
 */
import t, { type Test } from "tap";
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { testApp, type TestApp } from "../support/app.js";

const CANARY = `cnry${Math.random().toString(36).slice(2, 10)}`;
const canaries = { acme: `${CANARY}-acme`, secret: `${CANARY}-secret`, planted: `${CANARY}-planted`, system: `${CANARY}-system`, tmp: `${CANARY}-tmp` };

const a: TestApp = await testApp({ engine: {} });
t.teardown(() => a.close());
await a.service.createWorkspace("acme", "ws-a");
await a.service.createWorkspace("beta", "ws-b");
await a.store.put("orgs/acme/workspaces/ws-a/private/secret.txt", `${canaries.acme}\n`);
writeFileSync(join(a.dir, "signing-secret"), canaries.secret);
writeFileSync(join(a.dir, "planted.txt"), `${canaries.planted}\n`);
await a.store.put("_system/canary.json", JSON.stringify({ c: canaries.system }));
const hostTmp = join(tmpdir(), `operon-attack-canary-${process.pid}.txt`);
writeFileSync(hostTmp, `${canaries.tmp}\n`);
t.teardown(() => rmSync(hostTmp, { force: true }));
await a.store.put("orgs/beta/workspaces/ws-b/data/ok.txt", "chr1\t1\t2\n");

const keys = { all: await a.key("beta", ["tools", "files"]), limited: await a.key("beta", ["tools", "files"], ["ws-b"]) };
const headers = (k: string) => ({ authorization: `Bearer ${k}` });

/** Everything any response said, to search for canaries at the end. */
const said: string[] = [];
async function call(key: string, method: "GET" | "POST" | "DELETE", url: string, payload?: unknown) {
  const r = await a.app.inject({ method, url, headers: headers(key), ...(payload !== undefined ? { payload: payload as Record<string, unknown> } : {}) });
  said.push(r.body);
  return r;
}

/** Paths outside the data directory that the attacks aim to create. */
const targets = [join(tmpdir(), "x.sam"), join(tmpdir(), "y"), join(tmpdir(), "operon-attack-out"), join(process.cwd(), "x"), join(a.dir, "..", "x"), "/x", "/etc/operon-x"];
// A path that is a directory already (another program's) is not ours to delete: watch it for
// new entries instead of for existence.
const existingDirs = new Map<string, string[]>();
for (const p of targets) {
  if (existsSync(p) && statSync(p).isDirectory()) existingDirs.set(p, readdirSync(p).sort());
  else rmSync(p, { force: true });
}
/** What the host's root, the work tree and the data directory's parent hold before the attacks. */
const snapshot = () => [join("/"), process.cwd(), join(a.dir, "..")].flatMap((d) => readdirSync(d).map((e) => join(d, e)));
const before = new Set(snapshot());

const HOSTILE_FILES: string[] = [
  "../../../acme/workspaces/ws-a/private/secret.txt",
  "ok/../../../../acme/workspaces/ws-a/private/secret.txt",
  "../../../../orgs/acme/workspaces/ws-a/private/secret.txt",
  "../../../../../signing-secret",
  "../../../../../planted.txt",
  "../../../../../objects/_system/canary.json",
  "_system/canary.json",
  "orgs/acme/workspaces/ws-a/private/secret.txt",
  "/etc/passwd",
  hostTmp,
  "%2e%2e/%2e%2e/%2e%2e/acme/workspaces/ws-a/private/secret.txt",
  "..%2f..%2f..%2facme",
  "..\\..\\..\\acme\\workspaces\\ws-a\\private\\secret.txt",
  "data/ok.txt\u0000.png",
  "data/\u0007bell",
  "data/a\nb",
  "\u2025/\u2025/\u2025/acme/workspaces/ws-a/private/secret.txt",
  "\uff0e\uff0e/\uff0e\uff0e/acme",
  "data\uff0fok.txt/..\uff0f..\uff0f..",
  "file:///etc/passwd",
  "http://127.0.0.1:1/x",
  "a//b",
  "./../x",
  "x".repeat(300),
  "a/".repeat(600) + "x",
  // Another workspace's full storage key: `orgs/…` has one meaning, a storage key, so it is
  // refused in every field (it was once a legal folder name for tool parameters and specs).
  "orgs/acme/workspaces/ws-a/private/secret.txt",
];

const HOSTILE_ARGS: string[][] = [
  ["/etc/passwd"], [hostTmp], ["-U", join(tmpdir(), "x.sam")], ["../../x"], ["-o/tmp/y"], ["--output=/tmp/y"],
  ["http://127.0.0.1:1/x"], ["file:///etc/passwd"], ["@/etc/passwd"], ["@args.txt"], ["~/x"], ["-o", "~"], ["a\u0000b"], ["-T", "..\\x"],
  ["--reference=../../../../../planted.txt"], ["x\u2025/y"],
];

const HOSTILE_OUTPUTS = ["../../x", "/abs", "/tmp/operon-attack-out", "sub/../../../x", "run.json", "logs", "logs/s.log", "-rf", "a\tb", "x\u0000", ".hidden", "./x", "a//b", "x".repeat(300)];

const spec = (parameters: Record<string, unknown>, tool = "tabix", extra: Record<string, unknown> = {}) => ({ steps: [{ stepId: "s", toolName: tool, parameters }], ...extra });

/** A 4xx that names the field (its JSON pointer in details, or its name in the message). */
function refused(t: Test, r: { statusCode: number; body: string }, field: RegExp, what: string) {
  t.ok(r.statusCode >= 400 && r.statusCode < 500, `${what}: 4xx (got ${r.statusCode})`);
  t.match(r.body, field, `${what}: names the field`);
}

t.test("file parameters: tools route, inline spec, spec file, validate, spec inputs", async (t) => {
  for (const key of [keys.all, keys.limited]) {
    for (const v of HOSTILE_FILES) {
      const w = JSON.stringify(v).slice(0, 60);
      const tool = await call(key, "POST", "/v1/tools/tabix/run", { workspace_id: "ws-b", input: { command: "bgzip", inputFile: v } });
      refused(t, tool, /inputFile/, `tools route ${w}`);
      const list = await call(key, "POST", "/v1/tools/samtools/run", { workspace_id: "ws-b", input: { command: "merge", inputFiles: ["data/ok.txt", v] } });
      refused(t, list, /inputFiles/, `tools route inputFiles ${w}`);
      const run = await call(key, "POST", "/v1/pipelines", { workspace_id: "ws-b", spec: spec({ command: "bgzip", inputFile: v }) });
      refused(t, run, /\/steps\/0\/parameters\/inputFile/, `inline spec ${w}`);
      const val = await call(key, "POST", "/v1/pipelines/validate", { workspace_id: "ws-b", spec: spec({ command: "bgzip", inputFile: v }) });
      t.equal(val.json().data?.valid, false, `validate ${w}: invalid`);
      t.match(val.body, /\/steps\/0\/parameters\/inputFile/, `validate ${w}: names the field`);
      const input = await call(key, "POST", "/v1/pipelines", { workspace_id: "ws-b", spec: spec({ command: "bgzip", inputFile: "${f}" }, "tabix", { inputs: [{ name: "f", type: "file" }] }), input: { f: v } });
      refused(t, input, /\/input\/f|input "f"/, `spec input ${w}`);
      const sf = await call(key, "POST", "/v1/pipelines", { workspace_id: "ws-b", spec_file: v });
      refused(t, sf, /spec_file/, `spec_file ${w}`);
      for (const [method, url] of [["GET", `/v1/files/download?workspace_id=ws-b&key=${encodeURIComponent(v)}`], ["DELETE", `/v1/files?workspace_id=ws-b&key=${encodeURIComponent(v)}`]] as const) {
        const r = await call(key, method, url);
        refused(t, r, /key/, `${method} files ${w}`);
      }
    }
  }
  // A spec file in the workspace whose step reads out of it: refused at submission, nothing started.
  await a.store.put("orgs/beta/workspaces/ws-b/specs/evil.pipeline.json", JSON.stringify(spec({ command: "bgzip", inputFile: HOSTILE_FILES[0] })));
  refused(t, await call(keys.all, "POST", "/v1/pipelines", { workspace_id: "ws-b", spec_file: "specs/evil.pipeline.json" }), /\/steps\/0\/parameters\/inputFile/, "spec from a file");
});

t.test("args: no host paths, no URLs, no response files", async (t) => {
  for (const args of HOSTILE_ARGS) {
    const w = JSON.stringify(args);
    refused(t, await call(keys.all, "POST", "/v1/tools/tabix/run", { workspace_id: "ws-b", input: { command: "bgzip", inputFile: "data/ok.txt", args } }), /args/, `tools route args ${w}`);
    refused(t, await call(keys.all, "POST", "/v1/tools/samtools/run", { workspace_id: "ws-b", input: { command: "view", inputFile: "data/ok.txt", args } }), /args/, `samtools view args ${w}`);
    refused(t, await call(keys.all, "POST", "/v1/pipelines", { workspace_id: "ws-b", spec: spec({ command: "bgzip", inputFile: "data/ok.txt", args }) }), /\/steps\/0\/parameters\/args\/\d/, `pipeline args ${w}`);
    const val = await call(keys.all, "POST", "/v1/pipelines/validate", { workspace_id: "ws-b", spec: spec({ command: "bgzip", inputFile: "data/ok.txt", args }) });
    t.equal(val.json().data?.valid, false, `validate args ${w}`);
    // The same value arriving through an input reference is refused at submission.
    const viaInput = await call(keys.all, "POST", "/v1/pipelines", { workspace_id: "ws-b", spec: spec({ command: "bgzip", inputFile: "data/ok.txt", args: args.map((_, i) => `\${a${i}}`) }, "tabix", { inputs: args.map((_, i) => ({ name: `a${i}`, type: "string" })) }), input: Object.fromEntries(args.map((x, i) => [`a${i}`, x])) });
    refused(t, viaInput, /\/steps\/0\/parameters\/args\/\d/, `args via input ${w}`);
  }
});

t.test("outputs: inside the run folder, never a reserved name, checked at validate and submission", async (t) => {
  for (const v of HOSTILE_OUTPUTS) {
    const w = JSON.stringify(v).slice(0, 40);
    refused(t, await call(keys.all, "POST", "/v1/tools/samtools/run", { workspace_id: "ws-b", input: { command: "sort", inputFile: "data/ok.txt", outputFile: v } }), /outputFile/, `tools route outputFile ${w}`);
    refused(t, await call(keys.all, "POST", "/v1/pipelines", { workspace_id: "ws-b", spec: spec({ command: "bgzip", inputFile: "data/ok.txt", outputFile: v }) }), /\/steps\/0\/parameters\/outputFile/, `pipeline outputFile ${w}`);
    const val = await call(keys.all, "POST", "/v1/pipelines/validate", { workspace_id: "ws-b", spec: spec({ command: "bgzip", inputFile: "data/ok.txt", outputFile: v }) });
    t.equal(val.json().data?.valid, false, `validate outputFile ${w}`);
  }
  // sampleName values that would make a bad output name once interpolated: 422 at submission.
  const withSample = spec({ command: "bgzip", inputFile: "data/ok.txt", outputFile: "${sampleName}" }, "tabix", { inputs: [{ name: "sampleName", type: "string" }] });
  for (const v of ["-rf", "a/../../b", "../x", "run.json", "logs", "/abs", "x\ty"]) {
    refused(t, await call(keys.all, "POST", "/v1/pipelines", { workspace_id: "ws-b", spec: withSample, input: { sampleName: v } }), /\/steps\/0\/parameters\/outputFile/, `sampleName ${JSON.stringify(v)}`);
  }
  // A default that is bad is found by validate already.
  const badDefault = spec({ command: "bgzip", inputFile: "data/ok.txt", outputFile: "${sampleName}.gz" }, "tabix", { inputs: [{ name: "sampleName", type: "string", default: "-rf" }] });
  const val = await call(keys.all, "POST", "/v1/pipelines/validate", { workspace_id: "ws-b", spec: badDefault });
  t.equal(val.json().data?.valid, false, "validate sees the default's output name");
  t.match(val.body, /\/steps\/0\/parameters\/outputFile/);
});

t.test("save-spec names never leave pipelines/specs/", async (t) => {
  const run = await call(keys.all, "POST", "/v1/pipelines", { workspace_id: "ws-b", spec: spec({ command: "bgzip", inputFile: "data/ok.txt" }) });
  t.equal(run.statusCode, 201, run.body);
  const id = run.json().data.id as string;
  const end = Date.now() + 60_000;
  let status = "";
  while (Date.now() < end && !["completed", "failed"].includes(status)) {
    status = (await call(keys.all, "GET", `/v1/pipelines/${id}?workspace_id=ws-b`)).json().data.status as string;
    await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(status, "completed", "a legitimate step runs in the sandbox (the refusals above are not a broken engine)");
  for (const name of ["../../../acme/x", "/etc/passwd", "_system/keys", "..\\..\\x", "a\u0000b", "\u2025/\u2025/x", "x".repeat(100)]) {
    const r = await call(keys.all, "POST", `/v1/pipelines/${id}/save-spec`, { workspace_id: "ws-b", name, overwrite: true });
    if (r.statusCode === 201) t.match(r.json().data.path as string, /^pipelines\/specs\/[a-z0-9-]+\.pipeline\.json$/, `save-spec ${JSON.stringify(name).slice(0, 30)}: a plain file in pipelines/specs/`);
    else t.ok(r.statusCode >= 400 && r.statusCode < 500, `save-spec ${JSON.stringify(name).slice(0, 30)}: 4xx`);
  }
});

t.test("a missing tool fails the request or step, never the process", async (t) => {
  const r = await call(keys.all, "POST", "/v1/tools/gatk/run", { workspace_id: "ws-b", input: { command: "IndexFeatureFile", inputFile: "data/ok.txt", outputFile: "ok.bed" } });
  t.equal(r.statusCode, 200, r.body);
  t.equal(r.json().data.status, "failed");
  t.match(r.json().data.error, /gatk is not installed/);
  t.equal((await call(keys.all, "GET", "/v1/workspaces")).statusCode, 200, "the server still answers");
});

t.test("no canary anywhere, nothing written outside the data directory", async (t) => {
  const leaks = (text: string) => Object.values(canaries).filter((c) => text.includes(c));
  t.strictSame(said.flatMap(leaks), [], `no response (of ${said.length}) carries a canary`);
  t.notOk(said.some((b) => b.includes(a.dir)), "no response carries the data directory's path");
  // Every file of beta's organization (run folders, outputs, logs), of the executor's work
  // tree, and every tool-run folder: no canary byte.
  const walk = (d: string): string[] => (existsSync(d) ? readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(d, e.name)) : [join(d, e.name)])) : []);
  const files = [...walk(join(a.dir, "objects", "orgs", "beta")), ...walk(join(a.dir, "work"))];
  t.ok(files.length > 0, "there are run files to check");
  const leaked = files.filter((f) => statSync(f).isFile() && leaks(readFileSync(f, "latin1")).length > 0);
  t.strictSame(leaked, [], "no run file, output or log carries a canary");
  t.strictSame(walk(join(a.dir, "objects", "orgs", "acme")).map((f) => f.slice(a.dir.length)), ["/objects/orgs/acme/workspaces/ws-a/private/secret.txt"], "acme's workspace is as it was");
  for (const p of targets) {
    const had = existingDirs.get(p);
    if (had) t.same(readdirSync(p).sort(), had, `nothing was written into the existing ${p}`);
    else t.notOk(existsSync(p), `${p} was not created`);
  }
  // Other test files make their own operon-* temp dirs meanwhile; nothing else may appear.
  t.strictSame(snapshot().filter((p) => !before.has(p) && !/\/operon-[^/]*$/.test(p)), [], "no new file in /, the work tree or the temp dir");
});
