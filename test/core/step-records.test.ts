import t from "tap";
import { planRun } from "../../core/plan.js";
import type { ObservedStepState, StepRecord } from "../../core/ports.js";
import { manifestDue, mergeStepRecords, nextAttempts, observedForPlan } from "../../core/step-records.js";

const rec = (stepId: string, over: Partial<StepRecord> = {}): StepRecord => ({
  stepId, toolName: "samtools", status: "pending", startedAt: null, completedAt: null, exitCode: null, error: null, attempt: 0, outputs: [], ...over,
});
const out = [{ filename: "a.bam", position: 0, key: "k/a.bam", size: 3, sha256: "ab" }];
const T0 = Date.parse("2026-11-24T10:00:00.000Z");
const T1 = Date.parse("2026-11-24T10:00:05.000Z");

t.test("observedForPlan: the executor's observations, else what the run records", async (t) => {
  const cases: Array<{ name: string; records: StepRecord[]; seen: Record<string, ObservedStepState>; want: Record<string, unknown> }> = [
    { name: "an observation stands", records: [rec("a", { status: "running" })], seen: { a: { phase: "completed", attempt: 1, exitCode: 0 } }, want: { a: { phase: "completed", attempt: 1, exitCode: 0 } } },
    { name: "a completed step whose Job is gone stays completed", records: [rec("a", { status: "completed", attempt: 1, startedAt: new Date(T0).toISOString(), completedAt: new Date(T1).toISOString(), exitCode: 0, outputs: out })], seen: {},
      want: { a: { phase: "completed", attempt: 1, startedAt: T0, finishedAt: T1, exitCode: 0 } } },
    { name: "a recorded failure (never reached the executor) stands", records: [rec("a", { status: "failed", error: "invalid parameters: x" })], seen: {}, want: { a: { phase: "failed", attempt: 0, message: "invalid parameters: x" } } },
    { name: "a pending, waiting or running record not observed is not started", records: [rec("a"), rec("b", { status: "waiting" }), rec("c", { status: "running", attempt: 1 })], seen: {}, want: {} },
    { name: "a lost attempt is passed on as lost (the planner decides)", records: [rec("a", { status: "running", attempt: 1 })], seen: { a: { phase: "lost", attempt: 1, message: "the server stopped while the step ran" } },
      want: { a: { phase: "lost", attempt: 1, message: "the server stopped while the step ran" } } },
  ];
  for (const c of cases) t.same(Object.fromEntries(observedForPlan(c.records, new Map(Object.entries(c.seen)))), c.want, c.name);
});

t.test("nextAttempts: one past the highest recorded or observed attempt", async (t) => {
  const got = nextAttempts([rec("a", { attempt: 0 }), rec("b", { attempt: 2 }), rec("c", { attempt: 1 })], new Map([["c", { phase: "lost", attempt: 2 } as ObservedStepState], ["d", { phase: "running", attempt: 1 } as ObservedStepState]]));
  t.same(Object.fromEntries(got), { a: 1, b: 3, c: 3, d: 2 });
});

