/**
 * Benchmark: Operon's operator against Argo Workflows and Tekton Pipelines on the same test
 * control plane, with the same workload, in one run (issue 19, the cluster half).
 *
 * Each system gets a fresh control plane of the same make (test/support/k8s-env.ts: etcd +
 * kube-apiserver + kube-controller-manager + kube-scheduler + kwok with BENCH_NODES simulated
 * nodes, all v1.34.4, on loopback), with the apiserver's audit log on (writes only, Metadata
 * level, batched: the apiserver's own record of who wrote what), one after the other.
 * The systems take turns, BENCH_ROUNDS (2) times over (a shared machine's load drifts; the
 * figures are the rounds' mean, latencies pooled), each on a fresh control plane.
 * Workload: BENCH_RUNS (default 100) runs of the 5-step DAG a → (b, c) → d → e over 10
 * organizations with at most 5 steps of one organization running at once, submitted at once,
 * after BENCH_WARMUP (3) runs one at a time (the unloaded reference). Pods run BENCH_POD_MS
 * (100 ms) on kwok nodes.
 *  - Operon: its operator as its own process (bench/cluster-harness.ts startOperatorProcess),
 *    the api-server's cluster engine submitting PipelineRuns, organizations org0…org9 in the
 *    operator's namespace with OPERON_ORG_CONCURRENCY=5; the Job controller creates the pods;
 *    the stage-out stand-in (test/support/job-sim.ts) uploads each step's outputs to MinIO and
 *    releases the pod.
 *  - Argo Workflows (bench/peers/argo.ts): namespaces org0…org9, each with a semaphore
 *    ConfigMap `steps: "5"` that every step template holds (what an Argo user writes for a
 *    per-team step limit); Workflows created by a plain client; the controller creates the pods;
 *    the executor stand-in makes the three WorkflowTaskResult writes of Argo's wait container
 *    and releases the pod. With Argo's defaults, and tuned for short steps (argo.ts ARGO_TUNED).
 *  - Tekton Pipelines (bench/peers/tekton.ts): namespaces org0…org9, each with a ResourceQuota
 *    `pods: 5` (Tekton has no limit of its own; kube-controller-manager's resourcequota
 *    controller is started for it); PipelineRuns with the same five tasks; the releaser lets
 *    each pod run once bound. With Tekton's defaults, and tuned (tekton.ts TEKTON_TUNED).
 * Both stand-ins release a pod only once it is bound to a node, and kwok then runs it for the
 * same duration: neither system's pods run before the other's would.
 * Measured per system:
 *  (a) drain: first submit → the last run seen finished by the bench's watch (PipelineRun
 *      through the api-server engine's run watch / Workflow phase Succeeded), runs/min;
 *  (b) dependent-step latency: a child step's pod first seen by the bench's pod watch − the
 *      latest of its parents' pods first seen Succeeded by the same watch (p50/p99); also in
 *      the unloaded warm-up;
 *  (c) API writes per step, from the audit log by User-Agent, over the burst: the system's
 *      controller (operon-operator / argo-workflows), its per-step executor (Argo's wait
 *      container: the stand-in's task-result writes; Operon's stage-out writes none), the
 *      submissions, the Job controller and every other client;
 *  (d) the controller's CPU seconds during the burst and its peak RSS (VmHWM);
 *  (e) the most pods of one organization neither Succeeded nor Failed at once (the bench's pod
 *      watch), against the limit of 5.
 * Writes the section "peers-cluster" of bench/RESULTS.md and the cluster table of README's
 * performance section (with the default sizes, or BENCH_RECORD=1).
 * Run: `make bench-peers` (builds Argo's controller once: bench/peers/peers-deps.sh), or
 * `npx tsx bench/peers/cluster.bench.ts`. Knobs: BENCH_RUNS, BENCH_ROUNDS, BENCH_WARMUP, BENCH_NODES,
 * BENCH_POD_MS, BENCH_TIMEOUT_SECONDS (per system, default 1200), BENCH_SYSTEMS
 * (comma-separated, default "operon,argo,argo-tuned": Argo with its defaults, and tuned for
 * short steps as bench/peers/argo.ts ARGO_TUNED says).
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { parseConfig } from "../../core/config.js";
import { ulid } from "../../core/ids.js";
import { jobName } from "../../core/kubernetes/pipelinerun.js";
import type { RunRecord } from "../../core/ports.js";
import { createApiServerClusterEngine, createStore } from "../../wiring/runtime.js";
import { createKubeClient, type KubeClient } from "../../adapters/kubernetes/client.js";
import { Informer, type KubeObject } from "../../adapters/kubernetes/informer.js";
import { startStageOut } from "../../test/support/job-sim.js";
import { K8S_VERSION, KWOK_VERSION, startTestEnv, type TestEnv } from "../../test/support/k8s-env.js";
import {
  STEPS, cpuSeconds, cpuSnapshot, dag, dependentLatencies, f1, int, loadAverage, pct, root, sleep, staleDist,
  startOperatorProcess, startPodReleaser, startWatches, statusKb, type ControllerProc,
} from "../cluster-harness.js";
import { writeSection } from "../serve.js";
import { ANNOTATION_NODE_NAME, ARGO_TUNED, ARGO_VERSION, argoDir, argoWorkflow, startArgo, startExecutorStandIn, type ArgoTuning } from "./argo.js";
import { TEKTON_LABELS, TEKTON_TUNED, TEKTON_VERSION, startQuotaController, startTekton, tektonAvailable, tektonNamespaceSetup, tektonPipelineRun, tektonRunDone, type TektonTuning } from "./tekton.js";

const RUNS = Number(process.env.BENCH_RUNS ?? 100);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 3);
const NODES = Number(process.env.BENCH_NODES ?? 10);
const POD_MS = Number(process.env.BENCH_POD_MS ?? 100);
const TIMEOUT_S = Number(process.env.BENCH_TIMEOUT_SECONDS ?? 1200);
const ORGS = Array.from({ length: 10 }, (_, i) => `org${i}`);
const LIMIT = 5;
const NS = "bench";
const DEFAULT_SIZES = RUNS === 100 && ROUNDS === 2 && WARMUP === 3 && NODES === 10 && POD_MS === 100;
const RECORD = DEFAULT_SIZES || process.env.BENCH_RECORD === "1";
const SYSTEMS = (process.env.BENCH_SYSTEMS ?? "operon,argo,argo-tuned,tekton,tekton-tuned").split(",").map((s) => s.trim()).filter(Boolean);

const log = (m: string) => process.stderr.write(`[peers cluster] ${m}\n`);

/** What one system did with the workload. */
interface Result {
  system: string;
  version: string;
  drainMs: number;
  submitMs: number;
  dep: number[];
  depWarm: number[];
  /** The controller's CPU seconds during the burst, and its peak RSS (kB). */
  controllerCpuS: number;
  controllerHwmKb: number;
  /** CPU seconds of every process during the burst, by name. */
  cpu: Map<string, number>;
  maxPodsPerOrg: number;
  /** Operon only: the most Jobs of one organization with an undecided outcome (what its limit counts). */
  maxStepsPerOrg?: number;
  /** Writes by client (User-Agent group) during the burst, from the audit log. */
  writes: Map<string, number>;
  /** Which groups are the system's own (controller, executor). */
  own: string[];
  notes: string[];
  loadAfter: string;
  /** The burst: first submit → last run finished (ms, this machine's clock). */
  window: [number, number];
  /** Where a run's time goes in the burst (ms): submit → first pod seen; a pod seen → seen Succeeded; last pod Succeeded → run seen finished. */
  phases: { firstPod: number[]; podLife: number[]; runEnd: number[] };
}

