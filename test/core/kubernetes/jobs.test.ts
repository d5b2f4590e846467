import t from "tap";
import { buildJob, imageDigest, jobActive, jobEnded, jobForCache, jobStep, newestPod, observeJob, podDisrupted, podFailure, podForCache, stepEnded, terminationOutputs, TOOL_ENTRY, type JobObject, type PodObject } from "../../../core/kubernetes/jobs.js";
import type { StepPodConfig } from "../../../core/kubernetes/step-pods.js";
import type { StepTask } from "../../../core/ports.js";

const task: StepTask = {
  runId: "run-01jz0000000000000000000000",
  organization: "acme",
  stepId: "align",
  attempt: 2,
  toolName: "bwa",
  invocation: { argv: ["bwa", "mem", "ref.fa", "r1.fq; rm -rf /"], stdout: "out.sam", inputs: [{ param: "inputFile", source: "reads/r1.fq", local: "r1.fq" }], outputs: [{ path: "out.sam", secondary: [] }], mkdirs: [] },
  workspaceRoot: "orgs/acme/workspaces/ws1/",
  runRoot: "orgs/acme/workspaces/ws1/pipelines/2026-11-22T01-00-00Z/",
  timeoutMs: 90_500,
};
const template = { namespace: "ops", image: "operon:test", toolImage: "quay.io/biocontainers/bwa:0.7.18", storageEnv: { OPERON_STORAGE: "s3", S3_BUCKET: "b" }, credentialsSecret: "s3-creds", owner: { name: task.runId, uid: "uid-1" } };

t.test("the Job of a step", async (t) => {
  const job = buildJob(task, template) as JobObject & { spec: { backoffLimit: number; activeDeadlineSeconds: number; template: { spec: { initContainers: Array<Record<string, unknown>>; containers: Array<Record<string, unknown>>; restartPolicy: string; securityContext: Record<string, unknown> } } } };
  t.equal(job.metadata.name, `${task.runId}-align-2`);
  t.same(job.metadata.labels?.["operon.dev/org"], "acme");
  t.same(job.metadata.labels?.["operon.dev/workspace"], "ws1");
  t.same(job.metadata.labels?.["operon.dev/run"], task.runId);
  t.same(job.metadata.labels?.["operon.dev/step"], "align");
  t.same(job.metadata.ownerReferences, [{ apiVersion: "operon.dev/v1alpha1", kind: "PipelineRun", name: task.runId, uid: "uid-1", controller: true, blockOwnerDeletion: true }]);
  t.equal(job.spec.backoffLimit, 0);
  t.equal(job.spec.activeDeadlineSeconds, 91, "step timeout, rounded up to seconds");
  const pod = job.spec.template.spec;
  t.equal(pod.restartPolicy, "Never");
  t.same(pod.initContainers.map((c) => c.name), ["stage-in", "tool"]);
  t.same(pod.containers.map((c) => c.name), ["stage-out"]);
  const tool = pod.initContainers[1] as { image: string; command: string[]; args: string[]; env: Array<{ name: string; value: string }> };
  t.equal(tool.image, template.toolImage);
  t.same(tool.command, TOOL_ENTRY, "a fixed entry script");
  t.same(tool.args, task.invocation.argv, "user values travel only as argv elements");
  t.notOk(TOOL_ENTRY.join(" ").includes("rm -rf"), "nothing of the argv is in the script");
  t.same(tool.env.find((e) => e.name === "OPERON_STDOUT")?.value, "out.sam");
  const stageIn = pod.initContainers[0] as { env: Array<{ name: string; value: string }>; envFrom: unknown; args: string[] };
  const plan = JSON.parse(stageIn.env.find((e) => e.name === "OPERON_STEP_PLAN")?.value ?? "{}") as { inputs: unknown; runRoot: string; stdout: string };
  t.same(plan.inputs, task.invocation.inputs);
  t.equal(plan.runRoot, task.runRoot);
  t.same(stageIn.envFrom, [{ secretRef: { name: "s3-creds" } }], "credentials from a Secret");
  t.notOk(JSON.stringify(job).includes("AWS_SECRET_ACCESS_KEY"), "no credentials in the Job");
  t.same(stageIn.args, ["stage-in", "--workdir", "/work"]);
  for (const c of [...pod.initContainers, ...pod.containers] as Array<{ securityContext: Record<string, unknown> }>) {
    t.match(c.securityContext, { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: { drop: ["ALL"] } });
  }
  t.same(jobStep(job), { runId: task.runId, stepId: "align", attempt: 2, organization: "acme" });
  t.ok(jobActive(job));
  t.same(buildJob(task, template), job, "deterministic");
});

