/**
 * The embedded engine's scheduling with real processes: the per-organization limit under
 * load, waiting reasons, timeouts and cancellation freeing their slots, a failing step, and
 * a restart in the middle of a run. The tools are two tiny test tools (`sleep`, `ls`) added
 * to the real catalogue, so steps take a controlled time or fail on purpose.
 */
import t from "tap";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { testCatalogue } from "../support/test-tools.js";
import { sleep, until } from "../support/wait.js";
import type { PipelineSpec } from "../../core/spec/schema.js";
import type { RunRecord } from "../../core/ports.js";
import { createLocalObjectStore } from "../../adapters/local/object-store.js";
import { createLocalRunStore } from "../../adapters/local/run-store.js";
import { createProcessExecutor } from "../../adapters/local/process-executor.js";
import { createEngine, type Engine } from "../../engine/engine.js";

const tools = testCatalogue();

function harness(dir: string, limit: number) {
  const clock = { now: () => Date.now() };
  const store = createLocalObjectStore({ root: dir, publicUrl: "http://localhost", signingSecret: "x".repeat(40) });
  const executor = createProcessExecutor({ dataDir: dir, store, clock });
  const engine = createEngine({ runs: createLocalRunStore(dir), executor, store, clock, orgConcurrency: () => limit, tools, workers: 4 });
  return { store, executor, engine, stop: async () => { await engine.stop(); await executor.shutdown(); } };
}

/** A harness on a data dir a stopped server left: recover() first, then the engine (wiring/runtime.ts's order). */
async function harnessAfterRestart(dir: string, limit: number) {
  const clock = { now: () => Date.now() };
  const store = createLocalObjectStore({ root: dir, publicUrl: "http://localhost", signingSecret: "x".repeat(40) });
  const executor = createProcessExecutor({ dataDir: dir, store, clock });
  await executor.recover();
  const engine = createEngine({ runs: createLocalRunStore(dir), executor, store, clock, orgConcurrency: () => limit, tools, workers: 4 });
  return { store, executor, engine, stop: async () => { await engine.stop(); await executor.shutdown(); } };
}

const parallel = (n: number, seconds: number, timeout?: number): PipelineSpec => ({
  steps: Array.from({ length: n }, (_, i) => ({ stepId: `s${i}`, toolName: "sleep", parameters: { seconds }, ...(timeout ? { timeout } : {}) })),
});

async function submit(engine: Engine, org: string, spec: PipelineSpec): Promise<RunRecord> {
  const r = await engine.submit({ organization: org, workspace: "ws", keyId: "key_test", spec, source: { kind: "inline" }, input: {} });
  if (!r.ok) throw new Error(r.error.message);
  return r.run;
}

/** How often the tests here poll (the first one's samples ride on it). */
const POLL_MS = 20;

const finished = (r: RunRecord | undefined) => r !== undefined && ["completed", "failed", "cancelled"].includes(r.status);

t.test("3 organizations × 20 runs × 3 parallel steps: never more than 5 running per organization", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "operon-sched-"));
  const h = harness(dir, 5);
  t.teardown(async () => { await h.stop(); rmSync(dir, { recursive: true, force: true }); });
  const runs: RunRecord[] = [];
  // The first two runs of each organization (first come, first served: admitted first) have
  // 12 s steps, 6 of them for 5 slots, so the limit is reached even on a heavily loaded
  // machine (with 2 s steps a CI run saw 3 at once; with 4 s steps, on 2 cores also building
  // Kubernetes, 1); the other 18 runs' 0.3 s steps then churn through the slots.
  for (let i = 0; i < 20; i++) for (const org of ["o1", "o2", "o3"]) runs.push(await submit(h.engine, org, parallel(3, i < 2 ? 12 : 0.3)));
  const max = new Map<string, number>();
  let samples = 0;
  const sample = async () => {
    const counts = new Map<string, number>();
    for (const r of runs) {
      for (const o of (await h.executor.observe(r.id)).values()) if (o.phase === "running") counts.set(r.organization, (counts.get(r.organization) ?? 0) + 1);
    }
    for (const [org, n] of counts) max.set(org, Math.max(max.get(org) ?? 0, n));
    samples++;
  };
  const unwatch = h.executor.watch(() => { void sample(); });
  await until("every run to finish", async () => { await sample(); return (await Promise.all(runs.map((r) => h.engine.runs.get(r.id)))).every(finished); }, 120_000, POLL_MS);
  unwatch();
  const final = await Promise.all(runs.map((r) => h.engine.runs.get(r.id)));
  t.ok(final.every((r) => r?.status === "completed"), "every run completes");
  t.ok(samples > 50, `sampled continuously (${samples} samples)`);
  for (const org of ["o1", "o2", "o3"]) {
    t.ok((max.get(org) ?? 0) <= 5, `${org}: at most 5 running (max seen ${max.get(org)})`);
    t.ok((max.get(org) ?? 0) >= 4, `${org}: the limit is actually used (max seen ${max.get(org)})`);
  }
});

