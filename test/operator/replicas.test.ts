/**
 * The operator as real processes (`operon operator`) against a real control plane (the Job
 * controller creates the step pods, kwok runs them; the stage-out stand-in of
 * test/support/job-sim.ts uploads their outputs, or holds a pod while its step should run): killed
 * (SIGKILL) and restarted mid-run it creates no duplicate Job, keeps the per-organization
 * limit from the live Jobs, and finishes the run; of two replicas only the Lease holder
 * acts, and the other takes over when the holder dies.
 */
import t from "tap";
import { parseConfig } from "../../core/config.js";
import type { JobObject } from "../../core/kubernetes/jobs.js";
import { createStore } from "../../wiring/runtime.js";
import { createApiServerClusterEngine } from "../../wiring/runtime.js";
import { createKubeClient, paths, type KubeClient } from "../../adapters/kubernetes/client.js";
import { startStageOut, type StageOutDecision } from "../support/job-sim.js";
import { startTestEnv } from "../support/k8s-env.js";
import { sampleValue } from "../support/metrics.js";
import { startOperatorProcess, type OperatorProcess } from "../support/operator-process.js";
import { until } from "../support/wait.js";

const env = await startTestEnv({ kwokNodes: 1 });
t.teardown(() => env.stop());

/** `operon operator` as a separate process, with the environment a Deployment would give it. */
const operatorProcess = (namespace: string, identity: string) => startOperatorProcess(t, env, { namespace, identity, env: { OPERON_LEASE_DURATION_SECONDS: "2", OPERON_ORG_CONCURRENCY: "5" } });

async function isLeader(p: OperatorProcess): Promise<boolean> {
  const m = await (await fetch(`http://127.0.0.1:${p.port}/metrics`)).text();
  return /^operon_operator_leader 1$/m.test(m);
}

type Job = JobObject & { metadata: { name: string } };
async function jobs(client: KubeClient, ns: string, selector = "operon.dev/run"): Promise<Job[]> {
  return (await client.request<{ items: Job[] }>("GET", paths.jobs(ns), { query: { labelSelector: selector } })).items;
}
const stepOf = (j: Job) => j.metadata.annotations?.["operon.dev/step-id"] ?? "?";
const active = (j: Job) => !j.status?.conditions?.some((c) => c.status === "True" && (c.type === "Complete" || c.type === "Failed"));

/** `hold`: a step pod waits (its step runs) until `finish`; otherwise every pod succeeds at once. */
async function setup(ns: string, opts: { hold?: boolean } = {}) {
  await env.createNamespace(ns);
  const c = parseConfig({ ...env.env, OPERON_MODE: "cluster", OPERON_NAMESPACE: ns, PORT: "0" });
  if (!c.ok) throw new Error(c.message);
  const store = await createStore(c.config, "");
  const client = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: ns });
  const api = await createApiServerClusterEngine(c.config, store, { kubeconfig: env.kubeconfigPath, log: () => undefined });
  for (const o of ["chain-org", "busy-org"]) await store.put(`orgs/${o}/workspaces/ws1/in.bam`, "bam");
  const step = (stepId: string, input: string, dependsOn?: string[]) => ({ stepId, toolName: "samtools", ...(dependsOn ? { dependsOn } : {}), parameters: { command: "depth", inputFile: input, outputFile: `${stepId}.tsv` } });
  const submit = async (organization: string, steps: unknown[]) => {
    const r = await api.engine.submit({ organization, workspace: "ws1", keyId: "k", source: { kind: "inline" }, input: { bam: "in.bam" }, spec: { id: "p", inputs: [{ name: "bam", type: "file" }], steps } });
    if (!r.ok) throw new Error(r.error.message);
    return r.run.id;
  };
  const status = async (id: string) => (await api.engine.runs.get(id))?.status;
  const verdicts = new Map<string, StageOutDecision>();
  const stageOut = await startStageOut({ client, namespace: ns, store, decide: (_pod, job) => verdicts.get(job.metadata.name) ?? (opts.hold ? { action: "hold" } : { action: "succeed" }) });
  /** The step's pod succeeds (outputs uploaded), now or once it exists. */
  const finish = (job: Job) => {
    verdicts.set(job.metadata.name, { action: "succeed" });
    stageOut.release((p) => p.metadata.labels?.["batch.kubernetes.io/job-name"] === job.metadata.name);
  };
  /** The Job controller marked the Job Complete. */
  const completed = (job: Job) => until(`${job.metadata.name} Complete`, async () => {
    const cur = await client.request<Job>("GET", `${paths.jobs(ns)}/${job.metadata.name}`);
    return cur.status?.conditions?.some((c) => c.type === "Complete" && c.status === "True") ? cur : undefined;
  }, 60_000);
  return { store, client, api, step, submit, status, finish, completed, close: async () => { await stageOut.stop(); await api.stop(); client.close(); } };
}

