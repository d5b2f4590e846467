/**
 * Cluster mode against a real control plane (etcd, kube-apiserver, the real Job controller,
 * garbage collector and scheduler, kwok nodes) and a real S3 server: the api-server creates
 * PipelineRuns through its HTTP API, the operator turns them into Jobs, the Job controller
 * creates their pods and writes their conditions, kwok runs the pods, and the stage-out
 * stand-in (test/support/job-sim.ts) uploads each step's outputs — or fails or holds a pod
 * when a test says so. Checks dependsOn order, the per-organization limit across
 * organizations (counted from the Jobs the Job controller has not finished), cancellation,
 * failures with clear reasons (a tool that exits non-zero, an image that cannot start, a
 * malformed PipelineRun applied with kubectl), the printer columns through the real kubectl,
 * and run.json in S3.
 */
import t from "tap";
import type { FastifyInstance } from "fastify";
import { parse } from "yaml";
import { parseConfig, type Config } from "../../core/config.js";
import { RunManifestSchema } from "../../core/manifest.js";
import type { ObjectStore } from "../../core/ports.js";
import { createStore } from "../../wiring/runtime.js";
import { buildApp } from "../../api-server/app.js";
import { ServiceStore } from "../../services/store.js";
import { startOperator, type Operator } from "../../operator/cluster.js";
import { createApiServerClusterEngine } from "../../wiring/runtime.js";
import { stepStartCounts } from "../support/metrics.js";
import { createKubeClient, isNotFound, paths, type KubeClient } from "../../adapters/kubernetes/client.js";
import type { JobObject } from "../../core/kubernetes/jobs.js";
import { Informer, type KubeObject } from "../../adapters/kubernetes/informer.js";
import { startStageOut, type StageOutDecision } from "../support/job-sim.js";
import { startTestEnv } from "../support/k8s-env.js";
import { record } from "../support/recorder.js";
import { until } from "../support/wait.js";

const NS = "operon";
const env = await startTestEnv({ kwokNodes: 2 });
t.teardown(() => env.stop());
await env.createNamespace(NS);

const parsed = parseConfig({ ...env.env, OPERON_MODE: "cluster", OPERON_NAMESPACE: NS, OPERON_SIGNING_SECRET: "s".repeat(40), PORT: "0", OPERON_ORG_CONCURRENCY: "5" });
// (The Lease's default duration, 15 s: one replica takes a free Lease at once, and a 2 s renew
// deadline would be missed now and then on a busy machine, giving the operator a new engine —
// new metrics — mid-test.)
if (!parsed.ok) throw new Error(parsed.message);
const config: Config = parsed.config;
const store: ObjectStore = await createStore(config, "");
const service = new ServiceStore(store);
const client: KubeClient = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: NS });
t.teardown(() => client.close());
/** Every state of every step Job, also of those the operator deleted (stopped ones, once recorded). */
const jobsSeen = await record<JobObject & { metadata: { name: string } }>(client, paths.jobs(NS), "operon.dev/run");
t.teardown(() => jobsSeen.stop());
const logs: string[] = [];
const log = (s: string) => { logs.push(s); };

type Job = JobObject & { metadata: { name: string } };
/**
 * How each step pod ends, by its Job's name; a pod with no verdict (yet) is held, Pending, as
 * a step still running: a test ends its steps one by one with `finish`, or lets a run's
 * steps through at once with `autoFinish`.
 */
const verdicts = new Map<string, StageOutDecision>();
const autoRuns = new Set<string>();
const stageOut = await startStageOut({
  client, namespace: NS, store,
  decide: (_pod, job) => verdicts.get(job.metadata.name) ?? (autoRuns.has(job.metadata.labels?.["operon.dev/run"] ?? "") ? { action: "succeed" } : { action: "hold" }),
  onError: (e) => log(`stage-out: ${String(e)}`),
});
t.teardown(() => stageOut.stop());
const jobOfPod = (p: { metadata: { labels?: Record<string, string> } }) => p.metadata.labels?.["batch.kubernetes.io/job-name"] ?? p.metadata.labels?.["job-name"];
/** The step's pod ends as `d` says (default: its outputs uploaded, then Succeeded), now or once it is created. */
function finish(job: Job, d: StageOutDecision = { action: "succeed" }): void {
  verdicts.set(job.metadata.name, d);
  stageOut.release((p) => jobOfPod(p) === job.metadata.name);
}
/** Every step pod of these runs succeeds, those held now and those to come. */
function autoFinish(runIds: string[]): void {
  for (const id of runIds) autoRuns.add(id);
  stageOut.release((p) => runIds.includes(p.metadata.labels?.["operon.dev/run"] ?? ""));
}
/** The Job's pod is running (held by the stage-out stand-in): the Job controller and the scheduler did their part. */
const podHeld = (job: Job) => until(`${job.metadata.name}'s pod running`, () => stageOut.held().find((name) => name.startsWith(`${job.metadata.name}-`)));

