/**
 * Failure drills, the control plane (issue 18), on the full test control plane (the real Job
 * controller, scheduler and kwok nodes; stage-out by job-sim.ts `startStageOut`), its API
 * server started with `--watch-cache=false` so that a watch from a compacted resourceVersion
 * gets 410 Gone from etcd itself:
 *  - the operator's leader killed (SIGKILL, `operon operator` processes) mid-burst of runs over
 *    several organizations: the standby takes over; no duplicate Job, no lost run, and never
 *    more Jobs of an organization active than its limit at any revision of the Jobs' history;
 *  - kube-apiserver restarted mid-run, gracefully and killed: the run completes;
 *  - etcd compacted past the operator's watches: they resume from a compacted
 *    resourceVersion, get 410 Gone, relist, and the run goes on with nothing missed.
 */
import t from "tap";
import type { Test } from "tap";
import { parseConfig, type Config } from "../../core/config.js";
import { jobActive, jobEnded, podSucceeded, type JobObject } from "../../core/kubernetes/jobs.js";
import { RunManifestSchema } from "../../core/manifest.js";
import type { ObjectStore, RunRecord } from "../../core/ports.js";
import { createApiServerClusterEngine, createStore } from "../../wiring/runtime.js";
import { startOperator, type Operator } from "../../operator/cluster.js";
import { createKubeClient, paths, type KubeClient } from "../../adapters/kubernetes/client.js";
import { Informer, type KubeObject } from "../../adapters/kubernetes/informer.js";
import { startStageOut, type StageOut, type StageOutDecision } from "../support/job-sim.js";
import { startTestEnv } from "../support/k8s-env.js";
import { startOperatorProcess } from "../support/operator-process.js";
import { record, type Recorder } from "../support/recorder.js";
import { until } from "../support/wait.js";

type Job = JobObject & KubeObject;
type Pod = KubeObject & { spec?: { nodeName?: string }; status?: { phase?: string } };

const env = await startTestEnv({ kwokNodes: 2, apiserverArgs: ["--watch-cache=false"] });
t.teardown(() => env.stop());

