/**
 * Failure drills, nodes and pods (issue 18): the operator (in this process) on the full test
 * control plane — the real Job controller, pod GC, scheduler and kwok nodes; the step pods'
 * stage-out done by job-sim.ts `startStageOut`, which also holds or fails a pod on cue. Each
 * drill checks the outcome through Operon (the run, run.json, the PipelineRun's status) and
 * through Kubernetes (the Jobs and every state of their pods):
 *  - a node lost mid-step: the pod GC fails the pod (DisruptionTarget), the Job controller
 *    replaces it on another node, the run completes once (one Job, attempt 1);
 *  - a pod evicted through the Eviction API: replaced the same way;
 *  - the tool OOMKilled: the step and the run fail saying out of memory, at which limit;
 *  - activeDeadlineSeconds exceeded: the Job controller's DeadlineExceeded, the step fails as
 *    timed out.
 */
import t from "tap";
import type { Test } from "tap";
import { parseConfig, type Config } from "../../core/config.js";
import type { JobObject, PodObject } from "../../core/kubernetes/jobs.js";
import { RunManifestSchema, type RunManifest } from "../../core/manifest.js";
import type { ObjectStore, RunRecord } from "../../core/ports.js";
import { createApiServerClusterEngine, createStore } from "../../wiring/runtime.js";
import { startOperator } from "../../operator/cluster.js";
import { createKubeClient, paths } from "../../adapters/kubernetes/client.js";
import type { KubeObject } from "../../adapters/kubernetes/informer.js";
import { startStageOut, type StageOutDecision } from "../support/job-sim.js";
import { startTestEnv } from "../support/k8s-env.js";
import { record } from "../support/recorder.js";
import { until } from "../support/wait.js";

type Job = JobObject & KubeObject;
type Pod = PodObject & KubeObject & { spec?: { nodeName?: string } };

const NS = "drills";
const ORG = "lab";
// Three nodes: the node-loss drill deletes one; the others take the replacement and the rest.
const env = await startTestEnv({ kwokNodes: 3 });
t.teardown(() => env.stop());
await env.createNamespace(NS);
const parsed = parseConfig({ ...env.env, OPERON_MODE: "cluster", OPERON_NAMESPACE: NS, OPERON_SIGNING_SECRET: "s".repeat(40), PORT: "0", OPERON_LEADER_ELECTION: "false" });
if (!parsed.ok) throw new Error(parsed.message);
const config: Config = parsed.config;
const store: ObjectStore = await createStore(config, "");
const client = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: NS });
t.teardown(() => client.close());
const jobsSeen = await record<Job>(client, paths.jobs(NS), "operon.dev/run");
t.teardown(() => jobsSeen.stop());
const podsSeen = await record<Pod>(client, paths.pods(NS), "operon.dev/run");
t.teardown(() => podsSeen.stop());
const logs: string[] = [];
const log = (m: string) => { logs.push(m); };
const operator = await startOperator(config, store, { kubeconfig: env.kubeconfigPath, log, listen: false, identity: "drills" });
t.teardown(() => operator.stop());
const api = await createApiServerClusterEngine(config, store, { kubeconfig: env.kubeconfigPath, log });
t.teardown(() => api.stop());

/** What happens to each step pod, per run (default: its outputs are staged out and it succeeds). */
const plans = new Map<string, (pod: Pod, job: Job) => StageOutDecision>();
const stageOut = await startStageOut({
  client, namespace: NS, store,
  decide: (pod, job) => plans.get(pod.metadata.labels?.["operon.dev/run"] ?? "")?.(pod as Pod, job) ?? { action: "succeed" },
  onError: (e) => log(`stage-out: ${String(e)}`),
});
t.teardown(() => stageOut.stop());

