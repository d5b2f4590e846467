/** Reads the engine's operon_step_start_latency_seconds histogram (prom-client), for tests. */
import type { Registry } from "prom-client";

type Slot = "free" | "waited";
type Kind = "first" | "dependent";

export interface StepStartCounts {
  /** Observations by slot label, first and dependent steps together. */
  free: number;
  waited: number;
  count(slot: Slot, step: Kind): number;
  /** Observations at or under `le` seconds (both kinds unless `step` is given). */
  atMost(slot: Slot, le: number, step?: Kind): number;
  /** Sum of the observed latencies in seconds (both kinds unless `step` is given). */
  sum(slot: Slot, step?: Kind): number;
}

export async function stepStartCounts(registry: Registry): Promise<StepStartCounts> {
  const metric = registry.getSingleMetric("operon_step_start_latency_seconds");
  if (!metric) throw new Error("operon_step_start_latency_seconds is not registered");
  // A histogram's values carry the series name (_bucket, _sum, _count); the generic type does not say so.
  const values = (await metric.get()).values as Array<{ value: number; labels: Record<string, string | number | undefined>; metricName?: string }>;
  const total = (suffix: string, slot: Slot, step?: Kind, le?: number) => values
    .filter((v) => v.metricName === `operon_step_start_latency_seconds${suffix}` && v.labels.slot === slot && (!step || v.labels.step === step) && (le === undefined || Number(v.labels.le) === le))
    .reduce((a, v) => a + v.value, 0);
  return {
    free: total("_count", "free"),
    waited: total("_count", "waited"),
    count: (slot, step) => total("_count", slot, step),
    atMost: (slot, le, step) => total("_bucket", slot, step, le),
    sum: (slot, step) => total("_sum", slot, step),
  };
}
