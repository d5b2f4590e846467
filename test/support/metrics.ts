/**
 * Metrics in tests: the engine's operon_step_start_latency_seconds histogram (prom-client),
 * and whole /metrics expositions (promtool, samples, naming rules).
 */
import { spawnSync } from "node:child_process";
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

/* ------------------------------------------------------------------ whole expositions */

/** The promtool the tests run (Debian's prometheus package), or PROMTOOL. */
export const PROMTOOL = process.env.PROMTOOL ?? "/usr/bin/promtool";

/** `promtool check metrics` with the exposition on stdin: exit status 0 and nothing printed is a pass. */
export function promtoolCheck(exposition: string): { ok: boolean; status: number | null; output: string } {
  const r = spawnSync(PROMTOOL, ["check", "metrics"], { input: exposition, encoding: "utf8", timeout: 30_000 });
  if (r.error) throw new Error(`${PROMTOOL}: ${r.error.message}`);
  const output = `${r.stdout}${r.stderr}`.trim();
  return { ok: r.status === 0 && output === "", status: r.status, output };
}

export interface Sample { name: string; labels: Record<string, string>; value: number }

/** Every sample line of a text exposition (label values unescaped enough for these tests: no `"` or `,` inside). */
export function parseSamples(exposition: string): Sample[] {
  const out: Sample[] = [];
  for (const line of exposition.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1] as string, x[2] as string]));
    out.push({ name: m[1] as string, labels, value: Number(m[3]) });
  }
  return out;
}

/** Metric families by name, with their `# TYPE`. */
export function metricTypes(exposition: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) out.set(m[1] as string, m[2] as string);
  return out;
}

/** The sum of the samples named `name` whose labels include `labels` (NaN when there is none). */
export function sampleValue(exposition: string, name: string, labels: Record<string, string> = {}): number {
  const hits = parseSamples(exposition).filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return hits.length === 0 ? Number.NaN : hits.reduce((a, s) => a + s.value, 0);
}

/** The label names of the samples of `name` (for a histogram: of its _count series), sorted, or undefined. */
export function labelNamesOf(exposition: string, name: string, type?: string): string[] | undefined {
  const series = type === "histogram" ? `${name}_count` : name;
  const s = parseSamples(exposition).find((x) => x.name === series);
  return s ? Object.keys(s.labels).sort() : undefined;
}

/** The prefixes a metric family of Operon's processes may have: its own, and the standard ones. */
export const ALLOWED_PREFIXES = ["operon_", "controller_runtime_", "workqueue_", "process_", "nodejs_"];

/** Families whose names break the conventions: no allowed prefix, or a counter not ending in `_total`. */
export function namingProblems(exposition: string): string[] {
  const out: string[] = [];
  for (const [name, type] of metricTypes(exposition)) {
    if (!ALLOWED_PREFIXES.some((p) => name.startsWith(p))) out.push(`${name}: not prefixed ${ALLOWED_PREFIXES.join(", ")}`);
    if (type === "counter" && !name.endsWith("_total")) out.push(`${name}: a counter not ending in _total`);
  }
  return out;
}

/** The controller and work queue metrics every reconciling engine shows, with type and label names (controller-runtime's). */
export const CONTROLLER_METRICS: Array<{ name: string; type: string; labels: string[] }> = [
  { name: "controller_runtime_reconcile_total", type: "counter", labels: ["controller", "result"] },
  { name: "controller_runtime_reconcile_errors_total", type: "counter", labels: ["controller"] },
  { name: "controller_runtime_reconcile_time_seconds", type: "histogram", labels: ["controller"] },
  { name: "controller_runtime_max_concurrent_reconciles", type: "gauge", labels: ["controller"] },
  { name: "controller_runtime_active_workers", type: "gauge", labels: ["controller"] },
  { name: "workqueue_depth", type: "gauge", labels: ["controller", "name"] },
  { name: "workqueue_adds_total", type: "counter", labels: ["controller", "name"] },
  { name: "workqueue_queue_duration_seconds", type: "histogram", labels: ["controller", "name"] },
  { name: "workqueue_work_duration_seconds", type: "histogram", labels: ["controller", "name"] },
  { name: "workqueue_retries_total", type: "counter", labels: ["controller", "name"] },
  { name: "workqueue_unfinished_work_seconds", type: "gauge", labels: ["controller", "name"] },
  { name: "workqueue_longest_running_processor_seconds", type: "gauge", labels: ["controller", "name"] },
];

/** What differs from CONTROLLER_METRICS (and the operon_runs metrics) in an exposition: empty when all are there as they should be. */
export function controllerMetricProblems(exposition: string): string[] {
  const types = metricTypes(exposition);
  const out: string[] = [];
  const expected = [...CONTROLLER_METRICS, { name: "operon_runs", type: "gauge", labels: ["phase"] }, { name: "operon_runs_finished_total", type: "counter", labels: ["phase"] }];
  for (const m of expected) {
    if (types.get(m.name) !== m.type) { out.push(`${m.name}: type ${types.get(m.name) ?? "missing"}, not ${m.type}`); continue; }
    const labels = labelNamesOf(exposition, m.name, m.type);
    if (JSON.stringify(labels) !== JSON.stringify(m.labels)) out.push(`${m.name}: labels ${JSON.stringify(labels)}, not ${JSON.stringify(m.labels)}`);
  }
  return out;
}

/** An exposition that breaks the rules promtool checks (a counter without _total, a family without help), for negative controls. */
export const BAD_EXPOSITION = "# TYPE operon_things counter\noperon_things 1\n";
