/**
 * One Kubernetes Job per step (docs/kubernetes.md#step-jobs), as pure data: the Job a step attempt becomes, and
 * what a Job and its pods say about the step (running, completed, failed and why). Kept here
 * so the Kubernetes executor stays a dumb mover of objects and every decision — OOM-killed,
 * evicted, an image that cannot start, a deadline, a stop requested by the operator — is a
 * table-tested function.
 *
 * Retries belong to the Job controller. Every step Job has `backoffLimit: 0`, `restartPolicy:
 * Never` and a `podFailurePolicy`: a pod that failed because Kubernetes disrupted it (condition
 * `DisruptionTarget`: an eviction, a lost node, preemption) is ignored — the controller
 * replaces it and it does not count — while the tool's own non-zero exit fails the Job at once
 * (`FailJob`). A stage-in or stage-out helper that exits non-zero matches no rule and counts
 * against `backoffLimit: 0`, so it fails the Job too: the helpers retry their own storage
 * requests, and what remains (an input missing, an output not produced) would fail again.
 * `podReplacementPolicy: Failed` starts a replacement only once the old pod has fully
 * terminated, so two pods never stage the same outputs at once. A Job can therefore have
 * several pods: the newest speaks for it (newestPod), and one that failed by disruption while
 * the Job is still active is not the step's failure.
 *
 * A step succeeds when the pod that speaks for its Job has Succeeded: every container, the
 * stage-out helper last, exited 0 under `restartPolicy: Never`, so the tool ran and the outputs
 * are in storage, and with one completion and no other pod running the Job controller can only
 * agree. That is read from the pod at once (stepEnded), not after the Job controller has
 * noticed it: the controller batches a Job's pod events for up to a second and queues behind
 * every other Job, and dependent steps waiting on its `SuccessCriteriaMet` would wait with it
 * (the peer bench measured that hop as most of a dependent step's latency). The Job controller
 * (Kubernetes ≥ 1.31) writes `SuccessCriteriaMet` before `Complete` and `FailureTarget` before
 * `Failed`, and adds the final condition only once the Job's pods are gone. Failures are read
 * from the Job (the controller applies the podFailurePolicy), from the first of its pair: at
 * `FailureTarget` the step has failed whatever the controller still has to clean up; success
 * from the pod or from `SuccessCriteriaMet`, whichever is seen first. A deadline the controller
 * writes after the pod succeeded (a race at the deadline) does not undo the success. Whether
 * the Job still holds one of its organization's slots (jobActive) waits for the second:
 * between the two the controller may still be terminating a pod (a deadline: the tool is
 * sent SIGTERM and has its grace period), which uses the node like a running step. So a new
 * leader, which rebuilds its ledger from jobActive, counts such a Job, and a failed tool's
 * log is copied only then (it may still be written to; a succeeded tool's at once: it has
 * exited). The reconciler's own ledger follows the
 * step's observed phase, as it does for a step the operator stopped (whose pod also still
 * terminates): between `SuccessCriteriaMet` and `Complete` no pod of the Job runs at all,
 * and after `FailureTarget` only a pod already being terminated does.
 */
import type { ObservedStepState, StepOutput, StepTask } from "../ports.js";
import { REFERENCE_ROOT } from "../references.js";
import { ANNOTATION, LABEL, jobName, labelValue } from "./pipelinerun.js";
import { DEFAULT_TOOL_RESOURCES, type ResourceRequirements, type StepPodConfig } from "./step-pods.js";

export const STAGE_CONTAINER_IN = "stage-in";
export const TOOL_CONTAINER = "tool";
export const STAGE_CONTAINER_OUT = "stage-out";
export const WORKDIR = "/work";
/** A reference volume's pod volume; it is mounted read-only at `/ref/<name>` (REFERENCE_ROOT). */
export const refVolumeName = (name: string) => `ref-${name}`;

/**
 * The tool container's entry: a fixed script (never built from user input) that runs the
 * argv given as positional parameters, writing standard output to `$OPERON_STDOUT` when the
 * tool's output is its stdout. User values only ever travel as argv elements.
 */
export const TOOL_ENTRY = ["/bin/sh", "-c", 'if [ -n "$OPERON_STDOUT" ]; then exec "$@" > "$OPERON_STDOUT"; fi; exec "$@"', "operon-step"];