// Clean-up sweeps every 5 s: a stopped Job is deleted when its run ends, or by the next sweep when
// the stop reached the Job cache only after the run's end (the janitor's two paths).
const operator: Operator = await startOperator(config, store, { kubeconfig: env.kubeconfigPath, log, listen: false, identity: "op-test", tuning: { sweepIntervalMs: 5000 } });
/** The operator's engine, once it leads (it campaigns for the Lease in the background). */
const operatorEngine = () => until("the operator to lead", () => operator.engine());
t.teardown(() => operator.stop());
const api = await createApiServerClusterEngine(config, store, { kubeconfig: env.kubeconfigPath, log });
t.teardown(() => api.stop());
const app: FastifyInstance = await buildApp({
  config: { publicUrl: "http://localhost", OPERON_KEY_CACHE_TTL_SECONDS: 30, OPERON_RATE_LIMIT_PER_MINUTE: 100_000, storage: "s3", signingSecret: config.OPERON_SIGNING_SECRET as string },
  store, service, engine: api.engine,
});
t.teardown(() => app.close());

const keys = new Map<string, string>();
async function org(name: string): Promise<Record<string, string>> {
  if (!keys.has(name)) {
    await service.createWorkspace(name, "ws1");
    keys.set(name, (await service.createKey({ organization: name, scopes: ["tools", "files"], workspaces: null })).key);
    await store.put(`orgs/${name}/workspaces/ws1/data/in.bam`, "bam bytes");
  }
  return { authorization: `Bearer ${keys.get(name)}` };
}

async function jobsOf(runId: string): Promise<Job[]> {
  const list = await client.request<{ items: Job[] }>("GET", paths.jobs(NS), { query: { labelSelector: `operon.dev/run=${runId}` } });
  return list.items;
}
const stepOf = (j: Job) => j.metadata.annotations?.["operon.dev/step-id"] ?? "?";

/** A step that reads a BAM and writes a table: a real catalogue command, so argv is built. */
const step = (stepId: string, input: string, dependsOn?: string[]) => ({
  stepId, toolName: "samtools", ...(dependsOn ? { dependsOn } : {}),
  parameters: { command: "depth", inputFile: input, outputFile: `${stepId}.tsv` },
});

async function submit(h: Record<string, string>, spec: unknown, input: Record<string, string> = { bam: "data/in.bam" }) {
  const res = await app.inject({ method: "POST", url: "/v1/pipelines", headers: h, payload: { workspace_id: "ws1", spec, input } });
  if (res.statusCode !== 201) throw new Error(`submit: ${res.statusCode} ${res.body}`);
  return res.json().data as { id: string; status: string; output_folder: string };
}
async function getRun(h: Record<string, string>, id: string) {
  const res = await app.inject({ method: "GET", url: `/v1/pipelines/${id}?workspace_id=ws1`, headers: h });
  return res.json().data as { id: string; status: string; error: string | null; progress_pct?: number; steps: Array<{ step_id: string; status: string; error: string | null; waiting_reason?: string; queue_position?: number }> };
}

