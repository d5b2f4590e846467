/**
 * The Kubernetes Job executor on the real control plane: the Job controller creates each
 * Job's pod, the scheduler binds it to the test kubelet's node (test/support/pod-runner.ts),
 * which runs it for real — `operon stage-in` and `stage-out` from this repository with a local
 * object store, the tool a shell printing its log and writing its output — and serves the
 * containers' logs through `pods/log`; the Job controller writes the Jobs' conditions. A tool
 * image under `registry.invalid/` cannot be pulled (the kubelet's registry answer, set by this
 * test): that pod waits ImagePullBackOff. `observe(run)`, the reconciler's read path, has no
 * side effects: across many calls, for a run whose Job ended (its log not copied yet) and one
 * whose pod cannot pull its image (its Job not stopped yet), it sends no write to the API
 * server and none to object storage. Those writes happen on the watch side, once: the Job is
 * stopped and the log copied when the informers report the change (or, at start-up, once the
 * engine runs), the last step's log too although its run finishes at once; nothing is written
 * or kept for the Jobs of runs that had finished before start-up, and what is kept for a run
 * goes with it (or with its Job).
 */
import t, { type Test as Tap } from "tap";
import { AsyncLocalStorage } from "node:async_hooks";
import { chmodSync, copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createKubeClient, paths, type KubeClient } from "../../adapters/kubernetes/client.js";
import { createJobExecutor, type KubeJobExecutor } from "../../adapters/kubernetes/job-executor.js";
import { createLocalObjectStore } from "../../adapters/local/object-store.js";
import { buildJob, jobActive, type JobObject, type PodObject } from "../../core/kubernetes/jobs.js";
import { ANNOTATION } from "../../core/kubernetes/pipelinerun.js";
import type { ObjectStore, ObservedStepState, StepTask } from "../../core/ports.js";
import { defaultCatalogue } from "../../core/tools/index.js";
import { startTestEnv } from "../support/k8s-env.js";
import { startNode } from "../support/pod-runner.js";
import { sleep, until } from "../support/wait.js";

const NS = "job-executor";
const IMAGE = "operon:test";
const repo = fileURLToPath(new URL("../..", import.meta.url));
const env = await startTestEnv({ minio: false });
t.teardown(() => env.stop());
await env.createNamespace(NS);
/** The test's own client: what it writes (as an earlier leader) is not counted. */
const admin = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: NS });
t.teardown(() => admin.close());
// The object store: a local one, shared by the executors (in this process) and the step pods' helpers (uid 1000).
const root = mkdtempSync(join(tmpdir(), "operon-job-executor-"));
chmodSync(root, 0o777);
t.teardown(() => rmSync(root, { recursive: true, force: true }));
const base = createLocalObjectStore({ root, publicUrl: "http://localhost", signingSecret: "s".repeat(40) });
const storageEnv = { OPERON_MODE: "cluster", OPERON_STORAGE: "local", OPERON_DATA_DIR: root };
// The operon image's entry point: this repository's CLI, run by a copy of this Node.js that the
// pods' user (uid 1000) can run wherever this one lives (e.g. under root's home).
const bin = mkdtempSync(join(tmpdir(), "operon-job-executor-bin-"));
chmodSync(bin, 0o755);
copyFileSync(process.execPath, join(bin, "node"));
chmodSync(join(bin, "node"), 0o755);
t.teardown(() => rmSync(bin, { recursive: true, force: true }));
const node = await startNode(admin, {
  operonImage: IMAGE,
  operon: [join(bin, "node"), "--import", import.meta.resolve("tsx"), join(repo, "cli/main.ts")],
  pullImage: (image) => (image.startsWith("registry.invalid/") ? { message: `failed to resolve reference "${image}": not found` } : undefined),
});
t.teardown(() => node.stop());

/** Set while observe() runs: every write made in its async context (also one it leaves running) is its. */
const inObserve = new AsyncLocalStorage<true>();
interface Write { what: string; fromObserve: boolean }
/** Writes to the API server and to storage made by the executors under test. */
const apiWrites: Write[] = [];
const storeWrites: Write[] = [];
const note = (to: Write[], what: string) => to.push({ what, fromObserve: inObserve.getStore() === true });

