/**
 * How work outside a run's steps (renders, viewer preparations) takes a slot of its
 * organization's compute limit, per mode, and the render jobs wired to it.
 */
import type { Registry } from "prom-client";
import type { Clock, ObjectStore, SlotGate } from "../core/ports.js";
import type { Ledger } from "../core/quota.js";
import { renderRunningPrefix } from "../core/layout.js";
import type { Engine } from "../engine/engine.js";
import { RenderJobs } from "../media/render-jobs.js";

const sleep = (ms: number, signal: AbortSignal) => new Promise<void>((resolve, reject) => {
  if (signal.aborted) { reject(new Error("aborted")); return; }
  const t = setTimeout(resolve, ms);
  signal.addEventListener("abort", () => { clearTimeout(t); reject(new Error("aborted")); }, { once: true });
});

/** Embedded mode: the engine's ledger, exactly as a tool run takes a slot (behind steps already waiting). */
export function ledgerSlots(ledger: Ledger): SlotGate {
  return async (org, id, signal) => {
    for (;;) {
      const release = ledger.tryAcquire(org, id);
      if (release) return release;
      await sleep(100, signal);
    }
  };
}

/**
 * Cluster mode: the api-server holds no ledger (the operator does), so a render starts when
 * the organization's running steps (from its PipelineRuns) plus the renders holding a slot
 * (markers any replica can list) are below the limit. Two replicas deciding in the same
 * instant can both start: the operator does not see renders (docs/charts.md says so).
 */
export function clusterSlots(engine: Pick<Engine, "runs" | "ledger">, store: ObjectStore): SlotGate {
  return async (org, id, signal) => {
    for (;;) {
      const runs = await engine.runs.list({ organization: org, status: "running" });
      const steps = runs.reduce((n, r) => n + r.steps.filter((s) => s.status === "running").length, 0);
      const renders = (await store.list(renderRunningPrefix(org), { limit: 1000 })).items.filter((i) => !i.key.endsWith(`/${id}`)).length;
      if (steps + renders < engine.ledger.limit(org)) return () => undefined;
      await sleep(1000, signal);
    }
  };
}

/** The slots of an organization's compute limit for work outside its runs (renders, viewer preparations). */
export function organizationSlots(engine: Engine, store: ObjectStore): SlotGate {
  return engine.mode === "cluster" ? clusterSlots(engine, store) : ledgerSlots(engine.ledger);
}

/** The render jobs of an api-server with an engine: its slots, and (single-server installs) who is gone at start. */
export function createRenderJobs(engine: Engine, store: ObjectStore, clock: Clock, opts: { metrics?: Registry; log?: (m: string) => void } = {}): { jobs: RenderJobs; embedded: boolean } {
  const embedded = engine.mode === "embedded";
  const jobs = new RenderJobs({ store, clock, slots: organizationSlots(engine, store), ...opts });
  return { jobs, embedded };
}
