/**
 * The test kubelet: one node of the test environment whose pods really run, as local processes
 * with the real tools (docs/testing.md#the-test-kubelet). The scheduler binds pods to it like to any node; the Job
 * controller turns what it reports into Job conditions. Use it where a test needs real outputs
 * (the tools' files, their logs, their exit codes); kwok's nodes (k8s-env.ts) stand in where
 * only the pods' life cycle matters.
 *
 * `startNode(client, options)` registers the Node (Ready, cpu 64, memory 512Gi,
 * ephemeral-storage 1Ti, pods 250, label `operon.dev/test-node=true`), keeps it alive (its
 * Lease in kube-node-lease renewed every second, its Ready condition every 10 s) so the node
 * lifecycle controller keeps it Ready, and watches the pods bound to it (`spec.nodeName`):
 *  - each pod runs as a kubelet runs it: init containers one by one in order, then the
 *    containers (restartPolicy Never: a failed init container ends the pod); each container's
 *    command and args, env (values, `secretKeyRef`, `fieldRef` of the pod's name, namespace and
 *    node) and `envFrom` Secrets, working directory, emptyDir and hostPath volumes — a mount
 *    that says `readOnly` is a read-only bind mount when this process may mount (root), the
 *    directory itself otherwise; all as the pod's user (runAsUser/runAsGroup, default
 *    1000/1000; the volumes owned by its fsGroup) when this process is root; a container's
 *    `limits.memory` as a memory cgroup when one can be made here, so a tool that exceeds it is
 *    OOM-killed by the kernel and reported `OOMKilled`, exit 137;
 *  - it patches the pod's status as a kubelet does: Pending (containers waiting) → each init
 *    container running then terminated → Running (containers running, Ready) → Succeeded or
 *    Failed, with exit codes, reasons (Completed, Error, OOMKilled), start and finish times and
 *    termination messages (the file, or the log's tail with FallbackToLogsOnError);
 *  - a pod with a deletionTimestamp (an eviction, a suspended or deleted Job, a taint
 *    eviction) has its running container sent SIGTERM (SIGKILL after the grace period), ends
 *    Failed, and is then deleted with grace 0 (its finalizers, e.g. the Job controller's, keep
 *    it until they are removed);
 *  - its kubelet endpoint is a local HTTPS server answering `GET /containerLogs/<ns>/<pod>/
 *    <container>`, which the API server proxies `pods/<name>/log` to (the test environment sets
 *    no kubelet CA, so its self-signed certificate is accepted); a running container's log is
 *    served as far as it got.
 * It never writes a Job: the Job controller does.
 *
 * What differs from a node, and why: no image is pulled. The operon image's containers run
 * `operon` from a tree built like the image (test/support/image-tree.ts; `operonImage` and
 * `operon` say which image and how to start it); any other container runs its command with
 * the tool found on this machine's PATH (the Debian package of the same tool, not the pinned
 * biocontainers image). Mount paths in args, env values and working directories are mapped
 * to the volume directories, the termination message file is passed as `--termination-log`
 * to `operon` (and its reference volumes, which stage-in finds at /ref/<name> by itself, as
 * OPERON_REF_VOLUMES), the root filesystem is not read-only, and there is no network
 * isolation. Every image "pulls" unless `pullImage` says the registry refuses it.
 * Volume sources other than emptyDir and hostPath (a PVC, a Secret) leave the pod Pending with
 * its first container waiting `CreateContainerConfigError`, saying so.
 *
 * A pod can be held back before it starts (`beforeStart`), e.g. to change its inputs first;
 * `node.runs` has each pod's outcome. `node.kill()` is a machine lost: heartbeats stop,
 * processes are killed, nothing more is reported (then `env.deleteNode(node.name)`, or the node
 * lifecycle controller marks it NotReady after NODE_TIMING.gracePeriod).
 */
import { spawn, spawnSync } from "node:child_process";
import { accessSync, chmodSync, chownSync, constants, existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import type { IncomingMessage } from "node:http";
import { createServer } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isAlreadyExists, isNotFound, type KubeClient } from "../../adapters/kubernetes/client.js";
import { watchEvents } from "../../adapters/kubernetes/informer.js";
import { REFERENCE_ROOT } from "../../core/references.js";
import { freePorts } from "./minio.js";

type EnvVar = {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean }; fieldRef?: { fieldPath: string } };
};
interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  envFrom?: Array<{ secretRef?: { name: string; optional?: boolean } }>;
  workingDir?: string;
  volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean; subPath?: string }>;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  terminationMessagePolicy?: string;
}
interface Volume { name: string; emptyDir?: object; hostPath?: { path: string; type?: string }; [source: string]: unknown }
interface PodSpec {
  nodeName?: string;
  initContainers?: Container[];
  containers: Container[];
  volumes?: Volume[];
  securityContext?: { runAsUser?: number; runAsGroup?: number; fsGroup?: number };
  terminationGracePeriodSeconds?: number;
}
interface ContainerState {
  waiting?: { reason: string; message?: string };
  running?: { startedAt: string };
  terminated?: { exitCode: number; reason: string; message?: string; startedAt?: string; finishedAt: string };
}
export interface Pod {
  metadata: { name: string; namespace: string; uid: string; resourceVersion?: string; labels?: Record<string, string>; annotations?: Record<string, string>; deletionTimestamp?: string; deletionGracePeriodSeconds?: number; finalizers?: string[] };
  spec: PodSpec;
  status?: { phase?: string; conditions?: Array<{ type: string; status: string }> };
}

