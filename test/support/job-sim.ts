/**
 * Stand-ins for what does not run in the test environment's simulated nodes (docs/testing.md#kwok-stand-ins).
 *
 * `startStageOut`: nothing runs on a kwok node, so no stage-out container uploads a step's
 * declared outputs, and the operator's HEAD check of a completed step would fail. This watches
 * Operon's step pods (label `operon.dev/run`) bound to kwok nodes and does the stage-out
 * container's part: it uploads each output the step's Job declares (annotation
 * `operon.dev/outputs`, under `operon.dev/run-root`; placeholder bytes, not a tool's output)
 * and then marks the pod `kwok.operon.dev/staged-out`, which is what lets kwok's stages
 * (test/support/kwok/stages.yaml) run it to Succeeded — so a pod succeeds only once its outputs
 * are stored, as with the real container. The real Job controller then writes the Job's
 * conditions. A test can instead fail a pod (exit code, reason such as OOMKilled, the failing
 * container) or hold it (it stays Pending, initializing, until released) with `decide`.
 * It does not stand in for stage-out's termination message (no sha256 report): the operator
 * falls back to HEADs, as for a pod whose message is lost.
 */
import { ANNOTATION } from "../../core/kubernetes/pipelinerun.js";
import type { JobObject } from "../../core/kubernetes/jobs.js";
import type { ObjectStore } from "../../core/ports.js";
import { isNotFound, paths, type KubeClient } from "../../adapters/kubernetes/client.js";
import { Informer, type KubeObject } from "../../adapters/kubernetes/informer.js";
import { KWOK_ANNOTATION, KWOK_NODE_ANNOTATION } from "./k8s-env.js";

type Job = JobObject & KubeObject;

interface StepPod extends KubeObject {
  spec?: { nodeName?: string };
  status?: { phase?: string };
}

/** What happens to a step pod on a kwok node. */
export type StageOutDecision =
  /** Upload the Job's declared outputs, then let the pod succeed (after `runMs`, its `kwok.operon.dev/duration`; default the env's 100 ms). */
  | { action: "succeed"; runMs?: number }
  /** The pod fails: `container` (default "tool") ends with `exitCode` (and `reason`, e.g. OOMKilled, and `message`) after `runMs`; nothing is uploaded. */
  | { action: "fail"; exitCode: number; reason?: string; message?: string; container?: string; runMs?: number }
  /** Leave it waiting (Pending, initializing): asked again at `release()`. */
  | { action: "hold" };

export interface StageOut {
  /** When each pod was released (its outputs uploaded, or its failure set), by pod name (ms). */
  released: Map<string, number>;
  /** Pods held now, by name. */
  held(): string[];
  /** Asks `decide` again for every held pod (those that match `filter`, if given). */
  release(filter?: (pod: StepPod) => boolean): void;
  stop(): Promise<void>;
}

export interface StageOutOptions {
  client: KubeClient;
  namespace: string;
  /** Where the outputs go (the operator's store); none: nothing is uploaded, pods are still released. */
  store?: ObjectStore;
  /** Default: every pod succeeds at once. */
  decide?: (pod: StepPod, job: Job) => StageOutDecision | Promise<StageOutDecision>;
  onError?: (e: unknown) => void;
}

