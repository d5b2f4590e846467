/**
 * A real Kubernetes control plane for tests (docs/testing.md#the-kubernetes-control-plane), started on loopback ports in a fresh
 * temp dir with generated certificates, an admin bearer token and RBAC, the CRDs from crds/
 * installed and Established, plus a real S3 server (MinIO, see ./minio.ts).
 *
 * `controlPlane: "full"` (the default) is a small cluster without kubelets:
 *  - etcd + kube-apiserver;
 *  - kube-controller-manager, only the controllers a batch workload meets: the Job controller
 *    (creates the pods, writes SuccessCriteriaMet/FailureTarget then Complete/Failed, applies
 *    backoffLimit, activeDeadlineSeconds, suspend, podFailurePolicy, podReplacementPolicy),
 *    the garbage collector (ownerReferences), ttl-after-finished, the pod GC, node lifecycle and
 *    taint eviction, the namespace controller. See CONTROLLERS and NODE_TIMING for the flags;
 *  - kube-scheduler (default profile), which binds pods to nodes;
 *  - kwok, the nodes: it manages only nodes annotated `kwok.x-k8s.io/node=fake` (those
 *    `addKwokNodes` creates) and plays the stages in ./kwok/stages.yaml on their pods: Running,
 *    init containers terminated in order, Succeeded after `kwok.operon.dev/duration`, or Failed
 *    with `kwok.operon.dev/exit-code`/`reason`/`message`/`container`; a deleted pod ends Failed,
 *    then goes, as a kubelet does it (see KWOK_ANNOTATION and the stage file's header). Its
 *    server is the kubelet endpoint of every kwok node: `pods/<name>/log` of a kwok pod answers
 *    one fixed line (nothing ran). Nothing runs on a kwok node: an Operon step pod there waits
 *    until test/support/job-sim.ts `startStageOut` uploads the step's outputs in its place.
 *  No node exists at start (unless `kwokNodes`): a pod stays Pending until a node comes — kwok
 *  nodes (`addKwokNodes`), or the test kubelet of test/support/pod-runner.ts (`startNode`),
 *  which runs a pod's containers as local processes with the real tools.
 *
 * `controlPlane: "apiserver"` is etcd + kube-apiserver only (the old harness): nothing creates
 * pods for Jobs or moves their status; a test choosing it must say why (e.g. it patches Job
 * status itself to reach a state the controllers would not produce on cue).
 *
 * For failure drills: `deleteNode` (a node lost: its pods are failed and removed by the pod GC,
 * then replaced by the Job controller), `restartApiserver` (same port, same etcd), `compactEtcd`
 * (etcd's v3 JSON gateway: `POST /v3/kv/compaction`), `apiserverArgs` (e.g.
 * `--watch-cache=false`, so a watch from a compacted revision gets 410 Gone from etcd itself).
 *
 * Operator tests, as a cluster would run them:
 *   const env = await startTestEnv({ kwokNodes: 2 });                  // steps on kwok nodes
 *   const stageOut = await startStageOut({ client, namespace, store }); // job-sim.ts: outputs, then Succeeded
 *   // decide: (pod, job) => ({ action: "fail", exitCode: 137, reason: "OOMKilled" }) or "hold"
 * or, for real tools, `startNode(client, { operonImage, operon })` (pod-runner.ts) and no kwok
 * nodes (the scheduler spreads pods over every schedulable node: when both kinds exist, steer
 * with the step-pod configuration's nodeSelector, `type: kwok` or `operon.dev/test-node: "true"`).
 * Timings to expect: the Job controller replaces a failed pod (an eviction, a lost node) only
 * after its pod-failure backoff, 10 s doubling with each failure; a graceful restartApiserver
 * is 8–10 s; see NODE_TIMING for nodes.
 *
 * Binaries: KUBEBUILDER_ASSETS (a folder with etcd, kube-apiserver, kubectl, and for "full"
 * kube-controller-manager and kube-scheduler of the same release) or the cache folder that
 * `make test-deps` fills; kwok from `<cache>/kwok-<version>/kwok`. Also behind
 * `npm run test-env` (scripts/test-env.ts).
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { generateKeyPair, randomBytes } from "node:crypto";
import { accessSync, constants, rmSync } from "node:fs";
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import { request } from "node:https";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { freePorts, startMinio } from "./minio.js";
import type { MinioServer } from "./minio.js";

export const K8S_VERSION = "v1.34.4";
export const KWOK_VERSION = "v0.8.0";

/** Which processes make the control plane (see the module comment). */
export type ControlPlane = "full" | "apiserver";