export interface ContainerRun {
  name: string;
  exitCode: number;
  /** Completed, Error, OOMKilled (or StartError: the command could not be started). */
  reason: string;
  /** The termination message. */
  message: string;
  /** stdout and stderr together. */
  log: string;
}

export interface PodRun {
  /** `<namespace>/<name>` */
  key: string;
  pod: string;
  namespace: string;
  /** The containers that ran, in the order they ran. */
  containers: ContainerRun[];
  phase: "Succeeded" | "Failed";
  /** The pod was deleted meanwhile (eviction, suspension, Job deleted): its running container got SIGTERM. */
  deleted: boolean;
}

export interface TestNodeOptions {
  /** Node name (default `operon-test-node`). */
  name?: string;
  /** The image whose containers are `operon` (the operator's OPERON_IMAGE); none: no container is `operon`. */
  operonImage?: string;
  /** How to start `operon` (the image's entry point): e.g. [tree.node, tree.main]. */
  operon?: string[];
  /** Extra labels of the Node. */
  labels?: Record<string, string>;
  taints?: Array<{ key: string; value?: string; effect: "NoSchedule" | "PreferNoSchedule" | "NoExecute" }>;
  /**
   * The registry's answer for a container's image (default: every image "pulls"; nothing is
   * downloaded either way). A failure leaves that container waiting `ErrImagePull`, then
   * `ImagePullBackOff` with the message, and the pod Pending until it is deleted — as a kubelet
   * does for an image that cannot be pulled.
   */
  pullImage?: (image: string, pod: Pod) => { message: string } | undefined;
  /** Awaited before a pod's first container starts: hold a pod back (its status says Pending meanwhile). */
  beforeStart?: (pod: Pod) => Promise<void> | void;
  /** Told when a container starts (e.g. to act while the tool runs). `job` is the pod's `job-name` label, or its name. */
  onContainerStart?: (job: string, container: string, pod: Pod) => void;
  /** Wait until the node is Ready and without `node.kubernetes.io/*` taints (default true: needs the node lifecycle controller). */
  waitSchedulable?: boolean;
  /** Keep the pods' directories (for debugging). */
  keep?: boolean;
  onError?: (e: unknown) => void;
}

export interface TestNode {
  name: string;
  /** Container logs by `<namespace>/<pod>/<container>`, growing while the container runs. */
  logs: Map<string, string>;
  /** Paths the API server asked the kubelet endpoint for (log requests). */
  requests: string[];
  /** Each pod this node started, by `<namespace>/<name>`: resolves when it ended (and its status says so). */
  runs: Map<string, Promise<PodRun>>;
  /** The pods' outcomes whose name starts with `prefix` (a Job's pods: its name), in start order. */
  runsOf(prefix: string): Promise<PodRun[]>;
  /** A machine lost: heartbeats stop, every process is killed, nothing more is written. */
  kill(): Promise<void>;
  /** Stops the node agent: running pods are killed (SIGKILL) without a final status; the Node object stays. */
  stop(): Promise<void>;
}

export const TEST_NODE_NAME = "operon-test-node";
/** Label of the test kubelet's node (`operon.dev/test-node=true`), for a nodeSelector. */
export const TEST_NODE_LABEL = "operon.dev/test-node";

