/**
 * The operator process (`operon operator`): the same engine as embedded mode with the
 * Kubernetes adapters — PipelineRuns as the run store, Jobs as the executor — plus what only
 * a controller needs: leader election (only the Lease holder reconciles), clean-up, and its
 * health and metrics endpoint. The api-server's cluster-mode engine, which never reconciles,
 * is in wiring/runtime.ts.
 */
import { isFinal } from "../core/status.js";
import { createServer, type Server } from "node:http";
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { Counter, Gauge, Registry, collectDefaultMetrics } from "prom-client";
import type { Config } from "../core/config.js";
import type { ObjectStore } from "../core/ports.js";
import { createKubeClient, scopedClient, type KubeClient } from "../adapters/kubernetes/client.js";
import { createKubeRunStore, type KubeRunStore } from "../adapters/kubernetes/run-store.js";
import { KubeClaims } from "../adapters/kubernetes/claims.js";
import { createJobExecutor, type KubeJobExecutor } from "../adapters/kubernetes/job-executor.js";
import { LeaderElector } from "../adapters/kubernetes/leader.js";
import { startJanitor, type Janitor } from "../adapters/kubernetes/janitor.js";
import { createEngine, type Engine } from "../engine/engine.js";
import { loadStepPodConfig, type ClusterEngineOptions } from "../wiring/runtime.js";
import { messageOf } from "../core/errors.js";

export const LEASE_NAME = "operon-operator";

export type ClusterOptions = ClusterEngineOptions;

/** Storage settings the step helpers need; credentials come from a Secret, never from here. */
export function stepStorageEnv(config: Config): Record<string, string> {
  const endpoint = config.OPERON_STEP_S3_ENDPOINT ?? config.S3_ENDPOINT;
  return {
    OPERON_MODE: "cluster",
    OPERON_STORAGE: "s3",
    S3_BUCKET: config.S3_BUCKET ?? "",
    S3_REGION: config.S3_REGION,
    S3_FORCE_PATH_STYLE: String(config.S3_FORCE_PATH_STYLE),
    ...(endpoint ? { S3_ENDPOINT: endpoint } : {}),
  };
}


export interface Operator {
  identity: string;
  isLeader(): boolean;
  /** The engine while this replica leads. */
  engine(): Engine | undefined;
  executor(): KubeJobExecutor | undefined;
  /** The run store while this replica leads. */
  runs(): KubeRunStore | undefined;
  /** The clean-up (run TTL, stopped Jobs) while this replica leads. */
  janitor(): Janitor | undefined;
  /** What the leading term keeps per run beside the informer caches (tests: empty once runs end). */
  cacheSizes(): Record<string, number> | undefined;
  /** How many times this replica started leading. */
  terms(): number;
  client: KubeClient;
  server?: Server;
  stop(): Promise<void>;
}

/** Knobs for tests (the defaults are production's). */
export interface OperatorTuning {
  /** Deadline of each Kubernetes request (default 30 s). */
  requestTimeoutMs?: number;
  /** A watch silent this long is abandoned and its cache relisted (default 90 s). */
  watchQuietMs?: number;
  /** Time between full clean-up sweeps (default OPERON_CLEANUP_INTERVAL_SECONDS). */
  sweepIntervalMs?: number;
  /** The clock of the run TTL (default Date.now). */
  ttlNow?: () => number;
}


/**
 * The operator: campaigns for the Lease; once leading, starts the informers, rebuilds the
 * ledger from live Jobs and reconciles, while the Lease is renewed on its own timer. Losing
 * the Lease (no renewal within the renew deadline, e.g. the API server unreachable) ends the
 * term: every request of the term is aborted at once, the engine and informers stop, and the
 * replica campaigns again (`onLostLease` is told); it does not exit. Everything of a term —
 * caches, queues, per-run state — is dropped with it, so a new term starts from the API.
 */
