/**
 * The embedded engine end to end through the HTTP API, with the real Debian tools on data
 * the test makes (a random reference and wgsim reads): a built-in pipeline completes, its
 * run.json validates and its checksums match the stored files, and save-spec round-trips.
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RunManifestSchema } from "../../core/manifest.js";
import { testApp, type TestApp, endedRun, readStored as readStoredOf } from "../support/app.js";
import { sleep } from "../support/wait.js";

const data = mkdtempSync(join(tmpdir(), "operon-e2e-"));
t.teardown(() => rmSync(data, { recursive: true, force: true }));
function makeData(seed: number, prefix: string) {
  let s = seed;
  const rand = () => ((s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const seq = Array.from({ length: 20_000 }, () => "ACGT"[Math.floor(rand() * 4)]).join("");
  writeFileSync(join(data, `${prefix}ref.fa`), `>chr1\n${seq.match(/.{1,60}/g)?.join("\n")}\n`);
  const r = spawnSync("wgsim", ["-N", "1000", "-1", "100", "-2", "100", "-S", String(seed), `${prefix}ref.fa`, `${prefix}r1.fastq`, `${prefix}r2.fastq`], { cwd: data });
  if (r.status !== 0) throw new Error(`wgsim: ${r.stderr}`);
}
makeData(11, "a_");
makeData(12, "b_");

const a: TestApp = await testApp({ engine: {} });
t.teardown(() => a.close());
await a.service.createWorkspace("acme", "ws1");
const key = await a.key("acme", ["tools", "files"]);
const h = { authorization: `Bearer ${key}` };
for (const f of ["a_ref.fa", "a_r1.fastq", "a_r2.fastq", "b_ref.fa", "b_r1.fastq", "b_r2.fastq"]) {
  await a.store.put(`orgs/acme/workspaces/ws1/data/${f}`, readFileSync(join(data, f)));
}

type RunView = { status: string; steps: Array<{ step_id: string; status: string; error: string | null }>; output_paths: string[]; output_folder: string; error: string | null };
/** The run once it has ended (the timeout's error shows its steps as last seen). */
/** The run once it has ended. */
const poll = (id: string, timeoutMs = 60_000) => endedRun<RunView>(a, h, id, { timeoutMs });
const readStored = (key: string) => readStoredOf(a.store, key);

t.test("bwa-align runs to completion with provenance", async (t) => {
  const res = await a.app.inject({ method: "POST", url: "/v1/pipelines", headers: h, payload: { workspace_id: "ws1", pipeline_id: "bwa-align", input: { reads1: "data/a_r1.fastq", reads2: "data/a_r2.fastq", reference: "data/a_ref.fa", sampleName: "s1" } } });
  t.equal(res.statusCode, 201, res.body);
  t.equal(res.json().data.status, "queued");
  t.match(res.json().data.id, /^run-[0-9a-z]{26}$/);
  const run = await poll(res.json().data.id);
  t.equal(run.status, "completed", JSON.stringify(run.steps));
  t.ok(run.steps.every((s) => s.status === "completed"));
  const flagstat = run.output_paths.find((p) => p.endsWith(".flagstat.txt"));
  t.ok(flagstat, "flagstat output listed");
  const text = (await readStored(`orgs/acme/workspaces/ws1/${flagstat}`)).toString();
  t.match(text, /2000 \+ 0 in total/, "every simulated read accounted for");

  const manifestRaw = JSON.parse((await readStored(`orgs/acme/workspaces/ws1/${run.output_folder}/run.json`)).toString());
  const manifest = RunManifestSchema.parse(manifestRaw);
  t.equal(manifest.status, "completed");
  t.equal(manifest.stepsCompleted, manifest.stepsTotal);
  t.same(manifest.parameters, { reads1: "data/a_r1.fastq", reads2: "data/a_r2.fastq", reference: "data/a_ref.fa", sampleName: "s1" });
  const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");
  t.equal(manifest.inputChecksums.reference?.checksum, sha(readFileSync(join(data, "a_ref.fa"))), "input checksum");
  for (const s of manifest.steps) {
    t.ok(s.toolVersion, `${s.stepId}: tool version recorded`);
    t.equal(s.imageDigest, null, "no image in embedded mode");
    t.ok(s.executable?.sha256, `${s.stepId}: executable sha256`);
    t.ok((s.argv ?? []).length > 1, `${s.stepId}: argv recorded`);
    for (const o of s.outputFiles) t.equal(sha(await readStored(o.s3Key)), o.checksum, `${o.filename}: checksum matches the stored file`);
  }

  const metrics = await a.app.inject({ method: "GET", url: "/metrics" });
  t.equal(metrics.statusCode, 200);
  const count = (step: string) => Number(new RegExp(`^operon_step_start_latency_seconds_count\\{slot="free",step="${step}"\\} (\\d+)$`, "m").exec(metrics.body)?.[1]);
  t.equal(count("first") + count("dependent"), run.steps.length, "GET /metrics: each step's start latency counted once (operon_step_start_latency_seconds)");
  const builtin = JSON.parse(readFileSync(new URL("../../pipelines/builtin/bwa-align.pipeline.json", import.meta.url), "utf8")) as { steps: Array<{ dependsOn?: string[] }> };
  t.equal(count("first"), builtin.steps.filter((s) => !s.dependsOn?.length).length, "first steps apart from dependent ones");
  t.match(metrics.body, /^operon_http_request_duration_seconds_bucket/m, "beside the api-server's own metrics");

  const log = await a.app.inject({ method: "GET", url: `/v1/pipelines/${res.json().data.id}/steps/align/logs`, headers: h });
  t.equal(log.statusCode, 200);
  t.match(log.body, /bwa|M::/, "the aligner's stderr is in the log");

  const saved = await a.app.inject({ method: "POST", url: `/v1/pipelines/${res.json().data.id}/save-spec`, headers: h, payload: { workspace_id: "ws1", name: "my align" } });
  t.equal(saved.statusCode, 201, saved.body);
  t.equal(saved.json().data.path, "pipelines/specs/my-align.pipeline.json");
  const again = await a.app.inject({ method: "POST", url: `/v1/pipelines/${res.json().data.id}/save-spec`, headers: h, payload: { workspace_id: "ws1", name: "my align" } });
  t.equal(again.statusCode, 409, "the name is taken");
  t.equal((await a.app.inject({ method: "POST", url: `/v1/pipelines/${res.json().data.id}/save-spec`, headers: h, payload: { workspace_id: "ws1", name: "my align", overwrite: true } })).statusCode, 201, "unless overwrite");

  const rerun = await a.app.inject({ method: "POST", url: "/v1/pipelines", headers: h, payload: { workspace_id: "ws1", spec_file: "pipelines/specs/my-align.pipeline.json", input: { reads1: "data/b_r1.fastq", reads2: "data/b_r2.fastq", reference: "data/b_ref.fa", sampleName: "s2" } } });
  t.equal(rerun.statusCode, 201, rerun.body);
  const run2 = await poll(rerun.json().data.id);
  t.equal(run2.status, "completed", JSON.stringify(run2.steps));
  t.ok(run2.output_paths.some((p) => p.endsWith("s2.flagstat.txt")), "the saved spec ran with other inputs");
  t.not(run2.output_folder, run.output_folder, "each run has its own folder");
});