const asRoot = process.getuid?.() === 0;
const nowIso = () => new Date().toISOString().replace(/\.\d{3}Z$/, "Z");
/** A Lease's renewTime (MicroTime). */
const microTime = () => new Date().toISOString().replace(/Z$/, "000Z");
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The Node of the test kubelet, started and kept alive; see the module comment. */
export async function startNode(client: KubeClient, options: TestNodeOptions = {}): Promise<TestNode> {
  const name = options.name ?? TEST_NODE_NAME;
  const onError = options.onError ?? ((e: unknown) => { process.stderr.write(`test kubelet ${name}: ${e instanceof Error ? e.stack ?? e.message : String(e)}\n`); });
  const dir = mkdtempSync(join(tmpdir(), "operon-node-"));
  chmodSync(dir, 0o755); // the pods' user reaches their directories below it
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

  // ---------------------------------------------------------------- registration, heartbeats
  const capacity = { cpu: "64", memory: "512Gi", "ephemeral-storage": "1Ti", pods: "250" };
  const conditions = (t: string) => [
    { type: "Ready", status: "True", reason: "KubeletReady", message: "kubelet is posting ready status", lastHeartbeatTime: t, lastTransitionTime: startedAt },
    { type: "MemoryPressure", status: "False", reason: "KubeletHasSufficientMemory", message: "kubelet has sufficient memory available", lastHeartbeatTime: t, lastTransitionTime: startedAt },
    { type: "DiskPressure", status: "False", reason: "KubeletHasNoDiskPressure", message: "kubelet has no disk pressure", lastHeartbeatTime: t, lastTransitionTime: startedAt },
    { type: "PIDPressure", status: "False", reason: "KubeletHasSufficientPID", message: "kubelet has sufficient PID available", lastHeartbeatTime: t, lastTransitionTime: startedAt },
  ];
  const startedAt = nowIso();
  const nodeStatus = () => ({
    capacity, allocatable: capacity,
    conditions: conditions(nowIso()),
    addresses: [{ type: "InternalIP", address: "127.0.0.1" }, { type: "Hostname", address: name }],
    daemonEndpoints: { kubeletEndpoint: { Port: port } },
    nodeInfo: { architecture: "amd64", operatingSystem: "linux", kubeletVersion: "operon-test-kubelet", containerRuntimeVersion: "local-processes://1", kernelVersion: "", osImage: "", kubeProxyVersion: "", machineID: "", systemUUID: "", bootID: "" },
  });
  const nodePath = `/api/v1/nodes/${encodeURIComponent(name)}`;
  let nodeUid: string;
  try {
    const created = await client.request<{ metadata: { uid: string } }>("POST", "/api/v1/nodes", {
      body: {
        apiVersion: "v1", kind: "Node",
        metadata: { name, labels: { "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", [TEST_NODE_LABEL]: "true", ...(options.labels ?? {}) } },
        spec: { ...(options.taints ? { taints: options.taints } : {}) },
        status: nodeStatus(),
      },
    });
    nodeUid = created.metadata.uid;
  } catch (e) {
    if (!isAlreadyExists(e)) throw e;
    const cur = await client.request<{ metadata: { uid: string } }>("PATCH", `${nodePath}/status`, { patch: "strategic", body: { status: nodeStatus() } });
    nodeUid = cur.metadata.uid;
  }
  const leasePath = `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${encodeURIComponent(name)}`;
  const renewLease = async () => {
    try {
      await client.request("PATCH", leasePath, { patch: "merge", body: { spec: { holderIdentity: name, renewTime: microTime() } } });
    } catch (e) {
      if (!isNotFound(e)) throw e;
      await client.request("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {
        body: {
          apiVersion: "coordination.k8s.io/v1", kind: "Lease",
          metadata: { name, ownerReferences: [{ apiVersion: "v1", kind: "Node", name, uid: nodeUid }] },
          spec: { holderIdentity: name, leaseDurationSeconds: 40, renewTime: microTime() },
        },
      }).catch((err: unknown) => { if (!isAlreadyExists(err)) throw err; });
    }
  };
  await renewLease();

  let alive = true; // false once killed or stopped: nothing more is written
  const runs = new Map<string, Promise<PodRun>>();
  const live = new Map<string, PodHandle>(); // by uid
  const cgroups = memoryCgroups();
  const podWatch = new AbortController();
  const nodeExists = () => client.request("GET", nodePath).then(() => true, (e: unknown) => !isNotFound(e));
  const heartbeat = (async () => {
    let n = 0;
    while (alive) {
      await sleep(1000);
      if (!alive) break;
      try {
        await renewLease();
        if (++n % 10 === 0) await client.request("PATCH", `${nodePath}/status`, { patch: "strategic", body: { status: { conditions: conditions(nowIso()) } } });
      } catch (e) {
        // The node was deleted: this machine is gone from the cluster (a real kubelet would
        // register again; a lost machine does not).
        if (isNotFound(e) && !(await nodeExists())) { await kill(); break; }
        if (alive) onError(e);
      }
    }
  })();

  if (options.waitSchedulable ?? true) {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const node = await client.request<{ spec?: { taints?: Array<{ key: string }> }; status?: { conditions?: Array<{ type: string; status: string }> } }>("GET", nodePath);
      const ready = node.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
      if (ready && !(node.spec?.taints ?? []).some((t) => t.key.startsWith("node.kubernetes.io/"))) break;
      if (Date.now() > deadline) throw new Error(`test kubelet: node ${name} is not schedulable after 60 s (is the node lifecycle controller running?): ${JSON.stringify(node.spec?.taints)}`);
      await sleep(100);
    }
  }

  // ---------------------------------------------------------------- pods
  const watching = (async () => {
    let rv: string | undefined;
    while (alive) {
      try {
        if (rv === undefined) {
          const list = await client.request<{ metadata: { resourceVersion: string }; items: Pod[] }>("GET", "/api/v1/pods", { query: { fieldSelector: `spec.nodeName=${name}` } });
          const seen = new Set<string>();
          for (const pod of list.items) { seen.add(pod.metadata.uid); onPod(pod, false); }
          for (const [uid, h] of live) if (!seen.has(uid)) h.gone();
          rv = list.metadata.resourceVersion;
        }
        const res: IncomingMessage = await client.stream("/api/v1/pods", { query: { watch: 1, fieldSelector: `spec.nodeName=${name}`, resourceVersion: rv, allowWatchBookmarks: true, timeoutSeconds: 60 }, signal: podWatch.signal });
        for await (const ev of watchEvents<Pod>(res)) {
          if (ev.type === "ERROR") { rv = undefined; throw new Error(`pod watch: ${JSON.stringify(ev.object)}`); }
          rv = ev.object.metadata.resourceVersion ?? rv;
          if (ev.type === "BOOKMARK") continue;
          onPod(ev.object, ev.type === "DELETED");
        }
      } catch (e) {
        if (!alive) return;
        rv = undefined; // relist
        if (!(e instanceof Error && /ECONNREFUSED|ECONNRESET|socket hang up|aborted|pod watch/.test(e.message))) onError(e);
        await sleep(500);
      }
    }
  })();

  function onPod(pod: Pod, deleted: boolean): void {
    if (!alive) return;
    const h = live.get(pod.metadata.uid);
    if (h) {
      if (deleted) h.gone();
      else h.update(pod);
      return;
    }
    if (deleted) return;
    const phase = pod.status?.phase;
    if (phase === "Succeeded" || phase === "Failed") {
      // Ended before (perhaps by an earlier agent); a deleted one only needs its final delete.
      if (pod.metadata.deletionTimestamp) void finalDelete(pod).catch(onError);
      return;
    }
    const handle = runPod(pod);
    live.set(pod.metadata.uid, handle);
    const key = `${pod.metadata.namespace}/${pod.metadata.name}`;
    const done = handle.done.finally(() => { live.delete(pod.metadata.uid); });
    done.catch(onError);
    runs.set(key, done);
  }

  const podPath = (pod: Pod) => `/api/v1/namespaces/${encodeURIComponent(pod.metadata.namespace)}/pods/${encodeURIComponent(pod.metadata.name)}`;

  /** A status write that must land (retried through an API server restart); false when the pod is gone. */
  async function patchStatus(pod: Pod, status: Record<string, unknown>): Promise<boolean> {
    for (let attempt = 0; ; attempt++) {
      if (!alive) return false;
      try {
        await client.request("PATCH", `${podPath(pod)}/status`, { patch: "strategic", body: { metadata: { uid: pod.metadata.uid }, status } });
        return true;
      } catch (e) {
        if (isNotFound(e)) return false;
        if (attempt >= 120) throw e;
        await sleep(Math.min(1000, 100 * 2 ** attempt));
      }
    }
  }

  /** The kubelet's last word on a deleted pod: delete it for good (grace 0), this very pod (uid). */
  async function finalDelete(pod: Pod): Promise<void> {
    for (let attempt = 0; alive; attempt++) {
      try {
        await client.request("DELETE", podPath(pod), { body: { apiVersion: "v1", kind: "DeleteOptions", gracePeriodSeconds: 0, preconditions: { uid: pod.metadata.uid } } });
        return;
      } catch (e) {
        if (isNotFound(e) || (e instanceof Error && /Precondition failed|409/.test(e.message))) return;
        if (attempt >= 120) throw e;
        await sleep(Math.min(1000, 100 * 2 ** attempt));
      }
    }
  }

  interface PodHandle { done: Promise<PodRun>; update(pod: Pod): void; gone(): void; kill(): void }

  function runPod(first: Pod): PodHandle {
    let pod = first;
    const stop = new AbortController(); // deletion: SIGTERM the running container, start nothing more
    const killAll = new AbortController(); // stop()/kill(): SIGKILL, report nothing
    let graceTimer: NodeJS.Timeout | undefined;
    const deleting = () => {
      if (stop.signal.aborted) return;
      stop.abort();
      const grace = pod.metadata.deletionGracePeriodSeconds ?? pod.spec.terminationGracePeriodSeconds ?? 30;
      graceTimer = setTimeout(() => killAll.abort(), Math.max(0, grace) * 1000);
      graceTimer.unref();
    };
    if (pod.metadata.deletionTimestamp) deleting();
    const done = (async (): Promise<PodRun> => {
      const key = `${pod.metadata.namespace}/${pod.metadata.name}`;
      const spec = pod.spec;
      const inits = spec.initContainers ?? [];
      const mains = spec.containers;
      const uid = spec.securityContext?.runAsUser ?? 1000;
      const gid = spec.securityContext?.runAsGroup ?? 1000;
      const fsGroup = spec.securityContext?.fsGroup ?? gid;
      const root = mkdtempSync(join(dir, `${pod.metadata.name.slice(0, 40)}-`));
      chmodSync(root, 0o755);
      const states = new Map<string, ContainerState>();
      for (const c of [...inits, ...mains]) states.set(c.name, { waiting: { reason: inits.length > 0 ? "PodInitializing" : "ContainerCreating" } });
      const runs: ContainerRun[] = [];
      const startTime = nowIso();
      const statusOf = (containers: Container[]) => containers.map((c) => {
        const state = states.get(c.name) ?? {};
        return { name: c.name, image: c.image, imageID: "", ready: !!state.running, started: !!state.running, restartCount: 0, state };
      });
      // reason: null removes an earlier one (a strategic merge patch merges each condition's fields).
      const condition = (type: string, status: boolean, reason?: string) => ({ type, status: status ? "True" : "False", lastProbeTime: null, lastTransitionTime: nowIso(), reason: reason ?? null });
      // Status writes go out one after the other, each with the state at the time it was asked for.
      let reported: Promise<boolean> = Promise.resolve(true);
      const report = (phase: string, extra: { initialized?: boolean; ready?: boolean; reason?: string } = {}): Promise<boolean> => {
        const body = statusBody(phase, extra);
        reported = reported.catch(() => false).then(() => patchStatus(pod, body));
        return reported;
      };
      const statusBody = (phase: string, extra: { initialized?: boolean; ready?: boolean; reason?: string }) => ({
        phase, hostIP: "127.0.0.1", hostIPs: [{ ip: "127.0.0.1" }], podIP: "127.0.0.1", podIPs: [{ ip: "127.0.0.1" }], startTime,
        conditions: [
          condition("Initialized", extra.initialized ?? inits.length === 0, extra.initialized === false || (extra.initialized === undefined && inits.length > 0) ? "ContainersNotInitialized" : undefined),
          condition("Ready", extra.ready ?? false, extra.ready ? undefined : extra.reason ?? "ContainersNotReady"),
          condition("ContainersReady", extra.ready ?? false, extra.ready ? undefined : extra.reason ?? "ContainersNotReady"),
        ],
        ...(inits.length > 0 ? { initContainerStatuses: statusOf(inits) } : {}),
        containerStatuses: statusOf(mains),
      });
      const mounted: string[] = [];
      try {
        await report("Pending");
        // Volumes.
        const volumes = new Map<string, string>();
        const bad: string[] = [];
        for (const v of spec.volumes ?? []) {
          if (v.emptyDir) {
            const d = join(root, `vol-${v.name}`);
            writeDir(d, fsGroup);
            volumes.set(v.name, d);
          } else if (v.hostPath) {
            if (!existsSync(v.hostPath.path)) {
              if (v.hostPath.type === "DirectoryOrCreate") mkdirSync(v.hostPath.path, { recursive: true });
              else if (v.hostPath.type && v.hostPath.type !== "") bad.push(`volume ${v.name}: hostPath ${v.hostPath.path} does not exist`);
            }
            volumes.set(v.name, v.hostPath.path);
          } else {
            const source = Object.keys(v).filter((k) => k !== "name").join(", ");
            bad.push(`volume ${v.name}: the test kubelet mounts only emptyDir and hostPath volumes, not ${source}`);
          }
        }
        if (bad.length > 0) {
          // What a kubelet reports when it cannot set a container up: it waits, it does not fail.
          const firstContainer = (inits[0] ?? mains[0]) as Container;
          states.set(firstContainer.name, { waiting: { reason: "CreateContainerConfigError", message: bad.join("; ") } });
          await report("Pending");
          await new Promise<void>((resolve) => { if (stop.signal.aborted) resolve(); else stop.signal.addEventListener("abort", () => resolve(), { once: true }); });
        } else {
          if (options.beforeStart && !stop.signal.aborted) {
            await Promise.race([
              options.beforeStart(pod),
              new Promise<void>((resolve) => stop.signal.addEventListener("abort", () => resolve(), { once: true })),
            ]);
          }
          const ctx: RunContext = { pod, root, uid, gid, volumes, mounted, logs, cgroups, options, stop: stop.signal, kill: killAll.signal, secrets: new Map() };
          let ok = true;
          /** False when the container's image cannot be pulled: then it waits (ErrImagePull, ImagePullBackOff) until the pod is deleted. */
          const pulled = async (c: Container): Promise<boolean> => {
            const failure = options.pullImage?.(c.image, pod);
            if (!failure) return true;
            states.set(c.name, { waiting: { reason: "ErrImagePull", message: failure.message } });
            await report("Pending");
            states.set(c.name, { waiting: { reason: "ImagePullBackOff", message: `Back-off pulling image "${c.image}": ${failure.message}` } });
            await report("Pending");
            await new Promise<void>((resolve) => { if (stop.signal.aborted) resolve(); else stop.signal.addEventListener("abort", () => resolve(), { once: true }); });
            return false;
          };
          for (const c of inits) {
            if (stop.signal.aborted) break;
            if (!(await pulled(c))) { ok = false; break; }
            states.set(c.name, { running: { startedAt: nowIso() } });
            void report("Pending").catch(onError);
            const run = await runContainer(c, ctx, client);
            runs.push(run);
            states.set(c.name, { terminated: terminated(run, (states.get(c.name)?.running?.startedAt) ?? nowIso()) });
            if (run.exitCode !== 0) { ok = false; break; }
            await report("Pending");
          }
          for (const c of ok ? mains : []) if (!stop.signal.aborted && !(await pulled(c))) ok = false;
          if (ok && !stop.signal.aborted) {
            const started = nowIso();
            for (const c of mains) states.set(c.name, { running: { startedAt: started } });
            await report("Running", { initialized: true, ready: true });
            const mainRuns = await Promise.all(mains.map((c) => runContainer(c, ctx, client)));
            mainRuns.forEach((run, i) => { runs.push(run); states.set((mains[i] as Container).name, { terminated: terminated(run, started) }); });
          }
        }
        if (!alive) return { key, pod: pod.metadata.name, namespace: pod.metadata.namespace, containers: runs, phase: "Failed", deleted: false };
        // Containers that never ran stay waiting; a running one the deletion stopped was terminated above.
        const succeeded = !stop.signal.aborted && runs.length === inits.length + mains.length && runs.every((x) => x.exitCode === 0);
        const phase = succeeded ? "Succeeded" : "Failed";
        await report(phase, { initialized: runs.length >= inits.length && runs.slice(0, inits.length).every((x) => x.exitCode === 0), ready: false, reason: succeeded ? "PodCompleted" : "PodFailed" });
        if (stop.signal.aborted) await finalDelete(pod);
        return { key, pod: pod.metadata.name, namespace: pod.metadata.namespace, containers: runs, phase, deleted: stop.signal.aborted };
      } finally {
        if (graceTimer) clearTimeout(graceTimer);
        for (const m of mounted) spawnSync("umount", ["-l", m]);
        if (!options.keep) rmSync(root, { recursive: true, force: true });
      }
    })();
    return {
      done,
      update(next: Pod) { pod = next; if (next.metadata.deletionTimestamp) deleting(); },
      gone() { deleting(); },
      kill() { stop.abort(); killAll.abort(); },
    };
  }

  async function kill(): Promise<void> {
    if (!alive) return;
    alive = false;
    podWatch.abort();
    for (const h of live.values()) h.kill();
    await Promise.allSettled([...runs.values()]);
  }

  return {
    name, logs, requests, runs,
    async runsOf(prefix: string) {
      const matching = [...runs].filter(([k]) => k.slice(k.indexOf("/") + 1).startsWith(prefix)).map(([, p]) => p);
      return Promise.all(matching);
    },
    kill,
    async stop() {
      await kill();
      await heartbeat;
      await watching;
      server.closeAllConnections(); // the API server keeps its connections to a kubelet open
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function terminated(run: ContainerRun, startedAt: string): NonNullable<ContainerState["terminated"]> {
  return { exitCode: run.exitCode, reason: run.reason, ...(run.message ? { message: run.message } : {}), startedAt, finishedAt: nowIso() };
}

/** An emptyDir volume: world-writable like the kubelet's, group-owned by the fsGroup (setgid). */
function writeDir(d: string, fsGroup: number): void {
  mkdirSync(d);
  if (asRoot) chownSync(d, 0, fsGroup);
  chmodSync(d, 0o2777);
}

interface RunContext {
  pod: Pod;
  root: string;
  uid: number;
  gid: number;
  volumes: Map<string, string>;
  /** Bind mounts made for the pod (unmounted when it ends). */
  mounted: string[];
  logs: Map<string, string>;
  cgroups: MemoryCgroups | undefined;
  options: TestNodeOptions;
  /** The pod is being deleted: SIGTERM. */
  stop: AbortSignal;
  /** The grace period is over, or the node is going: SIGKILL. */
  kill: AbortSignal;
  secrets: Map<string, Record<string, string>>;
}

async function secretData(client: KubeClient, ctx: RunContext, name: string): Promise<Record<string, string> | undefined> {
  const cached = ctx.secrets.get(name);
  if (cached) return cached;
  try {
    const secret = await client.request<{ data?: Record<string, string> }>("GET", `/api/v1/namespaces/${encodeURIComponent(ctx.pod.metadata.namespace)}/secrets/${encodeURIComponent(name)}`);
    const data = Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, "base64").toString("utf8")]));
    ctx.secrets.set(name, data);
    return data;
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}

