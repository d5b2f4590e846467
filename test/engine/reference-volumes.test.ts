/**
 * Reference volumes in embedded mode, end to end through the HTTP API with the real Debian
 * tools in the bubblewrap sandbox: a directory configured as volume `refs` (OPERON_REF_VOLUMES)
 * holds a FASTA and its bwa index, built here with `bwa index`; reads simulated with wgsim are
 * in the workspace. A bwa mem → samtools sort → flagstat run whose reference is
 * `ref://refs/genome.fa` completes with a BAM that maps, the tool having read the FASTA in
 * place at /ref/refs/genome.fa, and run.json records its sha256 (equal to the file's) and size.
 * Refused at submission, naming the field: an unknown volume (with the configured ones), a
 * path that climbs (`..`), an absolute path. Refused by the executor: a link on the volume
 * leading out of it (the run fails cleanly, the tool never runs). Read-only: a step that tries
 * to write on the volume fails, and the volume is unchanged.
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { RunManifestSchema, type RunManifest } from "../../core/manifest.js";
import { BUILTIN_TOOLS, createCatalogue, type ToolDefinition } from "../../core/tools/index.js";
import { Stager, file, invocation } from "../../core/tools/params.js";
import { createProcessExecutor } from "../../adapters/local/process-executor.js";
import type { ObservedStepState } from "../../core/ports.js";
import { testApp, endedRun, readStored as readStoredOf } from "../support/app.js";
import { simulateReads } from "../support/reads.js";
import { until } from "../support/wait.js";

const top = mkdtempSync(join(tmpdir(), "operon-refvol-"));
t.teardown(() => rmSync(top, { recursive: true, force: true }));
const refs = join(top, "refs");
const outside = join(top, "outside");
mkdirSync(refs);
mkdirSync(outside);
// The FASTA and its bwa index side by side on the volume, as a lab prepares one.
const sim = simulateReads(refs, { seed: 42, pairs: 500, names: ["genome.fa", "r1.fastq", "r2.fastq"] });
const idx = spawnSync("bwa", ["index", "genome.fa"], { cwd: refs, encoding: "utf8" });
if (idx.status !== 0) throw new Error(`bwa index: ${idx.stderr}`);
for (const ext of [".amb", ".ann", ".bwt", ".pac", ".sa"]) if (!existsSync(join(refs, `genome.fa${ext}`))) throw new Error(`bwa index wrote no ${ext}`);
const reads1 = readFileSync(sim.reads1);
const reads2 = readFileSync(sim.reads2);
rmSync(sim.reads1);
rmSync(sim.reads2);
writeFileSync(join(outside, "secret.fa"), ">secret\nACGT\n");
symlinkSync(join(outside, "secret.fa"), join(refs, "evil.fa"));
const genome = readFileSync(join(refs, "genome.fa"));
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/** A test-only tool that tries to write on its input: `touch <file> <file>.new`. */
const touchTool: ToolDefinition = {
  id: "touch", description: "Touches its input and a new file beside it (test tool: a write attempt)", version: "1", image: "busybox:1.36",
  localExecutables: ["touch"], fileParams: ["inputFile"], defaultCommand: "touch",
  inputSchema: z.strictObject({ command: z.literal("touch").optional(), inputFile: file() }),
  commands: {
    touch: {
      description: "touch", required: ["inputFile"],
      build: (p) => { const s = new Stager(p); const f = s.file("inputFile"); return invocation(["touch"], [f, `${f}.new`], s, []); },
    },
  },
};

const a = await testApp({ engine: { referenceVolumes: { refs }, tools: createCatalogue([...BUILTIN_TOOLS, touchTool]) } });
t.teardown(() => a.close());
await a.service.createWorkspace("acme", "ws1");
const key = await a.key("acme", ["tools", "files"]);
const h = { authorization: `Bearer ${key}` };
const WS = "orgs/acme/workspaces/ws1/";
await a.store.put(`${WS}data/r1.fastq`, reads1);
await a.store.put(`${WS}data/r2.fastq`, reads2);

