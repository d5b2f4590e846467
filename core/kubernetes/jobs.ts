/**
 * One Kubernetes Job per step (DESIGN §4), as pure data: the Job a step attempt becomes, and
 * what a Job and its pod say about the step (running, completed, failed and why). Kept here
 * so the Kubernetes executor stays a dumb mover of objects and every decision — OOM-killed,
 * evicted, an image that cannot start, a deadline, a stop requested by the operator — is a
 * table-tested function.
 */
import type { ObservedStepState, StepOutput, StepTask } from "../ports.js";
import { ANNOTATION, LABEL, jobName, labelValue } from "./pipelinerun.js";

export const STAGE_CONTAINER_IN = "stage-in";
export const TOOL_CONTAINER = "tool";
export const STAGE_CONTAINER_OUT = "stage-out";
export const WORKDIR = "/work";

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

export interface PodObject {
  metadata: { name: string; labels?: Record<string, string>; creationTimestamp?: string; deletionTimestamp?: string };
  status?: { phase?: string; reason?: string; message?: string; initContainerStatuses?: ContainerStatus[]; containerStatuses?: ContainerStatus[] };
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
  serviceAccountName?: string;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  /** Finished Jobs (and their pods and logs) are removed after this long. */
  ttlSecondsAfterFinished?: number;
  /** Who created the Job (operator identity), recorded as an annotation. */
  createdBy?: string;
}

const DEFAULT_RESOURCES = { requests: { cpu: "500m", memory: "1Gi" }, limits: { memory: "8Gi" } };
const HELPER_RESOURCES = { requests: { cpu: "100m", memory: "128Mi" }, limits: { memory: "512Mi" } };

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
  });
  const helperEnv = [
    ...Object.entries(o.storageEnv).map(([n, value]) => ({ name: n, value })),
    { name: "OPERON_STEP_PLAN", value: plan },
  ];
  const envFrom = o.credentialsSecret ? [{ secretRef: { name: o.credentialsSecret } }] : [];
  const mounts = [{ name: "work", mountPath: WORKDIR }, { name: "tmp", mountPath: "/tmp" }];
  const helper = (cname: string, args: string[]) => ({
    name: cname, image: o.image, args, env: helperEnv, envFrom, volumeMounts: mounts,
    resources: HELPER_RESOURCES, securityContext: containerSecurity, terminationMessagePolicy: "File",
  });
  const deadline = Math.max(1, Math.ceil(task.timeoutMs / 1000));
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
        ...(o.createdBy ? { [ANNOTATION.createdBy]: o.createdBy } : {}),
      },
      ...(o.owner ? { ownerReferences: [{ apiVersion: "operon.dev/v1alpha1", kind: "PipelineRun", name: o.owner.name, uid: o.owner.uid, controller: true, blockOwnerDeletion: true }] } : {}),
    },
    spec: {
      backoffLimit: 0,
      activeDeadlineSeconds: deadline,
      ...(o.ttlSecondsAfterFinished !== undefined ? { ttlSecondsAfterFinished: o.ttlSecondsAfterFinished } : {}),
      template: {
        metadata: { labels, annotations: { [ANNOTATION.stepId]: task.stepId } },
        spec: {
          restartPolicy: "Never",
          automountServiceAccountToken: false,
          ...(o.serviceAccountName ? { serviceAccountName: o.serviceAccountName } : {}),
          securityContext: { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000, seccompProfile: { type: "RuntimeDefault" } },
          volumes: [{ name: "work", emptyDir: {} }, { name: "tmp", emptyDir: {} }],
          initContainers: [
            helper(STAGE_CONTAINER_IN, ["stage-in", "--workdir", WORKDIR]),
            {
              name: TOOL_CONTAINER,
              image: o.toolImage,
              command: TOOL_ENTRY,
              args: task.invocation.argv,
              workingDir: WORKDIR,
              env: [
                ...(task.invocation.stdout ? [{ name: "OPERON_STDOUT", value: task.invocation.stdout }] : []),
                { name: "HOME", value: WORKDIR },
                { name: "TMPDIR", value: "/tmp" },
              ],
              volumeMounts: mounts,
              resources: o.resources ?? DEFAULT_RESOURCES,
              securityContext: containerSecurity,
            },
          ],
          containers: [helper(STAGE_CONTAINER_OUT, ["stage-out", "--workdir", WORKDIR])],
        },
      },
    },
  };
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
        ...(st.initContainerStatuses ? { initContainerStatuses: st.initContainerStatuses } : {}),
        ...(st.containerStatuses ? { containerStatuses: st.containerStatuses } : {}),
      },
    } : {}),
  } as T;
}

/** A Job that has not finished and was not stopped: it holds one of its organization's slots. */
export function jobActive(job: JobObject): boolean {
  return !cond(job, "Complete") && !cond(job, "Failed") && !job.metadata.annotations?.[ANNOTATION.stopped];
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

/** Why the pod failed, in words a user can act on. */
export function podFailure(pod: PodObject | undefined, toolImage?: string): { message: string; exitCode: number | null } | undefined {
  if (!pod) return undefined;
  if (pod.status?.reason === "Evicted") return { message: `the pod was evicted by Kubernetes: ${pod.status.message ?? "node pressure"}`, exitCode: null };
  for (const c of allStatuses(pod)) {
    const t = c.state?.terminated;
    if (!t || t.exitCode === 0 || t.exitCode === undefined) continue;
    const who = c.name === TOOL_CONTAINER ? "the tool" : `the ${c.name} helper`;
    if (t.reason === "OOMKilled") return { message: `${who} ran out of memory (OOMKilled): raise the step's memory limit`, exitCode: t.exitCode };
    const detail = t.message ? `: ${terminationError(t.message)}` : "";
    return { message: `${who} exited with code ${t.exitCode}${t.reason && t.reason !== "Error" ? ` (${t.reason})` : ""}${detail}`, exitCode: t.exitCode };
  }
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
  const complete = cond(job, "Complete");
  if (complete) {
    const finishedAt = ms(job.status?.completionTime) ?? ms(complete.lastTransitionTime);
    return { state: { ...base, phase: "completed", exitCode: 0, imageDigest: imageDigest(pod), ...(finishedAt !== undefined ? { finishedAt } : {}) }, completed: true, stopNeeded: false };
  }
  const failed = cond(job, "Failed");
  if (failed) {
    const finishedAt = ms(failed.lastTransitionTime);
    const why = podFailure(pod, toolImage);
    const message = failed.reason === "DeadlineExceeded"
      ? `timed out after ${a[ANNOTATION.timeoutMs] ?? "?"} ms (activeDeadlineSeconds)`
      : why?.message ?? `the Job failed${failed.reason ? ` (${failed.reason})` : ""}${failed.message ? `: ${failed.message}` : ""}`;
    return { state: { ...base, phase: "failed", exitCode: why?.exitCode ?? null, message, imageDigest: imageDigest(pod), ...(finishedAt !== undefined ? { finishedAt } : {}) }, completed: false, stopNeeded: false };
  }
  // Still running as far as the Job says; a pod that cannot start will never finish on its own.
  const why = podFailure(pod, toolImage);
  if (why && !pod?.metadata.deletionTimestamp) {
    return { state: { ...base, phase: "failed", exitCode: why.exitCode, message: why.message }, completed: false, stopNeeded: true };
  }
  return { state: base, completed: false, stopNeeded: false };
}
