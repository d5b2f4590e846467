/**
 * A small HTTP client for the Kubernetes API. `@kubernetes/client-node` loads the kubeconfig
 * (file, `KUBECONFIG`, or the in-cluster service account) and applies its credentials; the
 * requests themselves are plain JSON over one keep-alive HTTPS agent, so the adapters see
 * the API's own objects (string timestamps, unknown fields kept) and every write counts.
 *
 * Every request has a deadline (`timeoutMs`, default 30 s): a connection that stops answering
 * (a partition, a frozen load balancer) fails the request with a KubeTimeoutError and its
 * socket is destroyed, so it is never reused; nothing waits on the API forever. A stream (a
 * watch, a log) has the deadline until its response starts; after that its reader decides
 * how long silence may last (the informer's `quietMs`).
 */
import { Agent as HttpsAgent, request as httpsRequest, type RequestOptions } from "node:https";
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { setMaxListeners } from "node:events";
import { KubeConfig } from "@kubernetes/client-node";

export class KubeError extends Error {
  constructor(readonly status: number, readonly reason: string, message: string) {
    super(message);
    this.name = "KubeError";
  }
}

/** A request that got no (complete) answer within its deadline. */
export class KubeTimeoutError extends Error {
  constructor(readonly method: string, readonly path: string, readonly timeoutMs: number) {
    super(`${method} ${path}: no answer within ${timeoutMs} ms`);
    this.name = "KubeTimeoutError";
  }
}

/** An aborted signal's reason, when it is an Error. */
function reasonOf(signal: AbortSignal | undefined): Error | undefined {
  const reason: unknown = signal?.reason;
  if (reason instanceof Error) return reason;
  return undefined;
}

export const isNotFound = (e: unknown) => e instanceof KubeError && e.status === 404;
export const isConflict = (e: unknown) => e instanceof KubeError && e.status === 409 && e.reason !== "AlreadyExists";
export const isAlreadyExists = (e: unknown) => e instanceof KubeError && e.status === 409 && e.reason === "AlreadyExists";
export const isTimeout = (e: unknown) => e instanceof KubeTimeoutError;

/** Default deadline of a request. */
export const DEFAULT_TIMEOUT_MS = 30_000;

export type PatchType = "merge" | "strategic" | "json";
const PATCH_TYPES: Record<PatchType, string> = {
  merge: "application/merge-patch+json",
  strategic: "application/strategic-merge-patch+json",
  json: "application/json-patch+json",
};

export interface RequestInit {
  body?: unknown;
  query?: Record<string, string | number | boolean | undefined>;
  patch?: PatchType;
  signal?: AbortSignal;
  /** Deadline of this request (default: the client's); of a stream, until its response starts. */
  timeoutMs?: number;
  /** The Accept header (default application/json), e.g. a metadata-only list (`METADATA_LIST`). */
  accept?: string;
}

/** Accept header of a list that returns only each object's metadata (PartialObjectMetadataList). */
export const METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

