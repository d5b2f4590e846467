/**
 * Plays the part of the kubelet and the Job controller in tests and benchmarks, which run a
 * real kube-apiserver but no nodes (DESIGN §10): it finishes a step Job the way its pod
 * would — the stage-out helper's uploads of the declared outputs to object storage, then
 * the Job's status patched to Complete (or Failed) through the status subresource, exactly
 * as envtest users do. `startJobSimulator` does that for every Job as soon as it appears.
 */
import { ANNOTATION } from "../../core/kubernetes/pipelinerun.js";
import type { JobObject } from "../../core/kubernetes/jobs.js";
import type { ObjectStore } from "../../core/ports.js";
import { paths, type KubeClient } from "../../adapters/kubernetes/client.js";
import { Informer, type KubeObject } from "../../adapters/kubernetes/informer.js";

type Job = JobObject & KubeObject;

/** Now, as Kubernetes writes times (RFC 3339, whole seconds). */
export const nowIso = () => new Date().toISOString().replace(/\.\d{3}Z$/, "Z");

/** Uploads what the step declared (as stage-out would), then marks the Job Complete. */
export async function completeJob(client: KubeClient, namespace: string, job: Job, store?: ObjectStore): Promise<void> {
  if (store) {
    const a = job.metadata.annotations ?? {};
    const declared = JSON.parse(a[ANNOTATION.outputs] ?? "[]") as Array<{ path: string; secondary: string[] }>;
    for (const o of declared) {
      for (const path of [o.path, ...o.secondary]) await store.put(`${a[ANNOTATION.runRoot] ?? ""}${path}`, `simulated output of ${job.metadata.name}: ${path}\n`);
    }
  }
  const t = nowIso();
  await patchStatus(client, namespace, job.metadata.name, {
    startTime: job.status?.startTime ?? t,
    completionTime: t,
    succeeded: 1,
    active: 0,
    ready: 0,
    terminating: 0,
    uncountedTerminatedPods: {},
    conditions: [
      { type: "SuccessCriteriaMet", status: "True", reason: "CompletionsReached", message: "Reached expected number of succeeded pods", lastProbeTime: t, lastTransitionTime: t },
      { type: "Complete", status: "True", reason: "CompletionsReached", message: "Reached expected number of succeeded pods", lastProbeTime: t, lastTransitionTime: t },
    ],
  });
}

/** Marks the Job Failed the way the Job controller does after a failed pod (backoffLimit 0). */
export async function failJob(client: KubeClient, namespace: string, job: Job, reason = "BackoffLimitExceeded", message = "Job has reached the specified backoff limit"): Promise<void> {
  const t = nowIso();
  await patchStatus(client, namespace, job.metadata.name, {
    startTime: job.status?.startTime ?? t,
    failed: 1,
    active: 0,
    ready: 0,
    terminating: 0,
    uncountedTerminatedPods: {},
    conditions: [
      { type: "FailureTarget", status: "True", reason, message, lastProbeTime: t, lastTransitionTime: t },
      { type: "Failed", status: "True", reason, message, lastProbeTime: t, lastTransitionTime: t },
    ],
  });
}

/** Marks the Job started (one active pod), as the Job controller would. */
export async function startJob(client: KubeClient, namespace: string, job: Job): Promise<void> {
  await patchStatus(client, namespace, job.metadata.name, { startTime: nowIso(), active: 1, ready: 0, terminating: 0 });
}

async function patchStatus(client: KubeClient, namespace: string, name: string, status: Record<string, unknown>): Promise<void> {
  await client.request("PATCH", `${paths.jobs(namespace)}/${encodeURIComponent(name)}/status`, { patch: "merge", body: { status } });
}

export interface JobSimulator {
  /** Jobs created so far (name → first seen, ms). */
  seen: Map<string, number>;
  /** When the simulator's Complete patch was acknowledged, by Job name (ms). */
  completedAt: Map<string, number>;
  /** Most Jobs of one organization active at once, as the simulator saw them. */
  maxActivePerOrg: Map<string, number>;
  /** Jobs active now, per organization. */
  activeNow(org: string): number;
  /** Starts completing Jobs (those held while paused first). */
  resume(): void;
  stop(): Promise<void>;
}

/**
 * Completes every step Job as soon as it appears (after `delayMs`), recording when each was
 * first seen and the most Jobs active per organization at any moment.
 */
export async function startJobSimulator(opts: { client: KubeClient; namespace: string; store?: ObjectStore; delayMs?: number; paused?: boolean; onError?: (e: unknown) => void }): Promise<JobSimulator> {
  const seen = new Map<string, number>();
  const completedAt = new Map<string, number>();
  const done = new Set<string>();
  const active = new Map<string, Set<string>>();
  const maxActivePerOrg = new Map<string, number>();
  const pending = new Set<Promise<void>>();
  let stopped = false;
  let paused = opts.paused ?? false;
  const held: Job[] = [];
  const complete = (job: Job) => {
    const name = job.metadata.name;
    const p = (async () => {
      if (opts.delayMs) await new Promise((r) => setTimeout(r, opts.delayMs));
      if (stopped) return;
      await completeJob(opts.client, opts.namespace, job, opts.store);
      completedAt.set(name, Date.now());
    })().catch((e: unknown) => opts.onError?.(e)).finally(() => pending.delete(p));
    pending.add(p);
  };
  const informer = new Informer<Job>({
    client: opts.client,
    path: paths.jobs(opts.namespace),
    labelSelector: "operon.dev/run",
    onChange: (job) => {
      const name = job.metadata.name;
      const org = job.metadata.annotations?.[ANNOTATION.org] ?? "";
      const finished = job.status?.conditions?.some((c) => (c.type === "Complete" || c.type === "Failed") && c.status === "True") || !!job.metadata.annotations?.[ANNOTATION.stopped];
      const set = active.get(org) ?? new Set<string>();
      active.set(org, set);
      if (finished) { set.delete(name); return; }
      if (seen.has(name)) return;
      seen.set(name, Date.now());
      set.add(name);
      maxActivePerOrg.set(org, Math.max(maxActivePerOrg.get(org) ?? 0, set.size));
      if (done.has(name) || stopped) return;
      done.add(name);
      if (paused) held.push(job); else complete(job);
    },
    ...(opts.onError ? { onError: opts.onError } : {}),
  });
  await informer.start();
  return {
    seen,
    completedAt,
    maxActivePerOrg,
    activeNow: (org) => active.get(org)?.size ?? 0,
    resume() {
      paused = false;
      for (const job of held.splice(0)) complete(job);
    },
    async stop() {
      stopped = true;
      informer.stop();
      await Promise.all([...pending]);
    },
  };
}
