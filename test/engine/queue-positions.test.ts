/**
 * Queue positions of waiting steps: computed when a run is read (never stored), so they are
 * exact at every read and a slot that frees rewrites no waiting run (writing positions made
 * status writes grow with the square of the queue — the cluster benchmark's PipelineRun
 * status writes). The executor here is an in-memory one whose steps
 * finish when the test says, so slots free at known moments; the reconciler, planner,
 * ledger, controller and run store are the real ones.
 */
import t from "tap";
import { EventEmitter } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLocalObjectStore } from "../../adapters/local/object-store.js";
import { createLocalRunStore } from "../../adapters/local/run-store.js";
import { createEngine } from "../../engine/engine.js";
import type { ObservedStepState, RunRecord, RunStore, StepExecutor } from "../../core/ports.js";
import { until } from "../support/wait.js";

const dir = mkdtempSync(join(tmpdir(), "operon-positions-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const events = new EventEmitter();
const steps = new Map<string, ObservedStepState>();
const executor: StepExecutor = {
  submit: async (task) => { if (!steps.has(task.runId)) { steps.set(task.runId, { phase: "running", attempt: task.attempt, startedAt: Date.now() }); events.emit("c", task.runId); } },
  observe: async (runId) => new Map(steps.has(runId) ? [["a", { ...(steps.get(runId) as ObservedStepState) }]] : []),
  kill: async () => undefined,
  watch: (fn) => { events.on("c", fn); return () => events.off("c", fn); },
  logs: async () => undefined,
};
const finish = (runId: string) => { steps.set(runId, { ...(steps.get(runId) as ObservedStepState), phase: "completed", exitCode: 0, finishedAt: Date.now(), outputs: [] }); events.emit("c", runId); };

const base = createLocalRunStore(dir);
const writes = new Map<string, number>();
const runs: RunStore = { ...base, update: async (id, change) => base.update(id, (r) => { const n = change(r); if (n) writes.set(id, (writes.get(id) ?? 0) + 1); return n; }) };
const store = createLocalObjectStore({ root: dir, publicUrl: "http://localhost", signingSecret: "x".repeat(40) });
const engine = createEngine({ runs, executor, store, clock: { now: () => Date.now() }, orgConcurrency: () => 1, workers: 2 });
t.teardown(() => engine.stop());

t.test("30 queued runs, one slot", async (t) => {
  const ids: string[] = [];
  for (let i = 0; i < 30; i++) {
    const r = await engine.submit({ organization: "acme", workspace: "ws", keyId: "k", source: { kind: "inline" }, input: {}, spec: { steps: [{ stepId: "a", toolName: "samtools", parameters: { command: "flagstat", inputFile: "x.bam" } }] } });
    if (!r.ok) throw new Error(r.error.message);
    ids.push(r.run.id);
  }
  const positions = async () => (await engine.withQueuePositions(await Promise.all(ids.map(async (id) => (await runs.get(id)) as RunRecord)))).map((r) => r.steps[0]?.queuePosition);
  await until("29 runs waiting", async () => (await positions()).includes(29));
  t.same(await positions(), [undefined, ...Array.from({ length: 29 }, (_, i) => i + 1)], "each waiting step shows its place");
  t.equal((await runs.get(ids[5] as string))?.steps[0]?.queuePosition, undefined, "the stored record holds no position");
  writes.clear();
  // Free the slot 10 times in quick succession: every waiting run moves up 10 places.
  for (let i = 0; i < 10; i++) {
    finish(ids[i] as string);
    await until(`run ${i + 1} started`, () => steps.has(ids[i + 1] as string));
    const now = await positions();
    t.same(now.slice(i + 2), Array.from({ length: 28 - i }, (_, k) => k + 1), `after ${i + 1} slot(s) freed, every position is exact at once`);
  }
  const last = ids[29] as string;
  t.equal(writes.get(last) ?? 0, 0, "the last run was not rewritten by 10 moves of the queue");
  t.ok(await until("run 11 recorded running", async () => (await runs.get(ids[10] as string))?.steps[0]?.status === "running"), "the run that got the slot is recorded running");
});
