import t from "tap";
import { buildJob, imageDigest, jobActive, jobForCache, jobStep, observeJob, podFailure, podForCache, terminationOutputs, TOOL_ENTRY, type JobObject, type PodObject } from "../../../core/kubernetes/jobs.js";
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
