/**
 * What the cluster benches share (bench/cluster.bench.ts, bench/peers/cluster.bench.ts): /proc
 * readings of the processes they start (CPU seconds, RSS), the operator as its own process, the
 * apiserver's request counters, the 5-step bench DAG and the bench's own pod and Job watches
 * that time its steps. One definition of each, so that Operon alone and Operon next to its peers
 * are measured the same way.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { appendFileSync, existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { ANNOTATION, LABEL, jobName } from "../core/kubernetes/pipelinerun.js";
import type { JobObject } from "../core/kubernetes/jobs.js";
import type { PipelineSpec } from "../core/spec/schema.js";
import { paths, type KubeClient } from "../adapters/kubernetes/client.js";
import { Informer, type KubeObject } from "../adapters/kubernetes/informer.js";
import { KWOK_ANNOTATION, type TestEnv } from "../test/support/k8s-env.js";
import { freePorts } from "../test/support/minio.js";

/** The repository's root folder. */
export const root = fileURLToPath(new URL("..", import.meta.url));
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
export const f1 = (x: number) => x.toFixed(1);
export const int = (x: number) => Math.round(x).toLocaleString("en");
const sorted = (xs: number[]) => xs.slice().sort((a, b) => a - b);
/** Nearest-rank percentile. */
export const pct = (xs: number[], p: number) => { const s = sorted(xs); return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? NaN; };
/** The 1, 5 and 15 minute load averages. */
export const loadAverage = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

/** Source files newer than the dist/ the operator process runs: measured code may be stale. */
export function staleDist(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(".ts")) {
        const js = join(root, "dist", relative(root, p)).replace(/\.ts$/, ".js");
        if (!existsSync(js) || statSync(js).mtimeMs < statSync(p).mtimeMs) out.push(relative(root, p));
      }
    }
  };
  for (const d of ["core", "adapters", "operator", "api-server", "cli"]) walk(join(root, d));
  return out;
}

// ---------------------------------------------------------------------------------------------
// /proc readings

export function statusKb(pid: number, field: "VmRSS" | "VmHWM"): number {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : 0;
  } catch { return 0; }
}

const CLK_TCK = 100;
/** utime + stime of a process, seconds. */
export function cpuSeconds(pid: number): number {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12])) / CLK_TCK;
  } catch { return 0; }
}

/** Descendant processes of this one by command name (etcd, kube-apiserver, minio, node…). */
export function descendants(): Map<string, number[]> {
  const parent = new Map<number, number>();
  const comm = new Map<number, string>();
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const s = readFileSync(`/proc/${e}/stat`, "utf8");
      const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
      parent.set(Number(e), Number(f[1]));
      comm.set(Number(e), s.slice(s.indexOf("(") + 1, s.lastIndexOf(")")));
    } catch { /* gone */ }
  }
  const out = new Map<string, number[]>();
  for (const [pid, name] of comm) {
    let p = parent.get(pid);
    for (let depth = 0; p !== undefined && p > 1 && depth < 10; depth++) {
      if (p === process.pid) { out.set(name, [...(out.get(name) ?? []), pid]); break; }
      p = parent.get(p);
    }
  }
  return out;
}

/**
 * CPU seconds used so far by this process ("bench") and by each of its descendants, grouped by
 * command name (truncated to 15 characters, as the kernel keeps it) or by the name `named` gives
 * their pid (e.g. the operator: `new Map([[pid, "operator"]])`).
 */
export function cpuSnapshot(named: ReadonlyMap<number, string> = new Map()): Map<string, number> {
  const out = new Map<string, number>();
  for (const [name, pids] of descendants()) {
    for (const pid of pids) {
      const key = named.get(pid) ?? name;
      out.set(key, (out.get(key) ?? 0) + cpuSeconds(pid));
    }
  }
  const u = process.cpuUsage();
  out.set("bench", (u.user + u.system) / 1e6);
  return out;
}

// ---------------------------------------------------------------------------------------------
// The operator process


