/**
 * What the Job executor (adapters/kubernetes/job-executor.ts) does about a step attempt — its
 * Job — decided here, so the adapter only reads, calls these and writes (issue 29: adapters
 * do, never decide). core/kubernetes/jobs.ts says what a Job and its pod mean; this module
 * says what follows from that for the executor:
 *  - `stopDue`: whether a stop the engine asks for is sent now: never over an outcome already
 *    decided, and for a timeout only as a backstop to the Job controller's own deadline;
 *  - `completedOutputs` and `withOutputs`: where a completed Job's outputs are found (the
 *    stage-out helper's report, else object storage, one read at a time) and that a declared
 *    output storage does not have fails the step after all;
 *  - `observedAttempt`: the step as observe() reports it;
 *  - `toolLogFinal`, `podNeededToExplain`: when the tool's log is copied, and when a failed
 *    Job's pod is read before its failure is reported;
 *  - `newestAttempts`, `attemptSubmitted`, `activeStepsOf`: which Job speaks for a step, whether
 *    an attempt was submitted already, and the steps live Jobs run;
 *  - `taskPod`: the tool container a task runs with when the reconciler did not resolve one.
 */
import type { ObjectInfo, ObservedStepState, StepOutput, StepTask } from "../ports.js";
import { parseReferencesReport } from "../references.js";
import type { ToolDefinition } from "../tools/index.js";
import { jobActive, jobStep, podSucceeded, stepEnded, terminationOutputs, STAGE_CONTAINER_IN, type JobObject, type JobObservation, type PodObject } from "./jobs.js";
import { ANNOTATION } from "./pipelinerun.js";
import { stepCompute, type ResourceRequirements, type StepPodConfig } from "./step-pods.js";

/** How long past a Job's activeDeadlineSeconds the Job controller has to fail it before the operator stops it itself. */
export const DEADLINE_GRACE_MS = 10_000;

/**
 * Whether the executor stops the Job when the engine asks it to (kill), at `now`. An outcome
 * already decided (the pod Succeeded, SuccessCriteriaMet, FailureTarget: stepEnded) is not
 * overwritten by a stop. The Job controller enforces the step's timeout (activeDeadlineSeconds)
 * and says so (DeadlineExceeded): the operator's own timer races it, so a timeout stops the Job
 * only as a backstop, once the deadline is DEADLINE_GRACE_MS past (the reconciler asks again).
 */
export function stopDue(job: JobObject, pod: PodObject | undefined, reason: "timeout" | "cancelled", now: number): boolean {
  if (stepEnded(job, pod)) return false;
  if (reason !== "timeout") return true;
  const startedAt = job.status?.startTime ? Date.parse(job.status.startTime) : undefined;
  const deadline = job.spec?.activeDeadlineSeconds;
  return startedAt === undefined || deadline === undefined || now >= startedAt + deadline * 1000 + DEADLINE_GRACE_MS;
}

/** The Job says its step succeeded: `SuccessCriteriaMet`, or `Complete` after it. */
export function jobSucceeded(job: JobObject): boolean {
  return job.status?.conditions?.some((c) => (c.type === "Complete" || c.type === "SuccessCriteriaMet") && c.status === "True") ?? false;
}

/**
 * Nothing writes to the tool's log any more, so it is copied now: the pod Succeeded (its tool
 * has exited), or the Job's pods are gone (Complete / Failed: a terminating tool may still
 * write until then). At the pod's success already, so that a run's last step has its log
 * copied before the run ends (a finished run's steps are not looked at again).
 */
export function toolLogFinal(job: JobObject, pod: PodObject | undefined): boolean {
  return podSucceeded(pod) || !jobActive(job);
}

/**
 * A failed step whose pod the pod watch has not delivered: its error must say what the pod
 * says (exit code, OOMKilled, eviction), so the pod is read first. A Job the operator stopped
 * carries its own message.
 */
export function podNeededToExplain(job: JobObject, pod: PodObject | undefined, seen: JobObservation): boolean {
  return !pod && seen.state.phase === "failed" && !job.metadata.annotations?.[ANNOTATION.stopped];
}

/** A completed Job's outputs, or why its step failed after all. */
export type JobOutputs = { ok: true; outputs: StepOutput[] } | { ok: false; message: string };

/**
 * A completed Job's outputs from what was read so far. The stage-out helper's report (its
 * termination message) when the pod has one; else each declared output and its secondary
 * files as object storage has them, under the run folder, in order: `{ read: key }` asks for
 * the next key to look up, `heads` holds the answers so far (undefined: absent). A declared
 * (primary) output that storage does not have fails the step; a missing secondary file is left
 * out. Declared outputs that cannot be parsed fail it too.
 */
