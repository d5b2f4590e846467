/**
 * Benchmark: what the step sandbox (bubblewrap) costs in embedded mode, and what mounting
 * inputs read-only saves against copying them (issue: trust boundary).
 * (a) Per-step overhead: the process executor runs `true` steps one at a time, with the
 *     sandbox and without it (`sandbox: "off"`), in 5 alternating rounds of 40 steps; time
 *     from submit to the step seen ended (work dir, state file, spawn, exit, log upload).
 * (b) Staging a 1 GiB input: one step `test -s in/1/big.bin` whose input is a 1 GiB object
 *     of the filesystem store, mounted read-only into the sandbox or copied into the step's
 *     working directory, 3 alternating rounds each (page cache warm after a first read).
 * Writes its section of bench/RESULTS.md. Run: `make bench-sandbox` (builds dist/ first).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import type * as ObjectStoreModule from "../adapters/local/object-store.js";
import type * as ExecutorModule from "../adapters/local/process-executor.js";
import type { ObservedStepState, StepTask } from "../core/ports.js";

const dist = new URL("../dist/", import.meta.url);
if (!existsSync(new URL("adapters/local/process-executor.js", dist))) throw new Error("run `make build` first (bench measures dist/)");
const load = async <T>(p: string) => (await import(new URL(p, dist).href)) as T;
const { createLocalObjectStore } = await load<typeof ObjectStoreModule>("adapters/local/object-store.js");
const { createProcessExecutor } = await load<typeof ExecutorModule>("adapters/local/process-executor.js");

const dir = mkdtempSync(join(tmpdir(), "operon-bench-sandbox-"));
const store = createLocalObjectStore({ root: dir, publicUrl: "http://localhost", signingSecret: "x".repeat(40) });
const WS = "orgs/bench/workspaces/ws/";
const executors = {
  sandbox: createProcessExecutor({ dataDir: dir, store, sandbox: "bwrap" }),
  none: createProcessExecutor({ dataDir: dir, store, sandbox: "off" }),
  copy: createProcessExecutor({ dataDir: dir, store, sandbox: "bwrap", mountInputs: false }),
};
type Ex = (typeof executors)[keyof typeof executors];

let n = 0;
async function step(ex: Ex, argv: string[], inputs: StepTask["invocation"]["inputs"] = []): Promise<number> {
  const runId = `run-bench${++n}`;
  const t0 = performance.now();
  const ended = new Promise<ObservedStepState>((resolve) => {
    const unwatch = ex.watch(async (id) => {
      if (id !== runId) return;
      const o = (await ex.observe(runId)).get("s");
      if (o && o.phase !== "running") { unwatch(); resolve(o); }
    });
  });
  await ex.submit({ runId, organization: "bench", stepId: "s", attempt: 1, toolName: "bench", invocation: { argv, inputs, outputs: [], mkdirs: [] }, workspaceRoot: WS, runRoot: `${WS}pipelines/${runId}/`, timeoutMs: 600_000 });
  const o = await ended;
  if (o.phase !== "completed") throw new Error(`bench step failed: ${o.message}`);
  return performance.now() - t0;
}

const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] as number; };
const fmt = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);

try {
  // (a)
  const per: Record<"sandbox" | "none", number[]> = { sandbox: [], none: [] };
  const rounds: string[] = [];
  for (let i = 0; i < 3; i++) { await step(executors.sandbox, ["true"]); await step(executors.none, ["true"]); } // warm-up
  for (let r = 0; r < 5; r++) {
    const m: Record<string, number> = {};
    for (const mode of (r % 2 ? ["none", "sandbox"] : ["sandbox", "none"]) as Array<"sandbox" | "none">) {
      const xs: number[] = [];
      for (let i = 0; i < 40; i++) xs.push(await step(executors[mode], ["true"]));
      per[mode].push(...xs);
      m[mode] = median(xs);
    }
    rounds.push(`${fmt(m.sandbox as number)} vs ${fmt(m.none as number)}`);
  }
  const aSandbox = median(per.sandbox);
  const aNone = median(per.none);

  // (b)
  const GiB = 1024 ** 3;
  const chunk = Buffer.alloc(8 * 1024 * 1024, 7);
  async function* big() { for (let i = 0; i < GiB / chunk.length; i++) yield chunk; }
  await store.put(`${WS}data/big.bin`, big());
  const inputs = [{ param: "inputFile", source: "data/big.bin", local: "in/1/big.bin" }];
  const argv = ["test", "-s", "in/1/big.bin"];
  const staged: Record<"mount" | "copy", number[]> = { mount: [], copy: [] };
  await step(executors.copy, argv, inputs); // warm the page cache
  for (let r = 0; r < 3; r++) {
    for (const mode of (r % 2 ? ["copy", "mount"] : ["mount", "copy"]) as Array<"mount" | "copy">) {
      staged[mode].push(await step(mode === "mount" ? executors.sandbox : executors.copy, argv, inputs));
    }
  }
  const bMount = median(staged.mount);
  const bCopy = median(staged.copy);

  const machine = `${cpus().length} × ${cpus()[0]?.model.trim()}, ${Math.round(totalmem() / 1024 ** 3)} GiB, Node ${process.versions.node}`;
  const section = `<!-- sandbox:start -->
## Step sandbox, embedded (\`bench/sandbox.bench.ts\`)

Measured ${new Date().toISOString().slice(0, 10)} on ${machine}: the process executor alone (no engine, no HTTP) over a fresh temp dir and the filesystem store; each figure is submit → step seen ended.

| measure | with the sandbox | baseline (same run) | difference |
|---|---|---|---|
| (a) a \`true\` step, median of 200 in 5 alternating rounds (per round, sandbox vs none: ${rounds.join("; ")}) | **${fmt(aSandbox)}** | no sandbox: ${fmt(aNone)} | **+${fmt(aSandbox - aNone)} per step** (×${(aSandbox / aNone).toFixed(2)}) |
| (b) a step reading a 1 GiB input, median of 3 alternating rounds (${staged.mount.map(fmt).join(", ")} mounted; ${staged.copy.map(fmt).join(", ")} copied) | mounted read-only: **${fmt(bMount)}** | copied into the working directory: ${fmt(bCopy)} | **${(bCopy / bMount).toFixed(0)}× faster** mounted |

(a) is what bubblewrap adds to every step: new namespaces, the read-only binds of /usr and the Java paths, and its own exec. (b): a mounted input is one bind mount, whatever its size; a copy reads and writes every byte (and needs the space twice). Inputs that are also a step's outputs (an index step's file) are still copied.
<!-- sandbox:end -->`;
  const path = new URL("./RESULTS.md", import.meta.url);
  const current = existsSync(path) ? readFileSync(path, "utf8") : "# Benchmark results\n";
  writeFileSync(path, /<!-- sandbox:start -->[\s\S]*<!-- sandbox:end -->/.test(current)
    ? current.replace(/<!-- sandbox:start -->[\s\S]*<!-- sandbox:end -->/, section)
    : current.trimEnd() + "\n\n" + section + "\n");
  console.log(section);
} finally {
  for (const ex of Object.values(executors)) await ex.shutdown();
  rmSync(dir, { recursive: true, force: true });
}
