/**
 * Benchmark: the embedded pipeline engine with real child processes (issue: pipeline engine).
 * `createEngine` over a fresh temp dir (filesystem run store, object store, process executor),
 * no HTTP; two tiny test tools added to the real catalogue: `true` and `sleep`.
 * (a) Per-step overhead: 100 runs of a chain of 3 `true` steps, one run at a time (org limit
 *     1000, nothing queues), against the same 300 `true` processes spawned directly and
 *     sequentially with child_process.spawn, in 5 alternating rounds (20 runs / 60 spawns).
 *     Overhead per step = (engine total − direct total) / 300, where the engine total is the
 *     wall time from each submit to seeing that run completed; and median recorded step
 *     duration (the step's completedAt − startedAt on the run record) against the median
 *     direct spawn-to-exit time.
 * (b) Dependent-step latency: for the chains of (a), each child's startedAt minus its parent's
 *     completedAt (run record, ISO strings, ms precision): p50/p99; also for 50 chains
 *     submitted at once.
 * (c) Drain: 200 runs of 3 parallel `sleep 0.05` steps over 10 organizations (org limit 5),
 *     submitted all at once: first submit → last run completed, runs/min, and the most
 *     steps seen running per organization (executor.observe on every executor change).
 * Writes its section of bench/RESULTS.md. Run: `make bench` (builds dist/ first), or
 * `npx tsc -p tsconfig.build.json && npx tsx bench/engine.bench.ts`.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import type * as EngineModule from "../engine/engine.js";
import type * as ToolsModule from "../core/tools/index.js";
import type * as ObjectStoreModule from "../adapters/local/object-store.js";
import type * as RunStoreModule from "../adapters/local/run-store.js";
import type * as ExecutorModule from "../adapters/local/process-executor.js";
import type { RunRecord } from "../core/ports.js";
import type { PipelineSpec } from "../core/spec/schema.js";
import type { ToolDefinition } from "../core/tools/index.js";

// Measure the compiled JavaScript that `operon` runs (make build), not the TypeScript loader's output.
const dist = new URL("../dist/", import.meta.url);
if (!existsSync(new URL("engine/engine.js", dist))) throw new Error("run `make build` first (bench measures dist/)");
const load = async <T>(p: string) => (await import(new URL(p, dist).href)) as T;
const { createEngine } = await load<typeof EngineModule>("engine/engine.js");
const { BUILTIN_TOOLS, createCatalogue } = await load<typeof ToolsModule>("core/tools/index.js");
const { createLocalObjectStore } = await load<typeof ObjectStoreModule>("adapters/local/object-store.js");
const { createLocalRunStore } = await load<typeof RunStoreModule>("adapters/local/run-store.js");
const { createProcessExecutor } = await load<typeof ExecutorModule>("adapters/local/process-executor.js");

const trueTool: ToolDefinition = {
  id: "true", description: "Exits 0 (bench tool)", version: "1", image: "busybox:1.36", localExecutables: ["true"], fileParams: [], defaultCommand: "true",
  inputSchema: z.strictObject({ command: z.literal("true").optional() }),
  commands: { true: { description: "true", required: [], build: () => ({ argv: ["true"], inputs: [], outputs: [], mkdirs: [] }) } },
};
const sleepTool: ToolDefinition = {
  id: "sleep", description: "Sleeps (bench tool)", version: "1", image: "busybox:1.36", localExecutables: ["sleep"], fileParams: [], defaultCommand: "sleep",
  inputSchema: z.strictObject({ command: z.literal("sleep").optional(), seconds: z.union([z.number(), z.string()]) }),
  commands: { sleep: { description: "sleep", required: ["seconds"], build: (p) => ({ argv: ["sleep", String(p.seconds)], inputs: [], outputs: [], mkdirs: [] }) } },
};
const tools = createCatalogue([...BUILTIN_TOOLS, trueTool, sleepTool]);

const chain: PipelineSpec = { steps: [
  { stepId: "s0", toolName: "true", parameters: {} },
  { stepId: "s1", toolName: "true", dependsOn: ["s0"], parameters: {} },
  { stepId: "s2", toolName: "true", dependsOn: ["s1"], parameters: {} },
] };
const parallelSleeps: PipelineSpec = { steps: [0, 1, 2].map((i) => ({ stepId: `s${i}`, toolName: "sleep", parameters: { seconds: 0.05 } })) };

const TERMINAL = new Set(["completed", "failed", "cancelled"]);
const errors: string[] = [];
/** Harnesses not yet stopped (stopped in `finally` if the bench fails midway). */
const live = new Set<() => Promise<void>>();

