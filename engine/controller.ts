/**
 * The operator loop: a work queue of run ids fed by watches on the run store and the
 * executor, drained by a few workers that call `reconcile`. When a step of one run ends,
 * the other active runs of its organization are queued too, since a slot may have freed.
 * On start every unfinished run is queued (resync), so a restarted server resumes them.
 * What it learns per run (its organization, the active runs of each organization) is
 * forgotten once a reconcile has seen the run finished or deleted.
 */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { RunStore, StepExecutor } from "../core/ports.js";
import { isFinal } from "../core/status.js";
import { WorkQueue, runWorkers, type QueueClock, type QueueMetrics } from "./workqueue.js";

export interface ControllerOptions {
  runs: RunStore;
  executor: StepExecutor;
  reconcile: (runId: string) => Promise<{ requeueAfterMs?: number } | void>;
  workers?: number;
  clock?: QueueClock;
  onError?: (runId: string, error: unknown) => void;
  /**
   * Runs to look at again when a step of `org` ends (a slot may have freed): by default every
   * active run of the organization; the engine narrows it to the runs the quota would admit
   * a step of now (the head of the queue).
   */
  waitingRuns?: (org: string) => Iterable<string>;
  /** Whether the organization has a free slot now (with waitingRuns: wake the waiting after each reconcile). */
  hasFreeSlot?: (org: string) => boolean;
  /** A reconcile left a slot of `org` free: whoever else waits for one (claims) may take it. */
  onSlotFree?: (org: string) => void;
  /** Runs once before the first reconcile (e.g. rebuild the quota ledger from live Jobs). */
  prime?: () => Promise<void>;
  /**
   * Where to register the controller's and its work queue's metrics (controller-runtime's
   * and client-go's names, see docs/metrics.md), labelled with `name`.
   */
  metrics?: Registry;
  /** The controller's name: the `controller` (and work queue `name`) label (default "pipelinerun"). */
  name?: string;
}


/** controller_runtime_reconcile_time_seconds's buckets (controller-runtime's). */
export const RECONCILE_TIME_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
  1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60];
/** The work queue histograms' buckets: client-go's ExponentialBuckets(10e-9, 10, 12), 10 ns to 1,000 s. */
export const WORKQUEUE_BUCKETS = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1, 10, 100, 1000];

export type ReconcileResult = "success" | "error" | "requeue" | "requeue_after";

/**
 * The controller's metrics under controller-runtime's names (pkg/internal/controller/metrics)
 * and its work queue's under client-go's (as controller-runtime registers them, pkg/metrics/
 * workqueue.go), with their help texts, label names and buckets; every series starts at 0.
 * Gauges of the queue's state are read from it when scraped.
 */
function controllerMetrics(registry: Registry, name: string, workers: number, queueOf: () => WorkQueue<string>) {
  const c = { controller: name };
  const q = { name, controller: name };
  const registers = [registry];
  const reconcileTotal = new Counter({ name: "controller_runtime_reconcile_total", help: "Total number of reconciliations per controller", labelNames: ["controller", "result"] as const, registers });
  const reconcileErrors = new Counter({ name: "controller_runtime_reconcile_errors_total", help: "Total number of reconciliation errors per controller", labelNames: ["controller"] as const, registers });
  const reconcileTime = new Histogram({ name: "controller_runtime_reconcile_time_seconds", help: "Length of time per reconciliation per controller", labelNames: ["controller"] as const, buckets: RECONCILE_TIME_BUCKETS, registers });
  const maxConcurrent = new Gauge({ name: "controller_runtime_max_concurrent_reconciles", help: "Maximum number of concurrent reconciles per controller", labelNames: ["controller"] as const, registers });
  const activeWorkers = new Gauge({ name: "controller_runtime_active_workers", help: "Number of currently used workers per controller", labelNames: ["controller"] as const, registers });
  new Gauge({
    name: "workqueue_depth", help: "Current depth of workqueue", labelNames: ["name", "controller"] as const, registers,
    collect() { this.set(q, queueOf().depth); },
  });
  const adds = new Counter({ name: "workqueue_adds_total", help: "Total number of adds handled by workqueue", labelNames: ["name", "controller"] as const, registers });
  const latency = new Histogram({ name: "workqueue_queue_duration_seconds", help: "How long in seconds an item stays in workqueue before being requested", labelNames: ["name", "controller"] as const, buckets: WORKQUEUE_BUCKETS, registers });
  const workDuration = new Histogram({ name: "workqueue_work_duration_seconds", help: "How long in seconds processing an item from workqueue takes.", labelNames: ["name", "controller"] as const, buckets: WORKQUEUE_BUCKETS, registers });
  new Gauge({
    name: "workqueue_unfinished_work_seconds", registers, labelNames: ["name", "controller"] as const,
    help: "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
    collect() { this.set(q, queueOf().unfinishedWork().totalSeconds); },
  });
  new Gauge({
    name: "workqueue_longest_running_processor_seconds", registers, labelNames: ["name", "controller"] as const,
    help: "How many seconds has the longest running processor for workqueue been running.",
    collect() { this.set(q, queueOf().unfinishedWork().longestSeconds); },
  });
  const retries = new Counter({ name: "workqueue_retries_total", help: "Total number of retries handled by workqueue", labelNames: ["name", "controller"] as const, registers });
  // Children bound once (no label hashing per event), each series created at 0.
  const totals = Object.fromEntries((["success", "error", "requeue", "requeue_after"] as const).map((result) => [result, reconcileTotal.labels({ ...c, result })])) as Record<ReconcileResult, { inc(n?: number): void }>;
  const errors = reconcileErrors.labels(c);
  const time = reconcileTime.labels(c);
  const active = activeWorkers.labels(c);
  const added = adds.labels(q);
  const retried = retries.labels(q);
  const queued = latency.labels(q);
  const worked = workDuration.labels(q);
  for (const child of [...Object.values(totals), errors, added, retried]) child.inc(0);
  reconcileTime.zero(c);
  latency.zero(q);
  workDuration.zero(q);
  maxConcurrent.set(c, workers);
  active.set(0);
  const queueMetrics: QueueMetrics = {
    add: () => added.inc(),
    queued: (s) => queued.observe(s),
    worked: (s) => worked.observe(s),
    retry: () => retried.inc(),
  };
  return {
    queueMetrics,
    /** Around one reconcile: counts it by result and times it, as controller-runtime's reconcileHandler does. */
    started(): (result: ReconcileResult) => void {
      const end = time.startTimer();
      active.inc();
      return (result) => {
        active.dec();
        end();
        totals[result].inc();
        if (result === "error") errors.inc();
      };
    },
  };
}