const job = (status: JobObject["status"], annotations: Record<string, string> = {}): JobObject => {
  const j = buildJob(task, template);
  return { ...j, metadata: { ...j.metadata, creationTimestamp: "2026-11-22T01:00:00Z", annotations: { ...j.metadata.annotations, ...annotations } }, ...(status ? { status } : {}) };
};
const pod = (init: NonNullable<PodObject["status"]>["initContainerStatuses"], containers: NonNullable<PodObject["status"]>["containerStatuses"] = [], extra: Partial<NonNullable<PodObject["status"]>> = {}): PodObject => ({ metadata: { name: "p" }, status: { initContainerStatuses: init, containerStatuses: containers, ...extra } });
const digest = "sha256:" + "a".repeat(64);

t.test("what a Job and its pod say about the step", async (t) => {
  const cases: Array<{ name: string; job: JobObject; pod?: PodObject; phase: string; message?: RegExp; completed?: boolean; stop?: boolean; exitCode?: number | null }> = [
    { name: "created, no pod yet", job: job(undefined), phase: "running" },
    { name: "running", job: job({ startTime: "2026-11-22T01:00:01Z", active: 1 }), pod: pod([{ name: "stage-in", state: { terminated: { exitCode: 0 } } }, { name: "tool", state: { running: {} } }]), phase: "running" },
    { name: "complete", job: job({ startTime: "2026-11-22T01:00:01Z", completionTime: "2026-11-22T01:00:09Z", succeeded: 1, conditions: [{ type: "SuccessCriteriaMet", status: "True" }, { type: "Complete", status: "True" }] }), phase: "completed", completed: true, exitCode: 0 },
    { name: "tool exit code", job: job({ conditions: [{ type: "Failed", status: "True", reason: "BackoffLimitExceeded", message: "Job has reached the specified backoff limit" }] }), pod: pod([{ name: "stage-in", state: { terminated: { exitCode: 0 } } }, { name: "tool", state: { terminated: { exitCode: 3, reason: "Error" } } }]), phase: "failed", message: /^the tool exited with code 3$/, exitCode: 3 },
    { name: "OOM killed", job: job({ conditions: [{ type: "Failed", status: "True", reason: "BackoffLimitExceeded" }] }), pod: pod([{ name: "stage-in", state: { terminated: { exitCode: 0 } } }, { name: "tool", state: { terminated: { exitCode: 137, reason: "OOMKilled" } } }]), phase: "failed", message: /out of memory \(OOMKilled\)/, exitCode: 137 },
    { name: "evicted", job: job({ conditions: [{ type: "Failed", status: "True", reason: "BackoffLimitExceeded" }] }), pod: pod([], [], { phase: "Failed", reason: "Evicted", message: "The node was low on resource: ephemeral-storage." }), phase: "failed", message: /evicted.*ephemeral-storage/ },
    { name: "missing input (stage-in)", job: job({ conditions: [{ type: "Failed", status: "True" }] }), pod: pod([{ name: "stage-in", state: { terminated: { exitCode: 1, message: "input inputFile: reads/r1.fq not found in the workspace" } } }]), phase: "failed", message: /stage-in helper exited with code 1: input inputFile: reads\/r1.fq not found/ },
    { name: "output not produced (stage-out)", job: job({ conditions: [{ type: "Failed", status: "True" }] }), pod: pod([{ name: "stage-in", state: { terminated: { exitCode: 0 } } }, { name: "tool", state: { terminated: { exitCode: 0 } } }], [{ name: "stage-out", state: { terminated: { exitCode: 1, message: JSON.stringify({ error: "declared output out.sam was not produced" }) } } }]), phase: "failed", message: /declared output out.sam was not produced/ },
    { name: "deadline", job: job({ conditions: [{ type: "Failed", status: "True", reason: "DeadlineExceeded" }] }), phase: "failed", message: /timed out after 90500 ms/ },
    { name: "no pod to explain", job: job({ conditions: [{ type: "Failed", status: "True", reason: "BackoffLimitExceeded", message: "Job has reached the specified backoff limit" }] }), phase: "failed", message: /the Job failed \(BackoffLimitExceeded\): Job has reached/ },
    { name: "image cannot be pulled", job: job({ active: 1 }), pod: pod([{ name: "stage-in", state: { terminated: { exitCode: 0 } } }, { name: "tool", image: "quay.io/nope:1", state: { waiting: { reason: "ImagePullBackOff", message: "Back-off pulling image" } } }]), phase: "failed", message: /container tool \(image quay.io\/nope:1\) cannot start: ImagePullBackOff/, stop: true },
    { name: "first pull error is retried", job: job({ active: 1 }), pod: pod([{ name: "stage-in", state: { waiting: { reason: "ErrImagePull" } } }]), phase: "running" },
    { name: "stopped: cancelled", job: job({ active: 1 }, { "operon.dev/stopped": "cancelled", "operon.dev/stopped-at": "2026-11-22T01:00:05Z" }), phase: "cancelled", message: /cancelled/ },
    { name: "stopped: timeout", job: job({ active: 1 }, { "operon.dev/stopped": "timeout" }), phase: "failed", message: /timed out after 90500 ms/ },
    { name: "stopped: failed to start", job: job({ active: 1 }, { "operon.dev/stopped": "failed", "operon.dev/stopped-message": "container tool cannot start: InvalidImageName" }), phase: "failed", message: /InvalidImageName/ },
  ];
  for (const c of cases) {
    const o = observeJob(c.job, c.pod, template.toolImage);
    // What the operator caches of a Job and a pod is enough to read the same state.
    const slim = observeJob(jobForCache(c.job), c.pod ? podForCache(c.pod) : undefined, template.toolImage);
    t.same(slim, o, `${c.name}: the cached (slimmed) Job and pod read the same`);
    t.equal(jobActive(jobForCache(c.job)), jobActive(c.job));
    t.same(jobStep(jobForCache(c.job)), jobStep(c.job));
    t.equal(o.state.phase, c.phase, `${c.name}: phase`);
    t.equal(o.state.attempt, 2, `${c.name}: attempt`);
    t.equal(o.state.jobName, `${task.runId}-align-2`);
    if (c.message) t.match(o.state.message, c.message, `${c.name}: message`);
    t.equal(o.completed, c.completed ?? false, `${c.name}: completed`);
    t.equal(o.stopNeeded, c.stop ?? false, `${c.name}: stop needed`);
    if (c.exitCode !== undefined) t.equal(o.state.exitCode, c.exitCode, `${c.name}: exit code`);
    // A slot is held until the Job finishes or is stopped (a pod that cannot start holds it until stopped).
    t.equal(jobActive(c.job), c.phase === "running" || (c.stop ?? false), `${c.name}: holds a slot`);
  }
  const complete = observeJob(cases[2]!.job, undefined);
  t.equal(complete.state.startedAt, Date.parse("2026-11-22T01:00:01Z"));
  t.equal(complete.state.finishedAt, Date.parse("2026-11-22T01:00:09Z"));
});

