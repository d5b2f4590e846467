/**
 * A small HTTP client for the Kubernetes API. `@kubernetes/client-node` loads the kubeconfig
 * (file, `KUBECONFIG`, or the in-cluster service account) and applies its credentials; the
 * requests themselves are plain JSON over one keep-alive HTTPS agent, so the adapters see
 * the API's own objects (string timestamps, unknown fields kept) and every write counts.
 */
import { Agent as HttpsAgent, request as httpsRequest, type RequestOptions } from "node:https";
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { KubeConfig } from "@kubernetes/client-node";

export class KubeError extends Error {
  constructor(readonly status: number, readonly reason: string, message: string) {
    super(message);
    this.name = "KubeError";
  }
}

export const isNotFound = (e: unknown) => e instanceof KubeError && e.status === 404;
export const isConflict = (e: unknown) => e instanceof KubeError && e.status === 409 && e.reason !== "AlreadyExists";
export const isAlreadyExists = (e: unknown) => e instanceof KubeError && e.status === 409 && e.reason === "AlreadyExists";

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
}

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

  async function open(method: string, path: string, init: RequestInit = {}): Promise<IncomingMessage> {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(init.query ?? {})) if (v !== undefined) q.set(k, String(v));
    const qs = q.toString();
    const a = await authOptions();
    const body = init.body === undefined ? undefined : Buffer.from(JSON.stringify(init.body));
    const headers: Record<string, string> = { ...(a.headers as Record<string, string> | undefined), accept: "application/json" };
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
      ...(init.signal ? { signal: init.signal } : {}),
    };
    return new Promise((resolve, reject) => {
      const req = (tls ? httpsRequest : httpRequest)(options, resolve);
      req.on("error", reject);
      req.end(body);
    });
  }

  async function readBody(res: IncomingMessage): Promise<string> {
    const chunks: Buffer[] = [];
    for await (const c of res) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString("utf8");
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
    async request<T>(method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE", path: string, init?: RequestInit): Promise<T> {
      const res = await open(method, path, init);
      const text = await readBody(res);
      const status = res.statusCode ?? 0;
      if (status < 200 || status >= 300) throw errorOf(status, text, method, path);
      return (text ? JSON.parse(text) : undefined) as T;
    },
    async stream(path, init) {
      const res = await open("GET", path, init);
      const status = res.statusCode ?? 0;
      if (status < 200 || status >= 300) throw errorOf(status, await readBody(res), "GET", path);
      return res;
    },
    writes: () => writes,
    close: () => agent.destroy(),
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
