/**
 * Argo Workflows on the test control plane, for the cluster comparison (bench/peers/cluster.bench.ts,
 * issue 19): its CRDs and its workflow-controller, built from its Go module by
 * bench/peers/peers-deps.sh, run out of the cluster against the same kube-apiserver, controller
 * manager, scheduler and kwok nodes as Operon's operator, with Argo's default configuration
 * except a metrics port (Argo's default 9090 may be taken on a shared machine).
 *
 * Nothing runs on a kwok node, so nothing runs Argo's executor (argoexec) either; its wait
 * container reports each step's outputs through a WorkflowTaskResult, and the controller does
 * not treat a step as done before that report is marked complete. `startExecutorStandIn` does
 * the wait container's API calls in its place (create, report outputs, mark complete: the three
 * writes argoexec makes for a step without outputs), as test/support/job-sim.ts `startStageOut`
 * does the upload of Operon's stage-out container; then it releases the pod to kwok, which runs
 * it for the set duration. Argo's pods carry the label `operon.dev/run` only so that kwok's
 * stages (test/support/kwok/stages.yaml) hold them until the stand-in released them, exactly
 * as they hold Operon's.
 */
import { existsSync, readdirSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import type { KubeClient } from "../../adapters/kubernetes/client.js";
import { KWOK_ANNOTATION, type TestEnv } from "../../test/support/k8s-env.js";
import { freePorts } from "../../test/support/minio.js";
import { sleep, startController, startPodReleaser, type ControllerProc, type PodReleaser, type ReleasedPod } from "../cluster-harness.js";

/** Pinned in bench/peers/peers-deps.sh too. */
export const ARGO_VERSION = "v3.7.9";
const ARGO = "argoproj.io/v1alpha1";
const LABEL_WORKFLOW = "workflows.argoproj.io/workflow";
const LABEL_OUTPUTS_COMPLETED = "workflows.argoproj.io/report-outputs-completed";
const ANNOTATION_NODE_ID = "workflows.argoproj.io/node-id";
export const ANNOTATION_NODE_NAME = "workflows.argoproj.io/node-name";
/** The controller's own namespace (its ConfigMap and Lease), as Argo's install manifests name it. */
const ARGO_NS = "argo";
/** The per-namespace ConfigMap holding the step semaphore. */
const LIMITS = "bench-limits";

/** The folder holding `workflow-controller` and `crds/`, or undefined when not built yet. */
export function argoDir(): string | undefined {
  const dir = join(process.env.OPERON_CACHE_DIR ?? join(homedir(), ".cache", "operon"), `argo-workflows-${ARGO_VERSION}`);
  return existsSync(join(dir, "workflow-controller")) && existsSync(join(dir, "crds")) ? dir : undefined;
}

export type ArgoController = ControllerProc;

/**
 * What an Argo user tunes for many short steps (Argo's "environment variables" and scaling
 * docs): DEFAULT_REQUEUE_TIME, the fixed delay before a workflow is looked at again after one
 * of its pods changed (default 10 s; its source calls 1 s the floor), and the client's rate
 * limit (default 20 QPS, burst 30).
 */
export interface ArgoTuning { requeue: string; qps: number; burst: number }
/** Tuned for this workload: the requeue floor, and the rate limit kube-controller-manager has here. */
export const ARGO_TUNED: ArgoTuning = { requeue: "1s", qps: 500, burst: 1000 };

/**
 * Installs Argo's CRDs, its namespace and ConfigMap, a semaphore ConfigMap (`steps: <limit>`)
 * in each of `namespaces`, and starts the workflow-controller; resolves once it leads.
 * Without `tuning`, Argo's defaults.
 */
export async function startArgo(env: TestEnv, opts: { namespaces: string[]; limit: number; tuning?: ArgoTuning }): Promise<ArgoController> {
  const dir = argoDir();
  if (!dir) throw new Error("Argo Workflows is not built: run bash bench/peers/peers-deps.sh (make bench-peers does)");
  const crds = readdirSync(join(dir, "crds")).filter((f) => f.endsWith(".yaml")).map((f) => join(dir, "crds", f));
  const must = async (args: string[], input?: string) => {
    const r = await env.kubectl(args, input === undefined ? undefined : { input });
    if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr.trim()}`);
    return r.stdout;
  };
  await must(["apply", "--server-side", ...crds.flatMap((f) => ["-f", f])]);
  await must(["wait", "--for=condition=Established", "--timeout=60s", "crd/workflows.argoproj.io", "crd/workflowtaskresults.argoproj.io"]);
  const [metricsPort] = await freePorts(1) as [number];
  const docs = [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: ARGO_NS } },
    // Argo's defaults, but the metrics server's port (and plain HTTP: nothing here has its certificate).
    { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "workflow-controller-configmap", namespace: ARGO_NS }, data: { metricsConfig: `port: ${metricsPort}\nsecure: false\n` } },
    ...opts.namespaces.map((ns) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: LIMITS, namespace: ns }, data: { steps: String(opts.limit) } })),
  ];
  await must(["apply", "--server-side", "-f", "-"], docs.map((d) => JSON.stringify(d)).join("\n---\n"));
  const args = [`--kubeconfig=${env.kubeconfigPath}`, `--namespace=${ARGO_NS}`, "--loglevel=warn",
    ...(opts.tuning ? [`--qps=${opts.tuning.qps}`, `--burst=${opts.tuning.burst}`] : [])];
  const c = startController(join(dir, "workflow-controller"), args, { LEADER_ELECTION_IDENTITY: "bench-argo", ...(opts.tuning ? { DEFAULT_REQUEUE_TIME: opts.tuning.requeue } : {}) });
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (c.exit()) throw new Error(`Argo's workflow-controller exited (${c.exit()}):\n${c.tail()}`);
    const r = await env.kubectl(["get", "lease", "workflow-controller", "-n", ARGO_NS, "-o", "jsonpath={.spec.holderIdentity}"]);
    if (r.code === 0 && r.stdout.trim() === "bench-argo") return c;
    if (Date.now() > deadline) { await c.stop(); throw new Error(`Argo's workflow-controller did not lead within 90 s:\n${c.tail()}`); }
    await sleep(250);
  }
}