type RunView = { id: string; status: string; error: string | null; output_folder: string; steps: Array<{ step_id: string; status: string; error: string | null }> };
/** The run once it has ended. */
const poll = (id: string, timeoutMs = 120_000) => endedRun<RunView>(a, h, id, { timeoutMs });
const readStored = (key: string) => readStoredOf(a.store, key);
const manifestOf = async (run: RunView): Promise<RunManifest> => RunManifestSchema.parse(JSON.parse((await readStored(`${WS}${run.output_folder}/run.json`)).toString()));

/** bwa mem against the reference input, sorted into BAM, counted. */
const alignSpec = (reference: string = "${reference}") => ({
  id: "ref-align",
  inputs: [{ name: "reads1", type: "file" }, { name: "reads2", type: "file" }, { name: "reference", type: "file" }],
  steps: [
    { stepId: "align", toolName: "bwa", parameters: { command: "mem", reference, inputFile: "${reads1}", inputFile2: "${reads2}", outputFile: "s.sam" } },
    { stepId: "sort", toolName: "samtools", dependsOn: ["align"], parameters: { command: "sort", inputFile: "${align.outputFile}", outputFile: "s.sorted.bam" } },
    { stepId: "flagstat", toolName: "samtools", dependsOn: ["sort"], parameters: { command: "flagstat", inputFile: "${sort.outputFile}", outputFile: "s.flagstat.txt" } },
  ],
});
const submit = (payload: Record<string, unknown>) => a.app.inject({ method: "POST", url: "/v1/pipelines", headers: h, payload: { workspace_id: "ws1", ...payload } });
const reads = { reads1: "data/r1.fastq", reads2: "data/r2.fastq" };

t.test("bwa mem reads ref://refs/genome.fa in place; the BAM maps; run.json records its sha256", async (t) => {
  const res = await submit({ spec: alignSpec(), input: { ...reads, reference: "ref://refs/genome.fa" } });
  t.equal(res.statusCode, 201, res.body);
  const run = await poll(res.json().data.id);
  t.equal(run.status, "completed", JSON.stringify(run.steps));

  // The BAM is right: samtools flagstat on it (here, not the pipeline's) finds mapped reads.
  const bam = join(top, "s.sorted.bam");
  writeFileSync(bam, await readStored(`${WS}${run.output_folder}/s.sorted.bam`));
  const fs = spawnSync("samtools", ["flagstat", bam], { encoding: "utf8" });
  t.equal(fs.status, 0, fs.stderr);
  const total = Number(/^(\d+) \+ 0 in total/m.exec(fs.stdout)?.[1]);
  const mapped = Number(/^(\d+) \+ 0 mapped/m.exec(fs.stdout)?.[1]);
  t.equal(total, 1000, "every simulated read is in the BAM");
  t.ok(mapped > 900, `mapped ${mapped} of ${total}`);

  const m = await manifestOf(run);
  const align = m.steps.find((s) => s.stepId === "align");
  t.same(align?.references, [{ uri: "ref://refs/genome.fa", sha256: sha(genome), size: genome.length }], "the reference's checksum, computed before the tool ran");
  t.ok(align?.argv?.includes("/ref/refs/genome.fa"), `the tool read it at /ref/refs/genome.fa: ${JSON.stringify(align?.argv)}`);
  t.notOk(m.steps.find((s) => s.stepId === "sort")?.references, "a step without references records none");
  t.equal(m.parameters.reference, "ref://refs/genome.fa");
  t.notOk(m.inputChecksums.reference, "not a workspace input: its checksum is its step's");
  t.ok(m.inputChecksums.reads1?.checksum, "workspace inputs keep theirs");
  t.same(readFileSync(join(refs, "genome.fa")), genome, "the volume is untouched");

  // Saved as a spec, the reference stays the input's default (shared data, not the run's own file).
  const saved = await a.app.inject({ method: "POST", url: `/v1/pipelines/${run.id}/save-spec`, headers: h, payload: { workspace_id: "ws1", name: "ref align" } });
  t.equal(saved.statusCode, 201, saved.body);
  const inputs = saved.json().data.spec.inputs as Array<{ name: string; default?: string }>;
  t.equal(inputs.find((i) => i.name === "reference")?.default, "ref://refs/genome.fa");
  t.notOk(inputs.find((i) => i.name === "reads1")?.default, "a workspace file input keeps no default");
});