/** A namespace with the api-server's engine, the stage-out stand-in (steps held per `gates`) and a recorder of its Jobs. */
async function setup(t: Test, ns: string, extra: Record<string, string> = {}) {
  await env.createNamespace(ns);
  const parsed = parseConfig({ ...env.env, OPERON_MODE: "cluster", OPERON_NAMESPACE: ns, OPERON_SIGNING_SECRET: "s".repeat(40), PORT: "0", ...extra });
  if (!parsed.ok) throw new Error(parsed.message);
  const config: Config = parsed.config;
  const store: ObjectStore = await createStore(config, "");
  const client = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: ns });
  const logs: string[] = [];
  const log = (m: string) => { logs.push(`${new Date().toISOString()} ${m}`); };
  const api = await createApiServerClusterEngine(config, store, { kubeconfig: env.kubeconfigPath, log });
  const jobsSeen: Recorder<Job> = await record<Job>(client, paths.jobs(ns), "operon.dev/run");
  /** "<run>/<step>" of the steps whose pods are held until released. */
  const gates = new Set<string>();
  const decide = (pod: Pod, job: Job): StageOutDecision => gates.has(`${pod.metadata.labels?.["operon.dev/run"]}/${job.metadata.annotations?.["operon.dev/step-id"]}`) ? { action: "hold" } : { action: "succeed" };
  const stageOut: StageOut = await startStageOut({ client, namespace: ns, store, decide, onError: (e) => log(`stage-out: ${String(e)}`) });
  t.teardown(async () => { await stageOut.stop(); jobsSeen.stop(); await api.stop(); client.close(); });
  const step = (stepId: string, input: string, dependsOn?: string[]) => ({ stepId, toolName: "samtools", ...(dependsOn ? { dependsOn } : {}), parameters: { command: "depth", inputFile: input, outputFile: `${stepId}.tsv` } });
  const orgsReady = new Set<string>();
  const submit = async (organization: string, steps: unknown[]) => {
    if (!orgsReady.has(organization)) { await store.put(`orgs/${organization}/workspaces/ws1/in.bam`, "bam"); orgsReady.add(organization); }
    const r = await api.engine.submit({ organization, workspace: "ws1", keyId: "k", source: { kind: "inline" }, input: { bam: "in.bam" }, spec: { id: "drill", inputs: [{ name: "bam", type: "file" }], steps } });
    if (!r.ok) throw new Error(`submit: ${r.error.message}`);
    return r.run.id;
  };
  const chain = (...ids: string[]) => ids.map((id, i) => step(id, i === 0 ? "${bam}" : `\${${ids[i - 1]}.outputFile}`, i === 0 ? undefined : [ids[i - 1] as string]));
  const finished = (id: string, timeoutMs = 60_000) => until(`run ${id} to end`, async () => {
    const r = await api.engine.runs.get(id);
    return r && ["completed", "failed", "cancelled"].includes(r.status) ? r : undefined;
  }, timeoutMs).catch((e: unknown) => { throw new Error(`${String(e)}\n${logs.slice(-30).join("\n")}`); }) as Promise<RunRecord>;
  /** The held pod of a gated step, once bound to a node. */
  const heldPod = (runId: string, stepId: string) => until(`the held pod of ${runId}/${stepId}`, async () => {
    for (const name of stageOut.held()) {
      const pod = await client.request<Pod>("GET", `${paths.pods(ns)}/${name}`).catch(() => undefined);
      if (pod?.metadata.labels?.["operon.dev/run"] === runId && pod.metadata.labels["operon.dev/step"] === stepId) return pod;
    }
    return undefined;
  }, 60_000);
  const release = (runId: string, stepId: string) => { gates.delete(`${runId}/${stepId}`); stageOut.release(); };
  /** Done once, on both sides: completed at attempt 1 in the run, run.json and the PipelineRun; one Job per step, never another. */
  const completedOnce = async (t: Test, id: string, stepIds: string[]) => {
    const run = await finished(id, 10_000);
    t.equal(run.status, "completed", `run ${id} completed: ${run.error ?? ""}`);
    t.same(run.steps.map((s) => [s.stepId, s.status, s.attempt]), stepIds.map((s) => [s, "completed", 1]), "every step completed at its first attempt");
    const { body } = await store.get(`orgs/${run.organization}/workspaces/ws1/${run.outputFolder}/run.json`);
    let text = "";
    for await (const c of body) text += Buffer.from(c).toString("utf8");
    const m = RunManifestSchema.parse(JSON.parse(text));
    t.same([m.status, ...m.steps.map((s) => [s.stepId, s.attempt, s.taskDefinitionArn])], ["completed", ...stepIds.map((s) => [s, 1, `${id}-${s}-1`])], "run.json: completed, each step once, attempt 1, its one Job");
    const pr = await client.request<{ status: { phase?: string } }>("GET", `${paths.pipelineRuns(ns)}/${id}`);
    t.equal(pr.status.phase, "completed", "the PipelineRun's status: completed");
    const jobs = jobsSeen.names().filter((n) => jobsSeen.last(n)?.metadata.labels?.["operon.dev/run"] === id).sort();
    t.same(jobs, stepIds.map((s) => `${id}-${s}-1`).sort(), "Kubernetes: one Job per step, no other ever created");
    // The run's last step completed when its pod Succeeded; the Job controller marks the Job Complete after.
    t.ok(await until("each Job Complete", () => jobs.every((n) => jobsSeen.last(n)?.status?.conditions?.some((c) => c.type === "Complete" && c.status === "True")), 30_000), "each Job Complete");
    return run;
  };
  return { ns, config, store, client, api, logs, log, gates, stageOut, jobsSeen, submit, chain, finished, heldPod, release, completedOnce };
}

// ---------------------------------------------------------------------------------------------

/** `operon operator` as a separate process, with the environment a Deployment would give it. */
const operatorProcess = (namespace: string, identity: string, extra: Record<string, string>) => startOperatorProcess(t, env, { namespace, identity, env: extra });

/**
 * The most step Jobs and pods of each organization at once, over every revision the watches
 * delivered (in order, without a relist: checked). A step holds its organization's slot until
 * its outcome is decided — its pod Succeeded, or the Job says SuccessCriteriaMet / FailureTarget
 * (its pod has ended, or is being terminated): the ledger's rule (core/kubernetes/jobs.ts
 * stepEnded) — and its Job counts as not finished until Complete / Failed; a pod runs until
 * Succeeded / Failed. Steps whose outcome is open ("undecided") need both streams: their
 * events are replayed in etcd revision order (one revision counter for Jobs and pods).
 */
