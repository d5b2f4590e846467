/**
 * operon_step_start_latency_seconds: each started step is counted once, from the moment it
 * became ready (its last parent seen ended, or its run created) to its start, labelled by
 * whether it had to wait for an organization slot. And the queue-position refresh interval
 * grows with the number of waiting runs, so position-only writes stay bounded. The executor
 * is in memory (steps end when the test says, with a chosen "seen ended" time); reconciler,
 * planner, ledger, controller and run store are the real ones.
 */
import t from "tap";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLocalObjectStore } from "../../adapters/local/object-store.js";
import { createLocalRunStore } from "../../adapters/local/run-store.js";
import { createEngine, STEP_START_BUCKETS } from "../../engine/engine.js";
import { memoryExecutor } from "../support/memory-executor.js";
import { stepStartCounts } from "../support/metrics.js";
import { sleep, until } from "../support/wait.js";

const dir = mkdtempSync(join(tmpdir(), "operon-start-latency-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const submitted: string[] = [];
const mem = memoryExecutor((task) => submitted.push(`${task.runId}/${task.stepId}`));
const executor = mem.executor;
/** Ends a step, as if its end had been seen `agoMs` before now. */
const finish = (runId: string, stepId: string, agoMs = 0) => {
  const now = Date.now();
  mem.finish(runId, stepId, { finishedAt: Math.floor(now / 1000) * 1000, endSeenAt: now - agoMs, outputs: [{ filename: `${stepId}.txt`, key: `k/${stepId}.txt`, size: 1, sha256: "0".repeat(64), position: 0 }] });
};
const started = (runId: string, stepId: string) => submitted.includes(`${runId}/${stepId}`);

const runs = createLocalRunStore(dir);
const store = createLocalObjectStore({ root: dir, publicUrl: "http://localhost", signingSecret: "x".repeat(40) });
const engine = createEngine({ runs, executor, store, clock: { now: () => Date.now() }, orgConcurrency: () => 1, workers: 2 });
t.teardown(() => engine.stop());
const step = (stepId: string, input: string, dependsOn?: string[]) => ({ stepId, toolName: "samtools", parameters: { command: "flagstat", inputFile: input }, ...(dependsOn ? { dependsOn } : {}) });
const submit = async (org: string, spec: unknown) => {
  const r = await engine.submit({ organization: org, workspace: "ws", keyId: "k", source: { kind: "inline" }, input: {}, spec });
  if (!r.ok) throw new Error(r.error.message);
  return r.run.id;
};

t.test("a dependent step's latency runs from its parent's end as seen by the executor", async (t) => {
  const before = await stepStartCounts(engine.metrics);
  const id = await submit("solo", { steps: [step("a", "x.bam"), step("b", "${a.outputFile}", ["a"])] });
  await until("a started", () => started(id, "a") || undefined);
  const mid = await stepStartCounts(engine.metrics);
  t.equal(mid.free - before.free, 1, "the first step counted, with a free slot");
  t.equal(mid.count("free", "first") - before.count("free", "first"), 1, "as a first step");
  t.ok(mid.sum("free") - before.sum("free") < 1, "a first step's latency runs from its run's creation");
  // a ended 1.6 s ago as far as the executor is concerned (after its run was created: a step
  // is never ready before its run exists): b's latency includes those 1.6 s.
  await sleep(1700);
  finish(id, "a", 1600);
  await until("b started", () => started(id, "b") || undefined);
  const after = await stepStartCounts(engine.metrics);
  t.equal(after.free - before.free, 2, "b counted once, with a free slot (a's own slot freed)");
  t.equal(after.count("free", "dependent") - before.count("free", "dependent"), 1, "as a dependent step");
  t.equal(after.waited, before.waited, "nothing waited for a slot");
  t.equal(after.atMost("free", 1.5) - before.atMost("free", 1.5), 1, "b's latency is over 1.5 s: measured from a's end as seen, not from this reconcile");
  t.equal(after.atMost("free", 2.5) - before.atMost("free", 2.5), 2, "and under 2.5 s");
  finish(id, "b");
  await until("run completed", async () => ((await runs.get(id))?.status === "completed" ? true : undefined));
  const end = await stepStartCounts(engine.metrics);
  t.equal(end.free + end.waited, after.free + after.waited, "nothing more is counted once the run is over");
});

t.test("a step that waited for the organization's slot is labelled waited", async (t) => {
  const before = await stepStartCounts(engine.metrics);
  const first = await submit("busy", { steps: [step("a", "x.bam")] });
  await until("first started", () => started(first, "a") || undefined);
  const second = await submit("busy", { steps: [step("a", "y.bam")] });
  await until("second waiting", async () => ((await runs.get(second))?.steps[0]?.status === "waiting" ? true : undefined));
  await sleep(300);
  t.notOk(started(second, "a"), "one slot: the second run's step waits");
  finish(first, "a");
  await until("second started", () => started(second, "a") || undefined);
  const after = await stepStartCounts(engine.metrics);
  t.equal(after.free - before.free, 1, "the first run's step had a free slot");
  t.equal(after.waited - before.waited, 1, "the second run's step is counted as having waited");
  t.ok(after.sum("waited") - before.sum("waited") >= 0.3, "its latency includes the wait");
  finish(second, "a");
});

t.test("the histogram has the documented buckets", async (t) => {
  const text = await engine.metrics.metrics();
  for (const le of STEP_START_BUCKETS) t.match(text, `operon_step_start_latency_seconds_bucket{le="${le}",slot="free",step="dependent"}`);
  t.match(text, /# HELP operon_step_start_latency_seconds /);
});