/** The burst's phases from the bench's own clock: per run, its submit, its steps' pods (seen, Succeeded) and its end. */
function phasesOf(runs: Array<{ submitted: number; finished: number; pods: Array<{ seen?: number; succeeded?: number }>; last: { succeeded?: number } }>): Result["phases"] {
  const out: Result["phases"] = { firstPod: [], podLife: [], runEnd: [] };
  for (const r of runs) {
    const first = r.pods[0]?.seen;
    if (first !== undefined) out.firstPod.push(first - r.submitted);
    for (const p of r.pods) if (p.seen !== undefined && p.succeeded !== undefined) out.podLife.push(p.succeeded - p.seen);
    if (r.last.succeeded !== undefined) out.runEnd.push(r.finished - r.last.succeeded);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The apiserver's audit log: every write, by client

const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`;

/** A client's group, from its User-Agent. */
function clientOf(ua: string): string {
  const rules: Array<[RegExp, string]> = [
    [/^operon-operator\b/, "Operon operator"],
    [/^operon-api-server\b/, "submissions"],
    [/^bench-submit\b/, "submissions"],
    [/^workflow-controller\/.*argo-controller/, "Argo controller"],
    [/^argoexec-stand-in\b/, "Argo executor (wait container)"],
    [/^controller\/|tekton/i, "Tekton controller"],
    [/^kube-controller-manager\/.*job-controller/, "Job controller"],
    [/^kube-controller-manager\//, "other kube-controller-manager controllers"],
    [/^kube-scheduler\//, "kube-scheduler"],
    [/^kwok\//, "kwok (the nodes)"],
    [/^bench-harness\b/, "bench harness (stand-ins' pod releases)"],
    [/^kubectl\//, "kubectl (set-up)"],
  ];
  for (const [re, name] of rules) if (re.test(ua)) return name;
  return `other (${ua.split(" ")[0] || "no User-Agent"})`;
}

interface AuditEvent { stage?: string; verb?: string; userAgent?: string; requestReceivedTimestamp?: string; objectRef?: { resource?: string; subresource?: string } }

/** Writes in [from, to] (ms), by client group; also by "group: verb resource" for the details. */
function auditWrites(file: string, from: number, to: number): { byClient: Map<string, number>; detail: Map<string, number> } {
  const byClient = new Map<string, number>();
  const detail = new Map<string, number>();
  const add = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (!line) continue;
    const e = JSON.parse(line) as AuditEvent;
    if (e.stage !== "ResponseComplete") continue;
    const at = Date.parse(e.requestReceivedTimestamp ?? "");
    if (!(at >= from && at <= to)) continue;
    const who = clientOf(e.userAgent ?? "");
    add(byClient, who);
    add(detail, `${who}: ${e.verb} ${e.objectRef?.resource ?? "?"}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ""}`);
  }
  return { byClient, detail };
}

async function startEnv(auditDir: string, minio: boolean): Promise<{ env: TestEnv; auditLog: string }> {
  writeFileSync(join(auditDir, "policy.yaml"), AUDIT_POLICY);
  const auditLog = join(auditDir, "audit.log");
  rmSync(auditLog, { force: true });
  const env = await startTestEnv({
    kwokNodes: NODES, minio,
    apiserverArgs: [`--audit-policy-file=${join(auditDir, "policy.yaml")}`, `--audit-log-path=${auditLog}`, "--audit-log-format=json",
      "--audit-log-mode=batch", "--audit-log-batch-max-wait=1s", "--audit-log-maxsize=0"],
  });
  return { env, auditLog };
}

/** The most members of one key's set at once. */
function maxCounter() {
  const sets = new Map<string, Set<string>>();
  const max = new Map<string, number>();
  return {
    set(key: string, member: string, present: boolean) {
      const s = sets.get(key) ?? new Set<string>();
      sets.set(key, s);
      if (!present) s.delete(member);
      else if (!s.has(member)) { s.add(member); max.set(key, Math.max(max.get(key) ?? 0, s.size)); }
    },
    max: (keys: string[]) => Math.max(0, ...keys.map((k) => max.get(k) ?? 0)),
  };
}

// ---------------------------------------------------------------------------------------------
// Operon

async function runOperon(env: TestEnv): Promise<Omit<Result, "writes">> {
  const stops: Array<() => Promise<void> | void> = [];
  try {
    await env.createNamespace(NS);
    const c = parseConfig({ ...env.env, OPERON_MODE: "cluster", OPERON_NAMESPACE: NS, PORT: "0" });
    if (!c.ok) throw new Error(c.message);
    const store = await createStore(c.config, "");
    for (const org of [...ORGS, "warmup"]) await store.put(`orgs/${org}/workspaces/ws1/in.bam`, "bam");
    const errors: string[] = [];
    const onError = (e: unknown) => { if (errors.length < 20) errors.push(e instanceof Error ? e.message : String(e)); };
    const harness = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: NS, userAgent: "bench-harness" });
    stops.push(() => harness.close());
    const stage = await startStageOut({ client: harness, namespace: NS, store, decide: () => ({ action: "succeed", runMs: POD_MS }), onError });
    stops.push(() => stage.stop());
    const w = await startWatches(harness, NS, onError);
    stops.push(() => w.stop());
    const api = await createApiServerClusterEngine(c.config, store, { kubeconfig: env.kubeconfigPath, log: () => undefined });
    stops.push(() => api.stop());
    const op = await startOperatorProcess(env, { namespace: NS, orgLimit: LIMIT });
    stops.push(() => op.stop());
    const finished = new Map<string, { at: number; run: RunRecord }>();
    const check = async (id: string) => {
      if (finished.has(id)) return;
      const r = await api.engine.runs.get(id);
      if (r && ["completed", "failed", "cancelled"].includes(r.status) && !finished.has(id)) finished.set(id, { at: Date.now(), run: r });
    };
    stops.push(api.runs.watch((id) => { void check(id); }));
    const submittedAt = new Map<string, number>();
    const submit = async (organization: string) => {
      const at = Date.now();
      const r = await api.engine.submit({ organization, workspace: "ws1", keyId: "key_bench", source: { kind: "inline" }, input: { bam: "in.bam" }, spec: dag });
      if (!r.ok) throw new Error(`submit: ${r.error.message}`);
      submittedAt.set(r.run.id, at);
      return r.run.id;
    };
    const waitFor = async (ids: string[], deadline: number, what: string) => {
      let lastPoll = Date.now();
      let lastLog = Date.now();
      while (ids.some((id) => !finished.has(id))) {
        if (op.exit()) throw new Error(`the operator exited (${op.exit()}):\n${op.tail()}`);
        if (Date.now() > deadline) throw new Error(`Operon: timed out waiting for ${what}: ${ids.filter((id) => finished.has(id)).length}/${ids.length} runs finished\n${op.tail()}`);
        if (Date.now() - lastPoll > 5000) { lastPoll = Date.now(); await Promise.all(ids.filter((id) => !finished.has(id)).map(check)); }
        if (Date.now() - lastLog > 15_000) { lastLog = Date.now(); log(`Operon: ${ids.filter((id) => finished.has(id)).length}/${ids.length} runs finished`); }
        await sleep(50);
      }
    };
    const warm: string[] = [];
    for (let i = 0; i < WARMUP; i++) { const id = await submit("warmup"); warm.push(id); await waitFor([id], Date.now() + 120_000, "a warm-up run"); }
    await sleep(2000);
    const cpu0 = cpuSeconds(op.pid);
    const all0 = cpuSnapshot(new Map([[op.pid, "controller"]]));
    const t0 = Date.now();
    const ids = await Promise.all(ORGS.flatMap((org, o) => Array.from({ length: RUNS / ORGS.length + (o < RUNS % ORGS.length ? 1 : 0) }, () => submit(org))));
    const submitMs = Date.now() - t0;
    await waitFor(ids, t0 + TIMEOUT_S * 1000, `the burst (${TIMEOUT_S} s)`);
    const end = Math.max(...ids.map((id) => finished.get(id)?.at ?? 0));
    const controllerCpuS = cpuSeconds(op.pid) - cpu0;
    const all1 = cpuSnapshot(new Map([[op.pid, "controller"]]));
    const bad = ids.map((id) => finished.get(id)?.run).filter((r) => r?.status !== "completed");
    if (bad.length) throw new Error(`Operon: ${bad.length} runs did not complete; first: ${bad[0]?.id} ${bad[0]?.status}: ${bad[0]?.error}`);
    const notes = errors.length ? [`harness errors: ${errors.length} (first: ${errors[0]})`] : [];
    return {
      system: "Operon", version: "this commit", drainMs: end - t0, submitMs,
      dep: dependentLatencies(w, ids), depWarm: dependentLatencies(w, warm),
      controllerCpuS, controllerHwmKb: statusKb(op.pid, "VmHWM"),
      cpu: new Map([...all1].map(([k, v]) => [k, v - (all0.get(k) ?? 0)])),
      maxPodsPerOrg: Math.max(...ORGS.map((o) => w.maxPodsPerOrg.get(o) ?? 0)),
      maxStepsPerOrg: Math.max(...ORGS.map((o) => w.maxActivePerOrg.get(o) ?? 0)),
      own: ["Operon operator"], notes, loadAfter: loadAverage(),
      window: [t0, end],
      phases: phasesOf(ids.map((id) => {
        const pod = (stepId: string) => { const j = jobName(id, stepId, 1); const seen = w.podCreated.get(j); const succeeded = w.podSucceeded.get(j); return { ...(seen !== undefined ? { seen } : {}), ...(succeeded !== undefined ? { succeeded } : {}) }; };
        return { submitted: submittedAt.get(id) ?? t0, finished: finished.get(id)?.at ?? end, pods: dag.steps.map((st) => pod(st.stepId)), last: pod(dag.steps.at(-1)?.stepId ?? "") };
      })),
    };
  } finally {
    for (const s of stops.reverse()) { try { await s(); } catch (e) { log(`Operon: stopping: ${String(e)}`); } }
  }
}

// ---------------------------------------------------------------------------------------------
// Argo Workflows

interface PeerPod extends KubeObject { metadata: KubeObject["metadata"] & { namespace?: string }; status?: { phase?: string } }
interface PeerRun extends KubeObject { metadata: KubeObject["metadata"] & { namespace?: string }; status?: Record<string, unknown> }

/** What differs between the peers (Argo, Tekton): the rest of a peer's run is `runPeer`. */
interface PeerDriver {
  system: string;
  version: string;
  notes: string[];
  /** Clients' writes that are the system's own (audit groups, see clientOf). */
  own: string[];
  /** Installs it and starts its controller(s): the first is the one measured as "the controller". */
  start(env: TestEnv, namespaces: string[], client: (userAgent: string) => Promise<KubeClient>, onError: (e: unknown) => void): Promise<{ controller: ControllerProc; others: Array<{ stop(): Promise<void> | void }>; released(): number }>;
  /** Its pods, and each pod's run and step (`<run>.<step>`). */
  podSelector: string;
  podKey(pod: PeerPod): string | undefined;
  /** Its run objects (cluster-wide path) and whether one succeeded ("True"), failed ("False") or runs on. */
  runsPath: string;
  outcome(run: PeerRun): { done?: "True" | "False"; message?: string };
  submitPath(ns: string): string;
  runObject(ns: string, name: string): Record<string, unknown>;
}

/** A peer through the same workload as Operon, measured the same way (module comment). */
async function runPeer(env: TestEnv, d: PeerDriver): Promise<Omit<Result, "writes">> {
  const stops: Array<() => Promise<void> | void> = [];
  try {
    for (const ns of [...ORGS, "warmup"]) await env.createNamespace(ns);
    const errors: string[] = [];
    const onError = (e: unknown) => { if (errors.length < 20) errors.push(e instanceof Error ? e.message : String(e)); };
    const clients: KubeClient[] = [];
    const client = async (userAgent: string) => { const c = await createKubeClient({ kubeconfig: env.kubeconfigPath, userAgent }); clients.push(c); return c; };
    stops.push(() => { for (const c of clients) c.close(); });
    const started = await d.start(env, [...ORGS, "warmup"], client, onError);
    const ctl = started.controller;
    stops.push(() => ctl.stop());
    for (const o of started.others) stops.push(() => o.stop());
    // The bench's watches: pods (first seen, first seen Succeeded, live per namespace) and runs (finished).
    const watch = await client("bench-watch");
    const podCreated = new Map<string, number>();
    const podSucceeded = new Map<string, number>();
    const live = maxCounter();
    const pods = new Informer<PeerPod>({
      client: watch, path: "/api/v1/pods", labelSelector: d.podSelector, onError,
      onChange: (pod) => {
        const now = Date.now();
        const key = d.podKey(pod);
        if (!key) return;
        if (!podCreated.has(key)) podCreated.set(key, now);
        if (pod.status?.phase === "Succeeded" && !podSucceeded.has(key)) podSucceeded.set(key, now);
        const gone = pods.get(pod.metadata.name) === undefined;
        live.set(pod.metadata.namespace ?? "", pod.metadata.name, !gone && pod.status?.phase !== "Succeeded" && pod.status?.phase !== "Failed");
      },
    });
    const finished = new Map<string, number>();
    const failures: string[] = [];
    const runs = new Informer<PeerRun>({
      client: watch, path: d.runsPath, onError,
      // Only what `outcome` reads: a run's status can be large (Argo keeps every node in it).
      transform: (r) => ({ metadata: r.metadata, ...(r.status ? { status: { phase: r.status.phase, message: r.status.message, conditions: r.status.conditions } } : {}) }) as PeerRun,
      onChange: (r) => {
        const o = d.outcome(r);
        if (o.done === "True" && !finished.has(r.metadata.name)) finished.set(r.metadata.name, Date.now());
        if (o.done === "False" && !failures.includes(r.metadata.name)) failures.push(`${r.metadata.name}: ${o.message ?? "failed"}`);
      },
    });
    await Promise.all([pods.start(), runs.start()]);
    stops.push(() => { pods.stop(); runs.stop(); });
    const submitter = await client("bench-submit");
    const submittedAt = new Map<string, number>();
    const submit = async (ns: string) => {
      const name = `run-${ulid(Date.now(), randomBytes(10)).toLowerCase()}`;
      submittedAt.set(name, Date.now());
      await submitter.request("POST", d.submitPath(ns), { body: d.runObject(ns, name) });
      return name;
    };
    const waitFor = async (names: string[], deadline: number, what: string) => {
      let lastLog = Date.now();
      while (names.some((n) => !finished.has(n))) {
        if (ctl.exit()) throw new Error(`${d.system}: the controller exited (${ctl.exit()}):\n${ctl.tail()}`);
        if (failures.length) throw new Error(`${d.system}: runs failed: ${failures.slice(0, 3).join("; ")}`);
        if (Date.now() > deadline) throw new Error(`${d.system}: timed out waiting for ${what}: ${names.filter((n) => finished.has(n)).length}/${names.length} runs finished, ${started.released()} pods released; controller:\n${ctl.tail()}`);
        if (Date.now() - lastLog > 15_000) { lastLog = Date.now(); log(`${d.system}: ${names.filter((n) => finished.has(n)).length}/${names.length} runs finished, ${podSucceeded.size} pods Succeeded`); }
        await sleep(50);
      }
    };
    const latencies = (names: string[]) => names.flatMap((run) => dag.steps.filter((s) => s.dependsOn?.length).map((s) => {
      const child = podCreated.get(`${run}.${s.stepId}`);
      const parents = (s.dependsOn ?? []).map((p) => podSucceeded.get(`${run}.${p}`));
      if (child === undefined || parents.some((x) => x === undefined)) throw new Error(`${d.system}: run ${run} step ${s.stepId}: its pod or a parent's Succeeded pod was not seen`);
      return child - Math.max(...(parents as number[]));
    }));
    const warm: string[] = [];
    for (let i = 0; i < WARMUP; i++) { const n = await submit("warmup"); warm.push(n); await waitFor([n], Date.now() + 180_000, "a warm-up run"); }
    await sleep(2000);
    const cpu0 = cpuSeconds(ctl.pid);
    const all0 = cpuSnapshot(new Map([[ctl.pid, "controller"]]));
    const t0 = Date.now();
    const names = await Promise.all(ORGS.flatMap((org, o) => Array.from({ length: RUNS / ORGS.length + (o < RUNS % ORGS.length ? 1 : 0) }, () => submit(org))));
    const submitMs = Date.now() - t0;
    await waitFor(names, t0 + TIMEOUT_S * 1000, `the burst (${TIMEOUT_S} s)`);
    const end = Math.max(...names.map((n) => finished.get(n) ?? 0));
    const controllerCpuS = cpuSeconds(ctl.pid) - cpu0;
    const all1 = cpuSnapshot(new Map([[ctl.pid, "controller"]]));
    return {
      system: d.system, version: d.version, drainMs: end - t0, submitMs,
      dep: latencies(names), depWarm: latencies(warm),
      controllerCpuS, controllerHwmKb: statusKb(ctl.pid, "VmHWM"),
      cpu: new Map([...all1].map(([k, v]) => [k, v - (all0.get(k) ?? 0)])),
      maxPodsPerOrg: live.max(ORGS),
      own: d.own, notes: [...d.notes, ...(errors.length ? [`harness errors: ${errors.length} (first: ${errors[0]})`] : [])], loadAfter: loadAverage(),
      window: [t0, end],
      phases: phasesOf(names.map((run) => {
        const pod = (stepId: string) => { const seen = podCreated.get(`${run}.${stepId}`); const succeeded = podSucceeded.get(`${run}.${stepId}`); return { ...(seen !== undefined ? { seen } : {}), ...(succeeded !== undefined ? { succeeded } : {}) }; };
        return { submitted: submittedAt.get(run) ?? t0, finished: finished.get(run) ?? end, pods: dag.steps.map((st) => pod(st.stepId)), last: pod(dag.steps.at(-1)?.stepId ?? "") };
      })),
    };
  } finally {
    for (const s of stops.reverse()) { try { await s(); } catch (e) { log(`${d.system}: stopping: ${String(e)}`); } }
  }
}