async function watchPerOrg(client: KubeClient, ns: string) {
  const counters = { unfinished: new Map<string, Set<string>>(), pods: new Map<string, Set<string>>() };
  const max = { unfinished: new Map<string, number>(), pods: new Map<string, number>() };
  let outOfOrder = false;
  const lastRv = { jobs: 0, pods: 0 };
  const count = (kind: keyof typeof counters, org: string, name: string, live: boolean) => {
    const set = counters[kind].get(org) ?? new Set<string>();
    counters[kind].set(org, set);
    if (live) set.add(name); else set.delete(name);
    max[kind].set(org, Math.max(max[kind].get(org) ?? 0, set.size));
  };
  const inOrder = (kind: "jobs" | "pods", rv: number) => { if (rv < lastRv[kind]) outOfOrder = true; lastRv[kind] = Math.max(lastRv[kind], rv); };
  /** Every Job and pod revision seen: [revision, org, Job name, Job's outcome decided / pod Succeeded, still exists]. */
  const history: Array<{ rv: number; kind: "job" | "pod"; org: string; job: string; decided: boolean; exists: boolean }> = [];
  /** The most steps of each organization with an open outcome at any revision (stepEnded, replayed in revision order). */
  const undecidedMax = (): Map<string, number> => {
    const jobOpen = new Map<string, { org: string; open: boolean }>();
    const podDone = new Set<string>();
    const out = new Map<string, number>();
    for (const e of [...history].sort((a, b) => a.rv - b.rv)) {
      if (e.kind === "pod") { if (e.decided) podDone.add(e.job); } else jobOpen.set(e.job, { org: e.org, open: e.exists && !e.decided });
      const n = [...jobOpen].filter(([name, j]) => j.org === e.org && j.open && !podDone.has(name)).length;
      out.set(e.org, Math.max(out.get(e.org) ?? 0, n));
    }
    return out;
  };
  const jobs: Informer<Job> = new Informer<Job>({
    client, path: paths.jobs(ns), labelSelector: "operon.dev/run",
    onChange: (job) => {
      inOrder("jobs", Number(job.metadata.resourceVersion));
      const org = job.metadata.annotations?.["operon.dev/organization"] ?? "";
      const exists = jobs.get(job.metadata.name) !== undefined;
      count("unfinished", org, job.metadata.name, exists && !job.status?.conditions?.some((c) => c.status === "True" && (c.type === "Complete" || c.type === "Failed")));
      history.push({ rv: Number(job.metadata.resourceVersion), kind: "job", org, job: job.metadata.name, decided: jobEnded(job), exists });
    },
  });
  const pods: Informer<Pod> = new Informer<Pod>({
    client, path: paths.pods(ns), labelSelector: "operon.dev/run",
    onChange: (pod) => {
      inOrder("pods", Number(pod.metadata.resourceVersion));
      const exists = pods.get(pod.metadata.name) !== undefined;
      count("pods", pod.metadata.labels?.["operon.dev/org"] ?? "", pod.metadata.name, exists && pod.status?.phase !== "Succeeded" && pod.status?.phase !== "Failed");
      const job = pod.metadata.labels?.["batch.kubernetes.io/job-name"];
      if (job) history.push({ rv: Number(pod.metadata.resourceVersion), kind: "pod", org: pod.metadata.labels?.["operon.dev/org"] ?? "", job, decided: podSucceeded(pod), exists });
    },
  });
  await Promise.all([jobs.start(), pods.start()]);
  return { max, undecidedMax, relists: () => jobs.relists + pods.relists, outOfOrder: () => outOfOrder, stop: () => { jobs.stop(); pods.stop(); } };
}

