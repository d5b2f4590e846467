/**
 * The agent over HTTP (spec: Agent queries; docs/api.md#query): `POST /v1/query` answers a prompt
 * with one agent turn — the model chaining the assistant tools with the key's authority —
 * and records it as a conversation (assistant/query.ts). Without a configured provider it is
 * a 503 naming the variables to set; a provider failure is a 502 `upstream_error`.
 */
import { PassThrough } from "node:stream";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import type { QueryDeps } from "../../assistant/query.js";
import { TurnRegistry, type RunningTurn } from "../../assistant/turns.js";
import { OperonError } from "../../core/errors.js";
import { dataOf, errorResponses, jsonResponse, untypedReply } from "../openapi.js";
import { requireAuth } from "./common.js";

const promptField = z.string().min(1, "is required").max(32_000);

export const QueryBodySchema = z.object({
  prompt: promptField.optional().describe("What the user asks (required; `query` and `message` are accepted as aliases)."),
  query: promptField.optional().describe("Alias of prompt."),
  message: promptField.optional().describe("Alias of prompt."),
  workspace_id: z.string().min(1).max(63).optional().describe("The workspace the agent acts in and the conversation is kept in. Required when the key is limited to workspaces; otherwise the organization's `default` workspace (or its only one)."),
  conversation_id: z.string().min(1).max(128).optional().describe("Continue this conversation (of the same workspace)."),
  require_confirmation: z.boolean().optional().describe("When true, a tool that spends compute or changes data (one not annotated read-only) waits for POST /v1/query/confirm: the turn pauses with a `pending_action`."),
});

const PendingActionSchema = z.object({
  action_id: z.string().describe("Pass to POST /v1/query/confirm."),
  tool: z.string(),
  input: z.unknown().describe("The arguments the model gave."),
}).meta({ id: "PendingAction" });

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
  pending_action: PendingActionSchema.optional().describe("Present when the turn is paused (require_confirmation): the action waiting for POST /v1/query/confirm; `answer` is empty and tool_calls and usage are those so far."),
}).meta({ id: "QueryAnswer" });

const EVENT_STREAM_DESCRIPTION = [
  "Server-sent events, each with `id:` (its sequence number in the turn, from 1), `event:` (its type) and `data:` (a JSON object whose `type` is the event's):",
  "`status` (the first: `conversation_id`, `workspace_id`), `content` (`delta`: the model's text), `tool_call` (`id`, `tool`, `input`), `tool_result` (`id`, `tool`, `status` ok or error, `summary`), `pending_action` (`action_id`, `tool`, `input`, `conversation_id`: the turn waits for POST /v1/query/confirm),",
  "then `done` (`answer`, `conversation_id`, `message_id`, `model`, `usage`) or `error` (`code`, `message`), after which the stream ends. A comment line keeps the connection alive every 15 s.",
].join(" ");
const eventStream = (description: string) => ({ description: `${description} ${EVENT_STREAM_DESCRIPTION}`, content: { "text/event-stream": { schema: untypedReply(z.string()) } } });

const lastEventId = (req: FastifyRequest, query?: string): number => {
  const raw = req.headers["last-event-id"] ?? query;
  const n = Number(Array.isArray(raw) ? raw[0] : raw);
  return Number.isInteger(n) && n > 0 ? n : 0;
};

/** The turn's events after `after` as server-sent events, live until the turn ends; a client going away only unsubscribes. */
function sendEvents(reply: FastifyReply, turn: RunningTurn, after: number, keepAliveMs: number): FastifyReply {
  const stream = new PassThrough();
  let unsubscribe = () => {};
  const keepAlive = setInterval(() => stream.write(": keep-alive\n\n"), keepAliveMs);
  const close = () => { clearInterval(keepAlive); unsubscribe(); };
  stream.on("close", close);
  unsubscribe = turn.subscribe(after,
    (e) => { stream.write(`id: ${e.id}\nevent: ${e.type}\ndata: ${JSON.stringify(e.data)}\n\n`); },
    () => { close(); stream.end(); });
  return reply.header("cache-control", "no-cache").header("x-accel-buffering", "no").type("text/event-stream; charset=utf-8").send(stream);
}

const ConversationIdSchema = z.string().min(1).max(128);

/** The prompt, from `prompt` or its aliases `query` and `message`. */
function promptOf(b: { prompt?: string | undefined; query?: string | undefined; message?: string | undefined }): string {
  const prompt = b.prompt ?? b.query ?? b.message;
  if (prompt === undefined) throw new OperonError("invalid_request", "prompt: is required (or its alias query or message)", { field: "prompt" });
  return prompt;
}