/**
 * The bench DAG as an Argo Workflow: tasks a → (b, c) → d → e, each a container step holding
 * the namespace's semaphore (`bench-limits`/`steps`: at most `limit` steps of the namespace
 * running at once, what an Argo user writes for a per-team step limit; `namespaceParallelism`
 * would count whole workflows). Its pods run `podMs` on a kwok node.
 */
export function argoWorkflow(ns: string, name: string, podMs: number): Record<string, unknown> {
  const task = (n: string, deps?: string[]) => ({ name: n, template: "step", ...(deps ? { dependencies: deps } : {}) });
  return {
    apiVersion: ARGO, kind: "Workflow",
    metadata: { name, namespace: ns },
    spec: {
      entrypoint: "main",
      podMetadata: { labels: { "operon.dev/run": "argo" }, annotations: { [KWOK_ANNOTATION.duration]: `${podMs}ms` } },
      templates: [
        { name: "main", dag: { tasks: [task("a"), task("b", ["a"]), task("c", ["a"]), task("d", ["b", "c"]), task("e", ["d"])] } },
        {
          name: "step",
          synchronization: { semaphores: [{ configMapKeyRef: { name: LIMITS, key: "steps" } }] },
          container: { image: "busybox:1.36", command: ["true"] },
        },
      ],
    },
  };
}

/**
 * Argo's wait container, in its place: for every workflow pod bound to a node, the three
 * WorkflowTaskResult writes argoexec makes (create with outputs incomplete, report the outputs,
 * mark complete) through `client`, then the pod is released to kwok (bench/cluster-harness.ts
 * startPodReleaser, through `harness`: a write Argo does not make), which runs it for its duration.
 */
export async function startExecutorStandIn(opts: { client: KubeClient; harness: KubeClient; onError: (e: unknown) => void }): Promise<PodReleaser> {
  const { client } = opts;
  const results = (ns: string) => `/apis/${ARGO}/namespaces/${ns}/workflowtaskresults`;
  const reportOutputs = async (pod: ReleasedPod) => {
    const ns = pod.metadata.namespace ?? "default";
    const wf = pod.metadata.labels?.[LABEL_WORKFLOW] ?? "";
    const nodeId = pod.metadata.annotations?.[ANNOTATION_NODE_ID];
    const owner = pod.metadata.ownerReferences?.find((o) => o.kind === "Workflow");
    if (!nodeId || !owner) throw new Error(`workflow pod ${ns}/${pod.metadata.name} has no node id or Workflow owner`);
    await client.request("POST", results(ns), {
      body: {
        apiVersion: ARGO, kind: "WorkflowTaskResult",
        metadata: { name: nodeId, labels: { [LABEL_WORKFLOW]: wf, [LABEL_OUTPUTS_COMPLETED]: "false" }, ownerReferences: [{ apiVersion: ARGO, kind: "Workflow", name: owner.name, uid: owner.uid }] },
      },
    });
    await client.request("PATCH", `${results(ns)}/${encodeURIComponent(nodeId)}`, { patch: "merge", body: { outputs: {} } });
    await client.request("PATCH", `${results(ns)}/${encodeURIComponent(nodeId)}`, { patch: "merge", body: { metadata: { labels: { [LABEL_OUTPUTS_COMPLETED]: "true" } } } });
  };
  return startPodReleaser({ harness: opts.harness, labelSelector: LABEL_WORKFLOW, before: reportOutputs, onError: opts.onError });
}