t.test("the leader killed mid-burst: the standby takes over; no duplicate Job, no lost run, never over an organization's limit", async (t) => {
  const LIMIT = 3;
  const s = await setup(t, "burst", { OPERON_ORG_CONCURRENCY: String(LIMIT) });
  const watch = await watchPerOrg(s.client, s.ns);
  t.teardown(() => watch.stop());
  const knobs = { OPERON_LEASE_DURATION_SECONDS: "4", OPERON_ORG_CONCURRENCY: String(LIMIT) };
  const x = await operatorProcess(s.ns, "replica-x", knobs);
  const y = await operatorProcess(s.ns, "replica-y", knobs);
  const lease = async () => (await s.client.request<{ spec: { holderIdentity?: string } }>("GET", `${paths.leases(s.ns)}/operon-operator`).catch(() => undefined))?.spec.holderIdentity;
  const holder = await until("a Lease holder", lease, 30_000);
  const [leader, standby] = holder === x.identity ? [x, y] : [y, x];

  // 4 organizations × 5 runs of a → b: 40 Jobs, 10 per organization for 3 slots each.
  const orgs = ["org-1", "org-2", "org-3", "org-4"];
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) for (const o of orgs) ids.push(await s.submit(o, s.chain("a", "b")));
  await until("a third of the Jobs created", () => s.jobsSeen.names().length >= 14, 60_000);
  leader.child.kill("SIGKILL");
  await leader.exited;
  const killedAt = Date.now();
  const createdBefore = s.jobsSeen.names().length;
  t.comment(`leader ${leader.identity} killed with ${createdBefore} of 40 Jobs created`);
  // The dominant wait: the Lease expiring (4 s) before the standby takes it.
  await until("the standby takes the Lease", async () => (await lease()) === standby.identity, 30_000);
  t.comment(`${standby.identity} took over ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the kill`);
  for (const id of ids) await s.finished(id, 120_000);

  const runs = await Promise.all(ids.map((id) => s.api.engine.runs.get(id)));
  t.same(runs.map((r) => r?.status), ids.map(() => "completed"), "no lost run: all 20 completed");
  t.ok(runs.every((r) => r?.steps.every((st) => st.attempt === 1)), "every step ran at its first attempt");
  const names = s.jobsSeen.names();
  t.equal(names.length, 40, "40 Jobs: one per step");
  const keys = names.map((n) => { const a = s.jobsSeen.last(n)?.metadata.annotations ?? {}; return `${a["operon.dev/run-id"]}/${a["operon.dev/step-id"]}/${a["operon.dev/attempt"]}`; });
  t.equal(new Set(keys).size, 40, "no step has two Jobs");
  t.ok(keys.every((k) => k.endsWith("/1")), "every Job is attempt 1");
  const by = (who: string) => names.filter((n) => s.jobsSeen.last(n)?.metadata.annotations?.["operon.dev/created-by"] === who).length;
  t.ok(by(leader.identity) > 0 && by(standby.identity) > 0, `Jobs created by both: ${by(leader.identity)} by the killed leader, ${by(standby.identity)} after the takeover`);
  t.equal(by(leader.identity) + by(standby.identity), 40);
  t.notOk(watch.outOfOrder(), "the watches delivered the Jobs' and pods' histories in revision order");
  t.equal(watch.relists(), 2, "and without a gap (no relist after the first list)");
  const undecidedMax = watch.undecidedMax();
  for (const o of orgs) {
    const [undecided, pods, unfinished] = [undecidedMax.get(o) ?? 0, watch.max.pods.get(o) ?? 0, watch.max.unfinished.get(o) ?? 0];
    t.ok(undecided <= LIMIT, `${o}: at most ${LIMIT} steps whose outcome is open at any revision (saw ${undecided})`);
    t.ok(pods <= LIMIT, `${o}: at most ${LIMIT} step pods not ended at any revision (saw ${pods})`);
    t.comment(`${o}: at most ${unfinished} Jobs not yet Complete/Failed at once (a Job keeps that status briefly after its pod succeeded)`);
  }
  t.ok(orgs.some((o) => undecidedMax.get(o) === LIMIT), "the limit was reached (the burst saturated the organizations)");
  standby.child.kill("SIGTERM");
  t.equal(await standby.exited, 0, "the new leader stops cleanly");
});

// ---------------------------------------------------------------------------------------------
// One in-process operator for the last two drills: its informers are in reach (relists, errors).

let operator: Operator | undefined;
async function inProcessOperator(t: Test, s: Awaited<ReturnType<typeof setup>>): Promise<Operator> {
  // The server ends each watch after 0.6 × watchQuietMs (3 s): the informers resume from their
  // last resourceVersion that often.
  operator = await startOperator(s.config, s.store, { kubeconfig: env.kubeconfigPath, log: (m) => s.log(`operator: ${m}`), listen: false, identity: "drill-op", tuning: { watchQuietMs: 5000 } });
  t.teardown(() => operator?.stop());
  await until("the operator leads", () => operator?.engine(), 30_000);
  return operator;
}

