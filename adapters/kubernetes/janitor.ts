/**
 * Cluster mode's clean-up, run by the leading operator: what would otherwise stay forever.
 *  - A finished PipelineRun is deleted `runTtlMs` after it finished (OPERON_RUN_TTL_DAYS);
 *    its files stay in object storage, and its Jobs go with it (owner references).
 *  - A step Job stopped by the operator (cancel, timeout, a pod that cannot start) is only
 *    suspended, so the Job controller's TTL never applies to it: it is deleted, with its pods,
 *    once its run has finished and the run's status records the stop (core/kubernetes/pipelinerun.ts
 *    `stopRecorded`). Until then it is what tells the reconciler the step was stopped.
 *  - A finished run still without the `operon.dev/finished` label (its writer stopped between
 *    the final status and the label) is labelled, so it leaves the operator's cache.
 * Finished runs are not in the operator's cache: they are listed from the API server a page at
 * a time (label `operon.dev/finished`), metadata only (their finish time is an annotation),
 * so a sweep holds one small page whatever the history; a finished run is read whole only
 * when one of its stopped Jobs is waiting to be deleted.
 * Deletions carry the object's uid as precondition, so a newer object of the same name is
 * never deleted. Level-triggered: a full sweep runs after start-up and every `intervalMs`;
 * a run that finishes is looked at at once. A failed delete is tried again by the next sweep.
 */
import { ANNOTATION, LABEL, runExpired, runFinishedAt, stopRecorded } from "../../core/kubernetes/pipelinerun.js";
import type { JobObject } from "../../core/kubernetes/jobs.js";
import { isConflict, isNotFound, METADATA_LIST, paths, type KubeClient } from "./client.js";
import type { KubeObject } from "./informer.js";
import type { PR } from "./run-store.js";

type Job = JobObject & KubeObject;

export interface JanitorOptions {
  client: KubeClient;
  namespace: string;
  /** The run store's cache (runs in progress), and how a finished run is labelled finished. */
  runs: { resource(runId: string): PR | undefined; resources(): PR[]; retire(runId: string): Promise<void> };
  /** The executor's Job cache, and its index of a run's Jobs. */
  jobs: { list(): Job[] };
  jobsOfRun?: (runId: string) => Job[];
  /** Finished PipelineRuns are deleted this long after they finished. */
  runTtlMs: number;
  /** The clock the TTL is measured with (default Date.now). */
  now?: () => number;
  /** Time between full sweeps (default 60 s). */
  intervalMs?: number;
  /** Told after each full sweep (for the metrics). */
  onSwept?: () => void;
  /** Page size of the listing of finished runs (default 500). */
  pageSize?: number;
  onError?: (e: unknown) => void;
  /** Told of each deletion (for the log). */
  onDeleted?: (kind: "PipelineRun" | "Job", name: string, why: string) => void;
}

export interface Janitor {
  /** A run changed (or went away): if it has finished, delete its stopped Jobs now. */
  runChanged(runId: string): void;
  /** One full sweep of the caches (also runs on its own every intervalMs). */
  sweep(): Promise<void>;
  /** Full sweeps completed so far. */
  sweeps(): number;
  /** Deletions in flight. */
  pending(): number;
  stop(): Promise<void>;
}

const runOfJob = (j: Job) => j.metadata.annotations?.[ANNOTATION.runId] ?? j.metadata.labels?.[LABEL.run];

