/**
 * Runs one of Debian's tools (samtools, bcftools, tabix) on the api-server's own machine, for
 * the work a viewer link needs before a browser can read a file (an index, a conversion).
 * The caller decides what to run; this only runs it: argv arrays, never a shell; inputs
 * mounted read-only under `in/` of a fresh working directory, inside the same bubblewrap
 * sandbox as embedded steps where bubblewrap works (no network, nothing else of the host);
 * a time limit, a largest file and an address-space limit; stdout kept only up to a bound, or cut off early once the caller has read
 * what it wanted (`stopAfterLines`).
 */
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bwrapArgv, probeSandbox, SANDBOX_PASSWD } from "./sandbox.js";

export interface ToolRun {
  argv: string[];
  /** Host files, each visible to the tool as `in/<name>` (read-only). */
  inputs?: Array<{ host: string; name: string }>;
  timeoutMs?: number;
  /** Keep at most this many bytes of stdout (default 1 MiB): the first ones, or the last with `keepTail`. */
  maxStdout?: number;
  keepTail?: boolean;
  /** Stop the tool once this many stdout lines have arrived (e.g. the first record). */
  stopAfterLines?: number;
  /** No file the tool writes may grow past this many bytes (RLIMIT_FSIZE, through prlimit). */
  maxFileBytes?: number;
  /** The tool's address space (RLIMIT_AS, through prlimit): its allocations fail past it. */
  maxMemoryBytes?: number;
}

/** `signal`: what ended the tool when it did not exit (SIGKILL at the time limit, SIGXFSZ past the largest file). */
export interface ToolResult { code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string; stopped: boolean }

export interface ToolRunner {
  /** A fresh working directory (the tool's cwd); remove it with `dispose`. */
  workDir(): string;
  run(dir: string, job: ToolRun): Promise<ToolResult>;
  dispose(dir: string): void;
}

const NAME = /^[A-Za-z0-9._-]{1,200}$/;

export function createToolRunner(opts: { tmpRoot?: string; sandbox?: "auto" | "off" } = {}): ToolRunner {
  const root = opts.tmpRoot ?? tmpdir();
  let sandboxed: Promise<boolean> | undefined;
  const useSandbox = () => {
    if (opts.sandbox === "off") return Promise.resolve(false);
    sandboxed ??= (async () => {
      const d = mkdtempSync(join(root, "operon-probe-"));
      try {
        writeFileSync(join(d, "passwd"), SANDBOX_PASSWD);
        return (await probeSandbox(d, join(d, "passwd"))).ok;
      } finally { rmSync(d, { recursive: true, force: true }); }
    })();
    return sandboxed;
  };

  return {
    workDir: () => {
      const d = mkdtempSync(join(root, "operon-viewer-"));
      mkdirSync(join(d, "work", "in"), { recursive: true });
      mkdirSync(join(d, "tmp"));
      writeFileSync(join(d, "passwd"), SANDBOX_PASSWD);
      return d;
    },
    dispose: (dir) => rmSync(dir, { recursive: true, force: true }),
    async run(dir, job) {
      const work = join(dir, "work");
      const binds = [];
      for (const i of job.inputs ?? []) {
        if (!NAME.test(i.name)) throw new Error(`tool input name ${JSON.stringify(i.name)} is not a plain file name`);
        binds.push({ host: i.host, path: `/work/in/${i.name}`, readOnly: true });
      }
      const limits = [
        ...(job.maxFileBytes !== undefined ? [`--fsize=${Math.floor(job.maxFileBytes)}`] : []),
        ...(job.maxMemoryBytes !== undefined ? [`--as=${Math.floor(job.maxMemoryBytes)}`] : []),
      ];
      const limited = limits.length === 0 ? job.argv : ["prlimit", ...limits, "--", ...job.argv];
      let argv: string[];
      if (await useSandbox()) {
        for (const b of binds) writeFileSync(join(work, "in", b.path.slice("/work/in/".length)), "");
        argv = bwrapArgv({ workDir: work, tmpDir: join(dir, "tmp"), passwdFile: join(dir, "passwd"), binds, env: { PATH: "/usr/bin:/bin", HOME: "/work", TMPDIR: "/tmp" }, argv: limited });
      } else {
        for (const i of job.inputs ?? []) symlinkSync(i.host, join(work, "in", i.name));
        argv = limited;
      }
      const max = job.maxStdout ?? 1024 * 1024;
      return new Promise<ToolResult>((resolve, reject) => {
        const child = spawn(argv[0] as string, argv.slice(1), { cwd: work, stdio: ["ignore", "pipe", "pipe"], env: { PATH: "/usr/bin:/bin", TMPDIR: join(dir, "tmp") }, timeout: job.timeoutMs ?? 600_000, killSignal: "SIGKILL" });
        let out = "";
        let err = "";
        let lines = 0;
        let stopped = false;
        child.stdout.setEncoding("utf8");
        child.stdout.on("data", (d: string) => {
          if (stopped) return;
          if (job.keepTail) { out += d; if (out.length > 2 * max) out = out.slice(-max); }
          else if (out.length < max) out += d.slice(0, max - out.length);
          if (job.stopAfterLines !== undefined) {
            for (const ch of d) if (ch === "\n") lines++;
            if (lines >= job.stopAfterLines) { stopped = true; child.kill("SIGKILL"); }
          }
        });
        child.stderr.on("data", (d: Buffer) => { if (err.length < 16_384) err += d.toString(); });
        child.on("error", reject);
        child.on("close", (code, signal) => resolve({ code, signal, stdout: job.keepTail ? out.slice(-max) : out, stderr: err.trim(), stopped }));
      });
    },
  };
}
