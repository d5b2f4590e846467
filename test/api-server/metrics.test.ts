/**
 * The embedded server's GET /metrics (the api-server's metrics, then its engine's): after a
 * few requests and runs through the embedded engine (real processes: a `sleep` and an `ls`
 * test tool), the exposition passes `promtool check metrics`; it has the controller's and
 * work queue's metrics under controller-runtime's and client-go's names, types and label
 * names; `operon_runs{phase}` follows the runs in progress and `operon_runs_finished_total`
 * counts each run's end once; every family is `operon_…` or a standard one. Each engine has
 * its own registry. Negative controls show each check rejecting what it must.
 */
import t from "tap";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Registry } from "prom-client";
import { createLocalRunStore } from "../../adapters/local/run-store.js";
import type { RunRecord } from "../../core/ports.js";
import { testCatalogue } from "../support/test-tools.js";
import { startController } from "../../engine/controller.js";
import { WorkQueue } from "../../engine/workqueue.js";
import { testApp } from "../support/app.js";
import { BAD_EXPOSITION, CONTROLLER_METRICS, controllerMetricProblems, metricTypes, namingProblems, promtoolCheck, sampleValue } from "../support/metrics.js";
import { until } from "../support/wait.js";

const tools = testCatalogue();

const a = await testApp({ engine: { tools } });
t.teardown(() => a.close());
await a.service.createWorkspace("acme", "ws1");
const h = { authorization: `Bearer ${await a.key("acme", ["tools"])}` };

async function scrape(app = a.app): Promise<string> {
  const r = await app.inject({ method: "GET", url: "/metrics" });
  if (r.statusCode !== 200) throw new Error(`GET /metrics: ${r.statusCode} ${r.body}`);
  return r.body;
}
async function submit(step: Record<string, unknown>): Promise<string> {
  const r = await a.app.inject({ method: "POST", url: "/v1/pipelines", headers: h, payload: { workspace_id: "ws1", spec: { id: "m", steps: [{ stepId: "s", ...step }] }, input: {} } });
  if (r.statusCode !== 201) throw new Error(`submit: ${r.statusCode} ${r.body}`);
  return (r.json() as { data: { id: string } }).data.id;
}
async function statusOf(id: string): Promise<string> {
  return ((await a.app.inject({ method: "GET", url: `/v1/pipelines/${id}?workspace_id=ws1`, headers: h })).json() as { data: { status: string } }).data.status;
}
const ended = (id: string, status: string) => until(`run ${id} ${status}`, async () => ((await statusOf(id)) === status ? true : undefined), 60_000);
const runs = (text: string, phase: string) => sampleValue(text, "operon_runs", { phase });
const finished = (text: string, phase: string) => sampleValue(text, "operon_runs_finished_total", { phase });
const ctl = { controller: "pipelinerun" };
const wq = { name: "pipelinerun", controller: "pipelinerun" };

t.test("negative controls: each check rejects what it must", async (t) => {
  const bad = promtoolCheck(BAD_EXPOSITION);
  t.notOk(bad.ok, "promtool rejects a counter without _total and a family without help");
  t.match(bad.output, /_total/);
  t.match(bad.output, /no help text/);
  t.ok(namingProblems("# TYPE http_requests_total counter\n# TYPE operon_things counter\n").length === 2, "a family without Operon's prefix, a counter without _total");
  t.ok(controllerMetricProblems("# TYPE workqueue_depth counter\n").length > CONTROLLER_METRICS.length, "missing and mistyped controller metrics are reported");
  const renamed = (await scrape()).replaceAll("workqueue_adds_total", "workqueue_adds");
  t.ok(controllerMetricProblems(renamed).some((p) => p.startsWith("workqueue_adds_total")), "a renamed work queue metric is reported");
  t.notOk(promtoolCheck(renamed).ok, "promtool rejects the renamed counter");
});

t.test("before any run: valid, with every controller and work queue metric at zero", async (t) => {
  const m = await scrape();
  const check = promtoolCheck(m);
  t.ok(check.ok, `promtool check metrics passes: ${check.output}`);
  t.same(controllerMetricProblems(m), [], "controller-runtime's and client-go's names, types and label names");
  t.same(namingProblems(m), [], "every family is operon_… or a standard one; every counter ends in _total");
  t.equal(sampleValue(m, "controller_runtime_max_concurrent_reconciles", ctl), 4, "the engine's 4 workers");
  for (const result of ["success", "error", "requeue", "requeue_after"]) t.equal(sampleValue(m, "controller_runtime_reconcile_total", { ...ctl, result }), 0, `reconcile_total{result="${result}"} starts at 0`);
  t.equal(sampleValue(m, "workqueue_adds_total", wq), 0);
  t.equal(runs(m, "queued") + runs(m, "running"), 0, "no run in progress");
  for (const phase of ["completed", "failed", "cancelled"]) t.equal(finished(m, phase), 0);
  t.notOk(metricTypes(m).has("operon_process_cpu_seconds_total"), "process metrics keep their standard names");
  t.equal(metricTypes(m).get("process_cpu_seconds_total"), "counter");
});

