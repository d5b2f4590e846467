/**
 * From configuration to a running engine, for every process: the object store the config
 * names, the service data on it, embedded mode's first start, and the engine wired to its
 * adapters — local run store and sandboxed process executor (embedded), or PipelineRuns
 * read by the api-server (cluster). `api-server/`, `operator/` and the CLI start from here.
 */
import { randomBytes } from "node:crypto";
import { chmod, mkdir, readFile, stat, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join, resolve } from "node:path";
import type { Config } from "../core/config.js";
import { parseStepPodConfig, type StepPodConfig } from "../core/kubernetes/step-pods.js";
import type { ObjectStore, RunStore, StepExecutor } from "../core/ports.js";
import { isFinal } from "../core/status.js";
import { createLocalObjectStore } from "../adapters/local/object-store.js";
import { S3_DEFAULT_CONNECTION_TIMEOUT_MS, createS3ObjectStore } from "../adapters/s3/object-store.js";
import { createLocalRunStore } from "../adapters/local/run-store.js";
import { createProcessExecutor } from "../adapters/local/process-executor.js";
import { SANDBOX_PASSWD, probeSandbox } from "../adapters/local/sandbox.js";
import { createKubeClient, type KubeClient } from "../adapters/kubernetes/client.js";
import { createKubeRunStore, type KubeRunStore } from "../adapters/kubernetes/run-store.js";
import { KubeClaims } from "../adapters/kubernetes/claims.js";
import { createEngine, type Engine } from "../engine/engine.js";
import { SCOPES, ServiceStore } from "../services/store.js";
import { messageOf } from "../core/errors.js";

/** The signing secret: configured, or generated once and kept in the data dir (embedded). */
async function signingSecret(config: Config): Promise<string> {
  if (config.OPERON_SIGNING_SECRET) return config.OPERON_SIGNING_SECRET;
  if (config.OPERON_MODE === "cluster") throw new Error("invalid configuration: OPERON_SIGNING_SECRET: required in cluster mode");
  const dir = resolve(config.OPERON_DATA_DIR);
  const file = join(dir, "signing-secret");
  try { return (await readFile(file, "utf8")).trim(); } catch { /* first start */ }
  await mkdir(dir, { recursive: true });
  const secret = randomBytes(32).toString("hex");
  await writeFile(file, secret, { mode: 0o600 });
  return secret;
}

export async function createStore(config: Config, secret: string): Promise<ObjectStore> {
  if (config.storage === "s3") {
    return createS3ObjectStore({
      bucket: config.S3_BUCKET as string,
      region: config.S3_REGION,
      forcePathStyle: config.S3_FORCE_PATH_STYLE,
      requestTimeoutMs: config.OPERON_S3_REQUEST_TIMEOUT_SECONDS * 1000,
      connectionTimeoutMs: Math.min(S3_DEFAULT_CONNECTION_TIMEOUT_MS, config.OPERON_S3_REQUEST_TIMEOUT_SECONDS * 1000),
      maxAttempts: config.OPERON_S3_MAX_ATTEMPTS,
      ...(config.S3_ENDPOINT ? { endpoint: config.S3_ENDPOINT } : {}),
      ...(config.AWS_ACCESS_KEY_ID && config.AWS_SECRET_ACCESS_KEY ? { credentials: { accessKeyId: config.AWS_ACCESS_KEY_ID, secretAccessKey: config.AWS_SECRET_ACCESS_KEY } } : {}),
    });
  }
  // Presigned URLs name the content origin when there is one (OPERON_CONTENT_URL), never the API's.
  return createLocalObjectStore({ root: resolve(config.OPERON_DATA_DIR), publicUrl: config.contentUrl ?? config.publicUrl, signingSecret: secret });
}

export interface Runtime { config: Config; store: ObjectStore; service: ServiceStore; secret: string }

