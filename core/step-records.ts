/**
 * A run's step records and its manifest, as decisions over what the run records and what
 * the executor observes — pure, so the reconciler only reads, calls these and writes:
 *  - `observedForPlan`: what the planner sees. The executor's observations stand; where it
 *    no longer shows a step (its Job was garbage-collected, its work directory removed), a
 *    completed record stays completed and a recorded failure stays failed — a completed step
 *    never runs again.
 *  - `nextAttempts`: the attempt number a step starts with (one past any recorded or seen).
 *  - `mergeStepRecords`: the records written after a reconcile.
 *  - `manifestDue`: whether run.json must be written before a status change is stored.
 */
import type { ObservedStep, RunPlan } from "./plan.js";
import type { ObservedStepState, RunRecord, StepRecord } from "./ports.js";
import { mergeReferences } from "./references.js";
import { isFinal } from "./status.js";

const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());

/** The executor's view of a step, as the planner takes it. */
export function toObserved(o: ObservedStepState): ObservedStep {
  return {
    phase: o.phase,
    attempt: o.attempt,
    ...(o.startedAt !== undefined ? { startedAt: o.startedAt } : {}),
    ...(o.finishedAt !== undefined ? { finishedAt: o.finishedAt } : {}),
    ...(o.exitCode !== undefined ? { exitCode: o.exitCode } : {}),
    ...(o.message !== undefined ? { message: o.message } : {}),
  };
}

/** What the planner sees of each step: the executor's observations, else what the run records. */
export function observedForPlan(records: readonly StepRecord[], seen: ReadonlyMap<string, ObservedStepState>): Map<string, ObservedStep> {
  const out = new Map<string, ObservedStep>();
  for (const [stepId, o] of seen) out.set(stepId, toObserved(o));
  for (const rec of records) {
    if (seen.has(rec.stepId)) continue;
    if (rec.status === "failed" && rec.error) out.set(rec.stepId, { phase: "failed", attempt: rec.attempt, message: rec.error });
    if (rec.status === "completed") {
      out.set(rec.stepId, {
        phase: "completed", attempt: rec.attempt,
        ...(rec.startedAt ? { startedAt: Date.parse(rec.startedAt) } : {}),
        ...(rec.completedAt ? { finishedAt: Date.parse(rec.completedAt) } : {}),
        ...(rec.exitCode !== null ? { exitCode: rec.exitCode } : {}),
      });
    }
  }
  return out;
}

/** The attempt each step would start as now: one past the highest recorded or observed. */
export function nextAttempts(records: readonly StepRecord[], seen: ReadonlyMap<string, ObservedStepState>): Map<string, number> {
  const out = new Map<string, number>();
  for (const rec of records) out.set(rec.stepId, rec.attempt + 1);
  for (const [stepId, o] of seen) out.set(stepId, Math.max(out.get(stepId) ?? 1, o.attempt + 1));
  return out;
}

export interface MergeInput {
  records: readonly StepRecord[];
  plan: Pick<RunPlan, "steps">;
  /** Observed after this reconcile's starts (or `seen` when nothing started). */
  fresh: ReadonlyMap<string, ObservedStepState>;
  /** Observed before them: stands for a step gone from `fresh` meanwhile (a Job GC'd). */
  seen: ReadonlyMap<string, ObservedStepState>;
  /** Steps started by this reconcile: the command and argv they run with, and the reference URIs they read. */
  started: ReadonlyMap<string, { command: string; argv: string[]; references?: readonly string[] }>;
}

/** The step records after a reconcile: what was observed, else what the plan says, else what was recorded. */
export function mergeStepRecords({ records, plan, fresh, seen, started }: MergeInput): StepRecord[] {
  return records.map((rec) => {
    const p = plan.steps.find((s) => s.stepId === rec.stepId);
    const o = fresh.get(rec.stepId) ?? seen.get(rec.stepId);
    // A lost attempt is not a state of the step: the plan says what it is now.
    const live = o && o.phase !== "lost" ? o : undefined;
    const st = started.get(rec.stepId);
    const status = live ? live.phase : (p?.status ?? rec.status);
    // The references the step was started with, each with the checksum its executor reported
    // (a step started now has none yet: what an earlier attempt read does not stand for it).
    const recorded = rec.references?.flatMap((r) => (r.sha256 !== undefined && r.size !== undefined ? [{ ...r, sha256: r.sha256, size: r.size }] : []));
    const references = st ? mergeReferences(st.references ?? [], o?.references) : mergeReferences(rec.references?.map((r) => r.uri), o?.references ?? recorded);
    const next: StepRecord = {
      ...rec,
      status,
      startedAt: iso(live?.startedAt) ?? (o && !live ? null : rec.startedAt),
      completedAt: iso(live?.finishedAt) ?? (o ? null : rec.completedAt),
      exitCode: live?.exitCode ?? (o && !live ? null : rec.exitCode),
      error: live?.phase === "failed" || live?.phase === "cancelled" ? (live.message ?? rec.error)
        : p?.error && status === "failed" ? p.error
          : rec.status === "failed" ? rec.error : null,
      attempt: o?.attempt ?? rec.attempt,
      outputs: live?.outputs ?? rec.outputs,
      ...(st ? { command: st.command, argv: st.argv } : {}),
      ...(live?.toolVersion !== undefined ? { toolVersion: live.toolVersion } : {}),
      ...(live?.imageDigest !== undefined ? { imageDigest: live.imageDigest } : {}),
      ...(live?.executable ? { executable: live.executable } : {}),
      ...(o?.jobName ? { jobName: o.jobName } : {}),
    } as StepRecord;
    if (references) next.references = references;
    else delete next.references;
    delete next.queuePosition;
    if (status === "waiting" && p?.waitingReason) next.waitingReason = p.waitingReason;
    else delete next.waitingReason;
    return next;
  });
}


/**
 * Whether run.json is due before `next` is stored over `prev`: when the run starts (its
 * first status past queued) and when it ends. It is written before the status that makes
 * it due, so a failed write fails the reconcile and the retry writes it again.
 */
export function manifestDue(prev: Pick<RunRecord, "startedAt" | "status">, next: Pick<RunRecord, "status">): boolean {
  const starting = prev.startedAt === null && next.status !== "queued";
  return starting || isFinal(next.status);
}