/** An engine over its own directory, and a watch that learns when each run ends. */
function harness(dir: string, limit: number) {
  mkdirSync(dir, { recursive: true });
  const clock = { now: () => Date.now() };
  const store = createLocalObjectStore({ root: dir, publicUrl: "http://localhost", signingSecret: "x".repeat(40) });
  const executor = createProcessExecutor({ dataDir: dir, store, clock });
  const runs = createLocalRunStore(dir);
  const engine = createEngine({ runs, executor, store, clock, orgConcurrency: () => limit, tools, log: (m) => errors.push(m) });
  const done = new Map<string, RunRecord>();
  const waiters = new Map<string, (r: RunRecord) => void>();
  const unwatch = runs.watch((id) => {
    if (done.has(id)) return;
    void runs.get(id).then((r) => {
      if (!r || !TERMINAL.has(r.status) || done.has(id)) return;
      done.set(id, r);
      waiters.get(id)?.(r);
    });
  });
  const finished = (id: string) => done.get(id) ?? new Promise<RunRecord>((resolve) => waiters.set(id, resolve));
  const submit = async (org: string, spec: PipelineSpec) => {
    const r = await engine.submit({ organization: org, workspace: "ws", keyId: "key_bench", spec, source: { kind: "inline" }, input: {} });
    if (!r.ok) throw new Error(r.error.message);
    return r.run;
  };
  const stop = async () => { live.delete(stop); unwatch(); await engine.stop(); await executor.shutdown(); };
  live.add(stop);
  return { executor, engine, done, finished, submit, stop };
}

function direct(): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const p = spawn("true", [], { stdio: "ignore" });
    p.on("error", reject);
    p.on("exit", (c) => (c === 0 ? resolve(performance.now() - t0) : reject(new Error(`true exited ${c}`))));
  });
}

const sorted = (xs: number[]) => xs.slice().sort((a, b) => a - b);
/** Nearest-rank percentile. */
const pct = (xs: number[], p: number) => { const s = sorted(xs); return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] as number; };
const ms = (iso: string | null) => { if (!iso) throw new Error("missing timestamp"); return Date.parse(iso); };
function assertCompleted(r: RunRecord) { if (r.status !== "completed") throw new Error(`run ${r.id} ${r.status}: ${r.error}`); }
const stepDurations = (rs: RunRecord[]) => rs.flatMap((r) => r.steps.map((s) => ms(s.completedAt) - ms(s.startedAt)));
function dependentLatencies(rs: RunRecord[]): number[] {
  const out: number[] = [];
  for (const r of rs) for (const s of r.spec.steps) for (const parent of s.dependsOn ?? []) {
    const child = r.steps.find((x) => x.stepId === s.stepId);
    const p = r.steps.find((x) => x.stepId === parent);
    out.push(ms(child?.startedAt ?? null) - ms(p?.completedAt ?? null));
  }
  return out;
}