export async function queryRoutes(app: FastifyInstance, opts: { query: QueryDeps; keepAliveMs?: number }): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const turns = new TurnRegistry();
  const keepAliveMs = opts.keepAliveMs ?? 15_000;
  app.addHook("onClose", async () => { turns.stopAll(); });
  r.post("/v1/query", {
    config: { scope: "query" },
    schema: {
      tags: ["query"], summary: "Ask the agent (one turn, answered when done)", operationId: "query",
      description: "The model picks and chains the assistant tools (the ones the key's scopes allow, in the key's workspaces) until it answers, within the configured limits (tool rounds, output tokens, a deadline). The turn is recorded as a conversation (GET /v1/conversations). 503 when no LLM provider is configured; 502 `upstream_error` with the provider's message when it fails.",
      body: QueryBodySchema,
      response: { 200: jsonResponse(dataOf(QueryAnswerSchema), "The answer, the tool calls made and the tokens used (or, paused, the pending action)."), ...errorResponses(400, 401, 403, 404, 409, 429, 500, 502, 503) },
    },
  }, async (req) => {
    const auth = requireAuth(req);
    const b = req.body;
    const prompt = promptOf(b);
    // The turn is not tied to the connection: a client that goes away does not stop it, and it is recorded.
    const turn = await turns.start(opts.query, auth, { prompt, workspace_id: b.workspace_id, conversation_id: b.conversation_id, require_confirmation: b.require_confirmation }, (err) => req.log.error({ err }, "assistant turn failed"));
    return { data: await turn.next() };
  });

  r.post("/v1/query/stream", {
    config: { scope: "query" },
    schema: {
      tags: ["query"], summary: "Ask the agent, with its progress as server-sent events", operationId: "queryStream",
      description: "Same body as POST /v1/query. The turn runs on its own: a client that drops the connection does not stop it (it completes and is recorded; POST /v1/query/stop stops it). With a `Last-Event-ID` header and the `conversation_id` of a running (or just finished) turn, no new turn is started: the events after that id are sent, then the rest live. Errors before the turn starts (unknown workspace or conversation, no provider) are JSON error responses; a provider failure once it runs is an `error` event.",
      body: QueryBodySchema,
      response: { 200: eventStream("The turn's events."), ...errorResponses(400, 401, 403, 404, 409, 429, 500, 503) },
    },
  }, async (req, reply) => {
    const auth = requireAuth(req);
    const b = req.body;
    const after = lastEventId(req);
    if (after > 0 && b.conversation_id !== undefined) {
      const running = turns.get(auth, b.conversation_id);
      if (running) return sendEvents(reply, running, after, keepAliveMs);
    }
    const prompt = promptOf(b);
    const turn = await turns.start(opts.query, auth, { prompt, workspace_id: b.workspace_id, conversation_id: b.conversation_id, require_confirmation: b.require_confirmation, stream: true }, (err) => req.log.error({ err }, "assistant turn failed"));
    return sendEvents(reply, turn, 0, keepAliveMs);
  });

  r.get("/v1/query/stream", {
    config: { scope: "query" },
    schema: {
      tags: ["query"], summary: "Resume the events of a running turn", operationId: "queryStreamResume",
      description: "The events of the conversation's running turn (or one that finished a short while ago) after `Last-Event-ID` (header) or `last_event_id` (all of them without either), then the rest live until it ends. 404 when the conversation has no such turn.",
      querystring: z.object({
        conversation_id: ConversationIdSchema.describe("The conversation whose turn to follow."),
        last_event_id: z.string().regex(/^\d+$/).optional().describe("The id of the last event received (the `Last-Event-ID` header takes precedence)."),
      }),
      response: { 200: eventStream("The turn's events after the last one received."), ...errorResponses(400, 401, 403, 404, 429, 500) },
    },
  }, async (req, reply) => {
    const auth = requireAuth(req);
    const turn = turns.get(auth, req.query.conversation_id);
    if (!turn) throw new OperonError("not_found", `conversation_id: no running turn for conversation ${JSON.stringify(req.query.conversation_id)}`, { field: "conversation_id" });
    return sendEvents(reply, turn, lastEventId(req, req.query.last_event_id), keepAliveMs);
  });

  r.post("/v1/query/confirm", {
    config: { scope: "query" },
    schema: {
      tags: ["query"], summary: "Approve or decline a paused turn's action", operationId: "queryConfirm",
      description: "Answers the `pending_action` of a turn started with require_confirmation: approve runs the tool and the turn continues; decline tells the model the user declined. Answers like POST /v1/query once the turn ends or pauses again (the stream, if one is open, carries the events meanwhile). 404 when the conversation has no running turn or the action is not the one pending.",
      body: z.object({
        conversation_id: ConversationIdSchema.describe("The conversation of the paused turn."),
        action_id: z.string().min(1).max(64).describe("The pending action's id."),
        approve: z.boolean().describe("true: do it; false: decline."),
      }),
      response: { 200: jsonResponse(dataOf(QueryAnswerSchema), "The turn's answer, or its next pending action."), ...errorResponses(400, 401, 403, 404, 429, 500, 502) },
    },
  }, async (req) => {
    const auth = requireAuth(req);
    const turn = turns.confirm(auth, req.body.conversation_id, req.body.action_id, req.body.approve);
    return { data: await turn.next() };
  });

  r.post("/v1/query/stop", {
    config: { scope: "query" },
    schema: {
      tags: ["query"], summary: "Stop a running turn", operationId: "queryStop",
      description: "Stops the conversation's running turn: the model is not asked again and no further tool is called; the turn ends with what it has (its answer says it was stopped) and is recorded. 404 when the conversation has no running turn (unknown, finished, or not the key's).",
      body: z.object({ conversation_id: ConversationIdSchema.describe("The conversation whose turn to stop.") }),
      response: { 200: jsonResponse(dataOf(z.object({ conversation_id: z.string(), stopped: z.literal(true) })), "The turn was told to stop."), ...errorResponses(400, 401, 403, 404, 429, 500) },
    },
  }, async (req) => {
    const auth = requireAuth(req);
    if (!turns.stop(auth, req.body.conversation_id)) throw new OperonError("not_found", `conversation_id: no running turn for conversation ${JSON.stringify(req.body.conversation_id)}`, { field: "conversation_id" });
    return { data: { conversation_id: req.body.conversation_id, stopped: true as const } };
  });
}