/** A client of the executor's own: its writes() counter sees only the executor's writes, and each is noted. */
async function executorClient(t: Tap): Promise<KubeClient> {
  const c = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: NS });
  t.teardown(() => c.close());
  return {
    ...c,
    request: <T,>(method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE", path: string, init?: Parameters<KubeClient["request"]>[2]) => {
      if (method !== "GET") note(apiWrites, `${method} ${path}`);
      return c.request<T>(method, path, init);
    },
  };
}
const store: ObjectStore = {
  ...base,
  put: (key, body, o) => { note(storeWrites, `put ${key}`); return base.put(key, body, o); },
  delete: (key) => { note(storeWrites, `delete ${key}`); return base.delete(key); },
  describe: (key, info) => { note(storeWrites, `describe ${key}`); return base.describe(key, info); },
};

const errors: string[] = [];
/** An executor for one subtest (stopped at its end: two would both act on the same Jobs). */
function executor(t: Tap, client: KubeClient, runFinished: (id: string) => boolean): KubeJobExecutor {
  const ex = createJobExecutor({ client, namespace: NS, store, template: { image: IMAGE, storageEnv }, runFinished, onError: (e) => errors.push(String(e)) });
  t.teardown(() => ex.stop());
  return ex;
}

type Job = JobObject & { metadata: { name: string } };
const samtools = defaultCatalogue.get("samtools");
if (!samtools) throw new Error("no samtools in the catalogue");
const runRoot = (runId: string) => `orgs/acme/workspaces/ws1/pipelines/${runId}/`;
const TOOL_LOG = (runId: string) => `samtools depth of ${runId}\nline 2\n`;
/** A run's step: the tool prints TOOL_LOG and writes its output a.tsv; a `pull` run's tool image cannot be pulled. */
const task = (runId: string): StepTask => ({
  runId, organization: "acme", stepId: "a", attempt: 1, toolName: "samtools",
  invocation: { argv: ["sh", "-c", 'printf "samtools depth of %s\\nline 2\\n" "$1"; printf "chr1\\t1\\t3\\n" > a.tsv', "tool", runId], inputs: [], outputs: [{ path: "a.tsv", secondary: [] }], mkdirs: [] },
  workspaceRoot: "orgs/acme/workspaces/ws1/", runRoot: runRoot(runId), timeoutMs: 600_000,
  ...(runId.includes("pull") ? { pod: { image: "registry.invalid/samtools:gone", resources: { requests: { cpu: "100m", memory: "64Mi" }, limits: { memory: "256Mi" } } } } : {}),
});
const jobPath = (name: string) => `${paths.jobs(NS)}/${encodeURIComponent(name)}`;
const readJob = (name: string) => admin.request<Job>("GET", jobPath(name));
/** The Job as an earlier leader created it (buildJob, as submit does). */
async function createJob(runId: string): Promise<Job> {
  return admin.request<Job>("POST", paths.jobs(NS), { body: buildJob(task(runId), { namespace: NS, image: IMAGE, toolImage: samtools?.image ?? "", storageEnv }) });
}
async function jobOf(ex: KubeJobExecutor, runId: string): Promise<Job> {
  return until(`${runId}'s Job in the executor's cache`, () => ex.jobsOfRun(runId)[0]);
}
/** The Job's pod (the Job controller's), once there. */
async function podOf(job: Job): Promise<string> {
  return until(`${job.metadata.name}'s pod`, async () => (await admin.request<{ items: PodObject[] }>("GET", paths.pods(NS), { query: { labelSelector: `job-name=${job.metadata.name}` } })).items[0]?.metadata.name);
}
const pulling = (p: PodObject | undefined) => p?.status?.initContainerStatuses?.some((c) => c.name === "tool" && c.state?.waiting?.reason === "ImagePullBackOff") ?? false;
/** The Job has ended (the Job controller says Complete). */
const complete = (name: string) => until(`${name} Complete`, async () => (await readJob(name)).status?.conditions?.some((c) => c.type === "Complete" && c.status === "True") || undefined, 120_000);

async function text(key: string): Promise<string | undefined> {
  if (!(await base.head(key))) return undefined;
  const { body } = await base.get(key);
  let s = "";
  for await (const c of body) s += Buffer.from(c).toString("utf8");
  return s;
}
const logKey = (runId: string) => `${runRoot(runId)}logs/a.log`;
const observe = (ex: KubeJobExecutor, runId: string) => inObserve.run(true, () => ex.observe(runId));
const stepA = async (ex: KubeJobExecutor, runId: string): Promise<ObservedStepState | undefined> => (await observe(ex, runId)).get("a");
const fromObserve = () => [...apiWrites, ...storeWrites].filter((w) => w.fromObserve).map((w) => w.what);
const allZero = (sizes: object) => Object.values(sizes).every((v) => v === 0);