/** Argo Workflows (bench/peers/argo.ts), with its defaults or tuned for short steps. */
const argoDriver = (tuning?: ArgoTuning): PeerDriver => ({
  system: tuning ? "Argo Workflows, tuned" : "Argo Workflows", version: ARGO_VERSION,
  notes: [tuning ? `DEFAULT_REQUEUE_TIME=${tuning.requeue}, --qps=${tuning.qps} --burst=${tuning.burst}` : "Argo's defaults (DEFAULT_REQUEUE_TIME 10 s, 20 QPS, burst 30)"],
  own: ["Argo controller", "Argo executor (wait container)"],
  async start(env, namespaces, client, onError) {
    const controller = await startArgo(env, { namespaces, limit: LIMIT, ...(tuning ? { tuning } : {}) });
    const standIn = await startExecutorStandIn({ client: await client("argoexec-stand-in"), harness: await client("bench-harness"), onError });
    return { controller, others: [standIn], released: standIn.released };
  },
  podSelector: "workflows.argoproj.io/workflow",
  podKey: (pod) => pod.metadata.annotations?.[ANNOTATION_NODE_NAME],
  runsPath: "/apis/argoproj.io/v1alpha1/workflows",
  outcome: (wf) => {
    const phase = wf.status?.phase;
    return phase === "Succeeded" ? { done: "True" } : phase === "Failed" || phase === "Error" ? { done: "False", message: `${String(phase)}: ${String(wf.status?.message ?? "")}` } : {};
  },
  submitPath: (ns) => `/apis/argoproj.io/v1alpha1/namespaces/${ns}/workflows`,
  runObject: (ns, name) => argoWorkflow(ns, name, POD_MS),
});

