/**
 * Soak: an idle operator's memory does not grow with the runs it has finished. The operator
 * runs as its own process (`operon operator`) against a real control plane (the Job controller
 * creates the step pods, kwok runs them, the stage-out stand-in of test/support/job-sim.ts
 * uploads their outputs) and MinIO; a few runs go through it for real, then 10,000 finished PipelineRuns (copies of one it finished,
 * as it leaves them) are added. Its resident memory, read from its own /metrics, stays flat,
 * and it caches none of them. 200 of them come without the `operon.dev/finished` label (an
 * operator that stopped between a run's final status and its label): its clean-up sweep
 * labels them and they leave its cache too.
 */
import t from "tap";
import { randomBytes } from "node:crypto";
import { parseConfig } from "../../core/config.js";
import { ulid } from "../../core/ids.js";
import { LABEL } from "../../core/kubernetes/pipelinerun.js";
import { createStore } from "../../wiring/runtime.js";
import { createApiServerClusterEngine } from "../../wiring/runtime.js";
import { createKubeClient, paths } from "../../adapters/kubernetes/client.js";
import type { KubeObject } from "../../adapters/kubernetes/informer.js";
import { startStageOut } from "../support/job-sim.js";
import { startTestEnv } from "../support/k8s-env.js";
import { startOperatorProcess } from "../support/operator-process.js";
import { until } from "../support/wait.js";

const FINISHED_RUNS = 10_000;
const UNLABELLED = 200;
/**
 * RSS may move by this much (garbage not yet collected, heap sizing): samples of one idle
 * operator were seen 60 MiB apart. With the 10,000 runs in its cache (the selector removed)
 * it grew by 258 MiB in this test (171 MiB of it after the first 2,000).
 */
const RSS_SLACK_MB = 96;

const env = await startTestEnv({ kwokNodes: 1 });
t.teardown(() => env.stop());
const ns = "soak";
await env.createNamespace(ns);
const parsed = parseConfig({ ...env.env, OPERON_MODE: "cluster", OPERON_NAMESPACE: ns, PORT: "0" });
if (!parsed.ok) throw new Error(parsed.message);
const store = await createStore(parsed.config, "");
const client = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: ns });
t.teardown(() => client.close());
const api = await createApiServerClusterEngine(parsed.config, store, { kubeconfig: env.kubeconfigPath, log: () => undefined });
t.teardown(() => api.stop());
await store.put("orgs/acme/workspaces/ws1/in.bam", "bam");

const operator = await startOperatorProcess(t, env, { namespace: ns, identity: "op-soak", env: { OPERON_LEADER_ELECTION: "false", OPERON_CLEANUP_INTERVAL_SECONDS: "3" } });
const port = operator.port;

/** One value of the operator's /metrics. */
async function metric(name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  if (!m) throw new Error(`${name} not in the operator's metrics`);
  return Number(m[1]);
}
const rssMb = async () => (await metric("process_resident_memory_bytes")) / 2 ** 20;
/** The median of 5 samples a second apart: one sample may catch a heap full of garbage. */
async function settledRssMb(): Promise<number> {
  const xs: number[] = [];
  for (let i = 0; i < 5; i++) {
    if (i) await new Promise((r) => setTimeout(r, 1000));
    xs.push(await rssMb());
  }
  return xs.sort((a, b) => a - b)[2] as number;
}
const sweepsFrom = async (n: number) => {
  const from = await metric("operon_operator_cleanup_sweeps_total");
  // A sweep that started before now may end first: wait for n more after it.
  await until(`${n} clean-up sweeps`, async () => (await metric("operon_operator_cleanup_sweeps_total")) >= from + n + 1, 120_000);
};
await until("the operator leads", async () => { try { return (await metric("operon_operator_leader")) === 1; } catch { return false; } }, 60_000);

type PR = KubeObject & { spec?: unknown; status?: { phase?: string } };