const data = mkdtempSync(join(tmpdir(), "operon-bench-engine-"));
const benchStart = performance.now();
try {
  // ---- (a) + (b): chains of 3 `true`, one run at a time, alternating with direct spawns.
  const a = harness(join(data, "a"), 1000);
  // Warm up both (the executor hashes and version-probes `true` once; JIT).
  for (let i = 0; i < 5; i++) { await direct(); assertCompleted(await a.finished((await a.submit("bench", chain)).id)); }
  const ROUNDS = 5;
  const PER_ROUND = 20;
  let engineMs = 0;
  let directMs = 0;
  const directEach: number[] = [];
  const chainRuns: RunRecord[] = [];
  const roundRatios: string[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    let t0 = performance.now();
    for (let i = 0; i < PER_ROUND * 3; i++) directEach.push(await direct());
    const d = performance.now() - t0;
    t0 = performance.now();
    for (let i = 0; i < PER_ROUND; i++) chainRuns.push(await a.finished((await a.submit("bench", chain)).id));
    const e = performance.now() - t0;
    directMs += d;
    engineMs += e;
    roundRatios.push(((e - d) / (PER_ROUND * 3)).toFixed(1));
  }
  chainRuns.forEach(assertCompleted);
  const steps = ROUNDS * PER_ROUND * 3;
  const overheadPerStep = (engineMs - directMs) / steps;
  const engineStepMed = pct(stepDurations(chainRuns), 50);
  const directMed = pct(directEach, 50);
  const dep = dependentLatencies(chainRuns);

  // (b) under concurrency: 50 chains submitted at once (still no queueing).
  const burst = await Promise.all(Array.from({ length: 50 }, () => a.submit("burst", chain)));
  const burstRuns = await Promise.all(burst.map((r) => a.finished(r.id)));
  burstRuns.forEach(assertCompleted);
  const depBurst = dependentLatencies(burstRuns);
  await a.stop();

  // ---- (c): 200 runs × 3 parallel `sleep 0.05`, 10 organizations, limit 5, submitted at once.
  const LIMIT = 5;
  const c = harness(join(data, "c"), LIMIT);
  const orgs = Array.from({ length: 10 }, (_, i) => `org${i}`);
  const orgOfRun = new Map<string, string>();
  const maxRunning = new Map<string, number>(orgs.map((o) => [o, 0]));
  let samples = 0;
  // On every executor change, one synchronous sweep of observe() over the unfinished runs (the
  // process executor builds each snapshot before its first await, so the sweep is consistent).
  const unwatchExec = c.executor.watch(() => {
    const ids = [...orgOfRun.keys()].filter((id) => !c.done.has(id));
    void Promise.all(ids.map((id) => c.executor.observe(id))).then((obs) => {
      const counts = new Map<string, number>();
      obs.forEach((m, i) => {
        const org = orgOfRun.get(ids[i] as string) as string;
        for (const o of m.values()) if (o.phase === "running") counts.set(org, (counts.get(org) ?? 0) + 1);
      });
      for (const [org, n] of counts) maxRunning.set(org, Math.max(maxRunning.get(org) ?? 0, n));
      samples++;
    });
  });
  const order = Array.from({ length: 20 }, () => orgs).flat();
  const t0 = Date.now();
  const submitted = await Promise.all(order.map(async (org) => { const r = await c.submit(org, parallelSleeps); orgOfRun.set(r.id, org); return r; }));
  const submitMs = Date.now() - t0;
  const drained = await Promise.all(submitted.map((r) => c.finished(r.id)));
  unwatchExec();
  drained.forEach(assertCompleted);
  const drainMs = Math.max(...drained.map((r) => ms(r.completedAt))) - t0;
  const busyMs = stepDurations(drained).reduce((x, y) => x + y, 0);
  const maxSeen = Math.max(...maxRunning.values());
  const idealMs = (20 * 3 * 50) / LIMIT; // per organization: 60 steps of 50 ms over 5 slots
  await c.stop();

  const totalS = (performance.now() - benchStart) / 1000;
  const f1 = (x: number) => x.toFixed(1);
  const section = `<!-- engine:start -->
## Pipeline engine, embedded (\`bench/engine.bench.ts\`)

Measured ${new Date().toISOString().slice(0, 10)} on ${cpus().length} × ${cpus()[0]?.model ?? "CPU"}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.versions.node}: \`createEngine\` (no HTTP) over a fresh temp dir, filesystem run and object stores, real child processes, 4 controller workers; whole bench ${f1(totalS)} s. Run-record timestamps are ISO strings with millisecond precision.

| measure | result | baseline (same run) |
|---|---|---|
| (a) 100 runs of a **chain** of 3 \`true\` steps, one run at a time (org limit 1000), 5 alternating rounds of 20 runs / 60 direct spawns; overhead per step = (engine total − direct total) / ${steps}, engine total = each submit → that run seen completed | engine ${f1(engineMs / 1000)} s; **${f1(overheadPerStep)} ms overhead per step** (per round: ${roundRatios.join(", ")}) | ${steps} × \`spawn("true")\` sequentially: ${f1(directMs / 1000)} s (${f1(directMs / steps)} ms each) |
| (a) median step duration on the run record (completedAt − startedAt: work dir and state file, staging, spawn, exit) | **${engineStepMed} ms** median (target ≤ 15 ms), p99 ${pct(stepDurations(chainRuns), 99)} ms | direct spawn → exit: ${f1(directMed)} ms median |
| (b) parent completedAt → child startedAt, the 200 dependent steps of (a) | **p50 ${pct(dep, 50)} ms, p99 ${pct(dep, 99)} ms** (target p99 ≤ 100 ms), max ${Math.max(...dep)} ms | — |
| (b) the same, 50 chains submitted at once (100 dependent steps; up to 50 steps and their reconciles contend for ${cpus().length} cores) | p50 ${pct(depBurst, 50)} ms, **p99 ${pct(depBurst, 99)} ms**, max ${Math.max(...depBurst)} ms | — |
| (c) drain: 200 runs × 3 **parallel** \`sleep 0.05\` over 10 organizations (org limit 5), submitted at once (submits returned after ${f1(submitMs / 1000)} s); first submit → last run completedAt | **${f1(drainMs / 1000)} s, ${Math.round(200 / (drainMs / 60_000)).toLocaleString("en")} runs/min**; slots busy ${f1(busyMs / drainMs)} of 50 on average | bound from the limit alone: ${f1(idealMs / 1000)} s (60 × 50 ms per org over 5 slots) |
| (c) most steps running per organization, ${samples.toLocaleString("en")} sweeps of \`executor.observe\` on executor changes | **${maxSeen}** (must be ≤ ${LIMIT}; per org ${orgs.map((o) => maxRunning.get(o)).join(", ")}) | — |

A step's startedAt is taken when the executor accepts it (before its work dir, state file and spawn) and its completedAt when the process has exited (before its state file and log upload), so (b) is the log upload, the change event, the controller queue and one reconcile (read the run, plan, submit); the per-step overhead of (a) also carries each run's share of submission (validation, run folder, run record) and its two run.json writes.${errors.length ? ` Reconcile errors logged during the run: ${errors.length} (first: ${errors[0]}).` : ""}
<!-- engine:end -->`;
  process.stdout.write(section + "\n");
  const path = new URL("./RESULTS.md", import.meta.url);
  const current = readFileSync(path, "utf8");
  writeFileSync(path, /<!-- engine:start -->[\s\S]*<!-- engine:end -->/.test(current)
    ? current.replace(/<!-- engine:start -->[\s\S]*<!-- engine:end -->/, section)
    : current.trimEnd() + "\n\n" + section + "\n");
} finally {
  for (const stop of [...live]) await stop();
  rmSync(data, { recursive: true, force: true });
}