export interface TestEnvOptions {
  /** Start MinIO too (default true). */
  minio?: boolean;
  /** Folder whose `*.yaml` files are applied (default `<repo>/crds`; a missing folder installs nothing). */
  crdDir?: string;
  /** "full" (default): + kube-controller-manager, kube-scheduler and kwok. "apiserver": etcd + kube-apiserver only. */
  controlPlane?: ControlPlane;
  /** kwok nodes to add before startTestEnv returns (as `addKwokNodes(n)`; default none). Needs "full". */
  kwokNodes?: number;
  /** Extra kube-apiserver flags, appended (a later flag wins), e.g. `--watch-cache=false`. */
  apiserverArgs?: string[];
}

/** Annotations on a pod that tell kwok how it ends (test/support/kwok/stages.yaml). */
export const KWOK_ANNOTATION = {
  /** How long the pod runs before it ends, a Go duration ("2s", "250ms"); default 100ms. */
  duration: "kwok.operon.dev/duration",
  /** The pod fails: this exit code for the failing container (e.g. "137"). */
  exitCode: "kwok.operon.dev/exit-code",
  /** The failing container's terminated reason (default "Error"; e.g. "OOMKilled"). */
  reason: "kwok.operon.dev/reason",
  /** The failing container's termination message. */
  message: "kwok.operon.dev/message",
  /** Which container fails (default the first of spec.containers; an init container fails the pod while it initializes). */
  container: "kwok.operon.dev/container",
  /** Set by the stage-out stand-in (job-sim.ts) once an Operon step pod's outputs are uploaded: until then it waits. */
  stagedOut: "kwok.operon.dev/staged-out",
} as const;

/** The annotation kwok selects its nodes by (`kwok.x-k8s.io/node=fake`, kwok's own convention). */
export const KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node";
/** Label every kwok node carries (`type=kwok`), for a nodeSelector that wants (or avoids) them. */
export const KWOK_NODE_LABEL = "type";

/** The controllers kube-controller-manager runs here (`--controllers`); everything else is off. */
export const CONTROLLERS = [
  "job-controller",
  "garbage-collector-controller",
  "ttl-after-finished-controller",
  "pod-garbage-collector-controller",
  "node-lifecycle-controller",
  "taint-eviction-controller",
  "namespace-controller",
] as const;

/**
 * How fast node trouble is noticed (real clusters: 5 s / 50 s / 300 s). A node whose Lease is
 * not renewed for `gracePeriod` is marked NotReady/Unknown and tainted NoExecute; its pods are
 * evicted `tolerationSeconds` later (unless every node is NotReady at once: the controller then
 * assumes it lost the API server, not the nodes, and evicts nothing) (the DefaultTolerationSeconds admission plugin gives every
 * pod that toleration for not-ready/unreachable). kwok renews its nodes' Leases every
 * `kwokLeaseSeconds / 4` s, the test kubelet every second. A node that is deleted leaves its
 * pods to the pod GC, which waits a fixed 40 s quarantine (checked every 20 s; constants of
 * kube-controller-manager, not flags) before it marks them Failed (DisruptionTarget,
 * DeletionByPodGC) and removes them: a deleted node's pods are replaced 40–60 s later.
 */
export const NODE_TIMING = {
  monitorPeriod: "1s",
  // Longer than a graceful restartApiserver (8–10 s without heartbeats): a restart is not a node loss.
  gracePeriod: "20s",
  startupGracePeriod: "20s",
  tolerationSeconds: 5,
  kwokLeaseSeconds: 4,
} as const;

export interface KwokNodeOptions {
  /** Name prefix (default `kwok-node-`); a counter of the env follows. */
  prefix?: string;
  /** Extra labels (every kwok node has `type=kwok` and `kubernetes.io/hostname`). */
  labels?: Record<string, string>;
  taints?: Array<{ key: string; value?: string; effect: "NoSchedule" | "PreferNoSchedule" | "NoExecute" }>;
  /** Capacity and allocatable (default cpu 64, memory 512Gi, ephemeral-storage 1Ti, pods 250). */
  capacity?: Record<string, string>;
}

/** What a kwok node (and the test kubelet's node) offers unless told otherwise. */
export const NODE_CAPACITY: Readonly<Record<string, string>> = { cpu: "64", memory: "512Gi", "ephemeral-storage": "1Ti", pods: "250" };

export interface S3Settings {
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
}

export interface KubectlResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export type Component = "etcd" | "kube-apiserver" | "kube-controller-manager" | "kube-scheduler" | "kwok";