export function completedOutputs(job: JobObject, pod: PodObject | undefined, heads: ReadonlyMap<string, ObjectInfo | undefined>): JobOutputs | { read: string } {
  const reported = terminationOutputs(pod);
  if (reported) return { ok: true, outputs: reported };
  const a = job.metadata.annotations ?? {};
  const runRoot = a[ANNOTATION.runRoot] ?? "";
  let declared: Array<{ path: string; secondary: string[] }>;
  try { declared = JSON.parse(a[ANNOTATION.outputs] ?? "[]") as typeof declared; } catch { return { ok: false, message: "the Job's declared outputs are unreadable" }; }
  const found: StepOutput[] = [];
  for (const [position, o] of declared.entries()) {
    for (const [i, path] of [o.path, ...o.secondary].entries()) {
      const key = runRoot + path;
      if (!heads.has(key)) return { read: key };
      const info = heads.get(key);
      if (!info) { if (i === 0) return { ok: false, message: `declared output ${path} was not produced` }; continue; }
      found.push({ filename: path, key: info.key, size: info.size, sha256: info.sha256 ?? "", ...(i === 0 ? { position } : {}) });
    }
  }
  return { ok: true, outputs: found };
}

/** A completed step with its outputs; one whose declared output is missing has failed. */
export function withOutputs(state: ObservedStepState, outputs: JobOutputs): ObservedStepState {
  return outputs.ok ? { ...state, outputs: outputs.outputs } : { ...state, phase: "failed", message: outputs.message };
}

/**
 * The step attempt as observe() reports it (its outputs aside): what the Job and its pod say,
 * the tool's version (the pinned image's; its digest, once a pod reports one, is exact), when
 * this process first saw it end (`endSeen`, once it is not running) and the checksums of its
 * reference files from the stage-in helper's termination message.
 */
export function observedAttempt(seen: JobObservation, pod: PodObject | undefined, o: { toolVersion: string | null; endSeen: number | undefined }): ObservedStepState {
  const state: ObservedStepState = { ...seen.state, toolVersion: o.toolVersion, ...(o.endSeen !== undefined && seen.state.phase !== "running" ? { endSeenAt: o.endSeen } : {}) };
  const references = parseReferencesReport(pod?.status?.initContainerStatuses?.find((c) => c.name === STAGE_CONTAINER_IN)?.state?.terminated?.message);
  if (references) state.references = references;
  return state;
}

/** The newest attempt of each step, by step id (Jobs that run no step are left out). */
export function newestAttempts<T extends JobObject>(jobs: Iterable<T>): Map<string, T> {
  const out = new Map<string, T>();
  for (const job of jobs) {
    const s = jobStep(job);
    if (!s) continue;
    const cur = out.get(s.stepId);
    if (!cur || (jobStep(cur)?.attempt ?? 0) < s.attempt) out.set(s.stepId, job);
  }
  return out;
}

/** The step's newest Job is this attempt or a later one: the attempt is not started twice. */
export function attemptSubmitted(newest: JobObject | undefined, attempt: number): boolean {
  return newest !== undefined && Number(newest.metadata.annotations?.[ANNOTATION.attempt]) >= attempt;
}

/** The steps running now by run, from the live Jobs (jobActive): a starting engine's ledger. */
export function activeStepsOf(jobs: Iterable<JobObject>): Array<{ organization: string; runId: string; stepIds: string[] }> {
  const byRun = new Map<string, { organization: string; runId: string; stepIds: string[] }>();
  for (const j of jobs) {
    const s = jobStep(j);
    if (!s || !jobActive(j)) continue;
    const cur = byRun.get(s.runId) ?? { organization: s.organization, runId: s.runId, stepIds: [] };
    cur.stepIds.push(s.stepId);
    byRun.set(s.runId, cur);
  }
  return [...byRun.values()];
}

/**
 * The tool container a task's Job runs: the one the reconciler resolved (task.pod, from the
 * same stepCompute decision as the argv's threads); a task that comes without one gets the
 * tool's defaults under the step-pod configuration.
 */
export function taskPod(task: Pick<StepTask, "pod">, tool: ToolDefinition, config: StepPodConfig): { ok: true; image: string; resources?: ResourceRequirements } | { ok: false; message: string } {
  if (task.pod) return { ok: true, image: task.pod.image, resources: task.pod.resources };
  const c = stepCompute({ tool, params: {}, config });
  if (!c.ok) return c;
  return { ok: true, image: c.image ?? tool.image, ...(c.resources ? { resources: c.resources } : {}) };
}
