/**
 * What the process executor keeps per run does not grow with the runs it has run: a run the
 * engine's run store reports ended (or gone) is forgotten, a step still running is dropped
 * when it finishes, a tool run is forgotten when its request ends, and a restart does not
 * reload the steps of ended runs.
 */
import t from "tap";
import { EventEmitter } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLocalObjectStore } from "../../adapters/local/object-store.js";
import { createProcessExecutor } from "../../adapters/local/process-executor.js";
import type { RunRecord, StepTask } from "../../core/ports.js";
import { forgetEndedRuns } from "../../wiring/runtime.js";
import { until } from "../support/wait.js";

const dir = mkdtempSync(join(tmpdir(), "operon-executor-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const store = createLocalObjectStore({ root: dir, publicUrl: "http://localhost", signingSecret: "x".repeat(40) });
const WS = "orgs/o/workspaces/w/";

function executor() {
  const ex = createProcessExecutor({ dataDir: dir, store, sandbox: "off" });
  t.teardown(() => ex.shutdown());
  return ex;
}

const task = (runId: string, argv: string[]): StepTask => ({
  runId, organization: "o", stepId: "s", attempt: 1, toolName: "test",
  invocation: { argv, inputs: [], outputs: [], mkdirs: [] },
  workspaceRoot: WS, runRoot: `${WS}pipelines/${runId}/`, timeoutMs: 60_000,
});

async function finished(ex: ReturnType<typeof executor>, runId: string): Promise<void> {
  await until(`step of ${runId} to end`, async () => {
    const s = (await ex.observe(runId)).get("s");
    return s !== undefined && s.phase !== "running";
  });
}

/** A run store's `get` and `watch`, holding only each run's status. */
function fakeRuns() {
  const status = new Map<string, RunRecord["status"]>();
  const events = new EventEmitter();
  return {
    get: (id: string) => Promise.resolve(status.has(id) ? ({ id, status: status.get(id) } as RunRecord) : undefined),
    watch: (fn: (id: string) => void) => { events.on("change", fn); return () => { events.off("change", fn); }; },
    set(id: string, s: RunRecord["status"]) { status.set(id, s); events.emit("change", id); },
    remove(id: string) { status.delete(id); events.emit("change", id); },
  };
}

t.test("runs that end are forgotten: many runs leave nothing behind", async (t) => {
  const ex = executor();
  const runs = fakeRuns();
  const unwatch = forgetEndedRuns(runs, ex);
  t.teardown(unwatch);
  for (let i = 0; i < 30; i++) {
    const id = `run-many${i}`;
    runs.set(id, "running");
    await ex.submit(task(id, ["true"]));
    await finished(ex, id);
    t.equal(ex.cacheSizes().runs, 1, `run ${i}: only the run in progress is held`);
    runs.set(id, "completed");
    await until(`run ${id} to be forgotten`, () => ex.cacheSizes().runs === 0);
  }
  t.equal(ex.cacheSizes().runs, 0, "nothing is held after 30 runs");
  t.equal((await ex.observe("run-many0")).size, 0, "a forgotten run has no steps");
});

t.test("a run still changing is kept; a run that is gone is forgotten", async (t) => {
  const ex = executor();
  const runs = fakeRuns();
  t.teardown(forgetEndedRuns(runs, ex));
  runs.set("run-keep", "running");
  await ex.submit(task("run-keep", ["true"]));
  await finished(ex, "run-keep");
  runs.set("run-keep", "running");
  await new Promise((r) => setTimeout(r, 50));
  t.equal(ex.cacheSizes().runs, 1, "not final: kept");
  runs.remove("run-keep");
  await until("the deleted run to be forgotten", () => ex.cacheSizes().runs === 0);
  t.equal((await ex.observe("run-keep")).size, 0);
});

t.test("a step still running when its run is forgotten is dropped when it finishes", async (t) => {
  const ex = executor();
  await ex.submit(task("run-slow", ["sleep", "0.5"]));
  ex.forgetRun("run-slow");
  t.equal((await ex.observe("run-slow")).get("s")?.phase, "running", "still observed while it runs");
  await until("the running step to be dropped", () => ex.cacheSizes().runs === 0);
  t.equal((await ex.observe("run-slow")).size, 0);
});

t.test("a restart does not reload the steps of ended runs", async (t) => {
  const first = executor();
  for (const id of ["run-old-done", "run-old-live"]) {
    await first.submit(task(id, ["true"]));
    await finished(first, id);
  }
  const again = executor();
  await again.recover({ ended: async (id) => id === "run-old-done" || !id.startsWith("run-old") });
  t.equal((await again.observe("run-old-done")).size, 0, "an ended run's steps are not reloaded");
  t.equal((await again.observe("run-old-live")).get("s")?.phase, "completed", "a run in progress gets its steps back");
  t.equal(again.cacheSizes().runs, 1);
});