/** Runs finished as far as the executors are told (the run store's view). */
const finishedRuns = new Set<string>();

t.test("observe writes nothing; the watch side stops the Job and copies the log once the engine runs", async (t) => {
  const client = await executorClient(t);
  const ex = executor(t, client, (id) => finishedRuns.has(id));
  await ex.start();
  // Jobs of an earlier leader: one ended (its log not copied yet), one whose image cannot be pulled (not stopped yet).
  const ended = await createJob("run-ended");
  const pull = await createJob("run-pull");
  await complete(ended.metadata.name);
  const endedPod = await podOf(ended);
  const pullPod = await podOf(pull);
  await until("the Jobs and pods, as the kubelet and the Job controller left them, in the executor's caches", () => {
    const e = ex.jobs.get(ended.metadata.name);
    return ex.pods.get(endedPod)?.status?.phase === "Succeeded" && pulling(ex.pods.get(pullPod)) && e && !jobActive(e);
  }, 120_000);

  // The engine has not started yet (its run store may not have synced): the watch side waits.
  const apiBefore = client.writes();
  const storeBefore = storeWrites.length;
  for (let i = 0; i < 50; i++) {
    const [e, p] = await Promise.all([stepA(ex, "run-ended"), stepA(ex, "run-pull")]);
    if (i > 0) continue;
    t.equal(e?.phase, "completed", "the ended run's step is completed");
    t.same(e?.outputs?.map((o) => o.filename), ["a.tsv"], "with the outputs stage-out reported");
    t.equal(p?.phase, "failed", "the other's step failed");
    t.match(p?.message, /container tool \(image .*\) cannot start: ImagePullBackOff/, "saying why");
  }
  await Promise.all(Array.from({ length: 50 }, (_, i) => stepA(ex, i % 2 ? "run-ended" : "run-pull")));
  await sleep(300); // anything observe left running would have been sent by now
  t.equal(client.writes() - apiBefore, 0, "150 observe() calls: no write to the API server");
  t.equal(storeWrites.length - storeBefore, 0, "and none to storage");
  t.notOk((await readJob(pull.metadata.name)).metadata.annotations?.[ANNOTATION.stopped], "the Job that cannot start is not stopped by observe");
  t.equal(await text(logKey("run-ended")), undefined, "the ended step's log is not copied by observe");

  // The engine starts (it primes its ledger first): the watch side acts on what it was told.
  ex.engineStarted();
  const stopped = await until("the Job stopped", async () => { const j = await readJob(pull.metadata.name); return j.metadata.annotations?.[ANNOTATION.stopped] ? j : undefined; });
  t.equal(stopped.metadata.annotations?.[ANNOTATION.stopped], "failed");
  t.match(stopped.metadata.annotations?.[ANNOTATION.stoppedMessage], /cannot start: ImagePullBackOff/, "with the pod's reason");
  t.equal((stopped.spec as { suspend?: boolean } | undefined)?.suspend, true, "and suspended");
  t.equal(await until("the log copied", () => text(logKey("run-ended"))), TOOL_LOG("run-ended"), "the tool's log, read through pods/log, is in the run folder");
  t.ok(node.requests.includes(`/containerLogs/${NS}/${endedPod}/tool`), "from the kubelet of the pod's node");
  for (let i = 0; i < 20; i++) await Promise.all([stepA(ex, "run-ended"), stepA(ex, "run-pull")]);
  await sleep(300);
  t.same(apiWrites.map((w) => w.what), [`PATCH ${jobPath(pull.metadata.name)}`], "one write to the API: the stop");
  t.same(storeWrites.map((w) => w.what), [`put ${logKey("run-ended")}`], "one to storage: the log, once");
  t.same(fromObserve(), [], "none of them from observe");
  const p = await stepA(ex, "run-pull");
  t.equal(p?.phase, "failed", "the stopped step still reads failed");
  t.match(p?.message, /cannot start: ImagePullBackOff/);
  t.same(errors, [], "no errors");
  for (const id of ["run-ended", "run-pull"]) { finishedRuns.add(id); ex.forgetRun(id); }
  t.ok(allZero(ex.cacheSizes()), `nothing kept once the runs are forgotten: ${JSON.stringify(ex.cacheSizes())}`);
});

