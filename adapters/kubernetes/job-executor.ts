/**
 * Cluster mode's StepExecutor: one `batch/v1` Job per step attempt (DESIGN §4). What a Job
 * looks like and what its state means is decided in core/kubernetes/jobs.ts; this adapter creates Jobs
 * (AlreadyExists counts as done), watches Jobs and their pods through supervised informers,
 * stops Jobs by annotating and suspending them (the record stays, so a stopped step is never
 * mistaken for one that never started), reads outputs from the stage-out helper's
 * termination message (or HEADs them in object storage), and keeps step logs in storage.
 *
 * What it keeps per run and per Job beside the informer caches (indexes, outputs read, logs
 * saved, pod look-ups) is dropped when the run ends (`forgetRun`, and `runFinished` keeps a
 * finished run's Jobs out of the indexes) or when the Job is deleted.
 */
import { EventEmitter } from "node:events";
import { buildJob, jobActive, jobForCache, jobStep, observeJob, podForCache, terminationOutputs, TOOL_CONTAINER, type JobObject, type JobTemplateOptions, type PodObject } from "../../core/kubernetes/jobs.js";
import { ANNOTATION, LABEL } from "../../core/kubernetes/pipelinerun.js";
import type { Clock, ObjectStore, ObservedStepState, StepExecutor, StepOutput } from "../../core/ports.js";
import { defaultCatalogue, type ToolCatalogue } from "../../core/tools/index.js";
import { isAlreadyExists, isNotFound, KubeError, paths, type KubeClient } from "./client.js";
import { Informer, type KubeObject } from "./informer.js";

type Job = JobObject & KubeObject;
type Pod = PodObject & KubeObject;

export interface JobExecutorOptions {
  client: KubeClient;
  namespace: string;
  store: ObjectStore;
  /** Everything of the Job template but the step (core/kubernetes/jobs.ts JobTemplateOptions). */
  template: Omit<JobTemplateOptions, "namespace" | "toolImage" | "owner">;
  /** The PipelineRun's uid for owner references (from the run store's cache). */
  ownerUid?: (runId: string) => string | undefined;
  tools?: ToolCatalogue;
  clock?: Clock;
  quietMs?: number;
  onError?: (e: unknown) => void;
  /**
   * Whether the run has finished (its status says so). Nothing is kept for the Jobs of a
   * finished run: the reconciler never looks at it again. Unknown runs count as unfinished.
   */
  runFinished?: (runId: string) => boolean;
}

/** Sizes of what the executor keeps beside its informer caches (tests, metrics). */
export interface JobExecutorCacheSizes {
  jobsByRun: number;
  podsByJob: number;
  endSeen: number;
  outputs: number;
  logsSaved: number;
  podLookups: number;
  stopping: number;
}

/** How long copying one step log may take in all. */
const LOG_DEADLINE_MS = 60_000;

export interface KubeJobExecutor extends StepExecutor {
  start(): Promise<void>;
  stop(): void;
  jobs: Informer<Job>;
  pods: Informer<Pod>;
  /** The run's Jobs the executor indexes (none once the run is forgotten). */
  jobsOfRun(runId: string): Job[];
  /** Drops everything kept for the run and its Jobs (the run ended or was deleted). */
  forgetRun(runId: string): void;
  cacheSizes(): JobExecutorCacheSizes;
}

