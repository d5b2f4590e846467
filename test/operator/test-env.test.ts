// The test harness itself (docs/testing.md#the-kubernetes-control-plane): startTestEnv gives a real, reachable, authenticated
// control plane with the CRDs installed and a real S3 server, and stop() leaves nothing behind;
// `npm run test-env` does the same as a long-running process. The full control plane behaves as
// a cluster's: the Job controller creates pods, the scheduler binds them, kwok's nodes and the
// test kubelet (pod-runner.ts) run them, and the Job controller's conditions, TTL, garbage
// collection, node loss and evictions follow.
import t from "tap";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdtemp, mkdir, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { request } from "node:https";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { GetObjectCommand, HeadBucketCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { parse, parseAllDocuments } from "yaml";
import { createKubeClient } from "../../adapters/kubernetes/client.js";
import { createLocalObjectStore } from "../../adapters/local/object-store.js";
import { buildJob } from "../../core/kubernetes/jobs.js";
import type { ObjectStore, StepTask } from "../../core/ports.js";
import { startStageOut } from "../support/job-sim.js";
import type { KubeObject } from "../../adapters/kubernetes/informer.js";
import { K8S_VERSION, KWOK_ANNOTATION, KWOK_LOG_LINE, NODE_TIMING, kubectlPath, startTestEnv } from "../support/k8s-env.js";
import { startNode, TEST_NODE_LABEL } from "../support/pod-runner.js";
import { record } from "../support/recorder.js";
import { sleep, until } from "../support/wait.js";

const repoRoot = fileURLToPath(new URL("../..", import.meta.url));
const S3_KEYS = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "S3_BUCKET", "S3_ENDPOINT", "S3_FORCE_PATH_STYLE", "S3_REGION"];

/** Whether something accepts TCP connections on 127.0.0.1:port. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.setTimeout(2000);
    socket.once("connect", () => { socket.destroy(); resolve(true); });
    socket.once("timeout", () => { socket.destroy(); resolve(false); });
    socket.once("error", () => resolve(false));
  });
}

const portOf = (url: string) => Number(new URL(url).port);

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** HTTPS GET with the given CA (or none: the system roots) and bearer token. */
function get(url: string, options: { ca?: string; token?: string }): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = options.token ? { Authorization: `Bearer ${options.token}` } : {};
    const req = request(url, { ca: options.ca, headers, timeout: 5000 }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (c: string) => { body += c; });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end();
  });
}

function s3Client(env: Record<string, string | undefined>, secret?: string): S3Client {
  return new S3Client({
    endpoint: env.S3_ENDPOINT,
    region: env.S3_REGION,
    forcePathStyle: env.S3_FORCE_PATH_STYLE === "true",
    credentials: { accessKeyId: env.AWS_ACCESS_KEY_ID ?? "", secretAccessKey: secret ?? env.AWS_SECRET_ACCESS_KEY ?? "" },
  });
}

/** Names of the CustomResourceDefinitions in `<repo>/crds/*.yaml`. */
async function repoCrdNames(): Promise<string[]> {
  const dir = join(repoRoot, "crds");
  if (!existsSync(dir)) return [];
  const names: string[] = [];
  for (const file of (await readdir(dir)).filter((f) => f.endsWith(".yaml"))) {
    for (const doc of parseAllDocuments(await readFile(join(dir, file), "utf8"))) {
      const obj = doc.toJS() as { kind?: string; metadata?: { name?: string } } | null;
      if (obj?.kind === "CustomResourceDefinition" && obj.metadata?.name) names.push(obj.metadata.name);
    }
  }
  return names;
}

interface KubeconfigFile {
  "current-context"?: string;
  clusters?: Array<{ name: string; cluster: Record<string, unknown> }>;
  users?: Array<{ name: string; user: Record<string, unknown> }>;
}