t.test("Jobs appear in dependsOn order, and only then; the run completes with run.json in S3", async (t) => {
  const h = await org("acme");
  const counts0 = await stepStartCounts((await operatorEngine()).metrics);
  // a → (b, c) → d
  const spec = { id: "diamond", name: "Diamond", inputs: [{ name: "bam", type: "file" }], steps: [step("a", "${bam}"), step("b", "${a.outputFile}", ["a"]), step("c", "${a.outputFile}", ["a"]), step("d", "${b.outputFile}", ["b", "c"])] };
  const run = await submit(h, spec);
  t.equal(run.status, "queued");
  const pr = await client.request<{ metadata: { name: string }; spec: { organization: string } }>("GET", `${paths.pipelineRuns(NS)}/${run.id}`);
  t.equal(pr.metadata.name, run.id, "metadata.name is the run id");
  t.equal(pr.spec.organization, "acme");

  const first = await until("job a", async () => { const j = await jobsOf(run.id); return j.length ? j : undefined; });
  t.same(first.map(stepOf), ["a"], "only the root step has a Job");
  const a = first[0] as Job;
  t.equal(a.metadata.labels?.["operon.dev/org"], "acme");
  t.equal(a.metadata.labels?.["operon.dev/run"], run.id);
  t.equal(a.metadata.ownerReferences?.[0]?.name, run.id, "owned by the PipelineRun");
  const aSpec = a.spec as { backoffLimit?: number; podFailurePolicy?: { rules: Array<{ action: string }> }; template: { spec: { initContainers: Array<{ name: string; resources?: { requests?: Record<string, string> } }> } } };
  t.equal(aSpec.backoffLimit, 0);
  t.same(aSpec.podFailurePolicy?.rules.map((r) => r.action), ["Ignore", "FailJob"], "disruptions are retried, a tool's own failure fails the Job");
  t.ok(aSpec.template.spec.initContainers.find((c) => c.name === "tool")?.resources?.requests?.cpu, "the tool container requests CPU (the scheduler places it by that)");
  const aPod = await podHeld(a);
  t.ok(aPod, "the Job controller created a's pod and the scheduler bound it to a node");
  t.same((await jobsOf(run.id)).map(stepOf), ["a"], "b and c wait for a, which runs");

  // Live status through the real kubectl, with the printer columns.
  const get = await env.kubectl(["get", "pipelineruns", "-n", NS, run.id]);
  t.equal(get.code, 0, get.stderr);
  const [header, row] = get.stdout.trim().split("\n");
  t.match(header, /^NAME\s+ORG\s+WORKSPACE\s+PIPELINE\s+STATUS\s+PROGRESS\s+AGE$/);
  t.match(row, new RegExp(`^${run.id}\\s+acme\\s+ws1\\s+diamond\\s+running\\s+0/4\\s+\\d+s$`));
  const short = await env.kubectl(["get", "opr", "-n", NS]);
  t.match(short.stdout, run.id, "short name opr");
  const cat = await env.kubectl(["get", "operon", "-n", NS]);
  t.match(cat.stdout, run.id, "category operon");

  const beforeComplete = Date.now();
  finish(a);
  const second = await until("jobs b and c", async () => { const j = await jobsOf(run.id); return j.length === 3 ? j : undefined; });
  const seenA = (await operator.executor()?.observe(run.id))?.get("a");
  t.equal(seenA?.phase, "completed");
  t.ok((seenA?.endSeenAt ?? 0) >= beforeComplete && (seenA?.endSeenAt ?? Infinity) <= Date.now(), "the executor notes when it saw the Job end (its own clock, in ms)");
  t.same(second.map(stepOf).sort(), ["a", "b", "c"]);
  // The Job controller's own order: SuccessCriteriaMet, then Complete once the pod is gone.
  const aDone = await until("a's Job Complete", () => jobsSeen.history(a.metadata.name).find((j) => j.status?.conditions?.some((c) => c.type === "Complete" && c.status === "True")));
  t.same(aDone.status?.conditions?.map((c) => c.type), ["SuccessCriteriaMet", "Complete"], "the Job controller wrote SuccessCriteriaMet, then Complete");
  t.equal((aDone.status as { succeeded?: number }).succeeded, 1, "from its one pod that succeeded");
  const b = second.find((j) => stepOf(j) === "b") as Job;
  const c = second.find((j) => stepOf(j) === "c") as Job;
  await Promise.all([podHeld(b), podHeld(c)]);
  t.equal((await jobsOf(run.id)).length, 3, "d waits for b and c (both running)");
  finish(b);
  const mid = await until("b completed", async () => { const r = await getRun(h, run.id); return r.steps[1]?.status === "completed" ? r : undefined; });
  t.notOk((await jobsOf(run.id)).some((j) => stepOf(j) === "d"), "d still waits for c");
  t.same(mid.steps.map((s) => s.status), ["completed", "completed", "running", "pending"]);
  finish(c);
  const d = await until("job d", async () => (await jobsOf(run.id)).find((j) => stepOf(j) === "d"));
  finish(d);
  const done = await until("run completed", async () => { const r = await getRun(h, run.id); return r.status === "completed" ? r : undefined; });
  t.same(done.steps.map((s) => s.status), ["completed", "completed", "completed", "completed"]);
  t.equal((await jobsOf(run.id)).length, 4, "one Job per step, none twice");
  const counts = await stepStartCounts((await operatorEngine()).metrics);
  t.equal(counts.free - counts0.free, 4, "operon_step_start_latency_seconds counted each of the 4 Jobs once, with a free slot");
  t.equal(counts.waited, counts0.waited);

  const after = await env.kubectl(["get", "pipelineruns", "-n", NS, run.id, "--no-headers"]);
  t.match(after.stdout, /acme\s+ws1\s+diamond\s+completed\s+4\/4/);

  const manifestKey = `orgs/acme/workspaces/ws1/${run.output_folder}/run.json`;
  const { body } = await store.get(manifestKey);
  let text = "";
  for await (const c of body) text += Buffer.from(c).toString("utf8");
  const manifest = RunManifestSchema.parse(JSON.parse(text));
  t.equal(manifest.status, "completed");
  t.same(manifest.pipelineDefinition, spec, "run.json carries the spec as executed");
  t.same(manifest.steps.map((s) => s.stepId), ["a", "b", "c", "d"]);
  const depthStep = manifest.steps.find((s) => s.stepId === "b");
  t.match(depthStep?.argv, ["samtools", "depth"], "argv as built for the tool image");
  t.ok(depthStep?.outputFiles.some((o) => o.filename === "b.tsv" && /^[0-9a-f]{64}$/.test(o.checksum)), "outputs with sha256");
  t.equal(depthStep?.taskDefinitionArn, `${run.id}-b-1`, "the step's Job");
  t.equal(depthStep?.toolVersion, "1.21", "the pinned image's tool version");
  const cr = await client.request<{ status: { manifestKey: string; conditions: Array<{ type: string; status: string }> } }>("GET", `${paths.pipelineRuns(NS)}/${run.id}`);
  t.equal(cr.status.manifestKey, manifestKey);
  t.match(cr.status.conditions, [{ type: "Succeeded", status: "True" }]);
  const described = await env.kubectl(["describe", "pipelinerun", "-n", NS, run.id]);
  t.match(described.stdout, /Started\s+.*run started: 4 step\(s\)/, "kubectl describe shows the run's events");
  t.match(described.stdout, /Completed\s+.*run completed/);
});