/** Waiting reasons of a container that will not start without someone fixing something. */
export const START_FAILURES = new Set(["ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError", "CreateContainerError", "RunContainerError"]);

export interface ContainerState {
  waiting?: { reason?: string; message?: string };
  running?: { startedAt?: string };
  terminated?: { exitCode?: number; reason?: string; message?: string; startedAt?: string; finishedAt?: string };
}
export interface ContainerStatus { name: string; image?: string; imageID?: string; state?: ContainerState; lastState?: ContainerState }

export interface PodCondition { type: string; status: string; reason?: string; message?: string }
export interface PodObject {
  metadata: { name: string; labels?: Record<string, string>; creationTimestamp?: string; deletionTimestamp?: string };
  status?: { phase?: string; reason?: string; message?: string; conditions?: PodCondition[]; initContainerStatuses?: ContainerStatus[]; containerStatuses?: ContainerStatus[] };
}

export interface JobCondition { type: string; status: string; reason?: string; message?: string; lastTransitionTime?: string }
export interface JobObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    creationTimestamp?: string;
    ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string; controller?: boolean; blockOwnerDeletion?: boolean }>;
  };
  spec?: Record<string, unknown> & { suspend?: boolean; activeDeadlineSeconds?: number };
  status?: { startTime?: string; completionTime?: string; active?: number; succeeded?: number; failed?: number; conditions?: JobCondition[] };
}

export interface JobTemplateOptions {
  namespace: string;
  /** The operon image: the stage-in and stage-out helpers. */
  image: string;
  /** The tool's pinned image. */
  toolImage: string;
  /** The owning PipelineRun; absent for a synchronous tool run. */
  owner?: { name: string; uid: string };
  /** Object storage settings for the helpers (S3_*, OPERON_STORAGE). No credentials here. */
  storageEnv: Record<string, string>;
  /** Secret with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY for the helpers, if any. */
  credentialsSecret?: string;
  /** The pods' service account when the step-pod configuration names none. */
  serviceAccountName?: string;
  /** The tool container's resources when the task carries none (task.pod). */
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  /** Scheduling, pull secrets, reference volumes and maxResources (core/kubernetes/step-pods.ts). */
  stepPods?: StepPodConfig;
  /** Finished Jobs (and their pods and logs) are removed after this long. */
  ttlSecondsAfterFinished?: number;
  /** Who created the Job (operator identity), recorded as an annotation. */
  createdBy?: string;
}

const DEFAULT_RESOURCES: ResourceRequirements = { requests: { ...DEFAULT_TOOL_RESOURCES.requests }, limits: { ...DEFAULT_TOOL_RESOURCES.limits } };
const HELPER_RESOURCES = { requests: { cpu: "100m", memory: "128Mi" }, limits: { memory: "512Mi" } };

/**
 * Evictions, lost nodes and preemption (`DisruptionTarget`) are retried by the Job controller
 * and do not count; the tool's non-zero exit fails the Job at once. Anything else (a helper's
 * non-zero exit) counts against backoffLimit 0. See the module comment.
 */
export const POD_FAILURE_POLICY = {
  rules: [
    { action: "Ignore", onPodConditions: [{ type: "DisruptionTarget", status: "True" }] },
    { action: "FailJob", onExitCodes: { containerName: TOOL_CONTAINER, operator: "NotIn", values: [0] } },
  ],
};

const nonEmpty = (v: unknown): boolean => v !== undefined && v !== "" && !(Array.isArray(v) && v.length === 0) && !(typeof v === "object" && v !== null && Object.keys(v).length === 0);

const containerSecurity = {
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  runAsNonRoot: true,
  capabilities: { drop: ["ALL"] },
  seccompProfile: { type: "RuntimeDefault" },
};

