/**
 * A real `operon serve` (embedded) for the benches that measure the API from outside: started
 * on a fresh data folder and a free port, its bootstrap key, a workspace seeded with small
 * FASTQ files, and a way to write a bench's section into bench/RESULTS.md.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePorts } from "../test/support/minio.js";

const root = new URL("..", import.meta.url).pathname;

export interface BenchServer { base: string; headers: { authorization: string }; stop(): Promise<void> }

/** Starts the server (extra environment in `env`) and uploads `files` small FASTQs under reads/ of workspace default. */
export async function startServe(env: Record<string, string> = {}, files = 20): Promise<BenchServer> {
  const data = mkdtempSync(join(tmpdir(), "operon-bench-serve-"));
  const [port] = await freePorts(1) as [number];
  const server = spawn(process.execPath, ["--import", "tsx", "cli/main.ts", "serve"], {
    cwd: root, stdio: ["ignore", "ignore", "inherit"],
    env: { ...process.env, OPERON_DATA_DIR: data, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "warn", ...env },
  });
  const stop = async () => {
    if (server.exitCode === null) { const exited = new Promise((r) => server.once("exit", r)); server.kill("SIGTERM"); await exited; }
    rmSync(data, { recursive: true, force: true });
  };
  const base = `http://127.0.0.1:${port}`;
  try {
    for (let i = 0; ; i++) {
      try { if ((await fetch(`${base}/healthz`)).ok) break; } catch { /* not yet */ }
      if (i > 600) throw new Error("the server did not start");
      await new Promise((r) => setTimeout(r, 100));
    }
    const headers = { authorization: `Bearer ${readFileSync(join(data, "bootstrap-key"), "utf8").trim()}` };
    for (let i = 0; i < files; i++) {
      const form = new FormData();
      form.set("workspace_id", "default");
      form.set("path", "reads");
      form.set("file", new Blob([`@r${i}\nACGT\n+\nIIII\n`]), `s${i}.fastq`);
      const r = await fetch(`${base}/v1/files/upload`, { method: "POST", headers, body: form });
      if (r.status !== 201) throw new Error(`upload: ${r.status} ${await r.text()}`);
    }
    return { base, headers, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** Replaces the `<!-- name:start -->…<!-- name:end -->` section of bench/RESULTS.md, or appends it. */
export function writeSection(name: string, section: string): void {
  const results = join(root, "bench/RESULTS.md");
  const current = readFileSync(results, "utf8");
  const re = new RegExp(`<!-- ${name}:start -->[\\s\\S]*<!-- ${name}:end -->`);
  writeFileSync(results, re.test(current) ? current.replace(re, () => section) : `${current.trimEnd()}\n\n${section}\n`);
}