t.test("after requests and runs: runs by phase, runs finished, reconciles counted", async (t) => {
  await a.app.inject({ method: "GET", url: "/healthz" });
  t.equal((await a.app.inject({ method: "GET", url: "/v1/pipelines?workspace_id=ws1" })).statusCode, 401);
  const before = await scrape();

  const slow = await submit({ toolName: "sleep", parameters: { seconds: 2 } });
  const during = await until("operon_runs{phase=\"running\"} 1", async () => { const m = await scrape(); return runs(m, "running") === 1 ? m : undefined; }, 30_000);
  t.equal(runs(during, "queued"), 0, "the run has left the queue");
  await ended(slow, "completed");
  const failing = await submit({ toolName: "ls", parameters: { path: "/no/such/path" } });
  await ended(failing, "failed");
  const cancelled = await submit({ toolName: "sleep", parameters: { seconds: 60 } });
  await until("the long run running", async () => ((await statusOf(cancelled)) === "running" ? true : undefined), 30_000);
  t.equal((await a.app.inject({ method: "DELETE", url: `/v1/pipelines/${cancelled}?workspace_id=ws1`, headers: h })).statusCode, 200);
  await ended(cancelled, "cancelled");

  // Counted once the reconcile that wrote the end has returned (the run is seen finished after it).
  const m = await until("three runs counted finished", async () => { const x = await scrape(); return finished(x, "completed") + finished(x, "failed") + finished(x, "cancelled") === 3 ? x : undefined; }, 10_000);
  const check = promtoolCheck(m);
  t.ok(check.ok, `promtool check metrics passes: ${check.output}`);
  t.same(controllerMetricProblems(m), []);
  t.same(namingProblems(m), []);
  t.same([finished(m, "completed"), finished(m, "failed"), finished(m, "cancelled")], [1, 1, 1], "operon_runs_finished_total: one run of each end");
  t.same([runs(m, "queued"), runs(m, "running")], [0, 0], "operon_runs: none in progress any more");

  const adds = sampleValue(m, "workqueue_adds_total", wq);
  t.ok(adds > sampleValue(before, "workqueue_adds_total", wq), `workqueue_adds_total increased (${adds})`);
  const byResult = ["success", "error", "requeue", "requeue_after"].map((result) => sampleValue(m, "controller_runtime_reconcile_total", { ...ctl, result }));
  const reconciles = byResult.reduce((x, y) => x + y, 0);
  t.ok((byResult[0] as number) > 0, `controller_runtime_reconcile_total{result="success"} > 0 (${byResult.join(", ")})`);
  t.equal(sampleValue(m, "controller_runtime_reconcile_time_seconds_count", ctl), reconciles, "every reconcile timed once");
  t.equal(sampleValue(m, "controller_runtime_reconcile_errors_total", ctl), byResult[1], "errors_total counts the error results");
  t.ok(sampleValue(m, "workqueue_work_duration_seconds_count", wq) >= reconciles, "each reconcile was work handed out by the queue");
  t.ok(sampleValue(m, "workqueue_queue_duration_seconds_count", wq) > 0, "queue durations observed");
  t.ok(sampleValue(m, "workqueue_queue_duration_seconds_count", wq) <= adds, "at most one queue duration per add");
  t.ok(sampleValue(m, "workqueue_depth", wq) >= 0);
  t.ok(sampleValue(m, "operon_auth_failures_total") >= 1, "the refused request counted");
  t.ok(sampleValue(m, "operon_http_request_duration_seconds_count", { route: "/healthz" }) >= 1, "request durations beside the engine's metrics");
  t.ok(sampleValue(m, "operon_step_start_latency_seconds_count") >= 3, "each started step's latency");
});

t.test("each engine has its own registry", async (t) => {
  const b = await testApp({ engine: { tools } });
  t.teardown(() => b.close());
  const mb = await scrape(b.app);
  t.equal(sampleValue(mb, "workqueue_adds_total", wq), 0, "a second engine starts from zero");
  t.equal(sampleValue(mb, "operon_runs_finished_total", { phase: "completed" }), 0);
  t.ok(sampleValue(await scrape(), "workqueue_adds_total", wq) > 0, "while the first keeps its own counts");
});