/** See the module comment. */
export async function startStageOut(opts: StageOutOptions): Promise<StageOut> {
  const released = new Map<string, number>();
  const handled = new Set<string>(); // pod uids being released or released
  const held = new Map<string, StepPod>();
  const kwokNodes = new Map<string, Promise<boolean>>();
  const jobs = new Map<string, Promise<Job | undefined>>();
  const pending = new Set<Promise<void>>();
  let stopped = false;
  const onError = opts.onError ?? (() => undefined);

  const isKwokNode = (name: string) => {
    let p = kwokNodes.get(name);
    if (!p) {
      p = opts.client.request<{ metadata: { annotations?: Record<string, string> } }>("GET", `/api/v1/nodes/${encodeURIComponent(name)}`)
        .then((n) => n.metadata.annotations?.[KWOK_NODE_ANNOTATION] === "fake", (e: unknown) => { kwokNodes.delete(name); if (isNotFound(e)) return false; throw e; });
      kwokNodes.set(name, p);
    }
    return p;
  };
  const jobOf = (pod: StepPod) => {
    const name = pod.metadata.labels?.["batch.kubernetes.io/job-name"] ?? pod.metadata.labels?.["job-name"] ?? pod.metadata.ownerReferences?.find((o) => o.kind === "Job")?.name;
    if (!name) return Promise.resolve(undefined);
    let p = jobs.get(name);
    if (!p) {
      p = opts.client.request<Job>("GET", `${paths.jobs(opts.namespace)}/${encodeURIComponent(name)}`).catch((e: unknown) => { jobs.delete(name); if (isNotFound(e)) return undefined; throw e; });
      jobs.set(name, p);
    }
    return p;
  };
  const annotate = (pod: StepPod, annotations: Record<string, string>) => opts.client.request("PATCH", `${paths.pods(opts.namespace)}/${encodeURIComponent(pod.metadata.name)}`, {
    patch: "merge",
    body: { metadata: { uid: pod.metadata.uid, annotations } },
  });

  const handle = (pod: StepPod) => {
    const p = (async () => {
      const job = await jobOf(pod);
      if (!job || stopped) { handled.delete(pod.metadata.uid ?? ""); return; }
      const d = opts.decide ? await opts.decide(pod, job) : { action: "succeed" as const };
      if (stopped) return;
      if (d.action === "hold") { held.set(pod.metadata.name, pod); handled.delete(pod.metadata.uid ?? ""); return; }
      const duration: Record<string, string> = d.runMs !== undefined ? { [KWOK_ANNOTATION.duration]: `${d.runMs}ms` } : {};
      if (d.action === "fail") {
        const failure: Record<string, string> = { ...duration, [KWOK_ANNOTATION.exitCode]: String(d.exitCode), [KWOK_ANNOTATION.container]: d.container ?? "tool" };
        if (d.reason) failure[KWOK_ANNOTATION.reason] = d.reason;
        if (d.message) failure[KWOK_ANNOTATION.message] = d.message;
        await annotate(pod, failure);
      } else {
        if (opts.store) {
          const a = job.metadata.annotations ?? {};
          const declared = JSON.parse(a[ANNOTATION.outputs] ?? "[]") as Array<{ path: string; secondary: string[] }>;
          for (const o of declared) {
            for (const path of [o.path, ...o.secondary]) await opts.store.put(`${a[ANNOTATION.runRoot] ?? ""}${path}`, `stage-out stand-in for ${job.metadata.name} (pod ${pod.metadata.name} on a kwok node): ${path}\n`);
          }
        }
        await annotate(pod, { ...duration, [KWOK_ANNOTATION.stagedOut]: "true" });
      }
      released.set(pod.metadata.name, Date.now());
    })().catch((e: unknown) => {
      handled.delete(pod.metadata.uid ?? "");
      if (!(isNotFound(e) || stopped)) onError(e);
    }).finally(() => pending.delete(p));
    pending.add(p);
  };

  const informer = new Informer<StepPod>({
    client: opts.client,
    path: paths.pods(opts.namespace),
    labelSelector: "operon.dev/run",
    onChange: (pod) => {
      if (stopped) return;
      const uid = pod.metadata.uid ?? "";
      const a = pod.metadata.annotations ?? {};
      const gone = informer.get(pod.metadata.name) === undefined || !!pod.metadata.deletionTimestamp;
      if (gone) { held.delete(pod.metadata.name); return; }
      if (handled.has(uid) || held.has(pod.metadata.name) || a[KWOK_ANNOTATION.stagedOut] || a[KWOK_ANNOTATION.exitCode]) return;
      const node = pod.spec?.nodeName;
      if (!node || pod.status?.phase !== "Pending") return;
      handled.add(uid);
      void isKwokNode(node).then((kwok) => { if (kwok) handle(pod); else handled.delete(uid); }, (e: unknown) => { handled.delete(uid); onError(e); });
    },
    onError,
  });
  await informer.start();
  return {
    released,
    held: () => [...held.keys()],
    release(filter) {
      for (const [name, pod] of held) {
        if (filter && !filter(pod)) continue;
        held.delete(name);
        const cur = informer.get(name);
        if (!cur || cur.metadata.uid !== pod.metadata.uid || cur.metadata.deletionTimestamp) continue;
        handled.add(cur.metadata.uid ?? "");
        handle(cur);
      }
    },
    async stop() {
      stopped = true;
      informer.stop();
      await Promise.all([...pending]);
    },
  };
}
