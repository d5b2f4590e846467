/**
 * `reconcile(runId)`: level-triggered. Reads the run and what the executor observes of its
 * steps, asks core for a plan (quota admission from the shared Ledger), applies it — start
 * admitted steps, kill timed-out or cancelled ones — and patches the run's status. Calling
 * it twice with nothing changed does nothing. `run.json` is written when the run starts and
 * when it ends.
 */
import { buildManifest } from "../core/manifest.js";
import { planRun, readySteps, stepTimeoutMs, type ObservedStep } from "../core/plan.js";
import type { Clock, ObjectStore, ObservedStepState, RunRecord, RunStore, StepExecutor, StepRecord, StepTask } from "../core/ports.js";
import type { Ledger } from "../core/quota.js";
import { resolveInputs, resolveStepParameters } from "../core/spec/resolve.js";
import { validateSpec } from "../core/spec/validate.js";
import { buildInvocation, defaultCatalogue, type ToolCatalogue } from "../core/tools/index.js";

/** A step whose process vanished (server restart) is retried up to this many attempts in all. */
export const MAX_ATTEMPTS = 3;
export const LOST_PREFIX = "lost:";
/** How soon a run is looked at again after one of its steps was told to stop. */
export const KILL_RECHECK_MS = 1000;
/**
 * A change of nothing but waiting steps' queue positions is written at most this often per
 * run: every slot that frees moves every waiting run up the queue, and writing each move
 * made status writes grow with the square of the queue. A run with waiting steps is looked
 * at again after this long, so the position shown catches up (level-triggered) even when
 * nothing else wakes it (only the head of the queue is woken when a slot frees).
 */
export const POSITION_REFRESH_MS = 5000;
/**
 * Position-only writes of all runs together are kept near this many per second: with more
 * waiting runs than POSITION_WRITES_PER_SECOND × POSITION_REFRESH_MS / 1000, each run's
 * refresh interval grows with their number (500 waiting runs: every 50 s), so a long queue
 * does not load the API server with writes that only move positions.
 */
export const POSITION_WRITES_PER_SECOND = 10;

/** How often a run's queue positions may be rewritten when `waitingRuns` runs wait in all. */
export function positionRefreshMs(waitingRuns: number): number {
  return Math.max(POSITION_REFRESH_MS, Math.ceil((waitingRuns * 1000) / POSITION_WRITES_PER_SECOND));
}

/**
 * A step was started: how long after it became ready (its last parent seen ended, or the
 * run created for a first step), and whether it waited for an organization slot meanwhile.
 * For the operator's metrics; a restart forgets which steps waited.
 */
export interface StepStart {
  organization: string;
  runId: string;
  stepId: string;
  latencyMs: number;
  waitedForSlot: boolean;
  /** Whether it has parents (false: a first step, whose latency runs from its run's creation). */
  dependent: boolean;
}

export interface ReconcilerDeps {
  runs: RunStore;
  executor: StepExecutor;
  store: ObjectStore;
  ledger: Ledger;
  clock: Clock;
  tools?: ToolCatalogue;
  onStepStarted?: (s: StepStart) => void;
}

const TERMINAL = new Set(["completed", "failed", "cancelled"]);
export const workspaceRootOf = (run: Pick<RunRecord, "organization" | "workspace">) => `orgs/${run.organization}/workspaces/${run.workspace}/`;
const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());

/** Sizes of what a reconciler keeps per run, by its run store (tests: pruned when runs end). */
const cacheSizesByStore = new WeakMap<RunStore, () => { positionsWritten: number; waitedForSlot: number }>();
export const reconcilerCacheSizes = (runs: RunStore) => cacheSizesByStore.get(runs)?.();