/** The Job for one attempt of one step. */
export function buildJob(task: StepTask, o: JobTemplateOptions): JobObject {
  const name = jobName(task.runId, task.stepId, task.attempt);
  const pods = o.stepPods ?? {};
  const labels = {
    [LABEL.org]: labelValue(task.organization),
    [LABEL.workspace]: labelValue(workspaceOf(task.workspaceRoot)),
    [LABEL.run]: labelValue(task.runId),
    [LABEL.step]: labelValue(task.stepId),
    "app.kubernetes.io/managed-by": "operon",
  };
  const outputs = task.invocation.outputs.map((x) => ({ path: x.path, secondary: x.secondary }));
  const plan = JSON.stringify({
    workspaceRoot: task.workspaceRoot,
    runRoot: task.runRoot,
    inputs: task.invocation.inputs,
    outputs,
    mkdirs: task.invocation.mkdirs,
    ...(task.invocation.stdout ? { stdout: task.invocation.stdout } : {}),
    // Files on reference volumes: stage-in checksums them (read in place by the tool, never staged).
    ...(task.invocation.references?.length ? { references: task.invocation.references.map((r) => ({ uri: r.uri, path: r.path })) } : {}),
  });
  const resources = task.pod?.resources ?? (o.resources ? { requests: { ...o.resources.requests }, limits: { ...o.resources.limits } } : DEFAULT_RESOURCES);
  const memoryLimit = resources.limits?.memory;
  const scratchLimit = resources.limits?.["ephemeral-storage"];
  const maxMemory = pods.maxResources?.memory;
  const helperEnv = [
    ...Object.entries(o.storageEnv).map(([n, value]) => ({ name: n, value })),
    { name: "OPERON_STEP_PLAN", value: plan },
  ];
  const envFrom = o.credentialsSecret ? [{ secretRef: { name: o.credentialsSecret } }] : [];
  const refs = pods.referenceVolumes ?? [];
  const mounts = [{ name: "work", mountPath: WORKDIR }, { name: "tmp", mountPath: "/tmp" }];
  // Reference data: read-only, where stage-in and the tool read it.
  const withRefs = [...mounts, ...refs.map((r) => ({ name: refVolumeName(r.name), mountPath: `${REFERENCE_ROOT}/${r.name}`, readOnly: true }))];
  const helper = (cname: string, args: string[], volumeMounts: typeof withRefs) => ({
    name: cname, image: o.image, args, env: helperEnv, envFrom, volumeMounts,
    resources: HELPER_RESOURCES, securityContext: containerSecurity, terminationMessagePolicy: "File",
  });
  const deadline = Math.max(1, Math.ceil(task.timeoutMs / 1000));
  const serviceAccountName = pods.serviceAccountName || o.serviceAccountName;
  const scheduling = {
    ...(nonEmpty(pods.nodeSelector) ? { nodeSelector: pods.nodeSelector } : {}),
    ...(nonEmpty(pods.tolerations) ? { tolerations: pods.tolerations } : {}),
    ...(nonEmpty(pods.affinity) ? { affinity: pods.affinity } : {}),
    ...(pods.priorityClassName ? { priorityClassName: pods.priorityClassName } : {}),
    ...(pods.runtimeClassName ? { runtimeClassName: pods.runtimeClassName } : {}),
    ...(nonEmpty(pods.imagePullSecrets) ? { imagePullSecrets: pods.imagePullSecrets } : {}),
  };
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: {
      name,
      namespace: o.namespace,
      labels,
      annotations: {
        [ANNOTATION.org]: task.organization,
        [ANNOTATION.workspace]: workspaceOf(task.workspaceRoot),
        [ANNOTATION.stepId]: task.stepId,
        [ANNOTATION.attempt]: String(task.attempt),
        [ANNOTATION.outputs]: JSON.stringify(outputs),
        [ANNOTATION.runRoot]: task.runRoot,
        [ANNOTATION.timeoutMs]: String(task.timeoutMs),
        [ANNOTATION.runId]: task.runId,
        [ANNOTATION.tool]: task.toolName,
        ...(memoryLimit ? { [ANNOTATION.memoryLimit]: memoryLimit } : {}),
        ...(maxMemory ? { [ANNOTATION.maxMemory]: maxMemory } : {}),
        ...(o.createdBy ? { [ANNOTATION.createdBy]: o.createdBy } : {}),
      },
      ...(o.owner ? { ownerReferences: [{ apiVersion: "operon.dev/v1alpha1", kind: "PipelineRun", name: o.owner.name, uid: o.owner.uid, controller: true, blockOwnerDeletion: true }] } : {}),
    },
    spec: {
      backoffLimit: 0,
      podFailurePolicy: POD_FAILURE_POLICY,
      podReplacementPolicy: "Failed",
      activeDeadlineSeconds: deadline,
      ...(o.ttlSecondsAfterFinished !== undefined ? { ttlSecondsAfterFinished: o.ttlSecondsAfterFinished } : {}),
      template: {
        metadata: { labels, annotations: { [ANNOTATION.stepId]: task.stepId } },
        spec: {
          restartPolicy: "Never",
          automountServiceAccountToken: false,
          ...(serviceAccountName ? { serviceAccountName } : {}),
          ...scheduling,
          securityContext: { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000, seccompProfile: { type: "RuntimeDefault" } },
          volumes: [
            // Staged inputs and outputs live here: as large as the step's ephemeral-storage limit, when it has one.
            { name: "work", emptyDir: scratchLimit ? { sizeLimit: scratchLimit } : {} },
            { name: "tmp", emptyDir: {} },
            ...refs.map((r) => ({ name: refVolumeName(r.name), ...readOnlySource(r.volume) })),
          ],
          initContainers: [
            helper(STAGE_CONTAINER_IN, ["stage-in", "--workdir", WORKDIR], withRefs),
            {
              name: TOOL_CONTAINER,
              image: task.pod?.image ?? o.toolImage,
              command: TOOL_ENTRY,
              args: task.invocation.argv,
              workingDir: WORKDIR,
              env: [
                ...(task.invocation.stdout ? [{ name: "OPERON_STDOUT", value: task.invocation.stdout }] : []),
                { name: "HOME", value: WORKDIR },
                { name: "TMPDIR", value: "/tmp" },
              ],
              volumeMounts: withRefs,
              resources,
              securityContext: containerSecurity,
            },
          ],
          containers: [helper(STAGE_CONTAINER_OUT, ["stage-out", "--workdir", WORKDIR], mounts)],
        },
      },
    },
  };
}

