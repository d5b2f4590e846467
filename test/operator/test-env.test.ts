// The test harness itself (DESIGN §10): startTestEnv gives a real, reachable, authenticated
// control plane with the CRDs installed and a real S3 server, and stop() leaves nothing behind;
// `npm run test-env` does the same as a long-running process.
import t from "tap";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, mkdir, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { request } from "node:https";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { GetObjectCommand, HeadBucketCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { parse, parseAllDocuments } from "yaml";
import { K8S_VERSION, kubectlPath, startTestEnv } from "../support/k8s-env.js";

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

t.test("startTestEnv: real apiserver + etcd + CRDs + MinIO, and stop() leaves nothing behind", async (t) => {
  const started = Date.now();
  const env = await startTestEnv();
  t.comment(`startTestEnv took ${((Date.now() - started) / 1000).toFixed(1)} s`);
  t.teardown(() => env.stop());

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
  const env = await startTestEnv({ crdDir, minio: false });
  t.teardown(() => env.stop());

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
  await t.rejects(startTestEnv({ minio: false }), /kube-apiserver.*make test-deps/);
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
  t.same(left, [], "no etcd, kube-apiserver or MinIO left running");
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
    if (mode === "exit") t.notOk(existsSync(dir), "exit: the temp dir is removed by the exit hook");
    else await rm(dir, { recursive: true, force: true }); // nothing can remove it after SIGKILL
  }
});

t.test("npm run test-env: writes DIR/kubeconfig and DIR/env, prints ready, stops cleanly on SIGTERM", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "operon-test-env-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const started = Date.now();
  const child = spawn(process.execPath, ["--import", "tsx", "scripts/test-env.ts", "--dir", dir], {
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
  t.notOk(tempDir && existsSync(tempDir), "its temp dir is removed");
  t.ok(existsSync(dir), "DIR itself is kept");
  t.same(await readdir(dir), [], "DIR/kubeconfig and DIR/env are removed");
});

t.test("npm run test-env without --dir: usage, exit 2", async (t) => {
  for (const args of [[], ["--dir"], ["--bogus", "x"]]) {
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
