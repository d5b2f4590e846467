/**
 * A real `operon serve` (embedded mode) on a data folder, as a child process: for the tests
 * that kill the server mid-work and restart it on the same folder. `start` waits for
 * `/healthz`; `stop` sends a signal and waits for the exit; `api` calls it with the bootstrap
 * key.
 */
import type { Test } from "tap";
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { freePorts } from "./minio.js";
import { until } from "./wait.js";

export interface ServeProcess {
  port: number;
  /** The running server's pid (undefined between a stop and the next start). */
  pid(): number | undefined;
  start(): Promise<void>;
  stop(signal?: NodeJS.Signals): Promise<void>;
  api(method: string, path: string, body?: unknown): Promise<{ status: number; body: { data: Record<string, unknown> } }>;
}

export async function serveProcess(t: Test, data: string): Promise<ServeProcess> {
  const [port] = await freePorts(1);
  const env = { ...process.env, OPERON_DATA_DIR: data, PORT: String(port), HOST: "127.0.0.1", OPERON_MODE: "embedded", LOG_LEVEL: "warn" };
  let child: ChildProcess | undefined;
  t.teardown(() => { child?.kill("SIGKILL"); });
  const base = `http://127.0.0.1:${port}`;
  return {
    port: port!,
    pid: () => child?.pid,
    async start() {
      child = spawn(process.execPath, ["--import", "tsx", "cli/main.ts", "serve"], { env, stdio: ["ignore", "ignore", "inherit"] });
      await until("the server to answer", async () => { try { return (await fetch(`${base}/healthz`)).ok; } catch { return false; } }, 60_000);
    },
    async stop(signal = "SIGKILL") {
      const c = child;
      if (!c || c.exitCode !== null) return;
      const exited = new Promise((r) => c.once("exit", r));
      c.kill(signal);
      await exited;
      child = undefined;
    },
    async api(method, path, body) {
      const key = readFileSync(join(data, "bootstrap-key"), "utf8").trim();
      const r = await fetch(`${base}${path}`, { method, headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, ...(body ? { body: JSON.stringify(body) } : {}) });
      return { status: r.status, body: (await r.json()) as { data: Record<string, unknown> } };
    },
  };
}