/** Tekton Pipelines (bench/peers/tekton.ts), with its defaults or tuned; a ResourceQuota per namespace is the limit. */
const tektonDriver = (tuning?: TektonTuning): PeerDriver => ({
  system: tuning ? "Tekton Pipelines, tuned" : "Tekton Pipelines", version: TEKTON_VERSION,
  notes: [
    tuning ? `-kube-api-qps=${tuning.kubeApiQps} -kube-api-burst=${tuning.kubeApiBurst} -threads-per-controller=${tuning.threadsPerController}` : "Tekton's defaults (20 requests/s, 2 workers per reconciler)",
    "the limit is a ResourceQuota pods: 5 per namespace (Tekton has none of its own), enforced by kube-controller-manager's resourcequota controller, started for this run",
  ],
  own: ["Tekton controller"],
  async start(env, namespaces, client, onError) {
    await env.kubectl(["apply", "-f", "-"], { input: JSON.stringify({ apiVersion: "v1", kind: "List", items: namespaces.flatMap((ns) => tektonNamespaceSetup(ns, LIMIT)) }) });
    const quota = await startQuotaController(env);
    const controller = await startTekton(env, { namespaces, ...(tuning ?? {}) });
    const releaser = await startPodReleaser({ harness: await client("bench-harness"), labelSelector: TEKTON_LABELS.pipelineRun, onError });
    return { controller, others: [releaser, quota], released: releaser.released };
  },
  podSelector: TEKTON_LABELS.pipelineRun,
  podKey: (pod) => {
    const run = pod.metadata.labels?.[TEKTON_LABELS.pipelineRun];
    const task = pod.metadata.labels?.[TEKTON_LABELS.pipelineTask];
    return run && task ? `${run}.${task}` : undefined;
  },
  runsPath: "/apis/tekton.dev/v1/pipelineruns",
  outcome: (pr) => { const done = tektonRunDone(pr as Parameters<typeof tektonRunDone>[0]); return done ? { done } : {}; },
  submitPath: (ns) => `/apis/tekton.dev/v1/namespaces/${ns}/pipelineruns`,
  runObject: (ns, name) => tektonPipelineRun(ns, name, POD_MS) as Record<string, unknown>,
});