t.test("the cache keeps a fraction of a Job and of a pod", async (t) => {
  const full = { ...job({ startTime: "2026-11-22T01:00:01Z", active: 1 }), spec: { ...buildJob(task, template).spec, suspend: false } } as JobObject;
  const slim = jobForCache(full);
  t.same(slim.metadata, full.metadata, "metadata whole (labels, annotations, owner)");
  t.same(slim.status, full.status, "status whole");
  t.same(slim.spec, { suspend: false, activeDeadlineSeconds: 91 }, "of the spec, only what is read");
  const ratio = JSON.stringify(slim).length / JSON.stringify(full).length;
  t.ok(ratio < 0.5, `a cached Job is ${(100 * ratio).toFixed(0)} % of the Job`);
  const p = { ...pod([{ name: "tool", imageID: `quay.io/x@${digest}`, state: { running: {} } }]), spec: { containers: [{ name: "x", image: "y" }] } } as PodObject & { spec: unknown };
  const slimPod = podForCache(p) as PodObject & { spec?: unknown };
  t.equal(slimPod.spec, undefined, "a pod's spec is dropped");
  t.same(slimPod.status, p.status);
  t.same(jobForCache({ metadata: { name: "bare" } }), { metadata: { name: "bare" } }, "a Job without spec stays without one");
});