t.test("bad submissions", async (t) => {
  const two = await a.app.inject({ method: "POST", url: "/v1/pipelines", headers: h, payload: { workspace_id: "ws1", pipeline_id: "bwa-align", spec_file: "x.json" } });
  t.equal(two.statusCode, 400, "two sources");
  const none = await a.app.inject({ method: "POST", url: "/v1/pipelines", headers: h, payload: { workspace_id: "ws1" } });
  t.equal(none.statusCode, 400, "no source");
  const invalid = await a.app.inject({ method: "POST", url: "/v1/pipelines", headers: h, payload: { workspace_id: "ws1", spec: { steps: [{ stepId: "a", toolName: "samtool" }] } } });
  t.equal(invalid.statusCode, 422);
  t.equal(invalid.json().error, "validation_failed");
  t.equal(invalid.json().details.errors[0].code, "unknown_tool");
  const missing = await a.app.inject({ method: "POST", url: "/v1/pipelines", headers: h, payload: { workspace_id: "ws1", pipeline_id: "bwa-align", input: { reads1: "data/nope.fastq", reads2: "data/a_r2.fastq", reference: "data/a_ref.fa" } } });
  t.equal(missing.statusCode, 422, "a missing input fails before anything starts");
  t.match(missing.json().message, /reads1.*data\/nope\.fastq not found/);
  const runs = await a.app.inject({ method: "GET", url: "/v1/pipelines?workspace_id=ws1", headers: h });
  t.equal(runs.json().data.length, 2, "nothing was created for the refused submissions");
});

