/**
 * Tekton Pipelines, a peer of the cluster comparison (issue 19): its real controller, built from
 * its Go module by bench/peers/peers-deps.sh (only `make bench-peers` builds it), run
 * out-of-cluster against the test control plane (test/support/k8s-env.ts), so that the same
 * five-step DAG runs through Operon's operator and through Tekton on the same apiserver,
 * scheduler and kwok nodes.
 *
 * What it takes to run Tekton's controller without its webhook and outside a pod:
 *  - the CRDs of the release (config/300-crds) without their conversion webhooks (strategy
 *    None): the webhook server that would convert v1beta1 <-> v1 does not run here, and only v1
 *    objects are written and read (the storage version of PipelineRun, TaskRun, Pipeline, Task).
 *    No defaulting/validating admission webhook either: the reconcilers call SetDefaults
 *    themselves, and the runs made here are valid.
 *  - the namespace tekton-pipelines (SYSTEM_NAMESPACE) and the ConfigMaps the controller watches
 *    (a missing one is fatal at start), all empty so every setting is the release default, except
 *    config-observability's `metrics-protocol: prometheus` as the release ships it.
 *  - the image flags (all required, none pulled: nothing runs on a kwok node); its probe,
 *    profiling and Prometheus servers on free ports instead of 8080/8008/9090 (PROBES_PORT,
 *    PROFILING_PORT, METRICS_PROMETHEUS_PORT), but knative's own health-probe server always binds
 *    :8080 (not configurable: the controller stops if it cannot), so port 8080 must be free and
 *    only one Tekton controller can run on the machine at a time; leader election on as in the
 *    release (one replica holds every bucket).
 *  - a ServiceAccount `default` in every namespace a run uses: Tekton reads it to build the pod
 *    (credentials), and the test control plane runs no service-account controller.
 *  - step commands set explicitly: a step without `command` makes Tekton fetch the image's
 *    entrypoint from its registry, which is not reachable here.
 *
 * Concurrency: Tekton has no limit of its own; the usual answer is a ResourceQuota `pods: N` per
 * namespace (it counts non-terminal pods). A TaskRun whose pod creation is refused for exceeded
 * quota stays Running (reason ExceededResourceQuota) and is retried by the controller after a
 * fixed one minute (pkg/reconciler/taskrun, handlePodCreationError), or sooner when the TaskRun
 * itself changes; nothing wakes it when a quota slot frees. The quota needs kube-controller-manager's
 * resourcequota controller, which k8s-env.ts does not run: see startQuotaController.
 *
 * kubectl: `pipelineruns` alone names Operon's own CRD in the test env (crds/pipelinerun.yaml);
 * say `pipelineruns.tekton.dev` and `taskruns.tekton.dev` (TEKTON_RESOURCES).
 */
import { accessSync, constants, readdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { homedir, hostname } from "node:os";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import type { TestEnv } from "../../test/support/k8s-env.js";
import { freePorts } from "../../test/support/minio.js";
import { sleep, startController, type ControllerProc } from "../cluster-harness.js";

export const TEKTON_VERSION = "v1.15.0";
/** SYSTEM_NAMESPACE: where the controller reads its ConfigMaps and holds its leader-election Leases. */
export const TEKTON_NAMESPACE = "tekton-pipelines";
/** The annotation kwok's stages read for how long a pod runs (test/support/kwok/stages.yaml). */
const KWOK_DURATION = "kwok.operon.dev/duration";

/** Labels Tekton puts on every TaskRun and its pod: which PipelineRun, which of its tasks. */
export const TEKTON_LABELS = {
  pipelineRun: "tekton.dev/pipelineRun",
  pipelineTask: "tekton.dev/pipelineTask",
  taskRun: "tekton.dev/taskRun",
} as const;

/** Fully qualified resource names for kubectl (`pipelineruns` alone is Operon's CRD here). */
export const TEKTON_RESOURCES = { pipelineRuns: "pipelineruns.tekton.dev", taskRuns: "taskruns.tekton.dev" } as const;

const cacheDir = () => process.env.OPERON_CACHE_DIR ?? join(homedir(), ".cache", "operon");
const tektonDir = () => join(cacheDir(), `tekton-pipeline-${TEKTON_VERSION}`);

/** The controller binary peers-deps.sh built, or undefined when it (or its CRDs) is missing. */
export function tektonAvailable(): string | undefined {
  const binary = join(tektonDir(), "controller");
  try {
    accessSync(binary, constants.X_OK);
    accessSync(join(tektonDir(), "crds"), constants.R_OK);
    return binary;
  } catch {
    return undefined;
  }
}

/** The release's CRDs, with conversion strategy None (no webhook server runs here). */
function tektonCrds(): Array<Record<string, unknown>> {
  const dir = join(tektonDir(), "crds");
  const crds: Array<Record<string, unknown>> = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".yaml")).sort()) {
    for (const doc of parseAllDocuments(readFileSync(join(dir, file), "utf8"))) {
      const crd = doc.toJS() as { kind?: string; spec?: Record<string, unknown> } | null;
      if (crd?.kind !== "CustomResourceDefinition" || !crd.spec) continue;
      crd.spec.conversion = { strategy: "None" };
      crds.push(crd as Record<string, unknown>);
    }
  }
  return crds;
}

