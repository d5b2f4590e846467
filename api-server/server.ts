/**
 * `operon serve` / `operon api-server`: the HTTP server started from the environment. The
 * runtime (store, service data, engine) comes from wiring/runtime.ts; this file listens,
 * prints how to call it, and closes gracefully on SIGTERM/SIGINT (in-flight requests finish
 * first). An unhandled rejection or uncaught exception is logged and counted instead of
 * stopping the process.
 */
import { join, resolve } from "node:path";
import type { FastifyInstance } from "fastify";
import type { Config } from "../core/config.js";
import { bootstrap, createApiServerClusterEngine, createEmbeddedEngine, createRuntime } from "../wiring/runtime.js";
import { buildApp } from "./app.js";
import { installLastResortHandlers } from "./last-resort.js";

export async function startServer(config: Config, log: (s: string) => void, version?: string): Promise<FastifyInstance> {
  const rt = await createRuntime(config);
  const key = await bootstrap(rt);
  const parts = config.OPERON_MODE === "embedded"
    ? await createEmbeddedEngine(rt, log)
    : await createApiServerClusterEngine(config, rt.store, { log });
  const app = await buildApp({
    config: { ...config, signingSecret: rt.secret },
    store: rt.store,
    service: rt.service,
    logger: { level: process.env.LOG_LEVEL ?? "info" },
    engine: parts.engine,
    llm: {
      ...(config.OPERON_LLM_PROVIDER && config.OPERON_LLM_MODEL
        ? { settings: { provider: config.OPERON_LLM_PROVIDER, model: config.OPERON_LLM_MODEL, baseUrl: config.OPERON_LLM_BASE_URL, apiKey: config.OPERON_LLM_API_KEY } }
        : {}),
      limits: { maxToolRounds: config.OPERON_LLM_MAX_TOOL_ROUNDS, deadlineMs: config.OPERON_LLM_TURN_TIMEOUT_SECONDS * 1000, maxOutputTokens: config.OPERON_LLM_MAX_OUTPUT_TOKENS },
    },
    ...(version ? { version } : {}),
  });
  app.addHook("onClose", async () => { await parts.stop(); });
  // A stray rejection or throw is logged (one line, no stack) and counted, not fatal.
  const uninstall = installLastResortHandlers((line) => app.log.error(line), app.operon.metrics.uncaughtErrors);
  app.addHook("onClose", async () => { uninstall(); });
  app.operon.auth.start();
  await app.listen({ port: config.PORT, host: config.host });
  const base = config.publicUrl;
  log(`Operon (${config.OPERON_MODE} mode, ${config.storage} storage) listening on ${base}`);
  if (config.contentUrl) log(`Stored files are served on ${config.contentUrl} only (OPERON_CONTENT_URL): it must reach this server with that Host`);
  if (key) {
    log(`First start: created organization "default", workspace "default" and this API key (shown once; also in ${join(resolve(config.OPERON_DATA_DIR), "bootstrap-key")}):`);
    log(`  ${key}`);
  }
  log(`Try: curl -H "Authorization: Bearer $(cat ${join(config.OPERON_DATA_DIR, "bootstrap-key")})" ${base}/v1/workspaces`);
  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    log(`${signal}: finishing in-flight requests, then stopping`);
    app.close().then(() => process.exit(0), () => process.exit(1));
  };
  process.once("SIGTERM", () => shutdown("SIGTERM"));
  process.once("SIGINT", () => shutdown("SIGINT"));
  return app;
}