// ---------------------------------------------------------------------------------------------

const runners: Record<string, { available: () => string | undefined; run: (env: TestEnv) => Promise<Omit<Result, "writes">>; minio: boolean }> = {
  operon: { available: () => (existsSync(join(root, "dist/operator/cluster.js")) ? undefined : "run `make build` first"), run: runOperon, minio: true },
  argo: { available: () => (argoDir() ? undefined : "not built: bash bench/peers/peers-deps.sh"), run: (env) => runPeer(env, argoDriver()), minio: false },
  "argo-tuned": { available: () => (argoDir() ? undefined : "not built: bash bench/peers/peers-deps.sh"), run: (env) => runPeer(env, argoDriver(ARGO_TUNED)), minio: false },
  tekton: { available: () => (tektonAvailable() ? undefined : "not built: bash bench/peers/peers-deps.sh"), run: (env) => runPeer(env, tektonDriver()), minio: false },
  "tekton-tuned": { available: () => (tektonAvailable() ? undefined : "not built: bash bench/peers/peers-deps.sh"), run: (env) => runPeer(env, tektonDriver(TEKTON_TUNED)), minio: false },
};

const rounds: Result[] = [];
const skipped: string[] = [];
const loadStart = loadAverage();
const benchStart = performance.now();
let failed = false;
const stale = staleDist();
if (stale.length) log(`warning: dist/ is older than ${stale.length} source file(s): run \`make build\` to measure the current code`);
for (let round = 1; round <= ROUNDS; round++) for (const name of SYSTEMS) {
  const r = runners[name];
  if (!r) { log(`unknown system ${name}`); failed = true; continue; }
  const why = r.available();
  if (why) { if (round === 1) { skipped.push(`${name}: ${why}`); log(`skipping ${name}: ${why}`); } failed = true; continue; }
  const auditDir = mkdtempSync(join(tmpdir(), "operon-peers-audit-"));
  let env: TestEnv | undefined;
  try {
    log(`round ${round}/${ROUNDS}, ${name}: starting a fresh control plane with ${NODES} kwok nodes (load average ${loadAverage()})`);
    const started = await startEnv(auditDir, r.minio);
    env = started.env;
    const res = await r.run(env);
    await sleep(3000); // the audit log's batch (1 s) reaches the file
    const { byClient, detail } = auditWrites(started.auditLog, res.window[0], res.window[1]);
    rounds.push({ ...res, writes: byClient });
    log(`${res.system}: drain ${f1(res.drainMs / 1000)} s, dependent p50 ${int(pct(res.dep, 50))} ms p99 ${int(pct(res.dep, 99))} ms; writes: ${[...byClient].map(([k, v]) => `${k} ${int(v)}`).join(", ")}`);
    log(`${res.system}: writes in detail: ${[...detail].sort((a, b) => b[1] - a[1]).slice(0, 20).map(([k, v]) => `${k} ${int(v)}`).join(", ")}`);
  } catch (e) {
    failed = true;
    log(`${name} FAILED: ${e instanceof Error ? e.message : String(e)}`);
  } finally {
    await env?.stop();
    rmSync(auditDir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// Report

/** Each system's rounds as one: latencies and phases pooled, writes and CPU per round, the highest peak RSS and pod count, the drain of every round. */
const merged = (xs: Result[]): Result & { drains: number[] } => {
  const first = xs[0] as Result;
  const sum = (f: (r: Result) => number) => xs.reduce((a, r) => a + f(r), 0);
  const perRound = (maps: Array<Map<string, number>>) => { const out = new Map<string, number>(); for (const m of maps) for (const [k, v] of m) out.set(k, (out.get(k) ?? 0) + v / xs.length); return out; };
  return {
    ...first,
    drains: xs.map((r) => r.drainMs),
    drainMs: sum((r) => r.drainMs) / xs.length,
    submitMs: sum((r) => r.submitMs) / xs.length,
    dep: xs.flatMap((r) => r.dep), depWarm: xs.flatMap((r) => r.depWarm),
    controllerCpuS: sum((r) => r.controllerCpuS) / xs.length,
    controllerHwmKb: Math.max(...xs.map((r) => r.controllerHwmKb)),
    cpu: perRound(xs.map((r) => r.cpu)), writes: perRound(xs.map((r) => r.writes)),
    maxPodsPerOrg: Math.max(...xs.map((r) => r.maxPodsPerOrg)),
    ...(first.maxStepsPerOrg !== undefined ? { maxStepsPerOrg: Math.max(...xs.map((r) => r.maxStepsPerOrg ?? 0)) } : {}),
    notes: [...new Set(xs.flatMap((r) => r.notes))], loadAfter: xs.map((r) => r.loadAfter).join("; "),
    phases: { firstPod: xs.flatMap((r) => r.phases.firstPod), podLife: xs.flatMap((r) => r.phases.podLife), runEnd: xs.flatMap((r) => r.phases.runEnd) },
  };
};
const results = [...new Set(rounds.map((r) => r.system))].map((system) => merged(rounds.filter((r) => r.system === system)));
const steps = RUNS * STEPS;
const perStep = (r: Result, groups: string[]) => groups.reduce((a, g) => a + (r.writes.get(g) ?? 0), 0) / steps;
const allWrites = (r: Result) => [...r.writes.values()].reduce((a, b) => a + b, 0) / steps;
/** Runs/min: the mean of the rounds' rates. */
const perMin = (r: Result & { drains: number[] }) => r.drains.reduce((a, d) => a + RUNS / (d / 60_000), 0) / r.drains.length;
const operon = results.find((r) => r.system === "Operon");
const ratio = (x: number, y: number) => (y > 0 ? x / y : NaN);
type Merged = (typeof results)[number];
const row = (label: string, f: (r: Merged) => string) => `| ${label} | ${results.map(f).join(" | ")} |`;
const vs = (r: Merged, f: (r: Merged) => number, better: "higher" | "lower") => {
  if (!operon || r === operon) return "";
  const x = ratio(f(operon), f(r));
  return ` (Operon ${better === "higher" ? `${x.toFixed(1)}×` : `${x < 1 ? `1/${(1 / x).toFixed(1)}` : `${x.toFixed(1)}×`}`})`;
};
const machine = `${cpus().length} × ${cpus()[0]?.model ?? "CPU"}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.versions.node}`;
const table = [
  `| | ${results.map((r) => `${r.system} (${r.version})`).join(" | ")} |`,
  `|---|${results.map(() => "---|").join("")}`,
  row(`drain: ${RUNS} runs submitted at once, runs/min (mean of ${ROUNDS} rounds)`, (r) => `**${int(perMin(r))}**${vs(r, perMin, "higher")} (rounds: ${r.drains.map((d) => `${f1(d / 1000)} s`).join(", ")})`),
  row("dependent-step latency, in the burst: p50 / p99", (r) => `${int(pct(r.dep, 50))} ms / **${int(pct(r.dep, 99))} ms**${vs(r, (x) => pct(x.dep, 99), "lower")}`),
  row(`dependent-step latency, unloaded (${WARMUP} runs one at a time): p50 / p99`, (r) => `${int(pct(r.depWarm, 50))} ms / ${int(pct(r.depWarm, 99))} ms`),
  row("in the burst, p50 / p99: submit → first pod; a pod seen → Succeeded; last pod Succeeded → run finished", (r) => `${int(pct(r.phases.firstPod, 50))} / ${int(pct(r.phases.firstPod, 99))} ms; ${int(pct(r.phases.podLife, 50))} / ${int(pct(r.phases.podLife, 99))} ms; ${int(pct(r.phases.runEnd, 50))} / ${int(pct(r.phases.runEnd, 99))} ms`),
  row("API writes per step: the system's own (controller + its executor)", (r) => `**${f1(perStep(r, r.own))}** (${r.own.map((g) => `${g} ${f1(perStep(r, [g]))}`).join(", ")})`),
  row("API writes per step: every client (Job controller, scheduler, kwok, submissions…)", (r) => `${f1(allWrites(r))} (${[...r.writes].filter(([g]) => !r.own.includes(g)).sort((a, b) => b[1] - a[1]).map(([g, n]) => `${g} ${f1(n / steps)}`).join(", ")})`),
  row("controller CPU seconds during the burst / peak RSS", (r) => `${f1(r.controllerCpuS)} s / ${int(r.controllerHwmKb / 1024)} MB`),
  row(`most pods of one organization running at once (limit ${LIMIT})`, (r) => `${r.maxPodsPerOrg}${r.maxPodsPerOrg > LIMIT ? " **exceeded**" : " (held)"}${r.maxStepsPerOrg !== undefined ? `; undecided Jobs ${r.maxStepsPerOrg}` : ""}`),
  row("CPU seconds of every process during the burst", (r) => `${f1([...r.cpu.values()].reduce((a, b) => a + Math.max(0, b), 0))} (kube-apiserver ${f1(r.cpu.get("kube-apiserver") ?? 0)}, etcd ${f1(r.cpu.get("etcd") ?? 0)}, kube-controller-manager ${f1(r.cpu.get("kube-controller") ?? 0)}, controller ${f1(r.cpu.get("controller") ?? 0)}, bench ${f1(r.cpu.get("bench") ?? 0)})`),
].join("\n");
const targets = results.filter((r) => r !== operon).map((r) => {
  if (!operon) return "";
  const drain = ratio(perMin(operon), perMin(r));
  const p99 = ratio(pct(operon.dep, 99), pct(r.dep, 99));
  const w = [perStep(operon, operon.own), perStep(r, r.own)] as const;
  return `Against ${r.system}: drain ${drain.toFixed(2)}× (target ≥ 3×: ${drain >= 3 ? "met" : `missed, short by ${f1(3 * perMin(r) - perMin(operon))} runs/min`}); dependent-step p99 ${p99 < 1 ? `1/${(1 / p99).toFixed(1)}` : `${p99.toFixed(2)}×`} (target ≤ 1/10: ${p99 <= 0.1 ? "met" : `missed by ${int(pct(operon.dep, 99) - pct(r.dep, 99) / 10)} ms`}); own writes per step ${f1(w[0])} vs ${f1(w[1])} (target fewer: ${w[0] < w[1] ? "met" : "missed"}).`;
}).join(" ");
const section = `<!-- peers-cluster:start -->
## Operon against Argo Workflows and Tekton on the same control plane (\`bench/peers/cluster.bench.ts\`)

Measured ${new Date().toISOString().slice(0, 10)} on ${machine}; load average ${loadStart} at the start, ${results.map((r) => `${r.loadAfter} after ${r.system}`).join(", ")}; whole bench ${f1((performance.now() - benchStart) / 1000)} s. Each system on a fresh control plane of the same make: etcd + kube-apiserver + kube-controller-manager + kube-scheduler ${K8S_VERSION}, kwok ${KWOK_VERSION} with ${NODES} nodes, the apiserver's audit log on (writes, Metadata level, batched). ${DEFAULT_SIZES ? "" : "**Not the default sizes.** "}The systems took turns, ${ROUNDS} round(s) (figures: the rounds' mean; latencies pooled). Workload: ${RUNS} runs of the 5-step DAG a → (b, c) → d → e over ${ORGS.length} organizations, at most ${LIMIT} steps of one organization at once, submitted at once after ${WARMUP} warm-up runs one at a time; pods run ${POD_MS} ms on kwok nodes, released by each system's stand-in once bound (Operon: the stage-out's upload to MinIO; Argo: the wait container's three task-result writes; Tekton: nothing to write). Operon: the operator process, OPERON_ORG_CONCURRENCY=${LIMIT}, organizations in one namespace, the Job controller makes the pods. Argo: default configuration but its metrics port, one namespace per organization with a semaphore \`steps: "${LIMIT}"\` held by every step template. Tekton: default configuration but its ports, the CRDs without their conversion webhook (no webhook runs), a ResourceQuota \`pods: ${LIMIT}\` per namespace${results.filter((r) => r.notes.length).map((r) => `; ${r.system}: ${r.notes.join("; ")}`).join("")}.${skipped.length ? ` Not run: ${skipped.join("; ")}.` : ""}

${table}

${targets}

How measured: drain from the first submit to the last run the bench's own watch saw finished (Operon's PipelineRun through the api-server engine; Argo's Workflow phase Succeeded; Tekton's PipelineRun condition Succeeded). Dependent-step latency: the child step's pod first seen by the bench's pod watch − the latest of its parents' pods first seen Succeeded by the same watch, over the ${int(RUNS * 4)} dependent steps. API writes: the apiserver's audit log (ResponseComplete events of create/update/patch/delete) between the first submit and the last run finished, grouped by User-Agent (Operon's clients send \`operon-operator\`, \`operon-api-server\`; Argo's controller \`workflow-controller/… argo-controller\`, Tekton's \`controller/…\`; the stand-ins and the bench their own), ÷ ${int(steps)} steps. An Operon step is a Job, so the Job controller's pod create and its status writes come with it (listed under every client); Argo and Tekton create pods themselves (Tekton a TaskRun per step first) and keep a run's state in their own objects. CPU from /proc (utime + stime), RSS from VmHWM.

What each peer needed here (beyond its binary and CRDs): Argo — a ConfigMap for its metrics port, LEADER_ELECTION_IDENTITY, and in place of its wait container (argoexec does not run on a kwok node) the three WorkflowTaskResult writes a step without outputs makes, or the controller never counts the step done. Tekton — its CRDs with conversion strategy None (no webhook server runs; only v1 objects are used), the ConfigMaps it watches (empty: the release defaults), the image flags (nothing pulls them), its ports moved except knative's health probe, which always binds :8080 (one Tekton per machine), a \`default\` ServiceAccount per namespace (no service-account controller here), step commands written out (else it asks the image's registry for the entrypoint), and, for the per-namespace limit, kube-controller-manager's resourcequota controller (the test control plane does not run it; without it a ResourceQuota limits nothing); a TaskRun refused by the quota is retried after a fixed minute, nothing wakes it when a slot frees (bench/peers/tekton.ts).
<!-- peers-cluster:end -->`;
process.stdout.write(section + "\n");
if (RECORD && results.length === SYSTEMS.length && rounds.length === SYSTEMS.length * ROUNDS && !failed) {
  writeSection("peers-cluster", section);
  const readme = `<!-- peers-cluster:start -->
On the test control plane (\`make bench-peers\`, ${new Date().toISOString().slice(0, 10)}, ${cpus().length} cores): ${RUNS} runs of a 5-step DAG over ${ORGS.length} organizations, at most ${LIMIT} steps each at once, pods of ${POD_MS} ms on ${NODES} kwok nodes, each system on a fresh Kubernetes ${K8S_VERSION} control plane.

${table.split("\n").filter((l) => !/every process|every client/.test(l)).join("\n")}

${targets} Details and the method: [bench/RESULTS.md](bench/RESULTS.md), section "Operon against Argo Workflows and Tekton".
<!-- peers-cluster:end -->`;
  const readmePath = join(root, "README.md");
  const current = readFileSync(readmePath, "utf8");
  const re = /<!-- peers-cluster:start -->[\s\S]*<!-- peers-cluster:end -->/;
  writeFileSync(readmePath, re.test(current) ? current.replace(re, () => readme) : current.replace(/<!-- The cluster half[^\n]*-->/, () => readme));
  log("bench/RESULTS.md section peers-cluster and README's cluster table written");
} else if (!RECORD) log("not the default sizes: bench/RESULTS.md and README.md left as they are (BENCH_RECORD=1 writes them)");
process.exit(failed ? 1 : 0);