t.test("the per-organization limit holds across 3 organizations", async (t) => {
  const orgs = ["org-a", "org-b", "org-c"];
  const hs = await Promise.all(orgs.map(org));
  const counts0 = await stepStartCounts((await operatorEngine()).metrics);
  // Pods are held (their steps run) until every organization is saturated, then released.
  // Active = a step pod neither Succeeded nor Failed. (Once its pod has Succeeded nothing of the
  // step runs: the operator reuses the slot then, before the Job controller marks the Job.)
  const active = await trackActiveJobs(orgs);
  t.teardown(() => active.stop());
  // Per organization: 3 runs of 3 independent steps = 9 ready steps for 5 slots.
  const wide = { id: "wide", inputs: [{ name: "bam", type: "file" }], steps: [step("x", "${bam}"), step("y", "${bam}"), step("z", "${bam}")] };
  const runs: Array<{ h: Record<string, string>; id: string }> = [];
  for (let i = 0; i < 3; i++) for (const h of hs) runs.push({ h, id: (await submit(h, wide)).id });
  const runIds = runs.map((r) => r.id);
  const runOrg = new Map(runs.map((r, i) => [r.id, orgs[i % 3] as string]));
  // Every org's 5 pods created by the Job controller and running: an over-admission would show by now.
  await until("5 running pods per organization", () => orgs.every((o) => stageOut.held().filter((p) => runOrg.get(runIds.find((id) => p.startsWith(`${id}-`)) ?? "") === o).length >= 5), 60_000);
  for (const o of orgs) t.equal(active.now(o), 5, `${o}: 5 step pods while 9 steps are ready`);
  // While saturated, a waiting step says why and where it is in the queue.
  const waiting = await until("a waiting step", async () => {
    for (const r of runs) {
      const s = (await getRun(r.h, r.id)).steps.find((x) => x.status === "waiting");
      if (s) return s;
    }
    return undefined;
  });
  t.equal(waiting.waiting_reason, "OrgConcurrencyLimit");
  t.ok((waiting.queue_position ?? 0) >= 1, "with a queue position");
  autoFinish(runIds);
  for (const r of runs) await until(`run ${r.id}`, async () => ((await getRun(r.h, r.id)).status === "completed" ? true : undefined), 90_000);
  for (const o of orgs) {
    t.equal(active.max(o), 5, `${o}: never more than 5 step pods running at once, from start to drain`);
    t.equal(active.now(o), 0, `${o}: every step pod Succeeded at the end`);
  }
  const counts = await stepStartCounts((await operatorEngine()).metrics);
  t.equal(counts.free + counts.waited - counts0.free - counts0.waited, 27, "every one of the 27 steps counted once in operon_step_start_latency_seconds");
  t.ok(counts.waited - counts0.waited >= 12, `at least 4 steps per organization counted as having waited for a slot (${counts.waited - counts0.waited})`);
  const cr = await client.request<{ status: { conditions: Array<{ type: string; status: string }> } }>("GET", `${paths.pipelineRuns(NS)}/${runs[0]?.id}`);
  t.match(cr.status.conditions.find((c) => c.type === "Admitted"), { status: "True" }, "admitted once it ran");
});