await store.put(`orgs/${ORG}/workspaces/ws1/in.bam`, "bam");
const step = (stepId: string, input: string, more: Record<string, unknown> = {}) => ({
  stepId, toolName: "samtools", parameters: { command: "depth", inputFile: input, outputFile: `${stepId}.tsv` }, ...more,
});
async function submit(steps: unknown[]): Promise<string> {
  const r = await api.engine.submit({ organization: ORG, workspace: "ws1", keyId: "k", source: { kind: "inline" }, input: { bam: "in.bam" }, spec: { id: "drill", inputs: [{ name: "bam", type: "file" }], steps } });
  if (!r.ok) throw new Error(`submit: ${r.error.message} ${JSON.stringify(r.error.details)}`);
  return r.run.id;
}
const finished = (id: string, timeoutMs: number) => until(`run ${id} to end`, async () => {
  const r = await api.engine.runs.get(id);
  return r && ["completed", "failed", "cancelled"].includes(r.status) ? r : undefined;
}, timeoutMs).catch((e: unknown) => { throw new Error(`${String(e)}\n${logs.slice(-20).join("\n")}\n${env.componentLog("kube-controller-manager", 20)}`); }) as Promise<RunRecord>;
async function manifest(run: RunRecord): Promise<RunManifest> {
  const { body } = await store.get(`orgs/${ORG}/workspaces/ws1/${run.outputFolder}/run.json`);
  let text = "";
  for await (const c of body) text += Buffer.from(c).toString("utf8");
  return RunManifestSchema.parse(JSON.parse(text));
}
interface PipelineRunStatus { phase?: string; message?: string; steps?: Array<{ stepId: string; phase: string; attempt?: number; message?: string }>; conditions?: Array<{ type: string; status: string; reason?: string; message?: string }> }
const pipelineRun = async (id: string) => (await client.request<{ status: PipelineRunStatus }>("GET", `${paths.pipelineRuns(NS)}/${id}`)).status;
/** Every Job the run ever had (the recorder keeps those deleted too), by name. */
const jobsOfRun = (id: string) => jobsSeen.names().filter((n) => jobsSeen.last(n)?.metadata.labels?.["operon.dev/run"] === id).sort();
/** Every pod the Job ever had, oldest first. */
const podsOfJob = (job: string) => podsSeen.names().filter((n) => podsSeen.last(n)?.metadata.labels?.["batch.kubernetes.io/job-name"] === job)
  .sort((a, b) => Number(podsSeen.history(a)[0]?.metadata.resourceVersion) - Number(podsSeen.history(b)[0]?.metadata.resourceVersion));
const stepOfPod = (pod: Pod) => pod.metadata.annotations?.["operon.dev/step-id"] ?? jobsSeen.last(pod.metadata.labels?.["batch.kubernetes.io/job-name"] ?? "")?.metadata.annotations?.["operon.dev/step-id"];
const trueConditions = (job: Job | undefined) => job?.status?.conditions?.filter((c) => c.status === "True").map((c) => [c.type, c.reason]);
/** The first pod of `stepId` is held (Pending, its init containers waiting) until the test acts on it; later ones succeed. */
function holdFirst(runId: string, stepId: string): { pod: () => Promise<Pod> } {
  let first: string | undefined;
  plans.set(runId, (pod, job) => {
    if (job.metadata.annotations?.["operon.dev/step-id"] !== stepId) return { action: "succeed" };
    first ??= pod.metadata.name;
    return first === pod.metadata.name ? { action: "hold" } : { action: "succeed" };
  });
  return { pod: () => until(`the held pod of ${runId}/${stepId}`, () => stageOut.held().map((n) => podsSeen.last(n)).find((p) => p && p.metadata.labels?.["operon.dev/run"] === runId && stepOfPod(p) === stepId && p.spec?.nodeName), 60_000) };
}

/** What every drill that ends in a retried, completed run must show: once, attempt 1, on both sides. */
async function completedOnce(t: Test, id: string, stepIds: string[]): Promise<{ run: RunRecord; job: (stepId: string) => Job }> {
  const run = await finished(id, 10_000);
  t.equal(run.status, "completed", `the run completed: ${run.error ?? ""} ${JSON.stringify(run.steps.map((s) => [s.stepId, s.status, s.error]))}`);
  t.same(run.steps.map((s) => [s.stepId, s.status, s.attempt]), stepIds.map((s) => [s, "completed", 1]), "every step completed at its first attempt");
  const m = await manifest(run);
  t.equal(m.status, "completed", "run.json: completed");
  t.same(m.steps.map((s) => [s.stepId, s.status, s.attempt, s.taskDefinitionArn]), stepIds.map((s) => [s, "completed", 1, `${id}-${s}-1`]), "run.json: each step once, attempt 1, its one Job");
  const pr = await pipelineRun(id);
  t.equal(pr.phase, "completed", "the PipelineRun's status: completed");
  t.match(pr.conditions?.find((c) => c.type === "Succeeded"), { status: "True" });
  const names = jobsOfRun(id);
  t.same(names, stepIds.map((s) => `${id}-${s}-1`).sort(), "Kubernetes: one Job per step, attempt 1, no other ever created");
  const job = (stepId: string) => jobsSeen.last(`${id}-${stepId}-1`) as Job;
  // The last step completed when its pod Succeeded; the Job controller marks its Job Complete after.
  await until("every Job Complete", () => stepIds.every((s) => (trueConditions(job(s)) ?? []).some(([type]) => type === "Complete")), 30_000);
  for (const s of stepIds) t.same(trueConditions(job(s)), [["SuccessCriteriaMet", "CompletionsReached"], ["Complete", "CompletionsReached"]], `Job ${s}: Complete`);
  return { run, job };
}