t.test("operon_runs counts runs already on disk (the local store's first count reads them once)", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "operon-count-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const record = (n: number, status: RunRecord["status"]): RunRecord => ({
    id: `run-01j${String(n).padStart(23, "0")}`, organization: "acme", workspace: "ws1", pipelineId: "p", name: "p", source: { kind: "inline" },
    spec: { steps: [] } as unknown as RunRecord["spec"], parameters: {}, inputChecksums: {}, outputFolder: `pipelines/${n}`,
    createdAt: new Date(1_700_000_000_000 + n).toISOString(), startedAt: null, completedAt: null, status, progressPct: 0, error: null,
    cancelRequested: false, steps: [], submittedBy: "k",
  });
  const first = createLocalRunStore(dir);
  await first.create(record(1, "queued"));
  await first.create(record(2, "running"));
  await first.create(record(3, "running"));
  await first.create(record(4, "completed"));
  const second = createLocalRunStore(dir);
  t.same(await second.countActive?.(), { queued: 1, running: 2 }, "a new store counts what is on disk");
  await second.update(record(2, "running").id, (r) => ({ ...r, status: "failed" }));
  await second.create(record(5, "queued"));
  t.same(await second.countActive?.(), { queued: 2, running: 1 }, "then follows its own writes");
  t.same(await first.countActive?.(), { queued: 2, running: 1 }, "a store's first count reads the disk as it is now, whatever the store wrote before");
});

/* ------------------------------------------------- the engine's metrics on that page, unit by unit */

t.test("the work queue reports as client-go's does", async (t) => {
  let now = 0;
  const clock = { now: () => now, setTimeout: () => ({ cancel: () => undefined }) };
  const seen = { adds: 0, retries: 0, queued: [] as number[], worked: [] as number[] };
  const q = new WorkQueue<string>({ clock, metrics: { add: () => seen.adds++, retry: () => seen.retries++, queued: (s) => seen.queued.push(s), worked: (s) => seen.worked.push(s) } });
  q.add("a");
  q.add("a");
  t.equal(seen.adds, 1, "an add of a key already waiting is not counted");
  t.equal(q.depth, 1);
  now = 100;
  t.equal(await q.get(), "a");
  t.same(seen.queued, [0.1], "queue duration: from the add to the get");
  t.equal(q.depth, 0);
  now = 150;
  q.add("a");
  t.equal(seen.adds, 2, "an add while the key is processed is counted");
  t.equal(q.depth, 1, "and is in the depth (it waits for done)");
  now = 400;
  t.same(q.unfinishedWork(), { totalSeconds: 0.3, longestSeconds: 0.3 }, "unfinished work: the key processed for 300 ms");
  q.done("a");
  t.same(seen.worked, [0.3], "work duration: from the get to done");
  now = 450;
  t.equal(await q.get(), "a");
  t.same(seen.queued, [0.1, 0.3], "queued from its add during processing");
  q.addAfter("b", 10);
  q.addRateLimited("c");
  q.addAfter("d", 0);
  t.equal(seen.retries, 3, "every addAfter and addRateLimited is a retry");
  t.same(q.unfinishedWork(), { totalSeconds: 0, longestSeconds: 0 }, "a key just handed out has done no work yet");
  q.shutDown();
});

t.test("reconciles are counted by result as controller-runtime counts them", async (t) => {
  const registry = new Registry();
  let notify: ((id: string) => void) | undefined;
  const outcomes: Array<() => { requeueAfterMs?: number }> = [
    () => { throw new Error("injected"); },
    () => ({ requeueAfterMs: 5 }),
    () => ({ requeueAfterMs: 0 }),
    () => ({}),
  ];
  let calls = 0;
  const ctl = startController({
    runs: { get: async () => undefined, list: async () => [], watch: (fn: (id: string) => void) => { notify = fn; return () => undefined; }, create: async () => undefined, update: async () => undefined },
    executor: { submit: async () => undefined, observe: async () => new Map(), kill: async () => undefined, watch: () => () => undefined, logs: async () => undefined },
    reconcile: async () => (outcomes[calls++] ?? (() => ({})))(),
    workers: 3, metrics: registry, name: "test",
  });
  t.teardown(() => ctl.stop());
  await until("the watch", () => notify !== undefined);
  notify?.("run-x");
  await until("four reconciles", () => calls >= 4, 10_000);
  await until("the fourth counted", async () => sampleValue(await registry.metrics(), "controller_runtime_reconcile_time_seconds_count", { controller: "test" }) === 4);
  const m = await registry.metrics();
  const c = { controller: "test" };
  t.same(["error", "requeue_after", "requeue", "success"].map((result) => sampleValue(m, "controller_runtime_reconcile_total", { ...c, result })), [1, 1, 1, 1], "one of each result");
  t.equal(sampleValue(m, "controller_runtime_reconcile_errors_total", c), 1);
  t.equal(sampleValue(m, "controller_runtime_max_concurrent_reconciles", c), 3);
  t.equal(sampleValue(m, "controller_runtime_active_workers", c), 0, "no worker busy now");
  t.equal(sampleValue(m, "workqueue_retries_total", { name: "test", controller: "test" }), 3, "the backoff after the error and the two requeues");
  t.equal(sampleValue(m, "workqueue_adds_total", { name: "test", controller: "test" }), 4, "the watch's add and the three re-adds");
  t.ok(promtoolCheck(m).ok, "valid on its own");
});