t.test("cancel through the API stops the running Job and cancels the run", async (t) => {
  const h = await org("acme");
  const run = await submit(h, { id: "chain", inputs: [{ name: "bam", type: "file" }], steps: [step("a", "${bam}"), step("b", "${a.outputFile}", ["a"])] });
  const { metadata: { name } } = await until("job a", async () => (await jobsOf(run.id))[0]);
  const del = await app.inject({ method: "DELETE", url: `/v1/pipelines/${run.id}?workspace_id=ws1`, headers: h });
  t.equal(del.statusCode, 200, del.body);
  const r = await until("cancelled", async () => { const x = await getRun(h, run.id); return x.status === "cancelled" ? x : undefined; });
  t.same(r.steps.map((s) => s.status), ["cancelled", "cancelled"]);
  await until("the stopped Job deleted once the cancel is recorded", () => jobsSeen.deletedAt(name));
  const job = jobsSeen.last(name);
  t.equal(job?.metadata.annotations?.["operon.dev/stopped"], "cancelled", "the Job recorded why it stopped");
  t.equal((job?.spec as { suspend?: boolean }).suspend, true, "and was suspended (its pods removed)");
  t.same(jobsSeen.names().filter((n) => jobsSeen.last(n)?.metadata.labels?.["operon.dev/run"] === run.id), [name], "b never started");
  t.same(await jobsOf(run.id), [], "the stopped Job is gone");
});

t.test("a failed Job fails the run; later steps are skipped", async (t) => {
  const h = await org("acme");
  const run = await submit(h, { id: "chain", inputs: [{ name: "bam", type: "file" }], steps: [step("a", "${bam}"), step("b", "${a.outputFile}", ["a"])] });
  const job = await until("job a", async () => (await jobsOf(run.id))[0]);
  finish(job, { action: "fail", exitCode: 3, container: "tool" });
  const r = await until("failed", async () => { const x = await getRun(h, run.id); return x.status === "failed" ? x : undefined; });
  t.same(r.steps.map((s) => s.status), ["failed", "skipped"]);
  t.match(r.error, /step a failed: the tool exited with code 3/);
  const failed = await until("a's Job Failed", () => jobsSeen.history(job.metadata.name).find((j) => j.status?.conditions?.some((c) => c.type === "Failed" && c.status === "True")));
  t.same(failed.status?.conditions?.map((c) => [c.type, c.reason]), [["FailureTarget", "PodFailurePolicy"], ["Failed", "PodFailurePolicy"]], "the Job controller failed the Job by its podFailurePolicy (the tool's exit code), not by retries");
});

