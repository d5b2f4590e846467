/**
 * `reconcile(runId)`: level-triggered. Reads the run and what the executor observes of its
 * steps, asks core for a plan (quota admission from the shared Ledger), applies it — start
 * admitted steps, kill timed-out or cancelled ones — and patches the run's status. Calling
 * it twice with nothing changed does nothing. The decisions are core's (plan, quota,
 * step records, manifest); this module reads, calls them and writes. Queue positions are not
 * written: they are computed when a run is read (Engine.withQueuePositions).
 */
import { outputPosition } from "../core/interpolate.js";
import { buildManifest } from "../core/manifest.js";
import { planRun, readySteps, settle, stepTimeoutMs } from "../core/plan.js";
import type { Clock, ObjectStore, ObservedStepState, RunRecord, RunStore, StepExecutor, StepTask } from "../core/ports.js";
import type { Ledger } from "../core/quota.js";
import { resolveInputs, resolveStepParameters } from "../core/spec/resolve.js";
import { validateSpec } from "../core/spec/validate.js";
import { manifestKey, runRootKey, workspaceRoot } from "../core/layout.js";
import { isFinal } from "../core/status.js";
import { manifestDue, mergeStepRecords, nextAttempts, observedForPlan } from "../core/step-records.js";
import { buildInvocation, defaultCatalogue, type ToolCatalogue } from "../core/tools/index.js";
import { stepCompute, type StepPodConfig } from "../core/kubernetes/step-pods.js";

/** How soon a run is looked at again after one of its steps was told to stop. */
export const KILL_RECHECK_MS = 1000;

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
  /**
   * Cluster mode's step-pod configuration: each step's pod resources, image and thread count
   * (core/kubernetes/step-pods.ts). Absent: the built-in defaults for an executor that runs
   * containers, and embedded mode's rule (only a step's own resources.cpu sets threads) else.
   */
  stepPods?: StepPodConfig;
  /** The reference volumes configured where steps run (`ref://<volume>/…` must name one); default none. */
  referenceVolumes?: readonly string[];
  onStepStarted?: (s: StepStart) => void;
  /** This reconcile wrote the run's end (once per run: a finished run is not reconciled again). */
  onRunEnded?: (run: RunRecord) => void;
}

const workspaceRootOf = (run: Pick<RunRecord, "organization" | "workspace">) => workspaceRoot(run.organization, run.workspace);