t.test("a step over the limit waits with a reason and position, and never fails for it", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "operon-sched-"));
  const h = harness(dir, 1);
  t.teardown(async () => { await h.stop(); rmSync(dir, { recursive: true, force: true }); });
  const run = await submit(h.engine, "o1", parallel(3, 0.3));
  await until("two steps waiting", async () => ((await h.engine.runs.get(run.id))?.steps.filter((s) => s.status === "waiting").length ?? 0) === 2, 30_000, POLL_MS);
  const [r] = await h.engine.withQueuePositions([(await h.engine.runs.get(run.id)) as RunRecord]);
  const waiting = r?.steps.filter((s) => s.status === "waiting") ?? [];
  t.same(waiting.map((s) => [s.waitingReason, s.queuePosition]), [["OrgConcurrencyLimit", 1], ["OrgConcurrencyLimit", 2]]);
  await until("the run to finish", async () => finished(await h.engine.runs.get(run.id)), 30_000, POLL_MS);
  t.equal((await h.engine.runs.get(run.id))?.status, "completed");
});

t.test("timeout and cancel free their slots", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "operon-sched-"));
  const h = harness(dir, 1);
  t.teardown(async () => { await h.stop(); rmSync(dir, { recursive: true, force: true }); });
  const slow = await submit(h.engine, "o1", parallel(1, 30, 300));
  const next = await submit(h.engine, "o1", parallel(1, 0.05));
  const states = async () => Promise.all([slow, next].map(async (r) => { const x = await h.engine.runs.get(r.id); return [x?.status, x?.steps.map((st) => [st.status, st.error, st.waitingReason]), [...(await h.executor.observe(r.id))]]; }));
  await until(async () => `the waiting run to finish: ${JSON.stringify(await states())}`, async () => finished(await h.engine.runs.get(next.id)), 15_000, POLL_MS);
  const s = await h.engine.runs.get(slow.id);
  t.equal(s?.status, "failed");
  t.match(s?.steps[0]?.error, /timed out after 300 ms/);
  t.equal((await h.engine.runs.get(next.id))?.status, "completed", "the waiting run got the slot");

  const long = await submit(h.engine, "o1", parallel(1, 30));
  const after = await submit(h.engine, "o1", parallel(1, 0.05));
  await until("the long step running", async () => (await h.engine.runs.get(long.id))?.steps[0]?.status === "running", 30_000, POLL_MS);
  // The reconciler reaches the second run in its own tick: wait for it to leave "pending".
  await until("the second run past pending", async () => (await h.engine.runs.get(after.id))?.steps[0]?.status !== "pending", 30_000, POLL_MS);
  t.equal((await h.engine.runs.get(after.id))?.steps[0]?.status, "waiting", "the second run waits for the slot");
  const t0 = Date.now();
  await h.engine.cancel((await h.engine.runs.get(long.id)) as RunRecord);
  const states2 = async () => Promise.all([long, after].map(async (r) => { const x = await h.engine.runs.get(r.id); return [x?.status, x?.cancelRequested, x?.steps.map((st) => [st.status, st.error, st.waitingReason]), [...(await h.executor.observe(r.id))]]; }));
  await until(async () => `the second run to finish: ${JSON.stringify(await states2())}`, async () => finished(await h.engine.runs.get(after.id)), 15_000, POLL_MS);
  t.ok(Date.now() - t0 < 10_000, "cancel took effect promptly");
  t.equal((await h.engine.runs.get(long.id))?.status, "cancelled");
  t.equal((await h.engine.runs.get(after.id))?.status, "completed");
});

t.test("a failing step fails the run with its stderr, and nothing downstream starts", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "operon-sched-"));
  const h = harness(dir, 5);
  t.teardown(async () => { await h.stop(); rmSync(dir, { recursive: true, force: true }); });
  const run = await submit(h.engine, "o1", {
    steps: [
      { stepId: "list", toolName: "ls", parameters: { path: "/nonexistent/operon" } },
      { stepId: "after", toolName: "sleep", dependsOn: ["list"], parameters: { seconds: 0.01 } },
    ],
  });
  await until("the run to finish", async () => finished(await h.engine.runs.get(run.id)), 30_000, POLL_MS);
  const r = await h.engine.runs.get(run.id);
  t.equal(r?.status, "failed");
  t.match(r?.error, /step list failed: exit code 2; stderr: .*No such file or directory/);
  t.equal(r?.steps[1]?.status, "skipped");
  t.notOk((await h.executor.observe(run.id)).has("after"), "the downstream step was never started");
});