t.test("a step whose image cannot start fails with a clear reason", async (t) => {
  const h = await org("acme");
  const run = await submit(h, { id: "one", inputs: [{ name: "bam", type: "file" }], steps: [step("a", "${bam}")] });
  const job = await until("job a", async () => (await jobsOf(run.id))[0]);
  // kwok pulls no images: the Job controller's pod, held on its kwok node, gets the status a
  // kubelet reports for an image it cannot pull (stage-in done, the tool container stuck).
  // kwok has no stage for that state: it leaves it as written.
  const podName = await podHeld(job);
  const toolImage = "quay.io/biocontainers/samtools:does-not-exist";
  await client.request("PATCH", `${paths.pods(NS)}/${podName}/status`, {
    patch: "merge",
    body: { status: { phase: "Pending", initContainerStatuses: [
      { name: "stage-in", image: "operon:test", imageID: "", ready: true, restartCount: 0, state: { terminated: { exitCode: 0, reason: "Completed" } } },
      { name: "tool", image: toolImage, imageID: "", ready: false, restartCount: 0, state: { waiting: { reason: "ImagePullBackOff", message: `Back-off pulling image "${toolImage}"` } } },
    ] } },
  });
  const r = await until("failed", async () => { const x = await getRun(h, run.id); return x.status === "failed" ? x : undefined; });
  t.match(r.steps[0]?.error, /container tool \(image quay.io\/biocontainers\/samtools:does-not-exist\) cannot start: ImagePullBackOff/);
  await until("the stuck pod removed (the Job controller deletes the pods of a suspended Job)", async () => { try { await client.request("GET", `${paths.pods(NS)}/${podName}`); return false; } catch (e) { if (isNotFound(e)) return true; throw e; } });
  const stopped = await until("the Job stopped", () => jobsSeen.history(job.metadata.name).find((j) => j.metadata.annotations?.["operon.dev/stopped"]));
  t.equal(stopped.metadata.annotations?.["operon.dev/stopped"], "failed", "the Job is stopped, not left pending until its deadline");
  await until("and deleted once the failure is recorded", () => jobsSeen.deletedAt(job.metadata.name));
});

t.test("a malformed PipelineRun applied with kubectl is marked failed; the operator carries on", async (t) => {
  // Passes the CRD's schema, but its steps form a cycle and name an unknown tool.
  const bad = {
    apiVersion: "operon.dev/v1alpha1", kind: "PipelineRun", metadata: { name: "by-hand-1", namespace: NS },
    spec: { organization: "acme", workspace: "ws1", pipeline: { id: "by-hand" }, outputFolder: "pipelines/by-hand-1", parameters: {},
      spec: { steps: [{ stepId: "a", toolName: "samtools", dependsOn: ["b"] }, { stepId: "b", toolName: "nosuchtool", dependsOn: ["a"] }] } },
  };
  const applied = await env.kubectl(["apply", "-f", "-"], { input: JSON.stringify(bad) });
  t.equal(applied.code, 0, applied.stderr);
  const failed = await until("by-hand-1 failed", async () => {
    const cr = await client.request<{ status?: { phase?: string; message?: string } }>("GET", `${paths.pipelineRuns(NS)}/by-hand-1`);
    return cr.status?.phase === "failed" ? cr.status : undefined;
  });
  t.match(failed.message, /invalid PipelineRun: .*cycle|invalid PipelineRun: .*nosuchtool/);
  t.same(await jobsOf("by-hand-1"), [], "no Job for it");
  // Not even the CRD's schema: the API server refuses it before the operator sees it.
  const worse = { ...bad, metadata: { name: "by-hand-2", namespace: NS }, spec: { ...bad.spec, spec: { steps: "not-a-list" } } };
  const refused = await env.kubectl(["apply", "-f", "-"], { input: JSON.stringify(worse) });
  t.not(refused.code, 0);
  t.match(refused.stderr, /spec\.spec\.steps/);
  // A resource the schema cannot catch (bad status written by hand) is failed too.
  const h = await org("acme");
  const run = await submit(h, { id: "one", inputs: [{ name: "bam", type: "file" }], steps: [step("a", "${bam}")] });
  const job = await until("job a", async () => (await jobsOf(run.id))[0]);
  finish(job);
  await until("healthy operator completes another run", async () => ((await getRun(h, run.id)).status === "completed" ? true : undefined));
  t.notOk(logs.some((l) => /by-hand-1/.test(l) && /reconcile .* failed/.test(l)), "no reconcile errors for the bad run");
});