export interface OperatorProc extends ControllerProc {
  port: number;
  /** Lines the operator logged, by kind ("reconcile … failed", "informer: …", other), with a first example. */
  logged: Map<string, { n: number; first: string }>;
}

export interface OperatorOptions {
  /** The operator's namespace (its PipelineRuns, Jobs and Lease). */
  namespace: string;
  /** OPERON_ORG_CONCURRENCY. */
  orgLimit: number;
  /** `cli/main.js` to run (default dist/cli/main.js). */
  main?: string;
  /** Extra node options (e.g. `--prof`). */
  nodeArgs?: string[];
  /** Run with --cpu-prof into this folder. */
  profDir?: string;
  /** Append the operator's output to `<dumpDir>/operator.log`. */
  dumpDir?: string;
  /** OPERON_OPERATOR_WORKERS. */
  workers?: string;
}

/** A controller under test as its own process: its output kept, stopped with SIGTERM (SIGKILL after 15 s). */
export interface ControllerProc {
  child: ChildProcess; pid: number;
  /** The last lines it printed. */
  tail(): string;
  /** How it exited, once it has. */
  exit(): string | undefined;
  stop(): Promise<void>;
}

/**
 * Starts `bin args` with `env` (plus PATH and HOME) as a controller the bench measures; on Linux
 * through setpriv, so that it dies with this process even on SIGKILL (setpriv execs: same pid).
 * `onOutput` sees everything it prints.
 */
export function startController(bin: string, args: string[], env: Record<string, string>, opts: { cwd?: string; onOutput?: (text: string) => void } = {}): ControllerProc {
  const [cmd, argv] = existsSync("/usr/bin/setpriv") ? ["/usr/bin/setpriv", ["--pdeathsig", "KILL", "--", bin, ...args]] : [bin, args];
  const child = spawn(cmd, argv, {
    ...(opts.cwd ? { cwd: opts.cwd } : {}),
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/tmp", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const keep = (d: Buffer) => { const text = d.toString(); out = (out + text).slice(-20_000); opts.onOutput?.(text); };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  let exited: string | undefined;
  const exitP = new Promise<void>((r) => child.on("exit", (code, sig) => { exited = sig ? `signal ${sig}` : `code ${code}`; r(); }));
  const kill = () => { if (!exited) child.kill("SIGKILL"); };
  process.on("exit", kill);
  return {
    child, pid: child.pid ?? 0,
    tail: () => out.trimEnd().split("\n").slice(-15).join("\n"),
    exit: () => exited,
    async stop() {
      if (!exited) {
        child.kill("SIGTERM");
        const ok = await Promise.race([exitP.then(() => true), sleep(15_000).then(() => false)]);
        if (!ok) { child.kill("SIGKILL"); await exitP; }
      }
      process.off("exit", kill);
    },
  };
}

/** `node dist/cli/main.js operator` as its own process (its RSS and CPU are its own); resolves once it holds the Lease. */
export async function startOperatorProcess(env: TestEnv, o: OperatorOptions): Promise<OperatorProc> {
  const [port] = await freePorts(1) as [number];
  const node = [...(o.nodeArgs ?? []), ...(o.profDir ? ["--cpu-prof", `--cpu-prof-dir=${o.profDir}`] : []), o.main ?? join(root, "dist/cli/main.js"), "operator"];
  let partial = "";
  const logged = new Map<string, { n: number; first: string }>();
  const onOutput = (text: string) => {
    if (o.dumpDir) appendFileSync(join(o.dumpDir, "operator.log"), text);
    const lines = (partial + text).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) {
      const kind = /^reconcile \S+ failed/.test(line) ? "reconcile failed" : /^informer:/.test(line) ? "informer error" : /^leader election:/.test(line) ? "leader election error" : "other";
      const k = logged.get(kind);
      if (k) k.n++; else logged.set(kind, { n: 1, first: line.slice(0, 300) });
    }
  };
  const c = startController(process.execPath, node, {
    ...env.env, KUBECONFIG: env.kubeconfigPath,
    OPERON_MODE: "cluster", OPERON_NAMESPACE: o.namespace, OPERON_POD_NAME: "bench-operator", PORT: String(port), HOST: "127.0.0.1",
    OPERON_ORG_CONCURRENCY: String(o.orgLimit), AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
    ...(o.workers ? { OPERON_OPERATOR_WORKERS: o.workers } : {}),
  }, { cwd: root, onOutput });
  const p: OperatorProc = { ...c, port, logged };
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (p.exit()) throw new Error(`the operator exited (${p.exit()}) before leading:\n${p.tail()}`);
    try { if ((await metric(p, "operon_operator_leader")) === 1) return p; } catch { /* not listening yet */ }
    if (Date.now() > deadline) { await p.stop(); throw new Error(`the operator did not take the Lease within 60 s:\n${p.tail()}`); }
    await sleep(100);
  }
}