/** Command lines of the running processes (Linux /proc), by pid. */
async function processes(): Promise<Map<number, string[]>> {
  const out = new Map<number, string[]>();
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = await readFile(`/proc/${entry}/cmdline`, "utf8");
      if (cmdline) out.set(Number(entry), cmdline.split("\0").filter(Boolean));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

t.test("startTestEnv: real apiserver + etcd + controller manager + scheduler + kwok + CRDs + MinIO, and stop() leaves nothing behind", async (t) => {
  const started = Date.now();
  const env = await startTestEnv();
  t.comment(`startTestEnv took ${((Date.now() - started) / 1000).toFixed(1)} s`);
  t.teardown(() => env.stop());
  t.equal(env.controlPlane, "full", "the full control plane is the default");
  const components = async () => (await childrenOf(process.pid)).filter((c) => c.argv.some((a) => a.includes(env.dir))).map((c) => ({ pid: c.pid, name: c.argv.map((a) => a.split("/").pop() ?? "").find((b) => ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"].includes(b)) }));
  const running = await components();
  t.same(running.map((c) => c.name).sort(), ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"], "its five processes run, children of this one");

  const ready = await env.kubectl(["get", "--raw", "/readyz"]);
  t.equal(ready.code, 0, `kubectl get --raw /readyz: ${ready.stderr}`);
  t.equal(ready.stdout.trim(), "ok");
  const version = await env.kubectl(["version", "-o", "json"]);
  // The pinned release, unless KUBEBUILDER_ASSETS names other binaries.
  const expected = process.env.KUBEBUILDER_ASSETS ? /^v1\.\d+\.\d+/ : K8S_VERSION;
  t.match(JSON.parse(version.stdout) as unknown, { serverVersion: { gitVersion: expected } }, "the apiserver answers with its version");

  // Kubeconfig: the CA is verified (no insecure-skip-tls-verify) and the token authenticates.
  t.equal(await readFile(env.kubeconfigPath, "utf8"), env.kubeconfig, "kubeconfigPath holds the kubeconfig text");
  t.equal(env.kubeconfigPath, join(env.dir, "kubeconfig"));
  const kc = parse(env.kubeconfig) as KubeconfigFile;
  const cluster = kc.clusters?.[0]?.cluster ?? {};
  t.equal(cluster.server, env.server);
  t.match(env.server, /^https:\/\/127\.0\.0\.1:\d+$/);
  t.equal(Buffer.from(String(cluster["certificate-authority-data"]), "base64").toString(), env.ca, "certificate-authority-data is the CA");
  t.match(env.ca, /-----BEGIN CERTIFICATE-----/);
  t.notOk("insecure-skip-tls-verify" in cluster, "no insecure-skip-tls-verify");
  t.notMatch(env.kubeconfig, /insecure/);
  t.equal(kc.users?.[0]?.user.token, env.token);
  t.ok(kc["current-context"], "current context set");
  t.equal(env.env.KUBECONFIG, env.kubeconfigPath);
  t.same(Object.keys(env.env).sort(), [...S3_KEYS, "KUBECONFIG"].sort());

  const withCa = await get(`${env.server}/readyz`, { ca: env.ca, token: env.token });
  t.same(withCa, { status: 200, body: "ok" }, "TLS verifies against the CA");
  await t.rejects(get(`${env.server}/readyz`, { token: env.token }), "the serving certificate is not trusted without the CA");
  const badToken = await get(`${env.server}/api/v1/namespaces`, { ca: env.ca, token: "not-the-token" });
  t.equal(badToken.status, 401, "a wrong token is rejected");
  const rbac = await env.kubectl(["auth", "can-i", "--list", "--as=someone"]);
  t.notMatch(rbac.stdout, /^\*\.\*\s/m, "RBAC: an unknown user is not an admin");

  // Namespaces.
  await env.createNamespace("team-a");
  const ns = await env.kubectl(["get", "namespace", "team-a", "-o", "jsonpath={.status.phase}"]);
  t.equal(ns.stdout, "Active");
  await t.rejects(env.createNamespace("team-a"), /AlreadyExists|already exists/, "createNamespace fails loudly");

  // CRDs from crds/ are installed and Established.
  const crds = await repoCrdNames();
  const listed = await env.kubectl(["get", "crd", "-o", "name"]);
  t.equal(listed.code, 0);
  t.same(listed.stdout.split("\n").filter(Boolean).map((l) => l.replace(/^.*\//, "")).sort(), [...crds].sort(),
    "the CRDs in crds/ (and only those) are installed");
  for (const name of crds) {
    const established = await env.kubectl(["get", "crd", name, "-o", "jsonpath={.status.conditions[?(@.type==\"Established\")].status}"]);
    t.equal(established.stdout, "True", `${name} is Established`);
  }

  // MinIO answers signed requests and checks the signature.
  t.ok(env.s3, "s3 settings");
  t.equal(env.env.S3_ENDPOINT, env.s3?.endpoint);
  t.equal(env.env.S3_FORCE_PATH_STYLE, "true");
  const s3 = s3Client(env.env);
  t.teardown(() => s3.destroy());
  await s3.send(new PutObjectCommand({ Bucket: env.env.S3_BUCKET, Key: "hello.txt", Body: "hi there" }));
  const got = await s3.send(new GetObjectCommand({ Bucket: env.env.S3_BUCKET, Key: "hello.txt" }));
  t.equal(await got.Body?.transformToString(), "hi there");
  const forged = s3Client(env.env, "wrong-secret");
  t.teardown(() => forged.destroy());
  await t.rejects(forged.send(new GetObjectCommand({ Bucket: env.env.S3_BUCKET, Key: "hello.txt" })), "a bad signature is rejected");

  // stop(): processes gone, ports closed, temp dir removed; idempotent.
  const ports = { apiserver: portOf(env.server), etcd: portOf(env.etcdEndpoint), minio: portOf(env.env.S3_ENDPOINT ?? "") };
  for (const [name, port] of Object.entries(ports)) t.ok(await accepts(port), `${name} listens before stop`);
  t.ok(existsSync(env.dir));
  await env.stop();
  t.notOk(existsSync(env.dir), "temp dir removed");
  for (const [name, port] of Object.entries(ports)) t.notOk(await accepts(port), `${name} port closed after stop`);
  for (const c of running) t.notOk(alive(c.pid), `${c.name} is gone`);
  await t.resolves(env.stop(), "stop() again is harmless");
});

t.test("startTestEnv: crdDir and minio:false; custom resources work; kubectl takes input", async (t) => {
  const crdDir = await mkdtemp(join(tmpdir(), "operon-crds-"));
  t.teardown(() => rm(crdDir, { recursive: true, force: true }));
  await mkdir(join(crdDir, "nested"));
  await writeFile(join(crdDir, "nested", "widgets.yaml"), `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.operon.dev
spec:
  group: example.operon.dev
  scope: Namespaced
  names: { plural: widgets, singular: widget, kind: Widget }
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: { type: object, properties: { size: { type: integer } } }
`);
  await writeFile(join(crdDir, "README.md"), "not yaml: ignored\n");
  // The API server alone is enough for custom resources: the old harness, still selectable.
  const env = await startTestEnv({ crdDir, minio: false, controlPlane: "apiserver" });
  t.teardown(() => env.stop());
  t.equal(env.controlPlane, "apiserver");
  t.same((await childrenOf(process.pid)).filter((c) => c.argv.some((a) => a.includes(env.dir))).map((c) => c.argv[0]?.split("/").pop()).sort(), ["etcd", "kube-apiserver"], "only etcd and kube-apiserver run");
  await t.rejects(env.addKwokNodes(1), /no kwok/, "no kwok nodes without kwok");

  t.equal(env.s3, undefined, "no MinIO");
  t.same(env.env, { KUBECONFIG: env.kubeconfigPath });
  const established = await env.kubectl(["get", "crd", "widgets.example.operon.dev", "-o", "jsonpath={.status.conditions[?(@.type==\"Established\")].status}"]);
  t.equal(established.stdout, "True", "a CRD in a subfolder is installed and Established");
  await env.createNamespace("w");
  const applied = await env.kubectl(["apply", "-n", "w", "-f", "-"], {
    input: "apiVersion: example.operon.dev/v1\nkind: Widget\nmetadata: { name: w1 }\nspec: { size: 3 }\n",
  });
  t.equal(applied.code, 0, applied.stderr);
  const size = await env.kubectl(["get", "widgets", "-n", "w", "w1", "-o", "jsonpath={.spec.size}"]);
  t.equal(size.stdout, "3", "the custom resource was stored");
  const bad = await env.kubectl(["get", "nosuchkind"]);
  t.not(bad.code, 0, "kubectl failures are reported through code");
  t.match(bad.stderr, /nosuchkind/);
  await env.stop();
  t.notOk(existsSync(env.dir));
});

t.test("startTestEnv: missing binaries are reported with the fix", async (t) => {
  const saved = process.env.KUBEBUILDER_ASSETS;
  const empty = await mkdtemp(join(tmpdir(), "operon-assets-"));
  t.teardown(async () => {
    if (saved === undefined) delete process.env.KUBEBUILDER_ASSETS;
    else process.env.KUBEBUILDER_ASSETS = saved;
    await rm(empty, { recursive: true, force: true });
  });
  process.env.KUBEBUILDER_ASSETS = empty;
  await t.rejects(startTestEnv({ minio: false }), /kube-apiserver, kube-controller-manager, kube-scheduler.*make test-deps/);
  // envtest's assets have no controller manager or scheduler: the apiserver-only plane still starts from them.
  await t.rejects(startTestEnv({ minio: false, controlPlane: "apiserver" }), /no etcd, kube-apiserver\)/);
});

/** Child processes of `pid` (Linux /proc): pid and argv. */
async function childrenOf(pid: number): Promise<Array<{ pid: number; argv: string[] }>> {
  const out: Array<{ pid: number; argv: string[] }> = [];
  for (const [child, argv] of await processes()) {
    try {
      const stat = await readFile(`/proc/${child}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === pid) out.push({ pid: child, argv });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
}

t.test("startTestEnv: a start that fails half-way stops what it started", async (t) => {
  const crdDir = await mkdtemp(join(tmpdir(), "operon-crds-"));
  const tmp = await mkdtemp(join(tmpdir(), "operon-tmp-"));
  const savedTmp = process.env.TMPDIR;
  t.teardown(async () => {
    if (savedTmp === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = savedTmp;
    await rm(crdDir, { recursive: true, force: true });
    await rm(tmp, { recursive: true, force: true });
  });
  await writeFile(join(crdDir, "broken.yaml"), "apiVersion: v1\nkind: NoSuchKind\nmetadata: { name: x }\n");
  process.env.TMPDIR = tmp; // the env's and MinIO's temp dirs land here
  const before = (await childrenOf(process.pid)).map((c) => c.pid);
  await t.rejects(startTestEnv({ crdDir }), /kubectl apply .*failed/, "the failing step is named");
  const left = (await childrenOf(process.pid)).filter((c) => !before.includes(c.pid));
  t.same(left, [], "no etcd, kube-apiserver, controller manager, scheduler, kwok or MinIO left running");
  t.same(await readdir(tmp), [], "temp dirs removed");
});

t.test("child processes do not outlive the test process", async (t) => {
  const fixtureDir = await mkdtemp(join(tmpdir(), "operon-fixture-"));
  t.teardown(() => rm(fixtureDir, { recursive: true, force: true }));
  const fixture = join(fixtureDir, "start.mts");
  await writeFile(fixture, `import { startTestEnv } from ${JSON.stringify(pathToFileURL(join(repoRoot, "test/support/k8s-env.ts")).href)};
const env = await startTestEnv({ minio: process.argv[2] === "exit" });
process.stdout.write(JSON.stringify({ ports: [env.server, env.etcdEndpoint, env.s3?.endpoint].filter(Boolean), dir: env.dir }) + "\\n");
if (process.argv[2] === "exit") process.exit(0); // without stop(): the exit hook must clean up
setInterval(() => undefined, 1 << 30);
`);
  // exit: process.exit() without stop(); kill: SIGKILL, where no exit handler runs.
  for (const mode of ["exit", "kill"]) {
    const child = spawn(process.execPath, ["--import", "tsx", fixture, mode], { cwd: repoRoot, stdio: ["ignore", "pipe", "pipe"] });
    t.teardown(() => { if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL"); });
    let stdout = "";
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (c: string) => { stderr += c; });
    const line = await new Promise<string>((resolve) => {
      child.stdout.setEncoding("utf8").on("data", (c: string) => {
        stdout += c;
        if (stdout.includes("\n")) resolve(stdout.split("\n")[0] ?? "");
      });
      child.on("exit", () => resolve(""));
    });
    t.ok(line, `${mode}: the fixture started an env (stderr: ${stderr.slice(-2000)})`);
    if (!line) continue;
    const { ports, dir } = JSON.parse(line) as { ports: string[]; dir: string };
    t.equal(ports.length, mode === "exit" ? 3 : 2);
    if (mode === "kill") child.kill("SIGKILL");
    await new Promise((resolve) => { if (child.exitCode !== null || child.signalCode !== null) resolve(undefined); else child.on("exit", resolve); });
    for (const url of ports) {
      t.ok(await waitUntil(async () => !(await accepts(portOf(url))), 10_000), `${mode}: ${url} stops listening`);
    }
    const leftover = async () => [...(await processes()).values()].filter((argv) => argv.some((a) => a.includes(dir)));
    t.ok(await waitUntil(async () => (await leftover()).length === 0, 10_000), `${mode}: no process of the env is left (controller manager, scheduler, kwok too): ${JSON.stringify((await leftover()).map((a) => a[0]))}`);
    if (mode === "exit") t.notOk(existsSync(dir), "exit: the temp dir is removed by the exit hook");
    else await rm(dir, { recursive: true, force: true }); // nothing can remove it after SIGKILL
  }
});

t.test("npm run test-env: writes DIR/kubeconfig and DIR/env, prints ready, stops cleanly on SIGTERM", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "operon-test-env-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const started = Date.now();
  const child = spawn(process.execPath, ["--import", "tsx", "scripts/test-env.ts", "--dir", dir, "--kwok-nodes", "2"], {
    cwd: repoRoot, stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => { stdout += c; });
  child.stderr.setEncoding("utf8").on("data", (c: string) => { stderr += c; });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on("exit", (code, signal) => resolve({ code, signal }));
  });
  t.teardown(() => { if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL"); });

  let timer: NodeJS.Timeout | undefined;
  const ready = await Promise.race([
    new Promise<boolean>((resolve) => {
      const check = () => { if (/^ready$/m.test(stdout)) resolve(true); };
      child.stdout.on("data", check);
      check();
    }),
    exited.then(() => false),
    new Promise<boolean>((resolve) => { timer = setTimeout(() => resolve(false), 120_000); }),
  ]);
  clearTimeout(timer);
  t.ok(ready, `prints ready (stderr: ${stderr})`);
  if (!ready) return;
  t.comment(`test-env ready after ${((Date.now() - started) / 1000).toFixed(1)} s`);
  t.equal(stdout, "ready\n", "stdout is exactly the ready line");

  // DIR/kubeconfig works with the real kubectl.
  const kubeconfig = join(dir, "kubeconfig");
  const r = await new Promise<{ code: number | null; out: string }>((resolve) => {
    const k = spawn(kubectlPath(), ["--kubeconfig", kubeconfig, "get", "--raw", "/readyz"], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    k.stdout.setEncoding("utf8").on("data", (c: string) => { out += c; });
    k.on("close", (code) => resolve({ code, out }));
  });
  t.same(r, { code: 0, out: "ok" }, "DIR/kubeconfig reaches the apiserver");
  const nodes = await new Promise<string>((resolve) => {
    const k = spawn(kubectlPath(), ["--kubeconfig", kubeconfig, "get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"Ready\")].status} {end}"], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    k.stdout.setEncoding("utf8").on("data", (c: string) => { out += c; });
    k.on("close", () => resolve(out.trim()));
  });
  t.equal(nodes, "kwok-node-0=True kwok-node-1=True", "--kwok-nodes 2: two Ready kwok nodes");

  // DIR/env: the six S3 lines and KUBECONFIG, and the values work.
  const lines = (await readFile(join(dir, "env"), "utf8")).split("\n").filter(Boolean);
  const vars = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]));
  t.same(Object.keys(vars).sort(), [...S3_KEYS, "KUBECONFIG"].sort(), "DIR/env has the six S3 lines and KUBECONFIG");
  t.equal(vars.KUBECONFIG, kubeconfig);
  t.equal(vars.S3_FORCE_PATH_STYLE, "true");
  for (const key of S3_KEYS) t.ok(vars[key], `${key} has a value`);
  const s3 = s3Client(vars);
  t.teardown(() => s3.destroy());
  await t.resolves(s3.send(new HeadBucketCommand({ Bucket: vars.S3_BUCKET })), "the bucket exists and the credentials work");

  // Its processes: the apiserver on the kubeconfig's port, etcd behind it.
  const server = String((parse(await readFile(kubeconfig, "utf8")) as KubeconfigFile).clusters?.[0]?.cluster.server);
  const apiPort = portOf(server);
  const procs = await processes();
  const apiserver = [...procs].find(([, argv]) => argv.some((a) => a.endsWith("kube-apiserver")) && argv.includes(`--secure-port=${apiPort}`));
  t.ok(apiserver, "the kube-apiserver process is found");
  const etcdUrl = apiserver?.[1].find((a) => a.startsWith("--etcd-servers="))?.slice("--etcd-servers=".length) ?? "";
  const etcd = [...procs].find(([, argv]) => argv.some((a) => a.endsWith("etcd")) && argv.includes(`--listen-client-urls=${etcdUrl}`));
  t.ok(etcd, "the etcd process is found");
  const tempDir = apiserver?.[1].find((a) => a.startsWith("--token-auth-file="))?.slice("--token-auth-file=".length).replace(/\/tokens\.csv$/, "");
  t.ok(tempDir && existsSync(tempDir), "its temp dir exists while running");
  const ports = { apiserver: apiPort, etcd: portOf(etcdUrl || "http://x:1"), minio: portOf(vars.S3_ENDPOINT ?? "") };
  for (const [name, port] of Object.entries(ports)) t.ok(await accepts(port), `${name} listens while running`);

  child.kill("SIGTERM");
  const exit = await exited;
  t.same(exit, { code: 0, signal: null }, `exits 0 after SIGTERM (stderr: ${stderr})`);
  for (const [name, port] of Object.entries(ports)) t.notOk(await accepts(port), `${name} port closed after exit`);
  if (apiserver) t.notOk(alive(apiserver[0]), "kube-apiserver is gone");
  if (etcd) t.notOk(alive(etcd[0]), "etcd is gone");
  t.same([...(await processes()).values()].filter((argv) => tempDir && argv.some((a) => a.includes(tempDir))), [], "no process of the env is left (controller manager, scheduler, kwok too)");
  t.notOk(tempDir && existsSync(tempDir), "its temp dir is removed");
  t.ok(existsSync(dir), "DIR itself is kept");
  t.same(await readdir(dir), [], "DIR/kubeconfig and DIR/env are removed");
});

t.test("npm run test-env without --dir, or with bad options: usage, exit 2", async (t) => {
  for (const args of [[], ["--dir"], ["--bogus", "x"], ["--kwok-nodes", "2"], ["--dir", "x", "--kwok-nodes", "many"], ["--dir", "x", "--apiserver-only", "--kwok-nodes", "1"]]) {
    const child = spawn(process.execPath, ["--import", "tsx", "scripts/test-env.ts", ...args], {
      cwd: repoRoot, stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => { stdout += c; });
    child.stderr.setEncoding("utf8").on("data", (c: string) => { stderr += c; });
    const code = await new Promise<number | null>((resolve) => child.on("close", (c) => resolve(c)));
    t.equal(code, 2, `exit 2 for [${args.join(" ")}]`);
    t.match(stderr, /^usage: .*--dir DIR.*\n$/, "one usage line on stderr");
    t.equal(stderr.split("\n").filter(Boolean).length, 1);
    t.equal(stdout, "");
  }
});

// ---------------------------------------------------------------------------------------------
// The full control plane behaves as a cluster's: one environment for the tests below.

interface PodState {
  type: string;
  status: string;
  reason?: string;
}
interface ContainerState { name: string; state?: { waiting?: { reason?: string }; running?: object; terminated?: { exitCode: number; reason?: string; message?: string } } }
interface Pod extends KubeObject {
  spec: { nodeName?: string };
  status?: { phase?: string; conditions?: PodState[]; initContainerStatuses?: ContainerState[]; containerStatuses?: ContainerState[] };
}
interface Job extends KubeObject {
  status?: { conditions?: PodState[]; succeeded?: number; failed?: number; active?: number; completionTime?: string };
}

t.test("the full control plane", async (t) => {
  const env = await startTestEnv({ minio: false, kwokNodes: 2 });
  t.teardown(() => env.stop());
  const NS = "cp";
  await env.createNamespace(NS);
  const client = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: NS });
  t.teardown(() => client.close());
  const jobsSeen = await record<Job>(client, `/apis/batch/v1/namespaces/${NS}/jobs`);
  const podsSeen = await record<Pod>(client, `/api/v1/namespaces/${NS}/pods`);
  t.teardown(() => { jobsSeen.stop(); podsSeen.stop(); });
  const jobPath = (name: string) => `/apis/batch/v1/namespaces/${NS}/jobs/${name}`;
  const getJob = (name: string) => client.request<Job>("GET", jobPath(name));
  const podsOf = async (job: string) => (await client.request<{ items: Pod[] }>("GET", `/api/v1/namespaces/${NS}/pods`, { query: { labelSelector: `job-name=${job}` } })).items;
  const condition = (j: Job | undefined, type: string) => j?.status?.conditions?.find((c) => c.type === type && c.status === "True");
  const finished = (name: string, type: "Complete" | "Failed", timeoutMs = 30_000) => until(`Job ${name} ${type}`, async () => { const j = await getJob(name); return condition(j, type) ? j : undefined; }, timeoutMs);
  const createJob = (name: string, o: { annotations?: Record<string, string>; spec?: Record<string, unknown>; pod?: Record<string, unknown>; metadata?: Record<string, unknown> } = {}) => client.request<Job>("POST", `/apis/batch/v1/namespaces/${NS}/jobs`, {
    body: {
      apiVersion: "batch/v1", kind: "Job",
      metadata: { name, ...(o.metadata ?? {}) },
      spec: {
        backoffLimit: 0,
        ...(o.spec ?? {}),
        template: {
          metadata: { annotations: o.annotations ?? {} },
          spec: {
            restartPolicy: "Never",
            initContainers: [{ name: "first", image: "busybox" }, { name: "second", image: "busybox" }],
            containers: [{ name: "main", image: "busybox" }],
            ...(o.pod ?? {}),
          },
        },
      },
    },
  });
  /** Retried by the Job controller when disrupted, failed at once by the container's own exit (what Operon's step Jobs do). */
  const disruptionTolerant = { podFailurePolicy: { rules: [{ action: "Ignore", onPodConditions: [{ type: "DisruptionTarget", status: "True" }] }, { action: "FailJob", onExitCodes: { operator: "NotIn", values: [0] } }] }, podReplacementPolicy: "Failed" };
  // (An API server restart may be under way meanwhile: a failed look is looked at again.)
  let closing = false;
  t.teardown(() => { closing = true; });
  const running = (job: string, except: string[] = [], timeoutMs = 90_000) => until(`a running pod of ${job}`, async () => (closing ? await Promise.reject<Pod[]>(new Error("the test is over")) : await podsOf(job).catch(() => [])).find((p) => p.status?.phase === "Running" && !p.metadata.deletionTimestamp && !except.includes(p.metadata.name)), timeoutMs)
    .catch(async (e: unknown) => { throw new Error(`${String(e)}: Job ${JSON.stringify((await getJob(job)).status)}, pods ${JSON.stringify((await podsOf(job)).map((p) => [p.metadata.name, p.spec.nodeName, p.status?.phase]))}\n${env.componentLog("kube-controller-manager", 20)}`); });

  // A lost node takes a minute to be dealt with (NODE_TIMING): it starts now, while the other
  // tests run, on two nodes of its own that nothing else is scheduled to (a taint).
  const nodeLoss = (async () => {
    const taint = { key: "drill", value: "node-loss", effect: "NoSchedule" as const };
    const lossy = await env.addKwokNodes(2, { prefix: "lossy-", labels: { drill: "node-loss" }, taints: [taint] });
    await createJob("node-loss", { spec: disruptionTolerant, annotations: { [KWOK_ANNOTATION.duration]: "10m" }, pod: { nodeSelector: { drill: "node-loss" }, tolerations: [{ ...taint, operator: "Equal" }] } });
    const first = await running("node-loss");
    const lostAt = Date.now();
    await env.deleteNode(first.spec.nodeName ?? "");
    // The pod GC's quarantine (40 s) and check period (20 s), then the Job controller's backoff.
    const second = await running("node-loss", [first.metadata.name], 180_000);
    return { lossy, first, second, lostAt, replacedAt: Date.now() };
  })();
  nodeLoss.catch(() => undefined); // awaited (and reported) by its test below

  await t.test("a plain Job: the Job controller creates its pod, the scheduler binds it to a kwok node, kwok runs it; SuccessCriteriaMet, then Complete", async (t) => {
    await createJob("plain", { annotations: { [KWOK_ANNOTATION.duration]: "300ms" } });
    const job = await finished("plain", "Complete");
    const types = job.status?.conditions?.filter((c) => c.status === "True").map((c) => c.type);
    t.same(types, ["SuccessCriteriaMet", "Complete"], "SuccessCriteriaMet is written before Complete");
    t.notOk(jobsSeen.history("plain").some((j) => condition(j, "Complete") && !condition(j, "SuccessCriteriaMet")), "no state of the Job had Complete without SuccessCriteriaMet");
    t.equal(job.status?.succeeded, 1);
    t.ok(job.status?.completionTime, "completionTime set by the controller");
    const [pod, ...more] = await podsOf("plain");
    t.same(more, [], "one pod");
    t.match(pod?.metadata.ownerReferences, [{ kind: "Job", name: "plain", controller: true }], "created by the Job controller (its ownerReference)");
    t.match(pod?.spec.nodeName, /^kwok-node-[01]$/, "bound to a kwok node by the scheduler");
    t.match(pod?.status?.conditions?.find((c) => c.type === "PodScheduled"), { status: "True" });
    t.equal(pod?.status?.phase, "Succeeded");
    t.same(pod?.status?.initContainerStatuses?.map((c) => [c.name, c.state?.terminated?.exitCode, c.state?.terminated?.reason]), [["first", 0, "Completed"], ["second", 0, "Completed"]]);
    t.same(pod?.status?.containerStatuses?.map((c) => [c.name, c.state?.terminated?.exitCode]), [["main", 0]]);
    // In order: no state of the pod had the second init container ended before the first.
    const history = podsSeen.history(pod?.metadata.name ?? "");
    const ended = (p: Pod, name: string) => !!p.status?.initContainerStatuses?.find((c) => c.name === name)?.state?.terminated;
    t.ok(history.some((p) => ended(p, "first") && !ended(p, "second")), "a state with only the first init container terminated was seen");
    t.notOk(history.some((p) => ended(p, "second") && !ended(p, "first")), "never the second before the first");
    t.ok(history.some((p) => p.status?.phase === "Running"), "Running before Succeeded");
    const log = await env.kubectl(["logs", "-n", NS, pod?.metadata.name ?? "", "-c", "main"]);
    t.equal(log.stdout.trim(), KWOK_LOG_LINE, `pods/log of a kwok pod answers (from kwok's server): ${log.stderr}`);
  });

  await t.test("a pod annotated to fail: the container's exit code and reason, FailureTarget then Failed", async (t) => {
    await createJob("oom", { annotations: { [KWOK_ANNOTATION.exitCode]: "137", [KWOK_ANNOTATION.reason]: "OOMKilled", [KWOK_ANNOTATION.container]: "main" } });
    await createJob("init-fails", { annotations: { [KWOK_ANNOTATION.exitCode]: "2", [KWOK_ANNOTATION.container]: "first", [KWOK_ANNOTATION.message]: "no such input" } });
    for (const name of ["oom", "init-fails"]) {
      const job = await finished(name, "Failed");
      t.same(job.status?.conditions?.filter((c) => c.status === "True").map((c) => [c.type, c.reason]), [["FailureTarget", "BackoffLimitExceeded"], ["Failed", "BackoffLimitExceeded"]], `${name}: FailureTarget, then Failed`);
      t.notOk(jobsSeen.history(name).some((j) => condition(j, "Failed") && !condition(j, "FailureTarget")), `${name}: never Failed without FailureTarget`);
      t.equal(job.status?.failed, 1);
    }
    const [oom] = await podsOf("oom");
    t.equal(oom?.status?.phase, "Failed");
    t.match(oom?.status?.containerStatuses?.[0]?.state?.terminated, { exitCode: 137, reason: "OOMKilled" }, "the named container: exit 137, OOMKilled");
    const [initFails] = await podsOf("init-fails");
    t.same(initFails?.status?.initContainerStatuses?.map((c) => [c.name, c.state?.terminated?.exitCode ?? c.state?.waiting?.reason]), [["first", 2], ["second", "PodInitializing"]], "the failing init container ends the pod; the next never starts");
    t.equal(initFails?.status?.initContainerStatuses?.[0]?.state?.terminated?.message, "no such input", "with the termination message");
    t.equal(initFails?.status?.containerStatuses?.[0]?.state?.waiting?.reason, "PodInitializing");
  });

  await t.test("the test kubelet's node runs a real tool; its log is read through the API server", async (t) => {
    const node = await startNode(client, {});
    // Gone with the test: a stopped kubelet's node would stay (NotReady after the grace period), and attract pods until then.
    t.teardown(async () => { await node.stop(); await env.deleteNode(node.name); });
    const nodeObj = await client.request<{ status: { conditions: PodState[]; capacity: Record<string, string> } }>("GET", `/api/v1/nodes/${node.name}`);
    t.match(nodeObj.status.capacity, { cpu: "64", memory: "512Gi", "ephemeral-storage": "1Ti", pods: "250" });
    const lease = () => client.request<{ spec: { renewTime: string; holderIdentity: string } }>("GET", `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${node.name}`);
    const firstRenew = (await lease()).spec.renewTime;
    await createJob("samtools", { pod: { nodeSelector: { [TEST_NODE_LABEL]: "true" }, initContainers: [], containers: [{ name: "main", image: "quay.io/biocontainers/samtools", command: ["samtools", "--version"] }] } });
    const job = await finished("samtools", "Complete");
    t.same(job.status?.conditions?.filter((c) => c.status === "True").map((c) => c.type), ["SuccessCriteriaMet", "Complete"]);
    const [pod] = await podsOf("samtools");
    t.equal(pod?.spec.nodeName, node.name, "bound to the test kubelet's node");
    t.match(pod?.status?.containerStatuses?.[0]?.state?.terminated, { exitCode: 0, reason: "Completed" });
    const res = await client.stream(`/api/v1/namespaces/${NS}/pods/${pod?.metadata.name}/log`, { query: { container: "main" } });
    let text = "";
    for await (const c of res) text += (c as Buffer).toString("utf8");
    t.match(text, /^samtools 1\.\d+/, "pods/log: what samtools printed");
    t.ok(node.requests.some((r) => r === `/containerLogs/${NS}/${pod?.metadata.name}/main`), "proxied by the API server to the node's kubelet endpoint");
    t.not((await lease()).spec.renewTime, firstRenew, "the node's Lease is renewed");
    t.match((await client.request<{ status: { conditions: PodState[] } }>("GET", `/api/v1/nodes/${node.name}`)).status.conditions.find((c) => c.type === "Ready"), { status: "True" }, "the node stays Ready");

    // A hostPath volume mounted readOnly (a reference volume): readable, not writable.
    const refDir = await mkdtemp(join(tmpdir(), "operon-ref-"));
    t.teardown(() => rm(refDir, { recursive: true, force: true }));
    await chmod(refDir, 0o755); // the pod's user (uid 1000) reads it
    await writeFile(join(refDir, "ref.txt"), ">chr1\nACGT\n");
    await createJob("reads-ref", { pod: {
      nodeSelector: { [TEST_NODE_LABEL]: "true" }, initContainers: [],
      volumes: [{ name: "ref-grch38", hostPath: { path: refDir, type: "Directory" } }],
      containers: [{ name: "main", image: "debian", command: ["sh", "-c", 'cat "$1" && touch "$2"', "sh", "/ref/grch38/ref.txt", "/ref/grch38/new.txt"], volumeMounts: [{ name: "ref-grch38", mountPath: "/ref/grch38", readOnly: true }] }],
    } });
    await finished("reads-ref", "Failed");
    const [refPod] = await podsOf("reads-ref");
    const refLog = node.logs.get(`${NS}/${refPod?.metadata.name}/main`) ?? "";
    t.match(refLog, />chr1\nACGT\n/, "the file on the volume is read at its mount path");
    t.match(refLog, /Read-only file system/, "a write to the read-only mount fails");
    t.notOk(existsSync(join(refDir, "new.txt")), "nothing was written to the volume");

    // A container over its memory limit is OOM-killed (a memory cgroup), and reported so.
    await createJob("hog", { pod: { nodeSelector: { [TEST_NODE_LABEL]: "true" }, initContainers: [], containers: [{ name: "main", image: "debian", command: ["sh", "-c", "head -c 400000000 /dev/zero | tail -n 1 > /dev/null"], resources: { limits: { memory: "64Mi" } } }] } });
    await finished("hog", "Failed");
    const [hog] = await podsOf("hog");
    t.match(hog?.status?.containerStatuses?.[0]?.state?.terminated, { exitCode: 137, reason: "OOMKilled" }, "exit 137, OOMKilled");
  });

  await t.test("ttlSecondsAfterFinished deletes a finished Job, and the garbage collector its pod", async (t) => {
    await createJob("short-lived", { spec: { ttlSecondsAfterFinished: 1 } });
    const [pod] = await until("its pod", async () => { const p = await podsOf("short-lived"); return p.length > 0 ? p : undefined; });
    await until("the Job deleted", () => jobsSeen.deletedAt("short-lived"), 30_000);
    t.ok(condition(jobsSeen.last("short-lived"), "Complete"), "it was Complete when it went");
    await until("its pod deleted", () => podsSeen.deletedAt(pod?.metadata.name ?? ""), 30_000);
    t.pass("the pod went with it");
  });

  await t.test("deleting an owner deletes the Job it owns (and its pod)", async (t) => {
    const owner = await client.request<KubeObject>("POST", `/api/v1/namespaces/${NS}/configmaps`, { body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "owner" } } });
    await createJob("owned", { annotations: { [KWOK_ANNOTATION.duration]: "10m" }, metadata: { ownerReferences: [{ apiVersion: "v1", kind: "ConfigMap", name: "owner", uid: owner.metadata.uid }] } });
    const pod = await running("owned");
    await client.request("DELETE", `/api/v1/namespaces/${NS}/configmaps/owner`, { body: { apiVersion: "v1", kind: "DeleteOptions", propagationPolicy: "Background" } });
    await until("the owned Job deleted", () => jobsSeen.deletedAt("owned"), 30_000);
    await until("its pod deleted", () => podsSeen.deletedAt(pod.metadata.name), 30_000);
    t.equal(podsSeen.last(pod.metadata.name)?.status?.phase, "Failed", "the running pod was stopped as a kubelet does (Failed), then removed");
  });

  await t.test("an eviction through the Eviction API: DisruptionTarget, ignored by the podFailurePolicy, the pod replaced", async (t) => {
    await createJob("evicted", { spec: disruptionTolerant, annotations: { [KWOK_ANNOTATION.duration]: "10m" } });
    const first = await running("evicted");
    await client.request("POST", `/api/v1/namespaces/${NS}/pods/${first.metadata.name}/eviction`, { body: { apiVersion: "policy/v1", kind: "Eviction", metadata: { name: first.metadata.name, namespace: NS } } });
    await until("the evicted pod deleted", () => podsSeen.deletedAt(first.metadata.name), 30_000);
    const last = podsSeen.last(first.metadata.name);
    t.equal(last?.status?.phase, "Failed", "the evicted pod ended Failed");
    t.match(last?.status?.conditions?.find((c) => c.type === "DisruptionTarget"), { status: "True", reason: "EvictionByEvictionAPI" }, "with DisruptionTarget");
    // The Job controller waits its pod-failure backoff (10 s) before it replaces the pod.
    const second = await running("evicted", [first.metadata.name]);
    t.not(second.metadata.name, first.metadata.name, "a replacement pod");
    await client.request("PATCH", `/api/v1/namespaces/${NS}/pods/${second.metadata.name}`, { patch: "merge", body: { metadata: { annotations: { [KWOK_ANNOTATION.duration]: "0s" } } } });
    const job = await finished("evicted", "Complete");
    t.equal(job.status?.failed ?? 0, 0, "the eviction did not count as a failure");
    t.equal(job.status?.succeeded, 1);
  });

  await t.test("the stage-out stand-in: an Operon step pod on a kwok node waits until its outputs are stored, then succeeds; or fails as told", async (t) => {
    const dir = await mkdtemp(join(tmpdir(), "operon-stage-out-"));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    const local = createLocalObjectStore({ root: dir, publicUrl: "http://localhost", signingSecret: "s".repeat(40) });
    const puts: Array<{ key: string; podPhases: string[] }> = [];
    const store: ObjectStore = { ...local, put: async (key, body, o) => { puts.push({ key, podPhases: (await podsOf(stepJob)).map((p) => p.status?.phase ?? "") }); return local.put(key, body, o); } };
    const task = (runId: string): StepTask => ({
      runId, organization: "acme", stepId: "a", attempt: 1, toolName: "samtools",
      invocation: { argv: ["samtools", "depth", "in.bam"], stdout: "a.tsv", inputs: [], outputs: [{ path: "a.tsv", secondary: ["a.tsv.idx"] }], mkdirs: [] },
      workspaceRoot: "orgs/acme/workspaces/ws1/", runRoot: `orgs/acme/workspaces/ws1/pipelines/${runId}/`, timeoutMs: 600_000,
    });
    let release = false;
    const stageOut = await startStageOut({
      client, namespace: NS, store,
      decide: (pod) => (pod.metadata.labels?.["operon.dev/run"] === "run-oom" ? { action: "fail", exitCode: 137, reason: "OOMKilled" } : release ? { action: "succeed" } : { action: "hold" }),
    });
    t.teardown(() => stageOut.stop());
    const stepJob = (await client.request<Job>("POST", `/apis/batch/v1/namespaces/${NS}/jobs`, { body: buildJob(task("run-ok"), { namespace: NS, image: "operon:test", toolImage: "samtools:test", storageEnv: {} }) })).metadata.name;
    const held = await until("the pod held", async () => stageOut.held()[0]);
    const pod = await until("kwok's first status of the pod", async () => { const p = await client.request<Pod>("GET", `/api/v1/namespaces/${NS}/pods/${held}`); return p.status?.initContainerStatuses ? p : undefined; });
    await sleep(500); // kwok would have moved it on by now
    t.equal(pod.status?.phase, "Pending", "held: Pending");
    const still = await client.request<Pod>("GET", `/api/v1/namespaces/${NS}/pods/${held}`);
    t.same(still.status?.initContainerStatuses?.map((c) => c.state?.waiting?.reason), ["PodInitializing", "PodInitializing"], "its init containers not started (half a second later)");
    release = true;
    stageOut.release();
    const job = await finished(stepJob, "Complete");
    t.same(job.status?.conditions?.filter((c) => c.status === "True").map((c) => c.type), ["SuccessCriteriaMet", "Complete"]);
    t.same(puts.map((p) => p.key).sort(), ["orgs/acme/workspaces/ws1/pipelines/run-ok/a.tsv", "orgs/acme/workspaces/ws1/pipelines/run-ok/a.tsv.idx"], "the declared outputs, secondary files too");
    t.ok(puts.every((p) => p.podPhases.every((ph) => ph !== "Succeeded")), "stored before the pod succeeded");
    t.ok(stageOut.released.has(held));

    const oom = (await client.request<Job>("POST", `/apis/batch/v1/namespaces/${NS}/jobs`, { body: buildJob(task("run-oom"), { namespace: NS, image: "operon:test", toolImage: "samtools:test", storageEnv: {} }) })).metadata.name;
    const failed = await finished(oom, "Failed");
    t.same(failed.status?.conditions?.filter((c) => c.status === "True").map((c) => c.type), ["FailureTarget", "Failed"]);
    const [oomPod] = await podsOf(oom);
    t.same(oomPod?.status?.initContainerStatuses?.map((c) => [c.name, c.state?.terminated?.exitCode, c.state?.terminated?.reason]), [["stage-in", 0, "Completed"], ["tool", 137, "OOMKilled"]], "the tool container OOMKilled, after stage-in");
    t.equal(puts.filter((p) => p.key.includes("run-oom")).length, 0, "nothing uploaded for it");
  });

  await t.test("etcd compaction makes an old resourceVersion too old; the API server restarts on the same port and the controllers carry on", async (t) => {
    const before = await env.etcdRevision();
    await client.request("POST", `/api/v1/namespaces/${NS}/configmaps`, { body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "after-revision" } } });
    const compacted = await env.compactEtcd();
    t.ok(compacted > before, `compacted at ${compacted}, after ${before}`);
    // Read at the old revision from etcd itself (the API server's watch cache may still answer
    // for it: a drill that needs 410 Gone from the API server starts it with --watch-cache=false).
    const old = await fetch(`${env.etcdEndpoint}/v3/kv/range`, { method: "POST", body: JSON.stringify({ key: Buffer.from("/registry/").toString("base64"), range_end: Buffer.from("/registry0").toString("base64"), revision: String(before), count_only: true }) });
    t.match(await old.text(), /compacted/, "etcd: the old revision has been compacted");
    await createJob("long-runner", { annotations: { [KWOK_ANNOTATION.duration]: "10m" } });
    const long = await running("long-runner");
    const started = Date.now();
    await env.restartApiserver();
    t.comment(`restartApiserver took ${((Date.now() - started) / 1000).toFixed(1)} s`);
    t.ok(await client.request("GET", `/api/v1/namespaces/${NS}/configmaps/after-revision`), "the data is still there");
    await sleep(Number.parseInt(NODE_TIMING.gracePeriod, 10) * 1000 + 3000); // what the node lifecycle controller would do, it has done by now
    const after = await client.request<Pod>("GET", `/api/v1/namespaces/${NS}/pods/${long.metadata.name}`);
    t.equal(after.status?.phase, "Running", "a pod running across the restart was not evicted (its node's heartbeats were missed, not lost)");
    t.notOk(after.metadata.deletionTimestamp);
    await createJob("after-restart");
    await finished("after-restart", "Complete", 60_000);
    t.pass("a Job created after the restart runs to Complete: controller manager, scheduler and kwok reconnected");
  });
  await t.test("a kwok node deleted mid-run: the pod GC fails and removes its pod, the Job controller replaces it on another node", async (t) => {
    const { lossy, first, second, lostAt, replacedAt } = await nodeLoss;
    t.ok(lossy.includes(first.spec.nodeName ?? ""), `the pod ran on one of the lossy nodes (${first.spec.nodeName})`);
    t.comment(`replaced ${((replacedAt - lostAt) / 1000).toFixed(0)} s after the node was deleted`);
    t.equal(second.spec.nodeName, lossy.find((n) => n !== first.spec.nodeName), "the replacement runs on the other node");
    const last = podsSeen.last(first.metadata.name);
    t.equal(last?.status?.phase, "Failed", "the lost pod was marked Failed");
    t.match(last?.status?.conditions?.find((c) => c.type === "DisruptionTarget"), { status: "True", reason: "DeletionByPodGC" }, "DisruptionTarget, by the pod GC");
    await until("the lost pod removed", () => podsSeen.deletedAt(first.metadata.name), 30_000);
    await client.request("PATCH", `/api/v1/namespaces/${NS}/pods/${second.metadata.name}`, { patch: "merge", body: { metadata: { annotations: { [KWOK_ANNOTATION.duration]: "0s" } } } });
    const job = await finished("node-loss", "Complete");
    t.equal(job.status?.failed ?? 0, 0, "the lost node did not count as a failure");
  });
});
