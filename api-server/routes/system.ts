/** Health, readiness, Prometheus metrics and the OpenAPI document: no key needed. */
import type { FastifyInstance } from "fastify";
import { ApiError } from "../errors.js";

export async function systemRoutes(app: FastifyInstance): Promise<void> {
  const config = { scope: "public" as const };
  app.get("/healthz", { config, schema: { hide: true } }, async () => ({ status: "ok" }));
  app.get("/readyz", { config, schema: { hide: true } }, async () => {
    try {
      await app.operon.deps.store.ping();
    } catch (e) {
      throw new ApiError("unavailable", `object storage is not reachable: ${e instanceof Error ? e.message : String(e)}`);
    }
    return { status: "ready" };
  });
  app.get("/metrics", { config, schema: { hide: true } }, async (_req, reply) => {
    void reply.type(app.operon.metrics.registry.contentType);
    const engine = app.operon.deps.engine;
    return (await app.operon.metrics.registry.metrics()) + (engine ? await engine.metrics.metrics() : "");
  });
  app.get("/v1/openapi.json", { config, schema: { hide: true } }, async () => app.swagger());
}