/** A reference volume's source, with a claim mounted read-only (so a ReadOnlyMany claim attaches to every node). */
function readOnlySource(volume: Record<string, unknown>): Record<string, unknown> {
  const pvc = volume["persistentVolumeClaim"];
  if (pvc && typeof pvc === "object" && (pvc as { readOnly?: unknown }).readOnly === undefined) return { persistentVolumeClaim: { ...pvc, readOnly: true } };
  return volume;
}

function workspaceOf(root: string): string {
  const m = /^orgs\/[^/]+\/workspaces\/([^/]+)\/$/.exec(root);
  return m ? (m[1] as string) : root;
}

const cond = (job: JobObject, type: string) => job.status?.conditions?.find((c) => c.type === type && c.status === "True");
const ms = (iso: string | undefined) => (iso ? Date.parse(iso) : undefined);

/**
 * The part of a Job the operator keeps in its cache: metadata, status, and of the spec only
 * what it reads. The pod template (init containers, env, volumes) is most of a Job's size,
 * and finished Jobs stay for `ttlSecondsAfterFinished` (a day by default).
 */
export function jobForCache<T extends JobObject>(job: T): T {
  const spec = job.spec === undefined ? {} : {
    spec: {
      ...(job.spec.suspend !== undefined ? { suspend: job.spec.suspend } : {}),
      ...(job.spec.activeDeadlineSeconds !== undefined ? { activeDeadlineSeconds: job.spec.activeDeadlineSeconds } : {}),
    },
  };
  const { spec: _template, ...rest } = job;
  return { ...rest, ...spec } as T;
}

/** The part of a pod the operator keeps: metadata and the container states it explains failures with. */
export function podForCache<T extends PodObject>(pod: T): T {
  const st = pod.status;
  const { spec: _spec, status: _status, ...rest } = pod as T & { spec?: unknown };
  return {
    ...rest,
    ...(st ? {
      status: {
        ...(st.phase !== undefined ? { phase: st.phase } : {}),
        ...(st.reason !== undefined ? { reason: st.reason } : {}),
        ...(st.message !== undefined ? { message: st.message } : {}),
        // Of the conditions, only the one that says Kubernetes disrupted the pod.
        ...(st.conditions?.some(isDisruption) ? { conditions: st.conditions.filter(isDisruption) } : {}),
        ...(st.initContainerStatuses ? { initContainerStatuses: st.initContainerStatuses } : {}),
        ...(st.containerStatuses ? { containerStatuses: st.containerStatuses } : {}),
      },
    } : {}),
  } as T;
}