t.test("killed and restarted mid-run: no duplicate Job, the limit kept from live Jobs, the run finishes", async (t) => {
  const ns = "restart";
  const s = await setup(ns, { hold: true });
  t.teardown(() => s.close());
  const op1 = await operatorProcess(ns, "op-1");
  const chain = await s.submit("chain-org", [s.step("a", "${bam}"), s.step("b", "${a.outputFile}", ["a"]), s.step("c", "${b.outputFile}", ["b"])]);
  // Five independent steps take the org's five slots; a later run must wait for one. After a
  // restart the later run is looked at first (newest first), so only a ledger rebuilt from
  // the live Jobs keeps it waiting.
  const busy = await s.submit("busy-org", ["p1", "p2", "p3", "p4", "p5"].map((id) => s.step(id, "${bam}")));
  await until("5 busy jobs", async () => (await jobs(s.client, ns, `operon.dev/run=${busy}`)).length === 5);
  const later = await s.submit("busy-org", [s.step("q", "${bam}")]);
  const a = await until("job a", async () => (await jobs(s.client, ns, `operon.dev/run=${chain}`))[0]);
  s.finish(a);
  const b = await until("job b", async () => (await jobs(s.client, ns, `operon.dev/run=${chain}`)).find((j) => stepOf(j) === "b"));
  await until("the later run waits", async () => (await s.api.engine.runs.get(later))?.steps[0]?.status === "waiting");

  op1.child.kill("SIGKILL");
  await op1.exited;
  s.finish(b); // b finishes while no operator runs
  await s.completed(b);

  const op2 = await operatorProcess(ns, "op-2");
  await until("op-2 leads", () => isLeader(op2), 20_000);
  const c = await until("job c", async () => (await jobs(s.client, ns, `operon.dev/run=${chain}`)).find((j) => stepOf(j) === "c"));
  t.equal(c.metadata.annotations?.["operon.dev/created-by"], "op-2", "the restarted operator went on");
  // Every run listed at start looked at (the queue drained), the later one included.
  let lastSeen = "";
  await until("op-2's queue drained after reconciling the three runs", async () => {
    const m = await (await fetch(`http://127.0.0.1:${op2.port}/metrics`)).text();
    lastSeen = m.split("\n").filter((l) => /^(controller_runtime_reconcile_total|workqueue_depth)/.test(l)).join("; ");
    return sampleValue(m, "controller_runtime_reconcile_total", { controller: "pipelinerun" }) >= 3 && sampleValue(m, "workqueue_depth", { name: "pipelinerun" }) === 0;
  }).catch((e: unknown) => { throw new Error(`${String(e)}: ${lastSeen}`); });
  const busyJobs = await jobs(s.client, ns, `operon.dev/run=${busy}`);
  t.equal(busyJobs.filter(active).length, 5, "the five Jobs still run");
  t.same(await jobs(s.client, ns, `operon.dev/run=${later}`), [], "after the restart the later run still waits: the org is not over its limit");
  t.equal((await s.api.engine.runs.get(later))?.steps[0]?.waitingReason, "OrgConcurrencyLimit");
  s.finish(c);
  await until("chain completed", async () => (await s.status(chain)) === "completed");
  s.finish(busyJobs[0] as Job);
  await until("the later run's Job once a slot frees", async () => (await jobs(s.client, ns, `operon.dev/run=${later}`)).length === 1);

  const all = await jobs(s.client, ns);
  const keys = all.map((j) => `${j.metadata.annotations?.["operon.dev/run-id"]}/${stepOf(j)}`);
  t.equal(new Set(keys).size, keys.length, "no step has two Jobs");
  t.ok(all.every((j) => j.metadata.annotations?.["operon.dev/attempt"] === "1"), "every Job is attempt 1");
  t.same((await jobs(s.client, ns, `operon.dev/run=${chain}`)).map(stepOf).sort(), ["a", "b", "c"]);
  op2.child.kill("SIGTERM");
  t.equal(await op2.exited, 0, "SIGTERM stops the operator cleanly");
});

t.test("two replicas: only the Lease holder acts; the other takes over when it dies", async (t) => {
  const ns = "ha";
  const s = await setup(ns);
  t.teardown(() => s.close());
  const x = await operatorProcess(ns, "replica-x");
  const y = await operatorProcess(ns, "replica-y");
  const lease = async () => (await s.client.request<{ spec: { holderIdentity?: string } }>("GET", `${paths.leases(ns)}/operon-operator`)).spec.holderIdentity;
  const holder = await until("a holder", lease);
  const [leader, standby] = holder === "replica-x" ? [x, y] : [y, x];
  t.ok(await isLeader(leader), `${leader.identity} leads`);
  t.notOk(await isLeader(standby), `${standby.identity} stands by`);

  const first: string[] = [];
  for (let i = 0; i < 4; i++) first.push(await s.submit("chain-org", [s.step("a", "${bam}"), s.step("b", "${a.outputFile}", ["a"])]));
  for (const id of first) await until(`run ${id}`, async () => (await s.status(id)) === "completed");
  const before = await jobs(s.client, ns);
  t.equal(before.length, 8);
  t.ok(before.every((j) => j.metadata.annotations?.["operon.dev/created-by"] === leader.identity), "every Job was created by the leader");
  t.notOk(await isLeader(standby), "the standby never led meanwhile");

  leader.child.kill("SIGKILL");
  await leader.exited;
  const killedAt = Date.now();
  const second: string[] = [];
  for (let i = 0; i < 3; i++) second.push(await s.submit("chain-org", [s.step("a", "${bam}"), s.step("b", "${a.outputFile}", ["a"])]));
  await until("the standby takes the Lease", async () => (await lease()) === standby.identity, 20_000);
  t.ok(Date.now() - killedAt < 15_000, "taken over within a few lease durations");
  for (const id of second) await until(`run ${id}`, async () => (await s.status(id)) === "completed");
  const after = (await jobs(s.client, ns)).filter((j) => second.includes(j.metadata.annotations?.["operon.dev/run-id"] ?? ""));
  t.equal(after.length, 6);
  t.ok(after.every((j) => j.metadata.annotations?.["operon.dev/created-by"] === standby.identity), "the new leader created the new Jobs");
  const names = (await jobs(s.client, ns)).map((j) => j.metadata.name);
  t.equal(new Set(names).size, 14);
});
