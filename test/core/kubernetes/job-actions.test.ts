/**
 * The Job executor's decisions (core/kubernetes/job-actions.ts), as tables: when a stop the
 * engine asks for is sent, when a tool's log is final, when a failed Job's pod is read first,
 * where a completed Job's outputs are found and what a missing one makes of the step, what
 * observe reports, which Job speaks for a step, and the pod a task runs with.
 */
import t from "tap";
import { activeStepsOf, attemptSubmitted, completedOutputs, DEADLINE_GRACE_MS, jobSucceeded, newestAttempts, observedAttempt, podNeededToExplain, stopDue, taskPod, toolLogFinal, withOutputs, type JobOutputs } from "../../../core/kubernetes/job-actions.js";
import { buildJob, observeJob, type JobObject, type PodObject } from "../../../core/kubernetes/jobs.js";
import { stepCompute } from "../../../core/kubernetes/step-pods.js";
import type { ObjectInfo, ObservedStepState, StepTask } from "../../../core/ports.js";
import { defaultCatalogue } from "../../../core/tools/index.js";

const task: StepTask = {
  runId: "run-01jz0000000000000000000000", organization: "acme", stepId: "align", attempt: 1, toolName: "bwa",
  invocation: { argv: ["bwa", "mem"], inputs: [], outputs: [{ path: "out.sam", secondary: [] }, { path: "out.bam", secondary: ["out.bam.bai"] }], mkdirs: [] },
  workspaceRoot: "orgs/acme/workspaces/ws1/", runRoot: "orgs/acme/workspaces/ws1/pipelines/p1/", timeoutMs: 60_000,
};
const template = { namespace: "ops", image: "operon:test", toolImage: "quay.io/biocontainers/bwa:0.7.18", storageEnv: {} };
const START = "2026-11-22T01:00:00Z";
const startMs = Date.parse(START);
/** The step's Job (activeDeadlineSeconds 60), with a status and extra annotations. */
const job = (status?: JobObject["status"], annotations: Record<string, string> = {}, t0: Partial<StepTask> = {}): JobObject => {
  const j = buildJob({ ...task, ...t0 }, template);
  return { ...j, metadata: { ...j.metadata, annotations: { ...j.metadata.annotations, ...annotations } }, ...(status ? { status } : {}) };
};
const cond = (type: string, reason?: string) => ({ type, status: "True", ...(reason ? { reason } : {}) });
const pod = (phase?: string, extra: NonNullable<PodObject["status"]> = {}): PodObject => ({ metadata: { name: "p" }, status: { ...(phase ? { phase } : {}), ...extra } });

t.test("stopDue: a stop the engine asks for, never over a decided outcome; a timeout only as a backstop", async (t) => {
  const deadline = startMs + 60_000;
  const running = job({ startTime: START, active: 1 });
  const cases: Array<{ name: string; job: JobObject; pod?: PodObject; reason: "timeout" | "cancelled"; now: number; due: boolean }> = [
    { name: "cancel a running step", job: running, reason: "cancelled", now: startMs + 1000, due: true },
    { name: "cancel a step not started yet", job: job(), reason: "cancelled", now: startMs, due: true },
    { name: "cancel a step whose pod Succeeded", job: running, pod: pod("Succeeded"), reason: "cancelled", now: startMs + 1000, due: false },
    { name: "cancel after SuccessCriteriaMet", job: job({ startTime: START, conditions: [cond("SuccessCriteriaMet")] }), reason: "cancelled", now: startMs + 1000, due: false },
    { name: "cancel after FailureTarget", job: job({ startTime: START, conditions: [cond("FailureTarget")] }), reason: "cancelled", now: startMs + 1000, due: false },
    { name: "cancel a stopped Job", job: job({ startTime: START, active: 1 }, { "operon.dev/stopped": "cancelled" }), reason: "cancelled", now: startMs + 1000, due: false },
    { name: "timeout before the deadline: the Job controller's", job: running, reason: "timeout", now: deadline - 1, due: false },
    { name: "timeout within the grace", job: running, reason: "timeout", now: deadline + DEADLINE_GRACE_MS - 1, due: false },
    { name: "timeout once the grace is past: the backstop", job: running, reason: "timeout", now: deadline + DEADLINE_GRACE_MS, due: true },
    { name: "timeout of a Job without a start time", job: job({ active: 1 }), reason: "timeout", now: startMs, due: true },
    { name: "timeout of a Job without a deadline", job: { ...running, spec: {} }, reason: "timeout", now: startMs, due: true },
    { name: "timeout after DeadlineExceeded (FailureTarget)", job: job({ startTime: START, conditions: [cond("FailureTarget", "DeadlineExceeded")] }), reason: "timeout", now: deadline + DEADLINE_GRACE_MS, due: false },
  ];
  for (const c of cases) t.equal(stopDue(c.job, c.pod, c.reason, c.now), c.due, c.name);
});

