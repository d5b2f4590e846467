import t from "tap";
import fc from "fast-check";
import { MAX_ATTEMPTS, planRun, readySteps, stepTimeoutMs, WAITING_REASON, type ObservedStep, type PlanInput, type PlanStep } from "../../core/plan.js";
import { allocate, Ledger, queuePositions } from "../../core/quota.js";

const diamond: PlanStep[] = [
  { stepId: "a" },
  { stepId: "b", dependsOn: ["a"], timeout: 1000 },
  { stepId: "c", dependsOn: ["a"] },
  { stepId: "d", dependsOn: ["b", "c"] },
];
const all = (ids: string[]) => ({ admitted: new Set(ids) });
const obs = (o: Record<string, ObservedStep>) => new Map(Object.entries(o));
const base = (over: Partial<PlanInput> = {}): PlanInput => ({ steps: diamond, observed: new Map(), cancelRequested: false, now: 10_000, admission: all(["a", "b", "c", "d"]), ...over });
const statuses = (p: ReturnType<typeof planRun>) => Object.fromEntries(p.steps.map((s) => [s.stepId, s.status]));

t.test("planRun table", async (t) => {
  const cases: Array<{ name: string; input: PlanInput; start: string[]; status: string; steps: Record<string, string>; kill?: Array<{ stepId: string; reason: string }>; progress?: number; requeue?: number; error?: RegExp }> = [
    { name: "fresh run: the root starts", input: base(), start: ["a"], status: "running", steps: { a: "running", b: "pending", c: "pending", d: "pending" }, progress: 0 },
    { name: "fresh run without a slot: queued, waiting",
      input: base({ admission: { admitted: new Set() } }),
      start: [], status: "queued", steps: { a: "waiting", b: "pending", c: "pending", d: "pending" } },
    { name: "root done: both branches start in parallel",
      input: base({ observed: obs({ a: { phase: "completed" } }) }), start: ["b", "c"], status: "running", steps: { a: "completed", b: "running", c: "running", d: "pending" }, progress: 25 },
    { name: "one slot: first branch starts, second waits",
      input: base({ observed: obs({ a: { phase: "completed" } }), admission: { admitted: new Set(["b"]) } }),
      start: ["b"], status: "running", steps: { a: "completed", b: "running", c: "waiting", d: "pending" } },
    { name: "the join waits for both parents",
      input: base({ observed: obs({ a: { phase: "completed" }, b: { phase: "completed" }, c: { phase: "running", startedAt: 9000 } }) }),
      start: [], status: "running", steps: { a: "completed", b: "completed", c: "running", d: "pending" }, progress: 50 },
    { name: "all completed",
      input: base({ observed: obs({ a: { phase: "completed" }, b: { phase: "completed" }, c: { phase: "completed" }, d: { phase: "completed" } }) }),
      start: [], status: "completed", steps: { a: "completed", b: "completed", c: "completed", d: "completed" }, progress: 100 },
    { name: "a failure: nothing new starts while a sibling still runs",
      input: base({ observed: obs({ a: { phase: "completed" }, b: { phase: "failed", exitCode: 2, message: "samtools: truncated file" }, c: { phase: "running", startedAt: 9000 } }) }),
      start: [], status: "running", steps: { a: "completed", b: "failed", c: "running", d: "skipped" } },
    { name: "a failure: once nothing runs, the run fails with the step's error",
      input: base({ observed: obs({ a: { phase: "completed" }, b: { phase: "failed", exitCode: 2, message: "samtools: truncated file" }, c: { phase: "completed" } }) }),
      start: [], status: "failed", steps: { a: "completed", b: "failed", c: "completed", d: "skipped" }, error: /step b failed: samtools: truncated file/ },
    { name: "cancel: running steps are killed, the rest cancelled",
      input: base({ cancelRequested: true, observed: obs({ a: { phase: "completed" }, b: { phase: "running", startedAt: 9000 }, c: { phase: "running", startedAt: 9000 } }) }),
      start: [], status: "running", kill: [{ stepId: "b", reason: "cancelled" }, { stepId: "c", reason: "cancelled" }], steps: { a: "completed", b: "running", c: "running", d: "cancelled" } },
    { name: "cancel: once nothing runs, the run is cancelled",
      input: base({ cancelRequested: true, observed: obs({ a: { phase: "completed" }, b: { phase: "cancelled" } }) }),
      start: [], status: "cancelled", steps: { a: "completed", b: "cancelled", c: "cancelled", d: "cancelled" } },
    { name: "a step cancelled from outside (the run was not) fails the run",
      input: base({ observed: obs({ a: { phase: "cancelled" } }) }),
      start: [], status: "failed", steps: { a: "cancelled", b: "skipped", c: "skipped", d: "skipped" }, error: /step a failed/ },
    { name: "timeout: a step past its timeout is killed",
      input: base({ now: 10_000, observed: obs({ a: { phase: "completed" }, b: { phase: "running", startedAt: 8_999 }, c: { phase: "running", startedAt: 9_500 } }) }),
      start: [], status: "running", kill: [{ stepId: "b", reason: "timeout" }], steps: { a: "completed", b: "running", c: "running", d: "pending" } },
    { name: "timeout not yet due: come back when it is",
      input: base({ now: 10_000, observed: obs({ a: { phase: "completed" }, b: { phase: "running", startedAt: 9_400 }, c: { phase: "completed" } }) }),
      start: [], status: "running", requeue: 400, steps: { a: "completed", b: "running", c: "completed", d: "pending" } },
  ];
  for (const c of cases) {
    t.test(c.name, async (t) => {
      const p = planRun(c.input);
      t.same(p.start, c.start, "start");
      t.equal(p.status, c.status, "status");
      t.same(statuses(p), c.steps, "step statuses");
      t.same(p.kill, c.kill ?? [], "kill");
      if (c.progress !== undefined) t.equal(p.progressPct, c.progress, "progress");
      if (c.requeue !== undefined) t.equal(p.requeueAfterMs, c.requeue, "requeue");
      if (c.error) t.match(p.error, c.error);
      else t.equal(p.error, undefined);
      t.same(planRun(c.input), p, "planning again gives the same plan");
    });
  }
});

