/**
 * The per-organization limit on concurrent compute tasks (spec: Limits; docs/architecture.md#the-organization-limit), as pure
 * bookkeeping, and the one admission path for every compute task: a run's steps and the
 * tasks outside runs (tool runs, renders, viewer preparations, which enter as claims) are
 * demands in one queue per organization. `allocate` hands the organization's free slots to
 * them first come, first served (a run by its creation time, then step order; a task by
 * when it asked); the rest wait with a visible queue position and never fail. `Ledger` keeps the counts between reconciles the way Kueue's
 * cache does: derived from observed steps, with slots "assumed" before a create and undone
 * if the create fails, so two reconciles never both spend the last slot. Queue positions are
 * computed when a run is read (`queuePositions`, Kueue's visibility API), never written.
 */

export const DEFAULT_ORG_CONCURRENCY = 5;

export interface Demand {
  /** The run, or the task (a claim) whose one "step" is itself. */
  runId: string;
  createdAt: number;
  /** Ready steps of the run, in declaration order. */
  ready: readonly string[];
}

export interface Allocation {
  /** Per run, the ready steps that may start now. */
  admitted: Map<string, string[]>;
  /** Per run, the steps that wait for a slot, with their 1-based position in the org's queue. */
  waiting: Map<string, Array<{ stepId: string; position: number }>>;
}

/** First come, first served: earlier runs first, then declaration order within a run. */
export function allocate(limit: number, active: number, demands: readonly Demand[]): Allocation {
  const ordered = [...demands].sort((a, b) => a.createdAt - b.createdAt || (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0));
  let free = Math.max(0, limit - active);
  let position = 0;
  const admitted = new Map<string, string[]>();
  const waiting = new Map<string, Array<{ stepId: string; position: number }>>();
  for (const d of ordered) {
    for (const stepId of d.ready) {
      if (free > 0) {
        free--;
        admitted.set(d.runId, [...(admitted.get(d.runId) ?? []), stepId]);
      } else {
        waiting.set(d.runId, [...(waiting.get(d.runId) ?? []), { stepId, position: ++position }]);
      }
    }
  }
  return { admitted, waiting };
}

interface OrgBook {
  /** Steps observed active (running), per run. */
  active: Map<string, Set<string>>;
  /** Steps assumed active: admitted and being created, not yet observed. */
  assumed: Map<string, Set<string>>;
  demands: Map<string, Demand>;
  /** Ids among the above that are tasks (claims), not runs. */
  tasks: Set<string>;
}

/** An organization's claims as last observed: those holding a slot, and those waiting with their place. */
export interface ObservedClaims {
  admitted: readonly string[];
  waiting: ReadonlyArray<{ id: string; createdAt: number }>;
}

/** Per-organization bookkeeping shared by the reconciles of all runs (and synchronous tool runs). */
export class Ledger {
  private readonly orgs = new Map<string, OrgBook>();

  constructor(private readonly limitOf: (org: string) => number = () => DEFAULT_ORG_CONCURRENCY) {}

  private book(org: string): OrgBook {
    let b = this.orgs.get(org);
    if (!b) { b = { active: new Map(), assumed: new Map(), demands: new Map(), tasks: new Set() }; this.orgs.set(org, b); }
    return b;
  }

  /**
   * Level-triggered update from what was observed of one run: the steps the executor knows
   * (in any phase), those of them still running, and the run's ready steps. An assumed step
   * stops being "assumed" once the executor knows it — even if it already finished between
   * two reconciles, which would otherwise leak its slot.
   */
  observe(org: string, runId: string, createdAt: number, seen: { known: Iterable<string>; running: readonly string[]; ready: readonly string[] }): void {
    const b = this.book(org);
    const { running, ready } = seen;
    if (running.length) b.active.set(runId, new Set(running)); else b.active.delete(runId);
    const assumed = b.assumed.get(runId);
    if (assumed) {
      for (const s of seen.known) assumed.delete(s);
      if (assumed.size === 0) b.assumed.delete(runId);
    }
    const inFlight = b.assumed.get(runId) ?? new Set<string>();
    const stillReady = ready.filter((s) => !inFlight.has(s));
    if (stillReady.length) b.demands.set(runId, { runId, createdAt, ready: stillReady }); else b.demands.delete(runId);
  }

  /** Removes a finished or deleted run: its running and assumed steps and its demand. */
  remove(org: string, runId: string): void {
    const b = this.orgs.get(org);
    if (!b) return;
    b.active.delete(runId);
    b.assumed.delete(runId);
    b.demands.delete(runId);
    b.tasks.delete(runId);
  }

  /** Removes a run from every organization (its record was deleted, so its organization is not known). */
  removeFromEveryOrganization(runId: string): void {
    for (const org of this.orgs.keys()) this.remove(org, runId);
  }

  /** Running plus assumed steps of the organization. */
  inUse(org: string): number {
    const b = this.orgs.get(org);
    if (!b) return 0;
    let n = 0;
    for (const s of b.active.values()) n += s.size;
    for (const s of b.assumed.values()) n += s.size;
    return n;
  }