t.test("outputs and digest from the pod", async (t) => {
  const outputs = [{ filename: "out.sam", position: 0, key: "k/out.sam", size: 4, sha256: "ab" }];
  const p = pod([{ name: "tool", imageID: `quay.io/biocontainers/bwa@${digest}`, state: { terminated: { exitCode: 0 } } }], [{ name: "stage-out", state: { terminated: { exitCode: 0, message: JSON.stringify({ outputs }) } } }]);
  t.same(terminationOutputs(p), outputs);
  t.equal(imageDigest(p), digest);
  t.equal(terminationOutputs(pod([], [{ name: "stage-out", state: { terminated: { exitCode: 0, message: JSON.stringify({ outputs: null, truncated: true }) } } }])), undefined, "truncated report: read storage instead");
  t.equal(terminationOutputs(undefined), undefined);
  t.equal(podFailure(pod([{ name: "tool", state: { running: {} } }])), undefined);
});

/* ------------------------------------------------------------------ issue 18: configured step pods */

type PodSpec = {
  serviceAccountName?: string; nodeSelector?: unknown; tolerations?: unknown; affinity?: unknown; priorityClassName?: string; runtimeClassName?: string; imagePullSecrets?: unknown;
  volumes: Array<{ name: string; emptyDir?: { sizeLimit?: string }; persistentVolumeClaim?: { claimName: string; readOnly?: boolean }; nfs?: unknown }>;
  initContainers: Array<{ name: string; image: string; args: string[]; resources: unknown; volumeMounts: Array<{ name: string; mountPath: string; readOnly?: boolean }> }>;
  containers: Array<{ name: string; volumeMounts: Array<{ name: string; mountPath: string; readOnly?: boolean }> }>;
};
type FullJob = JobObject & { spec: { backoffLimit: number; podFailurePolicy: unknown; podReplacementPolicy: string; template: { spec: PodSpec & { restartPolicy: string } } } };
const podSpec = (j: JobObject) => (j as FullJob).spec.template.spec;
const stepPods: StepPodConfig = {
  nodeSelector: { "node.lab/pool": "genomics" },
  tolerations: [{ key: "dedicated", operator: "Equal", value: "genomics", effect: "NoSchedule" }],
  affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: "kubernetes.io/arch", operator: "In", values: ["amd64"] }] }] } } },
  priorityClassName: "batch-low",
  serviceAccountName: "operon-steps",
  imagePullSecrets: [{ name: "regcred" }],
  runtimeClassName: "gvisor",
  maxResources: { memory: "128Gi" },
  referenceVolumes: [
    { name: "grch38", volume: { persistentVolumeClaim: { claimName: "ref-grch38" } } },
    { name: "annovar", volume: { nfs: { server: "nfs.lab", path: "/annovar" } } },
  ],
};
const sized: StepTask = { ...task, pod: { image: "harbor.lab/quay/biocontainers/bwa:0.7.18", resources: { requests: { cpu: "8", memory: "32Gi", "ephemeral-storage": "200Gi" }, limits: { memory: "32Gi", "ephemeral-storage": "200Gi" } } } };

