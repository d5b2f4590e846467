/**
 * The planner: from a run's spec and what is observed of its steps, what to do now. Pure and
 * level-triggered — the same observations always give the same plan, so reconciling twice
 * is a no-op. Policies:
 *  - a step may start when all its dependencies completed and the quota admitted it;
 *  - after a step fails, no new step starts; running steps finish; the run then fails, and
 *    steps that never started are `skipped`;
 *  - a cancelled run kills its running steps; steps that never started are `cancelled`
 *    (a step cancelled from outside while its run was not counts as failed);
 *  - a running step past its timeout is killed (reason `timeout`); the caller is asked to
 *    come back when the next timeout falls due (`requeueAfterMs`).
 */
import { buildDag } from "./dag.js";
import { MAX_STEP_TIMEOUT_MS } from "./spec/schema.js";

export type StepStatus = "pending" | "waiting" | "running" | "completed" | "failed" | "cancelled" | "skipped";
export type RunStatus = "queued" | "running" | "completed" | "failed" | "cancelled";

/** What the executor reports of a step that was started (absent: never started). */
export interface ObservedStep {
  phase: "running" | "completed" | "failed" | "cancelled";
  startedAt?: number;
  finishedAt?: number;
  exitCode?: number | null;
  message?: string;
}

export interface PlanStep { stepId: string; dependsOn?: readonly string[]; timeout?: number }

export interface PlanInput {
  steps: readonly PlanStep[];
  observed: ReadonlyMap<string, ObservedStep>;
  cancelRequested: boolean;
  now: number;
  /** Ready steps the quota admitted, and queue positions of the ones it did not. */
  admission: { admitted: ReadonlySet<string>; positions: ReadonlyMap<string, number> };
}

export interface StepState {
  stepId: string;
  status: StepStatus;
  waitingReason?: string;
  queuePosition?: number;
}

export interface RunPlan {
  /** Steps to create now. */
  start: string[];
  /** Running steps to stop, and why. */
  kill: Array<{ stepId: string; reason: "timeout" | "cancelled" }>;
  /** Steps whose dependencies are complete and that have not started (the quota's demand). */
  ready: string[];
  status: RunStatus;
  progressPct: number;
  steps: StepState[];
  /** Reconcile again after this long (the next step timeout), if anything is running with one. */
  requeueAfterMs?: number;
  /** Why the run failed, when it did. */
  error?: string;
}

export const WAITING_REASON = "OrgConcurrencyLimit";

/** The timeout a step runs under, clamped to the spec's limit. */
export function stepTimeoutMs(step: PlanStep): number {
  return Math.min(step.timeout ?? MAX_STEP_TIMEOUT_MS, MAX_STEP_TIMEOUT_MS);
}

/** Steps whose dependencies all completed and that were never started, in declaration order. */
export function readySteps(steps: readonly PlanStep[], observed: ReadonlyMap<string, ObservedStep>): string[] {
  const done = new Set([...observed].filter(([, o]) => o.phase === "completed").map(([id]) => id));
  const started = new Set(observed.keys());
  return buildDag(steps).candidates(done, started);
}

export function planRun(input: PlanInput): RunPlan {
  const { steps, observed, now, cancelRequested, admission } = input;
  // A step cancelled although the run was not (stopped from outside) counts as a failure.
  const failed = [...observed.entries()].filter(([, o]) => o.phase === "failed" || (o.phase === "cancelled" && !cancelRequested));
  const running = [...observed.entries()].filter(([, o]) => o.phase === "running");
  const halted = cancelRequested || failed.length > 0;
  const ready = halted ? [] : readySteps(steps, observed);
  const start = ready.filter((s) => admission.admitted.has(s));

  const kill: RunPlan["kill"] = [];
  let requeueAfterMs: number | undefined;
  for (const [stepId, o] of running) {
    if (cancelRequested) { kill.push({ stepId, reason: "cancelled" }); continue; }
    const step = steps.find((s) => s.stepId === stepId);
    if (!step || o.startedAt === undefined) continue;
    const left = o.startedAt + stepTimeoutMs(step) - now;
    if (left <= 0) kill.push({ stepId, reason: "timeout" });
    else requeueAfterMs = Math.min(requeueAfterMs ?? Infinity, left);
  }

  const readySet = new Set(ready);
  const startSet = new Set(start);
  const stepStates: StepState[] = steps.map(({ stepId }) => {
    const o = observed.get(stepId);
    if (o) return { stepId, status: o.phase };
    if (startSet.has(stepId)) return { stepId, status: "running" };
    if (readySet.has(stepId)) {
      const position = admission.positions.get(stepId);
      return { stepId, status: "waiting", waitingReason: WAITING_REASON, ...(position !== undefined ? { queuePosition: position } : {}) };
    }
    if (cancelRequested) return { stepId, status: "cancelled" };
    if (failed.length > 0) return { stepId, status: "skipped" };
    return { stepId, status: "pending" };
  });

  const total = steps.length;
  const completed = stepStates.filter((s) => s.status === "completed").length;
  const active = running.length > 0 || start.length > 0;
  let status: RunStatus;
  if (cancelRequested) status = running.length > 0 ? "running" : "cancelled";
  else if (failed.length > 0) status = running.length > 0 ? "running" : "failed";
  else if (total > 0 && completed === total) status = "completed";
  else if (active || observed.size > 0) status = "running";
  else status = "queued";

  const plan: RunPlan = {
    start,
    kill,
    ready,
    status,
    progressPct: total === 0 ? 0 : Math.round((completed / total) * 1000) / 10,
    steps: stepStates,
  };
  if (requeueAfterMs !== undefined && !cancelRequested) plan.requeueAfterMs = requeueAfterMs;
  const firstFailure = failed[0];
  if (firstFailure && status === "failed") {
    plan.error = `step ${firstFailure[0]} failed${firstFailure[1].message ? `: ${firstFailure[1].message}` : firstFailure[1].exitCode != null ? ` with exit code ${firstFailure[1].exitCode}` : ""}`;
  }
  return plan;
}
