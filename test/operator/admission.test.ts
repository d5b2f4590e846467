/**
 * One admission path in cluster mode: two api-server replicas (their engines, as
 * `operon api-server` builds them) and the operator as a real process, against a real
 * control plane (kwok runs the step pods; the stage-out stand-in holds them until the test
 * finishes them). Renders wait as compute claims (Lease objects) the operator admits in the
 * same queue as the organization's steps: first come first served, and a render and a step
 * started together never exceed the organization's limit (1 here). A sampler lists the
 * step Jobs and the admitted claims all along and records the most that ever held a slot.
 */
import t from "tap";
import { parseConfig } from "../../core/config.js";
import type { JobObject } from "../../core/kubernetes/jobs.js";
import { createApiServerClusterEngine, createStore } from "../../wiring/runtime.js";
import { createKubeClient, paths, type KubeClient } from "../../adapters/kubernetes/client.js";
import { startStageOut, type StageOutDecision } from "../support/job-sim.js";
import { micro } from "../../adapters/kubernetes/leader.js";
import { startTestEnv } from "../support/k8s-env.js";
import { startOperatorProcess } from "../support/operator-process.js";
import { until } from "../support/wait.js";

const env = await startTestEnv({ kwokNodes: 1 });
t.teardown(() => env.stop());

type Job = JobObject & { metadata: { name: string } };
const finishedJob = (j: Job) => j.status?.conditions?.some((c) => c.status === "True" && (c.type === "Complete" || c.type === "Failed")) ?? false;
interface Lease { metadata: { name: string; annotations?: Record<string, string> } }

async function setup(ns: string) {
  await env.createNamespace(ns);
  const c = parseConfig({ ...env.env, OPERON_MODE: "cluster", OPERON_NAMESPACE: ns, PORT: "0", OPERON_ORG_CONCURRENCY: "1" });
  if (!c.ok) throw new Error(c.message);
  const store = await createStore(c.config, "");
  const client = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: ns });
  const replicas = [
    await createApiServerClusterEngine(c.config, store, { kubeconfig: env.kubeconfigPath, log: () => undefined }),
    await createApiServerClusterEngine(c.config, store, { kubeconfig: env.kubeconfigPath, log: () => undefined }),
  ];
  await store.put("orgs/acme/workspaces/ws1/in.bam", "bam");
  const verdicts = new Map<string, StageOutDecision>();
  const stageOut = await startStageOut({ client, namespace: ns, store, decide: (_pod, job) => verdicts.get(job.metadata.name) ?? { action: "hold" } });
  const op = await startOperatorProcess(t, env, { namespace: ns, identity: "op-1", env: { OPERON_ORG_CONCURRENCY: "1" } });
  return {
    client, replicas, op,
    finish: (job: Job) => {
      verdicts.set(job.metadata.name, { action: "succeed" });
      stageOut.release((p) => p.metadata.labels?.["batch.kubernetes.io/job-name"] === job.metadata.name);
    },
    close: async () => { await stageOut.stop(); for (const r of replicas) await r.stop(); client.close(); },
  };
}

/**
 * What holds a slot of acme now: its step Jobs whose pod has not ended (the operator sees a
 * step's end when its pod Succeeded, before the Job controller marks the Job Complete), and
 * its admitted claims.
 */
async function holders(client: KubeClient, ns: string): Promise<string[]> {
  const jobs = (await client.request<{ items: Job[] }>("GET", paths.jobs(ns), { query: { labelSelector: "operon.dev/run" } })).items;
  const pods = (await client.request<{ items: Array<{ metadata: { labels?: Record<string, string> }; status?: { phase?: string } }> }>("GET", `/api/v1/namespaces/${ns}/pods`)).items;
  const ended = new Set(pods.filter((p) => p.status?.phase === "Succeeded" || p.status?.phase === "Failed").map((p) => p.metadata.labels?.["batch.kubernetes.io/job-name"]));
  const leases = (await client.request<{ items: Lease[] }>("GET", paths.leases(ns), { query: { labelSelector: "operon.dev/claim=compute" } })).items;
  return [
    ...jobs.filter((j) => !finishedJob(j) && !ended.has(j.metadata.name)).map((j) => `step:${j.metadata.annotations?.["operon.dev/run-id"]}`),
    ...leases.filter((l) => l.metadata.annotations?.["operon.dev/admitted-at-ms"] !== undefined).map((l) => `claim:${l.metadata.annotations?.["operon.dev/task"]}`),
  ];
}

