/**
 * Faults in embedded mode, on the real engine, run store, object store and sandboxed
 * processes: the final run.json write fails once (it is written again, the run's record is
 * not marked finished before it), the executor forgets a completed step mid-run (as a
 * garbage-collected Job does in cluster mode: the step is not run again), and a finished
 * run leaves no working-directory copies of its inputs and outputs behind.
 */
import t, { type Test } from "tap";
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { createLocalObjectStore } from "../../adapters/local/object-store.js";
import { createLocalRunStore } from "../../adapters/local/run-store.js";
import { createProcessExecutor } from "../../adapters/local/process-executor.js";
import { createEngine } from "../../engine/engine.js";
import { StoreError, type ObjectStore, type RunRecord, type StepExecutor } from "../../core/ports.js";
import { BUILTIN_TOOLS, createCatalogue, type ToolDefinition } from "../../core/tools/index.js";
import { until } from "../support/wait.js";

const catTool: ToolDefinition = {
  id: "cat", description: "Copies its input (test tool)", version: "1", image: "busybox:1.36", localExecutables: ["cp"], fileParams: ["inputFile"], defaultCommand: "cat",
  inputSchema: z.strictObject({ command: z.literal("cat").optional(), inputFile: z.string(), outputFile: z.string() }),
  commands: { cat: { description: "cp", required: ["inputFile", "outputFile"], build: (p) => ({ argv: ["cp", "in/1/x", String(p.outputFile)], inputs: [{ param: "inputFile", source: String(p.inputFile), local: "in/1/x" }], outputs: [{ path: String(p.outputFile), secondary: [] }], mkdirs: [] }) } },
};
const tools = createCatalogue([...BUILTIN_TOOLS, catTool]);
const WS = "orgs/o/workspaces/ws/";
const chain = { steps: [
  { stepId: "a", toolName: "cat", parameters: { inputFile: "data/in.txt", outputFile: "a.txt" } },
  { stepId: "b", toolName: "cat", dependsOn: ["a"], parameters: { inputFile: "${a.outputFile}", outputFile: "b.txt" } },
  { stepId: "c", toolName: "cat", dependsOn: ["b"], parameters: { inputFile: "${b.outputFile}", outputFile: "c.txt" } },
] };

async function harness(t: Test, wrap: { store?: (s: ObjectStore) => ObjectStore; executor?: (e: StepExecutor) => StepExecutor } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "operon-durability-"));
  const raw = createLocalObjectStore({ root: dir, publicUrl: "http://localhost", signingSecret: "x".repeat(40) });
  const store = wrap.store ? wrap.store(raw) : raw;
  const processes = createProcessExecutor({ dataDir: dir, store });
  const executor = wrap.executor ? wrap.executor(processes) : processes;
  const errors: string[] = [];
  const engine = createEngine({ runs: createLocalRunStore(dir), executor, store, clock: { now: () => Date.now() }, orgConcurrency: () => 5, tools, log: (m) => errors.push(m) });
  t.teardown(async () => { await engine.stop(); await processes.shutdown(); rmSync(dir, { recursive: true, force: true }); });
  await raw.put(`${WS}data/in.txt`, "payload\n");
  const submit = async () => {
    const r = await engine.submit({ organization: "o", workspace: "ws", keyId: "k", spec: chain, source: { kind: "inline" }, input: {} });
    if (!r.ok) throw new Error(r.error.message);
    return r.run;
  };
  const finished = (id: string) => until(`run ${id} to finish`, async () => { const r = await engine.runs.get(id); return r && ["completed", "failed", "cancelled"].includes(r.status) ? r : undefined; }, 60_000);
  const manifest = async (run: RunRecord) => {
    const { body } = await raw.get(`${WS}${run.outputFolder}/run.json`);
    let s = "";
    for await (const c of body) s += Buffer.from(c).toString();
    return JSON.parse(s) as { status: string; steps: Array<{ stepId: string; status: string }> };
  };
  return { dir, raw, engine, submit, finished, manifest, errors };
}

t.test("the final run.json write fails once: it is written again, and says completed", async (t) => {
  let failures = 0;
  const h = await harness(t, {
    store: (s) => ({
      ...s,
      put: async (key, body, options) => {
        if (key.endsWith("/run.json") && typeof body === "string" && JSON.parse(body).status === "completed" && failures === 0) {
          failures++;
          throw new StoreError("Unavailable", "injected: the store is briefly unreachable");
        }
        return s.put(key, body, options);
      },
    }),
  });
  const run = await h.submit();
  const done = await h.finished(run.id);
  t.equal(done.status, "completed");
  t.equal(failures, 1, "the terminal write failed once");
  t.equal((await h.manifest(done)).status, "completed", "run.json says completed");
  t.ok(h.errors.some((e) => /injected/.test(e)), "the failed reconcile was reported and retried");
});

t.test("a completed step the executor no longer shows is not run again", async (t) => {
  const submitted = new Map<string, number>();
  let forget: string | undefined;
  const h = await harness(t, {
    executor: (e) => ({
      ...e,
      submit: async (task) => { submitted.set(task.stepId, (submitted.get(task.stepId) ?? 0) + 1); if (task.stepId === "b") forget = task.runId; return e.submit(task); },
      // Once b has started, step a vanishes from what the executor reports (its Job was
      // garbage-collected, its state lost).
      observe: async (runId) => { const m = await e.observe(runId); if (forget === runId) m.delete("a"); return m; },
      watch: (fn) => e.watch(fn),
      kill: (...a) => e.kill(...a),
      logs: (...a) => e.logs(...a),
    }),
  });
  const run = await h.submit();
  const done = await h.finished(run.id);
  t.equal(done.status, "completed", JSON.stringify(done.steps));
  t.strictSame(Object.fromEntries(submitted), { a: 1, b: 1, c: 1 }, "every step ran once");
  t.strictSame(done.steps.map((s) => [s.stepId, s.status, s.attempt]), [["a", "completed", 1], ["b", "completed", 1], ["c", "completed", 1]]);
  t.ok(done.steps[0]?.outputs.length, "step a keeps its recorded outputs");
});

t.test("a finished run leaves no working-directory copies behind", async (t) => {
  const h = await harness(t);
  const run = await h.submit();
  t.equal((await h.finished(run.id)).status, "completed");
  const walk = (d: string): string[] => (existsSync(d) ? readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(d, e.name)) : [join(d, e.name)])) : []);
  const left = walk(join(h.dir, "work", run.id));
  t.strictSame(left.map((f) => f.slice(h.dir.length + run.id.length + 7)).sort(), ["a-1/passwd", "a-1/state.json", "a-1/step.log", "b-1/passwd", "b-1/state.json", "b-1/step.log", "c-1/passwd", "c-1/state.json", "c-1/step.log"], "only each step's state, log and passwd stay");
  t.ok(left.reduce((n, f) => n + statSync(f).size, 0) < 16 * 1024, "a few KiB in all");
  t.strictSame((await h.manifest(await h.engine.runs.get(run.id) as RunRecord)).steps.map((s) => s.status), ["completed", "completed", "completed"]);
});
