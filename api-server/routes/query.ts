/**
 * The agent over HTTP (spec: Agent queries; DESIGN §11): `POST /v1/query` answers a prompt
 * with one agent turn — the model chaining the assistant tools with the key's authority —
 * and records it as a conversation (assistant/query.ts). Without a configured provider it is
 * a 503 naming the variables to set; a provider failure is a 502 `upstream_error`.
 */
import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { runQuery, type QueryDeps } from "../../assistant/query.js";
import { ApiError } from "../errors.js";
import { dataOf, errorResponses, jsonResponse } from "../openapi.js";
import { requireAuth } from "./common.js";

const promptField = z.string().min(1, "is required").max(32_000);

export const QueryBodySchema = z.object({
  prompt: promptField.optional().describe("What the user asks (required; `query` and `message` are accepted as aliases)."),
  query: promptField.optional().describe("Alias of prompt."),
  message: promptField.optional().describe("Alias of prompt."),
  workspace_id: z.string().min(1).max(63).optional().describe("The workspace the agent acts in and the conversation is kept in. Required when the key is limited to workspaces; otherwise the organization's `default` workspace (or its only one)."),
  conversation_id: z.string().min(1).max(128).optional().describe("Continue this conversation (of the same workspace)."),
});

const ToolCallSchema = z.object({
  id: z.string(),
  tool: z.string().describe("The assistant tool's name (as MCP lists it)."),
  input: z.unknown().describe("The arguments the model gave."),
  status: z.enum(["ok", "error"]),
  summary: z.string().describe("One line about the outcome (an error starts with its code)."),
  duration_ms: z.number().int(),
}).meta({ id: "AgentToolCall" });

const QueryAnswerSchema = z.object({
  conversation_id: z.string(),
  message_id: z.string().describe("The assistant message of this turn in the conversation."),
  answer: z.string(),
  tool_calls: z.array(ToolCallSchema),
  model: z.string().describe("The model that answered, as the provider names it."),
  usage: z.object({ input_tokens: z.number().int(), output_tokens: z.number().int() }).describe("Tokens of the whole turn, all model calls together."),
}).meta({ id: "QueryAnswer" });

export async function queryRoutes(app: FastifyInstance, opts: { query: QueryDeps }): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  r.post("/v1/query", {
    config: { scope: "query" },
    schema: {
      tags: ["query"], summary: "Ask the agent (one turn, answered when done)", operationId: "query",
      description: "The model picks and chains the assistant tools (the ones the key's scopes allow, in the key's workspaces) until it answers, within the configured limits (tool rounds, output tokens, a deadline). The turn is recorded as a conversation (GET /v1/conversations). 503 when no LLM provider is configured; 502 `upstream_error` with the provider's message when it fails.",
      body: QueryBodySchema,
      response: { 200: jsonResponse(dataOf(QueryAnswerSchema), "The answer, the tool calls made and the tokens used."), ...errorResponses(400, 401, 403, 404, 429, 500, 502, 503) },
    },
  }, async (req) => {
    const auth = requireAuth(req);
    const b = req.body;
    const prompt = b.prompt ?? b.query ?? b.message;
    if (prompt === undefined) throw new ApiError("invalid_request", "prompt: is required (or its alias query or message)", { field: "prompt" });
    // The turn is not tied to the connection: a client that goes away does not stop it, and it is recorded.
    const data = await runQuery(opts.query, auth, { prompt, workspace_id: b.workspace_id, conversation_id: b.conversation_id }, { log: (err) => req.log.error({ err }, "assistant tool failed") });
    return { data };
  });
}
