/**
 * Benchmark: cluster mode, the operator against a real control plane (issues 5 and 18, "Measure").
 * The full test environment (test/support/k8s-env.ts: etcd + kube-apiserver + the real
 * kube-controller-manager — Job controller, garbage collector, TTL, pod GC — + kube-scheduler +
 * kwok with BENCH_NODES simulated nodes (default 10, default capacity) + MinIO, on loopback),
 * the operator as its own process (`node dist/cli/main.js operator`, leader election on, so its
 * RSS and CPU are its own) and the api-server's cluster engine in this process submitting
 * PipelineRuns. The Job controller creates each step's pod, the scheduler binds it to a kwok
 * node, the stage-out stand-in (test/support/job-sim.ts startStageOut) uploads the step's
 * declared outputs to MinIO and releases the pod, kwok runs it to Succeeded after a fixed
 * BENCH_POD_MS (default 100 ms: `kwok.operon.dev/duration`, set by the stand-in) and the Job
 * controller writes SuccessCriteriaMet and Complete. Nothing patches Job status.
 * The bench watches pods and Jobs itself (its own clock, ms):
 * (0) Warm-up, unloaded: 10 runs one at a time (their figures are the reference for (b)).
 * (a) Drain: BENCH_RUNS (500) runs of a 5-step DAG a → (b, c) → d → e (samtools depth) over 10
 *     organizations (org limit 5), submitted all at once: first submit → last run completedAt.
 * (b) Dependent-step latency: the child step's pod first seen by the bench's pod watch − the
 *     latest of its parents' pods first seen Succeeded by the same watch: p50/p99 over the
 *     4 × RUNS pairs. (Pod creationTimestamp and containers' finishedAt have whole seconds:
 *     too coarse for this, so both ends are the watch's arrival times, which share its delay.)
 * (b′) The operator's own figure, its operon_step_start_latency_seconds histogram (parent's
 *     end reaching its watch → child Job created), split by whether the child waited for a slot.
 * (c) Kubernetes API writes of the operator (its /metrics operon_operator_api_writes_total) per
 *     step; the Job controller's from the apiserver's apiserver_request_total deltas (it has no
 *     client label: jobs/status updates + pod creates + pod patches less the stand-in's own).
 * (d) Operator RSS: VmHWM (peak) and VmRSS (sampled every 200 ms) from /proc/<pid>/status.
 * (e) Most Jobs active (created, not yet Complete/Failed) per organization, from the bench's
 *     Job watch (> 5 fails the bench).
 * (f) Steady load: BENCH_STEADY_RUNS (300) more runs submitted one by one at BENCH_STEADY_RATE
 *     (300) runs/min; dependent-step latency as in (b) and (b′).
 * Baseline, the control plane alone, same run, before the operator starts: a direct client
 * creates the same 5 × RUNS Jobs (core/kubernetes/jobs.ts buildJob, the tool's resources from
 * stepCompute, as the operator builds them), at most 50 active at once (10 orgs × limit 5, the
 * most the operator may have), each child Job as soon as its parents' Jobs report
 * SuccessCriteriaMet/Complete on its Job watch; the same Job controller, scheduler, kwok nodes,
 * stand-in and pod duration run them. Its drain is expressed as runs/min (÷ 5) and its
 * dependent-step latency measured as (b): what the control plane itself takes between a
 * parent's pod succeeding and a child's pod appearing.
 * Writes its section of bench/RESULTS.md (only with the default set-up). Run: `make bench`
 * (builds dist/ first; needs `make test-deps` for the Kubernetes, kwok and MinIO binaries), or
 * `npx tsc -p tsconfig.build.json && npx tsx bench/cluster.bench.ts`.
 * Knobs: BENCH_RUNS (default 500), BENCH_TIMEOUT_SECONDS (drain limit, default 900),
 * BENCH_NODES (kwok nodes, default 10), BENCH_POD_MS (how long each pod runs, default 100),
 * BENCH_CPU_PROF_DIR (run the operator with --cpu-prof into that folder and print its top
 * functions), BENCH_DUMP_DIR (write the operator's log and every run's pod times there),
 * OPERON_OPERATOR_WORKERS (passed to the operator; default 8), BENCH_OPERATOR_MAIN (run
 * another build of `cli/main.js`, e.g. an instrumented copy), BENCH_OPERATOR_NODE_ARGS (extra
 * node options for the operator, e.g. `--prof --logfile=/tmp/v8.log`). With any knob but the
 * timeout set, bench/RESULTS.md is left alone.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { join } from "node:path";
import { parseConfig, type Config } from "../core/config.js";
import { ulid } from "../core/ids.js";
import { buildJob } from "../core/kubernetes/jobs.js";
import { ANNOTATION, jobName } from "../core/kubernetes/pipelinerun.js";
import { stepCompute } from "../core/kubernetes/step-pods.js";
import { stepTimeoutMs } from "../core/plan.js";
import type { ObjectStore, RunRecord } from "../core/ports.js";
import { buildInvocation, defaultCatalogue } from "../core/tools/index.js";
import { createStore } from "../wiring/runtime.js";
import { stepStorageEnv } from "../operator/cluster.js";
import { createApiServerClusterEngine } from "../wiring/runtime.js";
import { createKubeClient, paths } from "../adapters/kubernetes/client.js";
import { startStageOut, type StageOut } from "../test/support/job-sim.js";
import { K8S_VERSION, startTestEnv, type TestEnv } from "../test/support/k8s-env.js";
import {
  STEPS, apiserverCounts, cpuSeconds, cpuSnapshot, dag, dependentLatencies, f1, int, isTrue, loadAverage as load, metric, pct, root, sleep, staleDist,
  startOperatorProcess as startOperator, startWatches, statusKb, type ApiCounts, type Job, type OperatorProc, type Watches,
} from "./cluster-harness.js";

const RUNS = Number(process.env.BENCH_RUNS ?? 500);
const TIMEOUT_S = Number(process.env.BENCH_TIMEOUT_SECONDS ?? 900);
const NODES = Number(process.env.BENCH_NODES ?? 10);
const POD_MS = Number(process.env.BENCH_POD_MS ?? 100);
const PROF_DIR = process.env.BENCH_CPU_PROF_DIR;
const DUMP_DIR = process.env.BENCH_DUMP_DIR;
const NODE_ARGS = (process.env.BENCH_OPERATOR_NODE_ARGS ?? "").split(" ").filter(Boolean);
const WORKERS = process.env.OPERON_OPERATOR_WORKERS;
const ORGS = Array.from({ length: 10 }, (_, i) => `org${i}`);
const LIMIT = 5;
const WARMUP_RUNS = 10;
const STEADY_RUNS = Number(process.env.BENCH_STEADY_RUNS ?? 300);
const STEADY_PER_MIN = Number(process.env.BENCH_STEADY_RATE ?? 300);
const BASELINE_LANES = ORGS.length * LIMIT;
const NS = "bench";
/** BENCH_RECORD=1: write bench/RESULTS.md even with other sizes (the section names them). */
const RECORD = process.env.BENCH_RECORD === "1";
const DEFAULT_SIZES = RUNS === 500 && NODES === 10 && POD_MS === 100 && STEADY_RUNS === 300 && STEADY_PER_MIN === 300 && !PROF_DIR && !DUMP_DIR && !WORKERS && !process.env.BENCH_OPERATOR_MAIN && NODE_ARGS.length === 0;