export function startController(opts: ControllerOptions) {
  const workers = opts.workers ?? 4;
  // The gauges read the queue when scraped, after it exists.
  const metrics = opts.metrics ? controllerMetrics(opts.metrics, opts.name ?? "pipelinerun", workers, (): WorkQueue<string> => queue) : undefined;
  const queue: WorkQueue<string> = new WorkQueue<string>({ ...(opts.clock ? { clock: opts.clock } : {}), baseDelayMs: 50, maxDelayMs: 30_000, ...(metrics ? { metrics: metrics.queueMetrics } : {}) });
  /** Unfinished runs' organizations and the unfinished runs of each organization, learned from the store. */
  const orgOf = new Map<string, string>();
  const active = new Map<string, Set<string>>();
  const untrack = (id: string, org: string | undefined) => {
    orgOf.delete(id);
    const set = org === undefined ? undefined : active.get(org);
    if (set?.delete(id) && set.size === 0 && org !== undefined) active.delete(org);
  };
  /**
   * Learns the run's organization; returns it. With `prune` (after a reconcile, which has
   * released whatever slots a finished or deleted run held) a finished or deleted run is
   * forgotten — its organization still returned, so its waiting runs can be woken.
   */
  const track = async (id: string, prune = false): Promise<string | undefined> => {
    const r = await opts.runs.get(id);
    const org = r?.organization ?? orgOf.get(id);
    if (!r || isFinal(r.status)) {
      if (prune) {
        untrack(id, org);
      }
      return org;
    }
    orgOf.set(id, r.organization);
    const set = active.get(r.organization) ?? new Set<string>();
    set.add(id);
    active.set(r.organization, set);
    return org;
  };
  const sizes = () => ({ orgOf: orgOf.size, activeOrgs: active.size, activeRuns: [...active.values()].reduce((n, s) => n + s.size, 0) });
  // A failed read here (a transient API error) only delays learning the run's organization:
  // it is read again after its next reconcile. Never an unhandled rejection.
  const unwatchRuns = opts.runs.watch((id) => { queue.add(id); track(id).catch((e: unknown) => opts.onError?.(id, e)); });
  const unwatchExec = opts.executor.watch((id) => {
    queue.add(id);
    const org = orgOf.get(id);
    if (!org) return;
    for (const other of opts.waitingRuns ? opts.waitingRuns(org) : active.get(org) ?? []) queue.add(other);
  });
  const done = (async () => {
    await opts.prime?.();
    for (const r of await opts.runs.list({})) {
      if (isFinal(r.status)) continue;
      await track(r.id);
      queue.add(r.id);
    }
    const work = async (id: string) => {
      const res = await opts.reconcile(id);
      const org = await track(id, true);
      // A reconcile may have freed slots (a run ended, a step was seen finished) after the
      // waiting runs were last looked at: while slots are free, look at them again.
      if (org && opts.hasFreeSlot?.(org)) {
        if (opts.waitingRuns) for (const w of opts.waitingRuns(org)) if (w !== id) queue.add(w);
        opts.onSlotFree?.(org);
      }
      return res ?? {};
    };
    await runWorkers(queue, workers, !metrics ? work : async (id) => {
      const end = metrics.started();
      let result: ReconcileResult = "error";
      try {
        const res = await work(id);
        result = res.requeueAfterMs === undefined ? "success" : res.requeueAfterMs > 0 ? "requeue_after" : "requeue";
        return res;
      } finally {
        end(result);
      }
    }, opts.onError);
  })();
  return {
    queue,
    /** Sizes of what it keeps per run (pruned when runs end; the operator reports them). */
    cacheSizes: sizes,
    /** Stops taking work and waits for the workers to finish what they hold. */
    async stop(): Promise<void> {
      unwatchRuns();
      unwatchExec();
      queue.shutDown();
      await done;
    },
  };
}