/** ConfigMaps the controller watches (names as the release's Deployment sets them), release defaults. */
const CONFIG_MAPS: Record<string, Record<string, string>> = {
  "config-defaults": {},
  "feature-flags": {},
  "config-events": {},
  "config-leader-election-controller": {},
  "config-logging": {},
  "config-observability": { "metrics-protocol": "prometheus" },
  "config-spire": {},
  "config-tracing": {},
  "config-wait-exponential-backoff": {},
  "config-registry-cert": {},
};

/** A ServiceAccount `default` in `ns`: what a cluster's service-account controller would create. */
function defaultServiceAccount(ns: string): object {
  return { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "default", namespace: ns } };
}

export type TektonController = ControllerProc;

/**
 * kube-controller-manager's resourcequota controller alone, a second process of the env's own
 * binary. Without it a ResourceQuota limits nothing: the apiserver's quota admission enforces only
 * what the controller has copied into `status.hard`, and only the controller lowers `status.used`
 * when pods end. test/support/k8s-env.ts does not run it (CONTROLLERS); once it does
 * ("resourcequota-controller"), this is not needed. Resolves once running (SIGTERM via stop()).
 */
export async function startQuotaController(env: TestEnv): Promise<TektonController> {
  const binary = join(env.binDir, "kube-controller-manager");
  const [port] = await freePorts(1) as [number];
  const proc = startController(binary, [
    `--kubeconfig=${env.kubeconfigPath}`,
    "--bind-address=127.0.0.1",
    `--secure-port=${port}`, // a self-signed serving certificate, in memory
    "--leader-elect=false",
    "--controllers=resourcequota-controller",
    "--kube-api-qps=500",
    "--kube-api-burst=1000",
    "--profiling=false",
  ], {});
  await sleep(500);
  if (proc.exit()) throw new Error(`resourcequota controller exited (${proc.exit()}):\n${proc.tail()}`);
  return proc;
}