t.test("a waiting step shows its reason (its position is computed on read, not planned)", async (t) => {
  const p = planRun(base({ admission: { admitted: new Set() } }));
  t.same(p.steps[0], { stepId: "a", status: "waiting", waitingReason: WAITING_REASON });
});

t.test("a lost attempt is a typed state: run again while attempts are left, then a failure", async (t) => {
  const lost = (attempt: number) => base({ observed: obs({ a: { phase: "lost", attempt, message: "the server stopped while the step ran" } }) });
  for (const attempt of [1, MAX_ATTEMPTS - 1]) {
    const p = planRun(lost(attempt));
    t.same(p.retry, ["a"], `attempt ${attempt} lost: retried`);
    t.same(p.start, ["a"], "and started again when admitted");
    t.equal(p.status, "running");
    const waiting = planRun({ ...lost(attempt), admission: { admitted: new Set() } });
    t.equal(statuses(waiting).a, "waiting", "or waits for a slot like any ready step");
  }
  const out = planRun(lost(MAX_ATTEMPTS));
  t.same(out.retry, [], `attempt ${MAX_ATTEMPTS} lost: no retry`);
  t.same(out.start, []);
  t.equal(out.status, "failed");
  t.equal(out.steps[0]?.status, "failed");
  t.match(out.steps[0]?.error, new RegExp(`the server stopped while the step ran \\(attempt ${MAX_ATTEMPTS} of ${MAX_ATTEMPTS}`));
  t.match(out.error, /step a failed: the server stopped/);
  const dependent = planRun(base({ observed: obs({ a: { phase: "completed" }, b: { phase: "lost", attempt: 1 } }) }));
  t.ok(dependent.start.includes("b"), "a lost step whose parents completed is ready again");
  t.notOk(dependent.start.includes("d"), "its dependants still wait for it");
});

t.test("timeouts are clamped to 2 hours", async (t) => {
  t.equal(stepTimeoutMs({ stepId: "x", timeout: 9_000_000 }), 7_200_000);
  t.equal(stepTimeoutMs({ stepId: "x" }), 7_200_000);
  t.equal(stepTimeoutMs({ stepId: "x", timeout: 5 }), 5);
});

t.test("allocate: first come, first served across runs", async (t) => {
  const a = allocate(5, 2, [
    { runId: "late", createdAt: 30, ready: ["x", "y"] },
    { runId: "early", createdAt: 10, ready: ["a", "b"] },
    { runId: "mid", createdAt: 20, ready: ["c"] },
  ]);
  t.same(Object.fromEntries(a.admitted), { early: ["a", "b"], mid: ["c"] });
  t.same(Object.fromEntries(a.waiting), { late: [{ stepId: "x", position: 1 }, { stepId: "y", position: 2 }] });
  const full = allocate(5, 5, [{ runId: "r", createdAt: 1, ready: ["a"] }]);
  t.same(full.admitted.size, 0, "no free slot");
  t.same(full.waiting.get("r"), [{ stepId: "a", position: 1 }]);
  const over = allocate(5, 7, [{ runId: "r", createdAt: 1, ready: ["a"] }]);
  t.same(over.admitted.size, 0, "over the limit (a lowered limit) admits nothing and never goes negative");
});

