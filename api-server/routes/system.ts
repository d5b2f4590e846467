/** Health, readiness, Prometheus metrics and the OpenAPI document: no key needed, documented under the `system` tag. */
import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { OperonError, messageOf } from "../../core/errors.js";
import { OPENAPI_PATH, PUBLIC, errorResponses, jsonResponse, untypedReply } from "../openapi.js";

export async function systemRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const config = { scope: "public" as const };
  const tags = ["system"];
  r.get("/healthz", {
    config,
    schema: {
      ...PUBLIC, tags, operationId: "getHealth", summary: "Liveness probe",
      description: "Answers while the process serves HTTP; checks nothing else (an orchestrator restarts the process when it stops answering).",
      response: { 200: jsonResponse(z.object({ status: z.literal("ok") }), "The process is alive."), ...errorResponses(500) },
    },
  }, async () => ({ status: "ok" as const }));
  r.get("/readyz", {
    config,
    schema: {
      ...PUBLIC, tags, operationId: "getReadiness", summary: "Readiness probe: object storage reachable",
      response: { 200: jsonResponse(z.object({ status: z.literal("ready") }), "Object storage answered: the server can take requests."), ...errorResponses(500, 503) },
    },
  }, async () => {
    try {
      await app.operon.deps.store.ping();
    } catch (e) {
      throw new OperonError("unavailable", `object storage is not reachable: ${messageOf(e)}`);
    }
    return { status: "ready" as const };
  });
  r.get("/metrics", {
    config,
    schema: {
      ...PUBLIC, tags, operationId: "getMetrics", summary: "Prometheus metrics (text exposition format)",
      description: "Request durations, authentication failures, the engine's step and queue metrics (docs/metrics.md).",
      response: { 200: { description: "Prometheus text exposition format 0.0.4.", content: { "text/plain": { schema: z.string() } } }, ...errorResponses(500) },
    },
  }, async (_req, reply) => {
    void reply.type(app.operon.metrics.registry.contentType);
    const engine = app.operon.deps.engine;
    return (await app.operon.metrics.registry.metrics()) + (engine ? await engine.metrics.metrics() : "");
  });
  r.get(OPENAPI_PATH, {
    config,
    schema: {
      ...PUBLIC, tags, operationId: "getOpenApiDocument", summary: "This OpenAPI 3.1 document",
      response: { 200: jsonResponse(untypedReply(z.record(z.string(), z.unknown())), "The OpenAPI 3.1 document of this server."), ...errorResponses(500) },
    },
  }, async () => app.swagger() as unknown as Record<string, unknown>);
}
