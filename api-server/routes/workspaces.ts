/** GET /v1/workspaces: the key's organization's workspaces, filtered to the key's allowed set. */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { errorResponses, jsonResponse, listOf } from "../openapi.js";
import { listEnvelope, requireAuth } from "./common.js";

const WorkspaceSchema = z.object({ id: z.string(), name: z.string(), created_at: z.string() }).meta({ id: "Workspace" });

export async function workspaceRoutes(app: FastifyInstance): Promise<void> {
  app.get("/v1/workspaces", { config: { scope: "any" }, schema: {
    tags: ["workspaces"], summary: "List workspaces", operationId: "listWorkspaces",
    description: "The workspaces of the key's organization that the key may use (all of them for an unrestricted key). Any scope.",
    response: { 200: jsonResponse(listOf(WorkspaceSchema), "The workspaces (one page: has_more is false)."), ...errorResponses(401, 429, 500, 503) },
  } }, async (req) => {
    const auth = requireAuth(req);
    const visible = await app.operon.auth.access.visibleWorkspaces(auth);
    return listEnvelope(visible.map((w) => ({ id: w.id, name: w.name, created_at: w.created_at })), false, null);
  });
}
