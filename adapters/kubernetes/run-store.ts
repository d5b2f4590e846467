/**
 * Cluster mode's RunStore: each run is a PipelineRun custom resource (docs/kubernetes.md#pipelinerun). Reads come
 * from a supervised informer cache; a run not yet in the cache is fetched directly. Updates
 * are read-modify-write with the resourceVersion as precondition: the desired state
 * (`spec.cancelRequested`) is patched on the resource, everything else on the status
 * subresource; a conflict re-reads the object and applies the change again. A listing of a
 * workspace looks only at that workspace's runs (an index of the informer cache) and copies
 * only the runs it returns.
 *
 * The operator's store keeps only runs in progress (`activeOnly`): once a run's final status
 * is written it is labelled finished (`retire`) and leaves the watched selection, so an idle
 * operator's memory does not grow with the runs it has finished. Reads of a finished run go
 * to the API server.
 */
import { isFinal } from "../../core/status.js";
import { EventEmitter } from "node:events";
import { ACTIVE_RUNS, ANNOTATION, LABEL, conditionsOf, resourceToRun, runToResource, runToStatus, type PipelineRunResource } from "../../core/kubernetes/pipelinerun.js";
import type { Clock, RunRecord, RunStore } from "../../core/ports.js";
import { compareRunPositions, matchesRunFilter } from "../../core/run-order.js";
import { isConflict, isNotFound, paths, type KubeClient } from "./client.js";
import { Informer, type KubeObject } from "./informer.js";
import { keyedSerializer } from "../serial.js";

export type PR = PipelineRunResource & KubeObject;

const MAX_CONFLICT_RETRIES = 8;

/**
 * The informer's index: a run's organization and workspace exactly as its record will have
 * them (`spec`, as resourceToRun reads it). The `operon.dev/org` and `operon.dev/workspace`
 * labels carry them too, but shortened with a hash when not valid label values.
 */
const scopeKey = (organization: string, workspace: string) => `${organization}\u0000${workspace}`;
const specText = (res: PR, field: "organization" | "workspace"): string => {
  const v = (res.spec as Record<string, unknown> | undefined)?.[field];
  return typeof v === "string" ? v : "";
};

export interface KubeRunStore extends RunStore {
  /** Waits for the first list; call before reading. */
  start(): Promise<void>;
  stop(): void;
  /** The resource's uid, for owner references of its Jobs. */
  uidOf(runId: string): string | undefined;
  /** The cached resource as the API server has it (no parsing), or undefined. */
  resource(runId: string): PR | undefined;
  /** Every cached resource (no parsing: cheap enough for periodic sweeps). */
  resources(): PR[];
  /** Entries of the per-run parse cache (tests: pruned when a run is deleted). */
  parsedCount(): number;
  /** Whether the first list is in the cache (before it, a run not cached may still exist). */
  synced(): boolean;
  /**
   * Labels a finished run finished (idempotent; a run that has not finished is left alone).
   * With `activeOnly` it then leaves this store's cache.
   */
  retire(runId: string): Promise<void>;
}

export interface KubeRunStoreOptions {
  client: KubeClient;
  namespace: string;
  clock?: Clock;
  onError?: (e: unknown) => void;
  quietMs?: number;
  /** Record phase changes as Kubernetes Events on the PipelineRun (`kubectl describe`); the operator does. */
  events?: { component: string };
  /**
   * Whether this store writes the status subresource (default true). The api-server's store
   * does not: it only creates runs and changes `spec.cancelRequested`; the operator owns status.
   */
  writeStatus?: boolean;
  /**
   * Called after this store wrote a run (its cache already holds what was written). The
   * watch does not report one's own writes (the event matches the cached version), so this
   * is how the writer learns, e.g., that a run it just finished has finished.
   */
  onWritten?: (runId: string) => void;
  /**
   * Cache only runs that have not finished (the `ACTIVE_RUNS` selector), and retire each run
   * this store finishes. The operator's store does; the api-server's lists every run.
   */
  activeOnly?: boolean;
}