t.test("allocate property: never more than the free slots, admitted is a prefix of the FIFO order", async (t) => {
  fc.assert(fc.property(
    fc.integer({ min: 1, max: 10 }), fc.integer({ min: 0, max: 12 }),
    fc.uniqueArray(fc.record({ runId: fc.string({ minLength: 1, maxLength: 4 }), createdAt: fc.integer({ min: 0, max: 50 }), ready: fc.uniqueArray(fc.constantFrom("s1", "s2", "s3", "s4"), { maxLength: 4 }) }), { maxLength: 8, selector: (d: { runId: string }) => d.runId }),
    (limit, active, demands) => {
      const a = allocate(limit, active, demands);
      const admitted = [...a.admitted.values()].flat().length;
      const waiting = [...a.waiting.values()].flat();
      const totalReady = demands.reduce((n, d) => n + d.ready.length, 0);
      const positions = waiting.map((w) => w.position).sort((x, y) => x - y);
      return admitted <= Math.max(0, limit - active) && admitted + waiting.length === totalReady
        && positions.every((p, i) => p === i + 1)
        && (waiting.length === 0 || admitted === Math.max(0, limit - active));
    }), { numRuns: 500 });
  t.pass("property held");
});

t.test("Ledger: assume before create, undo on failure, observe replaces assumptions", async (t) => {
  const l = new Ledger(() => 2);
  l.observe("acme", "r1", 1, { known: [], running: [], ready: ["a", "b", "c"] });
  let alloc = l.allocation("acme");
  t.same(alloc.admitted.get("r1"), ["a", "b"]);
  l.assume("acme", "r1", ["a", "b"]);
  t.equal(l.inUse("acme"), 2, "assumed slots count");
  t.same(l.allocation("acme").admitted.size, 0, "no double spending while creates are in flight");
  t.same(l.allocation("acme").waiting.get("r1"), [{ stepId: "c", position: 1 }]);
  l.observe("acme", "r1", 1, { known: [], running: [], ready: ["c"] });
  t.equal(l.inUse("acme"), 2, "an assumption survives a reconcile that does not see the step yet");
  l.undo("acme", "r1", "b");
  t.equal(l.inUse("acme"), 1, "a failed create frees its slot");
  l.observe("acme", "r1", 1, { known: ["a"], running: ["a"], ready: ["b", "c"] });
  t.equal(l.inUse("acme"), 1, "observed running replaces the assumption, not added to it");
  alloc = l.allocation("acme");
  t.same(alloc.admitted.get("r1"), ["b"]);
  l.observeClaims("acme", { admitted: [], waiting: [{ id: "tool-1", createdAt: 2 }] });
  t.same(l.admittedTasks("acme"), [], "a synchronous task waits behind queued steps");
  t.ok(l.hasWaitingClaims("acme"), "a claim waits");
  t.notOk(l.hasWaitingClaims("globex"), "another organization has none");
  t.same(l.admittedRuns("acme"), ["r1"], "which keep their place");
  l.observe("acme", "r1", 1, { known: ["a", "b"], running: [], ready: ["c"] });
  t.equal(l.inUse("acme"), 0, "steps that started and finished between two reconciles free their slots");
  l.observe("acme", "r1", 1, { known: ["a"], running: ["a"], ready: ["b", "c"] });
  l.remove("acme", "r1");
  t.equal(l.inUse("acme"), 0);
  t.same(l.admittedTasks("acme"), ["tool-1"], "free slot: a synchronous task takes it");
  l.assume("acme", "tool-1", ["tool-1"]);
  t.equal(l.inUse("acme"), 1);
  l.observeClaims("acme", { admitted: [], waiting: [{ id: "tool-1", createdAt: 2 }] });
  t.equal(l.inUse("acme"), 1, "a listing from before its admission was written keeps the assumption");
  l.observeClaims("acme", { admitted: ["tool-1"], waiting: [] });
  t.equal(l.inUse("acme"), 1, "admitted: counted once");
  l.observeClaims("acme", { admitted: [], waiting: [] });
  t.equal(l.inUse("acme"), 0, "and gives it back once released");
  t.same(l.waitingRuns("acme"), [], "a task is never taken for a run");
  t.equal(l.inUse("globex"), 0, "organizations are separate");
  l.observe("globex", "r9", 1, { known: ["a", "b"], running: ["a", "b"], ready: ["c"] });
  t.equal(l.inUse("globex"), 2);
  l.removeFromEveryOrganization("r9");
  t.equal(l.inUse("globex"), 0, "a deleted run (organization unknown) frees its slots");
  t.same(l.waitingRuns("globex"), [], "and no longer waits");
});

/**
 * Simulation: several organizations, each with several runs of random DAGs, reconciled in a
 * random order through Ledger + planRun, steps finishing in a random order. The number of
 * running steps per organization never exceeds the limit, and every run completes.
 */