/**
 * Whether embedded steps can run in the bubblewrap sandbox here. Where it cannot start,
 * steps are refused unless OPERON_UNSAFE_NO_SANDBOX=1 allows them unsandboxed, and start-up
 * says so loudly either way.
 */
export async function chooseSandbox(dataDir: string, allowUnsafe: boolean, log: (s: string) => void, bwrap = "bwrap"): Promise<"bwrap" | "off" | { unavailable: string }> {
  const dir = join(dataDir, "sandbox-probe");
  await mkdir(dir, { recursive: true });
  const passwd = join(dir, "passwd");
  await writeFile(passwd, SANDBOX_PASSWD);
  const probe = await probeSandbox(dir, passwd, bwrap);
  // The sandbox is used wherever it starts: the variable only permits running without it where it cannot.
  if (probe.ok) return "bwrap";
  if (allowUnsafe) return warnUnsafe(log, `the sandbox cannot start (${probe.reason})`);
  log(`WARNING: steps will not run: the step sandbox (bubblewrap) cannot start here: ${probe.reason}. Install bubblewrap (apt-get install bubblewrap), or set OPERON_UNSAFE_NO_SANDBOX=1 to run steps without it.`);
  return { unavailable: probe.reason };
}

function warnUnsafe(log: (s: string) => void, why: string): "off" {
  log(`WARNING: ${why}: pipeline steps run WITHOUT the sandbox. A step can read and write anything this server's user can (other organizations' data, the signing secret) and reach the network. Never do this with untrusted users.`);
  return "off";
}

/** OPERON_REF_VOLUMES as given, once each directory is found to be one: a mistyped path stops start-up. */
async function checkReferenceVolumes(volumes: Readonly<Record<string, string>>): Promise<Record<string, string>> {
  for (const [name, dir] of Object.entries(volumes)) {
    const st = await stat(dir).catch(() => undefined);
    if (!st?.isDirectory()) throw new Error(`invalid configuration: OPERON_REF_VOLUMES: volume "${name}": ${dir} is not a directory`);
  }
  return { ...volumes };
}

/** Embedded mode's engine: JSON run store and child-process executor under the data dir. */
export async function createEmbeddedEngine(rt: Runtime, log: (s: string) => void): Promise<{ engine: Engine; stop(): Promise<void> }> {
  const dataDir = resolve(rt.config.OPERON_DATA_DIR);
  const referenceVolumes = await checkReferenceVolumes(rt.config.OPERON_REF_VOLUMES ?? {});
  const executor = createProcessExecutor({ dataDir, store: rt.store, sandbox: await chooseSandbox(dataDir, rt.config.OPERON_UNSAFE_NO_SANDBOX, log), keepWorkdirs: rt.config.OPERON_KEEP_WORKDIRS, referenceVolumes });
  const runs = createLocalRunStore(dataDir);
  await executor.recover({ ended: (id) => runEnded(runs, id) });
  const unwatch = forgetEndedRuns(runs, executor);
  const engine = createEngine({ runs, executor, store: rt.store, clock: { now: () => Date.now() }, orgConcurrency: () => rt.config.OPERON_ORG_CONCURRENCY, referenceVolumes: Object.keys(referenceVolumes), log });
  return { engine, stop: async () => { unwatch(); await engine.stop(); await executor.shutdown(); } };
}

/** Whether a run has ended (final) or is gone. */
async function runEnded(runs: Pick<RunStore, "get">, id: string): Promise<boolean> {
  const run = await runs.get(id);
  return !run || isFinal(run.status);
}

/**
 * The executor forgets each run that ends or goes away (its steps are observed no more), so
 * what it keeps does not grow with the runs a server has run. Returns the unwatch.
 */
export function forgetEndedRuns(runs: Pick<RunStore, "get" | "watch">, executor: Required<Pick<StepExecutor, "forgetRun">>): () => void {
  return runs.watch((id) => {
    runEnded(runs, id).then((ended) => { if (ended) executor.forgetRun(id); }, () => undefined);
  });
}