export interface TestEnv {
  /** Fresh temp dir holding etcd's data, certificates, keys and the kubeconfig; removed by stop(). */
  dir: string;
  controlPlane: ControlPlane;
  /** The apiserver's URL, `https://127.0.0.1:<port>`. */
  server: string;
  /** `<dir>/kubeconfig`: CA data, admin token, current context set. */
  kubeconfigPath: string;
  /** The kubeconfig's YAML text. */
  kubeconfig: string;
  /** Admin bearer token (group system:masters). */
  token: string;
  /** The CA certificate (PEM) that signed the apiserver's serving certificate. */
  ca: string;
  /** etcd's client URL, `http://127.0.0.1:<port>`. */
  etcdEndpoint: string;
  /** Folder holding the Kubernetes binaries used. */
  binDir: string;
  s3?: S3Settings;
  /** The MinIO behind `s3`, for outage tests (`kill`/`restart`, `freeze`/`thaw`). */
  minio?: MinioServer;
  /** S3_ENDPOINT, S3_BUCKET, S3_REGION, S3_FORCE_PATH_STYLE, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (with MinIO) and KUBECONFIG. */
  env: Record<string, string>;
  /** Runs the real kubectl with `--kubeconfig <kubeconfigPath>` (argv array, no shell). */
  kubectl(args: string[], opts?: { input?: string }): Promise<KubectlResult>;
  createNamespace(name: string): Promise<void>;
  /**
   * Creates `n` kwok nodes (annotated for kwok, labelled `type=kwok`) and resolves with their
   * names once each is Ready and schedulable (the node lifecycle controller has removed the
   * `not-ready` taint every new node gets). Throws with "apiserver" control planes.
   */
  addKwokNodes(n: number, opts?: KwokNodeOptions): Promise<string[]>;
  /** Deletes a Node (kwok's or the test kubelet's): a lost machine. See NODE_TIMING for what follows. */
  deleteNode(name: string): Promise<void>;
  /**
   * Stops kube-apiserver and starts it again on the same port, with the same etcd; resolves once
   * /readyz answers ok. A graceful stop (SIGTERM) drains the controllers' watches and takes the
   * full 5 s grace before SIGKILL (a restart takes 8–10 s in all); `crash: true` kills it at
   * once (SIGKILL, 3–5 s in all). `downMs`: stay down that long first.
   */
  restartApiserver(opts?: { downMs?: number; crash?: boolean }): Promise<void>;
  /** etcd's current revision (what the apiserver reports as resourceVersion). */
  etcdRevision(): Promise<number>;
  /** Compacts etcd's history up to `revision` (default: the current one); resolves with it. */
  compactEtcd(revision?: number): Promise<number>;
  /** The last lines a component printed (for a failing test's message). */
  componentLog(component: Component, lines?: number): string;
  /** Stops kwok, the scheduler, the controller manager, kube-apiserver, etcd, MinIO (SIGTERM, SIGKILL after 5 s) and removes `dir`. Idempotent. */
  stop(): Promise<void>;
}

const repoRoot = fileURLToPath(new URL("../..", import.meta.url));
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const STOP_GRACE_MS = 5000;

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

const cacheDir = () => process.env.OPERON_CACHE_DIR ?? join(homedir(), ".cache", "operon");

/**
 * The folder with the Kubernetes binaries: KUBEBUILDER_ASSETS when set, else
 * `${OPERON_CACHE_DIR:-~/.cache/operon}/k8s-<version>`. Throws when one of `need` is missing.
 */
export function k8sBinDir(need: readonly string[] = ["etcd", "kube-apiserver"]): string {
  const assets = process.env.KUBEBUILDER_ASSETS;
  const dir = assets ? assets : join(cacheDir(), `k8s-${K8S_VERSION}`);
  const missing = need.filter((b) => !isExecutable(join(dir, b)));
  if (missing.length > 0) {
    const from = assets ? "KUBEBUILDER_ASSETS" : "the cache";
    throw new Error(`Kubernetes test binaries are missing from ${from} (${dir}: no ${missing.join(", ")}). `
      + "Run `make test-deps` (needs Go) to build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl.");
  }
  return dir;
}

/** The kwok binary (`<cache>/kwok-<version>/kwok`); throws when it is missing. */
export function kwokPath(): string {
  const path = join(cacheDir(), `kwok-${KWOK_VERSION}`, "kwok");
  if (!isExecutable(path)) throw new Error(`kwok is missing (${path}). Run \`make test-deps\` (needs Go) to build kwok ${KWOK_VERSION}.`);
  return path;
}

/** The kubectl to run: `<binDir>/kubectl` when there is one, else `kubectl` from PATH. */
export function kubectlPath(binDir: string = k8sBinDir()): string {
  const own = join(binDir, "kubectl");
  return isExecutable(own) ? own : "kubectl";
}

// ---------------------------------------------------------------------------------------------
// Child processes

/** Every child still running, killed on process exit as a last resort. */
const liveChildren = new Set<ChildProcess>();
/** Temp dirs of environments not stopped yet, removed on process exit as a last resort. */
const liveDirs = new Set<string>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const child of liveChildren) child.kill("SIGKILL");
    for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true });
  });
}