export function startJanitor(o: JanitorOptions): Janitor {
  const now = o.now ?? (() => Date.now());
  const deleting = new Map<string, Promise<void>>();
  let stopped = false;
  let sweeps = 0;

  function remove(kind: "PipelineRun" | "Job", name: string, uid: string | undefined, why: string): Promise<void> {
    const key = `${kind}/${name}`;
    const cur = deleting.get(key);
    if (cur || stopped) return cur ?? Promise.resolve();
    const path = kind === "Job" ? `${paths.jobs(o.namespace)}/${encodeURIComponent(name)}` : `${paths.pipelineRuns(o.namespace)}/${encodeURIComponent(name)}`;
    const p = (async () => {
      try {
        // Background: the Job's pods (the run's Jobs) are deleted by the garbage collector.
        await o.client.request("DELETE", path, { body: { apiVersion: "v1", kind: "DeleteOptions", propagationPolicy: "Background", ...(uid ? { preconditions: { uid } } : {}) } });
        o.onDeleted?.(kind, name, why);
      } catch (e) {
        // Gone already, or replaced by a newer object of the same name: nothing to do.
        if (!isNotFound(e) && !isConflict(e) && !stopped) o.onError?.(e);
      } finally {
        deleting.delete(key);
      }
    })();
    deleting.set(key, p);
    return p;
  }

  /** Deletes the given Jobs of the run whose stop the run's status records. */
  function removeStopped(res: PR, jobs: Iterable<Job>): Promise<void>[] {
    const out: Promise<void>[] = [];
    for (const j of jobs) {
      if (j.metadata.annotations?.[ANNOTATION.stopped] && stopRecorded(res, j.metadata.name)) {
        out.push(remove("Job", j.metadata.name, j.metadata.uid, `stopped (${j.metadata.annotations[ANNOTATION.stopped]}), recorded in ${res.metadata.name}'s status`));
      }
    }
    return out;
  }

  async function sweep(): Promise<void> {
    const t = now();
    const work: Promise<void>[] = [];
    const expire = (res: PR) => {
      if (runExpired(res, t, o.runTtlMs)) work.push(remove("PipelineRun", res.metadata.name, res.metadata.uid, `finished more than ${Math.round(o.runTtlMs / 1000)} s ago`));
    };
    const stoppedJobs = new Map<string, Job[]>();
    for (const j of o.jobs.list()) {
      const r = runOfJob(j);
      if (!r || !j.metadata.annotations?.[ANNOTATION.stopped]) continue;
      stoppedJobs.set(r, [...(stoppedJobs.get(r) ?? []), j]);
    }
    const stoppedOf = (res: PR) => {
      const jobs = stoppedJobs.get(res.metadata.name);
      if (jobs) { stoppedJobs.delete(res.metadata.name); work.push(...removeStopped(res, jobs)); }
    };
    /** A listed (metadata-only) finished run with stopped Jobs: read whole for its status. */
    const stoppedOfListed = (name: string) => {
      if (!stoppedJobs.has(name)) return;
      work.push(o.client.request<PR>("GET", `${paths.pipelineRuns(o.namespace)}/${encodeURIComponent(name)}`).then(
        (res) => Promise.all(removeStopped(res, stoppedJobs.get(name) ?? [])).then(() => undefined),
        (e: unknown) => { if (!isNotFound(e) && !stopped) o.onError?.(e); },
      ));
    };
    for (const res of o.runs.resources()) {
      expire(res);
      stoppedOf(res);
      if (runFinishedAt(res) !== undefined) work.push(o.runs.retire(res.metadata.name).catch((e: unknown) => { if (!stopped) o.onError?.(e); }));
    }
    // The finished runs, a page at a time (none of them is in the cache once retired).
    let cont: string | undefined;
    do {
      if (stopped) break;
      const page = await o.client.request<{ metadata: { continue?: string }; items?: PR[] | null }>("GET", paths.pipelineRuns(o.namespace), { query: { labelSelector: LABEL.finished, limit: o.pageSize ?? 500, continue: cont }, accept: METADATA_LIST });
      for (const res of page.items ?? []) { expire(res); stoppedOfListed(res.metadata.name); }
      cont = page.metadata.continue || undefined;
    } while (cont);
    await Promise.all(work);
    sweeps++;
    o.onSwept?.();
  }

  let running: Promise<void> | undefined;
  const tick = () => {
    if (stopped || running) return;
    running = sweep().catch((e: unknown) => o.onError?.(e)).finally(() => { running = undefined; });
  };
  const timer = setInterval(tick, o.intervalMs ?? 60_000);
  timer.unref?.();
  tick();

  return {
    runChanged(runId) {
      if (stopped) return;
      const res = o.runs.resource(runId);
      if (!res) return;
      const jobs = o.jobsOfRun ? o.jobsOfRun(runId) : o.jobs.list().filter((j) => runOfJob(j) === runId);
      void Promise.all(removeStopped(res, jobs));
    },
    sweep,
    sweeps: () => sweeps,
    pending: () => deleting.size,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
      await Promise.all([...deleting.values()]);
    },
  };
}
