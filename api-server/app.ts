/**
 * `buildApp(deps)`: the whole HTTP API as a Fastify instance that never listens (tests use
 * `app.inject()`; server.ts listens). Cross-cutting concerns live here — request ids, the
 * error envelope, authentication and scopes, rate limits, metrics, OpenAPI — and each area
 * of the API is a plugin under routes/.
 */
import { randomUUID } from "node:crypto";
import Fastify, { type FastifyInstance } from "fastify";
import rateLimit, { normalizeIP } from "@fastify/rate-limit";
import swagger from "@fastify/swagger";
import { validatorCompiler } from "fastify-type-provider-zod";
import type { Clock, ObjectStore } from "../core/ports.js";
import type { Config } from "../core/config.js";
import { Authenticator, type AuthContext } from "./auth.js";
import { clientDetails, clientMessage, errorReply } from "./errors.js";
import { OperonError } from "../core/errors.js";
import { createMetrics, type Metrics } from "./metrics.js";
import { OPENAPI_PATH, documentationOnlySerializer, swaggerOptions } from "./openapi.js";
import { loggerOptions } from "./logging.js";
import type { Scope, ServiceStore } from "../services/store.js";
import { conversationRoutes } from "./routes/conversations.js";
import { fileRoutes } from "./routes/files.js";
import { storageRoutes } from "./routes/storage.js";
import { PRESIGNED_PATH } from "../adapters/local/presign.js";
import { systemRoutes } from "./routes/system.js";
import { workspaceRoutes } from "./routes/workspaces.js";
import { pipelineRoutes } from "./routes/pipelines.js";
import { toolRoutes } from "./routes/tools.js";
import { viewerRoutes } from "./routes/viewers.js";
import type { ReaderPoolOptions } from "../media/readers/pool.js";
import type { ViewerDataDeps } from "../media/viewer-data.js";
import type { ToolRunner } from "../adapters/local/tool-runner.js";
import type { Engine } from "../engine/engine.js";
import { RenderJobs } from "../media/render-jobs.js";
import { renderRoutes } from "./routes/render.js";
import { mcpRoutes } from "./routes/mcp.js";
import { PipelineService } from "../services/pipelines.js";
import { queryRoutes } from "./routes/query.js";
import type { AssistantDeps } from "../assistant/tools.js";
import type { AgentLimits } from "../assistant/agent.js";
import { createProvider, type LlmProvider, type LlmSettings } from "../assistant/providers/index.js";
import type { Checksums } from "../services/checksums.js";

export interface AppDeps {
  config: Pick<Config, "publicUrl" | "OPERON_KEY_CACHE_TTL_SECONDS" | "OPERON_RATE_LIMIT_PER_MINUTE" | "storage"> &
    Partial<Pick<Config, "OPERON_RATE_LIMIT_PER_IP_PER_MINUTE" | "contentUrl">> & { signingSecret: string };
  store: ObjectStore;
  service: ServiceStore;
  clock?: Clock;
  logger?: boolean | object;
  /** Largest small upload (default 500 MB). */
  maxUploadBytes?: number;
  /** The pipeline engine; without it the pipelines routes are absent. */
  engine?: Engine;
  /** Render jobs (default: created from `engine`, with its slots). */
  renders?: RenderJobs;
  /** The server's version, as MCP's initialize reports it. */
  version?: string;
  /** Runs samtools/bcftools/tabix for viewer links (default: locally, sandboxed where bwrap works). */
  toolRunner?: ToolRunner;
  /** The viewers' per-organization reader workers: heap, deadline, how many (default: media/readers/pool.ts). */
  readers?: ReaderPoolOptions;
  /** A viewer preparation's deadline and largest file (default: media/viewer-data.ts). */
  viewerLimits?: ViewerDataDeps["limits"];
  /** The agent's LLM (OPERON_LLM_*): settings, or a provider object; neither: /v1/query answers 503. */
  llm?: { settings?: LlmSettings; provider?: LlmProvider; limits?: Partial<AgentLimits>; /** POST /v1/query/stream's keep-alive comment interval (default 15 s). */ keepAliveMs?: number };
}

export type RouteScope = Scope | "any" | "public";

declare module "fastify" {
  interface FastifyRequest { auth?: AuthContext; startedAt?: bigint }
  interface FastifyContextConfig { scope?: RouteScope }
  interface FastifyInstance { operon: { deps: AppDeps & { clock: Clock }; auth: Authenticator; metrics: Metrics; /** Set by the files routes. */ checksums?: Checksums } }
}

export const MAX_UPLOAD_BYTES = 500 * 1000 * 1000;
/** Seconds a client is told to wait (Retry-After) when the object store is unavailable. */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;
/** Requests per minute per client address when the configuration does not say (as core/config.ts). */
export const DEFAULT_RATE_LIMIT_PER_IP_PER_MINUTE = 12_000;