t.test("two api-server replicas and the operator: renders and steps share one FIFO queue within the limit", async (t) => {
  const ns = "admission";
  const s = await setup(ns);
  t.teardown(() => s.close());
  const [a, b] = s.replicas as [typeof s.replicas[0], typeof s.replicas[0]];
  let most = 0;
  const seen: string[][] = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const h = await holders(s.client, ns).catch(() => []);
      most = Math.max(most, h.length);
      if (h.length) seen.push(h);
      await new Promise((r) => setTimeout(r, 25));
    }
  })();
  t.teardown(async () => { sampling = false; await sampler; });

  const submit = async () => {
    const r = await b.engine.submit({
      organization: "acme", workspace: "ws1", keyId: "k", source: { kind: "inline" }, input: { bam: "in.bam" },
      spec: { id: "p", inputs: [{ name: "bam", type: "file" }], steps: [{ stepId: "a", toolName: "samtools", parameters: { command: "depth", inputFile: "${bam}", outputFile: "a.tsv" } }] },
    });
    if (!r.ok) throw new Error(JSON.stringify(r));
    return r.run.id;
  };
  const order: string[] = [];
  /** A render's slot through `replica`: its release once admitted. */
  const render = (replica: typeof a, name: string) => replica.engine.slots("acme", name, new AbortController().signal, "render").then((release) => { order.push(name); return release; });

  const stepJob = async (run: string) => (await s.client.request<{ items: Job[] }>("GET", paths.jobs(ns), { query: { labelSelector: `operon.dev/run=${run}` } })).items[0];
  const claimCount = async () => (await s.client.request<{ items: Lease[] }>("GET", paths.leases(ns), { query: { labelSelector: "operon.dev/claim=compute" } })).items.length;

  // A render from replica a takes the idle organization's slot; a step submitted through
  // replica b queues behind it, and a render from replica b behind the step.
  const release1 = await render(a, "render-1");
  const run1 = await submit();
  await until("run1's step waits", async () => (await b.engine.runs.get(run1))?.steps[0]?.status === "waiting", 60_000);
  const secondRender = render(b, "render-2");
  await until("render-2 queued", async () => (await claimCount()) === 2);
  t.equal(await stepJob(run1), undefined, "no Job while render-1 holds the slot");

  release1();
  const job1 = await until("run1's Job once render-1 ends", () => stepJob(run1), 60_000);
  t.same(order, ["render-1"], "render-2 still waits while run1's step, queued before it, holds the slot");
  s.finish(job1);
  const release2 = await secondRender;
  t.same(order, ["render-1", "render-2"], "then render-2 starts");
  await until("run1 completed", async () => (await b.engine.runs.get(run1))?.status === "completed", 60_000);
  release2();
  await until("render-2's claim deleted", async () => (await claimCount()) === 0);

  // Started together on two replicas, with the organization idle: one takes the slot, the
  // other waits for it; the sampler checks they never both hold it.
  const third = render(a, "render-3");
  const run3 = await submit();
  const first = await until("render-3 or run3's step started", async () => (order.includes("render-3") ? "render" : (await stepJob(run3)) ? "step" : undefined), 60_000);
  t.comment(`started together: the ${first} came first`);
  if (first === "render") {
    t.equal(await stepJob(run3), undefined, "the step waits for the render");
    (await third)();
    s.finish(await until("run3's Job", () => stepJob(run3), 60_000));
  } else {
    t.notOk(order.includes("render-3"), "the render waits for the step");
    s.finish((await stepJob(run3)) as Job);
    (await third)();
  }
  await until("run3 completed", async () => (await b.engine.runs.get(run3))?.status === "completed", 60_000);
  sampling = false;
  await sampler;
  t.ok(seen.length > 0, "the sampler saw slots held");
  t.equal(most, 1, `never more than the limit held a slot at once (samples: ${seen.length}; over: ${JSON.stringify(seen.filter((h) => h.length > 1))})`);
  await until("every claim deleted", async () => (await s.client.request<{ items: Lease[] }>("GET", paths.leases(ns), { query: { labelSelector: "operon.dev/claim=compute" } })).items.length === 0);
});

t.test("a replica that dies with a claim frees its slot once the claim expires", async (t) => {
  const ns = "admission-crash";
  const s = await setup(ns);
  t.teardown(() => s.close());
  // A claim as a replica that died would leave it: admitted, never renewed, a short ttl.
  const now = Date.now();
  await s.client.request("POST", paths.leases(ns), {
    body: {
      apiVersion: "coordination.k8s.io/v1", kind: "Lease",
      metadata: { name: "operon-claim-c-dead", labels: { "operon.dev/claim": "compute" }, annotations: { "operon.dev/organization": "acme", "operon.dev/claim-kind": "render", "operon.dev/task": "orphan", "operon.dev/queued-at-ms": String(now), "operon.dev/ttl-ms": "2000", "operon.dev/admitted-at-ms": String(now) } },
      spec: { holderIdentity: "gone", leaseDurationSeconds: 2, renewTime: micro(now) },
    },
  });
  const [a] = s.replicas;
  const waited = AbortSignal.timeout(30_000);
  const release = await a!.engine.slots("acme", "after-crash", waited, "render");
  t.notOk(waited.aborted, "a render is admitted once the orphan claim expired");
  const leases = (await s.client.request<{ items: Lease[] }>("GET", paths.leases(ns), { query: { labelSelector: "operon.dev/claim=compute" } })).items.map((l) => l.metadata.name);
  t.notOk(leases.includes("operon-claim-c-dead"), "the orphan claim is deleted");
  release();
});