export function createJobExecutor(opts: JobExecutorOptions): KubeJobExecutor {
  const { client, namespace } = opts;
  const tools = opts.tools ?? defaultCatalogue;
  const clock = opts.clock ?? { now: () => Date.now() };
  const events = new EventEmitter();
  events.setMaxListeners(100);
  const selector = LABEL.run;
  const runOf = (obj: KubeObject) => obj.metadata.annotations?.[ANNOTATION.runId] ?? obj.metadata.labels?.[LABEL.run];
  const finished = (runId: string | undefined) => runId !== undefined && (opts.runFinished?.(runId) ?? false);
  const common = { ...(opts.onError ? { onError: opts.onError } : {}), ...(opts.quietMs ? { quietMs: opts.quietMs } : {}) };
  // Indexes kept beside the caches (the informers update the cache before calling back), so
  // observe(run) looks at the run's Jobs only, not at every Job and pod in the namespace.
  const jobsByRun = new Map<string, Set<string>>();
  const podsByJob = new Map<string, Set<string>>();
  const index = (m: Map<string, Set<string>>, key: string, name: string, present: boolean) => {
    const set = m.get(key) ?? new Set<string>();
    if (present) { set.add(name); m.set(key, set); } else { set.delete(name); if (set.size === 0) m.delete(key); }
  };
  const jobOfPod = (p: KubeObject) => p.metadata.labels?.["job-name"] ?? p.metadata.labels?.["batch.kubernetes.io/job-name"];
  /** When each ended Job was first seen ended (this process's clock; for latency metrics). */
  const endSeen = new Map<string, number>();
  const jobs: Informer<Job> = new Informer<Job>({
    client, path: paths.jobs(namespace), labelSelector: selector, transform: jobForCache,
    onChange: (j) => {
      const r = runOf(j);
      if (!r) return;
      // A finished run's Jobs are not indexed (nothing observes the run again).
      const present = jobs.get(j.metadata.name) !== undefined && !finished(r);
      index(jobsByRun, r, j.metadata.name, present);
      if (!present) forgetJob(j.metadata.name);
      else if (!jobActive(j) && !endSeen.has(j.metadata.name)) endSeen.set(j.metadata.name, clock.now());
      events.emit("change", r);
    },
    ...common,
  });
  const pods: Informer<Pod> = new Informer<Pod>({
    client, path: paths.pods(namespace), labelSelector: selector, transform: podForCache,
    onChange: (p) => {
      const job = jobOfPod(p);
      if (!job) return;
      const j = jobs.get(job);
      const r = j ? runOf(j) : undefined;
      index(podsByJob, job, p.metadata.name, pods.get(p.metadata.name) !== undefined && !finished(r));
      if (r) events.emit("change", r);
    },
    ...common,
  });
  /** A deleted Job (its TTL passed, or its run was deleted) leaves nothing behind here. */
  const forgetJob = (name: string) => {
    endSeen.delete(name);
    outputs.delete(name);
    logsSaved.delete(name);
    podLookups.delete(name);
    podsByJob.delete(name);
  };
  /** Outputs of completed Jobs (read once, from the termination message or storage). */
  const outputs = new Map<string, Promise<StepOutput[] | string>>();
  /** Jobs whose logs were copied to storage. */
  const logsSaved = new Set<string>();
  const stopping = new Set<string>();

  /** The Job's newest pod. */
  const podOf = (job: Job): Pod | undefined => {
    let best: Pod | undefined;
    for (const name of podsByJob.get(job.metadata.name) ?? []) {
      const p = pods.get(name);
      if (p && (!best || (p.metadata.creationTimestamp ?? "") > (best.metadata.creationTimestamp ?? ""))) best = p;
    }
    return best;
  };

  const jobsOf = (runId: string): Job[] => [...(jobsByRun.get(runId) ?? [])].map((n) => jobs.get(n)).filter((j): j is Job => j !== undefined);

  function latestByStep(runId: string): Map<string, Job> {
    const out = new Map<string, Job>();
    for (const j of jobsOf(runId)) {
      const s = jobStep(j);
      if (!s) continue;
      const cur = out.get(s.stepId);
      if (!cur || Number(cur.metadata.annotations?.[ANNOTATION.attempt]) < s.attempt) out.set(s.stepId, j);
    }
    return out;
  }

  /**
   * The pod of an ended Job that the pod watch has not delivered yet (the Job and pod watches
   * are separate streams, so the Job's Complete or Failed can arrive first): read once from
   * the API, so that a failed step's error says what the pod says (exit code, OOMKilled,
   * eviction) and not only "the Job failed", and the log is copied even when this was the
   * run's last step (nothing reconciles it again).
   */
  const podLookups = new Map<string, Promise<Pod | undefined>>();
  function lookUpPod(job: Job, fresh: boolean): Promise<Pod | undefined> {
    let p = podLookups.get(job.metadata.name);
    if (!p) {
      p = (async () => {
        // A failure's explanation needs the pod's last state (a consistent read); a log only
        // needs the pod's name, which the API server's cache has (resourceVersion 0: cheaper).
        const list = await client.request<{ items: Pod[] }>("GET", paths.pods(namespace), { query: { labelSelector: `batch.kubernetes.io/job-name=${job.metadata.name}`, ...(fresh ? {} : { resourceVersion: "0" }) } });
        // The run may have ended meanwhile: then the pod is only returned, not indexed.
        const keep = !finished(runOf(job));
        for (const pod of list.items) {
          pods.assume(pod);
          if (keep) index(podsByJob, job.metadata.name, pod.metadata.name, true);
        }
        return keep ? podOf(job) : list.items.reduce<Pod | undefined>((best, p) => (!best || (p.metadata.creationTimestamp ?? "") > (best.metadata.creationTimestamp ?? "") ? p : best), undefined);
      })();
      podLookups.set(job.metadata.name, p);
      void p.catch(() => podLookups.delete(job.metadata.name));
    }
    return p;
  }

  /** Outputs of a completed Job: the stage-out helper's report, else what storage holds. */
  function readOutputs(job: Job, pod: Pod | undefined): Promise<StepOutput[] | string> {
    let p = outputs.get(job.metadata.name);
    if (!p) {
      p = (async () => {
        const reported = terminationOutputs(pod);
        if (reported) return reported;
        const a = job.metadata.annotations ?? {};
        const runRoot = a[ANNOTATION.runRoot] ?? "";
        let declared: Array<{ path: string; secondary: string[] }> = [];
        try { declared = JSON.parse(a[ANNOTATION.outputs] ?? "[]") as typeof declared; } catch { return "the Job's declared outputs are unreadable"; }
        const found: StepOutput[] = [];
        for (const [position, o] of declared.entries()) {
          for (const [i, path] of [o.path, ...o.secondary].entries()) {
            const info = await opts.store.head(runRoot + path);
            if (!info) { if (i === 0) return `declared output ${path} was not produced`; continue; }
            found.push({ filename: path, key: info.key, size: info.size, sha256: info.sha256 ?? "", ...(i === 0 ? { position } : {}) });
          }
        }
        return found;
      })();
      outputs.set(job.metadata.name, p);
      void p.catch(() => outputs.delete(job.metadata.name));
    }
    return p;
  }

  /** Copies the tool's log of a finished Job into the run folder, once. */
  async function saveLog(job: Job, pod: Pod | undefined, stepId: string): Promise<void> {
    if (!pod || logsSaved.has(job.metadata.name)) return;
    logsSaved.add(job.metadata.name);
    try {
      const text = await podLog(pod.metadata.name);
      if (text !== undefined) await opts.store.put(`${job.metadata.annotations?.[ANNOTATION.runRoot] ?? ""}logs/${stepId}.log`, text, { contentType: "text/plain" });
    } catch (e) { logsSaved.delete(job.metadata.name); opts.onError?.(e); } finally {
      // Saved after its run ended (the run's last step): nothing will ask again.
      if (finished(runOf(job))) logsSaved.delete(job.metadata.name);
    }
  }

  async function podLog(pod: string): Promise<string | undefined> {
    try {
      const res = await client.stream(`${paths.pods(namespace)}/${encodeURIComponent(pod)}/log`, { query: { container: TOOL_CONTAINER, limitBytes: 4 * 1024 * 1024 }, signal: AbortSignal.timeout(LOG_DEADLINE_MS) });
      const chunks: Buffer[] = [];
      for await (const c of res) chunks.push(c as Buffer);
      return Buffer.concat(chunks).toString("utf8");
    } catch (e) {
      if (isNotFound(e)) return undefined;
      if (!(e instanceof KubeError)) throw e; // no answer, or cut off: try again later
      // A container that never started has no log (400 Bad Request).
      return undefined;
    }
  }

  /** Annotates the Job with why it was stopped and suspends it (its pods are then removed). */
  async function stopJob(job: Job, reason: string, message?: string): Promise<void> {
    if (stopping.has(job.metadata.name) || job.metadata.annotations?.[ANNOTATION.stopped]) return;
    stopping.add(job.metadata.name);
    try {
      const patched = await client.request<Job>("PATCH", `${paths.jobs(namespace)}/${encodeURIComponent(job.metadata.name)}`, {
        patch: "merge",
        body: {
          metadata: { annotations: { [ANNOTATION.stopped]: reason, [ANNOTATION.stoppedAt]: new Date(clock.now()).toISOString(), ...(message ? { [ANNOTATION.stoppedMessage]: message } : {}) } },
          spec: { suspend: true },
        },
      });
      jobs.assume(patched);
      const r = runOf(patched);
      if (r) events.emit("change", r);
    } catch (e) {
      if (!isNotFound(e)) throw e;
    } finally {
      stopping.delete(job.metadata.name);
    }
  }

  return {
    runtime: "container",
    jobs,
    pods,
    async start() { await Promise.all([jobs.start(), pods.start()]); },
    stop() { jobs.stop(); pods.stop(); },
    jobsOfRun: jobsOf,
    forgetRun(runId) {
      for (const name of jobsByRun.get(runId) ?? []) forgetJob(name);
      jobsByRun.delete(runId);
    },
    cacheSizes: () => ({
      jobsByRun: jobsByRun.size, podsByJob: podsByJob.size, endSeen: endSeen.size, outputs: outputs.size,
      logsSaved: logsSaved.size, podLookups: podLookups.size, stopping: stopping.size,
    }),

    async submit(task) {
      const known = latestByStep(task.runId).get(task.stepId);
      if (known && Number(known.metadata.annotations?.[ANNOTATION.attempt]) >= task.attempt) return;
      const tool = tools.get(task.toolName);
      if (!tool) throw new Error(`unknown tool ${task.toolName}`);
      const uid = opts.ownerUid?.(task.runId);
      const job = buildJob(task, { ...opts.template, namespace, toolImage: tool.image, ...(uid ? { owner: { name: task.runId, uid } } : {}) });
      try {
        const created = await client.request<Job>("POST", paths.jobs(namespace), { body: job });
        jobs.assume(created);
        index(jobsByRun, task.runId, created.metadata.name, true);
      } catch (e) {
        if (!isAlreadyExists(e)) throw e;
        // Created before (by an earlier leader or before a restart): that counts as done.
        const cur = await client.request<Job>("GET", `${paths.jobs(namespace)}/${encodeURIComponent(job.metadata.name)}`);
        jobs.assume(cur);
        index(jobsByRun, task.runId, cur.metadata.name, true);
      }
    },

    async observe(runId) {
      const out = new Map<string, ObservedStepState>();
      for (const [stepId, job] of latestByStep(runId)) {
        let pod = podOf(job);
        const tool = tools.get(job.metadata.annotations?.[ANNOTATION.tool] ?? "");
        let seen = observeJob(job, pod, tool?.image);
        if (!pod && seen.state.phase === "failed" && !job.metadata.annotations?.[ANNOTATION.stopped]) {
          // The error must say what the pod says: wait for it (failures are rare).
          pod = await lookUpPod(job, true).catch((e: unknown) => { opts.onError?.(e); return undefined; });
          if (pod) seen = observeJob(job, pod, tool?.image);
        } else if (!pod && seen.completed) {
          // Outputs can come from storage meanwhile; only the log needs the pod: no waiting.
          void lookUpPod(job, false).then((p) => (p ? saveLog(job, p, stepId) : undefined), (e: unknown) => opts.onError?.(e));
        }
        // The tool's version is the pinned image's (its digest, once a pod reports one, is exact).
        const ended = endSeen.get(job.metadata.name);
        let state: ObservedStepState = { ...seen.state, toolVersion: tool?.version ?? null, ...(ended !== undefined && seen.state.phase !== "running" ? { endSeenAt: ended } : {}) };
        if (seen.stopNeeded) void stopJob(job, "failed", state.message).catch((e: unknown) => opts.onError?.(e));
        if (seen.completed) {
          const o = await readOutputs(job, pod);
          state = typeof o === "string" ? { ...state, phase: "failed", message: o } : { ...state, outputs: o };
        }
        if (state.phase !== "running") void saveLog(job, pod, stepId);
        out.set(stepId, state);
      }
      return out;
    },

    async kill(runId, stepId, reason) {
      const job = latestByStep(runId).get(stepId);
      if (!job || !jobActive(job)) return;
      await stopJob(job, reason);
    },

    watch(fn) {
      events.on("change", fn);
      return () => events.off("change", fn);
    },

    async logs(runId, stepId) {
      const job = latestByStep(runId).get(stepId);
      if (!job) return undefined;
      const pod = podOf(job);
      if (!pod) return undefined;
      return podLog(pod.metadata.name);
    },

    async activeSteps() {
      const byRun = new Map<string, { organization: string; runId: string; stepIds: string[] }>();
      for (const j of jobs.list()) {
        const s = jobStep(j);
        if (!s || !jobActive(j)) continue;
        const cur = byRun.get(s.runId) ?? { organization: s.organization, runId: s.runId, stepIds: [] };
        cur.stepIds.push(s.stepId);
        byRun.set(s.runId, cur);
      }
      return [...byRun.values()];
    },
  };
}