async function mustKubectl(env: TestEnv, args: string[], input?: string): Promise<string> {
  const r = await env.kubectl(args, input === undefined ? undefined : { input });
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr.trim() || r.stdout.trim()}`);
  return r.stdout;
}

const list = (items: object[]) => JSON.stringify({ apiVersion: "v1", kind: "List", items });

/** What a Tekton user raises for many short steps: the API client's rate limit and the workers per reconciler. */
export interface TektonTuning { kubeApiQps: number; kubeApiBurst: number; threadsPerController: number }
/** Tuned for this workload (first measured here: 100 runs in 209 s with the defaults, 91 s tuned). */
export const TEKTON_TUNED: TektonTuning = { kubeApiQps: 250, kubeApiBurst: 500, threadsPerController: 16 };

export interface TektonOptions {
  /** Namespaces the runs use: each gets a `default` ServiceAccount (the namespace is created when missing). */
  namespaces: string[];
  log?: (m: string) => void;
  /** How long to wait for the controller to lead (default 60 s). */
  startTimeoutMs?: number;
  /**
   * Client-side rate limit of the controller's API client, its `-kube-api-qps`/`-kube-api-burst`
   * flags, which cmd/controller doubles (two controllers share the client). Unset: the release
   * default, 5/10 doubled twice = 20 requests/s, burst 20, which bounds its throughput at a few
   * TaskRuns per second (each takes about eight requests).
   */
  kubeApiQps?: number;
  kubeApiBurst?: number;
  /** Workers per reconciler, `-threads-per-controller` (release default 2). */
  threadsPerController?: number;
}

/**
 * Installs Tekton's CRDs, its namespace and ConfigMaps, a `default` ServiceAccount in each of
 * `namespaces` (created when missing), then starts the controller against `env.kubeconfigPath`.
 * Resolves once the controller holds the leader-election Leases of its TaskRun and PipelineRun
 * reconcilers (it reconciles from then on). The process gets SIGKILL if ours dies (setpriv).
 */
export async function startTekton(env: TestEnv, opts: TektonOptions): Promise<TektonController> {
  const binary = tektonAvailable();
  if (!binary) throw new Error(`Tekton ${TEKTON_VERSION} is not built: run bench/peers/peers-deps.sh (make bench-peers)`);
  const log = opts.log ?? (() => undefined);

  const crds = tektonCrds();
  // Server-side: the CRDs are too large for client-side apply's last-applied annotation.
  await mustKubectl(env, ["apply", "--server-side", "--force-conflicts", "-f", "-"], list(crds));
  const names = crds.map((c) => `crd/${(c.metadata as { name: string }).name}`);
  await mustKubectl(env, ["wait", "--for=condition=Established", "--timeout=60s", ...names]);

  const namespaces = [TEKTON_NAMESPACE, ...opts.namespaces];
  const setup: object[] = namespaces.map((ns) => ({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } }));
  for (const ns of opts.namespaces) setup.push(defaultServiceAccount(ns));
  for (const [name, data] of Object.entries(CONFIG_MAPS)) {
    setup.push({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace: TEKTON_NAMESPACE }, data });
  }
  await mustKubectl(env, ["apply", "-f", "-"], list(setup));
  log(`tekton: ${crds.length} CRDs, ${Object.keys(CONFIG_MAPS).length} ConfigMaps, ${opts.namespaces.length} namespaces ready`);

  const [probes, profiling, metrics] = await freePorts(3) as [number, number, number];
  // knative's sharedmain also serves health probes on a fixed :8080 (injection.HealthCheckDefaultPort,
  // no flag or env to move it); when that port is taken the controller shuts itself down.
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.once("error", () => reject(new Error("tekton controller: port 8080 is in use; knative's health-probe server in the controller needs it (fixed, not configurable)")));
    probe.listen(8080, () => probe.close(() => resolve()));
  });
  // Leader-election identity: knative uses `<hostname>_<uuid>`, one per reconciler.
  const identity = `${hostname()}_`;
  const childEnv: Record<string, string> = {
    SYSTEM_NAMESPACE: TEKTON_NAMESPACE,
    POD_NAME: "tekton-pipelines-controller-bench", // only its log lines' knative.dev/pod
    KUBERNETES_MIN_VERSION: "v1.28.0",
    CONFIG_DEFAULTS_NAME: "config-defaults",
    CONFIG_LOGGING_NAME: "config-logging",
    CONFIG_OBSERVABILITY_NAME: "config-observability",
    CONFIG_FEATURE_FLAGS_NAME: "feature-flags",
    CONFIG_LEADERELECTION_NAME: "config-leader-election-controller",
    CONFIG_SPIRE: "config-spire",
    METRICS_DOMAIN: "tekton.dev/pipeline",
    PROBES_PORT: String(probes), // Tekton's own probe server (cmd/controller); knative's stays on 8080
    PROFILING_PORT: String(profiling),
    METRICS_PROMETHEUS_PORT: String(metrics),
    METRICS_PROMETHEUS_HOST: "127.0.0.1",
  };
  // Any image names: nothing pulls or runs them on a kwok node.
  const args = [
    "-kubeconfig", env.kubeconfigPath,
    "-entrypoint-image", "tekton/entrypoint:bench",
    "-nop-image", "tekton/nop:bench",
    "-sidecarlogresults-image", "tekton/sidecarlogresults:bench",
    "-workingdirinit-image", "tekton/workingdirinit:bench",
    "-shell-image", "busybox",
    "-shell-image-win", "powershell:nanoserver",
    ...(opts.kubeApiQps ? ["-kube-api-qps", String(opts.kubeApiQps)] : []),
    ...(opts.kubeApiBurst ? ["-kube-api-burst", String(opts.kubeApiBurst)] : []),
    ...(opts.threadsPerController ? ["-threads-per-controller", String(opts.threadsPerController)] : []),
  ];
  const proc = startController(binary, args, childEnv);
  const { tail, stop } = proc;

  // Working = it holds the Leases of the TaskRun and PipelineRun reconcilers (one bucket each by default).
  const deadline = Date.now() + (opts.startTimeoutMs ?? 60_000);
  const started = Date.now();
  for (;;) {
    if (proc.exit()) throw new Error(`tekton controller exited (${proc.exit()}):\n${tail()}`);
    const r = await env.kubectl(["get", "leases", "-n", TEKTON_NAMESPACE, "-o", "json"]);
    if (r.code === 0) {
      const leases = (JSON.parse(r.stdout) as { items: Array<{ metadata: { name: string }; spec?: { holderIdentity?: string } }> }).items;
      const held = (kind: string) => leases.some((l) => l.metadata.name.includes(`reconciler.${kind}.reconciler`) && l.spec?.holderIdentity?.startsWith(identity));
      if (held("taskrun") && held("pipelinerun")) break;
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`tekton controller: no leader Leases after ${opts.startTimeoutMs ?? 60_000} ms:\n${tail()}`);
    }
    await sleep(250);
  }
  log(`tekton: controller ${TEKTON_VERSION} pid ${proc.pid} leading after ${Date.now() - started} ms`);
  return proc;
}

/**
 * A Tekton v1 PipelineRun of five tasks, a → (b, c) → d → e, each one step that runs `true`
 * (command set: no registry lookup of the image's entrypoint). The taskSpec's metadata
 * annotations go to its TaskRun and from there to the pod, so kwok runs each pod `podMs`.
 */
export function tektonPipelineRun(ns: string, name: string, podMs: number): object {
  const task = (taskName: string, runAfter: string[]) => ({
    name: taskName,
    ...(runAfter.length ? { runAfter } : {}),
    taskSpec: {
      // operon.dev/run: kwok's stages hold the pod until the bench releases it, as they hold every system's (cluster-harness.ts startPodReleaser).
      metadata: { labels: { "operon.dev/run": "tekton" }, annotations: { [KWOK_DURATION]: `${podMs}ms` } },
      steps: [{ name: "run", image: "busybox", command: ["true"] }],
    },
  });
  return {
    apiVersion: "tekton.dev/v1",
    kind: "PipelineRun",
    metadata: { name, namespace: ns },
    spec: {
      pipelineSpec: {
        tasks: [task("a", []), task("b", ["a"]), task("c", ["a"]), task("d", ["b", "c"]), task("e", ["d"])],
      },
      taskRunTemplate: { serviceAccountName: "default", podTemplate: { nodeSelector: { type: "kwok" } } },
    },
  };
}

/**
 * What a namespace needs to run Tekton with at most `limit` step pods at once: its `default`
 * ServiceAccount and a ResourceQuota `pods: limit` (non-terminal pods; Tekton has no limit of
 * its own). Apply with `kubectl apply -f -` (a v1 List of these).
 */
export function tektonNamespaceSetup(ns: string, limit: number): object[] {
  return [
    defaultServiceAccount(ns),
    { apiVersion: "v1", kind: "ResourceQuota", metadata: { name: "step-pods", namespace: ns }, spec: { hard: { pods: String(limit) } } },
  ];
}

/** A PipelineRun's outcome from its `Succeeded` condition: "True", "False", or undefined while it runs. */
export function tektonRunDone(pr: { status?: { conditions?: Array<{ type: string; status: string }> } }): "True" | "False" | undefined {
  const c = pr.status?.conditions?.find((x) => x.type === "Succeeded");
  return c?.status === "True" || c?.status === "False" ? c.status : undefined;
}