const operatorMain = process.env.BENCH_OPERATOR_MAIN ?? join(root, "dist/cli/main.js");
if (!existsSync(join(root, "dist/operator/cluster.js"))) throw new Error("run `make build` first (the operator process runs dist/)");

const log = (m: string) => process.stderr.write(`[cluster bench] ${m}\n`);
const TERMINAL = new Set(["completed", "failed", "cancelled"]);

const startOperatorProcess = (env: TestEnv): Promise<OperatorProc> => startOperator(env, {
  namespace: NS, orgLimit: LIMIT, main: operatorMain, nodeArgs: NODE_ARGS,
  ...(PROF_DIR ? { profDir: PROF_DIR } : {}), ...(DUMP_DIR ? { dumpDir: DUMP_DIR } : {}), ...(WORKERS ? { workers: WORKERS } : {}),
});

/** The operator's operon_step_start_latency_seconds series: "bucket|le|slot|step", "sum|slot|step", "count|slot|step" → value. */
async function stepStartSeries(p: OperatorProc): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${p.port}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = /^operon_step_start_latency_seconds_(bucket|sum|count)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries([...(m[2] as string).matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    out.set([m[1], ...(m[1] === "bucket" ? [labels.le] : []), labels.slot, labels.step].join("|"), Number(m[3]));
  }
  return out;
}

/**
 * One group (slot, step) of the histogram between two scrapes: how many, the share at or under
 * 1 s, and p50/p99 as the bucket bounds they fall in ("≤ 0.5 s": a histogram has no exact
 * percentiles).
 */
function stepStartGroup(before: Map<string, number>, after: Map<string, number>, slot: string, step: string) {
  const d = (k: string) => (after.get(k) ?? 0) - (before.get(k) ?? 0);
  const n = d(`count|${slot}|${step}`);
  const les = [...after.keys()].filter((k) => k.startsWith("bucket|") && k.endsWith(`|${slot}|${step}`)).map((k) => k.split("|")[1] as string).filter((le) => le !== "+Inf").map(Number).sort((a, b) => a - b);
  const within = (le: number) => d(`bucket|${le}|${slot}|${step}`);
  const bound = (q: number) => { const le = les.find((x) => within(x) >= q * n); return le === undefined ? `> ${les.at(-1)} s` : `≤ ${le} s`; };
  return { n, underOne: n ? within(1) / n : NaN, p50: bound(0.5), p99: bound(0.99), meanS: n ? d(`sum|${slot}|${step}`) / n : NaN };
}

/** Counts an ObjectStore's calls by method (the bench's own wrapper; the store is unchanged). */
function counted(store: ObjectStore): { store: ObjectStore; calls: Map<string, number> } {
  const calls = new Map<string, number>();
  const wrapped = new Proxy(store, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== "function") return v;
      return (...args: unknown[]) => { calls.set(String(prop), (calls.get(String(prop)) ?? 0) + 1); return (v as (...a: unknown[]) => unknown).apply(target, args); };
    },
  });
  return { store: wrapped, calls };
}