/** Requests under the rate limits: the API under /v1/ (except the OpenAPI document) and MCP. */
const rateLimited = (url: string) => (url.startsWith("/v1/") && !url.startsWith(OPENAPI_PATH)) || url === "/mcp" || url.startsWith("/mcp?");

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const clock = deps.clock ?? { now: () => Date.now() };
  const app = Fastify({
    // Credentials (key headers, presigned signatures) are redacted from every log line.
    logger: loggerOptions(deps.logger),
    requestIdHeader: false,
    genReqId: (req) => {
      const incoming = req.headers["x-request-id"];
      return typeof incoming === "string" && /^[A-Za-z0-9._:-]{1,64}$/.test(incoming) ? incoming : randomUUID();
    },
    bodyLimit: 1024 * 1024,
    // Viewer-link tokens travel as one path parameter (a signed grant of up to ~3 KB).
    routerOptions: { maxParamLength: 4200 },
    return503OnClosing: true,
    forceCloseConnections: "idle",
  });
  app.setValidatorCompiler(validatorCompiler);
  // Response schemas document the API (OpenAPI) and never reshape or refuse a reply.
  app.setSerializerCompiler(documentationOnlySerializer);

  const auth = new Authenticator(deps.service, deps.config.OPERON_KEY_CACHE_TTL_SECONDS, clock);
  const metrics = createMetrics();
  app.decorate("operon", { deps: { ...deps, clock }, auth, metrics });

  const rateLimitError = (message: string) => Object.assign(new OperonError("rate_limited", message), { statusCode: 429 });

  // Two rate limits: per API key (after authentication, below) and, first, per client
  // address before authentication, so that a flood of bad keys is refused before each one
  // costs a key lookup in the store. Fixed one-minute windows, 429 with Retry-After beyond.
  await app.register(rateLimit, {
    global: true,
    hook: "preHandler",
    max: deps.config.OPERON_RATE_LIMIT_PER_MINUTE,
    timeWindow: 60_000,
    keyGenerator: (req) => req.auth?.keyId ?? `ip:${req.ip}`,
    allowList: (req) => !rateLimited(req.url),
    errorResponseBuilder: (_req, ctx) => rateLimitError(`rate limit of ${ctx.max} requests per minute exceeded; retry in ${Math.ceil(ctx.ttl / 1000)} s`),
  });
  const perAddressMax = deps.config.OPERON_RATE_LIMIT_PER_IP_PER_MINUTE ?? DEFAULT_RATE_LIMIT_PER_IP_PER_MINUTE;
  // IPv6 clients are counted by /64, as the plugin does by default: one host usually has many.
  const perAddress = app.createRateLimit({ max: perAddressMax, timeWindow: 60_000, keyGenerator: (req) => (req.ip ? normalizeIP(req.ip) : "unknown") });

  // OPERON_CONTENT_URL: requests naming the content origin reach the presigned storage route
  // only, and the API's own name no longer serves it, so stored files are never fetched from
  // the origin of the API and the viewer pages (docs/security.md#user-content).
  const contentHost = deps.config.contentUrl === undefined ? undefined : new URL(deps.config.contentUrl).host.toLowerCase();

  app.addHook("onRequest", async (req, reply) => {
    req.startedAt = process.hrtime.bigint();
    reply.header("x-request-id", req.id);
    if (contentHost !== undefined) {
      const storage = req.routeOptions.url === PRESIGNED_PATH;
      const onContent = req.host.toLowerCase() === contentHost;
      if (onContent && !storage) throw new OperonError("not_found", `no route for ${req.method} ${req.url.split("?")[0]} on the content origin: it serves presigned storage URLs only`);
      if (!onContent && storage) throw new OperonError("not_found", `presigned storage URLs are served on the content origin (${deps.config.contentUrl}) only`);
    }
    // Every matched route needs a key unless it says `public`: a route that forgot to declare
    // its scope is closed, not open. Unmatched URLs go straight to the 404 handler.
    if (req.routeOptions.url === undefined) return;
    if (rateLimited(req.url)) {
      const limit = await perAddress(req);
      if (!limit.isAllowed && limit.isExceeded) {
        void reply.headers({ "x-ratelimit-limit": limit.max, "x-ratelimit-remaining": 0, "x-ratelimit-reset": limit.ttlInSeconds, "retry-after": limit.ttlInSeconds });
        throw rateLimitError(`rate limit of ${limit.max} requests per minute from one address exceeded; retry in ${limit.ttlInSeconds} s`);
      }
    }
    const scope = req.routeOptions.config.scope ?? "any";
    if (scope === "public") return;
    const r = await auth.authenticate(req.headers);
    if ("failure" in r) {
      metrics.authFailures.inc({ reason: r.failure });
      throw new OperonError("unauthorized", {
        missing: "an API key is required (Authorization: Bearer <key> or X-API-Key)",
        malformed: "the API key is malformed (expected sk_live_ followed by 32 letters and digits)",
        unknown: "the API key is not valid",
        revoked: "the API key has been revoked",
      }[r.failure]);
    }
    auth.requireScope(r, scope);
    req.auth = r;
  });

  // One histogram child per (method, route, status), looked up by a string: prom-client's
  // label hashing on every observe() was a measurable share of a small request's cost.
  const durationChildren = new Map<string, { observe(v: number): void }>();
  app.addHook("onResponse", async (req, reply) => {
    const seconds = req.startedAt ? Number(process.hrtime.bigint() - req.startedAt) / 1e9 : 0;
    const route = req.routeOptions.url ?? "unmatched";
    const k = `${req.method} ${route} ${reply.statusCode}`;
    let child = durationChildren.get(k);
    if (!child) {
      child = metrics.requestDuration.labels({ method: req.method, route, status: String(reply.statusCode) });
      durationChildren.set(k, child);
    }
    child.observe(seconds);
  });

  app.setErrorHandler((err: unknown, req, reply) => {
    // The code → status table and Fastify's own errors: api-server/errors.ts.
    const { status, body } = errorReply(err, req.log);
    // Whatever produced it, a 503 says when to come back.
    if (status === 503) void reply.header("retry-after", String(UNAVAILABLE_RETRY_AFTER_SECONDS));
    // Whatever produced it, a message never carries a server path or a credential to the client.
    const details = body.details ? { details: clientDetails(body.details) as Record<string, unknown> } : {};
    void reply.status(status).type("application/json").send({ error: body.error, message: clientMessage(body.message), ...details, request_id: req.id });
  });

  app.setNotFoundHandler((req, reply) => {
    void reply.status(404).send({ error: "not_found", message: `no route for ${req.method} ${req.url.split("?")[0]}`, request_id: req.id });
  });

  // The OpenAPI document (openapi.ts), served by routes/system.ts.
  await app.register(swagger, swaggerOptions(deps.config.publicUrl));

  await app.register(systemRoutes);
  await app.register(workspaceRoutes);
  await app.register(fileRoutes, { maxUploadBytes: deps.maxUploadBytes ?? MAX_UPLOAD_BYTES });
  await app.register(conversationRoutes);
  if (deps.config.storage === "local") await app.register(storageRoutes);
  await app.register(toolRoutes, deps.engine ? { engine: deps.engine } : {});
  if (deps.engine) await app.register(pipelineRoutes, { engine: deps.engine });
  await app.register(viewerRoutes, { ...(deps.toolRunner ? { runner: deps.toolRunner } : {}), ...(deps.readers ? { readers: deps.readers } : {}), ...(deps.viewerLimits ? { limits: deps.viewerLimits } : {}) });
  let renders = deps.renders;
  if (!renders && deps.engine) {
    // A render waits for its slot in the organization's one queue (the engine's admission path).
    renders = new RenderJobs({ store: deps.store, clock, slots: deps.engine.slots, metrics: metrics.registry, log: (m) => app.log.warn(m) });
    // One embedded server per data directory: jobs an earlier process held cannot still be running.
    await renders.start({ previousProcessesAreGone: deps.engine.mode === "embedded" });
    const owned = renders;
    app.addHook("onClose", async () => { await owned.stop(); });
  }
  if (renders) await app.register(renderRoutes, { jobs: renders });
  // The assistant tools, over MCP and to the agent: the same service objects as the routes above.
  const assistant: AssistantDeps = {
    store: deps.store, service: deps.service, clock, access: auth.access, publicUrl: deps.config.publicUrl, signingSecret: deps.config.signingSecret,
    storage: deps.config.storage, engine: deps.engine, renders,
    pipelines: deps.engine ? new PipelineService({ engine: deps.engine, store: deps.store, access: auth.access, clock }) : undefined,
  };
  await app.register(mcpRoutes, { version: deps.version ?? "unknown", deps: assistant });
  const provider = deps.llm?.provider ?? (deps.llm?.settings ? createProvider(deps.llm.settings) : undefined);
  await app.register(queryRoutes, { query: { assistant, provider, limits: deps.llm?.limits }, ...(deps.llm?.keepAliveMs !== undefined ? { keepAliveMs: deps.llm.keepAliveMs } : {}) });

  app.addHook("onClose", async () => { await auth.stop(); });
  return app;
}
