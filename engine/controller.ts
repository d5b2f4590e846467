/**
 * The operator loop: a work queue of run ids fed by watches on the run store and the
 * executor, drained by a few workers that call `reconcile`. When a step of one run ends,
 * the other active runs of its organization are queued too, since a slot may have freed.
 * On start every unfinished run is queued (resync), so a restarted server resumes them.
 * What it learns per run (its organization, the active runs of each organization) is
 * forgotten once a reconcile has seen the run finished or deleted.
 */
import type { RunStore, StepExecutor } from "../core/ports.js";
import { WorkQueue, runWorkers, type QueueClock } from "./workqueue.js";

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
  /** Runs once before the first reconcile (e.g. rebuild the quota ledger from live Jobs). */
  prime?: () => Promise<void>;
}

/** Sizes of what a controller keeps per run, by its run store (tests: pruned when runs end). */
const cacheSizesByStore = new WeakMap<RunStore, () => { orgOf: number; activeOrgs: number; activeRuns: number }>();
export function controllerCacheSizes(runs: RunStore): { orgOf: number; activeOrgs: number; activeRuns: number } | undefined {
  return cacheSizesByStore.get(runs)?.();
}

const FINISHED = ["completed", "failed", "cancelled"];

export function startController(opts: ControllerOptions) {
  const queue = new WorkQueue<string>({ ...(opts.clock ? { clock: opts.clock } : {}), baseDelayMs: 50, maxDelayMs: 30_000 });
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
    if (!r || FINISHED.includes(r.status)) {
      if (prune) untrack(id, org);
      return org;
    }
    orgOf.set(id, r.organization);
    const set = active.get(r.organization) ?? new Set<string>();
    set.add(id);
    active.set(r.organization, set);
    return org;
  };
  const sizes = () => ({ orgOf: orgOf.size, activeOrgs: active.size, activeRuns: [...active.values()].reduce((n, s) => n + s.size, 0) });
  cacheSizesByStore.set(opts.runs, sizes);
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
      if (FINISHED.includes(r.status)) continue;
      await track(r.id);
      queue.add(r.id);
    }
    await runWorkers(queue, opts.workers ?? 4, async (id) => {
      const res = await opts.reconcile(id);
      const org = await track(id, true);
      // A reconcile may have freed slots (a run ended, a step was seen finished) after the
      // waiting runs were last looked at: while slots are free, look at them again.
      if (org && opts.waitingRuns && opts.hasFreeSlot?.(org)) for (const w of opts.waitingRuns(org)) if (w !== id) queue.add(w);
      return res ?? {};
    }, opts.onError);
  })();
  return {
    queue,
    /** Stops taking work and waits for the workers to finish what they hold. */
    async stop(): Promise<void> {
      unwatchRuns();
      unwatchExec();
      queue.shutDown();
      await done;
      if (cacheSizesByStore.get(opts.runs) === sizes) cacheSizesByStore.delete(opts.runs);
    },
  };
}