/** Top self-time functions and files of a .cpuprofile (V8's format). */
function summarizeProfile(file: string): string {
  interface Node { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount?: number }
  const prof = JSON.parse(readFileSync(file, "utf8")) as { nodes: Node[]; startTime: number; endTime: number; samples: number[] };
  const perSample = (prof.endTime - prof.startTime) / 1000 / Math.max(1, prof.samples.length);
  const byFn = new Map<string, number>();
  const byFile = new Map<string, number>();
  let total = 0;
  for (const n of prof.nodes) {
    const hits = n.hitCount ?? 0;
    if (!hits) continue;
    const url = n.callFrame.url.replace(/^file:\/\//, "").replace(root, "");
    const file = url.includes("node_modules/") ? `node_modules/${url.split("node_modules/")[1]?.split("/").slice(0, url.includes("node_modules/@") ? 2 : 1).join("/") ?? "?"}` : url || "(native)";
    const fn = `${n.callFrame.functionName || "(anonymous)"} ${url ? `${url}:${n.callFrame.lineNumber + 1}` : ""}`.trim();
    if (n.callFrame.functionName === "(idle)") continue;
    byFn.set(fn, (byFn.get(fn) ?? 0) + hits * perSample);
    byFile.set(file, (byFile.get(file) ?? 0) + hits * perSample);
    total += hits * perSample;
  }
  const top = (m: Map<string, number>, n: number) => [...m].sort((a, b) => b[1] - a[1]).slice(0, n).map(([k, v]) => `  ${f1(v).padStart(8)} ms  ${f1((100 * v) / total).padStart(5)} %  ${k}`).join("\n");
  return `operator CPU profile ${file}: ${f1(total / 1000)} s busy\nby file / package:\n${top(byFile, 15)}\nby function (self time):\n${top(byFn, 25)}`;
}

/** What the stage-out stand-in does with every pod: upload the outputs, then succeed after POD_MS. */
const podRuns = () => ({ action: "succeed" as const, runMs: POD_MS });

interface BaselineResult { ms: number; jobs: number; writes: number; dep: number[]; replaced: number; cpu: Map<string, number>; api: Map<string, number> }

/**
 * The control plane's own ceiling: the same Jobs created by a direct client, at most `lanes`
 * active at once, each child as soon as its parents' Jobs succeeded, run by the same Job
 * controller, scheduler, kwok nodes and stage-out stand-in; no operator, no PipelineRuns.
 */
async function baseline(env: TestEnv, config: Config, store: ObjectStore, ns: string, onError: (e: unknown) => void): Promise<BaselineResult> {
  await env.createNamespace(ns);
  const client = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: ns });
  const harness = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: ns }); // stand-in and watches: not the direct client's writes
  let stage: StageOut | undefined;
  let w: Watches | undefined;
  try {
    const samtools = defaultCatalogue.get("samtools");
    if (!samtools) throw new Error("no samtools in the catalogue");
    const runs: Array<{ runId: string; jobs: Map<string, Job> }> = [];
    const stepOf = new Map<string, { run: number; stepId: string }>();
    for (let r = 0; r < RUNS; r++) {
      const org = ORGS[r % ORGS.length] as string;
      const runId = `run-${ulid(Date.now(), randomBytes(10))}`;
      const workspaceRoot = `orgs/${org}/workspaces/ws1/`;
      const folder = `pipelines/baseline-${ns}-${r}`;
      const jobs = new Map<string, Job>();
      for (const s of dag.steps) {
        const parent = s.dependsOn?.[0];
        const compute = stepCompute({ tool: samtools, params: { ...s.parameters, inputFile: parent ? `${folder}/${parent}.tsv` : "in.bam" }, config: {} });
        if (!compute.ok) throw new Error(`baseline step resources: ${compute.message}`);
        const built = buildInvocation(samtools, compute.params, { runtime: "container" });
        if (!built.ok) throw new Error(`baseline invocation: ${JSON.stringify(built.errors)}`);
        const job = buildJob({
          runId, organization: org, stepId: s.stepId, attempt: 1, toolName: "samtools", invocation: built.invocation, workspaceRoot, runRoot: `${workspaceRoot}${folder}/`, timeoutMs: stepTimeoutMs(s),
          ...(compute.resources && compute.image ? { pod: { image: compute.image, resources: compute.resources } } : {}),
        }, {
          namespace: ns, toolImage: samtools.image, image: config.OPERON_IMAGE, storageEnv: stepStorageEnv(config),
          ttlSecondsAfterFinished: config.OPERON_JOB_TTL_SECONDS, createdBy: "bench-baseline",
        }) as Job;
        jobs.set(s.stepId, job);
        stepOf.set(job.metadata.name, { run: r, stepId: s.stepId });
      }
      runs.push({ runId, jobs });
    }
    stage = await startStageOut({ client: harness, namespace: ns, store, decide: podRuns, onError });
    w = await startWatches(harness, ns, onError);
    const watches = w;
    const total = RUNS * STEPS;
    const succeeded = new Set<string>();
    const completed = new Set<string>();
    const ready: Job[] = [];
    let nextRun = 0;
    let active = 0;
    let end = 0;
    let failure: Error | undefined;
    let finish = () => undefined as void;
    const allDone = new Promise<void>((r) => { finish = r; });
    const pump = () => {
      while (active < BASELINE_LANES && !failure) {
        const job = ready.shift() ?? (nextRun < RUNS ? runs[nextRun++]?.jobs.get(dag.steps[0]?.stepId ?? "") : undefined);
        if (!job) break;
        active++;
        client.request<Job>("POST", paths.jobs(ns), { body: job }).catch((e: unknown) => { failure = e instanceof Error ? e : new Error(String(e)); finish(); });
      }
    };
    watches.onJob((job) => {
      const name = job.metadata.name;
      const at = stepOf.get(name);
      if (!at) return;
      if (isTrue(job, "Failed", "FailureTarget")) { failure = new Error(`baseline Job ${name} failed: ${JSON.stringify(job.status?.conditions)}`); finish(); return; }
      if (isTrue(job, "SuccessCriteriaMet", "Complete") && !succeeded.has(name)) {
        succeeded.add(name);
        const run = runs[at.run] as (typeof runs)[number];
        for (const s of dag.steps) {
          if (!s.dependsOn?.includes(at.stepId)) continue;
          if (s.dependsOn.every((p) => succeeded.has(jobName(run.runId, p, 1)))) ready.push(run.jobs.get(s.stepId) as Job);
        }
      }
      if (isTrue(job, "Complete") && !completed.has(name)) {
        completed.add(name);
        active--;
        if (completed.size === total) { end = Date.now(); finish(); }
      }
      pump();
    });
    const cpu0 = cpuSnapshot();
    const api0 = await apiserverCounts(env);
    const t0 = Date.now();
    pump();
    const timer = setInterval(() => log(`baseline: ${Math.round((Date.now() - t0) / 1000)} s: ${completed.size}/${total} Jobs complete, ${active} active`), 10_000);
    const deadline = sleep(TIMEOUT_S * 1000).then(() => { failure ??= new Error(`baseline timed out after ${TIMEOUT_S} s: ${completed.size}/${total} Jobs complete`); });
    await Promise.race([allDone, deadline]);
    clearInterval(timer);
    if (failure) throw failure;
    const cpu1 = cpuSnapshot();
    const api1 = await apiserverCounts(env);
    const ids = runs.map((r) => r.runId);
    return {
      ms: end - t0, jobs: total, writes: client.writes(), dep: dependentLatencies(watches, ids),
      replaced: [...watches.podsPerJob.values()].filter((s) => s.size > 1).length,
      cpu: new Map([...cpu1].map(([k, v]) => [k, v - (cpu0.get(k) ?? 0)])),
      api: new Map([...api1.n].map(([k, v]) => [k, v - (api0.n.get(k) ?? 0)] as [string, number]).filter(([, v]) => v > 0)),
    };
  } finally {
    w?.stop();
    await stage?.stop();
    client.close();
    harness.close();
  }
}

