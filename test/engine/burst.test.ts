/**
 * A burst through the real engine (controller, reconciler, quota ledger) where, as in
 * cluster mode, every write and every create is a network round trip and every read is a
 * cache hit: 60 runs of a → (b, c) → d → e in one organization, limit 5. The queue must
 * drain (a reconcile served from caches alone once starved the event loop: the operator
 * froze) and never more than 5 steps may run at once (slots are assumed for all admitted
 * steps before the first create, so no other reconcile spends them meanwhile).
 */
import t from "tap";
import { EventEmitter } from "node:events";
import { z } from "zod";
import { createEngine } from "../../engine/engine.js";
import { BUILTIN_TOOLS, createCatalogue, type ToolDefinition } from "../../core/tools/index.js";
import type { ObjectStore, ObservedStepState, RunRecord, RunStore, StepExecutor } from "../../core/ports.js";

const noop: ToolDefinition = {
  id: "noop", description: "does nothing (test tool)", version: "1", image: "busybox:1.36", localExecutables: ["true"], fileParams: [], defaultCommand: "noop",
  inputSchema: z.strictObject({ command: z.literal("noop").optional() }),
  commands: { noop: { description: "noop", required: [], build: () => ({ argv: ["true"], inputs: [], outputs: [], mkdirs: [] }) } },
};
const roundTrip = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

const records = new Map<string, RunRecord>();
const runEvents = new EventEmitter();
let completed = 0;
const runs: RunStore = {
  async create(r) { records.set(r.id, structuredClone(r)); runEvents.emit("c", r.id); },
  async get(id) { const r = records.get(id); return r && structuredClone(r); },
  async list() { return [...records.values()].map((r) => structuredClone(r)); },
  async update(id, change) {
    const cur = records.get(id);
    if (!cur) return undefined;
    const next = change(structuredClone(cur));
    if (!next) return cur;
    await roundTrip(1);
    if (next.status === "completed" && cur.status !== "completed") completed++;
    records.set(id, next);
    runEvents.emit("c", id);
    return next;
  },
  watch(fn) { runEvents.on("c", fn); return () => runEvents.off("c", fn); },
};

const steps = new Map<string, Map<string, ObservedStepState>>();
const stepEvents = new EventEmitter();
let running = 0;
let maxRunning = 0;
const executor: StepExecutor = {
  async submit(task) {
    await roundTrip(5); // the Job create
    const m = steps.get(task.runId) ?? new Map<string, ObservedStepState>();
    steps.set(task.runId, m);
    if (m.has(task.stepId)) return;
    m.set(task.stepId, { phase: "running", attempt: task.attempt, startedAt: Date.now() });
    running++;
    maxRunning = Math.max(maxRunning, running);
    stepEvents.emit("c", task.runId);
    setTimeout(() => {
      running--;
      m.set(task.stepId, { phase: "completed", attempt: task.attempt, startedAt: Date.now(), finishedAt: Date.now(), exitCode: 0, outputs: [] });
      stepEvents.emit("c", task.runId);
    }, 5);
  },
  async observe(runId) { return new Map(steps.get(runId) ?? []); },
  async kill() { /* nothing runs long enough */ },
  watch(fn) { stepEvents.on("c", fn); return () => stepEvents.off("c", fn); },
  async logs() { return undefined; },
};
const store = { list: async () => ({ items: [] }), head: async () => undefined, put: async (key: string) => ({ key, size: 0, lastModified: new Date() }) } as unknown as ObjectStore;

t.test("60 runs, one organization, limit 5: drains, never over the limit", async (t) => {
  const engine = createEngine({ runs, executor, store, clock: { now: () => Date.now() }, orgConcurrency: () => 5, workers: 8, tools: createCatalogue([...BUILTIN_TOOLS, noop]) });
  t.teardown(() => engine.stop());
  const step = (stepId: string, dependsOn?: string[]) => ({ stepId, toolName: "noop", ...(dependsOn ? { dependsOn } : {}), parameters: {} });
  const spec = { steps: [step("a"), step("b", ["a"]), step("c", ["a"]), step("d", ["b", "c"]), step("e", ["d"])] };
  await Promise.all(Array.from({ length: 60 }, async () => {
    const r = await engine.submit({ organization: "acme", workspace: "ws", keyId: "k", spec, source: { kind: "inline" }, input: {} });
    if (!r.ok) throw new Error(r.error.message);
  }));
  const deadline = Date.now() + 30_000;
  while (completed < 60 && Date.now() < deadline) await roundTrip(20);
  t.equal(completed, 60, "every run completed (the loop never froze)");
  t.ok(maxRunning <= 5, `at most 5 steps ran at once (saw ${maxRunning})`);
  t.equal(maxRunning, 5, "and the limit was used");
});

t.test("a reconcile assumes the slots of all the steps it admits before its first create", async (t) => {
  const { createReconciler } = await import("../../engine/reconciler.js");
  const { Ledger } = await import("../../core/quota.js");
  const ledger = new Ledger(() => 2);
  let release!: () => void;
  const gate = new Promise<void>((r) => { release = r; });
  const submitted: string[] = [];
  const slow: StepExecutor = { ...executor, submit: async (task) => { submitted.push(task.stepId); await gate; }, observe: async () => new Map() };
  const reconcile = createReconciler({ runs, executor: slow, store, ledger, clock: { now: () => Date.now() }, tools: createCatalogue([...BUILTIN_TOOLS, noop]) });
  const id = "run-01jz00000000000000000000aa";
  const step = (stepId: string) => ({ stepId, toolName: "noop", parameters: {} });
  await runs.create({
    id, organization: "solo", workspace: "ws", pipelineId: "p", name: "p", source: { kind: "inline" }, spec: { steps: [step("x"), step("y")] },
    parameters: {}, inputChecksums: {}, outputFolder: "pipelines/x", createdAt: new Date().toISOString(), startedAt: null, completedAt: null,
    status: "queued", progressPct: 0, error: null, cancelRequested: false, submittedBy: "k",
    steps: ["x", "y"].map((s) => ({ stepId: s, toolName: "noop", status: "pending" as const, startedAt: null, completedAt: null, exitCode: null, error: null, attempt: 0, outputs: [] })),
  });
  const pending = reconcile(id);
  while (submitted.length === 0) await roundTrip(1);
  t.same(submitted, ["x"], "the first create is in flight");
  t.equal(ledger.inUse("solo"), 2, "both admitted steps already hold their slots");
  t.same(ledger.admittedRuns("solo"), [], "so nobody else is admitted meanwhile");
  release();
  await pending;
  t.same(submitted, ["x", "y"]);
});