t.test("a node lost mid-step: the pod GC fails its pod (DisruptionTarget), the Job controller replaces it on another node, the run completes once", async (t) => {
  const id = await submit([step("a", "${bam}"), step("b", "${a.outputFile}", { dependsOn: ["a"] })]);
  const held = holdFirst(id, "a");
  const first = await held.pod();
  const lost = first.spec?.nodeName ?? "";
  const lostAt = Date.now();
  await env.deleteNode(lost);
  // The dominant wait: the pod GC's 40 s quarantine for pods of a deleted node (checked every
  // 20 s), then the Job controller's backoff before the replacement (NODE_TIMING).
  await finished(id, 150_000);
  t.comment(`run completed ${((Date.now() - lostAt) / 1000).toFixed(0)} s after the node was deleted`);
  const { job } = await completedOnce(t, id, ["a", "b"]);
  const pods = podsOfJob(`${id}-a-1`);
  t.equal(pods.length, 2, `step a's Job had two pods: the lost one and its replacement (${pods.join(", ")})`);
  const [gone, replacement] = pods.map((n) => podsSeen.last(n));
  t.equal(gone?.metadata.name, first.metadata.name, "the first is the held pod");
  t.equal(gone?.status?.phase, "Failed", "the lost pod was marked Failed");
  t.match(gone?.status?.conditions?.find((c) => c.type === "DisruptionTarget"), { status: "True", reason: "DeletionByPodGC" }, "DisruptionTarget, by the pod GC");
  t.ok(podsSeen.deletedAt(first.metadata.name), "and removed");
  t.not(replacement?.spec?.nodeName, lost, `the replacement ran on another node (${replacement?.spec?.nodeName})`);
  t.equal(replacement?.status?.phase, "Succeeded");
  t.equal(job("a").status?.failed ?? 0, 0, "the lost pod is not counted as a failure (podFailurePolicy Ignore)");
  t.equal(job("a").status?.succeeded, 1, "the replacement's success is the Job's");
  t.equal(podsOfJob(`${id}-b-1`).length, 1, "step b: one pod");
});

t.test("a pod evicted through the Eviction API: replaced, the run completes once", async (t) => {
  const id = await submit([step("a", "${bam}")]);
  const first = await holdFirst(id, "a").pod();
  await client.request("POST", `${paths.pods(NS)}/${first.metadata.name}/eviction`, { body: { apiVersion: "policy/v1", kind: "Eviction", metadata: { name: first.metadata.name, namespace: NS } } });
  // The dominant wait: the Job controller's pod-failure backoff (10 s) before the replacement.
  await finished(id, 60_000);
  const { job } = await completedOnce(t, id, ["a"]);
  const pods = podsOfJob(`${id}-a-1`);
  t.equal(pods.length, 2, `two pods: the evicted one and its replacement (${pods.join(", ")})`);
  const evicted = podsSeen.last(first.metadata.name);
  t.equal(evicted?.status?.phase, "Failed", "the evicted pod ended Failed");
  t.match(evicted?.status?.conditions?.find((c) => c.type === "DisruptionTarget"), { status: "True", reason: "EvictionByEvictionAPI" }, "with DisruptionTarget");
  t.equal(podsSeen.last(pods[1] ?? "")?.status?.phase, "Succeeded", "the replacement succeeded");
  t.equal(job("a").status?.failed ?? 0, 0, "the eviction is not counted as a failure");
});

