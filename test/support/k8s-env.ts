/**
 * A real Kubernetes control plane for tests (DESIGN §10), envtest-style: etcd and
 * kube-apiserver started on loopback ports in a fresh temp dir, with generated certificates,
 * an admin bearer token and RBAC, the CRDs from crds/ installed and Established, plus a real
 * S3 server (MinIO, see ./minio.ts). No controller-manager runs: nothing creates Pods for Jobs,
 * service accounts or tokens; tests create and patch those objects by hand.
 *
 * Binaries come from KUBEBUILDER_ASSETS (a folder with etcd, kube-apiserver, kubectl) or from
 * the cache folder that `make test-deps` fills. Also behind `npm run test-env` (scripts/test-env.ts).
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

export interface TestEnvOptions {
  /** Start MinIO too (default true). */
  minio?: boolean;
  /** Folder whose `*.yaml` files are applied (default `<repo>/crds`; a missing folder installs nothing). */
  crdDir?: string;
}

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

export interface TestEnv {
  /** Fresh temp dir holding etcd's data, certificates, keys and the kubeconfig; removed by stop(). */
  dir: string;
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
  /** Folder holding the etcd/kube-apiserver(/kubectl) binaries used. */
  binDir: string;
  s3?: S3Settings;
  /** The MinIO behind `s3`, for outage tests (`kill`/`restart`, `freeze`/`thaw`). */
  minio?: MinioServer;
  /** S3_ENDPOINT, S3_BUCKET, S3_REGION, S3_FORCE_PATH_STYLE, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (with MinIO) and KUBECONFIG. */
  env: Record<string, string>;
  /** Runs the real kubectl with `--kubeconfig <kubeconfigPath>` (argv array, no shell). */
  kubectl(args: string[], opts?: { input?: string }): Promise<KubectlResult>;
  createNamespace(name: string): Promise<void>;
  /** Stops kube-apiserver, etcd, MinIO (SIGTERM, SIGKILL after 5 s) and removes `dir`. Idempotent. */
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

/**
 * The folder with etcd and kube-apiserver: KUBEBUILDER_ASSETS when set, else
 * `${OPERON_CACHE_DIR:-~/.cache/operon}/k8s-<version>`. Throws when the binaries are missing.
 */
export function k8sBinDir(): string {
  const assets = process.env.KUBEBUILDER_ASSETS;
  const dir = assets
    ? assets
    : join(process.env.OPERON_CACHE_DIR ?? join(homedir(), ".cache", "operon"), `k8s-${K8S_VERSION}`);
  const missing = ["etcd", "kube-apiserver"].filter((b) => !isExecutable(join(dir, b)));
  if (missing.length > 0) {
    const from = assets ? "KUBEBUILDER_ASSETS" : "the cache";
    throw new Error(`Kubernetes test binaries are missing from ${from} (${dir}: no ${missing.join(", ")}). `
      + "Run `make test-deps` (needs Go) to build etcd, kube-apiserver and kubectl.");
  }
  return dir;
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
  stop(): Promise<void>;
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

function httpsGet(url: string, ca: string, token: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca, headers: { Authorization: `Bearer ${token}` }, timeout: 2000 }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (c: string) => { body += c; });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end();
  });
}

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

export async function startTestEnv(options: TestEnvOptions = {}): Promise<TestEnv> {
  const binDir = k8sBinDir();
  const kubectlBinary = kubectlPath(binDir);
  const crdDir = options.crdDir ?? join(repoRoot, "crds");

  const dir = await mkdtemp(join(tmpdir(), "operon-k8s-"));
  liveDirs.add(dir);
  installExitHook();
  const procs: Proc[] = [];
  let minio: MinioServer | undefined;
  let minioStart: Promise<MinioServer> | undefined;

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      const errors: unknown[] = [];
      // Reverse start order: apiserver, then etcd.
      for (const proc of [...procs].reverse()) await proc.stop().catch((err: unknown) => { errors.push(err); });
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

    const [etcdPort, peerPort, apiPort] = await freePorts(3) as [number, number, number];
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
    procs.push(etcd);

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

    const apiserver = startProcess("kube-apiserver", join(binDir, "kube-apiserver"), [
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
    ], childEnv);
    procs.push(apiserver);
    await waitFor(apiserver, "ready (/readyz)", 60_000, async () => {
      const res = await httpsGet(`${server}/readyz`, certs.ca, token);
      return res.status === 200 && res.body.trim() === "ok" ? true : `${res.status} ${res.body.trim().split("\n").slice(-3).join(" | ")}`;
    });

    const kubeconfigPath = join(dir, "kubeconfig");
    const kubeconfig = kubeconfigYaml(server, certs.ca, token);
    await writeFile(kubeconfigPath, kubeconfig, { mode: 0o600 });
    const kubectlEnv = { ...process.env, KUBECONFIG: kubeconfigPath };
    const kubectl = (args: string[], opts: { input?: string } = {}) => run(kubectlBinary, [
      `--kubeconfig=${kubeconfigPath}`, `--cache-dir=${join(dir, "kubectl-cache")}`, ...args,
    ], { input: opts.input, env: kubectlEnv });
    const mustKubectl = async (args: string[]): Promise<string> => {
      const r = await kubectl(args);
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

    return {
      dir, server, kubeconfigPath, kubeconfig, token, ca: certs.ca, etcdEndpoint, binDir, s3, env, kubectl, ...(minio ? { minio } : {}),
      async createNamespace(name: string) { await mustKubectl(["create", "namespace", name]); },
      stop,
    };
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
}