async function runContainer(c: Container, ctx: RunContext, client: KubeClient): Promise<ContainerRun> {
  const logKey = `${ctx.pod.metadata.namespace}/${ctx.pod.metadata.name}/${c.name}`;
  const mounts: Array<{ path: string; dir: string }> = [];
  for (const m of c.volumeMounts ?? []) {
    let src = ctx.volumes.get(m.name);
    if (src === undefined) return { name: c.name, exitCode: 128, reason: "StartError", message: `volume ${m.name} is not defined`, log: "" };
    if (m.subPath) src = join(src, m.subPath);
    mounts.push({ path: m.mountPath, dir: m.readOnly ? readOnlyView(src, ctx) : src });
  }
  // Longest mount path first: /ref/x inside /ref maps to its own volume.
  mounts.sort((a, b) => b.path.length - a.path.length);
  const remap = (s: string) => {
    for (const m of mounts) {
      if (s === m.path) return m.dir;
      if (s.startsWith(`${m.path}/`)) return m.dir + s.slice(m.path.length);
    }
    return s;
  };
  const env: Record<string, string> = { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", HOSTNAME: ctx.pod.metadata.name };
  for (const from of c.envFrom ?? []) {
    if (!from.secretRef) continue;
    const data = await secretData(client, ctx, from.secretRef.name);
    if (!data && !from.secretRef.optional) return { name: c.name, exitCode: 128, reason: "CreateContainerConfigError", message: `secret "${from.secretRef.name}" not found`, log: "" };
    Object.assign(env, data ?? {});
  }
  for (const e of c.env ?? []) {
    if (e.value !== undefined) env[e.name] = remap(e.value);
    else if (e.valueFrom?.secretKeyRef) {
      const ref = e.valueFrom.secretKeyRef;
      const v = (await secretData(client, ctx, ref.name))?.[ref.key];
      if (v !== undefined) env[e.name] = v;
      else if (!ref.optional) return { name: c.name, exitCode: 128, reason: "CreateContainerConfigError", message: `secret "${ref.name}" key "${ref.key}" not found`, log: "" };
    } else if (e.valueFrom?.fieldRef) {
      const f = e.valueFrom.fieldRef.fieldPath;
      const v = f === "metadata.name" ? ctx.pod.metadata.name : f === "metadata.namespace" ? ctx.pod.metadata.namespace : f === "spec.nodeName" ? ctx.pod.spec.nodeName : undefined;
      if (v !== undefined) env[e.name] = v;
    }
  }
  const termLog = join(ctx.root, `${c.name}.termination-log`);
  writeFileSync(termLog, "");
  if (asRoot) chownSync(termLog, ctx.uid, ctx.gid);
  let argv: string[];
  if (ctx.options.operonImage && c.image === ctx.options.operonImage && !c.command) {
    if (!ctx.options.operon) throw new Error("test kubelet: `operon` (how to start the operon image) is not set");
    argv = [...ctx.options.operon, ...(c.args ?? []).map(remap), "--termination-log", termLog];
    // stage-in finds reference volumes at /ref/<name> itself (not through an argument): where they are here.
    const refs = Object.fromEntries(mounts.filter((m) => m.path.startsWith(`${REFERENCE_ROOT}/`)).map((m) => [m.path.slice(REFERENCE_ROOT.length + 1), m.dir]));
    if (Object.keys(refs).length > 0) env.OPERON_REF_VOLUMES = JSON.stringify(refs);
  } else {
    argv = [...(c.command ?? []), ...(c.args ?? [])].map((a, i) => (i === 0 ? a : remap(a)));
  }
  if (argv.length === 0) return { name: c.name, exitCode: 128, reason: "StartError", message: "no command (the image's entry point is unknown here)", log: "" };
  if (!executable(argv[0] as string, env.PATH ?? "")) {
    const message = `failed to start: exec: "${argv[0]}": executable file not found in $PATH`;
    ctx.logs.set(logKey, "");
    return { name: c.name, exitCode: 128, reason: "StartError", message, log: "" };
  }
  const cwd = c.workingDir ? remap(c.workingDir) : ctx.root;
  const memoryLimit = c.resources?.limits?.memory;
  const cgroup = memoryLimit && ctx.cgroups ? ctx.cgroups.create(`${ctx.pod.metadata.uid}-${c.name}`, parseQuantity(memoryLimit)) : undefined;
  ctx.logs.set(logKey, "");
  const { code, signal, log, spawnError } = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; log: string; spawnError?: Error }>((resolve) => {
    if (ctx.stop.aborted) { resolve({ code: 143, signal: null, log: "" }); return; }
    ctx.options.onContainerStart?.(ctx.pod.metadata.labels?.["job-name"] ?? ctx.pod.metadata.name, c.name, ctx.pod);
    // In a memory cgroup, the process must be in it before it runs (or forks): a fixed wrapper
    // joins it, then becomes the pod's user and execs the command.
    const [command, args, ids] = cgroup
      ? ["/bin/sh", ["-c", 'echo $$ > "$0" && u="$1" && g="$2" && shift 2 && exec setpriv --reuid="$u" --regid="$g" --clear-groups -- "$@"', cgroup.procs, String(ctx.uid), String(ctx.gid), ...argv], {}]
      : [argv[0] as string, argv.slice(1), asRoot ? { uid: ctx.uid, gid: ctx.gid } : {}];
    const child = spawn(command, args, { cwd, env, ...ids, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    const onData = (d: Buffer) => { out += d.toString("utf8"); ctx.logs.set(logKey, out); };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    const term = () => child.kill("SIGTERM");
    const kill = () => child.kill("SIGKILL");
    ctx.stop.addEventListener("abort", term, { once: true });
    ctx.kill.addEventListener("abort", kill, { once: true });
    child.on("error", (e) => resolve({ code: null, signal: null, log: out, spawnError: e }));
    child.on("close", (exit, sig) => {
      ctx.stop.removeEventListener("abort", term);
      ctx.kill.removeEventListener("abort", kill);
      resolve({ code: exit, signal: sig, log: out });
    });
  });
  const oomKilled = cgroup ? cgroup.oomKilled() : false;
  cgroup?.remove();
  if (spawnError) {
    const message = `failed to start ${argv[0]}: ${spawnError.message}`;
    ctx.logs.set(logKey, `${log}${message}\n`);
    return { name: c.name, exitCode: 128, reason: "StartError", message, log: `${log}${message}\n` };
  }
  const exitCode = code ?? (signal ? 128 + (signal === "SIGTERM" ? 15 : signal === "SIGKILL" ? 9 : 1) : 1);
  const reason = oomKilled && exitCode === 137 ? "OOMKilled" : exitCode === 0 ? "Completed" : "Error";
  let message = readFileSync(termLog, "utf8").slice(0, 4096);
  if (!message && exitCode !== 0 && c.terminationMessagePolicy === "FallbackToLogsOnError") message = log.split("\n").slice(-80).join("\n").slice(-2048);
  return { name: c.name, exitCode, reason, message, log };
}

/** Whether `command` names an executable (a path, or a name found on `path`). */
function executable(command: string, path: string): boolean {
  const can = (p: string) => { try { accessSync(p, constants.X_OK); return true; } catch { return false; } };
  if (command.includes("/")) return can(command);
  return path.split(":").some((d) => d && can(join(d, command)));
}

/** A read-only view of a directory: a read-only bind mount when this process may mount, else the directory itself. */
function readOnlyView(src: string, ctx: RunContext): string {
  if (!asRoot) return src;
  const target = join(ctx.root, `ro-${ctx.mounted.length}`);
  mkdirSync(target);
  const bind = spawnSync("mount", ["--bind", src, target]);
  if (bind.status !== 0) { rmdirSync(target); return src; }
  ctx.mounted.push(target);
  const ro = spawnSync("mount", ["-o", "remount,bind,ro", target]);
  if (ro.status !== 0) throw new Error(`test kubelet: cannot make ${target} read-only: ${String(ro.stderr)}`);
  return target;
}

/** Kubernetes quantity → bytes (memory): 512Mi, 8Gi, 1G, 1000000. */
function parseQuantity(q: string): number {
  const m = /^(\d+(?:\.\d+)?)([KMGTPE]i?|m|k)?$/.exec(q.trim());
  if (!m) throw new Error(`test kubelet: cannot read the quantity ${q}`);
  const n = Number(m[1]);
  const unit = m[2] ?? "";
  const bin: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
  const dec: Record<string, number> = { k: 1e3, K: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18, m: 1e-3 };
  return Math.ceil(n * (bin[unit] ?? dec[unit] ?? 1));
}

interface MemoryCgroup { /** Its `cgroup.procs` file. */ procs: string; oomKilled(): boolean; remove(): void }
interface MemoryCgroups { create(id: string, bytes: number): MemoryCgroup | undefined }

/**
 * Memory cgroups for the containers' `limits.memory`, under this process's own cgroup
 * (cgroup v2 `memory.max`, or v1 `memory.limit_in_bytes`); undefined where none can be made
 * (not root, no writable hierarchy): then limits are not enforced.
 */
function memoryCgroups(): MemoryCgroups | undefined {
  if (!asRoot) return undefined;
  let lines: string[];
  try { lines = readFileSync("/proc/self/cgroup", "utf8").trim().split("\n"); } catch { return undefined; }
  const candidates: Array<{ base: string; v2: boolean }> = [];
  const v1 = lines.map((l) => l.split(":")).find((p) => p[1]?.split(",").includes("memory"));
  if (v1) candidates.push({ base: join("/sys/fs/cgroup/memory", v1[2] ?? "/"), v2: false });
  const v2 = lines.map((l) => l.split(":")).find((p) => p[0] === "0" && p[1] === "");
  if (v2) {
    for (const mnt of ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]) candidates.push({ base: join(mnt, v2[2] ?? "/"), v2: true });
  }
  for (const { base, v2: isV2 } of candidates) {
    const limitFile = isV2 ? "memory.max" : "memory.limit_in_bytes";
    const probe = join(base, `operon-test-kubelet-probe-${process.pid}`);
    try {
      mkdirSync(probe);
      try {
        if (!existsSync(join(probe, limitFile))) continue;
        writeFileSync(join(probe, limitFile), String(64 * 2 ** 20));
      } finally {
        rmdirSync(probe);
      }
    } catch {
      continue;
    }
    return {
      create(id: string, bytes: number) {
        const path = join(base, `operon-test-kubelet-${id}`.slice(0, 200));
        try {
          mkdirSync(path);
          writeFileSync(join(path, limitFile), String(bytes));
        } catch {
          return undefined;
        }
        return {
          procs: join(path, "cgroup.procs"),
          oomKilled() {
            try {
              const text = readFileSync(join(path, isV2 ? "memory.events" : "memory.oom_control"), "utf8");
              return Number(/^oom_kill (\d+)$/m.exec(text)?.[1] ?? 0) > 0;
            } catch {
              return false;
            }
          },
          remove() { try { rmdirSync(path); } catch { /* still busy: left for the system */ } },
        };
      },
    };
  }
  return undefined;
}