t.test("jobSucceeded, toolLogFinal, podNeededToExplain", async (t) => {
  const cases: Array<{ name: string; job: JobObject; pod?: PodObject; succeeded: boolean; logFinal: boolean; explain: boolean }> = [
    { name: "running, no pod yet", job: job({ active: 1 }), succeeded: false, logFinal: false, explain: false },
    { name: "running", job: job({ active: 1 }), pod: pod("Running"), succeeded: false, logFinal: false, explain: false },
    { name: "the pod Succeeded first", job: job({ active: 1 }), pod: pod("Succeeded"), succeeded: false, logFinal: true, explain: false },
    { name: "SuccessCriteriaMet, pods still terminating", job: job({ conditions: [cond("SuccessCriteriaMet")] }), succeeded: true, logFinal: false, explain: false },
    { name: "Complete", job: job({ conditions: [cond("SuccessCriteriaMet"), cond("Complete")] }), succeeded: true, logFinal: true, explain: false },
    { name: "FailureTarget: a terminating tool may still write", job: job({ conditions: [cond("FailureTarget")] }), pod: pod("Running"), succeeded: false, logFinal: false, explain: false },
    { name: "FailureTarget, pod not delivered", job: job({ conditions: [cond("FailureTarget")] }), succeeded: false, logFinal: false, explain: true },
    { name: "Failed, pod not delivered", job: job({ conditions: [cond("FailureTarget"), cond("Failed")] }), succeeded: false, logFinal: true, explain: true },
    { name: "Failed, with its pod", job: job({ conditions: [cond("Failed")] }), pod: pod("Failed"), succeeded: false, logFinal: true, explain: false },
    { name: "stopped by the operator", job: job({ active: 1 }, { "operon.dev/stopped": "failed", "operon.dev/stopped-message": "cannot start" }), succeeded: false, logFinal: true, explain: false },
  ];
  for (const c of cases) {
    t.equal(jobSucceeded(c.job), c.succeeded, `${c.name}: succeeded`);
    t.equal(toolLogFinal(c.job, c.pod), c.logFinal, `${c.name}: log final`);
    t.equal(podNeededToExplain(c.job, c.pod, observeJob(c.job, c.pod)), c.explain, `${c.name}: pod read first`);
  }
});

/** Drives completedOutputs as the executor does: reads each key it asks for from `stored`. */
function outputsOf(j: JobObject, p: PodObject | undefined, stored: Record<string, number>): { result: JobOutputs; reads: string[] } {
  const heads = new Map<string, ObjectInfo | undefined>();
  for (;;) {
    const next = completedOutputs(j, p, heads);
    if (!("read" in next)) return { result: next, reads: [...heads.keys()] };
    const size = stored[next.read];
    heads.set(next.read, size === undefined ? undefined : { key: next.read, size, lastModified: new Date(0), sha256: `sha-${size}` });
  }
}