/** One unlabelled sample of the operator's /metrics. */
export async function metric(p: OperatorProc, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${p.port}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  if (!m) throw new Error(`no ${name} in the operator's /metrics`);
  return Number(m[1]);
}

/** The apiserver's request counters, by verb and resource[/subresource] (all clients). */
export interface ApiCounts { n: Map<string, number>; errors: Map<string, number>; seconds: Map<string, number> }
export async function apiserverCounts(env: TestEnv, resources: readonly string[] = ["jobs", "pods", "pipelineruns", "leases", "events", "nodes"]): Promise<ApiCounts> {
  const r = await env.kubectl(["get", "--raw", "/metrics"]);
  if (r.code !== 0) throw new Error(`kubectl get --raw /metrics: ${r.stderr.trim()}`);
  const out: ApiCounts = { n: new Map(), errors: new Map(), seconds: new Map() };
  const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v);
  for (const line of r.stdout.split("\n")) {
    const m = /^(apiserver_request_total|apiserver_request_duration_seconds_sum)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const l = Object.fromEntries([...(m[2] as string).matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (!resources.includes(l.resource ?? "")) continue;
    const key = `${l.verb} ${l.resource}${l.subresource ? `/${l.subresource}` : ""}`;
    const v = Number(m[3]);
    if (m[1] === "apiserver_request_total") { add(out.n, key, v); if (!/^2/.test(l.code ?? "")) add(out.errors, `${key} ${l.code}`, v); }
    else add(out.seconds, key, v);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Releasing a peer's pods on kwok nodes

/** A pod as the releaser sees it. */
export interface ReleasedPod extends KubeObject {
  metadata: KubeObject["metadata"] & { namespace?: string; ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string }> };
  spec?: { nodeName?: string };
}

export interface PodReleaser {
  /** Pods released so far. */
  released(): number;
  stop(): Promise<void>;
}

/**
 * For a peer system's pods (those matching `labelSelector`, anywhere; they carry the label
 * `operon.dev/run` so that kwok's stages hold them, as they hold Operon's until its stage-out
 * stand-in has uploaded): once a pod is bound to a node, `before` does what the system's own
 * helper in the pod would write (Argo's wait container), then the pod is released to kwok with
 * an annotation through `harness`, and kwok runs it for its duration. Every system's pods
 * thus take the same one extra hop before they run.
 */
export async function startPodReleaser(opts: { harness: KubeClient; labelSelector: string; before?: (pod: ReleasedPod) => Promise<void>; onError: (e: unknown) => void }): Promise<PodReleaser> {
  const handled = new Set<string>();
  const pending = new Set<Promise<void>>();
  let stopped = false;
  const release = async (pod: ReleasedPod) => {
    await opts.before?.(pod);
    await opts.harness.request("PATCH", `/api/v1/namespaces/${pod.metadata.namespace ?? "default"}/pods/${encodeURIComponent(pod.metadata.name)}`, {
      patch: "merge", body: { metadata: { uid: pod.metadata.uid, annotations: { [KWOK_ANNOTATION.stagedOut]: "true" } } },
    });
  };
  const informer: Informer<ReleasedPod> = new Informer<ReleasedPod>({
    client: opts.harness, path: "/api/v1/pods", labelSelector: opts.labelSelector, onError: opts.onError,
    onChange: (pod) => {
      const uid = pod.metadata.uid ?? pod.metadata.name;
      if (stopped || handled.has(uid) || !pod.spec?.nodeName || pod.metadata.annotations?.[KWOK_ANNOTATION.stagedOut] || informer.get(pod.metadata.name) === undefined) return;
      handled.add(uid);
      const p = release(pod).catch(opts.onError).finally(() => pending.delete(p));
      pending.add(p);
    },
  });
  await informer.start();
  return {
    released: () => handled.size,
    async stop() { stopped = true; informer.stop(); await Promise.allSettled([...pending]); },
  };
}

// ---------------------------------------------------------------------------------------------
// The workload and the bench's watches


const step = (stepId: string, input: string, dependsOn?: string[]) => ({ stepId, toolName: "samtools", ...(dependsOn ? { dependsOn } : {}), parameters: { command: "depth", inputFile: input, outputFile: `${stepId}.tsv` } });
/** The bench DAG, a → (b, c) → d → e: five samtools steps (on kwok nodes nothing runs them). */
export const dag: PipelineSpec = {
  id: "bench-dag",
  inputs: [{ name: "bam", type: "file" }],
  steps: [
    step("a", "${bam}"),
    step("b", "${a.outputFile}", ["a"]),
    step("c", "${a.outputFile}", ["a"]),
    step("d", "${b.outputFile}", ["b", "c"]),
    step("e", "${d.outputFile}", ["d"]),
  ],
} as PipelineSpec;
export const STEPS = dag.steps.length;

export type Job = JobObject & KubeObject;
export interface Pod extends KubeObject { spec?: { nodeName?: string }; status?: { phase?: string } }

export const isTrue = (job: Job, ...types: string[]) => job.status?.conditions?.some((c) => types.includes(c.type) && c.status === "True") ?? false;

/**
 * The bench's own watches of one namespace: when each step Job's first pod was first seen, when
 * a pod of it was first seen Succeeded (bench clock, ms), and the most Jobs of one organization
 * active at once (created, neither Complete nor Failed nor deleted).
 */
export interface Watches {
  podCreated: Map<string, number>;
  podSucceeded: Map<string, number>;
  /** Pods seen per Job (more than one: the Job controller replaced one). */
  podsPerJob: Map<string, Set<string>>;
  /** Pods per node, as bound. */
  perNode: Map<string, number>;
  jobsSeen: Set<string>;
  /**
   * Most steps of one organization open at once: Jobs created whose outcome is not decided (no
   * pod Succeeded, no SuccessCriteriaMet, FailureTarget, Complete or Failed, not stopped): what
   * the operator's ledger counts. The Job and pod watches are two streams, so this can briefly
   * count a step the operator already saw succeed: maxPodsPerOrg (one stream) is the exact check.
   */
  maxActivePerOrg: Map<string, number>;
  /** Most Jobs of one organization not yet Complete/Failed (also those past SuccessCriteriaMet whose pod the controller still finalizes). */
  maxUnfinishedPerOrg: Map<string, number>;
  /** Most pods of one organization neither Succeeded nor Failed at once. */
  maxPodsPerOrg: Map<string, number>;
  /** Calls `f` on every Job change after the Job watch has recorded it. */
  onJob(f: (job: Job) => void): void;
  stop(): void;
}

export async function startWatches(client: KubeClient, ns: string, onError: (e: unknown) => void): Promise<Watches> {
  const podCreated = new Map<string, number>();
  const podSucceeded = new Map<string, number>();
  const podsPerJob = new Map<string, Set<string>>();
  const podNode = new Map<string, string>();
  const perNode = new Map<string, number>();
  const jobsSeen = new Set<string>();
  const maxActivePerOrg = new Map<string, number>();
  const maxUnfinishedPerOrg = new Map<string, number>();
  const maxPodsPerOrg = new Map<string, number>();
  /** Tracks members of a set per organization and the most at once. */
  const counter = (max: Map<string, number>) => {
    const sets = new Map<string, Set<string>>();
    return (org: string, name: string, member: boolean) => {
      const set = sets.get(org) ?? new Set<string>();
      sets.set(org, set);
      if (!member) set.delete(name);
      else if (!set.has(name)) { set.add(name); max.set(org, Math.max(max.get(org) ?? 0, set.size)); }
    };
  };
  const activeJobs = counter(maxActivePerOrg);
  const unfinishedJobs = counter(maxUnfinishedPerOrg);
  const runningPods = counter(maxPodsPerOrg);
  const listeners: Array<(job: Job) => void> = [];
  const pods = new Informer<Pod>({
    client, path: paths.pods(ns), labelSelector: "operon.dev/run", onError,
    transform: (p) => p,
    onChange: (pod) => {
      const now = Date.now();
      const job = pod.metadata.labels?.["batch.kubernetes.io/job-name"] ?? pod.metadata.labels?.["job-name"];
      if (!job) return;
      const set = podsPerJob.get(job) ?? new Set<string>();
      podsPerJob.set(job, set);
      if (!set.has(pod.metadata.name)) { set.add(pod.metadata.name); if (!podCreated.has(job)) podCreated.set(job, now); }
      const node = pod.spec?.nodeName;
      if (node && !podNode.has(pod.metadata.name)) { podNode.set(pod.metadata.name, node); perNode.set(node, (perNode.get(node) ?? 0) + 1); }
      if (pod.status?.phase === "Succeeded" && !podSucceeded.has(job)) { podSucceeded.set(job, now); activeJobs(pod.metadata.labels?.[LABEL.org] ?? "", job, false); }
      const gone = pods.get(pod.metadata.name) === undefined;
      runningPods(pod.metadata.labels?.[LABEL.org] ?? "", pod.metadata.name, !gone && pod.status?.phase !== "Succeeded" && pod.status?.phase !== "Failed");
    },
  });
  const jobs = new Informer<Job>({
    client, path: paths.jobs(ns), labelSelector: "operon.dev/run", onError,
    onChange: (job) => {
      const name = job.metadata.name;
      const org = job.metadata.annotations?.[ANNOTATION.org] ?? "";
      jobsSeen.add(name);
      const gone = jobs.get(name) === undefined;
      const finished = gone || isTrue(job, "Complete", "Failed");
      unfinishedJobs(org, name, !finished);
      activeJobs(org, name, !finished && !podSucceeded.has(name) && !isTrue(job, "SuccessCriteriaMet", "FailureTarget") && !job.metadata.annotations?.[ANNOTATION.stopped]);
      for (const f of listeners) f(job);
    },
  });
  await Promise.all([pods.start(), jobs.start()]);
  return { podCreated, podSucceeded, podsPerJob, perNode, jobsSeen, maxActivePerOrg, maxUnfinishedPerOrg, maxPodsPerOrg, onJob: (f) => listeners.push(f), stop: () => { pods.stop(); jobs.stop(); } };
}

/** Child pod first seen − latest parent pod seen Succeeded, for every dependent step of the runs. */
export function dependentLatencies(w: Watches, runIds: string[]): number[] {
  const out: number[] = [];
  for (const runId of runIds) {
    for (const s of dag.steps) {
      if (!s.dependsOn?.length) continue;
      const child = w.podCreated.get(jobName(runId, s.stepId, 1));
      const parents = s.dependsOn.map((p) => w.podSucceeded.get(jobName(runId, p, 1)));
      if (child === undefined || parents.some((x) => x === undefined)) throw new Error(`run ${runId} step ${s.stepId}: its pod or a parent's Succeeded pod was not seen by the bench's watch`);
      out.push(child - Math.max(...(parents as number[])));
    }
  }
  return out;
}