t.test("mergeStepRecords table", async (t) => {
  const steps = [{ stepId: "a" }, { stepId: "b", dependsOn: ["a"] }];
  const planOf = (records: StepRecord[], observed: Record<string, ObservedStepState>, admitted: string[] = ["a", "b"]) =>
    planRun({ steps, observed: observedForPlan(records, new Map(Object.entries(observed))), cancelRequested: false, now: T1, admission: { admitted: new Set(admitted) } });
  const cases: Array<{ name: string; records: StepRecord[]; seen: Record<string, ObservedStepState>; fresh?: Record<string, ObservedStepState>; admitted?: string[]; started?: string[]; want: Array<Partial<StepRecord> & { stepId: string }> }> = [
    { name: "a started step: running, with its command and attempt", records: [rec("a"), rec("b")], seen: {}, fresh: { a: { phase: "running", attempt: 1, startedAt: T0 } }, started: ["a"],
      want: [{ stepId: "a", status: "running", attempt: 1, startedAt: new Date(T0).toISOString(), command: "depth", argv: ["samtools", "depth"] }, { stepId: "b", status: "pending" }] },
    { name: "no slot: waiting with the reason, no position stored", records: [rec("a", { queuePosition: 4 }), rec("b")], seen: {}, admitted: [],
      want: [{ stepId: "a", status: "waiting", waitingReason: "OrgConcurrencyLimit", queuePosition: undefined }, { stepId: "b", status: "pending" }] },
    { name: "completed: outputs, exit code and end time from the executor; the reason goes", records: [rec("a", { status: "running", attempt: 1, waitingReason: "OrgConcurrencyLimit" }), rec("b")],
      seen: { a: { phase: "completed", attempt: 1, startedAt: T0, finishedAt: T1, exitCode: 0, outputs: out, toolVersion: "1.21" } },
      want: [{ stepId: "a", status: "completed", completedAt: new Date(T1).toISOString(), exitCode: 0, outputs: out, toolVersion: "1.21", waitingReason: undefined }, { stepId: "b", status: "running" }] },
    { name: "a step gone from the fresh observation keeps what was seen a moment ago", records: [rec("a", { status: "running", attempt: 1 }), rec("b")],
      seen: { a: { phase: "completed", attempt: 1, finishedAt: T1, exitCode: 0, outputs: out } }, fresh: {},
      want: [{ stepId: "a", status: "completed", exitCode: 0, outputs: out }, { stepId: "b", status: "running" }] },
    { name: "a failure's message is the step's error", records: [rec("a", { status: "running", attempt: 1 }), rec("b")], seen: { a: { phase: "failed", attempt: 1, exitCode: 2, message: "exit code 2" } },
      want: [{ stepId: "a", status: "failed", error: "exit code 2", exitCode: 2 }, { stepId: "b", status: "skipped" }] },
    { name: "a lost attempt with attempts left: waiting again, its old times cleared", records: [rec("a", { status: "running", attempt: 1, startedAt: new Date(T0).toISOString() }), rec("b")],
      seen: { a: { phase: "lost", attempt: 1, startedAt: T0, message: "the server stopped while the step ran" } }, admitted: [],
      want: [{ stepId: "a", status: "waiting", startedAt: null, error: null, attempt: 1 }, { stepId: "b", status: "pending" }] },
    { name: "a lost attempt out of attempts: failed, saying why", records: [rec("a", { status: "running", attempt: 3 }), rec("b")],
      seen: { a: { phase: "lost", attempt: 3, message: "the server stopped while the step ran" } },
      want: [{ stepId: "a", status: "failed", error: "the server stopped while the step ran (attempt 3 of 3; not retried again)" }, { stepId: "b", status: "skipped" }] },
    { name: "a completed record whose Job is gone stays completed with its outputs", records: [rec("a", { status: "completed", attempt: 1, exitCode: 0, outputs: out, completedAt: new Date(T1).toISOString() }), rec("b", { status: "running", attempt: 1 })],
      seen: { b: { phase: "running", attempt: 1, startedAt: T1 } },
      want: [{ stepId: "a", status: "completed", outputs: out, completedAt: new Date(T1).toISOString() }, { stepId: "b", status: "running" }] },
  ];
  for (const c of cases) {
    const seen = new Map(Object.entries(c.seen));
    const plan = planOf(c.records, c.seen, c.admitted);
    const started = new Map((c.started ?? []).map((s) => [s, { command: "depth", argv: ["samtools", "depth"] }]));
    const got = mergeStepRecords({ records: c.records, plan, seen, fresh: c.fresh ? new Map(Object.entries(c.fresh)) : seen, started });
    t.match(got, c.want, c.name);
    for (const [i, w] of c.want.entries()) {
      for (const [k, v] of Object.entries(w)) if (v === undefined) t.notOk(k in (got[i] as object), `${c.name}: ${w.stepId}.${k} absent`);
    }
  }
});

t.test("manifestDue: when the run starts and when it ends", async (t) => {
  const cases: Array<[string, { startedAt: string | null; status: "queued" | "running" | "completed" | "failed" | "cancelled" }, "queued" | "running" | "completed" | "failed" | "cancelled", boolean]> = [
    ["still queued", { startedAt: null, status: "queued" }, "queued", false],
    ["starts", { startedAt: null, status: "queued" }, "running", true],
    ["runs on", { startedAt: "2026-11-24T10:00:00Z", status: "running" }, "running", false],
    ["completes", { startedAt: "2026-11-24T10:00:00Z", status: "running" }, "completed", true],
    ["fails", { startedAt: "2026-11-24T10:00:00Z", status: "running" }, "failed", true],
    ["cancelled before it started", { startedAt: null, status: "queued" }, "cancelled", true],
  ];
  for (const [name, prev, next, want] of cases) t.equal(manifestDue(prev, { status: next }), want, name);
});