export async function startOperator(config: Config, store: ObjectStore, opts: ClusterOptions & { identity?: string; listen?: boolean; onLostLease?: (why: string) => void; tuning?: OperatorTuning }): Promise<Operator> {
  const tuning = opts.tuning ?? {};
  // Step pods' resources, images, scheduling and reference volumes; a bad file stops start-up.
  const stepPods = opts.stepPods ?? await loadStepPodConfig(config.OPERON_STEP_POD_CONFIG);
  const client = await createKubeClient({ ...(opts.kubeconfig ? { kubeconfig: opts.kubeconfig } : {}), namespace: config.OPERON_NAMESPACE, userAgent: "operon-operator", ...(tuning.requestTimeoutMs ? { timeoutMs: tuning.requestTimeoutMs } : {}) });
  const ns = config.OPERON_NAMESPACE;
  const identity = opts.identity ?? `${hostname()}-${randomBytes(4).toString("hex")}`;
  interface Term { abort: AbortController; runs?: KubeRunStore; executor?: KubeJobExecutor; claims?: KubeClaims; engine?: Engine; janitor?: Janitor; unwatch?: () => void }
  /** The current term (this replica leads), and the term that is fully started. */
  let term: Term | undefined;
  let active: Required<Omit<Term, "unwatch">> | undefined;
  let terms = 0;
  let stopping = false;
  let ready = config.OPERON_LEADER_ELECTION; // a standby replica is ready; a lone one once synced
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  // As the api-server does: prom-client's gauges named `…_total` break the naming rules (a
  // non-counter must not end in _total); the same figures stay, by type, in nodejs_active_handles etc.
  for (const name of ["nodejs_active_handles_total", "nodejs_active_requests_total", "nodejs_active_resources_total"]) registry.removeSingleMetric(name);
  const leaderGauge = new Gauge({ name: "operon_operator_leader", help: "1 while this replica holds the lease", registers: [registry] });
  // The client counts its writes (never going down): the counter catches up with it when scraped.
  let writesSeen = 0;
  new Counter({
    name: "operon_operator_api_writes_total", help: "Writes (non-GET requests) sent to the Kubernetes API by this replica", registers: [registry],
    collect() { const n = client.writes(); if (n > writesSeen) { this.inc(n - writesSeen); writesSeen = n; } },
  });
  const sweepsCounter = new Counter({ name: "operon_operator_cleanup_sweeps_total", help: "Clean-up sweeps (run TTL, stopped Jobs, labelling finished runs) completed by this replica", registers: [registry] });
  new Gauge({ name: "operon_operator_cached_runs", help: "PipelineRuns in the leading operator's cache (runs in progress; finished runs leave it)", registers: [registry], collect() { this.set(active?.runs.resources().length ?? 0); } });
  const quiet = tuning.watchQuietMs ? { quietMs: tuning.watchQuietMs } : {};

  async function lead(): Promise<void> {
    if (stopping) return;
    const t: Term = { abort: new AbortController() };
    term = t;
    terms++;
    leaderGauge.set(1);
    // Every request of this term ends when the term does (a lost Lease): nothing of it acts after.
    const c = scopedClient(client, t.abort.signal);
    const onError = (e: unknown) => { if (!t.abort.signal.aborted) opts.log(`informer: ${messageOf(e)}`); };
    // A run that ended (written by this term, or seen changed) or went away: its stopped Jobs
    // can go, and nothing is kept for it.
    const ended = (id: string) => {
      if (runs.resource(id) && !finished(id)) return;
      t.janitor?.runChanged(id);
      t.executor?.forgetRun(id);
    };
    const runs = createKubeRunStore({ client: c, namespace: ns, onError, events: { component: `operon-operator/${identity}` }, onWritten: ended, activeOnly: true, ...quiet });
    // The cache holds runs in progress only: once it is synced, a run it does not hold has
    // finished (retired) or is gone. Before that nothing is known to have finished.
    const finished = (id: string) => {
      const res = runs.resource(id);
      if (!res) return runs.synced();
      return isFinal((res.status as { phase?: string } | undefined)?.phase);
    };
    const executor = createJobExecutor({
      client: c, namespace: ns, store, onError, ...quiet, stepPods,
      ownerUid: (id) => runs.uidOf(id),
      runFinished: finished,
      template: {
        image: config.OPERON_IMAGE,
        storageEnv: stepStorageEnv(config),
        ...(config.OPERON_S3_CREDENTIALS_SECRET ? { credentialsSecret: config.OPERON_S3_CREDENTIALS_SECRET } : {}),
        ttlSecondsAfterFinished: config.OPERON_JOB_TTL_SECONDS,
        createdBy: identity,
      },
    });
    // Tasks outside runs (renders, viewer preparations) of every api-server replica: admitted here, with the steps.
    const claims = new KubeClaims({ client: c, namespace: ns, onError });
    t.runs = runs;
    t.executor = executor;
    t.claims = claims;
    t.unwatch = runs.watch(ended);
    const termEnded = new Promise<void>((resolve) => t.abort.signal.addEventListener("abort", () => resolve(), { once: true }));
    const synced = Promise.all([runs.start(), executor.start(), claims.start()]);
    synced.catch(() => undefined);
    await Promise.race([synced, termEnded]);
    if (t.abort.signal.aborted) return;
    const engine = createEngine({ mode: "cluster", runs, executor, store, clock: { now: () => Date.now() }, orgConcurrency: () => config.OPERON_ORG_CONCURRENCY, workers: config.OPERON_OPERATOR_WORKERS, stepPods, claims, instance: identity, log: opts.log });
    t.engine = engine;
    t.janitor = startJanitor({
      client: c, namespace: ns, runs, jobs: executor.jobs, jobsOfRun: (id) => executor.jobsOfRun(id),
      runTtlMs: config.OPERON_RUN_TTL_DAYS * 86_400_000,
      ...(tuning.ttlNow ? { now: tuning.ttlNow } : {}),
      intervalMs: tuning.sweepIntervalMs ?? config.OPERON_CLEANUP_INTERVAL_SECONDS * 1000,
      onSwept: () => sweepsCounter.inc(),
      onError: (e) => { if (!t.abort.signal.aborted) opts.log(`clean-up: ${messageOf(e)}`); },
      onDeleted: (kind, name, why) => opts.log(`operator ${identity}: deleted ${kind} ${name}: ${why}`),
    });
    active = { abort: t.abort, runs, executor, claims, engine, janitor: t.janitor };
    ready = true;
    opts.log(`operator ${identity}: leading; reconciling PipelineRuns in namespace ${ns}`);
  }

  /** Ends the current term: aborts its requests, stops its engine, clean-up and informers. */
  async function stepDown(): Promise<void> {
    const t = term;
    term = undefined;
    active = undefined;
    leaderGauge.set(0);
    if (!t) return;
    t.abort.abort(new Error(`operator ${identity} stopped leading`));
    t.unwatch?.();
    await t.janitor?.stop();
    await t.engine?.stop();
    t.runs?.stop();
    t.executor?.stop();
    t.claims?.stop();
  }

  const lease = config.OPERON_LEASE_DURATION_SECONDS * 1000;
  const elector = config.OPERON_LEADER_ELECTION
    ? new LeaderElector({
      client, namespace: ns, name: LEASE_NAME, identity,
      leaseDurationMs: lease, renewDeadlineMs: Math.round((lease * 2) / 3), retryPeriodMs: Math.round((lease * 2) / 15),
      onStartedLeading: lead,
      onStoppedLeading: async (why) => {
        opts.log(`operator ${identity}: stopped leading (${why}); stopping the engine, then campaigning again`);
        await stepDown();
        opts.onLostLease?.(why);
      },
      onError: (e) => opts.log(`leader election: ${messageOf(e)}`),
    })
    : undefined;
  if (elector) elector.start(); else await lead();

  let server: Server | undefined;
  if (opts.listen !== false) {
    server = createServer((req, res) => {
      const path = (req.url ?? "/").split("?")[0];
      if (path === "/healthz") { res.writeHead(200, { "content-type": "text/plain" }).end("ok"); return; }
      if (path === "/readyz") { res.writeHead(ready ? 200 : 503, { "content-type": "text/plain" }).end(ready ? "ok" : "starting"); return; }
      if (path === "/metrics") {
        // The operator's own metrics, then (while leading) its engine's: controller, work queue, runs.
        Promise.all([registry.metrics(), active?.engine.metrics.metrics() ?? ""]).then(
          ([m, e]) => { res.writeHead(200, { "content-type": registry.contentType }).end(m + e); },
          (e: unknown) => { opts.log(`metrics: ${messageOf(e)}`); res.writeHead(500, { "content-type": "text/plain" }).end("metrics unavailable"); },
        );
        return;
      }
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server?.listen(config.PORT, config.host, resolve));
  }

  return {
    identity,
    client,
    ...(server ? { server } : {}),
    isLeader: () => (elector ? elector.isLeader() : true),
    engine: () => active?.engine,
    executor: () => active?.executor,
    runs: () => active?.runs,
    janitor: () => active?.janitor,
    terms: () => terms,
    cacheSizes() {
      const a = active;
      if (!a) return undefined;
      const out: Record<string, number> = {};
      for (const [k, v] of Object.entries(a.executor.cacheSizes())) out[`executor.${k}`] = v;
      Object.assign(out, a.engine.cacheSizes());
      out["runStore.parsed"] = a.runs.parsedCount();
      out["janitor.pending"] = a.janitor.pending();
      return out;
    },
    async stop() {
      // The engine first, then the Lease: no other replica acts while this one still does.
      stopping = true;
      await stepDown();
      await elector?.stop();
      if (server) await new Promise<void>((resolve) => server?.close(() => resolve()));
      client.close();
    },
  };
}