/**
 * A Job that has not finished and was not stopped: it holds one of its organization's slots.
 * Until `Complete` or `Failed`, also after `SuccessCriteriaMet` or `FailureTarget` (module comment).
 */
export function jobActive(job: JobObject): boolean {
  return !cond(job, "Complete") && !cond(job, "Failed") && !job.metadata.annotations?.[ANNOTATION.stopped];
}

/** The Job says the step's outcome is decided: succeeded or failed (perhaps with pods still terminating), or stopped. */
export function jobEnded(job: JobObject): boolean {
  return !jobActive(job) || cond(job, "SuccessCriteriaMet") !== undefined || cond(job, "FailureTarget") !== undefined;
}

/** The pod ran to success: every container exited 0, the stage-out helper's upload included (module comment). */
export function podSucceeded(pod: PodObject | undefined): boolean {
  return pod?.status?.phase === "Succeeded";
}

/**
 * The step's outcome is decided, as the Job says it (jobEnded) or as the pod that speaks for it
 * says it before the Job controller has written it (podSucceeded). An open step holds its
 * organization's slot in the reconciler's ledger.
 */
export function stepEnded(job: JobObject, pod: PodObject | undefined): boolean {
  return jobEnded(job) || podSucceeded(pod);
}

const isDisruption = (c: PodCondition) => c.type === "DisruptionTarget" && c.status === "True";
const terminal = (p: PodObject) => p.status?.phase === "Succeeded" || p.status?.phase === "Failed";

/**
 * Kubernetes disrupted the pod (an eviction, a lost node, preemption): the Job controller
 * replaces it, and it is not the step's failure. A kubelet eviction without the condition
 * (clusters before 1.26) says `Evicted`.
 */
export function podDisrupted(pod: PodObject): boolean {
  return pod.status?.conditions?.some(isDisruption) === true || pod.status?.reason === "Evicted";
}

/**
 * The pod that speaks for a Job: its newest (a replacement after a disruption). Creation times
 * have seconds only: of pods created in the same second, one still running wins over a
 * terminated one (the replacement over the pod it replaced), then the name decides.
 */
export function newestPod<T extends PodObject>(pods: Iterable<T>): T | undefined {
  let best: T | undefined;
  for (const p of pods) {
    if (!best) { best = p; continue; }
    const a = p.metadata.creationTimestamp ?? "";
    const b = best.metadata.creationTimestamp ?? "";
    if (a !== b) { if (a > b) best = p; continue; }
    const live = (x: T) => !terminal(x) && !x.metadata.deletionTimestamp;
    if (live(p) !== live(best)) { if (live(p)) best = p; continue; }
    if (p.metadata.name > best.metadata.name) best = p;
  }
  return best;
}

/** The step attempt a Job runs. */
export function jobStep(job: JobObject): { runId: string; stepId: string; attempt: number; organization: string } | undefined {
  const a = job.metadata.annotations ?? {};
  const stepId = a[ANNOTATION.stepId];
  const runId = a[ANNOTATION.runId] ?? job.metadata.labels?.[LABEL.run];
  const attempt = Number(a[ANNOTATION.attempt]);
  if (!stepId || !runId || !Number.isInteger(attempt)) return undefined;
  return { runId, stepId, attempt, organization: a[ANNOTATION.org] ?? job.metadata.labels?.[LABEL.org] ?? "" };
}

/** What a Job and its pod (if any) say about the step. `outputs` are filled in by the caller. */
export interface JobObservation {
  state: ObservedStepState;
  /** The Job finished successfully: its outputs are to be read (termination message or HEAD). */
  completed: boolean;
  /** The pod cannot start (bad image, bad config): the caller should stop the Job. */
  stopNeeded: boolean;
}

function allStatuses(pod: PodObject | undefined): ContainerStatus[] {
  return [...(pod?.status?.initContainerStatuses ?? []), ...(pod?.status?.containerStatuses ?? [])];
}

