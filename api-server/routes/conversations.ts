/** Read side of conversations: list (most recent activity first, `before` cursor) and one. */
import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { OperonError } from "../../core/errors.js";
import { dataOf, errorResponses, jsonResponse, listOf } from "../openapi.js";
import { listEnvelope, requireAuth, workspaceId } from "./common.js";

const conversationFields = {
  id: z.string(),
  title: z.string(),
  message_count: z.number().int(),
  created_at: z.string(),
  updated_at: z.string(),
};
const ConversationSummarySchema = z.object(conversationFields).meta({ id: "ConversationSummary" });
/** A message as stored: role and content, and whatever else was recorded with it. */
const MessageSchema: z.ZodType<{ role: string; content: string; created_at?: string }> = z.looseObject({ role: z.string(), content: z.string(), created_at: z.string().optional() });
const ConversationSchema = z.object({ ...conversationFields, messages: z.array(MessageSchema) }).meta({ id: "Conversation" });

export async function conversationRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const config = { scope: "conversations" as const };

  r.get("/v1/conversations", {
    config,
    schema: {
      tags: ["conversations"], summary: "List conversations", operationId: "listConversations",
      description: "Most recent activity first; `before` (a conversation id, e.g. the previous page's next_cursor) for the page after it.",
      querystring: z.object({ workspace_id: workspaceId, limit: z.coerce.number().int().min(1).max(100).default(20), before: z.string().min(1).optional() }),
      response: { 200: jsonResponse(listOf(ConversationSummarySchema), "A page of conversations."), ...errorResponses(400, 401, 403, 404, 429, 500, 503) },
    },
  }, async (req) => {
    const auth = requireAuth(req);
    const ws = await app.operon.auth.workspace(auth, req.query.workspace_id);
    const page = await app.operon.deps.service.listConversations(ws.organization, ws.id, req.query.limit, req.query.before);
    if (!page) throw new OperonError("invalid_request", `before: conversation ${JSON.stringify(req.query.before)} is not in this workspace`, { field: "before" });
    const data = page.items.map((c) => ({ id: c.id, title: c.title, message_count: c.messages.length, created_at: c.created_at, updated_at: c.updated_at }));
    const last = data[data.length - 1];
    return listEnvelope(data, page.hasMore, page.hasMore && last ? last.id : null);
  });

  r.get("/v1/conversations/:id", {
    config,
    schema: {
      tags: ["conversations"], summary: "Get a conversation with its messages", operationId: "getConversation",
      params: z.object({ id: z.string().min(1).max(128) }),
      querystring: z.object({ workspace_id: workspaceId }),
      response: { 200: jsonResponse(dataOf(ConversationSchema), "The conversation with its full message history."), ...errorResponses(400, 401, 403, 404, 429, 500, 503) },
    },
  }, async (req) => {
    const auth = requireAuth(req);
    const ws = await app.operon.auth.workspace(auth, req.query.workspace_id);
    const c = await app.operon.deps.service.getConversation(ws.organization, ws.id, req.params.id);
    if (!c) throw new OperonError("not_found", `conversation ${JSON.stringify(req.params.id)} not found in workspace ${JSON.stringify(ws.id)}`);
    return { data: { id: c.id, title: c.title, message_count: c.messages.length, created_at: c.created_at, updated_at: c.updated_at, messages: c.messages } };
  });
}
