/**
 * Cluster mode's StepExecutor: one `batch/v1` Job per step attempt (docs/kubernetes.md#step-jobs). What a Job
 * looks like and what its state means is decided in core/kubernetes/jobs.ts; this adapter
 * moves objects, split the way Nextflow splits an executor from its task handlers:
 *  - the submitter creates a step's Job (AlreadyExists counts as done);
 *  - one handle per step attempt (per Job name) owns everything known or done about it: when
 *    its end was first seen, its outputs (read once, from the stage-out helper's termination
 *    message, else by HEADs in object storage), its pod look-up, whether its log was copied,
 *    whether a stop is in flight.
 * A Job may have several pods — the Job controller replaces one that Kubernetes disrupted
 * (evicted, its node lost) — and the newest speaks for it. Jobs and their pods are watched
 * through supervised informers. `observe(run)` — the
 * reconciler's read path — only reads (the caches, the handles' outputs, a pod the watch has
 * not delivered): it writes nothing to the API or to storage. The writes happen on the watch
 * side, level-triggered: whenever a Job or its pod changes, the Job's handle syncs — a Job
 * whose pod cannot start is stopped, and the tool's log of an ended Job is copied into the run
 * folder (`logs/<step>.log`), once, while its run has not finished; a write that fails is
 * tried again after a back-off. Jobs are stopped (here, or by `kill` on the engine's request)
 * by annotating and suspending them: the record stays, so a stopped step is never mistaken
 * for one that never started. Until the engine says it has started (`engineStarted`: its run
 * store synced, so `runFinished` is known) the watch side writes nothing: the first list
 * reports every Job, also those of runs that finished long ago. When to stop, when a log is
 * final, where a completed Job's outputs are and what a missing one means are decided in
 * core/kubernetes/job-actions.ts.
 *
 * What it keeps beside the informer caches — the per-run index, the pod index and the
 * handles — is dropped when the run ends (`forgetRun`, and `runFinished` keeps a finished
 * run's Jobs out of the index) or when the Job is deleted.
 */
import { stepLogKeyIn } from "../../core/layout.js";
import { EventEmitter } from "node:events";
import { activeStepsOf, attemptSubmitted, completedOutputs, jobSucceeded, newestAttempts, observedAttempt, podNeededToExplain, stopDue, taskPod, toolLogFinal, withOutputs, type JobOutputs } from "../../core/kubernetes/job-actions.js";
import { buildJob, jobForCache, jobStep, newestPod, observeJob, podForCache, stepEnded, TOOL_CONTAINER, type JobObject, type JobTemplateOptions, type PodObject } from "../../core/kubernetes/jobs.js";
import { ANNOTATION, LABEL } from "../../core/kubernetes/pipelinerun.js";
import { toolImage, type StepPodConfig } from "../../core/kubernetes/step-pods.js";
import type { Clock, ObjectInfo, ObjectStore, ObservedStepState, StepExecutor } from "../../core/ports.js";
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
  template: Omit<JobTemplateOptions, "namespace" | "toolImage" | "owner" | "stepPods">;
  /**
   * The step-pod configuration (core/kubernetes/step-pods.ts): scheduling, pull secrets,
   * reference volumes, and the image and resources of a task that does not carry its own.
   */
  stepPods?: StepPodConfig;
  /** The PipelineRun's uid for owner references (from the run store's cache). */
  ownerUid?: (runId: string) => string | undefined;
  tools?: ToolCatalogue;
  clock?: Clock;
  quietMs?: number;
  onError?: (e: unknown) => void;
  /**
   * Whether the run has finished (its status says so). Nothing is kept for the Jobs of a
   * finished run, and nothing is written for them: the reconciler never looks at it again.
   * Only trusted once the engine has started (`engineStarted`: its run store has synced by
   * then): until then the watch side writes nothing.
   */
  runFinished?: (runId: string) => boolean;
}

/** Sizes of what the executor keeps beside its informer caches (tests, metrics). */
export interface JobExecutorCacheSizes {
  jobsByRun: number;
  podsByJob: number;
  /** Step attempts with a handle (indexed Jobs). */
  handles: number;
  /** Of those: whose end was seen, whose outputs were read, whose log was copied (or is being), with a pod look-up, with a stop in flight. */
  endSeen: number;
  outputs: number;
  logsSaved: number;
  podLookups: number;
  stopping: number;
}

/** How long copying one step log may take in all. */
const LOG_DEADLINE_MS = 60_000;
/** A failed write of the watch side is tried again after this, doubling up to the maximum. */
const RETRY_MS = 1000;
const RETRY_MAX_MS = 60_000;