// Linux: the child also gets SIGKILL when this process dies without running its exit handlers
// (killed by a signal, e.g. a test runner's timeout). The wrapper execs, so the pid is the child's.
const SETPRIV = "/usr/bin/setpriv";
const useSetpriv = process.platform === "linux" && isExecutable(SETPRIV);

interface Proc {
  name: string;
  child: ChildProcess;
  /** Last lines of stdout+stderr. */
  tail(lines?: number): string;
  exitInfo(): string | undefined;
  spawnError(): Error | undefined;
  /** SIGTERM; SIGKILL after STOP_GRACE_MS. */
  stop(): Promise<void>;
  /** SIGKILL at once. */
  kill(): Promise<void>;
}

function startProcess(name: string, binary: string, args: string[], env: Record<string, string>): Proc {
  installExitHook();
  const [command, argv]: [string, string[]] = useSetpriv
    ? [SETPRIV, ["--pdeathsig", "KILL", "--", binary, ...args]]
    : [binary, args];
  const child = spawn(command, argv, { env, stdio: ["ignore", "pipe", "pipe"] });
  liveChildren.add(child);
  let output = "";
  const keep = (chunk: Buffer) => { output = (output + chunk.toString()).slice(-16_000); };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  let exited: string | undefined;
  let spawnError: Error | undefined;
  const exitPromise = new Promise<void>((resolve) => {
    child.on("exit", (code, signal) => {
      exited = signal ? `signal ${signal}` : `code ${code}`;
      liveChildren.delete(child);
      resolve();
    });
    child.on("error", (err) => {
      spawnError = err;
      if (child.pid === undefined) {
        exited = `spawn error: ${err.message}`;
        liveChildren.delete(child);
        resolve();
      }
    });
  });
  return {
    name,
    child,
    tail(lines = 20) { return output.trimEnd().split("\n").slice(-lines).join("\n"); },
    exitInfo: () => exited,
    spawnError: () => spawnError,
    async kill() {
      if (exited) return;
      child.kill("SIGKILL");
      await exitPromise;
    },
    async stop() {
      if (exited) return;
      child.kill("SIGTERM");
      const done = await Promise.race([exitPromise.then(() => true), sleep(STOP_GRACE_MS).then(() => false)]);
      if (!done) {
        child.kill("SIGKILL");
        await exitPromise;
      }
    },
  };
}

/** Runs a command to its end with `input` on stdin; its exit code and output, never a throw for a non-zero exit. */
export function run(command: string, args: string[], options: { input?: string; env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<KubectlResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...(options.cwd ? { cwd: options.cwd } : {}), env: options.env ?? process.env, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => { stdout += c; });
    child.stderr.setEncoding("utf8").on("data", (c: string) => { stderr += c; });
    child.on("error", (err) => reject(new Error(`could not run ${command}: ${err.message}`, { cause: err })));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    child.stdin.on("error", () => undefined); // the command may exit without reading its input
    child.stdin.end(options.input ?? "");
  });
}

// ---------------------------------------------------------------------------------------------
// Certificates and keys

const OPENSSL_CONFIG = `[req]
distinguished_name = dn
prompt = no
[dn]
CN = operon-test
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[v3_server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
`;

async function openssl(args: string[]): Promise<void> {
  const r = await run(process.env.OPENSSL ?? "openssl", args);
  if (r.code !== 0) throw new Error(`openssl ${args[0]} failed (exit ${r.code}): ${r.stderr.trim()}`);
}

/** A throwaway CA and a serving certificate for 127.0.0.1/localhost signed by it (P-256 keys). */
async function generateServingCert(pki: string): Promise<{ ca: string; cert: string; key: string }> {
  const config = join(pki, "openssl.cnf");
  await writeFile(config, OPENSSL_CONFIG);
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  const ca = join(pki, "ca.crt");
  const caKey = join(pki, "ca.key");
  const csr = join(pki, "apiserver.csr");
  const cert = join(pki, "apiserver.crt");
  const key = join(pki, "apiserver.key");
  await Promise.all([
    openssl(["req", "-x509", "-config", config, "-extensions", "v3_ca", ...ec,
      "-keyout", caKey, "-out", ca, "-days", "30", "-subj", "/CN=operon-test-ca"]),
    openssl(["req", "-new", "-config", config, ...ec, "-keyout", key, "-out", csr, "-subj", "/CN=kube-apiserver"]),
  ]);
  await openssl(["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", caKey, "-set_serial", `0x${randomBytes(8).toString("hex")}`,
    "-days", "30", "-extfile", config, "-extensions", "v3_server", "-out", cert]);
  return { ca: await readFile(ca, "utf8"), cert, key };
}

// ---------------------------------------------------------------------------------------------
// Readiness

function httpsRequest(url: string, ca: string, token: string, method = "GET", body?: string, contentType = "application/json"): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = token ? { Authorization: `Bearer ${token}` } : {};
    if (body !== undefined) headers["content-type"] = contentType;
    const req = request(url, { method, ca, headers, timeout: 5000 }, (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (c: string) => { text += c; });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end(body);
  });
}