t.test("tools: catalogue listing and a synchronous run under the organization's limit", async (t) => {
  const list = await a.app.inject({ method: "GET", url: "/v1/tools", headers: h });
  t.equal(list.statusCode, 200);
  const samtools = list.json().data.find((x: { id: string }) => x.id === "samtools");
  t.equal(samtools.available, true, "samtools is installed here");
  t.same(samtools.commands.map((c: { name: string }) => c.name), ["view", "sort", "index", "merge", "stats", "flagstat", "idxstats", "depth", "coverage", "tabix"]);
  t.ok(samtools.input_schema.properties.inputFile, "input schema exported");

  const runs = await a.app.inject({ method: "GET", url: "/v1/pipelines?workspace_id=ws1&status=completed", headers: h });
  const bam = (runs.json().data[0].output_paths as string[]).find((p) => p.endsWith(".bam"));
  t.ok(bam, "a BAM from an earlier run");
  const ok = await a.app.inject({ method: "POST", url: "/v1/tools/samtools/run", headers: h, payload: { workspace_id: "ws1", input: { command: "flagstat", inputFile: bam } } });
  t.equal(ok.statusCode, 200, ok.body);
  t.equal(ok.json().data.exit_code, 0);
  t.match(ok.json().data.stdout, /2000 \+ 0 in total/);
  t.equal(ok.json().data.output_files.length, 1);

  const bad = await a.app.inject({ method: "POST", url: "/v1/tools/samtools/run", headers: h, payload: { workspace_id: "ws1", input: { command: "sortt", inputFile: bam } } });
  t.equal(bad.statusCode, 400);
  t.match(bad.json().message, /sortt/);
  await a.store.put("orgs/acme/workspaces/ws1/data/junk.bam", "this is not a BAM file\n");
  const failing = await a.app.inject({ method: "POST", url: "/v1/tools/samtools/run", headers: h, payload: { workspace_id: "ws1", input: { command: "view", inputFile: "data/junk.bam" } } });
  t.equal(failing.statusCode, 200);
  t.not(failing.json().data.exit_code, 0, "a tool that fails reports its exit code");
  t.ok(failing.json().data.stderr.length > 0, "and its stderr");

  // With every slot of the organization taken, a tool run waits until one frees.
  const ledger = a.engine!.ledger;
  ledger.assume("acme", "blocker", Array.from({ length: 5 }, (_, i) => `x${i}`));
  let answered = false;
  const pending = a.app.inject({ method: "POST", url: "/v1/tools/samtools/run", headers: h, payload: { workspace_id: "ws1", input: { command: "flagstat", inputFile: bam } } }).then((r) => { answered = true; return r; });
  await sleep(400);
  t.equal(answered, false, "no slot: the tool run waits");
  for (let i = 0; i < 5; i++) ledger.undo("acme", "blocker", `x${i}`);
  const late = await pending;
  t.equal(late.statusCode, 200);
  t.equal(late.json().data.exit_code, 0, "it runs once a slot frees, and does not fail for the limit");
  t.equal(ledger.inUse("acme"), 0, "and gives its slot back");
});

t.test("definitions, spec-file limits, validate, and access to runs", async (t) => {
  const defs = await a.app.inject({ method: "GET", url: "/v1/pipelines/definitions?workspace_id=ws1", headers: h });
  t.equal(defs.statusCode, 200);
  const ids = defs.json().data.map((d: { id: string }) => d.id);
  for (const id of ["fastq-qc", "bwa-align", "variant-calling", "bowtie2-align", "hisat2-align", "coverage"]) t.ok(ids.includes(id), `built-in ${id} listed`);
  t.ok(defs.json().data.some((d: { origin: string; spec_file?: string }) => d.origin === "workspace" && d.spec_file === "pipelines/specs/my-align.pipeline.json"), "the saved spec is listed with the workspace's");
  const one = await a.app.inject({ method: "GET", url: "/v1/pipelines/definitions/variant-calling", headers: h });
  t.equal(one.statusCode, 200, one.body.slice(0, 300));
  t.ok(one.json().data.inputs.some((i: { name: string; required: boolean }) => i.name === "reference" && i.required));
  const nope = await a.app.inject({ method: "GET", url: "/v1/pipelines/definitions/nope", headers: h });
  t.equal(nope.statusCode, 404, nope.body.slice(0, 200));

  await a.store.put("orgs/acme/workspaces/ws1/specs/huge.json", JSON.stringify({ steps: [], pad: "x".repeat(1_100_000) }));
  const huge = await a.app.inject({ method: "POST", url: "/v1/pipelines/validate", headers: h, payload: { workspace_id: "ws1", spec_file: "specs/huge.json" } });
  t.equal(huge.statusCode, 413, "spec files over 1 MB are not read");
  const v = await a.app.inject({ method: "POST", url: "/v1/pipelines/validate", headers: h, payload: { workspace_id: "ws1", spec_file: "pipelines/specs/my-align.pipeline.json" } });
  t.equal(v.statusCode, 200);
  t.equal(v.json().data.valid, true);
  const inlineBad = await a.app.inject({ method: "POST", url: "/v1/pipelines/validate", headers: h, payload: { workspace_id: "ws1", spec: { steps: [] } } });
  t.same(inlineBad.json().data.errors.map((e: { code: string }) => e.code), ["empty_steps"]);

  const runId = (await a.app.inject({ method: "GET", url: "/v1/pipelines?workspace_id=ws1", headers: h })).json().data[0].id as string;
  await a.service.createWorkspace("acme", "ws2");
  const restricted = await a.key("acme", ["tools"], ["ws2"]);
  const denied = await a.app.inject({ method: "GET", url: `/v1/pipelines/${runId}`, headers: { authorization: `Bearer ${restricted}` } });
  t.equal(denied.statusCode, 403, "a key restricted to another workspace");
  t.equal(denied.json().error, "workspace_access_denied");
  await a.service.createWorkspace("globex", "g1");
  const other = await a.key("globex", ["tools"]);
  const hidden = await a.app.inject({ method: "GET", url: `/v1/pipelines/${runId}`, headers: { authorization: `Bearer ${other}` } });
  t.equal(hidden.statusCode, 404, "another organization's run does not exist for it");
  const noScope = await a.key("acme", ["files"]);
  t.equal((await a.app.inject({ method: "GET", url: `/v1/pipelines/${runId}`, headers: { authorization: `Bearer ${noScope}` } })).statusCode, 403, "pipelines need the tools scope");
});