/** What the step's messages say about memory: the tool container's limit, and the most a step may ask for. */
export interface MemoryLimits { limit?: string | undefined; max?: string | undefined }

function outOfMemory(container: string, memory: MemoryLimits): string {
  if (container !== TOOL_CONTAINER) return `the ${container} helper ran out of memory (OOMKilled) at its ${HELPER_RESOURCES.limits.memory} memory limit`;
  const at = memory.limit ? ` at its ${memory.limit} memory limit` : "";
  if (memory.limit && memory.max && memory.limit === memory.max) return `the tool ran out of memory (OOMKilled)${at}, the most a step may ask for here (maxResources.memory)`;
  return `the tool ran out of memory (OOMKilled)${at}: set steps[].resources.memory higher${memory.max ? ` (at most ${memory.max})` : ""}`;
}

/** Why the pod failed, in words a user can act on. */
export function podFailure(pod: PodObject | undefined, toolImage?: string, memory: MemoryLimits = {}): { message: string; exitCode: number | null } | undefined {
  if (!pod) return undefined;
  if (pod.status?.reason === "Evicted") {
    const why = pod.status.message ?? "node pressure";
    // The kubelet evicts a pod that writes more than its ephemeral-storage limit (or its work volume's size).
    const hint = /exceed/i.test(why) ? ": set steps[].resources.ephemeralStorage higher" : "";
    return { message: `the pod was evicted by Kubernetes: ${why}${hint}`, exitCode: null };
  }
  for (const c of allStatuses(pod)) {
    const t = c.state?.terminated;
    if (!t || t.exitCode === 0 || t.exitCode === undefined) continue;
    const who = c.name === TOOL_CONTAINER ? "the tool" : `the ${c.name} helper`;
    if (t.reason === "OOMKilled") return { message: outOfMemory(c.name, memory), exitCode: t.exitCode };
    const detail = t.message ? `: ${terminationError(t.message)}` : "";
    return { message: `${who} exited with code ${t.exitCode}${t.reason && t.reason !== "Error" ? ` (${t.reason})` : ""}${detail}`, exitCode: t.exitCode };
  }
  const waiting = startFailure(pod, toolImage);
  if (waiting) return waiting;
  // Refused by the node before any container ran (e.g. OutOfcpu, NodeAffinity).
  if (pod.status?.phase === "Failed" && pod.status.reason) return { message: `the pod failed (${pod.status.reason})${pod.status.message ? `: ${pod.status.message}` : ""}`, exitCode: null };
  return undefined;
}

/** A container of the pod cannot start without someone fixing something (a bad image, a bad config). */
function startFailure(pod: PodObject | undefined, toolImage?: string): { message: string; exitCode: null } | undefined {
  for (const c of allStatuses(pod)) {
    const w = c.state?.waiting;
    if (w?.reason && START_FAILURES.has(w.reason)) {
      const image = c.image ?? (c.name === TOOL_CONTAINER ? toolImage : undefined);
      return { message: `container ${c.name}${image ? ` (image ${image})` : ""} cannot start: ${w.reason}${w.message ? `: ${w.message}` : ""}`, exitCode: null };
    }
  }
  return undefined;
}

function terminationError(message: string): string {
  try {
    const j = JSON.parse(message) as { error?: unknown };
    if (typeof j.error === "string") return j.error;
  } catch { /* plain text */ }
  return message.slice(0, 500);
}

/** Outputs the stage-out helper reported in its termination message, if complete. */
export function terminationOutputs(pod: PodObject | undefined): StepOutput[] | undefined {
  const c = allStatuses(pod).find((s) => s.name === STAGE_CONTAINER_OUT);
  const msg = c?.state?.terminated?.message;
  if (!msg) return undefined;
  try {
    const j = JSON.parse(msg) as { outputs?: StepOutput[] | null };
    return Array.isArray(j.outputs) ? j.outputs : undefined;
  } catch { return undefined; }
}

/** The tool image's digest as the kubelet resolved it, when known. */
export function imageDigest(pod: PodObject | undefined): string | null {
  const id = allStatuses(pod).find((s) => s.name === TOOL_CONTAINER)?.imageID;
  const m = id ? /sha256:[0-9a-f]{64}/.exec(id) : null;
  return m ? m[0] : null;
}