t.test("a restart in the middle of a run finishes it without running a completed step again", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "operon-sched-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const spec: PipelineSpec = { steps: [
    { stepId: "first", toolName: "sleep", parameters: { seconds: 0.05 } },
    { stepId: "second", toolName: "sleep", dependsOn: ["first"], parameters: { seconds: 1.5 } },
  ] };
  const h1 = harness(dir, 5);
  const run = await submit(h1.engine, "o1", spec);
  await until(async () => `second to run: ${JSON.stringify((await h1.engine.runs.get(run.id))?.steps)}`, async () => (await h1.engine.runs.get(run.id))?.steps[1]?.status === "running", 60_000, POLL_MS);
  await h1.stop(); // the server goes away; "second" dies with it

  // As wiring/runtime.ts starts a server: the executor recovers before the engine (and its
  // controller's first resync) exists.
  const h2 = await harnessAfterRestart(dir, 5);
  t.teardown(() => h2.stop());
  await until(async () => `the run to finish after the restart: ${JSON.stringify([(await h2.engine.runs.get(run.id))?.steps, await h2.executor.observe(run.id)])}`, async () => finished(await h2.engine.runs.get(run.id)), 60_000, POLL_MS);
  const r = await h2.engine.runs.get(run.id);
  t.equal(r?.status, "completed");
  t.equal(r?.steps[0]?.attempt, 1, "the completed step ran once");
  t.equal(r?.steps[1]?.attempt, 2, "the lost step ran again as attempt 2");
  t.same(readdirSync(join(dir, "work", run.id)).sort(), ["first-1", "second-1", "second-2"]);
});

t.test("run.json is written when the run starts and updated when it ends", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "operon-sched-"));
  const h = harness(dir, 5);
  t.teardown(async () => { await h.stop(); rmSync(dir, { recursive: true, force: true }); });
  const run = await submit(h.engine, "o1", parallel(1, 0.5));
  const key = `orgs/o1/workspaces/ws/${run.outputFolder}/run.json`;
  const read = async () => { const { body } = await h.store.get(key); let s = ""; for await (const c of body) s += Buffer.from(c).toString(); return JSON.parse(s) as { status: string; completedAt: string | null }; };
  await until("run.json written", async () => (await h.store.head(key)) !== undefined, 30_000, POLL_MS);
  const early = await read();
  t.equal(early.status, "running", "written at the start");
  t.equal(early.completedAt, null);
  await until("the run to finish", async () => finished(await h.engine.runs.get(run.id)), 30_000, POLL_MS);
  // The manifest is written right after the run record turns final.
  await until("run.json updated", async () => (await read()).status !== "running", 5000, POLL_MS);
  const late = await read();
  t.equal(late.status, "completed", "updated at the end");
  t.ok(late.completedAt);
});

t.test("reconciling again with nothing changed changes nothing", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "operon-sched-"));
  const h = harness(dir, 1);
  t.teardown(async () => { await h.stop(); rmSync(dir, { recursive: true, force: true }); });
  const run = await submit(h.engine, "o1", parallel(2, 1));
  // Settled: one step running (with its tool's provenance recorded), the other waiting.
  await until("one step running with its provenance, one waiting", async () => { const r = await h.engine.runs.get(run.id); return (r?.steps.some((s) => s.status === "waiting") ?? false) && (r?.steps.some((s) => s.toolVersion) ?? false); }, 30_000, POLL_MS);
  await sleep(100);
  const before = JSON.stringify(await h.engine.runs.get(run.id));
  const observedBefore = JSON.stringify([...(await h.executor.observe(run.id))].map(([id, o]) => [id, o.phase, o.attempt]));
  let writes = 0;
  const unwatch = h.engine.runs.watch((id) => { if (id === run.id) writes++; });
  await h.engine.reconcile(run.id);
  await h.engine.reconcile(run.id);
  unwatch();
  t.equal(writes, 0, "no write to the run");
  const after = JSON.stringify(await h.engine.runs.get(run.id));
  t.equal(after, before, "the run is unchanged");
  t.equal(JSON.stringify([...(await h.executor.observe(run.id))].map(([id, o]) => [id, o.phase, o.attempt])), observedBefore, "no step started or stopped");
});