const httpsGet = (url: string, ca: string, token: string) => httpsRequest(url, ca, token);

async function waitFor(proc: Proc, what: string, timeoutMs: number, probe: () => Promise<string | true>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: string;
  for (;;) {
    const spawnError = proc.spawnError();
    if (spawnError) throw new Error(`could not start ${proc.name}: ${spawnError.message}`);
    const exited = proc.exitInfo();
    if (exited) throw new Error(`${proc.name} exited (${exited}) before ${what}:\n${proc.tail()}`);
    try {
      const r = await probe();
      if (r === true) return;
      last = r;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    if (Date.now() > deadline) {
      throw new Error(`${proc.name} did not get ${what} within ${timeoutMs / 1000} s (last answer: ${last}):\n${proc.tail()}`);
    }
    await sleep(100);
  }
}

// ---------------------------------------------------------------------------------------------

async function yamlFiles(dir: string): Promise<string[]> {
  try {
    if (!(await stat(dir)).isDirectory()) return [];
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...await yamlFiles(path));
    else if (entry.name.endsWith(".yaml")) out.push(path);
  }
  return out.sort();
}

function kubeconfigYaml(server: string, ca: string, token: string): string {
  return `apiVersion: v1
kind: Config
clusters:
- name: operon-test
  cluster:
    server: ${server}
    certificate-authority-data: ${Buffer.from(ca).toString("base64")}
users:
- name: operon-test-admin
  user:
    token: ${token}
contexts:
- name: operon-test
  context:
    cluster: operon-test
    user: operon-test-admin
    namespace: default
current-context: operon-test
preferences: {}
`;
}

function kubeSchedulerConfig(kubeconfigPath: string): string {
  return `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: ${JSON.stringify(kubeconfigPath)}
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
`;
}

/** kwok's own settings, next to the committed stages: loopback server (the kwok nodes' kubelet endpoint), lease timing, pod IPs. */
function kwokConfig(o: { port: number; cert: string; key: string; logsFile: string }): string {
  return `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  manageAllNodes: false
  manageNodesWithAnnotationSelector: ${KWOK_NODE_ANNOTATION}=fake
  nodeIP: 127.0.0.1
  nodePort: ${o.port}
  serverAddress: 127.0.0.1:${o.port}
  tlsCertFile: ${JSON.stringify(o.cert)}
  tlsPrivateKeyFile: ${JSON.stringify(o.key)}
  enableDebuggingHandlers: true
  nodeLeaseDurationSeconds: ${NODE_TIMING.kwokLeaseSeconds}
  cidr: 10.64.0.0/10
  # Every field that has a default: kwok applies no defaults to a configuration it is given.
  enableContentionProfiling: false
  enableProfilingHandler: false
  podPlayStageParallelism: 8
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 1
  enablePodsOnNodeSyncListPager: true
  enablePodsOnNodeSyncStreamWatch: false
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: every-pod
spec:
  logs:
  - logsFile: ${JSON.stringify(o.logsFile)}
`;
}

/** The one log line of every container on a kwok node (CRI log format, which kwok reads). */
export const KWOK_LOG_LINE = "simulated by kwok: nothing ran on this node";

