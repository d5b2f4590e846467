/**
 * Step pods through the engine (cluster mode's rules, with an in-memory executor that runs
 * containers and records what it is given; the reconciler, planner, ledger and run store are
 * the real ones): the argv a step is started with and its pod agree on the thread count;
 * submission refuses a step above maxResources (400 naming steps[i].resources.memory) and a
 * tool without an image; a run that reaches the operator anyway (a PipelineRun applied by
 * hand) fails that step with the same reason and creates nothing for it.
 */
import t from "tap";
import { EventEmitter } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLocalObjectStore } from "../../adapters/local/object-store.js";
import { createLocalRunStore } from "../../adapters/local/run-store.js";
import { createEngine } from "../../engine/engine.js";
import { loadStepPodConfig } from "../../wiring/runtime.js";
import { parseConfig } from "../../core/config.js";
import type { StepPodConfig } from "../../core/kubernetes/step-pods.js";
import type { ObservedStepState, RunRecord, StepExecutor, StepTask } from "../../core/ports.js";
import { until } from "../support/wait.js";

const dir = mkdtempSync(join(tmpdir(), "operon-step-pods-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const events = new EventEmitter();
const submitted: StepTask[] = [];
const states = new Map<string, Map<string, ObservedStepState>>();
const executor: StepExecutor = {
  runtime: "container",
  submit: async (task) => {
    submitted.push(task);
    const m = states.get(task.runId) ?? new Map<string, ObservedStepState>();
    m.set(task.stepId, { phase: "running", attempt: task.attempt, startedAt: Date.now() });
    states.set(task.runId, m);
    events.emit("c", task.runId);
  },
  observe: async (runId) => new Map(states.get(runId) ?? []),
  kill: async () => undefined,
  watch: (fn) => { events.on("c", fn); return () => events.off("c", fn); },
  logs: async () => undefined,
};
const runs = createLocalRunStore(dir);
const store = createLocalObjectStore({ root: dir, publicUrl: "http://localhost", signingSecret: "x".repeat(40) });
const stepPods: StepPodConfig = { maxResources: { cpu: "32", memory: "128Gi" }, imageRegistry: "harbor.lab/quay-proxy" };
const engine = createEngine({ runs, executor, store, clock: { now: () => Date.now() }, orgConcurrency: () => 10, workers: 2, stepPods });
t.teardown(() => engine.stop());

const submit = (steps: unknown[]) => engine.submit({ organization: "acme", workspace: "ws", keyId: "k", source: { kind: "inline" }, input: {}, spec: { steps } });
const align = (stepId: string, more: Record<string, unknown> = {}, params: Record<string, unknown> = {}) =>
  ({ stepId, toolName: "bwa", parameters: { command: "mem", inputFile: "r1.fq", reference: "ref.fa", ...params }, ...more });

t.test("the argv and the pod agree on threads and CPUs", async (t) => {
  const r = await submit([align("dflt"), align("cpu", { resources: { cpu: "6", memory: "24Gi" } }), align("thr", {}, { threads: 12 })]);
  if (!r.ok) throw new Error(r.error.message);
  await until("three steps submitted", () => submitted.filter((s) => s.runId === r.run.id).length === 3);
  const byStep = new Map(submitted.filter((s) => s.runId === r.run.id).map((s) => [s.stepId, s]));
  const threadsOf = (s: StepTask | undefined) => { const a = s?.invocation.argv ?? []; return a[a.indexOf("-t") + 1]; };
  const expect: Array<[string, string, string]> = [["dflt", "4", "4"], ["cpu", "6", "6"], ["thr", "12", "12"]];
  for (const [id, threads, cpu] of expect) {
    const s = byStep.get(id);
    t.equal(threadsOf(s), threads, `${id}: bwa mem -t ${threads}`);
    t.equal(s?.pod?.resources.requests.cpu, cpu, `${id}: the pod asks for ${cpu} CPUs`);
    t.equal(s?.pod?.image, "harbor.lab/quay-proxy/biocontainers/bwa:0.7.18--he4a0461_0", `${id}: the image through the mirror`);
  }
  t.same(byStep.get("cpu")?.pod?.resources.limits, { memory: "24Gi" }, "the step's memory is its limit");
  t.equal(byStep.get("cpu")?.pod?.resources.requests.memory, "24Gi", "and its request");
  // What the run records is what the pod runs.
  await until("argv recorded", async () => (await runs.get(r.run.id))?.steps.every((s) => s.argv !== undefined) ?? false);
  const rec = await runs.get(r.run.id);
  for (const s of rec?.steps ?? []) t.same(s.argv, byStep.get(s.stepId)?.invocation.argv, `${s.stepId}: recorded argv = the pod's`);
});

t.test("submission refuses what the step pods may not do (400, nothing created)", async (t) => {
  const before = (await runs.list({ organization: "acme" })).length;
  const r = await submit([align("a"), align("b", { resources: { memory: "256Gi" } })]);
  t.match(r, { ok: false, error: { code: "invalid_request", message: "steps[1].resources.memory: \"256Gi\" is more than a step may ask for here (at most \"128Gi\", maxResources.memory)" } });
  t.match(!r.ok && r.error.details?.["errors"], [{ code: "resources_above_maximum", path: "/steps/1/resources/memory" }]);
  const annovar = await submit([{ stepId: "x", toolName: "annovar", parameters: { command: "convert2annovar", inputFile: "a.vcf" } }]);
  t.match(annovar, { ok: false, error: { code: "invalid_request", message: /^steps\[0\]\.toolName: annovar has no image.*steps\.tools\.annovar\.image/ } });
  t.equal((await runs.list({ organization: "acme" })).length, before, "no run created");
  const bad = await submit([align("a", { resources: { memory: "lots" } })]);
  t.match(bad, { ok: false, error: { code: "validation_failed", details: { errors: [{ path: "/steps/0/resources/memory", message: /^steps\[0\]\.resources\.memory: must be a Kubernetes quantity/ }] } } }, "a malformed quantity is a validation error");
});

t.test("the operator refuses it too: the step fails with the reason, no Job", async (t) => {
  // A run that bypassed submission (a PipelineRun applied by hand): stored as queued.
  const ok = await submit([align("fine")]);
  if (!ok.ok) throw new Error(ok.error.message);
  const id = ok.run.id.replace(/.$/, (c) => (c === "0" ? "1" : "0"));
  const run: RunRecord = {
    ...ok.run, id, outputFolder: `${ok.run.outputFolder}-by-hand`,
    spec: { steps: [align("big", { resources: { memory: "512Gi" } }) as RunRecord["spec"]["steps"][number]] },
    steps: [{ stepId: "big", toolName: "bwa", status: "pending", startedAt: null, completedAt: null, exitCode: null, error: null, attempt: 0, outputs: [] }],
  };
  await runs.create(run);
  await engine.reconcile(id);
  const done = await until("the run failed", async () => (await runs.get(id))?.status === "failed" ? (await runs.get(id)) : undefined);
  t.match(done?.steps[0], { status: "failed", error: "resources.memory \"512Gi\" is more than a step may ask for here (at most \"128Gi\", maxResources.memory)" });
  t.notOk(submitted.some((s) => s.runId === id), "nothing was submitted for it");
});

t.test("the configuration file: read at start-up, a bad one stops it with one line naming the file and the JSON path", async (t) => {
  const file = join(dir, "steps.json");
  writeFileSync(file, JSON.stringify({ tools: { bwa: { resources: { requests: { cpu: "lots" } } } } }));
  await t.rejects(loadStepPodConfig(file), { message: `invalid configuration: OPERON_STEP_POD_CONFIG: ${file}: tools.bwa.resources.requests.cpu: must be a Kubernetes quantity such as "500m", "4" or "16Gi"` });
  writeFileSync(file, "{\"maxResources\": {\"memory\": \"128Gi\"},");
  await t.rejects(loadStepPodConfig(file), { message: new RegExp(`^invalid configuration: OPERON_STEP_POD_CONFIG: ${file}: not valid JSON: [^\\n]+$`) });
  await t.rejects(loadStepPodConfig(join(dir, "missing.json")), { message: `invalid configuration: OPERON_STEP_POD_CONFIG: cannot read ${join(dir, "missing.json")}: ENOENT` });
  writeFileSync(file, JSON.stringify(stepPods));
  t.same(await loadStepPodConfig(file), stepPods);
  t.same(await loadStepPodConfig(undefined), {}, "unset: the built-in defaults");
  const cfg = parseConfig({ OPERON_MODE: "cluster", S3_BUCKET: "b", OPERON_STEP_POD_CONFIG: "/etc/operon/steps.json" });
  t.equal(cfg.ok && cfg.config.OPERON_STEP_POD_CONFIG, "/etc/operon/steps.json");
});
