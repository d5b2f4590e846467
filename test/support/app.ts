/**
 * Test harness for the api-server: a real app (buildApp) over a real local object store in
 * a fresh temporary directory, with helpers to make organizations, workspaces and keys.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import { createLocalObjectStore } from "../../adapters/local/object-store.js";
import { buildApp, type AppDeps } from "../../api-server/app.js";
import { ServiceStore, type Scope } from "../../services/store.js";
import { createEngine, type Engine } from "../../engine/engine.js";
import { createLocalRunStore } from "../../adapters/local/run-store.js";
import { createProcessExecutor } from "../../adapters/local/process-executor.js";
import type { Clock, ObjectStore } from "../../core/ports.js";
import type { ToolCatalogue } from "../../core/tools/index.js";
import { until } from "./wait.js";

export const SECRET = "test-signing-secret-0123456789abcdef";

export interface TestApp {
  app: FastifyInstance;
  store: ObjectStore;
  service: ServiceStore;
  dir: string;
  clock: Clock & { advance(ms: number): void };
  key(org: string, scopes: Scope[], workspaces?: string[] | null): Promise<string>;
  engine?: Engine;
  close(): Promise<void>;
}

export async function testApp(options: Partial<Pick<AppDeps, "maxUploadBytes" | "logger" | "llm" | "readers" | "viewerLimits">> & { publicUrl?: string; ttlSeconds?: number; rateLimit?: number; ipRateLimit?: number; store?: ObjectStore; engine?: { orgConcurrency?: number | ((org: string) => number); tools?: ToolCatalogue; referenceVolumes?: Record<string, string> } } = {}): Promise<TestApp> {
  const dir = mkdtempSync(join(tmpdir(), "operon-api-"));
  let offset = 0;
  const clock = { now: () => Date.now() + offset, advance: (ms: number) => { offset += ms; } };
  const store = options.store ?? createLocalObjectStore({ root: dir, publicUrl: options.publicUrl ?? "http://localhost", signingSecret: SECRET, clock });
  const service = new ServiceStore(store);
  let engine: Engine | undefined;
  let executor: ReturnType<typeof createProcessExecutor> | undefined;
  if (options.engine) {
    executor = createProcessExecutor({ dataDir: dir, store, clock, ...(options.engine.referenceVolumes ? { referenceVolumes: options.engine.referenceVolumes } : {}) });
    const limit = options.engine.orgConcurrency ?? 5;
    engine = createEngine({ runs: createLocalRunStore(dir), executor, store, clock, orgConcurrency: typeof limit === "function" ? limit : () => limit, ...(options.engine.tools ? { tools: options.engine.tools } : {}), ...(options.engine.referenceVolumes ? { referenceVolumes: Object.keys(options.engine.referenceVolumes) } : {}) });
  }
  const app = await buildApp({
    config: { publicUrl: options.publicUrl ?? "http://localhost", OPERON_KEY_CACHE_TTL_SECONDS: options.ttlSeconds ?? 30, OPERON_RATE_LIMIT_PER_MINUTE: options.rateLimit ?? 100_000, OPERON_RATE_LIMIT_PER_IP_PER_MINUTE: options.ipRateLimit ?? 1_000_000, storage: options.store ? "s3" : "local", signingSecret: SECRET },
    store, service, clock,
    ...(options.maxUploadBytes !== undefined ? { maxUploadBytes: options.maxUploadBytes } : {}),
    ...(options.logger !== undefined ? { logger: options.logger } : {}),
    ...(options.llm !== undefined ? { llm: options.llm } : {}),
    ...(options.readers !== undefined ? { readers: options.readers } : {}),
    ...(options.viewerLimits !== undefined ? { viewerLimits: options.viewerLimits } : {}),
    ...(engine ? { engine } : {}),
  });
  return {
    app, store, service, dir, clock,
    key: async (org, scopes, workspaces = null) => (await service.createKey({ organization: org, scopes, workspaces })).key,
    ...(engine ? { engine } : {}),
    close: async () => { await app.close(); await engine?.stop(); await executor?.shutdown(); rmSync(dir, { recursive: true, force: true }); },
  };
}

/** A multipart/form-data body built by hand (fields in order, then one file). */
export function multipartBody(fields: Array<[string, string]>, file?: { name: string; filename: string; content: Buffer | string; type?: string }) {
  const boundary = "----operon" + Math.random().toString(16).slice(2);
  const parts: Buffer[] = [];
  for (const [k, v] of fields) parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`));
  if (file) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${file.name}"; filename="${file.filename}"\r\nContent-Type: ${file.type ?? "application/octet-stream"}\r\n\r\n`));
    parts.push(Buffer.isBuffer(file.content) ? file.content : Buffer.from(file.content));
    parts.push(Buffer.from("\r\n"));
  }
  parts.push(Buffer.from(`--${boundary}--\r\n`));
  return { payload: Buffer.concat(parts), headers: { "content-type": `multipart/form-data; boundary=${boundary}` } };
}

/**
 * A run as `GET /v1/pipelines/:id` shows it, once it has ended; the timeout's error shows its
 * status and steps as last seen.
 */
export async function endedRun<R extends { status: string; steps?: unknown }>(a: TestApp, headers: Record<string, string>, id: string, opts: { workspace?: string; timeoutMs?: number } = {}): Promise<R> {
  let last: R | undefined;
  return until(() => `run ${id} to end (last seen ${last?.status}: ${JSON.stringify(last?.steps)})`, async () => {
    const r = await a.app.inject({ method: "GET", url: `/v1/pipelines/${id}?workspace_id=${opts.workspace ?? "ws1"}`, headers });
    last = r.json().data as R;
    return ["completed", "failed", "cancelled"].includes(last.status) ? last : undefined;
  }, opts.timeoutMs ?? 60_000, 100);
}

/** A stored object's bytes. */
export async function readStored(store: ObjectStore, key: string): Promise<Buffer> {
  const { body } = await store.get(key);
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(Buffer.from(c));
  return Buffer.concat(chunks);
}