t.test("a literal ref:// in a step's parameters works the same", async (t) => {
  const res = await submit({ spec: { ...alignSpec("ref://refs/genome.fa"), inputs: alignSpec().inputs.slice(0, 2) }, input: reads });
  t.equal(res.statusCode, 201, res.body);
  const run = await poll(res.json().data.id);
  t.equal(run.status, "completed", JSON.stringify(run.steps));
  t.same((await manifestOf(run)).steps[0]?.references, [{ uri: "ref://refs/genome.fa", sha256: sha(genome), size: genome.length }]);
  const saved = await a.app.inject({ method: "POST", url: `/v1/pipelines/${run.id}/save-spec`, headers: h, payload: { workspace_id: "ws1", name: "literal ref align" } });
  t.equal(saved.statusCode, 201, saved.body);
  const spec = saved.json().data.spec as { inputs?: Array<{ name: string }>; steps: Array<{ parameters: Record<string, unknown> }> };
  t.equal(spec.steps[0]?.parameters.reference, "ref://refs/genome.fa", "a literal reference stays literal when saved");
  t.notOk(spec.inputs?.some((i) => /reference/.test(i.name)), `no input is made of it: ${JSON.stringify(spec.inputs)}`);
});

t.test("refused at submission, naming the field", async (t) => {
  const cases: Array<[string, Record<string, unknown>, string, RegExp]> = [
    ["an unknown volume", { spec: alignSpec(), input: { ...reads, reference: "ref://nope/genome.fa" } }, "/input/reference", /reference volume "nope" is not configured; configured volumes: refs/],
    ["a path that climbs", { spec: alignSpec(), input: { ...reads, reference: "ref://refs/../outside/secret.fa" } }, "/input/reference", /"\.\." segments/],
    ["an absolute path", { spec: alignSpec(), input: { ...reads, reference: "/etc/passwd" } }, "/input/reference", /must be relative/],
    ["a literal unknown volume", { spec: alignSpec("ref://nope/genome.fa"), input: { ...reads, reference: "data/r1.fastq" } }, "/steps/0/parameters/reference", /"nope" is not configured; configured volumes: refs/],
    ["an index command on the volume", { spec: { steps: [{ stepId: "i", toolName: "bwa", parameters: { command: "index", inputFile: "ref://refs/genome.fa" } }] } }, "/steps/0/parameters/inputFile", /read-only reference volume/],
  ];
  for (const [what, payload, path, why] of cases) {
    const res = await submit(payload);
    t.equal(res.statusCode, 422, `${what}: ${res.body}`);
    const errors = (res.json().details?.errors ?? []) as Array<{ path: string; message: string }>;
    t.ok(errors.some((e) => e.path === path && why.test(e.message)), `${what}: ${JSON.stringify(errors)}`);
  }
  const v = await a.app.inject({ method: "POST", url: "/v1/pipelines/validate", headers: h, payload: { workspace_id: "ws1", spec: alignSpec("ref://nope/genome.fa") } });
  t.equal(v.statusCode, 200, v.body);
  t.match(v.json().data, { valid: false, errors: [{ code: "unknown_reference_volume", path: "/steps/0/parameters/reference", message: /configured volumes: refs/ }] }, "validate applies the same check");
  const runs = await a.app.inject({ method: "GET", url: "/v1/pipelines?workspace_id=ws1", headers: h });
  t.equal((runs.json().data as unknown[]).length, 2, "nothing was created for the refused submissions");
});