  limit(org: string): number { return this.limitOf(org); }

  /** The allocation for the whole organization at this moment. */
  allocation(org: string): Allocation {
    const b = this.book(org);
    return allocate(this.limitOf(org), this.inUse(org), [...b.demands.values()]);
  }

  /**
   * Runs the allocation would start a step of now — the head of the organization's queue,
   * oldest first. Only these need a look when a slot frees; waking every waiting run made
   * the reconciles of a long queue grow with its square.
   */
  admittedRuns(org: string): string[] {
    const tasks = this.orgs.get(org)?.tasks;
    return [...this.allocation(org).admitted.keys()].filter((id) => !tasks?.has(id));
  }

  /** Claims (tasks outside runs) the allocation would admit now, oldest first. */
  admittedTasks(org: string): string[] {
    const tasks = this.orgs.get(org)?.tasks;
    return [...this.allocation(org).admitted.keys()].filter((id) => tasks?.has(id));
  }

  /** Whether any claim (task outside runs) of the organization waits for a slot. */
  hasWaitingClaims(org: string): boolean {
    const b = this.orgs.get(org);
    if (!b) return false;
    for (const id of b.tasks) if (b.demands.has(id)) return true;
    return false;
  }

  /** Runs of the organization that have steps waiting for a slot. */
  waitingRuns(org: string): string[] {
    const b = this.orgs.get(org);
    return [...(b?.demands.keys() ?? [])].filter((id) => !b?.tasks.has(id));
  }

  /**
   * Level-triggered update from the organization's claims as listed: an admitted claim holds
   * a slot (and stops being assumed), a waiting one is a demand at its place, and a claim no
   * longer listed (released, or expired and deleted) holds nothing. A claim assumed and still
   * listed as waiting is a listing from before its admission was written: it stays assumed.
   */
  observeClaims(org: string, seen: ObservedClaims): void {
    const b = this.book(org);
    const listed = new Set([...seen.admitted, ...seen.waiting.map((w) => w.id)]);
    for (const id of [...b.tasks]) if (!listed.has(id)) this.remove(org, id);
    for (const id of seen.admitted) {
      b.tasks.add(id);
      b.active.set(id, new Set([id]));
      b.assumed.delete(id);
      b.demands.delete(id);
    }
    for (const w of seen.waiting) {
      b.tasks.add(w.id);
      if (!b.assumed.has(w.id)) b.demands.set(w.id, { runId: w.id, createdAt: w.createdAt, ready: [w.id] });
    }
  }

  /** Marks `stepIds` of `runId` as taking a slot before they are created ("assume"). */
  assume(org: string, runId: string, stepIds: readonly string[]): void {
    if (stepIds.length === 0) return;
    const b = this.book(org);
    const set = b.assumed.get(runId) ?? new Set<string>();
    for (const s of stepIds) set.add(s);
    b.assumed.set(runId, set);
    const d = b.demands.get(runId);
    if (d) {
      const ready = d.ready.filter((s) => !set.has(s));
      if (ready.length) b.demands.set(runId, { ...d, ready }); else b.demands.delete(runId);
    }
  }

  /** Undoes an assumption whose create failed, freeing the slot. */
  undo(org: string, runId: string, stepId: string): void {
    const set = this.orgs.get(org)?.assumed.get(runId);
    set?.delete(stepId);
    if (set && set.size === 0) this.orgs.get(org)?.assumed.delete(runId);
  }
}

/** A run as the queue sees it: when it was created and its steps' recorded states. */
export interface QueuedRun { id: string; createdAt: number; steps: ReadonlyArray<{ stepId: string; status: string }> }

/**
 * Positions of an organization's waiting steps, from its runs' records and its claims as
 * listed (for a process that holds no ledger: the api-server in cluster mode). Running steps take the slots; waiting
 * steps queue first come, first served, exactly as `allocate` orders them.
 */
export function queuePositions(limit: number, runs: readonly QueuedRun[], claims: ObservedClaims = { admitted: [], waiting: [] }): Map<string, Map<string, number>> {
  let active = claims.admitted.length;
  const demands: Demand[] = claims.waiting.map((w) => ({ runId: w.id, createdAt: w.createdAt, ready: [w.id] }));
  for (const r of runs) {
    active += r.steps.filter((s) => s.status === "running").length;
    const ready = r.steps.filter((s) => s.status === "waiting").map((s) => s.stepId);
    if (ready.length) demands.push({ runId: r.id, createdAt: r.createdAt, ready });
  }
  return positionsOf(allocate(limit, active, demands));
}

/** An allocation's waiting steps as run → step → position. */
export function positionsOf(a: Allocation): Map<string, Map<string, number>> {
  return new Map([...a.waiting].map(([runId, ws]) => [runId, new Map(ws.map((w) => [w.stepId, w.position]))]));
}