/**
 * The Job controller's writes, from the apiserver's counters (no client label): jobs/status
 * updates, pod creates, and pod patches (its finalizer removals) less the stand-in's own
 * annotation patches (`standInWrites`). Nothing else writes those here.
 */
function jobControllerWrites(api: Map<string, number>, standInWrites: number): number {
  const n = (k: string) => api.get(k) ?? 0;
  return n("PUT jobs/status") + n("PATCH jobs/status") + n("POST pods") + Math.max(0, n("PATCH pods") + n("PUT pods") - standInWrites);
}

// ---------------------------------------------------------------------------------------------

const stops: Array<[string, () => Promise<void> | void]> = [];
let failed = false;
const benchStart = performance.now();
try {
  const stale = staleDist();
  if (stale.length) log(`warning: dist/ is older than ${stale.length} source file(s) (${stale.slice(0, 3).join(", ")}${stale.length > 3 ? ", …" : ""}): run \`make build\` to measure the current code`);
  for (const d of [PROF_DIR, DUMP_DIR]) if (d) mkdirSync(d, { recursive: true });
  const loadStart = load();
  log(`starting the full control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok) with ${NODES} kwok nodes, and MinIO; load average ${loadStart}`);
  const env = await startTestEnv({ kwokNodes: NODES });
  stops.push(["test environment", () => env.stop()]);
  await env.createNamespace(NS);
  const c = parseConfig({ ...env.env, OPERON_MODE: "cluster", OPERON_NAMESPACE: NS, PORT: "0" });
  if (!c.ok) throw new Error(c.message);
  const config = c.config;
  const store = await createStore(config, "");
  for (const org of [...ORGS, "warmup"]) await store.put(`orgs/${org}/workspaces/ws1/in.bam`, "bam");
  const harnessErrors: string[] = [];
  const onHarnessError = (e: unknown) => { if (harnessErrors.length < 20) harnessErrors.push(e instanceof Error ? e.message : String(e)); };

  // ---- Baseline: the control plane alone.
  log(`baseline: ${int(RUNS * STEPS)} Jobs created directly, ${BASELINE_LANES} active at most, children as their parents succeed`);
  const base = await baseline(env, config, store, "baseline", onHarnessError);
  const basePerMin = RUNS / (base.ms / 60_000);
  log(`baseline: ${f1(base.ms / 1000)} s (${int(basePerMin)} runs/min), dependent-step p50 ${int(pct(base.dep, 50))} ms p99 ${int(pct(base.dep, 99))} ms`);

  // ---- The operator, the api-server's engine, the stage-out stand-in and the bench's watches.
  const benchClient = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: NS });
  stops.push(["bench client", () => benchClient.close()]);
  const stage = await startStageOut({ client: benchClient, namespace: NS, store, decide: podRuns, onError: onHarnessError });
  stops.push(["stage-out stand-in", () => stage.stop()]);
  const w = await startWatches(benchClient, NS, onHarnessError);
  stops.push(["watches", () => w.stop()]);
  const apiLog: string[] = [];
  const apiStore = counted(store);
  const api = await createApiServerClusterEngine(config, apiStore.store, { kubeconfig: env.kubeconfigPath, log: (m) => apiLog.push(m) });
  stops.push(["api-server engine", () => api.stop()]);
  const op = await startOperatorProcess(env);
  stops.push(["operator process", () => op.stop()]);
  log(`operator pid ${op.pid} leads`);

  // Every run's end, as this process's PipelineRun informer sees it.
  const finished = new Map<string, RunRecord>();
  const check = async (id: string) => {
    if (finished.has(id)) return;
    const r = await api.engine.runs.get(id);
    if (r && TERMINAL.has(r.status) && !finished.has(id)) finished.set(id, r);
  };
  const unwatch = api.runs.watch((id) => { void check(id); });
  stops.push(["run watch", unwatch]);
  // A submit refused because the store timed out (MinIO on an overloaded machine) is tried again, as a client would on 503; counted.
  let submitRetries = 0;
  const submit = async (organization: string) => {
    for (let attempt = 1; ; attempt++) {
      let r: Awaited<ReturnType<typeof api.engine.submit>>;
      try {
        r = await api.engine.submit({ organization, workspace: "ws1", keyId: "key_bench", source: { kind: "inline" }, input: { bam: "in.bam" }, spec: dag });
      } catch (e) {
        if (attempt >= 3 || !/object store unavailable/i.test(String(e))) throw e;
        submitRetries++;
        continue;
      }
      if (!r.ok) throw new Error(`submit: ${r.error.message}`);
      return r.run.id;
    }
  };
  const waitFor = async (ids: string[], deadline: number, what: string, progress?: () => string) => {
    let lastPoll = Date.now();
    let lastProgress = Date.now();
    while (ids.some((id) => !finished.has(id))) {
      if (op.exit()) throw new Error(`the operator exited (${op.exit()}) during the bench:\n${op.tail()}`);
      if (Date.now() > deadline) {
        const done = ids.filter((id) => finished.has(id)).length;
        throw new Error(`timed out waiting for ${what}: ${done}/${ids.length} runs finished, ${w.jobsSeen.size} Jobs and ${w.podCreated.size} Jobs' pods seen, ${w.podSucceeded.size} pods Succeeded. ${await stateOf(ids)}\nOperator output (last lines):\n${op.tail()}`);
      }
      if (Date.now() - lastPoll > 5000) { lastPoll = Date.now(); await Promise.all(ids.filter((id) => !finished.has(id)).map(check)); }
      if (progress && Date.now() - lastProgress > 10_000) { lastProgress = Date.now(); log(progress()); }
      await sleep(50);
    }
  };

  /** Where things stand, for a timeout: run and step phases, and what the operator did since the burst began. */
  const since: { burst?: { writes: number; api: ApiCounts; cpu: number; at: number } } = {};
  const stateOf = async (ids: string[]): Promise<string> => {
    try {
      const recs = (await Promise.all(ids.map((id) => api.engine.runs.get(id)))).filter((r) => r !== undefined);
      const count = (xs: string[]) => [...xs.reduce((m, x) => m.set(x, (m.get(x) ?? 0) + 1), new Map<string, number>())].map(([k, n]) => `${n} ${k}`).join(", ");
      let text = `Runs: ${count(recs.map((r) => r.status))}; steps: ${count(recs.flatMap((r) => r.steps.map((st) => st.status + (st.waitingReason ? ` (${st.waitingReason})` : ""))))}.`;
      const burst = since.burst;
      if (burst) {
        const now = await apiserverCounts(env);
        const reqs = [...now.n].map(([k, n]) => [k, n - (burst.api.n.get(k) ?? 0)] as const).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${int(n)}`).join(", ");
        text += ` Since the submits began (${f1((Date.now() - burst.at) / 1000)} s): operator CPU ${f1(cpuSeconds(op.pid) - burst.cpu)} s, operator writes ${int((await metric(op, "operon_operator_api_writes_total")) - burst.writes)}; apiserver requests: ${reqs}.`;
      }
      return text;
    } catch (e) {
      return `(state unavailable: ${e instanceof Error ? e.message : String(e)})`;
    }
  };

  // ---- (0) Warm-up, one run at a time (also the unloaded reference for dependent latency).
  const warm: string[] = [];
  for (let i = 0; i < WARMUP_RUNS; i++) {
    const id = await submit("warmup");
    warm.push(id);
    await waitFor([id], Date.now() + 60_000, `warm-up run ${i + 1} (60 s)`);
  }

  // ---- (a) The burst.
  await sleep(1000);
  const idle0 = await metric(op, "operon_operator_api_writes_total");
  await sleep(4000);
  const writes0 = await metric(op, "operon_operator_api_writes_total");
  const idleRate = (writes0 - idle0) / 4; // writes/s of an idle leader: Lease renewals
  const apiWrites0 = api.client.writes();
  const standIn0 = benchClient.writes();
  const rssStartKb = statusKb(op.pid, "VmRSS");
  let rssMaxKb = rssStartKb;
  const sampler = setInterval(() => { rssMaxKb = Math.max(rssMaxKb, statusKb(op.pid, "VmRSS")); }, 200);
  stops.push(["RSS sampler", () => clearInterval(sampler)]);
  const api0 = await apiserverCounts(env);
  const starts0 = await stepStartSeries(op);
  const s3Calls0 = new Map(apiStore.calls);
  const cpu0 = cpuSnapshot(new Map([[op.pid, "operator"]]));
  const order = Array.from({ length: RUNS }, (_, i) => ORGS[i % ORGS.length] as string);
  log(`submitting ${RUNS} runs × ${STEPS} steps over ${ORGS.length} organizations (limit ${LIMIT}) at once; load average ${load()}`);
  const t0 = Date.now();
  since.burst = { writes: writes0, api: api0, cpu: cpuSeconds(op.pid), at: t0 };
  const ids = await Promise.all(order.map((org) => submit(org)));
  const submitMs = Date.now() - t0;
  const apiWrites = api.client.writes() - apiWrites0;
  await waitFor(ids, t0 + TIMEOUT_S * 1000, `the drain (${TIMEOUT_S} s; BENCH_TIMEOUT_SECONDS raises the limit)`, () => `${Math.round((Date.now() - t0) / 1000)} s: ${ids.filter((id) => finished.has(id)).length}/${RUNS} runs done, ${w.podSucceeded.size} pods Succeeded, operator RSS ${int(statusKb(op.pid, "VmRSS") / 1024)} MB`);
  const observedEnd = Date.now();
  const loadDrain = load();
  const writes1 = await metric(op, "operon_operator_api_writes_total");
  const starts1 = await stepStartSeries(op);
  const cpu1 = cpuSnapshot(new Map([[op.pid, "operator"]]));
  clearInterval(sampler);
  const rssEndKb = statusKb(op.pid, "VmRSS");
  const hwmKb = statusKb(op.pid, "VmHWM");
  rssMaxKb = Math.max(rssMaxKb, rssEndKb);
  const standInWrites = benchClient.writes() - standIn0;
  const api1 = await apiserverCounts(env);
  const s3Calls = [...apiStore.calls].map(([k, v]) => [k, v - (s3Calls0.get(k) ?? 0)] as const).filter(([, v]) => v > 0).map(([k, v]) => `${int(v)} ${k}`).join(", ");
  const delta = (a: Map<string, number>, b: Map<string, number>) => new Map([...b].map(([k, v]) => [k, v - (a.get(k) ?? 0)] as [string, number]).filter(([, v]) => v > 0.0001).sort((x, y) => y[1] - x[1]));
  const reqs = delta(api0.n, api1.n);
  const reqErrors = delta(api0.errors, api1.errors);
  const reqSeconds = delta(api0.seconds, api1.seconds);
  const requestTable = [...reqs].map(([k, n]) => `${k} ${int(n)} (mean ${int((1000 * (reqSeconds.get(k) ?? 0)) / n)} ms)`).join(", ");

  const runs = ids.map((id) => finished.get(id) as RunRecord);
  const bad = runs.filter((r) => r.status !== "completed");
  if (bad.length) throw new Error(`${bad.length} runs did not complete; first: ${bad[0]?.id} ${bad[0]?.status}: ${bad[0]?.error}`);
  const drainMs = Math.max(...runs.map((r) => Date.parse(r.completedAt ?? ""))) - t0;
  const perMin = RUNS / (drainMs / 60_000);
  const opWrites = writes1 - writes0;
  const leaseWrites = idleRate * ((observedEnd - t0) / 1000);
  const jcWrites = jobControllerWrites(reqs, standInWrites);
  const baseJcWrites = jobControllerWrites(base.api, base.jobs); // the stand-in patched each baseline pod once

  // (b) child pod first seen − latest parent pod seen Succeeded.
  const dep = dependentLatencies(w, ids);
  if (DUMP_DIR) {
    const raw = runs.map((r) => ({
      id: r.id, org: r.organization, createdAt: Date.parse(r.createdAt), completedAt: Date.parse(r.completedAt ?? ""),
      steps: Object.fromEntries(dag.steps.map((st) => { const j = jobName(r.id, st.stepId, 1); return [st.stepId, { podSeen: w.podCreated.get(j), podSucceeded: w.podSucceeded.get(j) }]; })),
    }));
    writeFileSync(join(DUMP_DIR, "runs.json"), JSON.stringify({ t0, submitMs, runs: raw }));
  }
  const depWarm = dependentLatencies(w, warm);
  const startFree = stepStartGroup(starts0, starts1, "free", "dependent");
  const startWaited = stepStartGroup(starts0, starts1, "waited", "dependent");
  const startFirst = ["free", "waited"].map((slot) => stepStartGroup(starts0, starts1, slot, "first"));
  const pctText = (x: number) => `${(100 * x).toFixed(1)} %`;
  const groupText = (g: ReturnType<typeof stepStartGroup>) => g.n === 0 ? "none" : `${int(g.n)} steps: ${pctText(g.underOne)} within 1 s, p50 ${g.p50}, p99 ${g.p99}, mean ${int(g.meanS * 1000)} ms`;

  // Every step ran once: one Job per step, attempt 1; pods replaced by the Job controller counted.
  const jobList = await benchClient.request<{ items: Job[] }>("GET", paths.jobs(NS), { query: { labelSelector: "operon.dev/run" } });
  const burstJobs = jobList.items.filter((j) => ids.includes(j.metadata.annotations?.[ANNOTATION.runId] ?? ""));
  const retried = burstJobs.filter((j) => j.metadata.annotations?.[ANNOTATION.attempt] !== "1").length;
  const replacedPods = burstJobs.filter((j) => (w.podsPerJob.get(j.metadata.name)?.size ?? 0) > 1).length;
  const drainMaxPerOrg = ORGS.map((o) => w.maxActivePerOrg.get(o) ?? 0).join(", ");
  const maxActiveWarm = w.maxActivePerOrg.get("warmup") ?? 0;
  const cpuDelta = (k: string) => (cpu1.get(k) ?? 0) - (cpu0.get(k) ?? 0);
  const cpuTotal = [...new Set([...cpu0.keys(), ...cpu1.keys()])].reduce((a, k) => a + Math.max(0, cpuDelta(k)), 0);
  const nodesUsed = [...w.perNode.values()];
  const cpuText = (d: (k: string) => number, withOperator = true) => `${withOperator ? `operator ${f1(d("operator"))}, ` : ""}kube-apiserver ${f1(d("kube-apiserver"))}, etcd ${f1(d("etcd"))}, kube-controller-manager ${f1(d("kube-controller"))}, kube-scheduler ${f1(d("kube-scheduler"))}, kwok ${f1(d("kwok"))}, MinIO ${f1(d("minio"))}, bench process ${f1(d("bench"))}`;

  // ---- (f) Steady load at the target rate: runs submitted one by one, evenly spaced.
  await sleep(2000);
  log(`steady load: ${STEADY_RUNS} runs at ${STEADY_PER_MIN} runs/min`);
  const steadyStarts0 = await stepStartSeries(op);
  const steadyCpu0 = cpuSnapshot(new Map([[op.pid, "operator"]]));
  const ts0 = Date.now();
  const pending: Array<Promise<string>> = [];
  for (let i = 0; i < STEADY_RUNS; i++) {
    const wait = ts0 + (i * 60_000) / STEADY_PER_MIN - Date.now();
    if (wait > 0) await sleep(wait);
    pending.push(submit(ORGS[i % ORGS.length] as string));
  }
  const steadyIds = await Promise.all(pending);
  const lastSubmit = Date.now();
  await waitFor(steadyIds, lastSubmit + TIMEOUT_S * 1000, "the steady-load runs");
  const steadyRuns = steadyIds.map((id) => finished.get(id) as RunRecord);
  const steadyBad = steadyRuns.filter((r) => r.status !== "completed");
  if (steadyBad.length) throw new Error(`${steadyBad.length} steady-load runs did not complete; first: ${steadyBad[0]?.id} ${steadyBad[0]?.status}: ${steadyBad[0]?.error}`);
  const steadyCpu1 = cpuSnapshot(new Map([[op.pid, "operator"]]));
  const steadyStarts1 = await stepStartSeries(op);
  const steadyDep = dependentLatencies(w, steadyIds);
  const steadyLagMs = Math.max(...steadyRuns.map((r) => Date.parse(r.completedAt ?? ""))) - lastSubmit;
  const steadyPace = STEADY_RUNS / ((lastSubmit - ts0) / 60_000);
  const steadyFree = stepStartGroup(steadyStarts0, steadyStarts1, "free", "dependent");
  const steadyWaited = stepStartGroup(steadyStarts0, steadyStarts1, "waited", "dependent");
  const steadyCpu = (k: string) => (steadyCpu1.get(k) ?? 0) - (steadyCpu0.get(k) ?? 0);
  const steadyCpuAll = [...new Set([...steadyCpu0.keys(), ...steadyCpu1.keys()])].reduce((a, k) => a + Math.max(0, steadyCpu(k)), 0);
  const maxActiveAll = Math.max(...ORGS.map((o) => w.maxActivePerOrg.get(o) ?? 0));
  const maxPodsAll = Math.max(...ORGS.map((o) => w.maxPodsPerOrg.get(o) ?? 0));
  const maxUnfinishedAll = Math.max(...ORGS.map((o) => w.maxUnfinishedPerOrg.get(o) ?? 0));

  // ---- Stop the operator (profile written on exit).
  await op.stop();
  let profile = "";
  if (PROF_DIR) {
    const files = readdirSync(PROF_DIR).filter((f) => f.endsWith(".cpuprofile")).map((f) => join(PROF_DIR, f)).sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
    profile = files[0] ? summarizeProfile(files[0]) : "(no .cpuprofile written)";
  }
  const loadEnd = load();

  const totalS = (performance.now() - benchStart) / 1000;
  const cores = cpus().length;
  const baseCpuAll = [...base.cpu.values()].reduce((a, v) => a + Math.max(0, v), 0);
  const section = `<!-- cluster:start -->
## Cluster mode: the operator against a real control plane (\`bench/cluster.bench.ts\`)

Measured ${new Date().toISOString().slice(0, 10)} on ${cores} × ${cpus()[0]?.model ?? "CPU"}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.versions.node}, with the real control plane (issue 18): etcd + kube-apiserver + kube-controller-manager (Job controller, garbage collector, TTL, pod GC, node lifecycle) + kube-scheduler, all ${K8S_VERSION}, and kwok with ${NODES} simulated nodes (cpu 64, 512 Gi each), + MinIO, on loopback (test/support/k8s-env.ts); the operator as its own process (\`node dist/cli/main.js operator\`, leader election on, ${WORKERS ?? 8} workers); the api-server's cluster engine, the stage-out stand-in and the bench's pod and Job watches in the bench process; everything shares the ${cores} cores. The Job controller creates every step's pod, the scheduler binds it, the stand-in uploads the step's declared outputs and releases it, kwok runs it to Succeeded after ${POD_MS} ms, the Job controller writes SuccessCriteriaMet and Complete; nothing patches Job status. ${DEFAULT_SIZES ? "" : `**Not the default sizes** (500 runs, 300 steady runs at 300/min, 10 nodes, 100 ms pods): ${RUNS} runs, ${STEADY_RUNS} steady runs at ${STEADY_PER_MIN}/min, ${NODES} nodes, ${POD_MS} ms pods. `}Whole bench ${f1(totalS)} s; load average (1/5/15 min) ${loadStart} at the start, ${loadDrain} after the drain, ${loadEnd} at the end.

| measure | result | the control plane alone (same run) |
|---|---|---|
| (a) drain: ${RUNS} runs × ${STEPS}-step DAG a → (b, c) → d → e over ${ORGS.length} organizations (org limit ${LIMIT}), submitted at once (submits returned after ${f1(submitMs / 1000)} s); first submit → last run completedAt | **${f1(drainMs / 1000)} s, ${int(perMin)} runs/min** (target ≥ 300) | the same ${int(RUNS * STEPS)} Jobs created by a direct client, ${BASELINE_LANES} active at most, each child once its parents succeeded: ${f1(base.ms / 1000)} s, ${int(basePerMin)} runs/min equivalent; **operator at ${(perMin / basePerMin).toFixed(2)} of it** |
| (b) dependent-step latency: the child step's pod first seen − the latest parent's pod seen Succeeded (the bench's pod watch), ${int(dep.length)} pairs | p50 ${int(pct(dep, 50))} ms, **p99 ${int(pct(dep, 99))} ms** (target ≤ 1,000 ms), max ${int(Math.max(...dep))} ms; unloaded (${WARMUP_RUNS} runs one at a time): p50 ${int(pct(depWarm, 50))} ms, p99 ${int(pct(depWarm, 99))} ms | the direct client's children, measured the same way (${int(base.dep.length)} pairs): p50 ${int(pct(base.dep, 50))} ms, p99 ${int(pct(base.dep, 99))} ms, max ${int(Math.max(...base.dep))} ms |
| (b′) the same pairs as the operator measures them (its \`operon_step_start_latency_seconds\`, from the parent Job's completion reaching its watch to the child's Job created), split by whether the child had to wait for an organization slot | **started with a free slot: ${groupText(startFree)}**; waited for a slot: ${groupText(startWaited)} | first steps (from submit): free slot ${groupText(startFirst[0] as ReturnType<typeof stepStartGroup>)}; waited ${groupText(startFirst[1] as ReturnType<typeof stepStartGroup>)} |
| (c) Kubernetes API writes by the operator (its \`operon_operator_api_writes_total\`) | **${f1(opWrites / (RUNS * STEPS))} per step** (target ≤ 15), ${f1(opWrites / RUNS)} per run, ${int(opWrites)} in all (≈ ${int(leaseWrites)} of them Lease renewals, ${f1(idleRate)}/s when idle); api-server side: ${f1(apiWrites / RUNS)} per run (PipelineRun create; its S3 calls for the ${RUNS} submits: ${s3Calls}) | direct client: ${f1(base.writes / base.jobs)} per step (the Job create). The Job controller (from \`apiserver_request_total\`: jobs/status updates + pod creates + pod patches less the stand-in's): ${f1(jcWrites / (RUNS * STEPS))} per step under the operator, ${f1(baseJcWrites / base.jobs)} per step in the baseline; the stand-in: ${f1(standInWrites / (RUNS * STEPS))} per step |
| (d) operator RSS | **peak ${int(hwmKb / 1024)} MB** (VmHWM; sampled VmRSS max ${int(rssMaxKb / 1024)} MB), ${int(rssStartKb / 1024)} MB before the burst, ${int(rssEndKb / 1024)} MB at the end of the drain | — |
| (e) most steps of one organization running at once, through the drain and the steady load: pods neither Succeeded nor Failed, from the bench's pod watch (the limit); and steps whose outcome is open (a Job without a Succeeded pod, SuccessCriteriaMet, FailureTarget, Complete or Failed: what the operator's ledger counts), from its Job and pod watches, two streams, so a step the operator already saw succeed can briefly count | **${maxPodsAll} pods** (must be ≤ ${LIMIT}); ${maxActiveAll} steps open (per org during the drain ${drainMaxPerOrg}) | Jobs not yet Complete/Failed, also counting those past SuccessCriteriaMet whose finished pod the Job controller still finalizes (no pod runs; the limit does not count them): at most ${maxUnfinishedAll} |
| Kubernetes API requests during the drain, all clients (apiserver's \`apiserver_request_total\`, mean server-side latency) | ${requestTable}${reqErrors.size ? `; not 2xx: ${[...reqErrors].map(([k, v]) => `${k} × ${int(v)}`).join(", ")}` : ""} | the baseline's: ${[...base.api].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${int(n)}`).join(", ")} |
| operator log during the bench | ${[...op.logged].filter(([k]) => k !== "other").map(([k, v]) => `${v.n} × ${k} (first: \`${v.first.replace(/[|`]/g, "")}\`)`).join("; ") || "no errors"} | — |
| CPU seconds during the drain (of ${f1((cores * drainMs) / 1000)} available) | ${cpuText(cpuDelta)}; all ${f1(cpuTotal)} | during the baseline (of ${f1((cores * base.ms) / 1000)}): ${cpuText((k) => base.cpu.get(k) ?? 0, false)}; all ${f1(baseCpuAll)} |
| (f) steady load: ${int(STEADY_RUNS)} more runs of the same DAG submitted one by one, evenly spaced at ${int(STEADY_PER_MIN)} runs/min (achieved ${int(steadyPace)}/min) over the same ${ORGS.length} organizations; the last run completed ${f1(steadyLagMs / 1000)} s after the last submit | dependent-step latency (as (b)): p50 ${int(pct(steadyDep, 50))} ms, **p99 ${int(pct(steadyDep, 99))} ms** (target ≤ 1,000 ms), max ${int(Math.max(...steadyDep))} ms; as the operator measures it: free slot ${groupText(steadyFree)}; waited ${groupText(steadyWaited)} | CPU seconds meanwhile (of ${f1((cores * (lastSubmit - ts0 + steadyLagMs)) / 1000)} available): all ${f1(steadyCpuAll)}, kube-apiserver ${f1(steadyCpu("kube-apiserver"))}, kube-controller-manager ${f1(steadyCpu("kube-controller"))}, operator ${f1(steadyCpu("operator"))} |