t.test("the step pod as the configuration says: scheduling, reference volumes, resources, failure policy", async (t) => {
  const j = buildJob(sized, { ...template, stepPods, serviceAccountName: "fallback-sa" }) as FullJob;
  const pod = podSpec(j);
  t.same(pod.nodeSelector, stepPods.nodeSelector, "nodeSelector");
  t.same(pod.tolerations, stepPods.tolerations, "tolerations");
  t.same(pod.affinity, stepPods.affinity, "affinity");
  t.equal(pod.priorityClassName, "batch-low", "priorityClassName");
  t.equal(pod.serviceAccountName, "operon-steps", "the configuration's service account wins over the template's");
  t.same(pod.imagePullSecrets, [{ name: "regcred" }], "imagePullSecrets");
  t.equal(pod.runtimeClassName, "gvisor", "runtimeClassName");
  t.equal(pod.restartPolicy, "Never");

  // Reference volumes: pod volume ref-<name>, read-only at /ref/<name> in stage-in and the tool, not in stage-out.
  t.same(pod.volumes.map((v) => v.name), ["work", "tmp", "ref-grch38", "ref-annovar"]);
  t.same(pod.volumes[2]?.persistentVolumeClaim, { claimName: "ref-grch38", readOnly: true }, "a claim is attached read-only");
  t.same(pod.volumes[3]?.nfs, { server: "nfs.lab", path: "/annovar" }, "any other volume source as given");
  for (const c of pod.initContainers) {
    t.same(c.volumeMounts.filter((m) => m.name.startsWith("ref-")), [
      { name: "ref-grch38", mountPath: "/ref/grch38", readOnly: true },
      { name: "ref-annovar", mountPath: "/ref/annovar", readOnly: true },
    ], `${c.name}: every reference volume, read-only`);
  }
  t.notOk(pod.containers[0]?.volumeMounts.some((m) => m.name.startsWith("ref-")), "stage-out does not see reference data");

  // The tool container: the task's resolved image and resources; the work volume as large as the ephemeral-storage limit.
  const tool = pod.initContainers.find((c) => c.name === "tool");
  t.equal(tool?.image, "harbor.lab/quay/biocontainers/bwa:0.7.18", "the image the reconciler resolved");
  t.same(tool?.resources, sized.pod?.resources, "the resources the reconciler resolved");
  t.same(pod.volumes[0]?.emptyDir, { sizeLimit: "200Gi" }, "work's sizeLimit is the ephemeral-storage limit");
  t.same(pod.volumes[1]?.emptyDir, {});
  t.equal(j.metadata.annotations?.["operon.dev/memory-limit"], "32Gi", "the memory limit recorded for the OOM message");
  t.equal(j.metadata.annotations?.["operon.dev/max-memory"], "128Gi", "and the most a step may ask for");
  t.equal(jobForCache(j).metadata.annotations?.["operon.dev/memory-limit"], "32Gi", "kept in the cache");

  // Retries belong to the Job controller: disruptions are ignored, the tool's exit fails the Job.
  t.equal(j.spec.backoffLimit, 0);
  t.same(j.spec.podFailurePolicy, { rules: [
    { action: "Ignore", onPodConditions: [{ type: "DisruptionTarget", status: "True" }] },
    { action: "FailJob", onExitCodes: { containerName: "tool", operator: "NotIn", values: [0] } },
  ] });
  t.equal(j.spec.podReplacementPolicy, "Failed", "a replacement starts only once the old pod has terminated");

  // Nothing set: no empty fields, the defaults, no sizeLimit (no ephemeral-storage limit), the template's image.
  const plain = buildJob(task, { ...template, stepPods: { nodeSelector: {}, tolerations: [], affinity: {}, priorityClassName: "", serviceAccountName: "", imagePullSecrets: [], runtimeClassName: "" } });
  const p2 = podSpec(plain);
  for (const k of ["nodeSelector", "tolerations", "affinity", "priorityClassName", "serviceAccountName", "imagePullSecrets", "runtimeClassName"] as const) t.equal(p2[k], undefined, `empty ${k} is left out`);
  t.same(p2.volumes.map((v) => v.name), ["work", "tmp"]);
  t.same(p2.volumes[0]?.emptyDir, {});
  const plainTool = p2.initContainers.find((c) => c.name === "tool");
  t.equal(plainTool?.image, template.toolImage);
  t.same(plainTool?.resources, { requests: { cpu: "1", memory: "1Gi", "ephemeral-storage": "10Gi" }, limits: { memory: "4Gi" } }, "the built-in default, with an ephemeral-storage request");
  t.equal(plain.metadata.annotations?.["operon.dev/max-memory"], undefined);
  t.equal(podSpec(buildJob(task, { ...template, serviceAccountName: "fallback-sa" })).serviceAccountName, "fallback-sa", "the template's service account when the configuration names none");
});

const T0 = "2026-11-22T01:00:00Z";
const T1 = "2026-11-22T01:00:07Z";
const T2 = "2026-11-22T01:00:09Z";
const podAt = (name: string, created: string, status: NonNullable<PodObject["status"]>): PodObject => ({ metadata: { name, creationTimestamp: created }, status });
const ok = { name: "stage-in", state: { terminated: { exitCode: 0 } } };
const disrupted = (reason: string): NonNullable<PodObject["status"]> => ({
  phase: "Failed", conditions: [{ type: "Ready", status: "False" }, { type: "DisruptionTarget", status: "True", reason, message: "Kubernetes disrupted the pod" }],
  initContainerStatuses: [ok, { name: "tool", state: { terminated: { exitCode: 137, reason: "Error" } } }],
});

