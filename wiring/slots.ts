/**
 * The slots of an organization's compute limit for work outside its runs (renders, viewer
 * preparations) come from the engine's one admission path (engine/admission.ts), in both
 * modes; and the render jobs wired to them.
 */
import type { Registry } from "prom-client";
import type { Clock, ObjectStore, SlotGate } from "../core/ports.js";
import type { Engine } from "../engine/engine.js";
import { RenderJobs } from "../media/render-jobs.js";

/** The slots of an organization's compute limit for work outside its runs (renders, viewer preparations). */
export function organizationSlots(engine: Engine): SlotGate {
  return engine.slots;
}

/** The render jobs of an api-server with an engine: its slots, and (single-server installs) who is gone at start. */
export function createRenderJobs(engine: Engine, store: ObjectStore, clock: Clock, opts: { metrics?: Registry; log?: (m: string) => void } = {}): { jobs: RenderJobs; embedded: boolean } {
  const embedded = engine.mode === "embedded";
  const jobs = new RenderJobs({ store, clock, slots: organizationSlots(engine), ...opts });
  return { jobs, embedded };
}
