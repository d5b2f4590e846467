/**
 * Runs a step Job's pod the way a kubelet would, as local processes, for tests on a control
 * plane without nodes (DESIGN §10). It takes the pod template exactly as the operator wrote
 * it: init containers in order, then the main container; each container's args, env (values,
 * and `envFrom` Secrets read from the API server), working directory and emptyDir volumes;
 * all as the pod's user (uid/gid 1000, the volumes owned by its fsGroup) when this process is
 * root. Then it records what a kubelet would — a Pod with each container's exit code and
 * termination message — and has the Job controller's last word (the Job Complete or Failed).
 *
 * What differs from a node, and why: no image is pulled. The operon image's containers run
 * `operon` from a tree built like the image (test/support/image-tree.ts); the tool container
 * runs its command (the fixed entry script) with the tool found on this machine's PATH (the
 * Debian package of the same tool, not the pinned biocontainers image). Mount paths in args,
 * env values and working directories are mapped to the volume directories, the termination
 * message file is passed as `--termination-log`, and the root filesystem is not read-only.
 *
 * `startNode` adds the one kubelet API the operator calls: a Node object whose address is a
 * local HTTPS server answering `GET /containerLogs/<ns>/<pod>/<container>` with what the
 * container printed. The API server proxies `pods/<name>/log` to it, as to a real kubelet
 * (the test environment sets no kubelet CA, so its self-signed certificate is accepted).
 */
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isNotFound, paths, type KubeClient } from "../../adapters/kubernetes/client.js";
import type { JobObject } from "../../core/kubernetes/jobs.js";
import { completeJob, failJob, nowIso } from "./job-sim.js";
import { freePorts } from "./minio.js";

type EnvVar = { name: string; value?: string };
interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  envFrom?: Array<{ secretRef?: { name: string } }>;
  workingDir?: string;
  volumeMounts?: Array<{ name: string; mountPath: string }>;
}
interface PodSpec {
  initContainers?: Container[];
  containers: Container[];
  volumes?: Array<{ name: string; emptyDir?: object }>;
  securityContext?: { runAsUser?: number; runAsGroup?: number; fsGroup?: number };
}
type Job = JobObject & { metadata: { name: string; uid?: string }; spec?: { template?: { metadata?: { labels?: Record<string, string> }; spec?: PodSpec } } };

export interface ContainerRun {
  name: string;
  exitCode: number;
  /** The termination message (the `operon` helpers write one). */
  message: string;
  /** stdout and stderr together. */
  log: string;
}

export interface PodRun {
  pod: string;
  containers: ContainerRun[];
  succeeded: boolean;
  /** The Job was suspended meanwhile: the running container got SIGTERM and the pod is gone. */
  suspended: boolean;
}

export interface PodRunnerOptions {
  client: KubeClient;
  namespace: string;
  /** The image whose containers are `operon` (the operator's OPERON_IMAGE). */
  operonImage: string;
  /** How to start `operon` (the image's entry point): e.g. [process.execPath, tree.main]. */
  operon: string[];
  /** Told when a container starts (e.g. to act while the tool runs). */
  onContainerStart?: (job: string, container: string) => void;
  /** The node the pods are recorded on (its kubelet serves their logs); none: no logs. */
  node?: FakeNode;
  /** Keep the volume directories (for debugging). */
  keep?: boolean;
}

export interface FakeNode {
  name: string;
  /** Container logs by `<namespace>/<pod>/<container>`. */
  logs: Map<string, string>;
  /** Log requests the API server proxied here. */
  requests: string[];
  stop(): Promise<void>;
}

