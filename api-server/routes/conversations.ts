/** Read side of conversations: list (most recent activity first, `before` cursor) and one. */
import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { ApiError } from "../errors.js";
import { listEnvelope, requireAuth, workspaceId } from "./common.js";

export async function conversationRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const config = { scope: "conversations" as const };

  r.get("/v1/conversations", {
    config,
    schema: {
      tags: ["conversations"], summary: "List conversations",
      querystring: z.object({ workspace_id: workspaceId, limit: z.coerce.number().int().min(1).max(100).default(20), before: z.string().min(1).optional() }),
    },
  }, async (req) => {
    const auth = requireAuth(req);
    const ws = await app.operon.auth.workspace(auth, req.query.workspace_id);
    const page = await app.operon.deps.service.listConversations(ws.organization, ws.id, req.query.limit, req.query.before);
    if (!page) throw new ApiError("invalid_request", `before: conversation ${JSON.stringify(req.query.before)} is not in this workspace`, { field: "before" });
    const data = page.items.map((c) => ({ id: c.id, title: c.title, message_count: c.messages.length, created_at: c.created_at, updated_at: c.updated_at }));
    const last = data[data.length - 1];
    return listEnvelope(data, page.hasMore, page.hasMore && last ? last.id : null);
  });

  r.get("/v1/conversations/:id", {
    config,
    schema: {
      tags: ["conversations"], summary: "Get a conversation with its messages",
      params: z.object({ id: z.string().min(1).max(128) }),
      querystring: z.object({ workspace_id: workspaceId }),
    },
  }, async (req) => {
    const auth = requireAuth(req);
    const ws = await app.operon.auth.workspace(auth, req.query.workspace_id);
    const c = await app.operon.deps.service.getConversation(ws.organization, ws.id, req.params.id);
    if (!c) throw new ApiError("not_found", `conversation ${JSON.stringify(req.params.id)} not found in workspace ${JSON.stringify(ws.id)}`);
    return { data: { id: c.id, title: c.title, message_count: c.messages.length, created_at: c.created_at, updated_at: c.updated_at, messages: c.messages } };
  });
}