t.test(`an idle operator's RSS stays flat over ${FINISHED_RUNS.toLocaleString("en")} finished runs`, async (t) => {
  // Real runs first: the operator starts their Jobs, records them and labels them finished.
  const stageOut = await startStageOut({ client, namespace: ns, store });
  const step = (stepId: string, input: string, dependsOn?: string[]) => ({ stepId, toolName: "samtools", ...(dependsOn ? { dependsOn } : {}), parameters: { command: "depth", inputFile: input, outputFile: `${stepId}.tsv` } });
  const ids: string[] = [];
  for (let i = 0; i < 20; i++) {
    const r = await api.engine.submit({ organization: "acme", workspace: "ws1", keyId: "k", source: { kind: "inline" }, input: { bam: "in.bam" }, spec: { id: "p", inputs: [{ name: "bam", type: "file" }], steps: [step("a", "${bam}"), step("b", "${a.outputFile}", ["a"])] } });
    if (!r.ok) throw new Error(r.error.message);
    ids.push(r.run.id);
  }
  for (const id of ids) await until(`run ${id} completed`, async () => (await api.engine.runs.get(id))?.status === "completed", 120_000);
  await stageOut.stop();
  await until("the finished runs out of the operator's cache", async () => (await metric("operon_operator_cached_runs")) === 0, 30_000);
  const template = await client.request<PR>("GET", `${paths.pipelineRuns(ns)}/${ids[0] as string}`);
  t.equal(template.metadata.labels?.[LABEL.finished], "completed", "a run the operator finished is labelled finished");
  t.equal(template.metadata.annotations?.["operon.dev/finished-at"], (template.status as { completedAt?: string } | undefined)?.completedAt, "with its finish time as an annotation (the clean-up lists metadata only)");

  await sweepsFrom(1);
  const idle = await settledRssMb();
  const samples: Array<[number, number]> = [[0, idle]];
  let warm = idle;

  // The history: copies of a finished run, spec and final status, as the operator leaves them.
  const { uid: _u, resourceVersion: _rv, creationTimestamp: _c, managedFields: _m, ...meta } = template.metadata as PR["metadata"] & { managedFields?: unknown };
  let made = 0;
  const makeOne = async (labelled: boolean) => {
    const name = `run-${ulid(Date.now(), randomBytes(10))}`;
    const created = await client.request<PR>("POST", paths.pipelineRuns(ns), { body: { apiVersion: template.apiVersion, kind: template.kind, metadata: { ...meta, name }, spec: template.spec } });
    await client.request("PUT", `${paths.pipelineRuns(ns)}/${name}/status`, { body: { ...created, status: template.status } });
    // Finished, but the label never written (the operator stopped in between).
    if (!labelled) await client.request("PATCH", `${paths.pipelineRuns(ns)}/${name}`, { patch: "merge", body: { metadata: { labels: { [LABEL.finished]: null } } } });
    made++;
  };
  const workers = 16;
  for (let batch = 0; batch < FINISHED_RUNS / 2000; batch++) {
    const todo = Array.from({ length: 2000 }, (_, i) => batch * 2000 + i);
    await Promise.all(Array.from({ length: workers }, async () => {
      for (let n = todo.shift(); n !== undefined; n = todo.shift()) await makeOne(n % (FINISHED_RUNS / UNLABELLED) !== 0);
    }));
    // The first 2,000 are the warm-up: the heap grows to its working size (sweeps paging
    // through finished runs, watch buffers) once, whatever the history; flat is measured after.
    if (batch === 0) { warm = await settledRssMb(); samples.push([made, warm]); } else samples.push([made, await rssMb()]);
  }
  const listed = async (selector: string) => {
    let count = 0;
    let cont: string | undefined;
    do {
      const page = await client.request<{ metadata: { continue?: string }; items: unknown[] }>("GET", paths.pipelineRuns(ns), { query: { labelSelector: selector, limit: 1000, continue: cont } });
      count += page.items.length;
      cont = page.metadata.continue || undefined;
    } while (cont);
    return count;
  };
  // Idle: clean-up sweeps page through all of them, and label the ones that came unlabelled.
  await until("every finished run labelled", async () => (await listed(`!${LABEL.finished}`)) === 0, 120_000);
  await sweepsFrom(2);
  const final = await settledRssMb();
  samples.push([made, final]);
  t.equal(await listed(LABEL.finished), FINISHED_RUNS + ids.length, `${FINISHED_RUNS + ids.length} finished PipelineRuns exist`);
  t.equal(await metric("operon_operator_cached_runs"), 0, "the operator caches none of them");
  const series = samples.map(([n, mb]) => `${n}: ${mb.toFixed(1)} MiB`).join(", ");
  t.comment(`operator RSS by finished runs added: ${series}`);
  t.ok(final - warm < RSS_SLACK_MB, `RSS ${warm.toFixed(1)} MiB after the first 2,000 → ${final.toFixed(1)} MiB after ${FINISHED_RUNS} finished runs (idle before them: ${idle.toFixed(1)} MiB; ${series}); allowed +${RSS_SLACK_MB} MiB`);
  t.notMatch(operator.output(), /Error|error:/, "nothing went wrong in the operator's log");
});