export function createReconciler(deps: ReconcilerDeps) {
  const tools = deps.tools ?? defaultCatalogue;
  const referenceVolumes = deps.referenceVolumes ?? [];
  const podConfig = deps.stepPods ?? (deps.executor.runtime === "container" ? {} : undefined);
  /** Steps seen waiting for a slot, by run (a cache of this process, for StepStart only). */
  const waitedForSlot = new Map<string, Set<string>>();

  async function writeManifest(run: RunRecord): Promise<void> {
    const manifest = buildManifest(run, deps.clock.now());
    await deps.store.put(manifestKey(run), JSON.stringify(manifest, null, 2), { contentType: "application/json" });
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

  const reconcile = async (runId: string): Promise<{ requeueAfterMs?: number }> => {
    const run = await deps.runs.get(runId);
    // Deleted (e.g. `kubectl delete pipelinerun`): its steps no longer hold slots.
    if (!run) { deps.ledger.removeFromEveryOrganization(runId); waitedForSlot.delete(runId); return {}; }
    if (isFinal(run.status)) { deps.ledger.remove(run.organization, run.id); waitedForSlot.delete(run.id); return {}; }
    const now = deps.clock.now();
    // A run that cannot be executed as stored (e.g. a PipelineRun applied by hand that does not
    // match the schema, or whose spec does not validate) fails with the reason, once.
    const problem = run.invalid ?? (run.status === "queued" ? specProblem(run, tools, referenceVolumes) : undefined);
    if (problem) {
      await deps.runs.update(run.id, (r) => ({
        ...r, status: "failed", error: `invalid PipelineRun: ${problem}`, completedAt: new Date(now).toISOString(),
        steps: r.steps.map((st) => (st.status === "pending" || st.status === "waiting" ? { ...st, status: "skipped" } : st)),
      })).then((ended) => { if (ended && isFinal(ended.status)) deps.onRunEnded?.(ended); });
      deps.ledger.remove(run.organization, run.id);
      return {};
    }
    const seen = await deps.executor.observe(run.id);

    const observed = observedForPlan(run.steps, seen);
    const nextAttempt = nextAttempts(run.steps, seen);

    const settled = settle(observed);
    const running = [...settled].filter(([, o]) => o.phase === "running").map(([s]) => s);
    const halted = run.cancelRequested || [...settled.values()].some((o) => o.phase === "failed");
    deps.ledger.observe(run.organization, run.id, Date.parse(run.createdAt), { known: settled.keys(), running, ready: halted ? [] : readySteps(run.spec.steps, observed) });
    const admitted = new Set(deps.ledger.allocation(run.organization).admitted.get(run.id) ?? []);
    const plan = planRun({ steps: run.spec.steps, observed, cancelRequested: run.cancelRequested, now, admission: { admitted } });

    // Start admitted steps: resolve and build the argv of each, assume all their slots before
    // the first create (so no other reconcile spends them meanwhile), then submit; a create
    // that fails gives back its slot and those of the steps not submitted yet.
    const startFailures = new Map<string, string>();
    const started = new Map<string, { command: string; argv: string[]; attempt: number; references: string[] }>();
    const outputsOf = (stepId: string, output: "outputFile" | "outputFile2") => {
      const rec = run.steps.find((s) => s.stepId === stepId);
      const o = seen.get(stepId)?.outputs ?? rec?.outputs ?? [];
      const pos = outputPosition(output);
      const hit = o.find((x) => x.position === pos);
      return hit ? `${run.outputFolder}/${hit.filename}` : undefined;
    };
    const toStart: Array<{ task: StepTask; command: string }> = [];
    for (const stepId of plan.start) {
      const step = run.spec.steps.find((s) => s.stepId === stepId);
      const tool = step ? tools.get(step.toolName) : undefined;
      if (!step || !tool) { startFailures.set(stepId, `invalid parameters: unknown tool ${step?.toolName ?? "?"}`); continue; }
      const params = resolveStepParameters(step, run.parameters, outputsOf);
      if (!params.ok) { startFailures.set(stepId, `invalid parameters: ${params.errors.map((e) => e.message).join("; ")}`); continue; }
      // Threads and (cluster mode) the pod from one decision, so the argv and the pod agree.
      const compute = stepCompute({ tool, params: params.parameters, resources: step.resources, config: podConfig });
      if (!compute.ok) { startFailures.set(stepId, compute.message); continue; }
      const built = buildInvocation(tool, compute.params, { runtime: deps.executor.runtime ?? "local", referenceVolumes });
      if (!built.ok) { startFailures.set(stepId, `invalid parameters: ${built.errors.map((e) => `${e.path}: ${e.message}`).join("; ")}`); continue; }
      toStart.push({
        command: built.command,
        task: {
          runId: run.id, organization: run.organization, stepId, attempt: nextAttempt.get(stepId) ?? 1, toolName: tool.id, invocation: built.invocation,
          workspaceRoot: workspaceRootOf(run), runRoot: runRootKey(run), timeoutMs: stepTimeoutMs(step),
          ...(compute.resources && compute.image ? { pod: { image: compute.image, resources: compute.resources } } : {}),
        },
      });
    }
    deps.ledger.assume(run.organization, run.id, toStart.map((s) => s.task.stepId));
    for (const [i, { task, command }] of toStart.entries()) {
      try {
        await deps.executor.submit(task);
        started.set(task.stepId, { command, argv: task.invocation.argv, attempt: task.attempt, references: (task.invocation.references ?? []).map((r) => r.uri) });
        reportStart(run, seen, task.stepId);
      } catch (e) {
        for (const rest of toStart.slice(i)) deps.ledger.undo(run.organization, run.id, rest.task.stepId);
        throw e;
      }
    }
    for (const k of plan.kill) await deps.executor.kill(run.id, k.stepId, k.reason);
    if (startFailures.size > 0) {
      // Parameters only known to be wrong once resolved, or a pod the configuration refuses
      // (above maxResources, no image): the step fails; reconcile again to settle.
      await deps.runs.update(run.id, (r) => ({ ...r, steps: r.steps.map((s) => (startFailures.has(s.stepId) ? { ...s, status: "failed", error: startFailures.get(s.stepId) ?? null } : s)) }));
      return {};
    }

    const fresh = started.size > 0 ? await deps.executor.observe(run.id) : seen;
    const steps = mergeStepRecords({ records: run.steps, plan, fresh, seen, started });
    const terminal = isFinal(plan.status);
    const slotWaits = plan.steps.filter((st) => st.status === "waiting").map((st) => st.stepId);
    if (slotWaits.length) waitedForSlot.set(run.id, new Set([...(waitedForSlot.get(run.id) ?? []), ...slotWaits]));
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
    const due = manifestDue(run, nextOf(run));
    if (due) await writeManifest(nextOf(run));
    const updated = await deps.runs.update(run.id, (r) => {
      const next = nextOf(r);
      return JSON.stringify(next) === JSON.stringify(r) ? undefined : next;
    });
    // The stored record may have moved on meanwhile (e.g. a cancel request): write what it says now.
    if (updated && due && JSON.stringify(updated) !== JSON.stringify(nextOf(run))) await writeManifest(updated);
    if (terminal) {
      deps.ledger.remove(run.organization, run.id);
      waitedForSlot.delete(run.id);
      if (updated && isFinal(updated.status)) deps.onRunEnded?.(updated);
    }
    // After a kill, look again soon: level-triggered, a step still running is killed again.
    const requeue = Math.min(plan.requeueAfterMs ?? Infinity, plan.kill.length > 0 ? KILL_RECHECK_MS : Infinity);
    return Number.isFinite(requeue) ? { requeueAfterMs: requeue } : {};
  };
  /** Sizes of what it keeps per run (pruned when runs end; the operator reports them). */
  return Object.assign(reconcile, { cacheSizes: () => ({ waitedForSlot: waitedForSlot.size }) });
}

/** Why a queued run's spec or parameters cannot run, if they cannot (checked before anything starts). */
function specProblem(run: RunRecord, tools: ToolCatalogue, referenceVolumes: readonly string[]): string | undefined {
  const check = validateSpec(run.spec, { tools, referenceVolumes });
  if (!check.valid) return check.errors.slice(0, 5).map((e) => `${e.path || "/"}: ${e.message}`).join("; ");
  const inputs = resolveInputs(run.spec, run.parameters, referenceVolumes);
  if (!inputs.ok) return inputs.errors.slice(0, 5).map((e) => e.message).join("; ");
  return undefined;
}