export async function createRuntime(config: Config): Promise<Runtime> {
  const secret = await signingSecret(config);
  const store = await createStore(config, secret);
  return { config, store, service: new ServiceStore(store), secret };
}

/** Embedded first start: org `default`, workspace `default`, one all-scope key. */
export async function bootstrap(rt: Runtime): Promise<string | undefined> {
  if (rt.config.OPERON_MODE !== "embedded") return undefined;
  if ((await rt.service.listWorkspaces("default")).length > 0) return undefined;
  if ((await rt.service.listKeys("default")).length > 0) return undefined;
  await rt.service.createWorkspace("default", "default", "Default workspace");
  const { key } = await rt.service.createKey({ organization: "default", scopes: [...SCOPES], workspaces: null, name: "bootstrap" });
  const file = join(resolve(rt.config.OPERON_DATA_DIR), "bootstrap-key");
  await writeFile(file, key + "\n", { mode: 0o600 });
  await chmod(file, 0o600);
  return key;
}

export interface ClusterEngineOptions {
  /** Kubeconfig file (default: KUBECONFIG, ~/.kube/config, or in-cluster). */
  kubeconfig?: string;
  log: (msg: string) => void;
  /** The step-pod configuration itself, instead of the file OPERON_STEP_POD_CONFIG names (tests). */
  stepPods?: StepPodConfig;
}

/**
 * The step-pod configuration (docs/kubernetes.md "Step pods") from the file `path` names, read
 * at start-up by the operator and the cluster-mode api-server; none (unset): the built-in
 * defaults. A file that cannot be read or is not a valid configuration stops start-up with
 * one line naming the file and the JSON path of the problem.
 */
export async function loadStepPodConfig(path: string | undefined): Promise<StepPodConfig> {
  if (path === undefined) return {};
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (e) {
    throw new Error(`invalid configuration: OPERON_STEP_POD_CONFIG: cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? messageOf(e)}`, { cause: e });
  }
  const r = parseStepPodConfig(text);
  if (!r.ok) throw new Error(`invalid configuration: OPERON_STEP_POD_CONFIG: ${path}: ${r.message}`);
  return r.config;
}

/**
 * The api-server's engine in cluster mode: PipelineRuns in, PipelineRuns out; it runs no
 * steps and reconciles nothing. The operator process builds its own (operator/cluster.ts
 * startOperator: Jobs as the executor, the controller, leader election).
 */
export async function createApiServerClusterEngine(config: Config, store: ObjectStore, opts: ClusterEngineOptions): Promise<{ engine: Engine; runs: KubeRunStore; client: KubeClient; stop(): Promise<void> }> {
  // Submission refuses what the operator would (above maxResources, a tool without an image).
  const stepPods = opts.stepPods ?? await loadStepPodConfig(config.OPERON_STEP_POD_CONFIG);
  const client = await createKubeClient({ ...(opts.kubeconfig ? { kubeconfig: opts.kubeconfig } : {}), namespace: config.OPERON_NAMESPACE, userAgent: "operon-api-server" });
  const runs = createKubeRunStore({ client, namespace: config.OPERON_NAMESPACE, writeStatus: false, onError: (e) => opts.log(`pipelineruns watch: ${messageOf(e)}`) });
  await runs.start();
  // Renders and viewer preparations wait in the organization's queue as claims the operator admits.
  const claims = new KubeClaims({ client, namespace: config.OPERON_NAMESPACE, onError: (e) => opts.log(`claims watch: ${messageOf(e)}`) });
  await claims.start();
  const engine = createEngine({ mode: "cluster", runs, store, clock: { now: () => Date.now() }, orgConcurrency: () => config.OPERON_ORG_CONCURRENCY, controller: false, stepPods, claims, instance: `api-server-${hostname()}-${randomBytes(3).toString("hex")}`, log: opts.log });
  return { engine, runs, client, stop: async () => { await engine.stop(); runs.stop(); claims.stop(); client.close(); } };
}

