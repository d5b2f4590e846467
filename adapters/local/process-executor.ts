/**
 * Embedded mode's StepExecutor: each step is a child process (argv array, never a shell)
 * inside an OS sandbox (sandbox.ts: bubblewrap) that sees only its own working directory
 * `<data dir>/work/<run>/<step>-<attempt>/work/` (as `/work`), its scratch `/tmp`, the
 * system's tool paths read-only and its inputs, with a clean environment and no network.
 * Inputs come from the object store with their secondary files (adapters/staging.ts,
 * shared with cluster mode's step pods): mounted read-only where the store keeps them as
 * local files, else copied. stdout goes to the declared file (or the log), stderr to the
 * log; on success every declared output is uploaded to the run folder with its SHA-256.
 * Files on reference volumes (`ref://<volume>/<path>`, OPERON_REF_VOLUMES) are not staged:
 * each is checked to stay inside its volume and checksummed (adapters/references.ts) before
 * the tool runs, and the volume is mounted read-only at /ref/<volume>.
 * The step's state and log sit beside its working directory, out of the tool's reach, so a
 * restarted server still knows what finished. Policy for a step whose process vanished
 * (the server stopped while it ran): it is forgotten and started again as the next attempt,
 * since it produced nothing that was published. Every error of one step fails that step
 * with a message free of server paths; none escapes to stop the process.
 */
import { stepLogKeyIn } from "../../core/layout.js";
import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { EventEmitter } from "node:events";
import { createReadStream, openSync, closeSync } from "node:fs";
import { access, constants, mkdir, open, readFile, readdir, realpath, rm, writeFile } from "node:fs/promises";
import { delimiter, dirname, join } from "node:path";
import { pipeline } from "node:stream/promises";
import type { Clock, ObjectStore, ObservedStepState, StepExecutor, StepTask } from "../../core/ports.js";
import { REFERENCE_ROOT } from "../../core/references.js";
import { ChecksumCache, checksumReferences } from "../references.js";
import { copyInputs, locateInputs, makeDirs, publishOutputs } from "../staging.js";
import { SANDBOX_PASSWD, SANDBOX_TMP, SANDBOX_WORKDIR, bwrapArgv, type SandboxBind } from "./sandbox.js";
import { messageOf } from "../../core/errors.js";

const KILL_GRACE_MS = 5000;
const LOG_TAIL = 2000;

interface Entry { state: ObservedStepState; child?: ChildProcess; killReason?: "timeout" | "cancelled"; dir: string; pid?: number }

export interface ProcessExecutorOptions {
  dataDir: string;
  store: ObjectStore;
  clock?: Clock;
  /** PATH for the tools (default: the server's PATH). */
  path?: string;
  /**
   * `bwrap` (default): every step runs in the bubblewrap sandbox. `off`: plain child
   * processes (only with OPERON_UNSAFE_NO_SANDBOX=1). `{ unavailable }`: the sandbox could not
   * start here and unsandboxed steps were not allowed: every step fails with the reason.
   */
  sandbox?: "bwrap" | "off" | { unavailable: string };
  /** In the sandbox, mount inputs the store keeps as local files read-only instead of copying them (default true). */
  mountInputs?: boolean;
  /**
   * Keep each step's working directory (its staged inputs and outputs) after it ends, for
   * debugging (OPERON_KEEP_WORKDIRS=1). By default it is removed once the outputs are
   * published; the step's state file and log stay.
   */
  keepWorkdirs?: boolean;
  /**
   * Reference volumes (OPERON_REF_VOLUMES): name → host directory. A step's `ref://<name>/…`
   * files are read there in place: checksummed for run.json before the tool runs, and the
   * directory mounted read-only at /ref/<name> in the sandbox. A reference whose real path
   * leaves its directory, or a volume not listed here, fails the step.
   */
  referenceVolumes?: Readonly<Record<string, string>>;
}

/** Where a step's files are: its state and log beside the tool's working directory, never in it. */
interface StepDirs { dir: string; work: string; tmp: string; log: string }
const dirsOf = (dir: string): StepDirs => ({ dir, work: join(dir, "work"), tmp: join(dir, "tmp"), log: join(dir, "step.log") });

export interface ProcessExecutor extends StepExecutor {
  /**
   * Reloads steps after a restart; a run `ended` says has ended is not reloaded (its leftover
   * processes are still killed).
   */
  recover(opts?: { ended?: (runId: string) => Promise<boolean> }): Promise<void>;
  shutdown(): Promise<void>;
  /** Drops the run's steps (a step still running is dropped when it finishes). */
  forgetRun(runId: string): void;
  /** How many runs the executor holds steps of (for tests: it must not grow with finished runs). */
  cacheSizes(): { runs: number };
}

