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
 *    come back when the next timeout falls due (`requeueAfterMs`);
 *  - a step whose attempt was lost (the process running it vanished with the server) is run
 *    again as its next attempt, up to MAX_ATTEMPTS in all, then fails (`retry` lists them).
 */
import { buildDag } from "./dag.js";
import { MAX_STEP_TIMEOUT_MS } from "./spec/schema.js";

import type { RunStatus, StepStatus } from "./status.js";
export type { RunStatus, StepStatus } from "./status.js";

/** A step whose process vanished is retried up to this many attempts in all. */
export const MAX_ATTEMPTS = 3;

/**
 * What the executor reports of a step that was started (absent: never started). `lost`: the
 * attempt's process vanished (the server stopped while it ran); nothing of it stands.
 */
export interface ObservedStep {
  phase: "running" | "completed" | "failed" | "cancelled" | "lost";
  /** The attempt observed (1 when not known). */
  attempt?: number;
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
  /** Ready steps the quota admitted. */
  admission: { admitted: ReadonlySet<string> };
}

export interface StepState {
  stepId: string;
  status: StepStatus;
  waitingReason?: string;
  /** Why the step failed, when the plan decided it (a lost step out of attempts). */
  error?: string;
}

export interface RunPlan {
  /** Steps to create now. */
  start: string[];
  /** Running steps to stop, and why. */
  kill: Array<{ stepId: string; reason: "timeout" | "cancelled" }>;
  /** Steps whose dependencies are complete and that have not started (the quota's demand). */
  ready: string[];
  /** Steps whose last attempt was lost and that run again (when admitted) as their next attempt. */
  retry: string[];
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

/** A lost attempt with attempts left: the step is to run again, as if never started. */
const retriable = (o: ObservedStep) => o.phase === "lost" && (o.attempt ?? 1) < MAX_ATTEMPTS;

/**
 * What counts as observed: a lost attempt with attempts left is dropped (the step is ready
 * again); one out of attempts is a failure.
 */
export function settle(observed: ReadonlyMap<string, ObservedStep>): Map<string, ObservedStep> {
  const out = new Map<string, ObservedStep>();
  for (const [id, o] of observed) {
    if (retriable(o)) continue;
    out.set(id, o.phase === "lost" ? { ...o, phase: "failed", message: `${o.message ?? "the step's process vanished"} (attempt ${o.attempt ?? 1} of ${MAX_ATTEMPTS}; not retried again)` } : o);
  }
  return out;
}

/** Steps whose dependencies all completed and that were never started (or lost), in declaration order. */
export function readySteps(steps: readonly PlanStep[], observed: ReadonlyMap<string, ObservedStep>): string[] {
  const settled = settle(observed);
  const done = new Set([...settled].filter(([, o]) => o.phase === "completed").map(([id]) => id));
  const started = new Set(settled.keys());
  return buildDag(steps).candidates(done, started);
}

export function planRun(input: PlanInput): RunPlan {
  const { steps, now, cancelRequested, admission } = input;
  const retry = [...input.observed].filter(([, o]) => retriable(o)).map(([id]) => id);
  const observed = settle(input.observed);
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
    if (o) return { stepId, status: o.phase as StepStatus, ...(input.observed.get(stepId)?.phase === "lost" && o.message ? { error: o.message } : {}) };
    if (startSet.has(stepId)) return { stepId, status: "running" };
    if (readySet.has(stepId)) return { stepId, status: "waiting", waitingReason: WAITING_REASON };
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
    retry,
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