t.test("the tool OOMKilled: the step and the run fail saying out of memory at the 8Gi limit; no retry", async (t) => {
  const id = await submit([step("a", "${bam}", { resources: { memory: "8Gi" } }), step("b", "${a.outputFile}", { dependsOn: ["a"] })]);
  plans.set(id, () => ({ action: "fail", exitCode: 137, reason: "OOMKilled", container: "tool" }));
  const run = await finished(id, 60_000);
  t.equal(run.status, "failed");
  const a = run.steps.find((s) => s.stepId === "a");
  t.match(a, { status: "failed", attempt: 1, exitCode: 137 }, "step a failed at its first attempt, exit 137");
  t.match(a?.error, /out of memory \(OOMKilled\) at its 8Gi memory limit/, `the step says out of memory and the limit: ${a?.error}`);
  t.match(run.error, /out of memory.*8Gi/, `the run fails with that reason: ${run.error}`);
  t.equal(run.steps.find((s) => s.stepId === "b")?.status, "skipped", "b never starts");
  const m = await manifest(run);
  t.equal(m.status, "failed", "run.json: failed");
  t.match(m.steps.find((s) => s.stepId === "a"), { status: "failed", attempt: 1, error: /out of memory.*8Gi/ }, "run.json: step a's error");
  const pr = await pipelineRun(id);
  t.equal(pr.phase, "failed");
  t.match(pr.conditions?.find((c) => c.type === "Succeeded"), { status: "False", reason: "Failed", message: /out of memory.*8Gi/ }, "the PipelineRun's condition says why");
  t.same(jobsOfRun(id), [`${id}-a-1`], "Kubernetes: one Job, never retried");
  const job = await until("the Job Failed", () => { const j = jobsSeen.last(`${id}-a-1`); return trueConditions(j)?.some(([c]) => c === "Failed") ? j : undefined; });
  t.same(trueConditions(job), [["FailureTarget", "PodFailurePolicy"], ["Failed", "PodFailurePolicy"]], "the Job failed by its podFailurePolicy (FailJob on the tool's exit)");
  const template = job.spec?.template as { spec: { initContainers: Array<{ name: string; resources?: { limits?: Record<string, string> } }> } } | undefined;
  t.equal(template?.spec.initContainers.find((c) => c.name === "tool")?.resources?.limits?.memory, "8Gi", "the tool container's memory limit is the step's");
  const pods = podsOfJob(`${id}-a-1`);
  t.equal(pods.length, 1, "one pod");
  t.match(podsSeen.last(pods[0] ?? "")?.status?.initContainerStatuses?.find((c) => c.name === "tool")?.state?.terminated, { exitCode: 137, reason: "OOMKilled" }, "Kubernetes: the tool container terminated OOMKilled, exit 137");
});

t.test("activeDeadlineSeconds exceeded: the Job controller's DeadlineExceeded; the step and the run fail as timed out", async (t) => {
  const id = await submit([step("a", "${bam}", { timeout: 3000 })]);
  const first = await holdFirst(id, "a").pod();
  // The dominant wait: the 3 s deadline, from the Job's startTime.
  const run = await finished(id, 60_000);
  t.equal(run.status, "failed");
  const a = run.steps.find((s) => s.stepId === "a");
  t.match(a, { status: "failed", attempt: 1 }, "step a failed at its first attempt");
  t.match(a?.error, /^timed out after 3000 ms \(activeDeadlineSeconds\)$/, `the step says it timed out, by the Job's deadline: ${a?.error}`);
  t.match(run.error, /timed out after 3000 ms/, `the run fails with that reason: ${run.error}`);
  const m = await manifest(run);
  t.match(m.steps.find((s) => s.stepId === "a"), { status: "failed", error: /timed out after 3000 ms/ }, "run.json: step a timed out");
  const pr = await pipelineRun(id);
  t.match(pr.conditions?.find((c) => c.type === "Succeeded"), { status: "False", reason: "Failed", message: /timed out/ });
  t.same(jobsOfRun(id), [`${id}-a-1`], "Kubernetes: one Job");
  const job = await until("the Job Failed", () => { const j = jobsSeen.last(`${id}-a-1`); return trueConditions(j)?.some(([c]) => c === "Failed") ? j : undefined; }, 30_000)
    .catch((e: unknown) => { const j = jobsSeen.last(`${id}-a-1`); throw new Error(`${String(e)}: ${JSON.stringify({ stopped: j?.metadata.annotations?.["operon.dev/stopped"], suspend: j?.spec?.suspend, conditions: trueConditions(j) })}`); });
  t.equal((job.spec as { activeDeadlineSeconds?: number }).activeDeadlineSeconds, 3, "activeDeadlineSeconds from the step's timeout");
  t.same(trueConditions(job), [["FailureTarget", "DeadlineExceeded"], ["Failed", "DeadlineExceeded"]], "the Job controller failed it: DeadlineExceeded");
  t.notOk(jobsSeen.history(`${id}-a-1`).some((j) => j.metadata.annotations?.["operon.dev/stopped"] || j.spec?.suspend), "the operator's own timer did not race it (no stop, no suspend)");
  await until("the held pod removed", () => podsSeen.deletedAt(first.metadata.name), 30_000);
  t.pass("the Job controller removed the pod past the deadline");
});