export interface KubeJobExecutor extends StepExecutor {
  /** Starts the informers; resolves once both have listed. */
  start(): Promise<void>;
  /**
   * The engine has started (its run store has synced, so `runFinished` holds): from now on the
   * watch side writes — stops Jobs that cannot start, copies logs — for what the informers
   * reported meanwhile too. Without `runFinished` it writes from `start` on.
   */
  engineStarted(): void;
  stop(): void;
  jobs: Informer<Job>;
  pods: Informer<Pod>;
  /** The run's Jobs the executor indexes (none once the run is forgotten). */
  jobsOfRun(runId: string): Job[];
  /** Drops everything kept for the run and its Jobs (the run ended or was deleted). */
  forgetRun(runId: string): void;
  cacheSizes(): JobExecutorCacheSizes;
}

/**
 * One step attempt (one Job): what is known or done about it beyond the Job and pod caches.
 * Dropped with its run or its Job; work in flight on a dropped handle (a log copy of the
 * run's last step, a stop) finishes, but it is never synced again.
 */
interface StepHandle {
  readonly job: string;
  readonly runId: string;
  /** When this process first saw the Job ended (its own clock; for latency metrics). */
  endSeen: number | undefined;
  /** The Job's outputs once completed, read once (termination message, else storage). */
  outputs: Promise<JobOutputs> | undefined;
  /** The pod read from the API when the pod watch had not delivered it, once. */
  podLookup: Promise<Pod | undefined> | undefined;
  /** The tool's log: being copied into storage, or copied (or there was none). */
  log: "copying" | "saved" | undefined;
  /** A stop (the PATCH) is in flight. */
  stopping: boolean;
  /** A failed write is tried again by this timer. */
  retry: NodeJS.Timeout | undefined;
  failures: number;
}