t.test("completedOutputs: the stage-out report, else storage, one read at a time; a missing declared output fails the step", async (t) => {
  const root = task.runRoot;
  const reported = [{ filename: "out.sam", position: 0, key: `${root}out.sam`, size: 1, sha256: "ab" }];
  const withReport = pod("Succeeded", { containerStatuses: [{ name: "stage-out", state: { terminated: { exitCode: 0, message: JSON.stringify({ outputs: reported }) } } }] });
  const cases: Array<{ name: string; job: JobObject; pod?: PodObject; stored: Record<string, number>; result: JobOutputs; reads: string[] }> = [
    { name: "reported by stage-out: nothing read", job: job(), pod: withReport, stored: {}, result: { ok: true, outputs: reported }, reads: [] },
    {
      name: "all in storage", job: job(), stored: { [`${root}out.sam`]: 1, [`${root}out.bam`]: 2, [`${root}out.bam.bai`]: 3 },
      result: { ok: true, outputs: [
        { filename: "out.sam", key: `${root}out.sam`, size: 1, sha256: "sha-1", position: 0 },
        { filename: "out.bam", key: `${root}out.bam`, size: 2, sha256: "sha-2", position: 1 },
        { filename: "out.bam.bai", key: `${root}out.bam.bai`, size: 3, sha256: "sha-3" },
      ] },
      reads: [`${root}out.sam`, `${root}out.bam`, `${root}out.bam.bai`],
    },
    {
      name: "a secondary file missing: left out", job: job(), stored: { [`${root}out.sam`]: 1, [`${root}out.bam`]: 2 },
      result: { ok: true, outputs: [
        { filename: "out.sam", key: `${root}out.sam`, size: 1, sha256: "sha-1", position: 0 },
        { filename: "out.bam", key: `${root}out.bam`, size: 2, sha256: "sha-2", position: 1 },
      ] },
      reads: [`${root}out.sam`, `${root}out.bam`, `${root}out.bam.bai`],
    },
    { name: "the first declared output missing: failed, nothing more read", job: job(), stored: { [`${root}out.bam`]: 2 }, result: { ok: false, message: "declared output out.sam was not produced" }, reads: [`${root}out.sam`] },
    { name: "the second declared output missing", job: job(), stored: { [`${root}out.sam`]: 1, [`${root}out.bam.bai`]: 3 }, result: { ok: false, message: "declared output out.bam was not produced" }, reads: [`${root}out.sam`, `${root}out.bam`] },
    { name: "no declared outputs", job: job(undefined, {}, { invocation: { ...task.invocation, outputs: [] } }), stored: {}, result: { ok: true, outputs: [] }, reads: [] },
    { name: "declared outputs unreadable", job: job(undefined, { "operon.dev/outputs": "[{" }), stored: {}, result: { ok: false, message: "the Job's declared outputs are unreadable" }, reads: [] },
    { name: "a truncated stage-out report: storage", job: job(), pod: pod("Succeeded", { containerStatuses: [{ name: "stage-out", state: { terminated: { exitCode: 0, message: JSON.stringify({ outputs: null, truncated: true }) } } }] }), stored: {}, result: { ok: false, message: "declared output out.sam was not produced" }, reads: [`${root}out.sam`] },
  ];
  for (const c of cases) t.same(outputsOf(c.job, c.pod, c.stored), { result: c.result, reads: c.reads }, c.name);
});

t.test("withOutputs: a completed step keeps its outputs, or has failed", async (t) => {
  const completed: ObservedStepState = { phase: "completed", attempt: 1, exitCode: 0, finishedAt: 5 };
  const outputs = [{ filename: "a", key: "k/a", size: 1, sha256: "x", position: 0 }];
  t.same(withOutputs(completed, { ok: true, outputs }), { ...completed, outputs });
  t.same(withOutputs(completed, { ok: false, message: "declared output a was not produced" }), { ...completed, phase: "failed", message: "declared output a was not produced" }, "failed, with the reason; its exit code stays");
});

t.test("observedAttempt: the tool's version, when the end was seen, the references' checksums", async (t) => {
  const sha = "c".repeat(64);
  const stageIn = pod("Running", { initContainerStatuses: [{ name: "stage-in", state: { terminated: { exitCode: 0, message: JSON.stringify({ references: [{ uri: "ref://grch38/genome.fa", sha256: sha, size: 7 }] }) } } }] });
  const running = observeJob(job({ startTime: START, active: 1 }), stageIn);
  const done = observeJob(job({ startTime: START, conditions: [cond("SuccessCriteriaMet")] }), undefined);
  const cases: Array<{ name: string; seen: typeof running; pod?: PodObject; o: { toolVersion: string | null; endSeen: number | undefined }; want: ObservedStepState }> = [
    { name: "running: no end seen even if one was noted", seen: running, pod: stageIn, o: { toolVersion: "0.7.18", endSeen: 9 }, want: { ...running.state, toolVersion: "0.7.18", references: [{ uri: "ref://grch38/genome.fa", sha256: sha, size: 7 }] } },
    { name: "ended, seen at 9", seen: done, o: { toolVersion: "0.7.18", endSeen: 9 }, want: { ...done.state, toolVersion: "0.7.18", endSeenAt: 9 } },
    { name: "ended, not seen ending here", seen: done, o: { toolVersion: null, endSeen: undefined }, want: { ...done.state, toolVersion: null } },
  ];
  for (const c of cases) t.same(observedAttempt(c.seen, c.pod, c.o), c.want, c.name);
});

