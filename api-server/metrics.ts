/**
 * Prometheus metrics of the api-server (GET /metrics), one registry per app instance. Every
 * Operon metric is named `operon_…` (counters end in `_total`); the process and Node.js
 * metrics keep their standard names. The engine's metrics follow on the same page
 * (docs/metrics.md lists them all).
 */
import { Counter, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export interface Metrics {
  registry: Registry;
  requestDuration: Histogram<"method" | "route" | "status">;
  uploadedBytes: Counter<"via">;
  authFailures: Counter<"reason">;
  /** Errors that reached the process's last-resort handlers (see last-resort.ts). */
  uncaughtErrors: Counter<"kind">;
}

/** Default metrics of prom-client left out (gauges ending in _total); operator/cluster.ts leaves them out too. */
const NONCONFORMING_DEFAULT_METRICS = ["nodejs_active_handles_total", "nodejs_active_requests_total", "nodejs_active_resources_total"];

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  // prom-client's three gauges named `…_total` break the naming rules (promtool: a non-counter
  // must not end in _total); the same figures stay, by type, in nodejs_active_handles etc.
  for (const name of NONCONFORMING_DEFAULT_METRICS) registry.removeSingleMetric(name);
  return {
    registry,
    requestDuration: new Histogram({
      name: "operon_http_request_duration_seconds",
      help: "HTTP request duration by route and status",
      labelNames: ["method", "route", "status"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
      registers: [registry],
    }),
    uploadedBytes: new Counter({ name: "operon_uploaded_bytes_total", help: "Bytes stored through the api-server", labelNames: ["via"], registers: [registry] }),
    authFailures: new Counter({ name: "operon_auth_failures_total", help: "Rejected authentications by reason", labelNames: ["reason"], registers: [registry] }),
    uncaughtErrors: new Counter({ name: "operon_uncaught_errors_total", help: "Unhandled promise rejections and uncaught exceptions caught by the last-resort handlers", labelNames: ["kind"], registers: [registry] }),
  };
}
