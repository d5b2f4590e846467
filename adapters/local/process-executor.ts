/**
 * Embedded mode's StepExecutor: each step is a child process (argv array, never a shell) in
 * its own working directory under `<data dir>/work/<run>/<step>-<attempt>/`, with a clean
 * environment. Inputs are staged from the object store with their secondary files
 * (adapters/staging.ts, shared with cluster mode's step pods); stdout
 * goes to the declared file (or the log), stderr to the log; on success every declared
 * output is uploaded to the run folder with its SHA-256. A step's state is kept in a file
 * beside it, so a restarted server still knows what finished. Policy for a step whose
 * process vanished (the server stopped while it ran): it is forgotten and started again as
 * the next attempt, since it produced nothing that was published.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { EventEmitter } from "node:events";
import { createReadStream, openSync, closeSync } from "node:fs";
import { access, constants, mkdir, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { delimiter, join } from "node:path";
import { pipeline } from "node:stream/promises";
import type { Clock, ObjectStore, ObservedStepState, StepExecutor, StepTask } from "../../core/ports.js";
import { publishOutputs, stageInputs } from "../staging.js";

const KILL_GRACE_MS = 5000;
const LOG_TAIL = 2000;

interface Entry { state: ObservedStepState; child?: ChildProcess; killReason?: "timeout" | "cancelled"; dir: string }

export interface ProcessExecutorOptions {
  dataDir: string;
  store: ObjectStore;
  clock?: Clock;
  /** PATH for the tools (default: the server's PATH). */
  path?: string;
}

