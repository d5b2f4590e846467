/**
 * `operon operator` (cli/main.ts through tsx) as a separate process against a test control
 * plane, with the environment a Deployment would give it: the env's S3 settings and
 * kubeconfig, cluster mode, the namespace, its pod name (`identity`, its Lease identity) and a
 * free port on 127.0.0.1. Resolves once its /healthz answers; the process is killed (SIGKILL)
 * at `t`'s teardown. The replica, drill and soak tests share it.
 */
import type { Test } from "tap";
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { TestEnv } from "./k8s-env.js";
import { freePorts } from "./minio.js";
import { until } from "./wait.js";

const repo = fileURLToPath(new URL("../../", import.meta.url));

export interface OperatorProcess {
  child: ChildProcess;
  /** Its OPERON_POD_NAME. */
  identity: string;
  /** Where its /healthz, /readyz and /metrics answer (127.0.0.1). */
  port: number;
  /** Its stdout and stderr so far. */
  output(): string;
  /** Its exit code (null after a signal). */
  exited: Promise<number | null>;
}

export interface OperatorProcessOptions {
  namespace: string;
  identity: string;
  /** More environment (OPERON_LEASE_DURATION_SECONDS, OPERON_ORG_CONCURRENCY, …); overrides the defaults. */
  env?: Record<string, string>;
}

export async function startOperatorProcess(t: Test, env: TestEnv, o: OperatorProcessOptions): Promise<OperatorProcess> {
  const port = (await freePorts(1))[0] as number;
  const child = spawn(process.execPath, ["--import", "tsx", "cli/main.ts", "operator"], {
    cwd: repo,
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/tmp",
      ...env.env, KUBECONFIG: env.kubeconfigPath,
      OPERON_MODE: "cluster", OPERON_NAMESPACE: o.namespace, OPERON_POD_NAME: o.identity, PORT: String(port), HOST: "127.0.0.1",
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true", ...o.env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  t.teardown(() => { child.kill("SIGKILL"); });
  let out = "";
  child.stdout?.on("data", (d: Buffer) => { out += d.toString(); });
  child.stderr?.on("data", (d: Buffer) => { out += d.toString(); });
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  await until(`${o.identity} health`, async () => {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${o.identity} exited (${child.exitCode ?? child.signalCode}) before answering /healthz:\n${out}`);
    try { return (await fetch(`http://127.0.0.1:${port}/healthz`)).ok; } catch { return false; }
  }, 60_000);
  return { child, identity: o.identity, port, output: () => out, exited };
}