How measured: a step's time is the control plane's (Job controller → pod → scheduler → kwok → Job controller), the stand-in's (one MinIO upload per declared output and a pod annotation) and the operator's; the pod itself runs ${POD_MS} ms. A run's completedAt is the operator's (ms). (b) uses the bench's pod watch at both ends (pod creationTimestamp and containers' finishedAt carry whole seconds, too coarse): it covers the parent's pod Succeeded reaching the operator's pod watch (the operator reads the step's success from the pod, not from the Job controller's SuccessCriteriaMet), its work queue and reconcile (outputs read from MinIO, plan, admission under the org limit, Job create), the Job controller creating the child's pod, and the pod reaching the bench's watch. The baseline measures the same span with a direct client in place of the operator (it creates the child Job from its own Job watch, at SuccessCriteriaMet or Complete): the difference is the operator's share. (b′) is the operator's own histogram between the parent Job's end reaching its watch and the child's Job create acknowledged (bucketed, so p50/p99 are given as the bucket they fall in); "waited" when the child was first found ready with no slot free for it. (c) counts the operator's writes from just before the first submit to the last run seen completed (Jobs, PipelineRun status, Events, the Lease); \`apiserver_request_total\` has no client label, so the Job controller's share is derived from the verbs only it uses here. The baseline runs first, in its own namespace, with the same ${BASELINE_LANES} lanes (${ORGS.length} orgs × limit ${LIMIT}, the most the operator may run at once); ${int(RUNS * STEPS)} Jobs ÷ ${STEPS} steps gives its runs/min. Every client uses the admin token (system:masters, exempt from API Priority and Fairness); the controller manager and the scheduler run with their default client QPS. ${submitRetries ? `${submitRetries} submits refused with the object store unavailable (MinIO timing out under load) and tried again. ` : ""}${int(burstJobs.length)} Jobs for ${int(RUNS * STEPS)} steps, ${retried} retried by the operator, ${replacedPods} with a pod replaced by the Job controller (baseline: ${base.replaced}); pods spread over ${nodesUsed.length} nodes (${Math.min(...nodesUsed)}–${Math.max(...nodesUsed)} each).${harnessErrors.length ? ` Harness errors: ${harnessErrors.length} (first: ${harnessErrors[0]}).` : ""}${maxActiveWarm > LIMIT ? ` Warm-up org: ${maxActiveWarm} steps open at once.` : ""}
<!-- cluster:end -->`;
  process.stdout.write(section + "\n");
  if (profile) process.stdout.write(profile + "\n");
  if (DEFAULT_SIZES || RECORD) {
    const path = new URL("./RESULTS.md", import.meta.url);
    const current = readFileSync(path, "utf8");
    writeFileSync(path, /<!-- cluster:start -->[\s\S]*<!-- cluster:end -->/.test(current)
      ? current.replace(/<!-- cluster:start -->[\s\S]*<!-- cluster:end -->/, () => section)
      : current.trimEnd() + "\n\n" + section + "\n");
  } else {
    log("not the default set-up (BENCH_RUNS, BENCH_NODES, BENCH_POD_MS, BENCH_STEADY_*, BENCH_CPU_PROF_DIR, BENCH_DUMP_DIR, OPERON_OPERATOR_WORKERS, BENCH_OPERATOR_MAIN or BENCH_OPERATOR_NODE_ARGS set): bench/RESULTS.md left as it is");
  }
  if (maxPodsAll > LIMIT) {
    failed = true;
    log(`FAILED: an organization had ${maxPodsAll} pods running at once (limit ${LIMIT}; ${Math.max(maxActiveAll, maxActiveWarm)} steps open)`);
  }
} catch (e) {
  failed = true;
  log(`FAILED: ${e instanceof Error ? e.message : String(e)}`);
} finally {
  for (const [what, stop] of stops.reverse()) {
    try { await stop(); } catch (e) { log(`stopping the ${what}: ${e instanceof Error ? e.message : String(e)}`); }
  }
}
process.exit(failed ? 1 : 0);