export interface KubeClient {
  /** Default namespace (from the options, the kubeconfig context, or `default`). */
  readonly namespace: string;
  readonly server: string;
  request<T>(method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE", path: string, init?: RequestInit): Promise<T>;
  /** Opens a streaming GET (a watch); the caller reads lines from the response. */
  stream(path: string, init: RequestInit): Promise<IncomingMessage>;
  /** Writes (POST/PUT/PATCH/DELETE) sent so far, for the benchmarks. */
  writes(): number;
  close(): void;
}

export interface KubeClientOptions {
  /** Path of a kubeconfig file; default: KUBECONFIG, ~/.kube/config, or in-cluster. */
  kubeconfig?: string;
  namespace?: string;
  /** Deadline of each request (default 30 s). */
  timeoutMs?: number;
  /**
   * The User-Agent sent with every request (default `operon`): the apiserver's audit log and
   * its logs name the client by it, as they do client-go's `<binary>/<version>`.
   */
  userAgent?: string;
}

export async function createKubeClient(opts: KubeClientOptions = {}): Promise<KubeClient> {
  const kc = new KubeConfig();
  if (opts.kubeconfig) kc.loadFromFile(opts.kubeconfig);
  else kc.loadFromDefault();
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("kubernetes: no current cluster in the kubeconfig");
  const server = cluster.server.replace(/\/+$/, "");
  const url = new URL(server);
  const tls = url.protocol === "https:";
  const context = kc.getContextObject(kc.getCurrentContext());
  const namespace = opts.namespace ?? context?.namespace ?? "default";
  const agent = tls ? new HttpsAgent({ keepAlive: true, maxSockets: 32 }) : new HttpAgent({ keepAlive: true, maxSockets: 32 });
  const defaultTimeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const userAgent = `${opts.userAgent ?? "operon"} (${process.platform}/${process.arch}) node/${process.versions.node}`;
  let writes = 0;

  // Credentials can rotate (projected service-account tokens): re-read them every minute.
  let auth: { at: number; opts: RequestOptions } | undefined;
  async function authOptions(): Promise<RequestOptions> {
    if (auth && Date.now() - auth.at < 60_000) return auth.opts;
    const o: RequestOptions = {};
    await kc.applyToHTTPSOptions(o);
    auth = { at: Date.now(), opts: o };
    return o;
  }

  /**
   * Sends a request and waits for its answer: the whole body, or for a stream (a 2xx answer
   * to `stream`) only the start of the response. Fails with a KubeTimeoutError when that has
   * not happened within the deadline, and with the signal's reason when it is aborted (also
   * later, while a stream is read); either destroys the request and its socket.
   */
  async function exchange(method: string, path: string, init: RequestInit, streaming: boolean): Promise<{ status: number; res: IncomingMessage; text: string }> {
    const timeoutMs = init.timeoutMs ?? defaultTimeoutMs;
    const started = Date.now();
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(init.query ?? {})) if (v !== undefined) q.set(k, String(v));
    const qs = q.toString();
    const a = await authOptions();
    const body = init.body === undefined ? undefined : Buffer.from(JSON.stringify(init.body));
    const headers: Record<string, string> = { ...(a.headers as Record<string, string> | undefined), accept: init.accept ?? "application/json", "user-agent": userAgent };
    if (body) {
      headers["content-type"] = init.patch ? PATCH_TYPES[init.patch] : "application/json";
      headers["content-length"] = String(body.length);
    }
    if (method !== "GET") writes++;
    const options: RequestOptions = {
      ...a,
      method,
      host: url.hostname,
      port: url.port || (tls ? 443 : 80),
      path: `${url.pathname.replace(/\/+$/, "")}${path}${qs ? `?${qs}` : ""}`,
      headers,
      agent,
    };
    const signal = init.signal;
    return new Promise((resolve, reject) => {
      let settled = false;
      let res: IncomingMessage | undefined;
      /** Ends the exchange with an error: rejects if still pending, and destroys the request. */
      const fail = (e: Error) => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        if (!settled) { settled = true; reject(e); }
        req.destroy(e);
        res?.destroy(e);
      };
      // The signal's own reason when it is an Error, else a plain "aborted".
      const onAbort = () => fail(reasonOf(signal) ?? new Error(`${method} ${path}: aborted`));
      const timer = setTimeout(() => fail(new KubeTimeoutError(method, path, timeoutMs)), Math.max(1, timeoutMs - (Date.now() - started)));
      const req = (tls ? httpsRequest : httpRequest)(options, (r) => {
        res = r;
        const status = r.statusCode ?? 0;
        if (streaming && status >= 200 && status < 300) {
          // From here on the reader decides how long it waits; an abort still ends the stream.
          clearTimeout(timer);
          settled = true;
          r.on("error", () => undefined); // the reader sees errors; none may go unhandled
          r.once("close", () => signal?.removeEventListener("abort", onAbort));
          resolve({ status, res: r, text: "" });
          return;
        }
        const chunks: Buffer[] = [];
        r.on("data", (c: Buffer) => chunks.push(c));
        r.on("error", fail);
        r.on("end", () => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          resolve({ status, res: r, text: Buffer.concat(chunks).toString("utf8") });
        });
        r.on("close", () => { if (!r.complete) fail(new Error(`${method} ${path}: the connection closed before the answer was complete`)); });
      });
      req.on("error", fail);
      if (signal?.aborted) { onAbort(); return; }
      signal?.addEventListener("abort", onAbort, { once: true });
      req.end(body);
    });
  }

  function errorOf(status: number, text: string, method: string, path: string): KubeError {
    let reason = "Unknown";
    let message = text.slice(0, 500);
    try {
      const s = JSON.parse(text) as { reason?: string; message?: string };
      reason = s.reason ?? reason;
      message = s.message ?? message;
    } catch { /* not a Status */ }
    return new KubeError(status, reason, `${method} ${path}: ${status} ${reason}: ${message}`);
  }

  return {
    namespace,
    server,
    async request<T>(method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE", path: string, init: RequestInit = {}): Promise<T> {
      const { status, text } = await exchange(method, path, init, false);
      if (status < 200 || status >= 300) throw errorOf(status, text, method, path);
      return (text ? JSON.parse(text) : undefined) as T;
    },
    async stream(path, init) {
      const { status, res, text } = await exchange("GET", path, init, true);
      if (status < 200 || status >= 300) throw errorOf(status, text, "GET", path);
      return res;
    },
    writes: () => writes,
    close: () => agent.destroy(),
  };
}

/**
 * The client as seen by one holder of a scope (the operator while it leads): the same
 * connections, but every request also ends when `scope` is aborted, at once, wherever it is.
 * Closing it closes nothing (the scope's owner closes the client).
 */
export function scopedClient(client: KubeClient, scope: AbortSignal): KubeClient {
  setMaxListeners(0, scope); // one listener per request in flight, removed when it ends
  /** A signal aborted by the scope or by the caller's own signal, and how to let go of it. */
  const link = (own: AbortSignal | undefined) => {
    const ctl = new AbortController();
    const onAbort = () => ctl.abort(scope.aborted ? scope.reason : own?.reason);
    if (scope.aborted || own?.aborted) onAbort();
    scope.addEventListener("abort", onAbort, { once: true });
    own?.addEventListener("abort", onAbort, { once: true });
    return { signal: ctl.signal, release: () => { scope.removeEventListener("abort", onAbort); own?.removeEventListener("abort", onAbort); } };
  };
  return {
    namespace: client.namespace,
    server: client.server,
    async request(method, path, init = {}) {
      const l = link(init.signal);
      try { return await client.request(method, path, { ...init, signal: l.signal }); } finally { l.release(); }
    },
    async stream(path, init) {
      const l = link(init.signal);
      try {
        const res = await client.stream(path, { ...init, signal: l.signal });
        res.once("close", l.release);
        return res;
      } catch (e) { l.release(); throw e; }
    },
    writes: () => client.writes(),
    close: () => undefined,
  };
}

/** Path helpers for the resources Operon touches. */
export const paths = {
  pipelineRuns: (ns: string) => `/apis/operon.dev/v1alpha1/namespaces/${ns}/pipelineruns`,
  jobs: (ns: string) => `/apis/batch/v1/namespaces/${ns}/jobs`,
  pods: (ns: string) => `/api/v1/namespaces/${ns}/pods`,
  leases: (ns: string) => `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`,
  events: (ns: string) => `/api/v1/namespaces/${ns}/events`,
};