t.test("newestAttempts, attemptSubmitted, activeStepsOf", async (t) => {
  const a1 = job({ active: 1 }, {}, { attempt: 1 });
  const a2 = job({ active: 1 }, {}, { attempt: 2 });
  const other = job({ conditions: [cond("Complete")] }, {}, { stepId: "sort", attempt: 1 });
  const stranger: JobObject = { metadata: { name: "not-a-step" } };
  t.same([...newestAttempts([a2, a1, other, stranger])].map(([s, j]) => [s, j.metadata.name]), [["align", a2.metadata.name], ["sort", other.metadata.name]], "the highest attempt per step, whatever the order");
  t.same([...newestAttempts([a1, a2])].map(([, j]) => j.metadata.name), [a2.metadata.name]);
  const cases: Array<{ newest: JobObject | undefined; attempt: number; submitted: boolean }> = [
    { newest: undefined, attempt: 1, submitted: false },
    { newest: a1, attempt: 1, submitted: true },
    { newest: a1, attempt: 2, submitted: false },
    { newest: a2, attempt: 1, submitted: true },
  ];
  for (const c of cases) t.equal(attemptSubmitted(c.newest, c.attempt), c.submitted, `newest ${c.newest ? "attempt " + c.newest.metadata.annotations?.["operon.dev/attempt"] : "none"}, attempt ${c.attempt}`);
  const stopped = job({ active: 1 }, { "operon.dev/stopped": "cancelled" }, { runId: "run-b", stepId: "x" });
  const otherRun = job({ conditions: [cond("SuccessCriteriaMet")] }, {}, { runId: "run-c", organization: "globex", stepId: "y" });
  t.same(activeStepsOf([a1, other, stranger, stopped, otherRun, job({ active: 1 }, {}, { stepId: "index" })]), [
    { organization: "acme", runId: task.runId, stepIds: ["align", "index"] },
    { organization: "globex", runId: "run-c", stepIds: ["y"] },
  ], "live Jobs by run: Complete, stopped and foreign ones left out; SuccessCriteriaMet still holds its slot");
});

t.test("taskPod: the reconciler's pod, else the tool's defaults", async (t) => {
  const bwa = defaultCatalogue.get("bwa");
  if (!bwa) throw new Error("no bwa in the catalogue");
  const given = { image: "harbor.lab/bwa:1", resources: { requests: { cpu: "2", memory: "4Gi" }, limits: { memory: "4Gi" } } };
  const defaults = stepCompute({ tool: bwa, params: {}, config: {} });
  if (!defaults.ok) throw new Error(defaults.message);
  const cases: Array<{ name: string; task: Pick<StepTask, "pod">; config: object; want: ReturnType<typeof taskPod> }> = [
    { name: "resolved by the reconciler", task: { pod: given }, config: {}, want: { ok: true, ...given } },
    { name: "without one: the tool's defaults", task: {}, config: {}, want: { ok: true, image: defaults.image ?? bwa.image, ...(defaults.resources ? { resources: defaults.resources } : {}) } },
    { name: "without one: the configured image", task: {}, config: { tools: { bwa: { image: "mirror.lab/bwa:0.7.18" } } }, want: { ok: true, image: "mirror.lab/bwa:0.7.18", ...(defaults.resources ? { resources: defaults.resources } : {}) } },
  ];
  for (const c of cases) t.same(taskPod(c.task, bwa, c.config), c.want, c.name);
  t.equal(defaults.image, bwa.image, "the default image is the tool's");
  const annovar = defaultCatalogue.get("annovar");
  if (!annovar) throw new Error("no annovar in the catalogue");
  t.match(taskPod({}, annovar, {}), { ok: false, message: /annovar has no image/ }, "a tool without a public image, none configured: refused");
  t.match(taskPod({ pod: given }, annovar, {}), { ok: true, image: given.image }, "unless the reconciler resolved its pod");
});