t.test("the real Job controller's condition sequences", async (t) => {
  const sizedJob = (status: JobObject["status"]) => {
    const j = buildJob(sized, { ...template, stepPods });
    return { ...j, metadata: { ...j.metadata, creationTimestamp: T0 }, ...(status ? { status } : {}) };
  };
  const running = podAt("p1", T0, { phase: "Running", initContainerStatuses: [ok, { name: "tool", state: { running: {} } }] });
  /** `ended`: the step's outcome is decided (stepEnded); `jobSays`: the Job alone says so (jobEnded), when that differs. */
  const cases: Array<{ name: string; job: JobObject; pods: PodObject[]; phase: string; message?: RegExp; active: boolean; ended: boolean; jobSays?: boolean; exitCode?: number | null; finishedAt?: string }> = [
    { name: "SuccessCriteriaMet alone: completed, the slot still held", job: sizedJob({ active: 0, succeeded: 1, conditions: [{ type: "SuccessCriteriaMet", status: "True", lastTransitionTime: T1 }] }),
      pods: [podAt("p1", T0, { phase: "Succeeded" })], phase: "completed", active: true, ended: true, exitCode: 0, finishedAt: T1 },
    { name: "SuccessCriteriaMet then Complete", job: sizedJob({ succeeded: 1, completionTime: T1, conditions: [{ type: "SuccessCriteriaMet", status: "True" }, { type: "Complete", status: "True" }] }),
      pods: [podAt("p1", T0, { phase: "Succeeded" })], phase: "completed", active: false, ended: true, finishedAt: T1 },
    { name: "the pod Succeeded before the Job controller noticed: completed at the stage-out's end, the Job still active", job: sizedJob({ active: 1, conditions: [] }),
      pods: [podAt("p1", T0, { phase: "Succeeded", initContainerStatuses: [ok, { name: "tool", state: { terminated: { exitCode: 0, finishedAt: T1 } } }], containerStatuses: [{ name: "stage-out", state: { terminated: { exitCode: 0, finishedAt: T2 } } }] })],
      phase: "completed", active: true, ended: true, jobSays: false, exitCode: 0, finishedAt: T2 },
    { name: "a deadline the Job controller wrote after the pod had Succeeded does not undo the success", job: sizedJob({ succeeded: 1, conditions: [{ type: "FailureTarget", status: "True", reason: "DeadlineExceeded" }] }),
      pods: [podAt("p1", T0, { phase: "Succeeded" })], phase: "completed", active: true, ended: true, exitCode: 0 },
    { name: "a replacement pod that Succeeded after a disruption speaks for the Job", job: sizedJob({ active: 0, conditions: [] }),
      pods: [podAt("p1", T0, disrupted("DeletionByPodGC")), podAt("p2", T1, { phase: "Succeeded" })], phase: "completed", active: true, ended: true, jobSays: false },
    { name: "FailureTarget alone (the tool's exit, FailJob rule): failed, the slot still held",
      job: sizedJob({ failed: 1, conditions: [{ type: "FailureTarget", status: "True", reason: "PodFailurePolicy", message: "Container tool for pod job-executor/p1 failed with exit code 3 matching FailJob rule at index 1", lastTransitionTime: T1 }] }),
      pods: [podAt("p1", T0, { phase: "Failed", initContainerStatuses: [ok, { name: "tool", state: { terminated: { exitCode: 3, reason: "Error" } } }] })],
      phase: "failed", message: /^the tool exited with code 3$/, active: true, ended: true, exitCode: 3, finishedAt: T1 },
    { name: "FailureTarget then Failed", job: sizedJob({ failed: 1, conditions: [{ type: "FailureTarget", status: "True", reason: "PodFailurePolicy" }, { type: "Failed", status: "True", reason: "PodFailurePolicy" }] }),
      pods: [podAt("p1", T0, { phase: "Failed", initContainerStatuses: [ok, { name: "tool", state: { terminated: { exitCode: 3, reason: "Error" } } }] })],
      phase: "failed", message: /^the tool exited with code 3$/, active: false, ended: true },
    { name: "FailureTarget without the pod at hand", job: sizedJob({ conditions: [{ type: "FailureTarget", status: "True", reason: "PodFailurePolicy", message: "Container tool failed with exit code 3" }] }),
      pods: [], phase: "failed", message: /^the Job failed \(PodFailurePolicy\): Container tool failed with exit code 3$/, active: true, ended: true },
    { name: "deadline: FailureTarget while the tool is still being terminated", job: sizedJob({ active: 1, conditions: [{ type: "FailureTarget", status: "True", reason: "DeadlineExceeded" }] }),
      pods: [running], phase: "failed", message: /^timed out after 90500 ms \(activeDeadlineSeconds\)$/, active: true, ended: true },
    { name: "an evicted pod while the Job is active: still running (a replacement comes)", job: sizedJob({ active: 0, failed: 1, conditions: [] }),
      pods: [podAt("p1", T0, { ...disrupted("EvictionByEvictionAPI"), reason: "Evicted", message: "Evicted by the eviction API" })], phase: "running", active: true, ended: false },
    { name: "its node lost (DisruptionTarget, the tool killed): still running", job: sizedJob({ active: 0, conditions: [] }),
      pods: [podAt("p1", T0, disrupted("DeletionByPodGC"))], phase: "running", active: true, ended: false },
    { name: "preempted: still running", job: sizedJob({ active: 0, conditions: [] }),
      pods: [podAt("p1", T0, disrupted("PreemptionByScheduler"))], phase: "running", active: true, ended: false },
    { name: "the replacement pod speaks for the Job", job: sizedJob({ active: 1, failed: 0, conditions: [] }),
      pods: [podAt("p1", T0, disrupted("DeletionByPodGC")), podAt("p2", T1, { phase: "Running", initContainerStatuses: [ok, { name: "tool", state: { running: {} } }] })], phase: "running", active: true, ended: false },
    { name: "a replacement that cannot pull its image is stopped",
      job: sizedJob({ active: 1, conditions: [] }),
      pods: [podAt("p1", T0, disrupted("DeletionByPodGC")), podAt("p2", T1, { phase: "Pending", initContainerStatuses: [ok, { name: "tool", image: "harbor.lab/x:1", state: { waiting: { reason: "ImagePullBackOff" } } }] })],
      phase: "failed", message: /container tool \(image harbor.lab\/x:1\) cannot start: ImagePullBackOff/, active: true, ended: false },
    { name: "a pod failed by itself while the Job is active: the Job controller's to judge", job: sizedJob({ active: 0, failed: 1, conditions: [] }),
      pods: [podAt("p1", T0, { phase: "Failed", initContainerStatuses: [ok, { name: "tool", state: { terminated: { exitCode: 2, reason: "Error" } } }] })], phase: "running", active: true, ended: false },
    { name: "OOMKilled: the limit and the maximum in the message", job: sizedJob({ failed: 1, conditions: [{ type: "FailureTarget", status: "True", reason: "PodFailurePolicy" }] }),
      pods: [podAt("p1", T0, { phase: "Failed", initContainerStatuses: [ok, { name: "tool", state: { terminated: { exitCode: 137, reason: "OOMKilled" } } }] })],
      phase: "failed", message: /^the tool ran out of memory \(OOMKilled\) at its 32Gi memory limit: set steps\[\]\.resources\.memory higher \(at most 128Gi\)$/, active: true, ended: true, exitCode: 137 },
    { name: "a pod over its own ephemeral-storage limit (evicted without DisruptionTarget) fails the Job", job: sizedJob({ failed: 1, conditions: [{ type: "FailureTarget", status: "True", reason: "BackoffLimitExceeded" }, { type: "Failed", status: "True", reason: "BackoffLimitExceeded" }] }),
      pods: [podAt("p1", T0, { phase: "Failed", reason: "Evicted", message: "Usage of EmptyDir volume \"work\" exceeds the limit \"200Gi\"." })],
      phase: "failed", message: /evicted by Kubernetes: Usage of EmptyDir volume "work" exceeds the limit "200Gi"\.: set steps\[\]\.resources\.ephemeralStorage higher$/, active: false, ended: true },
    { name: "refused by the node before any container ran", job: sizedJob({ failed: 1, conditions: [{ type: "Failed", status: "True", reason: "BackoffLimitExceeded" }] }),
      pods: [podAt("p1", T0, { phase: "Failed", reason: "OutOfcpu", message: "Node didn't have enough resource: cpu" })], phase: "failed", message: /^the pod failed \(OutOfcpu\): Node didn't have enough resource: cpu$/, active: false, ended: true },
  ];
  for (const c of cases) {
    const pod = newestPod(c.pods);
    const o = observeJob(c.job, pod, "quay.io/biocontainers/bwa:0.7.18");
    t.same(observeJob(jobForCache(c.job), newestPod(c.pods.map(podForCache)), "quay.io/biocontainers/bwa:0.7.18"), o, `${c.name}: the cached Job and pods read the same`);
    t.equal(o.state.phase, c.phase, `${c.name}: phase`);
    if (c.message) t.match(o.state.message, c.message, `${c.name}: message`);
    t.equal(o.completed, c.phase === "completed", `${c.name}: completed`);
    t.equal(o.stopNeeded, c.phase === "failed" && !c.ended, `${c.name}: stop needed only for a pod that cannot start`);
    t.equal(jobActive(c.job), c.active, `${c.name}: holds its organization slot`);
    t.equal(stepEnded(c.job, pod), c.ended, `${c.name}: the step's end is seen`);
    t.equal(jobEnded(c.job), c.jobSays ?? c.ended, `${c.name}: the Job says the outcome is decided`);
    if (c.exitCode !== undefined) t.equal(o.state.exitCode, c.exitCode, `${c.name}: exit code`);
    if (c.finishedAt) t.equal(o.state.finishedAt, Date.parse(c.finishedAt), `${c.name}: finishedAt`);
  }
});

t.test("the pod that speaks for a Job", async (t) => {
  const failed = podAt("job-a", T0, disrupted("DeletionByPodGC"));
  const replacement = podAt("job-b", T0, { phase: "Pending" });
  const later = podAt("job-0", T1, { phase: "Pending" });
  t.equal(newestPod([failed, later])?.metadata.name, "job-0", "the newest by creation time");
  t.equal(newestPod([later, failed])?.metadata.name, "job-0", "whatever the order");
  t.equal(newestPod([replacement, failed])?.metadata.name, "job-b", "same second: the one still live wins over the one it replaced");
  t.equal(newestPod([failed, replacement])?.metadata.name, "job-b", "whatever the order");
  t.equal(newestPod([podAt("x-1", T0, { phase: "Pending" }), podAt("x-2", T0, { phase: "Pending" })])?.metadata.name, "x-2", "then by name, deterministically");
  t.equal(newestPod([]), undefined);
  const slim = podForCache(failed);
  t.same(slim.status?.conditions, [{ type: "DisruptionTarget", status: "True", reason: "DeletionByPodGC", message: "Kubernetes disrupted the pod" }], "the cache keeps the disruption condition only");
  t.equal(podForCache(replacement).status?.conditions, undefined);
  t.ok(podDisrupted(failed) && podDisrupted(podAt("e", T0, { phase: "Failed", reason: "Evicted" })) && !podDisrupted(replacement));
});

t.test("out of memory, in words", async (t) => {
  const oom = (container: string) => podAt("p", T0, { phase: "Failed", initContainerStatuses: [{ name: container, state: { terminated: { exitCode: 137, reason: "OOMKilled" } } }] });
  t.equal(podFailure(oom("tool"), undefined, { limit: "8Gi", max: "128Gi" })?.message, "the tool ran out of memory (OOMKilled) at its 8Gi memory limit: set steps[].resources.memory higher (at most 128Gi)");
  t.equal(podFailure(oom("tool"), undefined, { limit: "8Gi" })?.message, "the tool ran out of memory (OOMKilled) at its 8Gi memory limit: set steps[].resources.memory higher");
  t.equal(podFailure(oom("tool"), undefined, { limit: "128Gi", max: "128Gi" })?.message, "the tool ran out of memory (OOMKilled) at its 128Gi memory limit, the most a step may ask for here (maxResources.memory)");
  t.equal(podFailure(oom("tool"))?.message, "the tool ran out of memory (OOMKilled): set steps[].resources.memory higher");
  t.equal(podFailure(oom("stage-in"), undefined, { limit: "8Gi" })?.message, "the stage-in helper ran out of memory (OOMKilled) at its 512Mi memory limit");
  // Through the Job: the limit recorded on the Job when it was built.
  const j = buildJob(task, template);
  t.match(observeJob({ ...j, status: { conditions: [{ type: "FailureTarget", status: "True", reason: "PodFailurePolicy" }] } }, oom("tool")).state.message, /at its 4Gi memory limit: set steps\[\]\.resources\.memory higher$/, "the default limit");
});
