/**
 * Cluster mode, assembled: the operator process (`operon operator`) and the api-server's
 * engine when OPERON_MODE=cluster. Both use the same engine as embedded mode with the
 * Kubernetes adapters: PipelineRuns as the run store, Jobs as the executor. Only the leader
 * of the operator replicas reconciles; the api-server never does (it submits, reads, cancels).
 */
import { createServer, type Server } from "node:http";
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { Gauge, Registry, collectDefaultMetrics } from "prom-client";
import type { Config } from "../core/config.js";
import type { ObjectStore, StepExecutor } from "../core/ports.js";
import { createKubeClient, type KubeClient } from "../adapters/kubernetes/client.js";
import { createKubeRunStore, type KubeRunStore } from "../adapters/kubernetes/run-store.js";
import { createJobExecutor, type KubeJobExecutor } from "../adapters/kubernetes/job-executor.js";
import { LeaderElector } from "../adapters/kubernetes/leader.js";
import { createEngine, type Engine } from "../api-server/engine.js";

export const LEASE_NAME = "operon-operator";

export interface ClusterOptions {
  /** Kubeconfig file (default: KUBECONFIG, ~/.kube/config, or in-cluster). */
  kubeconfig?: string;
  log: (msg: string) => void;
}

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

/** A StepExecutor for the api-server, which never runs steps: it only has logs in storage. */
const readOnlyExecutor: StepExecutor = {
  runtime: "container",
  submit: () => Promise.reject(new Error("the api-server does not run steps in cluster mode")),
  observe: () => Promise.resolve(new Map()),
  kill: () => Promise.resolve(),
  watch: () => () => undefined,
  logs: () => Promise.resolve(undefined),
};

/** The api-server's engine in cluster mode: PipelineRuns in, PipelineRuns out. */
export async function createClusterEngine(config: Config, store: ObjectStore, opts: ClusterOptions): Promise<{ engine: Engine; runs: KubeRunStore; client: KubeClient; stop(): Promise<void> }> {
  const client = await createKubeClient({ ...(opts.kubeconfig ? { kubeconfig: opts.kubeconfig } : {}), namespace: config.OPERON_NAMESPACE });
  const runs = createKubeRunStore({ client, namespace: config.OPERON_NAMESPACE, writeStatus: false, onError: (e) => opts.log(`pipelineruns watch: ${errText(e)}`) });
  await runs.start();
  const engine = createEngine({ runs, executor: readOnlyExecutor, store, clock: { now: () => Date.now() }, orgConcurrency: () => config.OPERON_ORG_CONCURRENCY, controller: false, log: opts.log });
  return { engine, runs, client, stop: async () => { await engine.stop(); runs.stop(); client.close(); } };
}

const errText = (e: unknown) => (e instanceof Error ? e.message : String(e));

export interface Operator {
  identity: string;
  isLeader(): boolean;
  /** The engine while this replica leads. */
  engine(): Engine | undefined;
  executor(): KubeJobExecutor | undefined;
  client: KubeClient;
  server?: Server;
  stop(): Promise<void>;
}

/**
 * The operator: campaigns for the Lease; once leading, starts the informers, rebuilds the
 * ledger from live Jobs and reconciles. Losing the Lease ends the process (`onLostLease`,
 * default exit 1): a replica that may have missed renewals must not act again.
 */
export async function startOperator(config: Config, store: ObjectStore, opts: ClusterOptions & { identity?: string; listen?: boolean; onLostLease?: () => void }): Promise<Operator> {
  const client = await createKubeClient({ ...(opts.kubeconfig ? { kubeconfig: opts.kubeconfig } : {}), namespace: config.OPERON_NAMESPACE });
  const ns = config.OPERON_NAMESPACE;
  const identity = opts.identity ?? `${hostname()}-${randomBytes(4).toString("hex")}`;
  let active: { engine: Engine; runs: KubeRunStore; executor: KubeJobExecutor } | undefined;
  let ready = config.OPERON_LEADER_ELECTION; // a standby replica is ready; a lone one once synced
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const leaderGauge = new Gauge({ name: "operon_operator_leader", help: "1 while this replica holds the lease", registers: [registry] });
  const writesGauge = new Gauge({ name: "operon_operator_api_writes", help: "Writes sent to the Kubernetes API by this replica", registers: [registry], collect() { this.set(client.writes()); } });
  void writesGauge;

  async function lead(): Promise<void> {
    leaderGauge.set(1);
    const onError = (e: unknown) => opts.log(`informer: ${errText(e)}`);
    const runs = createKubeRunStore({ client, namespace: ns, onError, events: { component: `operon-operator/${identity}` } });
    const executor = createJobExecutor({
      client, namespace: ns, store, onError,
      ownerUid: (id) => runs.uidOf(id),
      template: {
        image: config.OPERON_IMAGE,
        storageEnv: stepStorageEnv(config),
        ...(config.OPERON_S3_CREDENTIALS_SECRET ? { credentialsSecret: config.OPERON_S3_CREDENTIALS_SECRET } : {}),
        ttlSecondsAfterFinished: config.OPERON_JOB_TTL_SECONDS,
        createdBy: identity,
      },
    });
    await Promise.all([runs.start(), executor.start()]);
    const engine = createEngine({ runs, executor, store, clock: { now: () => Date.now() }, orgConcurrency: () => config.OPERON_ORG_CONCURRENCY, workers: config.OPERON_OPERATOR_WORKERS, log: opts.log });
    active = { engine, runs, executor };
    ready = true;
    opts.log(`operator ${identity}: leading; reconciling PipelineRuns in namespace ${ns}`);
  }

  const lease = config.OPERON_LEASE_DURATION_SECONDS * 1000;
  const elector = config.OPERON_LEADER_ELECTION
    ? new LeaderElector({
      client, namespace: ns, name: LEASE_NAME, identity,
      leaseDurationMs: lease, renewDeadlineMs: Math.round((lease * 2) / 3), retryPeriodMs: Math.round((lease * 2) / 15),
      onStartedLeading: lead,
      onStoppedLeading: () => {
        opts.log(`operator ${identity}: lost the lease; stopping`);
        leaderGauge.set(0);
        (opts.onLostLease ?? (() => process.exit(1)))();
      },
      onError: (e) => opts.log(`leader election: ${errText(e)}`),
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
        void Promise.all([registry.metrics(), active?.engine.metrics.metrics() ?? ""]).then(([m, e]) => res.writeHead(200, { "content-type": registry.contentType }).end(m + e));
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
    async stop() {
      if (active) await active.engine.stop();
      active?.runs.stop();
      active?.executor.stop();
      await elector?.stop();
      if (server) await new Promise<void>((resolve) => server?.close(() => resolve()));
      client.close();
    },
  };
}