t.test("kube-apiserver restarted mid-run, gracefully then killed: the operator's informers recover and the run completes once", async (t) => {
  const s = await setup(t, "restart", { OPERON_LEASE_DURATION_SECONDS: "4" });
  const op = await inProcessOperator(t, s);
  const id = await s.submit("lab", s.chain("a", "b", "c"));
  s.gates.add(`${id}/a`);
  s.gates.add(`${id}/b`);
  await s.heldPod(id, "a");
  const terms0 = op.terms();
  // The dominant waits: the restarts themselves (8–10 s graceful, 3–5 s killed) and the
  // informers' back-off while the API server is down.
  await env.restartApiserver();
  s.release(id, "a");
  await s.heldPod(id, "b");
  t.equal((await s.api.engine.runs.get(id))?.steps.find((x) => x.stepId === "a")?.status, "completed", "a, released after the graceful restart, was seen completed");
  await env.restartApiserver({ crash: true });
  s.release(id, "b");
  await s.finished(id);
  await s.completedOnce(t, id, ["a", "b", "c"]);
  t.comment(`operator terms: ${terms0} before, ${op.terms()} after (a term ends when the Lease cannot be renewed in time)`);
  t.ok(s.logs.some((l) => /informer: /.test(l)), "the operator's informers saw the API server go (and came back: the run completed)");
});

t.test("etcd compacted past the operator's watches: they get 410 Gone, relist, and the run goes on with nothing missed", async (t) => {
  const s = await setup(t, "compaction", { OPERON_LEASE_DURATION_SECONDS: "4" });
  await operator?.stop();
  const op = await inProcessOperator(t, s);
  const id = await s.submit("lab", s.chain("a", "b"));
  s.gates.add(`${id}/a`);
  const held = await s.heldPod(id, "a");
  const executor = await until("the executor", () => op.executor());
  const before = { jobs: executor.jobs.relists, pods: executor.pods.relists };
  // While a is held nothing changes in the step Jobs and pods: the operator's watches of them
  // rest at an old resourceVersion. Compact etcd past it (other writes move the revision on);
  // the next resume (every 3 s) starts from a compacted revision. Compact again if a change
  // of the watched objects slipped in between (its watch would then resume from after it).
  let compactedAt = 0;
  const logsBefore = s.logs.length;
  await until("both informers relisted after a 410", async () => {
    if (executor.jobs.relists > before.jobs && executor.pods.relists > before.pods) return true;
    if (Date.now() - compactedAt > 4000) {
      await s.client.request("POST", `/api/v1/namespaces/${s.ns}/configmaps`, { body: { apiVersion: "v1", kind: "ConfigMap", metadata: { generateName: "bump-" } } });
      await env.compactEtcd();
      compactedAt = Date.now();
    }
    return false;
  }, 40_000, 200);
  const after = s.logs.slice(logsBefore);
  t.ok(after.some((l) => /informer: .*(resourceVersion .* is too old|too old resource version|410)/i.test(l)), `the operator logged the 410: ${after.filter((l) => /informer/.test(l)).slice(0, 3).join(" | ")}`);
  t.ok(executor.jobs.relists > before.jobs, `the Job informer relisted (${before.jobs} → ${executor.jobs.relists})`);
  t.ok(executor.pods.relists > before.pods, `the pod informer relisted (${before.pods} → ${executor.pods.relists})`);
  t.equal(op.executor(), executor, "in the same term: the informers recovered by themselves");
  // Nothing missed: the relisted caches hold what the API holds, and changes after the relist arrive.
  const listed = await s.client.request<{ items: Job[] }>("GET", paths.jobs(s.ns), { query: { labelSelector: "operon.dev/run" } });
  t.same(executor.jobs.list().map((j) => `${j.metadata.name}@${j.metadata.resourceVersion}`).sort(), listed.items.map((j) => `${j.metadata.name}@${j.metadata.resourceVersion}`).sort(), "the Job cache is the API's list");
  t.ok(executor.pods.get(held.metadata.name), "the held pod is in the pod cache");
  t.ok(jobActive(executor.jobs.get(`${id}-a-1`) as Job), "and a's Job active");
  s.release(id, "a");
  await s.finished(id);
  await s.completedOnce(t, id, ["a", "b"]);
});
