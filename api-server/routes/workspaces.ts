/** GET /v1/workspaces: the key's organization's workspaces, filtered to the key's allowed set. */
import type { FastifyInstance } from "fastify";
import { listEnvelope, requireAuth } from "./common.js";

export async function workspaceRoutes(app: FastifyInstance): Promise<void> {
  app.get("/v1/workspaces", { config: { scope: "any" }, schema: { tags: ["workspaces"], summary: "List workspaces" } }, async (req) => {
    const auth = requireAuth(req);
    const all = await app.operon.deps.service.listWorkspaces(auth.organization);
    const visible = all.filter((w) => auth.workspaces === null || auth.workspaces.has(w.id));
    return listEnvelope(visible.map((w) => ({ id: w.id, name: w.name, created_at: w.created_at })), false, null);
  });
}