export function createReconciler(deps: ReconcilerDeps) {
  const tools = deps.tools ?? defaultCatalogue;
  /** When each run's queue positions were last written (a cache of this process, not state). */
  const positionsWritten = new Map<string, number>();
  const withoutPositions = (r: RunRecord) => JSON.stringify({ ...r, steps: r.steps.map(({ queuePosition: _q, ...st }) => st) });
  /** Steps seen waiting for a slot, by run (a cache of this process, for StepStart only). */
  const waitedForSlot = new Map<string, Set<string>>();
  cacheSizesByStore.set(deps.runs, () => ({ positionsWritten: positionsWritten.size, waitedForSlot: waitedForSlot.size }));

  async function writeManifest(run: RunRecord): Promise<void> {
    const manifest = buildManifest(run, deps.clock.now());
    await deps.store.put(`${workspaceRootOf(run)}${run.outputFolder}/run.json`, JSON.stringify(manifest, null, 2), { contentType: "application/json" });
  }

  /** Tells onStepStarted how long the step took from ready to started. */
  function reportStart(run: RunRecord, seen: Map<string, ObservedStepState>, stepId: string): void {
    if (!deps.onStepStarted) return;
    const waited = waitedForSlot.get(run.id)?.delete(stepId) ?? false;
    const step = run.spec.steps.find((s) => s.stepId === stepId);
    let readyAt = Date.parse(run.createdAt);
    for (const p of step?.dependsOn ?? []) {
      const o = seen.get(p);
      const end = o?.endSeenAt ?? o?.finishedAt;
      if (end === undefined) return; // not known (e.g. seen before a restart): no figure
      readyAt = Math.max(readyAt, end);
    }
    deps.onStepStarted({ organization: run.organization, runId: run.id, stepId, latencyMs: Math.max(0, deps.clock.now() - readyAt), waitedForSlot: waited, dependent: (step?.dependsOn?.length ?? 0) > 0 });
  }

  return async function reconcile(runId: string): Promise<{ requeueAfterMs?: number }> {
    const run = await deps.runs.get(runId);
    // Deleted (e.g. `kubectl delete pipelinerun`): its steps no longer hold slots.
    if (!run) { deps.ledger.forget(runId); positionsWritten.delete(runId); waitedForSlot.delete(runId); return {}; }
    if (TERMINAL.has(run.status)) { deps.ledger.remove(run.organization, run.id); positionsWritten.delete(run.id); waitedForSlot.delete(run.id); return {}; }
    const now = deps.clock.now();
    // A run that cannot be executed as stored (e.g. a PipelineRun applied by hand that does not
    // match the schema, or whose spec does not validate) fails with the reason, once.
    const problem = run.invalid ?? (run.status === "queued" ? specProblem(run, tools) : undefined);
    if (problem) {
      await deps.runs.update(run.id, (r) => ({
        ...r, status: "failed", error: `invalid PipelineRun: ${problem}`, completedAt: new Date(now).toISOString(),
        steps: r.steps.map((st) => (st.status === "pending" || st.status === "waiting" ? { ...st, status: "skipped" } : st)),
      }));
      deps.ledger.remove(run.organization, run.id);
      return {};
    }
    const seen = await deps.executor.observe(run.id);

    // What the planner sees: the executor's observations, minus lost steps that may be retried,
    // plus steps that failed before reaching the executor (recorded on the run).
    const observed = new Map<string, ObservedStep>();
    const nextAttempt = new Map<string, number>();
    for (const rec of run.steps) nextAttempt.set(rec.stepId, rec.attempt + 1);
    for (const [stepId, o] of seen) {
      const retry = o.phase === "failed" && o.message?.startsWith(LOST_PREFIX) && o.attempt < MAX_ATTEMPTS;
      nextAttempt.set(stepId, Math.max(nextAttempt.get(stepId) ?? 1, o.attempt + 1));
      if (!retry) observed.set(stepId, toObserved(o));
    }
    // What the run already records stands when the executor no longer shows it: a failed step
    // that never reached it, and a completed step whose Job (or work directory) is gone — a
    // completed step never runs again, whatever happens to its Job.
    for (const rec of run.steps) {
      if (seen.has(rec.stepId)) continue;
      if (rec.status === "failed" && rec.error) observed.set(rec.stepId, { phase: "failed", message: rec.error });
      if (rec.status === "completed") observed.set(rec.stepId, { phase: "completed", ...(rec.startedAt ? { startedAt: Date.parse(rec.startedAt) } : {}), ...(rec.completedAt ? { finishedAt: Date.parse(rec.completedAt) } : {}), ...(rec.exitCode !== null ? { exitCode: rec.exitCode } : {}) });
    }

    const running = [...observed].filter(([, o]) => o.phase === "running").map(([s]) => s);
    const halted = run.cancelRequested || [...observed.values()].some((o) => o.phase === "failed");
    deps.ledger.observe(run.organization, run.id, Date.parse(run.createdAt), { known: observed.keys(), running, ready: halted ? [] : readySteps(run.spec.steps, observed) });
    const alloc = deps.ledger.allocation(run.organization);
    const admitted = new Set(alloc.admitted.get(run.id) ?? []);
    const positions = new Map((alloc.waiting.get(run.id) ?? []).map((w) => [w.stepId, w.position]));
    const plan = planRun({ steps: run.spec.steps, observed, cancelRequested: run.cancelRequested, now, admission: { admitted, positions } });

    // Start admitted steps: resolve and build the argv of each, assume all their slots before
    // the first create (so no other reconcile spends them meanwhile), then submit; a create
    // that fails gives back its slot and those of the steps not submitted yet.
    const startFailures = new Map<string, string>();
    const started = new Map<string, { command: string; argv: string[]; attempt: number }>();
    const outputsOf = (stepId: string, output: "outputFile" | "outputFile2") => {
      const rec = run.steps.find((s) => s.stepId === stepId);
      const o = seen.get(stepId)?.outputs ?? rec?.outputs ?? [];
      const pos = output === "outputFile" ? 0 : 1;
      const hit = o.find((x) => x.position === pos);
      return hit ? `${run.outputFolder}/${hit.filename}` : undefined;
    };
    const toStart: Array<{ task: StepTask; command: string }> = [];
    for (const stepId of plan.start) {
      const step = run.spec.steps.find((s) => s.stepId === stepId);
      const tool = step ? tools.get(step.toolName) : undefined;
      if (!step || !tool) { startFailures.set(stepId, `unknown tool ${step?.toolName ?? "?"}`); continue; }
      const params = resolveStepParameters(step, run.parameters, outputsOf);
      if (!params.ok) { startFailures.set(stepId, params.errors.map((e) => e.message).join("; ")); continue; }
      const built = buildInvocation(tool, params.parameters, { runtime: deps.executor.runtime ?? "local" });
      if (!built.ok) { startFailures.set(stepId, built.errors.map((e) => `${e.path}: ${e.message}`).join("; ")); continue; }
      toStart.push({
        command: built.command,
        task: {
          runId: run.id, organization: run.organization, stepId, attempt: nextAttempt.get(stepId) ?? 1, toolName: tool.id, invocation: built.invocation,
          workspaceRoot: workspaceRootOf(run), runRoot: `${workspaceRootOf(run)}${run.outputFolder}/`, timeoutMs: stepTimeoutMs(step),
        },
      });
    }
    deps.ledger.assume(run.organization, run.id, toStart.map((s) => s.task.stepId));
    for (const [i, { task, command }] of toStart.entries()) {
      try {
        await deps.executor.submit(task);
        started.set(task.stepId, { command, argv: task.invocation.argv, attempt: task.attempt });
        reportStart(run, seen, task.stepId);
      } catch (e) {
        for (const rest of toStart.slice(i)) deps.ledger.undo(run.organization, run.id, rest.task.stepId);
        throw e;
      }
    }
    for (const k of plan.kill) await deps.executor.kill(run.id, k.stepId, k.reason);
    if (startFailures.size > 0) {
      // Parameters only known to be wrong once resolved: the step fails; reconcile again to settle.
      await deps.runs.update(run.id, (r) => ({ ...r, steps: r.steps.map((s) => (startFailures.has(s.stepId) ? { ...s, status: "failed", error: `invalid parameters: ${startFailures.get(s.stepId)}` } : s)) }));
      return {};
    }

    const fresh = started.size > 0 ? await deps.executor.observe(run.id) : seen;
    const steps: StepRecord[] = run.steps.map((rec) => {
      const p = plan.steps.find((s) => s.stepId === rec.stepId);
      const o = fresh.get(rec.stepId) ?? seen.get(rec.stepId); // seen a moment ago, even if gone since (a Job GC'd meanwhile)
      const st = started.get(rec.stepId);
      const next: StepRecord = {
        ...rec,
        status: o && !(o.phase === "failed" && o.message?.startsWith(LOST_PREFIX) && o.attempt < MAX_ATTEMPTS) ? o.phase : (p?.status ?? rec.status),
        startedAt: iso(o?.startedAt) ?? rec.startedAt,
        completedAt: iso(o?.finishedAt) ?? (o ? null : rec.completedAt),
        exitCode: o?.exitCode ?? rec.exitCode,
        error: o?.phase === "failed" || o?.phase === "cancelled" ? (o.message ?? rec.error) : rec.status === "failed" ? rec.error : null,
        attempt: o?.attempt ?? rec.attempt,
        outputs: o?.outputs ?? rec.outputs,
        ...(st ? { command: st.command, argv: st.argv } : {}),
        ...(o?.toolVersion !== undefined ? { toolVersion: o.toolVersion } : {}),
        ...(o?.imageDigest !== undefined ? { imageDigest: o.imageDigest } : {}),
        ...(o?.executable ? { executable: o.executable } : {}),
        ...(o?.jobName ? { jobName: o.jobName } : {}),
      };
      if (p?.status === "waiting" && !o) { next.waitingReason = p.waitingReason as string; if (p.queuePosition !== undefined) next.queuePosition = p.queuePosition; }
      else { delete next.waitingReason; delete next.queuePosition; }
      return next;
    });
    const terminal = TERMINAL.has(plan.status);
    const slotWaits = plan.steps.filter((st) => st.status === "waiting").map((st) => st.stepId);
    if (slotWaits.length) waitedForSlot.set(run.id, new Set([...(waitedForSlot.get(run.id) ?? []), ...slotWaits]));
    const refreshMs = positionRefreshMs(deps.ledger.waitingRunCount());
    let positionsDeferredMs: number | undefined;
    const nextOf = (r: RunRecord): RunRecord => ({
      ...r,
      steps,
      status: plan.status,
      progressPct: plan.progressPct,
      error: plan.error ?? null,
      startedAt: r.startedAt ?? (plan.status !== "queued" ? new Date(now).toISOString() : null),
      completedAt: terminal ? (r.completedAt ?? new Date(now).toISOString()) : null,
    });
    // run.json first, then the status that says it is due: a failed manifest write fails this
    // reconcile before the run is marked started or finished, so the retry writes it again
    // (level-triggered; a terminal run is never looked at again).
    const starting = run.startedAt === null && plan.status !== "queued";
    if (starting || terminal) await writeManifest(nextOf(run));
    const updated = await deps.runs.update(run.id, (r) => {
      const next = nextOf(r);
      if (JSON.stringify(next) === JSON.stringify(r)) return undefined;
      if (withoutPositions(next) === withoutPositions(r)) {
        const since = now - (positionsWritten.get(r.id) ?? -Infinity);
        if (since < refreshMs) { positionsDeferredMs = refreshMs - since; return undefined; }
      }
      positionsWritten.set(r.id, now);
      return next;
    });
    // The stored record may have moved on meanwhile (e.g. a cancel request): write what it says now.
    if (updated && (starting || terminal) && JSON.stringify(updated) !== JSON.stringify(nextOf(run))) await writeManifest(updated);
    if (terminal) { deps.ledger.remove(run.organization, run.id); positionsWritten.delete(run.id); waitedForSlot.delete(run.id); }
    // After a kill, look again soon: level-triggered, a step still running is killed again.
    const waiting = plan.steps.some((st) => st.status === "waiting");
    const requeue = Math.min(plan.requeueAfterMs ?? Infinity, plan.kill.length > 0 ? KILL_RECHECK_MS : Infinity, positionsDeferredMs ?? (waiting ? refreshMs : Infinity));
    return Number.isFinite(requeue) ? { requeueAfterMs: requeue } : {};
  };
}

/** Why a queued run's spec or parameters cannot run, if they cannot (checked before anything starts). */
function specProblem(run: RunRecord, tools: ToolCatalogue): string | undefined {
  const check = validateSpec(run.spec, { tools });
  if (!check.valid) return check.errors.slice(0, 5).map((e) => `${e.path || "/"}: ${e.message}`).join("; ");
  const inputs = resolveInputs(run.spec, run.parameters);
  if (!inputs.ok) return inputs.errors.slice(0, 5).map((e) => e.message).join("; ");
  return undefined;
}

function toObserved(o: ObservedStepState): ObservedStep {
  return {
    phase: o.phase,
    ...(o.startedAt !== undefined ? { startedAt: o.startedAt } : {}),
    ...(o.finishedAt !== undefined ? { finishedAt: o.finishedAt } : {}),
    ...(o.exitCode !== undefined ? { exitCode: o.exitCode } : {}),
    ...(o.message !== undefined ? { message: o.message } : {}),
  };
}