t.test("a synchronous tool run is a one-step PipelineRun under the same limit", async (t) => {
  const h = await org("acme");
  const before = new Set((await client.request<{ items: Job[] }>("GET", paths.jobs(NS))).items.map((j) => j.metadata.name));
  const pending = app.inject({ method: "POST", url: "/v1/tools/samtools/run", headers: h, payload: { workspace_id: "ws1", input: { command: "depth", inputFile: "data/in.bam", outputFile: "tool-depth.tsv" } } });
  const job = await until("the tool run's Job", async () => (await client.request<{ items: Job[] }>("GET", paths.jobs(NS))).items.find((j) => !before.has(j.metadata.name)));
  t.equal(job.metadata.annotations?.["operon.dev/organization"], "acme");
  t.equal(job.metadata.annotations?.["operon.dev/tool"], "samtools");
  finish(job);
  const res = await pending;
  t.equal(res.statusCode, 200, res.body);
  const data = res.json().data as { status: string; exit_code: number; output_files: Array<{ key: string; sha256: string }>; run_id: string };
  t.equal(data.status, "completed");
  t.equal(data.exit_code, 0);
  t.match(data.output_files, [{ key: /^pipelines\/.*\/tool-depth\.tsv$/, sha256: /^[0-9a-f]{64}$/ }]);
  t.equal(job.metadata.annotations?.["operon.dev/run-id"], data.run_id);
  const noWs = await app.inject({ method: "POST", url: "/v1/tools/samtools/run", headers: h, payload: { input: { command: "depth", inputFile: "data/in.bam", outputFile: "x.tsv" } } });
  t.equal(noWs.statusCode, 400);
  t.match(noWs.json().message, /^workspace_id: /, "names the field");
});

t.test("the CRD's printer columns and names come from the generated file", async (t) => {
  const crd = await env.kubectl(["get", "crd", "pipelineruns.operon.dev", "-o", "yaml"]);
  t.equal(crd.code, 0, crd.stderr);
  const obj = parse(crd.stdout) as { spec: { names: { shortNames: string[] }; versions: Array<{ additionalPrinterColumns: Array<{ name: string }> }> } };
  t.same(obj.spec.names.shortNames, ["opr"]);
  t.same(obj.spec.versions[0]?.additionalPrinterColumns.map((c) => c.name), ["Org", "Workspace", "Pipeline", "Status", "Progress", "Age"]);
});

t.test("the operator reports the Jobs it created and its writes", async (t) => {
  t.ok(operator.isLeader(), "the only replica leads");
  t.equal(operator.terms(), 1, "and has led without a break since it started");
  t.ok(operator.client.writes() > 0);
});

t.test("a PipelineRun deleted while its Jobs run frees its organization's slots", async (t) => {
  const h = await org("del-org");
  const five = { id: "five", inputs: [{ name: "bam", type: "file" }], steps: ["a", "b", "c", "d", "e"].map((id) => step(id, "${bam}")) };
  const first = await submit(h, five);
  await until("5 Jobs", async () => ((await jobsOf(first.id)).length === 5 ? true : undefined));
  const next = await submit(h, { id: "one", inputs: [{ name: "bam", type: "file" }], steps: [step("a", "${bam}")] });
  await until("the next run waits", async () => ((await getRun(h, next.id)).steps[0]?.status === "waiting" ? true : undefined));
  // Orphaned, so the garbage collector leaves the Jobs (and their running pods) in place:
  // deleting the run must free its slots by itself, not by its Jobs going away.
  const del = await env.kubectl(["delete", "pipelinerun", "-n", NS, first.id, "--cascade=orphan"]);
  t.equal(del.code, 0, del.stderr);
  const job = await until("the next run's Job", async () => (await jobsOf(next.id))[0]);
  t.ok(job, "the waiting run starts once the deleted run's slots are free");
  t.equal((await jobsOf(first.id)).length, 5, "while the deleted run's Jobs still exist");
  // Then the default cascade: the garbage collector deletes a run's Jobs with it.
  const del2 = await env.kubectl(["delete", "pipelinerun", "-n", NS, next.id]);
  t.equal(del2.code, 0, del2.stderr);
  await until("the garbage collector deleted the run's Job", () => jobsSeen.deletedAt(job.metadata.name));
  await client.request("DELETE", paths.jobs(NS), { query: { labelSelector: `operon.dev/run=${first.id}`, propagationPolicy: "Background" } });
});