export async function startTestEnv(options: TestEnvOptions = {}): Promise<TestEnv> {
  const controlPlane = options.controlPlane ?? "full";
  const full = controlPlane === "full";
  const binDir = k8sBinDir(full ? ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"] : ["etcd", "kube-apiserver"]);
  const kwokBinary = full ? kwokPath() : undefined;
  const kubectlBinary = kubectlPath(binDir);
  const crdDir = options.crdDir ?? join(repoRoot, "crds");

  const dir = await mkdtemp(join(tmpdir(), "operon-k8s-"));
  liveDirs.add(dir);
  installExitHook();
  /** The running components, in start order (stopped in reverse). */
  const procs = new Map<Component, Proc>();
  let minio: MinioServer | undefined;
  let minioStart: Promise<MinioServer> | undefined;

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      const errors: unknown[] = [];
      for (const proc of [...procs.values()].reverse()) await proc.stop().catch((err: unknown) => { errors.push(err); });
      if (minioStart) {
        // start failed half-way: MinIO may still be starting; stop it once it is up.
        const m = minio ?? await minioStart.catch(() => undefined);
        await m?.stop().catch((err: unknown) => { errors.push(err); });
      }
      await rm(dir, { recursive: true, force: true });
      liveDirs.delete(dir);
      if (errors.length > 0) throw new AggregateError(errors, "test env: stop failed");
    })();
    return stopping;
  };

  try {
    if (options.minio ?? true) minioStart = startMinio({ bucket: "operon-test" });
    // An unhandled rejection must not escape while we are busy with the control plane.
    minioStart?.catch(() => undefined);

    const [etcdPort, peerPort, apiPort, kcmPort, schedPort, kwokPort] = await freePorts(6) as [number, number, number, number, number, number];
    const etcdEndpoint = `http://127.0.0.1:${etcdPort}`;
    const server = `https://127.0.0.1:${apiPort}`;
    const childEnv = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir };

    const etcd = startProcess("etcd", join(binDir, "etcd"), [
      "--name=operon-test",
      `--data-dir=${join(dir, "etcd")}`,
      `--listen-client-urls=${etcdEndpoint}`,
      `--advertise-client-urls=${etcdEndpoint}`,
      `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-cluster=operon-test=http://127.0.0.1:${peerPort}`,
      "--initial-cluster-state=new",
      "--unsafe-no-fsync=true",
      "--log-level=warn",
    ], childEnv);
    procs.set("etcd", etcd);

    // Meanwhile: certificates, service-account key, token file.
    const pki = join(dir, "pki");
    await mkdir(pki, { mode: 0o700 });
    const token = randomBytes(24).toString("hex");
    const [certs, saKeys] = await Promise.all([
      generateServingCert(pki),
      promisify(generateKeyPair)("rsa", {
        modulusLength: 2048,
        publicKeyEncoding: { type: "spki", format: "pem" },
        privateKeyEncoding: { type: "pkcs8", format: "pem" },
      }),
      writeFile(join(dir, "tokens.csv"), `${token},operon-test-admin,operon-test-admin,"system:masters"\n`, { mode: 0o600 }),
    ]);
    await writeFile(join(pki, "sa.key"), saKeys.privateKey, { mode: 0o600 });
    await writeFile(join(pki, "sa.pub"), saKeys.publicKey);

    await waitFor(etcd, "healthy", 30_000, async () => {
      const res = await fetch(`${etcdEndpoint}/health`, { signal: AbortSignal.timeout(1000) });
      const body = await res.text();
      return res.ok && /"health":\s*"true"/.test(body) ? true : `${res.status} ${body}`;
    });

    const apiserverArgs = [
      "--advertise-address=127.0.0.1",
      "--bind-address=127.0.0.1",
      `--secure-port=${apiPort}`,
      `--etcd-servers=${etcdEndpoint}`,
      `--cert-dir=${pki}`,
      `--tls-cert-file=${certs.cert}`,
      `--tls-private-key-file=${certs.key}`,
      "--authorization-mode=RBAC",
      `--token-auth-file=${join(dir, "tokens.csv")}`,
      "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
      `--service-account-key-file=${join(pki, "sa.pub")}`,
      `--service-account-signing-key-file=${join(pki, "sa.key")}`,
      "--service-cluster-ip-range=10.0.0.0/24",
      "--disable-admission-plugins=ServiceAccount",
      "--allow-privileged=true",
      // The default reconciler would publish 127.0.0.1 as the `kubernetes` Service's endpoint,
      // which validation rejects (loopback), logging an error every 10 s.
      "--endpoint-reconciler-type=none",
      "--profiling=false",
      // Nodes' kubelet endpoints (the test kubelet's, kwok's server) are reached by IP: kwok
      // nodes have a Hostname address (their name) that resolves nowhere.
      "--kubelet-preferred-address-types=InternalIP",
      `--default-not-ready-toleration-seconds=${NODE_TIMING.tolerationSeconds}`,
      `--default-unreachable-toleration-seconds=${NODE_TIMING.tolerationSeconds}`,
      ...(options.apiserverArgs ?? []),
    ];
    const spawnApiserver = (): Proc => {
      const proc = startProcess("kube-apiserver", join(binDir, "kube-apiserver"), apiserverArgs, childEnv);
      procs.set("kube-apiserver", proc);
      return proc;
    };
    const apiserverReady = (proc: Proc) => waitFor(proc, "ready (/readyz)", 60_000, async () => {
      const res = await httpsGet(`${server}/readyz`, certs.ca, token);
      return res.status === 200 && res.body.trim() === "ok" ? true : `${res.status} ${res.body.trim().split("\n").slice(-3).join(" | ")}`;
    });
    const apiserver = spawnApiserver();

    const kubeconfigPath = join(dir, "kubeconfig");
    const kubeconfig = kubeconfigYaml(server, certs.ca, token);
    await writeFile(kubeconfigPath, kubeconfig, { mode: 0o600 });

    // The controller manager, the scheduler and kwok start while the API server gets ready and
    // the CRDs are applied (each waits for the API server by itself).
    const started: Array<{ proc: Proc; what: string; probe: () => Promise<string | true> }> = [];
    if (full && kwokBinary) {
      const health = (port: number) => async () => {
        const res = await httpsGet(`https://127.0.0.1:${port}/healthz`, certs.ca, "");
        return res.status === 200 && res.body.trim() === "ok" ? true : `${res.status} ${res.body.trim().split("\n").slice(-3).join(" | ")}`;
      };
      const kcm = startProcess("kube-controller-manager", join(binDir, "kube-controller-manager"), [
        `--kubeconfig=${kubeconfigPath}`,
        "--bind-address=127.0.0.1",
        `--secure-port=${kcmPort}`,
        `--tls-cert-file=${certs.cert}`,
        `--tls-private-key-file=${certs.key}`,
        "--leader-elect=false",
        `--controllers=${CONTROLLERS.join(",")}`,
        `--node-monitor-period=${NODE_TIMING.monitorPeriod}`,
        `--node-monitor-grace-period=${NODE_TIMING.gracePeriod}`,
        `--node-startup-grace-period=${NODE_TIMING.startupGracePeriod}`,
        // The defaults (20/s, burst 30) would make the controllers, not Operon, the bottleneck
        // of a benchmark with thousands of Jobs.
        "--kube-api-qps=500",
        "--kube-api-burst=1000",
        "--concurrent-job-syncs=10",
        "--profiling=false",
      ], childEnv);
      procs.set("kube-controller-manager", kcm);
      started.push({ proc: kcm, what: "healthy (/healthz)", probe: health(kcmPort) });

      const schedulerConfig = join(dir, "kube-scheduler.yaml");
      await writeFile(schedulerConfig, kubeSchedulerConfig(kubeconfigPath));
      const scheduler = startProcess("kube-scheduler", join(binDir, "kube-scheduler"), [
        `--config=${schedulerConfig}`,
        "--bind-address=127.0.0.1",
        `--secure-port=${schedPort}`,
        `--tls-cert-file=${certs.cert}`,
        `--tls-private-key-file=${certs.key}`,
        "--profiling=false",
      ], childEnv);
      procs.set("kube-scheduler", scheduler);
      started.push({ proc: scheduler, what: "healthy (/healthz)", probe: health(schedPort) });

      const logsFile = join(dir, "kwok-container.log");
      await writeFile(logsFile, `${new Date().toISOString()} stdout F ${KWOK_LOG_LINE}\n`);
      const kwokConfigPath = join(dir, "kwok.yaml");
      await writeFile(kwokConfigPath, kwokConfig({ port: kwokPort, cert: certs.cert, key: certs.key, logsFile }));
      const kwok = startProcess("kwok", kwokBinary, [
        `--kubeconfig=${kubeconfigPath}`,
        `--config=${kwokConfigPath}`,
        `--config=${join(repoRoot, "test", "support", "kwok", "stages.yaml")}`,
      ], childEnv);
      procs.set("kwok", kwok);
      started.push({ proc: kwok, what: "healthy (/healthz)", probe: health(kwokPort) });
    }

    await apiserverReady(apiserver);
    const kubectlEnv = { ...process.env, KUBECONFIG: kubeconfigPath };
    const kubectl = (args: string[], opts: { input?: string } = {}) => run(kubectlBinary, [
      `--kubeconfig=${kubeconfigPath}`, `--cache-dir=${join(dir, "kubectl-cache")}`, ...args,
    ], { input: opts.input, env: kubectlEnv });
    const mustKubectl = async (args: string[], input?: string): Promise<string> => {
      const r = await kubectl(args, input === undefined ? {} : { input });
      if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")} failed (exit ${r.code}): ${r.stderr.trim()}`);
      return r.stdout;
    };

    const manifests = await yamlFiles(crdDir);
    if (manifests.length > 0) {
      const applied = await mustKubectl(["apply", "--server-side", "--field-manager=operon-test-env", "-o", "name",
        ...manifests.flatMap((f) => ["-f", f])]);
      const crds = applied.split("\n").map((l) => l.trim()).filter((l) => l.startsWith("customresourcedefinition"));
      if (crds.length > 0) await mustKubectl(["wait", "--for=condition=Established", "--timeout=30s", ...crds]);
    }
    for (const s of started) await waitFor(s.proc, s.what, 60_000, s.probe);

    /** The admin's JSON API (no client library: this module is below the adapters). */
    const api = async <T>(method: string, path: string, body?: unknown, contentType = "application/json"): Promise<T> => {
      const res = await httpsRequest(`${server}${path}`, certs.ca, token, method, body === undefined ? undefined : JSON.stringify(body), contentType);
      if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.body.slice(0, 500)}`);
      return (res.body ? JSON.parse(res.body) : undefined) as T;
    };

    let kwokNodes = 0;
    const addKwokNodes = async (n: number, o: KwokNodeOptions = {}): Promise<string[]> => {
      if (!full) throw new Error("addKwokNodes: this test env runs no kwok (controlPlane \"apiserver\")");
      const capacity = { ...NODE_CAPACITY, ...(o.capacity ?? {}) };
      const names = Array.from({ length: n }, () => `${o.prefix ?? "kwok-node-"}${kwokNodes++}`);
      await Promise.all(names.map((name) => api("POST", "/api/v1/nodes", {
        apiVersion: "v1", kind: "Node",
        metadata: {
          name,
          annotations: { [KWOK_NODE_ANNOTATION]: "fake", "node.alpha.kubernetes.io/ttl": "0" },
          labels: { [KWOK_NODE_LABEL]: "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", ...(o.labels ?? {}) },
        },
        spec: { ...(o.taints ? { taints: o.taints } : {}) },
        status: { capacity, allocatable: capacity },
      })));
      await waitForNodes(names);
      return names;
    };
    /** Each node Ready, and without the `not-ready`/`unreachable` taints (the node lifecycle controller removes them). */
    const waitForNodes = async (names: string[]): Promise<void> => {
      const deadline = Date.now() + 60_000;
      for (;;) {
        const nodes = await Promise.all(names.map((name) => api<NodeObject>("GET", `/api/v1/nodes/${name}`)));
        const pending = nodes.filter((node) => !nodeSchedulable(node));
        if (pending.length === 0) return;
        if (Date.now() > deadline) {
          throw new Error(`nodes not Ready and schedulable within 60 s: ${pending.map((p) => `${p.metadata.name} ${JSON.stringify({ taints: p.spec?.taints, ready: p.status?.conditions?.find((c) => c.type === "Ready") })}`).join("; ")}\n${procs.get("kwok")?.tail() ?? ""}`);
        }
        await sleep(100);
      }
    };

    const etcdPost = async <T>(path: string, body: unknown): Promise<T> => {
      const res = await fetch(`${etcdEndpoint}${path}`, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" }, signal: AbortSignal.timeout(10_000) });
      const text = await res.text();
      if (!res.ok) throw new Error(`etcd ${path}: ${res.status} ${text}`);
      return JSON.parse(text) as T;
    };
    const etcdRevision = async (): Promise<number> => Number((await etcdPost<{ header: { revision: string } }>("/v3/maintenance/status", {})).header.revision);

    let s3: S3Settings | undefined;
    if (minioStart) {
      minio = await minioStart;
      const { endpoint, bucket, region, accessKeyId, secretAccessKey } = minio;
      s3 = { endpoint, bucket, region, accessKeyId, secretAccessKey };
    }
    const env: Record<string, string> = s3
      ? {
        S3_ENDPOINT: s3.endpoint,
        S3_BUCKET: s3.bucket,
        S3_REGION: s3.region,
        S3_FORCE_PATH_STYLE: "true",
        AWS_ACCESS_KEY_ID: s3.accessKeyId,
        AWS_SECRET_ACCESS_KEY: s3.secretAccessKey,
        KUBECONFIG: kubeconfigPath,
      }
      : { KUBECONFIG: kubeconfigPath };

    if (options.kwokNodes) await addKwokNodes(options.kwokNodes);

    return {
      dir, controlPlane, server, kubeconfigPath, kubeconfig, token, ca: certs.ca, etcdEndpoint, binDir, s3, env, kubectl, ...(minio ? { minio } : {}),
      async createNamespace(name: string) { await mustKubectl(["create", "namespace", name]); },
      addKwokNodes,
      async deleteNode(name: string) { await api("DELETE", `/api/v1/nodes/${encodeURIComponent(name)}`); },
      async restartApiserver(opts: { downMs?: number; crash?: boolean } = {}) {
        if (stopping) throw new Error("restartApiserver: the env is stopping");
        const proc = procs.get("kube-apiserver");
        await (opts.crash ? proc?.kill() : proc?.stop());
        if (opts.downMs) await sleep(opts.downMs);
        await apiserverReady(spawnApiserver());
      },
      etcdRevision,
      async compactEtcd(revision?: number) {
        const rev = revision ?? await etcdRevision();
        await etcdPost("/v3/kv/compaction", { revision: String(rev), physical: true });
        return rev;
      },
      componentLog: (component: Component, lines = 40) => procs.get(component)?.tail(lines) ?? "",
      stop,
    };
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
}

interface NodeObject {
  metadata: { name: string };
  spec?: { taints?: Array<{ key: string; effect: string }>; unschedulable?: boolean };
  status?: { conditions?: Array<{ type: string; status: string }> };
}

function nodeSchedulable(node: NodeObject): boolean {
  const ready = node.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
  const blocked = (node.spec?.taints ?? []).some((t) => t.key.startsWith("node.kubernetes.io/") && (t.effect === "NoSchedule" || t.effect === "NoExecute"));
  return !!ready && !blocked && !node.spec?.unschedulable;
}
