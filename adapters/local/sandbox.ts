/**
 * The OS sandbox of embedded mode's steps (bubblewrap). A step process sees its own working
 * directory read-write at `/work`, a scratch `/tmp` of its own, the system's tool paths
 * read-only (`/usr`, and the few `/etc` entries the Java tools need), its inputs read-only
 * where they are mounted rather than copied, the reference volumes its step names read-only at
 * `/ref/<volume>` — and nothing else: not the data directory,
 * not other runs' working directories, not the host's `/etc`, `/root` or `/tmp`, and no
 * network (every namespace is unshared, so only a loopback with nothing behind it exists).
 * This module only builds the bwrap argv and probes whether bwrap works; the executor
 * decides what to bind.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { messageOf } from "../../core/errors.js";

/** Where the step's working directory appears inside the sandbox. */
export const SANDBOX_WORKDIR = "/work";
/** The step's scratch directory inside the sandbox (TMPDIR, java.io.tmpdir). */
export const SANDBOX_TMP = "/tmp";

export interface SandboxBind { host: string; path: string; readOnly: boolean }

export interface SandboxSpec {
  /** Host directory mounted read-write at /work (the tool's cwd). */
  workDir: string;
  /** Host directory mounted read-write at /tmp. */
  tmpDir: string;
  /** A passwd file naming the step's user (Java asks for a user name and home). */
  passwdFile: string;
  /** Further mounts: inputs (read-only), a tool's own directory outside /usr (read-only), reference volumes at /ref/<name> (read-only). */
  binds: readonly SandboxBind[];
  env: Readonly<Record<string, string>>;
  argv: readonly string[];
}

/** System paths the tools read, when the host has them: read-only. */
const SYSTEM_RO = ["/usr", "/etc/alternatives", "/etc/fastqc", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/java-17-openjdk", "/etc/java-21-openjdk", "/etc/perl", "/etc/ssl/certs", "/etc/localtime"];
/** Debian's merged-/usr symlinks. */
const USR_LINKS: ReadonlyArray<[string, string]> = [["usr/bin", "/bin"], ["usr/sbin", "/sbin"], ["usr/lib", "/lib"], ["usr/lib64", "/lib64"]];

/** The argv that runs `spec.argv` inside bubblewrap. */
export function bwrapArgv(spec: SandboxSpec, exists: (p: string) => boolean = existsSync): string[] {
  const a = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"];
  for (const p of SYSTEM_RO) if (exists(p)) a.push("--ro-bind", p, p);
  for (const [target, link] of USR_LINKS) if (exists(`/${target}`)) a.push("--symlink", target, link);
  a.push("--proc", "/proc", "--dev", "/dev");
  a.push("--bind", spec.tmpDir, SANDBOX_TMP);
  a.push("--ro-bind", spec.passwdFile, "/etc/passwd");
  a.push("--bind", spec.workDir, SANDBOX_WORKDIR);
  for (const b of spec.binds) a.push(b.readOnly ? "--ro-bind" : "--bind", b.host, b.path);
  a.push("--chdir", SANDBOX_WORKDIR, "--clearenv");
  for (const [k, v] of Object.entries(spec.env)) a.push("--setenv", k, v);
  a.push("--", ...spec.argv);
  return a;
}

/** The passwd line of the step's user inside the sandbox (root of its own user namespace). */
export const SANDBOX_PASSWD = `step:x:0:0:operon step:${SANDBOX_WORKDIR}:/usr/sbin/nologin\n`;

export type SandboxProbe = { ok: true } | { ok: false; reason: string };

/** Whether bubblewrap can start a sandbox here: runs `true` inside one (`bwrap`: the executable, for tests). */
export function probeSandbox(tmpDir: string, passwdFile: string, bwrap = "bwrap"): Promise<SandboxProbe> {
  return new Promise((resolve) => {
    const argv = [bwrap, ...bwrapArgv({ workDir: tmpDir, tmpDir, passwdFile, binds: [], env: { PATH: "/usr/bin:/bin" }, argv: ["true"] }).slice(1)];
    let err = "";
    let child;
    try {
      child = spawn(argv[0] as string, argv.slice(1), { stdio: ["ignore", "ignore", "pipe"], timeout: 20_000 });
    } catch (e) {
      resolve({ ok: false, reason: messageOf(e) });
      return;
    }
    child.stderr.on("data", (d: Buffer) => { err += d.toString(); });
    child.on("error", (e: NodeJS.ErrnoException) => resolve({ ok: false, reason: e.code === "ENOENT" ? "bwrap is not installed (Debian package bubblewrap)" : e.message }));
    child.on("close", (code) => resolve(code === 0 ? { ok: true } : { ok: false, reason: `bwrap exited with ${code}: ${err.trim().slice(0, 300)}` }));
  });
}