export function createProcessExecutor(opts: ProcessExecutorOptions): StepExecutor & { recover(): Promise<void>; shutdown(): Promise<void> } {
  const clock = opts.clock ?? { now: () => Date.now() };
  const root = join(opts.dataDir, "work");
  const runs = new Map<string, Map<string, Entry>>();
  const events = new EventEmitter();
  events.setMaxListeners(100);
  const versionCache = new Map<string, Promise<{ path: string; sha256: string; version: string | null } | undefined>>();
  const PATH = opts.path ?? process.env.PATH ?? "/usr/bin:/bin";
  let stopping = false;

  const stepsOf = (runId: string) => { let m = runs.get(runId); if (!m) { m = new Map(); runs.set(runId, m); } return m; };
  const changed = (runId: string) => events.emit("change", runId);

  async function persist(runId: string, stepId: string, e: Entry): Promise<void> {
    await writeFile(join(e.dir, "state.json"), JSON.stringify({ stepId, ...e.state }));
  }

  async function which(cmd: string): Promise<string | undefined> {
    if (cmd.includes("/")) return cmd;
    for (const d of PATH.split(delimiter)) {
      const p = join(d, cmd);
      try { await access(p, constants.X_OK); return p; } catch { /* next */ }
    }
    return undefined;
  }

  /** The executable's path and sha256, and the tool's version as it reports it (cached). */
  function describeExecutable(cmd: string) {
    let p = versionCache.get(cmd);
    if (!p) {
      p = (async () => {
        const path = await which(cmd);
        if (!path) return undefined;
        const h = createHash("sha256");
        await pipeline(createReadStream(path), h);
        const version = await probeVersion(path);
        return { path, sha256: h.digest("hex"), version };
      })();
      versionCache.set(cmd, p);
    }
    return p;
  }

  /** `TOOL --version`, or (bwa and friends print it in their usage) the tool without arguments. */
  async function probeVersion(path: string): Promise<string | null> {
    return (await probe(path, ["--version"])) ?? (await probe(path, []));
  }

  function probe(path: string, args: string[]): Promise<string | null> {
    return new Promise((resolve) => {
      const child = spawn(path, args, { stdio: ["ignore", "pipe", "pipe"], env: { PATH, LANG: "C.UTF-8" }, timeout: 20_000 });
      let out = "";
      child.stdout.on("data", (d: Buffer) => { out += d.toString(); });
      child.stderr.on("data", (d: Buffer) => { out += d.toString(); });
      child.on("error", () => resolve(null));
      child.on("close", () => {
        const m = /version[:\s]+v?(\d+\.\d+(?:\.\d+)?(?:[.-][0-9A-Za-z]+)?)/i.exec(out) ?? /\b(\d+\.\d+(?:\.\d+)?(?:[.-][0-9A-Za-z]+)?)/.exec(out);
        resolve(m ? (m[1] as string) : null);
      });
    });
  }

  /** SIGTERM now, SIGKILL if the process is still there after the grace period. */
  function terminate(e: Entry): void {
    const child = e.child;
    if (!child) return;
    child.kill("SIGTERM");
    const t = setTimeout(() => { if (e.child === child) child.kill("SIGKILL"); }, KILL_GRACE_MS);
    t.unref();
  }

  async function tail(file: string): Promise<string> {
    try { const s = await readFile(file, "utf8"); return s.slice(-LOG_TAIL); } catch { return ""; }
  }

  async function run(task: StepTask, e: Entry): Promise<void> {
    const log = join(e.dir, "step.log");
    const finish = async (state: Partial<ObservedStepState>) => {
      // Stopping the server is not the end of a step: leave its state "running", so the next
      // start finds it lost and runs it again.
      if (stopping) return;
      e.state = { ...e.state, ...state, finishedAt: clock.now() };
      delete e.child;
      await persist(task.runId, task.stepId, e);
      try { await opts.store.put(`${task.runRoot}logs/${task.stepId}.log`, createReadStream(log)); } catch { /* no log yet */ }
      changed(task.runId);
    };
    try {
      await stageInputs(opts.store, { workspaceRoot: task.workspaceRoot, inputs: task.invocation.inputs, mkdirs: task.invocation.mkdirs }, e.dir);
    } catch (err) {
      await writeFile(log, `staging failed: ${err instanceof Error ? err.message : String(err)}\n`, { flag: "a" });
      await finish({ phase: "failed", exitCode: null, message: err instanceof Error ? err.message : String(err) });
      return;
    }
    if (e.killReason) {
      await finish(e.killReason === "cancelled" ? { phase: "cancelled", exitCode: null, message: "cancelled" } : { phase: "failed", exitCode: null, message: `timed out after ${task.timeoutMs} ms` });
      return;
    }
    const exe = await describeExecutable(task.invocation.argv[0] as string);
    if (!exe) {
      await finish({ phase: "failed", exitCode: null, message: `${task.invocation.argv[0]} is not installed (not on PATH)` });
      return;
    }
    e.state = { ...e.state, toolVersion: exe.version, imageDigest: null, executable: { path: exe.path, sha256: exe.sha256 } };
    const logFd = openSync(log, "a");
    const outFd = task.invocation.stdout ? openSync(join(e.dir, task.invocation.stdout), "w") : logFd;
    const env = { PATH, HOME: e.dir, LANG: "C.UTF-8", TMPDIR: join(e.dir, "tmp") };
    await mkdir(env.TMPDIR, { recursive: true });
    const child = spawn(task.invocation.argv[0] as string, task.invocation.argv.slice(1), { cwd: e.dir, env, stdio: ["ignore", outFd, logFd], detached: false });
    e.child = child;
    // Listen before anything else is awaited: a quick tool may exit at once.
    const exited = new Promise<number | null>((resolve) => {
      child.on("error", (err) => { void writeFile(log, `${err.message}\n`, { flag: "a" }); resolve(null); });
      child.on("exit", (c, sig) => resolve(c ?? (sig ? 128 : null)));
    });
    if (e.killReason) terminate(e); // told to stop while it was being started
    await persist(task.runId, task.stepId, e);
    changed(task.runId); // the tool's version and executable are known now
    const code = await exited;
    closeSync(logFd);
    if (outFd !== logFd) closeSync(outFd);
    if (e.killReason === "cancelled") { await finish({ phase: "cancelled", exitCode: code, message: "cancelled" }); return; }
    if (e.killReason === "timeout") { await finish({ phase: "failed", exitCode: code, message: `timed out after ${task.timeoutMs} ms` }); return; }
    if (code !== 0) {
      const stderr = (await tail(log)).trim();
      await finish({ phase: "failed", exitCode: code, message: `exit code ${code}${stderr ? `; stderr: ${stderr.slice(-500)}` : ""}` });
      return;
    }
    try {
      const outputs = await publishOutputs(opts.store, { runRoot: task.runRoot, outputs: task.invocation.outputs }, e.dir);
      await finish({ phase: "completed", exitCode: 0, outputs });
    } catch (err) {
      await finish({ phase: "failed", exitCode: 0, message: err instanceof Error ? err.message : String(err) });
    }
  }

  return {
    async submit(task) {
      const steps = stepsOf(task.runId);
      const known = steps.get(task.stepId);
      if (known && known.state.attempt >= task.attempt) return;
      const dir = join(root, task.runId, `${task.stepId}-${task.attempt}`);
      await rm(dir, { recursive: true, force: true });
      await mkdir(dir, { recursive: true });
      const e: Entry = { state: { phase: "running", attempt: task.attempt, startedAt: clock.now() }, dir };
      steps.set(task.stepId, e);
      await persist(task.runId, task.stepId, e);
      changed(task.runId);
      void run(task, e).catch(async (err: unknown) => {
        e.state = { ...e.state, phase: "failed", message: err instanceof Error ? err.message : String(err), finishedAt: clock.now() };
        await persist(task.runId, task.stepId, e).catch(() => undefined);
        changed(task.runId);
      });
    },
    async observe(runId) {
      return new Map([...(runs.get(runId) ?? new Map<string, Entry>())].map(([id, e]) => [id, { ...e.state }]));
    },
    async kill(runId, stepId, reason) {
      const e = runs.get(runId)?.get(stepId);
      if (!e || e.state.phase !== "running") return;
      // Remembered even before the process exists (still staging): it is then never started.
      e.killReason ??= reason;
      terminate(e);
    },
    watch(fn) { events.on("change", fn); return () => events.off("change", fn); },
    async logs(runId, stepId) {
      const e = runs.get(runId)?.get(stepId);
      if (!e) return undefined;
      try { return await readFile(join(e.dir, "step.log"), "utf8"); } catch { return ""; }
    },
    /** Reloads finished steps after a restart; steps whose process vanished are forgotten. */
    async recover() {
      let runIds: string[];
      try { runIds = await readdir(root); } catch { return; }
      for (const runId of runIds) {
        let dirs: string[];
        try { dirs = await readdir(join(root, runId)); } catch { continue; }
        for (const d of dirs) {
          const dir = join(root, runId, d);
          let saved: ObservedStepState & { stepId: string };
          try { saved = JSON.parse(await readFile(join(dir, "state.json"), "utf8")) as ObservedStepState & { stepId: string }; } catch { continue; }
          const { stepId, ...state } = saved;
          const steps = stepsOf(runId);
          const cur = steps.get(stepId);
          if (state.phase === "running") {
            // The process is gone with the old server. Keep the attempt number so the next one is higher.
            if (!cur || cur.state.attempt < state.attempt) steps.set(stepId, { state: { ...state, phase: "failed", message: "lost: the server stopped while the step ran" }, dir });
            continue;
          }
          if (!cur || cur.state.attempt <= state.attempt) steps.set(stepId, { state, dir });
        }
      }
    },
    /** Stops every running step without recording an outcome (they are retried after a restart). */
    async shutdown() {
      stopping = true;
      for (const steps of runs.values()) for (const e of steps.values()) if (e.child) e.child.kill("SIGKILL");
    },
  };
}
