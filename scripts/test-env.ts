/**
 * `npm run test-env -- --dir DIR [--kwok-nodes N] [--apiserver-only]`: the tests' real control
 * plane (etcd, kube-apiserver with the CRDs from crds/, kube-controller-manager, kube-scheduler
 * and kwok, with N simulated nodes; or etcd and kube-apiserver alone) and S3 server (MinIO),
 * kept running for manual work against them — kubectl, the operator or the api-server in
 * cluster mode — without a real cluster (test/support/k8s-env.ts). Writes DIR/kubeconfig and
 * DIR/env (KEY=value lines to source), prints `ready`, and runs until SIGINT/SIGTERM; then
 * stops everything, removes the files it wrote and exits 0.
 */
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { startTestEnv } from "../test/support/k8s-env.js";
import type { TestEnv } from "../test/support/k8s-env.js";

const USAGE = "usage: npm run test-env -- --dir DIR [--kwok-nodes N] [--apiserver-only]   (writes DIR/kubeconfig and DIR/env, prints `ready`, runs until Ctrl-C)";

interface Args { dir: string; kwokNodes: number; apiserverOnly: boolean }

function parseArgs(argv: string[]): Args | undefined {
  let dir: string | undefined;
  let kwokNodes = 0;
  let apiserverOnly = false;
  const value = (i: number) => (argv[i + 1] !== undefined && !argv[i + 1]?.startsWith("--") ? argv[i + 1] : undefined);
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? "";
    if (arg === "--dir" && value(i) !== undefined) dir = argv[++i];
    else if (arg.startsWith("--dir=") && arg.length > "--dir=".length) dir = arg.slice("--dir=".length);
    else if (arg === "--kwok-nodes" && /^\d{1,3}$/.test(value(i) ?? "")) kwokNodes = Number(argv[++i]);
    else if (arg === "--apiserver-only") apiserverOnly = true;
    else return undefined;
  }
  if (!dir || (apiserverOnly && kwokNodes > 0)) return undefined;
  return { dir, kwokNodes, apiserverOnly };
}

const args = parseArgs(process.argv.slice(2));
if (!args) {
  process.stderr.write(`${USAGE}\n`);
  process.exit(2);
}
const outDir = resolve(args.dir);
const kubeconfigOut = join(outDir, "kubeconfig");
const envOut = join(outDir, "env");

let env: TestEnv | undefined;
let stopRequested = false;
let stopping: Promise<never> | undefined;

/** Stops everything, removes the files written into DIR, exits. Idempotent. */
function shutdown(code: number): Promise<never> {
  stopping ??= (async () => {
    try {
      await env?.stop();
    } catch (err) {
      process.stderr.write(`test-env: stop: ${err instanceof Error ? err.message : String(err)}\n`);
      code = code || 1;
    }
    await Promise.all([rm(kubeconfigOut, { force: true }), rm(envOut, { force: true })]);
    process.exit(code);
  })();
  return stopping;
}

function onSignal(): void {
  stopRequested = true;
  // Still starting: shut down as soon as startTestEnv returns (it cleans up itself if it fails).
  if (env) void shutdown(0);
}
process.on("SIGINT", onSignal);
process.on("SIGTERM", onSignal);
process.on("SIGHUP", onSignal);

try {
  const started = Date.now();
  env = await startTestEnv({ controlPlane: args.apiserverOnly ? "apiserver" : "full", kwokNodes: args.kwokNodes });
  if (stopRequested) await shutdown(0);
  await mkdir(outDir, { recursive: true });
  await writeFile(kubeconfigOut, env.kubeconfig, { mode: 0o600 });
  const keys = ["S3_ENDPOINT", "S3_BUCKET", "S3_REGION", "S3_FORCE_PATH_STYLE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"];
  const vars: Record<string, string> = { ...env.env, KUBECONFIG: kubeconfigOut };
  const lines = [...keys, "KUBECONFIG"].map((k) => `${k}=${vars[k] ?? ""}`);
  await writeFile(envOut, `${lines.join("\n")}\n`, { mode: 0o600 });
  process.stderr.write(`test-env: apiserver ${env.server} (${env.controlPlane === "full" ? `with controller manager, scheduler and kwok, ${args.kwokNodes} kwok nodes` : "alone"}), S3 ${env.s3?.endpoint ?? "-"}, started in ${((Date.now() - started) / 1000).toFixed(1)} s\n`
    + `test-env: export $(cat ${envOut})   # or: kubectl --kubeconfig ${kubeconfigOut} get crds\n`);
  process.stdout.write("ready\n");
  if (stopRequested) await shutdown(0);
  // Children keep the event loop alive; this makes sure of it until a signal arrives.
  setInterval(() => undefined, 1 << 30);
} catch (err) {
  process.stderr.write(`test-env: ${err instanceof Error ? err.message : String(err)}\n`);
  await shutdown(1);
}
