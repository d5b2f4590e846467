/**
 * The operator's GET /metrics against a real control plane (etcd, kube-apiserver, the Job
 * controller, scheduler and a kwok node; the stage-out stand-in of test/support/job-sim.ts
 * uploads each step's outputs) and MinIO, the operator started in-process and listening: the exposition passes `promtool check
 * metrics`; it has the controller's and work queue's metrics under controller-runtime's and
 * client-go's names, types and label names, and they grow with a run (workqueue_adds_total,
 * controller_runtime_reconcile_total); `operon_runs{phase}` shows the run while it runs and
 * `operon_runs_finished_total` its end; every family is `operon_…` or a standard
 * controller_runtime_/workqueue_/process_/nodejs_ one. Negative controls show each check
 * rejecting what it must.
 */
import t from "tap";
import { parseConfig } from "../../core/config.js";
import { createApiServerClusterEngine, createStore } from "../../wiring/runtime.js";
import { startOperator } from "../../operator/cluster.js";
import { createKubeClient } from "../../adapters/kubernetes/client.js";
import { startStageOut } from "../support/job-sim.js";
import { startTestEnv } from "../support/k8s-env.js";
import { BAD_EXPOSITION, controllerMetricProblems, metricTypes, namingProblems, promtoolCheck, sampleValue } from "../support/metrics.js";
import { freePorts } from "../support/minio.js";
import { until } from "../support/wait.js";

const NS = "metrics";
const env = await startTestEnv({ kwokNodes: 1 });
t.teardown(() => env.stop());
await env.createNamespace(NS);
const port = (await freePorts(1))[0] as number;
const parsed = parseConfig({ ...env.env, OPERON_MODE: "cluster", OPERON_NAMESPACE: NS, PORT: String(port), HOST: "127.0.0.1", OPERON_LEADER_ELECTION: "false" });
if (!parsed.ok) throw new Error(parsed.message);
const config = parsed.config;
const store = await createStore(config, "");
const client = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: NS });
t.teardown(() => client.close());
const logs: string[] = [];
const operator = await startOperator(config, store, { kubeconfig: env.kubeconfigPath, log: (m) => logs.push(m), identity: "op-metrics" });
t.teardown(() => operator.stop());
const api = await createApiServerClusterEngine(config, store, { kubeconfig: env.kubeconfigPath, log: () => undefined });
t.teardown(() => api.stop());
await store.put("orgs/acme/workspaces/ws1/in.bam", "bam");

async function scrape(): Promise<string> {
  const r = await fetch(`http://127.0.0.1:${port}/metrics`);
  if (r.status !== 200) throw new Error(`GET /metrics: ${r.status}`);
  return r.text();
}
const ctl = { controller: "pipelinerun" };
const wq = { name: "pipelinerun", controller: "pipelinerun" };
const reconciles = (m: string) => sampleValue(m, "controller_runtime_reconcile_total", ctl);
const runs = (m: string, phase: string) => sampleValue(m, "operon_runs", { phase });
const step = (stepId: string, input: string, dependsOn?: string[]) => ({ stepId, toolName: "samtools", ...(dependsOn ? { dependsOn } : {}), parameters: { command: "depth", inputFile: input, outputFile: `${stepId}.tsv` } });

await until("the operator leads", async () => { try { return sampleValue(await scrape(), "operon_operator_leader") === 1 && operator.engine() !== undefined; } catch { return false; } }, 60_000);

t.test("negative controls: each check rejects what it must", async (t) => {
  t.notOk(promtoolCheck(BAD_EXPOSITION).ok, "promtool rejects a counter without _total and without help");
  const m = await scrape();
  const foreign = `${m}# HELP reconciles_total Reconciles\n# TYPE reconciles_total counter\nreconciles_total 1\n`;
  t.ok(promtoolCheck(foreign).ok, "(promtool alone lets a family without Operon's prefix through)");
  t.match(namingProblems(foreign), [/^reconciles_total: not prefixed/], "the naming check does not");
  const old = m.replaceAll("operon_operator_api_writes_total", "operon_operator_api_writes");
  t.notOk(promtoolCheck(old).ok, "the old name of the writes counter fails promtool");
  t.ok(namingProblems(old).some((p) => p.startsWith("operon_operator_api_writes:")), "and the naming check");
  t.ok(controllerMetricProblems(m.replaceAll("controller_runtime_", "ctrl_")).length > 0, "controller metrics under other names are reported");
});

