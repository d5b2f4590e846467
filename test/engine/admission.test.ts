/**
 * One admission path (engine/admission.ts + the ledger, docs/architecture.md#the-organization-limit):
 * a run's steps, tool runs, renders and viewer preparations of one organization enter one
 * queue, first come first served, and what runs at once never exceeds the organization's
 * limit. The executor here is in memory and its steps end when the test says; the engine,
 * reconciler, controller, ledger, admission loop and claim store are the real ones (embedded
 * mode). The cluster half (two api-server replicas and the operator) is in
 * test/operator/admission.test.ts.
 */
import t from "tap";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLocalObjectStore } from "../../adapters/local/object-store.js";
import { createLocalRunStore } from "../../adapters/local/run-store.js";
import { createEngine, type Engine } from "../../engine/engine.js";
import { MemoryClaims } from "../../engine/admission.js";
import type { ClaimKind } from "../../core/ports.js";
import { memoryExecutor } from "../support/memory-executor.js";
import { until } from "../support/wait.js";

/** What ran, in the order it started, and the most that ran at once, per organization. */
class Recorder {
  started: string[] = [];
  running = new Map<string, number>();
  most = new Map<string, number>();
  start(org: string, name: string) {
    this.started.push(name);
    const n = (this.running.get(org) ?? 0) + 1;
    this.running.set(org, n);
    this.most.set(org, Math.max(this.most.get(org) ?? 0, n));
  }
  end(org: string) { this.running.set(org, (this.running.get(org) ?? 1) - 1); }
}

function harness(t: { teardown(fn: () => unknown): void }, limit: number) {
  const dir = mkdtempSync(join(tmpdir(), "operon-admission-"));
  const rec = new Recorder();
  const orgOfRun = new Map<string, string>();
  const nameOf = new Map<string, string>();
  const { executor, finish } = memoryExecutor((task) => {
    orgOfRun.set(task.runId, task.organization);
    rec.start(task.organization, `${nameOf.get(task.runId)}.${task.stepId}`);
  });
  const claims = new MemoryClaims();
  const runs = createLocalRunStore(dir);
  const store = createLocalObjectStore({ root: dir, publicUrl: "http://localhost", signingSecret: "x".repeat(40) });
  const engine: Engine = createEngine({ runs, executor, store, clock: { now: () => Date.now() }, orgConcurrency: () => limit, workers: 2, claims });
  t.teardown(async () => { await engine.stop(); rmSync(dir, { recursive: true, force: true }); });

  /** A run of `n` independent steps, named `name.s1`…; resolves once it is stored. */
  const run = async (org: string, name: string, n: number) => {
    const r = await engine.submit({
      organization: org, workspace: "ws", keyId: "k", source: { kind: "inline" }, input: {},
      spec: { steps: Array.from({ length: n }, (_, i) => ({ stepId: `s${i + 1}`, toolName: "samtools", parameters: { command: "flagstat", inputFile: "x.bam" } })) },
    });
    if (!r.ok) throw new Error(JSON.stringify(r));
    nameOf.set(r.run.id, name);
    return r.run.id;
  };
  /** A step ends (its slot frees). */
  const finishStep = (name: string) => {
    const [runName, stepId] = name.split(".") as [string, string];
    const runId = [...nameOf].find(([, n]) => n === runName)?.[0] as string;
    finish(runId, stepId);
    rec.end(orgOfRun.get(runId) as string);
  };
  /** A task outside runs (tool run, render, preparation) asks for a slot; its release ends it. */
  const releases = new Map<string, () => void>();
  const aborts = new Map<string, AbortController>();
  const task = (org: string, name: string, kind: ClaimKind) => {
    const ac = new AbortController();
    aborts.set(name, ac);
    const p = engine.slots(org, name, ac.signal, kind).then((release) => { rec.start(org, name); releases.set(name, () => { rec.end(org); release(); }); }, () => undefined);
    return p;
  };
  /** Wait until `org`'s demand `name` is queued (a run's steps or a claim), so the next one queues after it. */
  const queued = async (org: string, n: number) => until(`${n} waiting in ${org}`, () =>
    [...engine.ledger.allocation(org).waiting.values()].reduce((k, w) => k + w.length, 0) === n);
  const end = (name: string) => { const r = releases.get(name); if (r) { releases.delete(name); r(); } else finishStep(name); };
  return { rec, engine, claims, run, task, end, queued, aborts };
}