t.test("a completed step whose Job is deleted mid-run (TTL garbage collection) is not run again", async (t) => {
  const h = await org("gc-org");
  const chain = { id: "chain", inputs: [{ name: "bam", type: "file" }], steps: [step("a", "${bam}"), step("b", "${a.outputFile}", ["a"]), step("c", "${b.outputFile}", ["b"])] };
  const run = await submit(h, chain);
  const a = await until("job a", async () => (await jobsOf(run.id)).find((j) => stepOf(j) === "a"));
  finish(a);
  const b = await until("job b", async () => (await jobsOf(run.id)).find((j) => stepOf(j) === "b"));
  // What ttlSecondsAfterFinished does to a's Job while the run goes on (the real TTL
  // controller runs, but the operator's TTL is a day: the test deletes it as it would).
  await client.request("DELETE", `${paths.jobs(NS)}/${a.metadata.name}`, { query: { propagationPolicy: "Background" } });
  await until("the operator to stop seeing a's Job", async () => ((await operator.executor()?.observe(run.id))?.get("a") === undefined ? true : undefined));
  finish(b);
  const c = await until("job c", async () => (await jobsOf(run.id)).find((j) => stepOf(j) === "c"));
  finish(c);
  const done = await until("run completed", async () => { const r = await getRun(h, run.id); return r.status === "completed" ? r : undefined; });
  t.same(done.steps.map((s) => s.status), ["completed", "completed", "completed"]);
  t.same((await jobsOf(run.id)).map((j) => j.metadata.name).sort(), [b.metadata.name, c.metadata.name].sort(), "no second Job for a");
  const pr = await client.request<{ status: { steps: Array<{ stepId: string; attempt?: number }> } }>("GET", `${paths.pipelineRuns(NS)}/${run.id}`);
  t.equal(pr.status.steps.find((s) => s.stepId === "a")?.attempt, 1, "a ran once");
});

/**
 * Step pods running per organization — created and neither Succeeded nor Failed, as the pod
 * watch reports them in revision order — and the most seen at once. A step's slot is free once
 * its pod has Succeeded (core/kubernetes/jobs.ts stepEnded), even before the Job controller
 * has written SuccessCriteriaMet: the limit is on what runs.
 */
async function trackActiveJobs(orgs: string[]): Promise<{ now(org: string): number; max(org: string): number; stop(): void }> {
  const activeNow = new Map<string, Set<string>>(orgs.map((o) => [o, new Set<string>()]));
  const most = new Map<string, number>();
  const informer: Informer<KubeObject & { status?: { phase?: string } }> = new Informer({
    client, path: paths.pods(NS), labelSelector: "operon.dev/run",
    onChange: (pod) => {
      const set = activeNow.get(pod.metadata.labels?.["operon.dev/org"] ?? "");
      if (!set) return;
      const ended = informer.get(pod.metadata.name) === undefined || pod.status?.phase === "Succeeded" || pod.status?.phase === "Failed";
      if (ended) set.delete(pod.metadata.name); else set.add(pod.metadata.name);
      for (const [o, s] of activeNow) most.set(o, Math.max(most.get(o) ?? 0, s.size));
    },
  });
  await informer.start();
  return { now: (o) => activeNow.get(o)?.size ?? 0, max: (o) => most.get(o) ?? 0, stop: () => informer.stop() };
}