t.test("while observe is polled all along, the watch stops and copies as changes arrive; the last step's log although its run finishes at once", async (t) => {
  apiWrites.length = 0;
  storeWrites.length = 0;
  const client = await executorClient(t);
  const ex = executor(t, client, (id) => finishedRuns.has(id));
  await ex.start();
  ex.engineStarted();
  const runs = ["run-live-pull", "run-last"];
  // The engine: it finishes run-last as soon as it sees its (only, last) step completed, which is
  // when the step's pod has Succeeded (before the Job controller marks the Job).
  ex.watch((id) => {
    if (id !== "run-last" || finishedRuns.has(id)) return;
    void stepA(ex, id).then((a) => { if (a?.phase === "completed" && !finishedRuns.has(id)) { finishedRuns.add(id); ex.forgetRun(id); } });
  });
  let polling = true;
  let observations = 0;
  const poller = (async () => {
    while (polling) {
      for (const id of runs) { await observe(ex, id); observations++; }
      await sleep(1);
    }
  })();
  for (const id of runs) await ex.submit(task(id));
  const pull = await jobOf(ex, "run-live-pull");
  await until("the Job stopped", async () => (await readJob(pull.metadata.name)).metadata.annotations?.[ANNOTATION.stopped], 120_000);
  t.equal(await until("the last step's log copied", () => text(logKey("run-last")), 120_000), TOOL_LOG("run-last"), "the last step's log is copied");
  t.ok(finishedRuns.has("run-last"), "although its run finished (and was forgotten) right after the step completed");
  await sleep(500);
  polling = false;
  await poller;
  t.ok(observations > 50, `observe was called all along (${observations} times)`);
  t.same(fromObserve(), [], "no write from observe");
  t.same(apiWrites.map((w) => w.what).sort(), [`POST ${paths.jobs(NS)}`, `POST ${paths.jobs(NS)}`, `PATCH ${jobPath(pull.metadata.name)}`].sort(), "the API saw the two creates and one stop");
  t.same(storeWrites.map((w) => w.what), [`put ${logKey("run-last")}`], "storage saw the one log copy");
  t.same(errors, [], "no errors");
  finishedRuns.add("run-live-pull");
  ex.forgetRun("run-live-pull");
  t.ok(allZero(ex.cacheSizes()), `nothing kept once the runs are forgotten: ${JSON.stringify(ex.cacheSizes())}`);
});

t.test("start-up: nothing is written or kept for the Jobs of finished runs; an unfinished run's ended step gets its log; a deleted Job leaves nothing", async (t) => {
  apiWrites.length = 0;
  storeWrites.length = 0;
  // A run whose last step ended while no operator ran.
  const offline = await createJob("run-offline");
  await complete(offline.metadata.name);
  await base.delete(logKey("run-ended")); // were it copied again, it would be back
  // As the operator's: until the run store has synced, no run is known to have finished.
  let synced = false;
  const client = await executorClient(t);
  const ex = executor(t, client, (id) => synced && finishedRuns.has(id));
  await ex.start();
  t.ok(ex.cacheSizes().handles >= 5, `the first list reported every Job (${ex.cacheSizes().handles} indexed before the run store synced)`);
  await sleep(500);
  t.same([...apiWrites, ...storeWrites], [], "nothing written before the engine runs");
  synced = true;
  ex.engineStarted();
  t.equal(await until("the unfinished run's log copied", () => text(logKey("run-offline"))), TOOL_LOG("run-offline"));
  await sleep(500);
  t.same(storeWrites.map((w) => w.what), [`put ${logKey("run-offline")}`], "only its log: none of a finished run's copied again");
  t.same(apiWrites, [], "no write to the API (the finished runs' Jobs are left alone)");
  t.same(ex.cacheSizes().handles, 1, "only the unfinished run's Job is kept");
  t.same(ex.jobsOfRun("run-ended"), [], "a finished run's Jobs are not indexed");
  const o = await stepA(ex, "run-offline");
  t.equal(o?.phase, "completed");
  // (Background, as the janitor deletes: the garbage collector then deletes its pod.)
  await admin.request("DELETE", jobPath(offline.metadata.name), { body: { apiVersion: "v1", kind: "DeleteOptions", propagationPolicy: "Background" } });
  const sizes = await until("the deleted Job's handle dropped", () => (allZero(ex.cacheSizes()) ? ex.cacheSizes() : undefined)).catch(() => ex.cacheSizes());
  t.ok(allZero(sizes), `nothing kept once the Job is deleted: ${JSON.stringify(sizes)}`);
  t.same(errors, [], "no errors");
});