/** JSON with object keys sorted: the API server returns fields in its own order. */
function canonicalJson(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => (x && typeof x === "object" && !Array.isArray(x) ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : x));
}

export function createKubeRunStore(opts: KubeRunStoreOptions): KubeRunStore {
  const { client, namespace } = opts;
  const clock = opts.clock ?? { now: () => Date.now() };
  const base = paths.pipelineRuns(namespace);
  const events = new EventEmitter();
  events.setMaxListeners(100);
  /** Operations on one run are serialized in this process. */
  const serial = keyedSerializer();
  const isActive = (res: PR) => res.metadata.labels?.[LABEL.finished] === undefined;
  const informer = new Informer<PR>({
    client, path: base,
    ...(opts.activeOnly ? { labelSelector: ACTIVE_RUNS, accept: isActive } : {}),
    indexBy: (obj) => scopeKey(specText(obj, "organization"), specText(obj, "workspace")),
    onChange: (obj) => {
      if (!informer.get(obj.metadata.name)) parsed.delete(obj.metadata.name); // deleted
      events.emit("change", obj.metadata.name);
    },
    ...(opts.onError ? { onError: opts.onError } : {}),
    ...(opts.quietMs ? { quietMs: opts.quietMs } : {}),
  });

  async function fetch(id: string): Promise<PR | undefined> {
    try {
      const obj = await client.request<PR>("GET", `${base}/${encodeURIComponent(id)}`);
      informer.assume(obj);
      return informer.get(id) ?? obj;
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  }

  /** Parsed records by name, reused while the resourceVersion is the same (parsing is zod work). */
  const parsed = new Map<string, { rv: string | undefined; run: RunRecord }>();
  /** The cached parse of a resource: shared, never handed out (toRun copies it). */
  const parsedOf = (res: PR): RunRecord => {
    if (informer.get(res.metadata.name) === undefined) return resourceToRun(res); // not cached: nor is its parse
    const hit = parsed.get(res.metadata.name);
    if (hit && hit.rv !== undefined && hit.rv === res.metadata.resourceVersion) return hit.run;
    const run = resourceToRun(res);
    parsed.set(res.metadata.name, { rv: res.metadata.resourceVersion, run });
    if (parsed.size > 10_000) parsed.delete(parsed.keys().next().value as string);
    return run;
  };
  const toRun = (res: PR): RunRecord => structuredClone(parsedOf(res));

  async function read(id: string): Promise<PR | undefined> {
    return informer.get(id) ?? (await fetch(id));
  }

  const statusJson = (res: PR) => canonicalJson(res.status ?? {});
  const finalPhase = (res: PR): string | undefined => {
    const phase = (res.status as { phase?: unknown } | undefined)?.phase;
    return typeof phase === "string" && isFinal(phase) ? phase : undefined;
  };

  async function retire(res: PR): Promise<void> {
    const phase = finalPhase(res);
    if (!phase || !isActive(res)) return;
    try {
      const at = (res.status as { completedAt?: unknown } | undefined)?.completedAt;
      const annotations = typeof at === "string" ? { [ANNOTATION.finishedAt]: at } : {};
      const patched = await client.request<PR>("PATCH", `${base}/${encodeURIComponent(res.metadata.name)}`, { patch: "merge", body: { metadata: { labels: { [LABEL.finished]: phase }, annotations } } });
      informer.assume(patched);
      if (!informer.get(res.metadata.name)) parsed.delete(res.metadata.name);
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  }

  /** A Normal/Warning Event for a run's phase change; best effort, never fails the update. */
  function recordEvent(res: PR, from: RunRecord, to: RunRecord): void {
    if (!opts.events || from.status === to.status) return;
    const failed = to.status === "failed";
    const reason = { queued: "Queued", running: "Started", completed: "Completed", failed: "Failed", cancelled: "Cancelled" }[to.status];
    const now = new Date(clock.now()).toISOString();
    const message = to.status === "running" ? `run started: ${to.steps.length} step(s)` : to.error ? `run ${to.status}: ${to.error}` : `run ${to.status}`;
    void client.request("POST", paths.events(namespace), {
      body: {
        apiVersion: "v1", kind: "Event",
        metadata: { generateName: `${res.metadata.name}.`, namespace },
        involvedObject: { apiVersion: res.apiVersion, kind: res.kind, name: res.metadata.name, namespace, uid: res.metadata.uid },
        type: failed ? "Warning" : "Normal", reason, message: message.slice(0, 1000),
        source: { component: opts.events.component }, firstTimestamp: now, lastTimestamp: now, count: 1,
      },
    }).catch((e: unknown) => opts.onError?.(e));
  }

  return {
    start: () => informer.start(),
    stop: () => informer.stop(),
    uidOf: (id) => informer.get(id)?.metadata.uid,
    resource: (id) => informer.get(id),
    resources: () => informer.list(),
    parsedCount: () => parsed.size,
    synced: () => informer.isSynced,
    // From the cached resources as they are (no parsing); a run with no phase yet is queued.
    countActive: async () => {
      let queued = 0;
      let running = 0;
      for (const res of informer.list()) {
        const phase = (res.status as { phase?: unknown } | undefined)?.phase ?? "queued";
        if (phase === "queued") queued++;
        else if (phase === "running") running++;
      }
      return { queued, running };
    },
    retire: async (id) => {
      const res = informer.get(id) ?? (await fetch(id));
      if (res) await serial(id, () => retire(res));
    },

    async create(run) {
      const created = await client.request<PR>("POST", base, { body: runToResource(run, namespace) });
      informer.assume(created);
    },

    async get(id) {
      const res = await read(id);
      return res ? toRun(res) : undefined;
    },

    async list(filter) {
      const { organization, workspace } = filter;
      // Narrowed on the raw resources (a workspace through the index), then parsed (cached)
      // to filter and sort; only the runs returned are copied.
      const candidates = organization === undefined ? informer.list()
        : workspace !== undefined ? informer.byIndex(scopeKey(organization, workspace))
          : informer.list().filter((res) => specText(res, "organization") === organization);
      const runs = candidates.map(parsedOf).filter((r) => matchesRunFilter(r, filter)).sort(compareRunPositions);
      return (filter.limit === undefined ? runs : runs.slice(0, filter.limit)).map((r) => structuredClone(r));
    },

    update: (id, change) => serial(id, async () => {
      let res = await read(id);
      for (let attempt = 0; res; attempt++) {
        const cur = toRun(res);
        const next = change(cur);
        if (!next) return cur;
        const rv = res.metadata.resourceVersion;
        try {
          if (next.cancelRequested !== cur.cancelRequested) {
            // The only desired state the engine changes after creation.
            const patched = await client.request<PR>("PATCH", `${base}/${encodeURIComponent(id)}`, {
              patch: "merge",
              body: { metadata: { resourceVersion: rv }, spec: { cancelRequested: next.cancelRequested } },
            });
            informer.assume(patched);
            res = patched;
          }
          const status = runToStatus(next, conditionsOf(res), new Date(clock.now()).toISOString());
          if (opts.writeStatus !== false && canonicalJson(status) !== statusJson(res)) {
            // A full replace of the status (fields that went away go away), guarded by the resourceVersion.
            const patched = await client.request<PR>("PUT", `${base}/${encodeURIComponent(id)}/status`, { body: { ...res, status } });
            informer.assume(patched);
            recordEvent(patched, cur, next);
            res = patched;
            try { opts.onWritten?.(id); } catch (e) { opts.onError?.(e); }
            // Finished: out of the operator's cache. A failure is caught up by the janitor's sweep.
            if (opts.activeOnly) await retire(patched).catch((e: unknown) => opts.onError?.(e));
          }
          return toRun(res);
        } catch (e) {
          if (!isConflict(e) || attempt >= MAX_CONFLICT_RETRIES) {
            if (isNotFound(e)) return undefined;
            throw e;
          }
          res = await fetch(id);
        }
      }
      return undefined;
    }),

    watch(fn) {
      events.on("change", fn);
      return () => events.off("change", fn);
    },
  };
}