/**
 * What a Job and the pod that speaks for it (newestPod) say about the step. Success is read from
 * the pod's Succeeded phase or from `SuccessCriteriaMet` / `Complete`, whichever comes first;
 * failure from `FailureTarget` / `Failed` as soon as the Job controller writes them (module
 * comment).
 */
export function observeJob(job: JobObject, pod: PodObject | undefined, toolImage?: string): JobObservation {
  const a = job.metadata.annotations ?? {};
  const attempt = Number(a[ANNOTATION.attempt] ?? 1);
  const startedAt = ms(job.status?.startTime) ?? ms(job.metadata.creationTimestamp);
  const base: ObservedStepState = { phase: "running", attempt, jobName: job.metadata.name, ...(startedAt !== undefined ? { startedAt } : {}) };
  const stopped = a[ANNOTATION.stopped];
  if (stopped) {
    const finishedAt = ms(a[ANNOTATION.stoppedAt]);
    const at = finishedAt !== undefined ? { finishedAt } : {};
    if (stopped === "cancelled") return { state: { ...base, ...at, phase: "cancelled", exitCode: null, message: "cancelled" }, completed: false, stopNeeded: false };
    if (stopped === "timeout") return { state: { ...base, ...at, phase: "failed", exitCode: null, message: `timed out after ${a[ANNOTATION.timeoutMs] ?? "?"} ms` }, completed: false, stopNeeded: false };
    return { state: { ...base, ...at, phase: "failed", exitCode: null, message: a[ANNOTATION.stoppedMessage] ?? `stopped: ${stopped}` }, completed: false, stopNeeded: false };
  }
  const complete = cond(job, "Complete") ?? cond(job, "SuccessCriteriaMet");
  if (complete) {
    const finishedAt = ms(job.status?.completionTime) ?? ms(complete.lastTransitionTime);
    return { state: { ...base, phase: "completed", exitCode: 0, imageDigest: imageDigest(pod), ...(finishedAt !== undefined ? { finishedAt } : {}) }, completed: true, stopNeeded: false };
  }
  // The pod succeeded before the Job controller said so (module comment).
  if (podSucceeded(pod)) {
    const finishedAt = allStatuses(pod).map((s) => ms(s.state?.terminated?.finishedAt)).filter((x): x is number => x !== undefined).reduce((a, b) => Math.max(a, b), -Infinity);
    return { state: { ...base, phase: "completed", exitCode: 0, imageDigest: imageDigest(pod), ...(finishedAt > -Infinity ? { finishedAt } : {}) }, completed: true, stopNeeded: false };
  }
  const failed = cond(job, "Failed") ?? cond(job, "FailureTarget");
  if (failed) {
    const finishedAt = ms(failed.lastTransitionTime);
    const why = podFailure(pod, toolImage, { limit: a[ANNOTATION.memoryLimit], max: a[ANNOTATION.maxMemory] });
    const message = failed.reason === "DeadlineExceeded"
      ? `timed out after ${a[ANNOTATION.timeoutMs] ?? "?"} ms (activeDeadlineSeconds)`
      : why?.message ?? `the Job failed${failed.reason ? ` (${failed.reason})` : ""}${failed.message ? `: ${failed.message}` : ""}`;
    return { state: { ...base, phase: "failed", exitCode: why?.exitCode ?? null, message, imageDigest: imageDigest(pod), ...(finishedAt !== undefined ? { finishedAt } : {}) }, completed: false, stopNeeded: false };
  }
  // Still running as far as the Job says. A pod Kubernetes disrupted is being replaced by the
  // Job controller; one that failed on its own is the controller's to judge (podFailurePolicy).
  // Only a pod that cannot start never ends on its own: the caller stops the Job.
  if (!pod || podDisrupted(pod) || pod.metadata.deletionTimestamp) return { state: base, completed: false, stopNeeded: false };
  const why = startFailure(pod, toolImage);
  if (why) return { state: { ...base, phase: "failed", exitCode: why.exitCode, message: why.message }, completed: false, stopNeeded: true };
  return { state: base, completed: false, stopNeeded: false };
}