/** A Node whose kubelet endpoint is a local HTTPS server serving the recorded container logs. */
export async function startNode(client: KubeClient, name = "operon-test-node"): Promise<FakeNode> {
  const dir = mkdtempSync(join(tmpdir(), "operon-node-"));
  const key = join(dir, "key.pem");
  const cert = join(dir, "cert.pem");
  const r = spawnSync(process.env.OPENSSL ?? "openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`openssl: ${r.stderr}`);
  const logs = new Map<string, string>();
  const requests: string[] = [];
  const server = createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (req, res) => {
    const url = new URL(req.url ?? "/", "https://127.0.0.1");
    requests.push(url.pathname);
    const m = /^\/containerLogs\/([^/]+)\/([^/]+)\/([^/]+)$/.exec(url.pathname);
    const text = m ? logs.get(`${m[1]}/${m[2]}/${m[3]}`) : undefined;
    if (text === undefined) { res.writeHead(404, { "content-type": "text/plain" }).end("not found\n"); return; }
    const limit = Number(url.searchParams.get("limitBytes") ?? Infinity);
    res.writeHead(200, { "content-type": "text/plain" }).end(Buffer.from(text).subarray(0, limit));
  });
  const port = (await freePorts(1))[0] as number;
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  await client.request("POST", "/api/v1/nodes", { body: { apiVersion: "v1", kind: "Node", metadata: { name } } });
  await client.request("PATCH", `/api/v1/nodes/${name}/status`, {
    patch: "merge",
    body: { status: { addresses: [{ type: "InternalIP", address: "127.0.0.1" }], daemonEndpoints: { kubeletEndpoint: { Port: port } } } },
  });
  return {
    name, logs, requests,
    async stop() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const asRoot = process.getuid?.() === 0;

/** Runs the Job's pod to its end, records the Pod and finishes the Job. */
export async function runJobPod(job: Job, o: PodRunnerOptions): Promise<PodRun> {
  const tpl = job.spec?.template;
  const spec = tpl?.spec;
  if (!spec) throw new Error(`Job ${job.metadata.name} has no pod template (was it read from a slimmed cache?)`);
  const uid = spec.securityContext?.runAsUser ?? 1000;
  const gid = spec.securityContext?.runAsGroup ?? 1000;
  const fsGroup = spec.securityContext?.fsGroup ?? gid;
  const root = mkdtempSync(join(tmpdir(), "operon-pod-"));
  chmodSync(root, 0o755);
  const volumes = new Map<string, string>();
  for (const v of spec.volumes ?? []) {
    if (!v.emptyDir) throw new Error(`volume ${v.name}: only emptyDir is supported here`);
    const d = join(root, v.name);
    writeDir(d, fsGroup);
    volumes.set(v.name, d);
  }
  const podName = `${job.metadata.name}-${randomBytes(3).toString("hex")}`;
  const started = nowIso();
  const runs: ContainerRun[] = [];
  // A suspended Job has its pods deleted: the running container gets SIGTERM.
  const suspend = new AbortController();
  let running = true;
  const watchSuspend = (async () => {
    while (running && !suspend.signal.aborted) {
      const cur = await o.client.request<Job>("GET", `${paths.jobs(o.namespace)}/${encodeURIComponent(job.metadata.name)}`).catch((e: unknown) => (isNotFound(e) ? "deleted" as const : undefined));
      // Suspended, or deleted (the garbage collector would delete its pod): the pod stops.
      if (cur === "deleted" || (cur?.spec && (cur.spec as { suspend?: boolean }).suspend)) suspend.abort();
      else await new Promise((r) => setTimeout(r, 100));
    }
  })();
  try {
    const all = [...(spec.initContainers ?? []), ...spec.containers];
    for (const c of all) {
      if (suspend.signal.aborted) break;
      const r = await runContainer(c, { volumes, root, uid, gid, podName, jobName: job.metadata.name, o, signal: suspend.signal });
      runs.push(r);
      if (r.exitCode !== 0) break; // restartPolicy Never: a failed init container ends the pod
    }
  } finally {
    running = false;
    await watchSuspend;
    if (!o.keep) rmSync(root, { recursive: true, force: true });
  }
  if (suspend.signal.aborted) {
    // What the Job controller reports for a suspended Job whose pod it deleted.
    // (Not for a Job deleted meanwhile: the operator deletes a stopped Job once its run records the stop.)
    const t = nowIso();
    await o.client.request("PATCH", `${paths.jobs(o.namespace)}/${encodeURIComponent(job.metadata.name)}/status`, {
      patch: "merge",
      body: { status: { active: 0, ready: 0, conditions: [{ type: "Suspended", status: "True", reason: "JobSuspended", message: "Job suspended", lastProbeTime: t, lastTransitionTime: t }] } },
    }).catch((e: unknown) => { if (!isNotFound(e)) throw e; });
    return { pod: podName, containers: runs, succeeded: false, suspended: true };
  }
  const succeeded = runs.length === (spec.initContainers?.length ?? 0) + spec.containers.length && runs.every((r) => r.exitCode === 0);
  for (const r of runs) o.node?.logs.set(`${o.namespace}/${podName}/${r.name}`, r.log);
  await recordPod(job, tpl, podName, runs, succeeded, started, o);
  if (succeeded) await completeJob(o.client, o.namespace, job);
  else await failJob(o.client, o.namespace, job);
  return { pod: podName, containers: runs, succeeded, suspended: false };
}

/** An emptyDir volume: world-writable like the kubelet's, group-owned by the fsGroup (setgid). */
function writeDir(d: string, fsGroup: number): void {
  mkdirSync(d);
  if (asRoot) chownSync(d, 0, fsGroup);
  chmodSync(d, 0o2777);
}

async function runContainer(c: Container, ctx: { volumes: Map<string, string>; root: string; uid: number; gid: number; podName: string; jobName: string; o: PodRunnerOptions; signal: AbortSignal }): Promise<ContainerRun> {
  const mounts = (c.volumeMounts ?? []).map((m) => ({ path: m.mountPath, dir: ctx.volumes.get(m.name) as string }));
  const remap = (s: string) => {
    for (const m of mounts) {
      if (s === m.path) return m.dir;
      if (s.startsWith(`${m.path}/`)) return m.dir + s.slice(m.path.length);
    }
    return s;
  };
  const env: Record<string, string> = { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", HOSTNAME: ctx.podName };
  for (const from of c.envFrom ?? []) {
    if (!from.secretRef) continue;
    const secret = await ctx.o.client.request<{ data?: Record<string, string> }>("GET", `/api/v1/namespaces/${ctx.o.namespace}/secrets/${encodeURIComponent(from.secretRef.name)}`);
    for (const [k, v] of Object.entries(secret.data ?? {})) env[k] = Buffer.from(v, "base64").toString("utf8");
  }
  for (const e of c.env ?? []) if (e.value !== undefined) env[e.name] = remap(e.value);
  const termLog = join(ctx.root, `${c.name}.termination-log`);
  writeFileSync(termLog, "");
  if (asRoot) chownSync(termLog, ctx.uid, ctx.gid);
  let argv: string[];
  if (c.image === ctx.o.operonImage && !c.command) argv = [...ctx.o.operon, ...(c.args ?? []).map(remap), "--termination-log", termLog];
  else argv = [...(c.command ?? []), ...(c.args ?? [])].map((a, i) => (i === 0 ? a : remap(a)));
  const cwd = c.workingDir ? remap(c.workingDir) : ctx.root;
  const { code, log } = await new Promise<{ code: number; log: string }>((resolve) => {
    ctx.o.onContainerStart?.(ctx.jobName, c.name);
    const child = spawn(argv[0] as string, argv.slice(1), { cwd, env, ...(asRoot ? { uid: ctx.uid, gid: ctx.gid } : {}), stdio: ["ignore", "pipe", "pipe"], signal: ctx.signal, killSignal: "SIGTERM" });
    let out = "";
    child.stdout.on("data", (d: Buffer) => { out += d.toString("utf8"); });
    child.stderr.on("data", (d: Buffer) => { out += d.toString("utf8"); });
    child.on("error", (e) => { if (!ctx.signal.aborted) resolve({ code: 127, log: `${out}${String(e)}\n` }); });
    child.on("close", (exit, signal) => resolve({ code: exit ?? (signal === "SIGTERM" ? 143 : signal ? 137 : 1), log: out }));
  });
  return { name: c.name, exitCode: code, message: readFileSync(termLog, "utf8").slice(0, 4096), log };
}

/** The Pod a kubelet would have left: one per Job, with each container's end. */
async function recordPod(job: Job, tpl: NonNullable<NonNullable<Job["spec"]>["template"]>, name: string, runs: ContainerRun[], succeeded: boolean, started: string, o: PodRunnerOptions): Promise<void> {
  const spec = tpl.spec as PodSpec;
  const t = nowIso();
  const labels = { ...(tpl.metadata?.labels ?? {}), "job-name": job.metadata.name, "batch.kubernetes.io/job-name": job.metadata.name };
  const strip = (c: Container) => ({ name: c.name, image: c.image });
  await o.client.request("POST", paths.pods(o.namespace), {
    body: {
      apiVersion: "v1", kind: "Pod",
      metadata: { name, labels, ...(job.metadata.uid ? { ownerReferences: [{ apiVersion: "batch/v1", kind: "Job", name: job.metadata.name, uid: job.metadata.uid, controller: true }] } : {}) },
      spec: { restartPolicy: "Never", ...(o.node ? { nodeName: o.node.name } : {}), initContainers: (spec.initContainers ?? []).map(strip), containers: spec.containers.map(strip) },
    },
  });
  const statusOf = (c: Container) => {
    const r = runs.find((x) => x.name === c.name);
    return {
      name: c.name, image: c.image, imageID: "", ready: false, restartCount: 0,
      state: r
        ? { terminated: { exitCode: r.exitCode, reason: r.exitCode === 0 ? "Completed" : "Error", ...(r.message ? { message: r.message } : {}), startedAt: started, finishedAt: t } }
        : { waiting: { reason: "PodInitializing" } },
    };
  };
  await o.client.request("PATCH", `${paths.pods(o.namespace)}/${encodeURIComponent(name)}/status`, {
    patch: "merge",
    body: { status: { phase: succeeded ? "Succeeded" : "Failed", startTime: started, initContainerStatuses: (spec.initContainers ?? []).map(statusOf), containerStatuses: spec.containers.map(statusOf) } },
  });
}