t.test("a run through the operator: its /metrics is valid and counts the work", async (t) => {
  const before = await scrape();
  const check0 = promtoolCheck(before);
  t.ok(check0.ok, `promtool check metrics passes while idle: ${check0.output}`);
  t.same(controllerMetricProblems(before), [], "controller-runtime's and client-go's names, types and label names");

  // Step pods wait (their step runs) until released; then each succeeds once its outputs are up.
  let release = false;
  const stageOut = await startStageOut({ client, namespace: NS, store, decide: () => (release ? { action: "succeed" } : { action: "hold" }) });
  t.teardown(() => stageOut.stop());
  const r = await api.engine.submit({ organization: "acme", workspace: "ws1", keyId: "k", source: { kind: "inline" }, input: { bam: "in.bam" }, spec: { id: "p", inputs: [{ name: "bam", type: "file" }], steps: [step("a", "${bam}"), step("b", "${a.outputFile}", ["a"])] } });
  if (!r.ok) throw new Error(r.error.message);
  const during = await until("operon_runs{phase=\"running\"} 1", async () => { const m = await scrape(); return runs(m, "running") === 1 ? m : undefined; }, 30_000);
  t.equal(runs(during, "queued"), 0, "the run is no longer queued");
  await until("a's pod running", () => stageOut.held().length === 1, 30_000);
  release = true;
  stageOut.release();
  await until(`run ${r.run.id} completed`, async () => (await api.engine.runs.get(r.run.id))?.status === "completed", 60_000);
  const after = await until("the run counted finished and out of the operator's cache", async () => {
    const m = await scrape();
    return sampleValue(m, "operon_runs_finished_total", { phase: "completed" }) === sampleValue(before, "operon_runs_finished_total", { phase: "completed" }) + 1 && runs(m, "running") + runs(m, "queued") === 0 ? m : undefined;
  }, 30_000);

  const check = promtoolCheck(after);
  t.ok(check.ok, `promtool check metrics passes: ${check.output}`);
  t.same(controllerMetricProblems(after), []);
  t.same(namingProblems(after), [], "every family is operon_… or controller_runtime_/workqueue_/process_/nodejs_; counters end in _total");
  const types = metricTypes(after);
  const operon = [...types.keys()].filter((n) => !/^(controller_runtime_|workqueue_|process_|nodejs_)/.test(n));
  t.ok(operon.length >= 7 && operon.every((n) => n.startsWith("operon_")), `Operon's own metrics are operon_…: ${operon.join(", ")}`);
  t.equal(types.get("operon_operator_api_writes_total"), "counter", "the API writes are a counter");
  t.notOk(types.has("operon_operator_api_writes"), "under its _total name only");
  for (const [name, type] of [["operon_operator_leader", "gauge"], ["operon_operator_cached_runs", "gauge"], ["operon_operator_cleanup_sweeps_total", "counter"], ["operon_step_start_latency_seconds", "histogram"]] as const) t.equal(types.get(name), type, name);

  t.ok(sampleValue(after, "workqueue_adds_total", wq) > sampleValue(before, "workqueue_adds_total", wq), `workqueue_adds_total increased (${sampleValue(before, "workqueue_adds_total", wq)} → ${sampleValue(after, "workqueue_adds_total", wq)})`);
  t.ok(reconciles(after) > reconciles(before), `controller_runtime_reconcile_total increased (${reconciles(before)} → ${reconciles(after)})`);
  t.ok(sampleValue(after, "controller_runtime_reconcile_total", { ...ctl, result: "success" }) > sampleValue(before, "controller_runtime_reconcile_total", { ...ctl, result: "success" }), "successful reconciles among them");
  t.equal(sampleValue(after, "controller_runtime_reconcile_time_seconds_count", ctl), reconciles(after), "every reconcile timed once");
  t.equal(sampleValue(after, "controller_runtime_max_concurrent_reconciles", ctl), config.OPERON_OPERATOR_WORKERS, "the configured workers");
  t.ok(sampleValue(after, "operon_operator_api_writes_total") > sampleValue(before, "operon_operator_api_writes_total"), "the operator's API writes counted");
  t.ok(sampleValue(after, "operon_step_start_latency_seconds_count") - (sampleValue(before, "operon_step_start_latency_seconds_count") || 0) === 2, "both steps' start latency observed");
  t.equal(sampleValue(after, "operon_operator_cached_runs"), 0);
});