export function createProcessExecutor(opts: ProcessExecutorOptions): ProcessExecutor {
  const clock = opts.clock ?? { now: () => Date.now() };
  const root = join(opts.dataDir, "work");
  const runs = new Map<string, Map<string, Entry>>();
  /** Runs forgotten while a step still ran: dropped when their last running step finishes. */
  const forgotten = new Set<string>();
  const events = new EventEmitter();
  events.setMaxListeners(100);
  const versionCache = new Map<string, Promise<{ path: string; sha256: string; version: string | null } | undefined>>();
  const PATH = opts.path ?? process.env.PATH ?? "/usr/bin:/bin";
  const sandbox = opts.sandbox ?? "bwrap";
  const mountInputs = opts.mountInputs ?? true;
  /** Reference checksums by (real path, size, mtime): a genome is read once per server, not once per step. */
  const referenceChecksums = new ChecksumCache();
  const volumeDir = (name: string) => (opts.referenceVolumes && Object.hasOwn(opts.referenceVolumes, name) ? opts.referenceVolumes[name] : undefined);
  let stopping = false;
  /** A message for the step record and clients: no server path in it. */
  const scrub = (e: Entry, m: string) => m.split(`${e.dir}/work/`).join("").split(`${e.dir}/`).join("").split(e.dir).join("<step>").split(opts.dataDir).join("<data dir>");

  const stepsOf = (runId: string) => { let m = runs.get(runId); if (!m) { m = new Map(); runs.set(runId, m); } return m; };
  const changed = (runId: string) => events.emit("change", runId);
  /** Drops a forgotten run once none of its steps runs. */
  const dropIfIdle = (runId: string) => {
    const steps = runs.get(runId);
    if (steps && [...steps.values()].some((e) => e.state.phase === "running")) return;
    runs.delete(runId);
    forgotten.delete(runId);
  };

  async function persist(runId: string, stepId: string, e: Entry): Promise<void> {
    await writeFile(join(e.dir, "state.json"), JSON.stringify({ stepId, ...e.state, ...(e.pid !== undefined && e.state.phase === "running" ? { pid: e.pid } : {}) }));
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
  /** A signal to the step's whole process group (the step is its leader), or to the step alone. */
  function signal(child: ChildProcess, sig: NodeJS.Signals): void {
    try { if (child.pid !== undefined) { process.kill(-child.pid, sig); return; } } catch { /* group gone: try the process */ }
    child.kill(sig);
  }

  function terminate(e: Entry): void {
    const child = e.child;
    if (!child) return;
    signal(child, "SIGTERM");
    const t = setTimeout(() => { if (e.child === child) signal(child, "SIGKILL"); }, KILL_GRACE_MS);
    t.unref();
  }

  /**
   * After a crash: a step recorded running may have left processes behind (unsandboxed steps
   * do not die with the server; sandboxed ones do, through bwrap's --die-with-parent). Its
   * process group is killed when its leader is still the step's (its cwd is the step's
   * working directory), so the next attempt never runs beside the old one.
   */
  async function killLeftovers(dir: string, pid: number | undefined): Promise<void> {
    if (pid === undefined) return;
    let cwd: string;
    try { cwd = await realpath(`/proc/${pid}/cwd`); } catch { return; }
    const work = await realpath(dirsOf(dir).work).catch(() => dirsOf(dir).work);
    if (cwd !== work && !cwd.startsWith(work + "/")) return;
    try { process.kill(-pid, "SIGKILL"); } catch { try { process.kill(pid, "SIGKILL"); } catch { /* already gone */ } }
  }

  async function tail(file: string): Promise<string> {
    try { const s = await readFile(file, "utf8"); return s.slice(-LOG_TAIL); } catch { return ""; }
  }

  /** Copies the step's log to the run folder; a log that cannot be read is noted, never thrown. */
  async function publishLog(task: StepTask, log: string): Promise<void> {
    let fh;
    try { fh = await open(log, "r"); } catch { return; }
    try { await opts.store.put(stepLogKeyIn(task.runRoot, task.stepId), fh.createReadStream({ autoClose: false })); } catch { /* the step's outcome stands without its log */ } finally { await fh.close().catch(() => undefined); }
  }

  async function run(task: StepTask, e: Entry): Promise<void> {
    const d = dirsOf(e.dir);
    const log = d.log;
    const finish = async (state: Partial<ObservedStepState>) => {
      // Stopping the server is not the end of a step: leave its state "running", so the next
      // start finds it lost and runs it again.
      if (stopping) return;
      e.state = { ...e.state, ...state, ...(state.message !== undefined ? { message: scrub(e, state.message) } : {}), finishedAt: clock.now() };
      delete e.child;
      await persist(task.runId, task.stepId, e);
      await publishLog(task, log);
      if (!opts.keepWorkdirs) await Promise.all([rm(d.work, { recursive: true, force: true }), rm(d.tmp, { recursive: true, force: true })]).catch(() => undefined);
      changed(task.runId);
      if (forgotten.has(task.runId)) dropIfIdle(task.runId);
    };
    if (typeof sandbox === "object") {
      await finish({ phase: "failed", exitCode: null, message: `steps are not run: the step sandbox cannot start here (${sandbox.unavailable}); install bubblewrap, or set OPERON_UNSAFE_NO_SANDBOX=1 to run steps unsandboxed` });
      return;
    }
    const binds: SandboxBind[] = [];
    // Reference data first: located (refused if it leaves its volume) and checksummed for
    // run.json before anything is staged; each volume used is mounted read-only at /ref/<name>.
    let referenceDirs = new Map<string, string>();
    const references = task.invocation.references ?? [];
    if (references.length) {
      try {
        const r = await checksumReferences(references, volumeDir, referenceChecksums);
        referenceDirs = r.volumes;
        e.state = { ...e.state, references: r.checksums };
        for (const [name, dir] of referenceDirs) binds.push({ host: dir, path: `${REFERENCE_ROOT}/${name}`, readOnly: true });
      } catch (err) {
        await writeFile(log, `reference data refused: ${messageOf(err)}\n`, { flag: "a" });
        await finish({ phase: "failed", exitCode: null, message: messageOf(err) });
        return;
      }
    }
    try {
      const files = await locateInputs(opts.store, { workspaceRoot: task.workspaceRoot, inputs: task.invocation.inputs });
      // Inputs that are also outputs (an index step's file) are copied: the tool writes beside
      // them and publishing reads them from the working directory.
      const outputs = new Set(task.invocation.outputs.flatMap((o) => [o.path, ...o.secondary]));
      const copies = [];
      for (const f of files) {
        const host = sandbox === "bwrap" && mountInputs && !outputs.has(f.local) ? opts.store.localPath?.(f.key) : undefined;
        if (host) binds.push({ host, path: `${SANDBOX_WORKDIR}/${f.local}`, readOnly: true });
        else copies.push(f);
      }
      await copyInputs(opts.store, copies, d.work);
      await makeDirs(task.invocation, d.work);
    } catch (err) {
      await writeFile(log, `staging failed: ${scrub(e, messageOf(err))}\n`, { flag: "a" });
      await finish({ phase: "failed", exitCode: null, message: messageOf(err) });
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
    let logFd: number;
    let outFd: number;
    let argv: string[];
    let env: Record<string, string>;
    let cwd: string;
    try {
      await mkdir(d.tmp, { recursive: true });
      logFd = openSync(log, "a");
      outFd = task.invocation.stdout ? openSync(join(d.work, task.invocation.stdout), "w") : logFd;
      if (sandbox === "bwrap") {
        const passwd = join(e.dir, "passwd");
        await writeFile(passwd, SANDBOX_PASSWD);
        // A tool installed outside /usr (e.g. a gatk launcher in /opt) is mounted read-only too.
        const exeDir = dirname(await realpath(exe.path));
        if (!exeDir.startsWith("/usr/")) binds.unshift({ host: exeDir, path: exeDir, readOnly: true });
        env = { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: SANDBOX_WORKDIR, LANG: "C.UTF-8", TMPDIR: SANDBOX_TMP };
        argv = bwrapArgv({ workDir: d.work, tmpDir: d.tmp, passwdFile: passwd, binds, env, argv: [exe.path, ...task.invocation.argv.slice(1)] });
        cwd = d.work;
      } else {
        env = { PATH, HOME: d.work, LANG: "C.UTF-8", TMPDIR: d.tmp };
        // No sandbox, no /ref mount: the tool reads reference files from their host directories.
        const onHost = (a: string) => [...referenceDirs].reduce((x, [name, dir]) => x.split(`${REFERENCE_ROOT}/${name}/`).join(`${dir}/`), a);
        argv = task.invocation.argv.map(onHost);
        cwd = d.work;
      }
    } catch (err) {
      await finish({ phase: "failed", exitCode: null, message: `the step could not be started: ${messageOf(err)}` });
      return;
    }
    let child: ChildProcess;
    try {
      // Its own process group, so a stop reaches every process of the step.
      child = spawn(argv[0] as string, argv.slice(1), { cwd, env: sandbox === "bwrap" ? { PATH: "/usr/bin:/bin" } : env, stdio: ["ignore", outFd, logFd], detached: true });
    } catch (err) {
      closeSync(logFd);
      if (outFd !== logFd) closeSync(outFd);
      await finish({ phase: "failed", exitCode: null, message: `the step could not be started: ${messageOf(err)}` });
      return;
    }
    e.child = child;
    if (child.pid !== undefined) e.pid = child.pid;
    // Listen before anything else is awaited: a quick tool may exit at once.
    const exited = new Promise<number | null>((resolve) => {
      child.on("error", (err) => { void writeFile(log, `${scrub(e, err.message)}\n`, { flag: "a" }).catch(() => undefined); resolve(null); });
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
      const outputs = await publishOutputs(opts.store, { runRoot: task.runRoot, outputs: task.invocation.outputs }, d.work);
      await finish({ phase: "completed", exitCode: 0, outputs });
    } catch (err) {
      await finish({ phase: "failed", exitCode: 0, message: messageOf(err) });
    }
  }

  return {
    async submit(task) {
      const steps = stepsOf(task.runId);
      const known = steps.get(task.stepId);
      if (known && known.state.attempt >= task.attempt) return;
      const dir = join(root, task.runId, `${task.stepId}-${task.attempt}`);
      await rm(dir, { recursive: true, force: true });
      await mkdir(dirsOf(dir).work, { recursive: true });
      const e: Entry = { state: { phase: "running", attempt: task.attempt, startedAt: clock.now() }, dir };
      steps.set(task.stepId, e);
      await persist(task.runId, task.stepId, e);
      changed(task.runId);
      void run(task, e).catch(async (err: unknown) => {
        delete e.child;
        e.state = { ...e.state, phase: "failed", message: scrub(e, messageOf(err)), finishedAt: clock.now() };
        await persist(task.runId, task.stepId, e).catch(() => undefined);
        changed(task.runId);
        if (forgotten.has(task.runId)) dropIfIdle(task.runId);
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
    /** Reloads finished steps after a restart; steps whose process vanished are reloaded `lost`. */
    async recover({ ended } = {}) {
      let runIds: string[];
      try { runIds = await readdir(root); } catch { return; }
      for (const runId of runIds) {
        let dirs: string[];
        try { dirs = await readdir(join(root, runId)); } catch { continue; }
        const keep = !(await ended?.(runId));
        for (const d of dirs) {
          const dir = join(root, runId, d);
          let saved: ObservedStepState & { stepId: string; pid?: number };
          try { saved = JSON.parse(await readFile(join(dir, "state.json"), "utf8")) as ObservedStepState & { stepId: string; pid?: number }; } catch { continue; }
          const { stepId, pid, ...state } = saved;
          if (state.phase === "running") {
            await killLeftovers(dir, pid);
            if (!opts.keepWorkdirs) await Promise.all([rm(dirsOf(dir).work, { recursive: true, force: true }), rm(dirsOf(dir).tmp, { recursive: true, force: true })]).catch(() => undefined);
          }
          if (!keep) continue;
          const steps = stepsOf(runId);
          const cur = steps.get(stepId);
          if (state.phase === "running") {
            // The process is gone with the old server. Keep the attempt number so the next one is higher.
            if (!cur || cur.state.attempt < state.attempt) steps.set(stepId, { state: { ...state, phase: "lost", message: "the server stopped while the step ran" }, dir });
            continue;
          }
          if (!cur || cur.state.attempt <= state.attempt) steps.set(stepId, { state, dir });
        }
      }
    },
    forgetRun(runId) {
      if (!runs.has(runId)) return;
      forgotten.add(runId);
      dropIfIdle(runId);
    },
    cacheSizes: () => ({ runs: runs.size }),
    /** Stops every running step without recording an outcome (they are retried after a restart). */
    async shutdown() {
      stopping = true;
      for (const steps of runs.values()) for (const e of steps.values()) if (e.child) signal(e.child, "SIGKILL");
    },
  };
}