t.test("a link on the volume leading out of it: the executor refuses it, the run fails cleanly", async (t) => {
  const res = await submit({ spec: alignSpec(), input: { ...reads, reference: "ref://refs/evil.fa" } });
  t.equal(res.statusCode, 201, "its form is fine: only the layer below can tell");
  const run = await poll(res.json().data.id);
  t.equal(run.status, "failed");
  const align = run.steps.find((s) => s.step_id === "align");
  t.equal(align?.status, "failed");
  t.match(align?.error, /ref:\/\/refs\/evil\.fa resolves outside reference volume "refs" \(a symbolic link leading out of it\): refused/);
  t.notOk(align?.error?.includes(top), "no host path in the error");
  t.same(run.steps.filter((s) => s.step_id !== "align").map((s) => s.status), ["skipped", "skipped"]);
  const log = await a.app.inject({ method: "GET", url: `/v1/pipelines/${run.id}/steps/align/logs`, headers: h });
  t.match(log.body, /reference data refused/);
  t.notMatch(log.body, /M::|bwa_idx/, "the tool never ran");
});

t.test("the volume is read-only: a step that writes on it fails and changes nothing", async (t) => {
  const before = statSync(join(refs, "genome.fa"));
  const res = await submit({ spec: { steps: [{ stepId: "write", toolName: "touch", parameters: { inputFile: "ref://refs/genome.fa" } }] } });
  t.equal(res.statusCode, 201, res.body);
  const run = await poll(res.json().data.id);
  t.equal(run.status, "failed");
  t.match(run.steps[0]?.error, /exit code 1.*Read-only file system/s);
  t.equal(statSync(join(refs, "genome.fa")).mtimeMs, before.mtimeMs, "not touched");
  t.notOk(existsSync(join(refs, "genome.fa.new")), "nothing created on the volume");
  t.same(readFileSync(join(refs, "genome.fa")), genome);
});

t.test("the executor: in the sandbox the tool sees the volume at /ref/refs and not its host directory; unsandboxed it gets the host path", async (t) => {
  const dataDir = mkdtempSync(join(top, "exec-"));
  const script = `wc -c < "$0"; ls /ref; ls ${refs}/genome.fa 2>&1; true`;
  for (const sandbox of ["bwrap", "off"] as const) {
    const ex = createProcessExecutor({ dataDir, store: a.store, sandbox, referenceVolumes: { refs } });
    t.teardown(() => ex.shutdown());
    const runId = `run-direct-${sandbox}`;
    await ex.submit({
      runId, organization: "acme", stepId: "s", attempt: 1, toolName: "test", workspaceRoot: WS, runRoot: `${WS}pipelines/${runId}/`, timeoutMs: 60_000,
      invocation: { argv: ["bash", "-c", script, "/ref/refs/genome.fa"], inputs: [], outputs: [], mkdirs: [], references: [{ param: "reference", uri: "ref://refs/genome.fa", path: "/ref/refs/genome.fa" }] },
    });
    let state: ObservedStepState | undefined;
    await until(`the ${sandbox} step to end`, async () => { state = (await ex.observe(runId)).get("s"); return state !== undefined && state.phase !== "running"; });
    const log = (await ex.logs(runId, "s")) ?? "";
    t.equal(state?.phase, "completed", `${sandbox}: ${log}`);
    t.match(log, new RegExp(`^${genome.length}$`, "m"), `${sandbox}: the tool read the whole reference`);
    t.same(state?.references, [{ uri: "ref://refs/genome.fa", sha256: sha(genome), size: genome.length }], `${sandbox}: checksummed before the tool ran`);
    if (sandbox === "bwrap") {
      t.match(log, /^refs$/m, "only the volume is under /ref");
      t.match(log, /No such file or directory/, "the volume's host directory is not there");
    } else t.match(log, /^ls: cannot access '\/ref': No such file or directory/m, "unsandboxed: no /ref, the argv named the host path");
  }
});