export function createJobExecutor(opts: JobExecutorOptions): KubeJobExecutor {
  const { client, namespace } = opts;
  const tools = opts.tools ?? defaultCatalogue;
  const clock = opts.clock ?? { now: () => Date.now() };
  const onError = (e: unknown) => { try { opts.onError?.(e); } catch { /* a reporter must not break a watch handler */ } };
  const events = new EventEmitter();
  events.setMaxListeners(100);
  const selector = LABEL.run;
  const runOf = (obj: KubeObject) => obj.metadata.annotations?.[ANNOTATION.runId] ?? obj.metadata.labels?.[LABEL.run];
  const finished = (runId: string | undefined) => runId !== undefined && (opts.runFinished?.(runId) ?? false);
  const stepPods = opts.stepPods ?? {};
  const toolOf = (job: Job) => tools.get(job.metadata.annotations?.[ANNOTATION.tool] ?? "");
  /** The image a tool's pods run here (a mirror, an override), for messages about it. */
  const imageOf = (job: Job): string | undefined => {
    const tool = toolOf(job);
    if (!tool) return undefined;
    const i = toolImage(tool, stepPods);
    return i.ok ? i.image : tool.image;
  };
  const common = { onError, ...(opts.quietMs ? { quietMs: opts.quietMs } : {}) };

  // Indexes kept beside the caches (the informers update the cache before calling back), so
  // observe(run) looks at the run's Jobs only, not at every Job and pod in the namespace.
  // A pod may arrive before its Job (separate watches): pods are indexed by Job name.
  const jobsByRun = new Map<string, Set<string>>();
  const podsByJob = new Map<string, Set<string>>();
  /** The handle of every indexed Job, by Job name (`jobsByRun` holds the same names). */
  const handles = new Map<string, StepHandle>();
  const index = (m: Map<string, Set<string>>, key: string, name: string, present: boolean) => {
    const set = m.get(key) ?? new Set<string>();
    if (present) { set.add(name); m.set(key, set); } else { set.delete(name); if (set.size === 0) m.delete(key); }
  };
  const jobOfPod = (p: KubeObject) => p.metadata.labels?.["job-name"] ?? p.metadata.labels?.["batch.kubernetes.io/job-name"];

  /** Indexes the Job under its run and gives it a handle (the one it has, if any). */
  function track(runId: string, name: string): StepHandle {
    let h = handles.get(name);
    if (!h) {
      h = { job: name, runId, endSeen: undefined, outputs: undefined, podLookup: undefined, log: undefined, stopping: false, retry: undefined, failures: 0 };
      handles.set(name, h);
    }
    index(jobsByRun, h.runId, name, true);
    return h;
  }
  /** A deleted Job (its TTL passed, or its run was deleted) or one of a finished run leaves nothing behind here. */
  function forgetJob(name: string): void {
    const h = handles.get(name);
    if (h) {
      clearTimeout(h.retry);
      handles.delete(name);
      index(jobsByRun, h.runId, name, false);
    }
    podsByJob.delete(name);
  }
  function forgetRun(runId: string): void {
    for (const name of [...(jobsByRun.get(runId) ?? [])]) forgetJob(name);
    jobsByRun.delete(runId);
  }
  const attached = (h: StepHandle) => handles.get(h.job) === h;

  /**
   * Whether the watch side may write. Only once the informers have listed and the engine has
   * said it started (or no `runFinished` was given): before that, whether a run finished is not
   * known, and the first list reports every Job, those of long-finished runs too.
   */
  let started = false;
  let engineRunning = opts.runFinished === undefined;
  let writing = false;
  let stopped = false;
  function mayWrite(): void {
    if (writing || stopped || !started || !engineRunning) return;
    writing = true;
    // Level-triggered: what the informers reported meanwhile is acted on now. A run that
    // finished meanwhile (or before this process started) is dropped instead.
    for (const [runId, names] of [...jobsByRun]) {
      if (finished(runId)) { forgetRun(runId); continue; }
      for (const name of [...names]) { const h = handles.get(name); if (h) sync(h); }
    }
  }

  const jobs: Informer<Job> = new Informer<Job>({
    client, path: paths.jobs(namespace), labelSelector: selector, transform: jobForCache,
    onChange: (j) => {
      const r = runOf(j);
      if (!r) return;
      const name = j.metadata.name;
      // A finished run's Jobs are not indexed (nothing observes the run again).
      if (jobs.get(name) !== undefined && !finished(r)) sync(track(r, name));
      else forgetJob(name);
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
      const h = handles.get(job);
      if (h) sync(h);
      if (r) events.emit("change", r);
    },
    ...common,
  });

  /**
   * The pod that speaks for the Job, of those the pod index knows: its newest (a Job whose pod
   * was evicted or lost its node has a replacement; core/kubernetes/jobs.ts newestPod).
   */
  const podOf = (job: string): Pod | undefined => newestPod([...(podsByJob.get(job) ?? [])].map((n) => pods.get(n)).filter((p): p is Pod => p !== undefined));

  /** The run's indexed Jobs with their handles. */
  function attemptsOf(runId: string): Array<{ h: StepHandle; job: Job }> {
    const out: Array<{ h: StepHandle; job: Job }> = [];
    for (const name of jobsByRun.get(runId) ?? []) {
      const job = jobs.get(name);
      const h = handles.get(name);
      if (job && h) out.push({ h, job });
    }
    return out;
  }
  const jobsOf = (runId: string): Job[] => attemptsOf(runId).map((a) => a.job);

  /** The newest attempt of each of the run's steps (core/kubernetes/job-actions.ts newestAttempts). */
  function latestByStep(runId: string): Map<string, { h: StepHandle; job: Job }> {
    const handleOf = new Map(attemptsOf(runId).map((a) => [a.job, a.h]));
    const out = new Map<string, { h: StepHandle; job: Job }>();
    for (const [stepId, job] of newestAttempts(handleOf.keys())) out.set(stepId, { h: handleOf.get(job) as StepHandle, job });
    return out;
  }

  /* ---------------------------------------------------------------- the handle's reads */

  /**
   * The pod of an ended Job that the pod watch has not delivered yet (the Job and pod watches
   * are separate streams, so the Job's Complete or Failed can arrive first): read once from
   * the API, so that a failed step's error says what the pod says (exit code, OOMKilled,
   * eviction) and not only "the Job failed", and the log is copied even when this was the
   * run's last step (nothing reconciles it again).
   */
  function lookUpPod(h: StepHandle, job: Job): Promise<Pod | undefined> {
    if (h.podLookup) return h.podLookup;
    // A failure's explanation needs the pod's last state (a consistent read); a completed
    // Job's log only needs the pod's name, which the API server's cache has (resourceVersion 0: cheaper).
    const fresh = !jobSucceeded(job);
    const p = (async () => {
      const list = await client.request<{ items: Pod[] }>("GET", paths.pods(namespace), { query: { labelSelector: `batch.kubernetes.io/job-name=${h.job}`, ...(fresh ? {} : { resourceVersion: "0" }) } });
      // The run may have ended meanwhile (its handle dropped): then the pod is only returned, not indexed.
      const keep = attached(h) && !finished(h.runId);
      for (const pod of list.items) {
        pods.assume(pod);
        if (keep) index(podsByJob, h.job, pod.metadata.name, true);
      }
      return keep ? podOf(h.job) : newestPod(list.items);
    })();
    h.podLookup = p;
    p.catch(() => { if (h.podLookup === p) h.podLookup = undefined; });
    return p;
  }

  /** Outputs of a completed Job: the stage-out helper's report, else what storage holds (core's completedOutputs says what to read). Read once. */
  function readOutputs(h: StepHandle, job: Job, pod: Pod | undefined): Promise<JobOutputs> {
    if (h.outputs) return h.outputs;
    const p = (async (): Promise<JobOutputs> => {
      const heads = new Map<string, ObjectInfo | undefined>();
      for (;;) {
        const next = completedOutputs(job, pod, heads);
        if (!("read" in next)) return next;
        heads.set(next.read, await opts.store.head(next.read));
      }
    })();
    h.outputs = p;
    p.catch(() => { if (h.outputs === p) h.outputs = undefined; });
    return p;
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

  /* ------------------------------------------------------- the handle's writes (watch side) */

  /**
   * Brings the step attempt's side effects in line with what the caches say. Called by the
   * informers' handlers (and after this process's own writes to the Job, which the watch does
   * not report again); returns at once and never throws: writes run in the background.
   */
  function sync(h: StepHandle): void {
    try {
      if (!attached(h)) return;
      const job = jobs.get(h.job);
      if (!job) return;
      // The step's end is seen when its pod has Succeeded, or at SuccessCriteriaMet / FailureTarget (its pods may still terminate).
      const pod = podOf(h.job);
      if (stepEnded(job, pod) && h.endSeen === undefined) h.endSeen = clock.now();
      if (!writing || finished(h.runId)) return;
      const seen = observeJob(job, pod, imageOf(job));
      if (seen.stopNeeded) {
        // The pod cannot start (bad image, bad config): it never will on its own. Its log
        // comes once the Job is stopped.
        if (!h.stopping) stopJob(h, job, "failed", seen.state.message).catch((e: unknown) => { onError(e); retryLater(h); });
        return;
      }
      // The log once nothing writes to it any more (core/kubernetes/job-actions.ts toolLogFinal).
      if (toolLogFinal(job, pod) && h.log === undefined) void copyLog(h, job);
    } catch (e) {
      onError(e);
    }
  }

  function retryLater(h: StepHandle): void {
    if (!attached(h) || h.retry || stopped) return;
    const ms = Math.min(RETRY_MAX_MS, RETRY_MS * 2 ** Math.min(h.failures, 10));
    h.failures++;
    h.retry = setTimeout(() => { h.retry = undefined; sync(h); }, ms);
    h.retry.unref();
  }

  /** Copies the tool's log of an ended Job into the run folder, once (looking up its pod if the pod watch is behind). */
  async function copyLog(h: StepHandle, job: Job): Promise<void> {
    h.log = "copying";
    try {
      const pod = podOf(h.job) ?? await lookUpPod(h, job);
      // No pod yet: copied when the pod watch delivers it (the look-up is not repeated).
      if (!pod) { h.log = undefined; return; }
      const text = await podLog(pod.metadata.name);
      const stepId = jobStep(job)?.stepId ?? job.metadata.annotations?.[ANNOTATION.stepId] ?? h.job;
      if (text !== undefined) await opts.store.put(stepLogKeyIn(job.metadata.annotations?.[ANNOTATION.runRoot] ?? "", stepId), text, { contentType: "text/plain" });
      h.log = "saved";
      h.failures = 0;
    } catch (e) {
      h.log = undefined;
      onError(e);
      retryLater(h);
    }
  }

  /** Annotates the Job with why it was stopped and suspends it (its pods are then removed). */
  async function stopJob(h: StepHandle, job: Job, reason: string, message?: string): Promise<void> {
    if (h.stopping || job.metadata.annotations?.[ANNOTATION.stopped]) return;
    h.stopping = true;
    let patched: Job | undefined;
    try {
      patched = await client.request<Job>("PATCH", `${paths.jobs(namespace)}/${encodeURIComponent(h.job)}`, {
        patch: "merge",
        body: {
          metadata: { annotations: { [ANNOTATION.stopped]: reason, [ANNOTATION.stoppedAt]: new Date(clock.now()).toISOString(), ...(message ? { [ANNOTATION.stoppedMessage]: message } : {}) } },
          spec: { suspend: true },
        },
      });
    } catch (e) {
      if (!isNotFound(e)) throw e;
    } finally {
      h.stopping = false;
    }
    if (!patched) return;
    h.failures = 0;
    // The watch will not report this version again (it is assumed): sync and tell watchers here.
    jobs.assume(patched);
    sync(h);
    const r = runOf(patched);
    if (r) events.emit("change", r);
  }

  return {
    runtime: "container",
    jobs,
    pods,
    async start() {
      await Promise.all([jobs.start(), pods.start()]);
      started = true;
      mayWrite();
    },
    engineStarted() {
      engineRunning = true;
      mayWrite();
    },
    stop() {
      stopped = true;
      jobs.stop();
      pods.stop();
      for (const h of handles.values()) { clearTimeout(h.retry); h.retry = undefined; }
    },
    jobsOfRun: jobsOf,
    forgetRun,
    cacheSizes() {
      const sizes: JobExecutorCacheSizes = { jobsByRun: jobsByRun.size, podsByJob: podsByJob.size, handles: handles.size, endSeen: 0, outputs: 0, logsSaved: 0, podLookups: 0, stopping: 0 };
      for (const h of handles.values()) {
        if (h.endSeen !== undefined) sizes.endSeen++;
        if (h.outputs) sizes.outputs++;
        if (h.log) sizes.logsSaved++;
        if (h.podLookup) sizes.podLookups++;
        if (h.stopping) sizes.stopping++;
      }
      return sizes;
    },

    async submit(task) {
      if (attemptSubmitted(latestByStep(task.runId).get(task.stepId)?.job, task.attempt)) return;
      const tool = tools.get(task.toolName);
      if (!tool) throw new Error(`unknown tool ${task.toolName}`);
      const uid = opts.ownerUid?.(task.runId);
      // The reconciler resolves each step's pod (task.pod); core's taskPod says what one without it runs.
      const pod = taskPod(task, tool, stepPods);
      if (!pod.ok) throw new Error(pod.message);
      const job = buildJob(task, {
        ...opts.template, namespace, stepPods, toolImage: pod.image,
        ...(pod.resources ? { resources: pod.resources } : {}),
        ...(uid ? { owner: { name: task.runId, uid } } : {}),
      });
      let cur: Job;
      try {
        cur = await client.request<Job>("POST", paths.jobs(namespace), { body: job });
      } catch (e) {
        if (!isAlreadyExists(e)) throw e;
        // Created before (by an earlier leader or before a restart): that counts as done.
        cur = await client.request<Job>("GET", `${paths.jobs(namespace)}/${encodeURIComponent(job.metadata.name)}`);
      }
      // Assumed versions are not reported by the watch again: the handle syncs here.
      jobs.assume(cur);
      sync(track(task.runId, cur.metadata.name));
    },

    /** Reads only: the caches, the handles' outputs (read once), a failed Job's pod the watch has not delivered. */
    async observe(runId) {
      const out = new Map<string, ObservedStepState>();
      for (const [stepId, { h, job }] of latestByStep(runId)) {
        let pod = podOf(h.job);
        const image = imageOf(job);
        let seen = observeJob(job, pod, image);
        if (podNeededToExplain(job, pod, seen)) {
          // Wait for the pod (failures are rare).
          pod = await lookUpPod(h, job).catch((e: unknown) => { onError(e); return undefined; });
          if (pod) seen = observeJob(job, pod, image);
        }
        const state = observedAttempt(seen, pod, { toolVersion: toolOf(job)?.version ?? null, endSeen: h.endSeen });
        out.set(stepId, seen.completed ? withOutputs(state, await readOutputs(h, job, pod)) : state);
      }
      return out;
    },

    async kill(runId, stepId, reason) {
      const a = latestByStep(runId).get(stepId);
      // Not over a decided outcome; a timeout only as a backstop to the Job controller's deadline (core's stopDue).
      if (!a || !stopDue(a.job, podOf(a.h.job), reason, clock.now())) return;
      await stopJob(a.h, a.job, reason);
    },

    watch(fn) {
      events.on("change", fn);
      return () => events.off("change", fn);
    },

    async logs(runId, stepId) {
      const a = latestByStep(runId).get(stepId);
      if (!a) return undefined;
      const pod = podOf(a.h.job);
      if (!pod) return undefined;
      return podLog(pod.metadata.name);
    },

    async activeSteps() {
      return activeStepsOf(jobs.list());
    },
  };
}