t.test("one organization: steps, tool runs, renders and preparations start in the order they asked, within the limit", async (t) => {
  type Row = { name: string; limit: number; demands: Array<[string, "run" | ClaimKind, number?]>; order: string[] };
  const rows: Row[] = [
    { name: "a run's steps before a later tool run", limit: 2, demands: [["R", "run", 2], ["T", "tool"]], order: ["R.s1", "R.s2", "T"] },
    { name: "a tool run before a later run's steps", limit: 2, demands: [["T", "tool"], ["R", "run", 2]], order: ["T", "R.s1", "R.s2"] },
    { name: "render, run, tool run, preparation", limit: 2, demands: [["P", "render"], ["R", "run", 2], ["T", "tool"], ["V", "preparation"]], order: ["P", "R.s1", "R.s2", "T", "V"] },
    { name: "one slot, four kinds", limit: 1, demands: [["V", "preparation"], ["T", "tool"], ["R", "run", 1], ["P", "render"]], order: ["V", "T", "R.s1", "P"] },
  ];
  for (const row of rows) {
    await t.test(row.name, async (t) => {
      const h = harness(t, row.limit);
      // The organization is full first: a blocker run holds every slot.
      await h.run("acme", "B", row.limit);
      await until("blocker running", () => h.rec.started.length === row.limit);
      const blockers = [...h.rec.started];
      let waiting = 0;
      for (const [name, kind, n] of row.demands) {
        if (kind === "run") { await h.run("acme", name, n ?? 1); waiting += n ?? 1; } else { void h.task("acme", name, kind); waiting += 1; }
        await h.queued("acme", waiting);
      }
      t.equal(h.rec.started.length, row.limit, "nothing else starts while the organization is full");
      // Free one slot at a time (the oldest running ends): each time the oldest demand starts, and only it.
      const runningNow = [...blockers];
      const order: string[] = [];
      while (order.length < row.order.length) {
        h.end(runningNow.shift() as string);
        await until(`start #${order.length + 1}`, () => h.rec.started.length === row.limit + order.length + 1);
        const next = h.rec.started.at(-1) as string;
        order.push(next);
        runningNow.push(next);
      }
      t.same(order, row.order, "first come, first served across kinds");
      t.ok((h.rec.most.get("acme") ?? 0) <= row.limit, `never more than ${row.limit} at once (most: ${h.rec.most.get("acme")})`);
      for (const name of runningNow) h.end(name);
    });
  }
});

t.test("organizations are separate; an aborted wait gives up its place; an expired claim frees its slot", async (t) => {
  const h = harness(t, 1);
  await h.run("acme", "B", 1);
  await until("blocker running", () => h.rec.started.includes("B.s1"));
  void h.task("acme", "T1", "tool");
  await h.queued("acme", 1);
  void h.task("acme", "T2", "render");
  await h.queued("acme", 2);
  void h.task("globex", "G", "render");
  await until("another organization's render starts at once", () => h.rec.started.includes("G"));
  h.aborts.get("T1")?.abort();
  await h.queued("acme", 1);
  h.end("B.s1");
  await until("T2 takes the slot T1 gave up", () => h.rec.started.includes("T2"));
  t.notOk(h.rec.started.includes("T1"), "the aborted task never starts");
  // A claim whose holder stopped renewing it (its process died) is deleted after its ttl.
  await h.claims.create({ id: "c-dead", organization: "acme", kind: "render", task: "orphan", holder: "gone", createdAt: Date.now(), ttlMs: 300 });
  await h.claims.admit("c-dead", Date.now());
  h.end("T2");
  void h.task("acme", "T3", "tool");
  await until("the orphan expires and T3 starts", () => h.rec.started.includes("T3"), 10_000);
  t.equal(await h.claims.get("c-dead"), undefined, "the expired claim is deleted");
  t.ok((h.rec.most.get("acme") ?? 0) <= 1, "never more than the limit");
  h.end("T3");
  h.end("G");
});