t.test("simulation: the limit holds per organization and every run completes", async (t) => {
  const dagArb = fc.integer({ min: 1, max: 6 }).chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) =>
    fc.subarray(Array.from({ length: i }, (_, k) => `s${k}`)).map((deps) => ({ stepId: `s${i}`, dependsOn: deps })))));
  fc.assert(fc.property(
    fc.integer({ min: 1, max: 5 }),
    fc.array(fc.record({ org: fc.constantFrom("o1", "o2", "o3"), steps: dagArb }), { minLength: 1, maxLength: 8 }),
    fc.infiniteStream(fc.nat()),
    (limit, runsIn, choices) => {
      const ledger = new Ledger(() => limit);
      const runs = runsIn.map((r, i) => ({ id: `r${i}`, org: r.org, createdAt: i, steps: r.steps as PlanStep[], observed: new Map<string, ObservedStep>(), status: "queued" }));
      const pick = choices[Symbol.iterator]();
      const next = (n: number) => (pick.next().value as number) % n;
      for (let tick = 0; tick < 500; tick++) {
        const open = runs.filter((r) => r.status !== "completed");
        if (open.length === 0) return true;
        // Reconcile one run (level-triggered), or finish one running step.
        const running = open.flatMap((r) => [...r.observed].filter(([, o]) => o.phase === "running").map(([s]) => ({ r, s })));
        if (running.length > 0 && next(2) === 0) {
          const { r, s } = running[next(running.length)] as { r: (typeof runs)[number]; s: string };
          r.observed.set(s, { phase: "completed" });
          continue;
        }
        const r = open[next(open.length)] as (typeof runs)[number];
        const runningHere = [...r.observed].filter(([, o]) => o.phase === "running").map(([s]) => s);
        ledger.observe(r.org, r.id, r.createdAt, { known: r.observed.keys(), running: runningHere, ready: readySteps(r.steps, r.observed) });
        const alloc = ledger.allocation(r.org);
        const admitted = new Set(alloc.admitted.get(r.id) ?? []);
        const plan = planRun({ steps: r.steps, observed: r.observed, cancelRequested: false, now: tick, admission: { admitted } });
        ledger.assume(r.org, r.id, plan.start);
        for (const s of plan.start) r.observed.set(s, { phase: "running", startedAt: tick });
        r.status = plan.status;
        if (plan.status === "completed") ledger.remove(r.org, r.id);
        for (const org of ["o1", "o2", "o3"]) {
          const active = runs.filter((x) => x.org === org).reduce((n, x) => n + [...x.observed.values()].filter((o) => o.phase === "running").length, 0);
          if (active > limit) return false;
        }
      }
      return runs.every((r) => r.status === "completed");
    }), { numRuns: 300 });
  t.pass("property held");
});

t.test("queuePositions: from run records, the same order as the ledger's allocation", async (t) => {
  const runs = [
    { id: "r2", createdAt: 2, steps: [{ stepId: "a", status: "waiting" }, { stepId: "b", status: "waiting" }] },
    { id: "r1", createdAt: 1, steps: [{ stepId: "x", status: "running" }, { stepId: "y", status: "waiting" }] },
    { id: "r3", createdAt: 3, steps: [{ stepId: "a", status: "completed" }, { stepId: "b", status: "pending" }] },
  ];
  const pos = queuePositions(1, runs);
  t.same([...(pos.get("r1") ?? [])], [["y", 1]], "the oldest run first");
  t.same([...(pos.get("r2") ?? [])], [["a", 2], ["b", 3]], "then declaration order");
  t.notOk(pos.has("r3"), "a run with nothing waiting has no position");
  const ledger = new Ledger(() => 1);
  ledger.observe("o", "r1", 1, { known: ["x"], running: ["x"], ready: ["y"] });
  ledger.observe("o", "r2", 2, { known: [], running: [], ready: ["a", "b"] });
  t.same(ledger.allocation("o").waiting.get("r2"), [{ stepId: "a", position: 2 }, { stepId: "b", position: 3 }], "the ledger agrees");
  const free = queuePositions(3, runs);
  t.same([...(free.get("r2") ?? [])], [["b", 1]], "with 2 slots free the first two waiting steps are about to start: no position");
  const withClaims = queuePositions(3, runs, { admitted: ["c-held"], waiting: [{ id: "c-early", createdAt: 1.5 }] });
  t.same([...(withClaims.get("r2") ?? [])], [["a", 2], ["b", 3]], "an admitted claim holds a slot (r1's y takes the last) and a claim that asked before r2 goes before it");
  ledger.observeClaims("o", { admitted: [], waiting: [{ id: "c-early", createdAt: 1.5 }] });
  t.same(ledger.allocation("o").waiting.get("r2"), [{ stepId: "a", position: 3 }, { stepId: "b", position: 4 }], "the ledger orders the claim the same way");
});
