/**
 * A query as the API sees it (POST /v1/query, later the stream and the CLI): the workspace
 * it acts in, the conversation it continues (only one of that workspace of the key's
 * organization), one agent turn (assistant/agent.ts), and the turn recorded in the
 * conversation store that GET /v1/conversations reads — the user's message, then the
 * assistant's answer with its tool calls summarised — even when the provider failed.
 */
import { randomBytes } from "node:crypto";
import { ulid } from "../core/ids.js";
import type { AuthContext } from "../services/access.js";
import { OperonError } from "../core/errors.js";
import type { ConversationRecord, Message, WorkspaceRecord } from "../services/store.js";
import { runTurn, type AgentLimits, type ToolCallRecord, type TurnEvent, type TurnInput } from "./agent.js";
import { UpstreamError, type ChatMessage, type LlmProvider, type Usage } from "./providers/types.js";
import type { AssistantDeps } from "./tools.js";

/** The variables to set, named by the 503 when no provider is configured. */
export const NO_PROVIDER_MESSAGE = "the agent is not configured: set OPERON_LLM_PROVIDER (openai or anthropic) and OPERON_LLM_MODEL, with OPERON_LLM_API_KEY for OpenAI or Anthropic, or OPERON_LLM_BASE_URL for an OpenAI-compatible server (e.g. http://127.0.0.1:11434/v1 for Ollama)";

export interface QueryRequest { prompt: string; workspace_id?: string | undefined; conversation_id?: string | undefined }

export interface QueryAnswer {
  conversation_id: string;
  message_id: string;
  answer: string;
  tool_calls: ToolCallRecord[];
  model: string;
  usage: Usage;
}

export interface QueryDeps {
  assistant: AssistantDeps;
  provider?: LlmProvider | undefined;
  limits?: Partial<AgentLimits> | undefined;
}

const TITLE_CHARS = 80;
export function titleOf(prompt: string): string {
  const one = prompt.replace(/\s+/g, " ").trim();
  return one.length > TITLE_CHARS ? `${one.slice(0, TITLE_CHARS - 1)}…` : one || "(empty prompt)";
}

const newId = (prefix: string, now: number) => `${prefix}-${ulid(now, randomBytes(10))}`;

/** The workspace a query acts in: the one named, else (a key of all workspaces) "default" or the only one. */
async function workspaceOf(deps: AssistantDeps, auth: AuthContext, id: string | undefined): Promise<WorkspaceRecord> {
  if (id !== undefined) return deps.access.workspace(auth, id);
  if (auth.workspaces !== null) throw new OperonError("invalid_request", "workspace_id: is required: this key is limited to named workspaces", { field: "workspace_id" });
  const visible = await deps.access.visibleWorkspaces(auth);
  const chosen = visible.find((w) => w.id === "default") ?? (visible.length === 1 ? visible[0] : undefined);
  if (!chosen) throw new OperonError("invalid_request", "workspace_id: is required: the organization has several workspaces and none is named default", { field: "workspace_id" });
  return chosen;
}

/** Earlier messages as the model sees them: the user's words and the assistant's answers. */
function historyOf(c: ConversationRecord | undefined): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (const m of c?.messages ?? []) {
    if (m.role === "user") out.push({ role: "user", content: m.content });
    else if (m.role === "assistant" && m.content !== "") out.push({ role: "assistant", content: m.content });
  }
  return out;
}

/** Where a turn runs, known once the request is checked and before the model is asked. */
export interface TurnStart { conversation_id: string; message_id: string; organization: string; workspace_id: string; model: string }

export interface QueryOptions {
  signal?: AbortSignal;
  onEvent?: (e: TurnEvent) => void;
  /** Called once the request is accepted (workspace and conversation checked), before the turn starts. */
  onStart?: (s: TurnStart) => void;
  /** Confirmation of the tools that spend compute or change data (require_confirmation). */
  confirm?: TurnInput["confirm"];
  /** Use the provider's streaming API (content events as the model writes). */
  stream?: boolean;
  log?: (err: unknown) => void;
}

export async function runQuery(deps: QueryDeps, auth: AuthContext, req: QueryRequest, opts: QueryOptions = {}): Promise<QueryAnswer> {
  const provider = deps.provider;
  if (!provider) throw new OperonError("unavailable", NO_PROVIDER_MESSAGE);
  const { service, clock } = deps.assistant;
  const ws = await workspaceOf(deps.assistant, auth, req.workspace_id);
  let existing: ConversationRecord | undefined;
  if (req.conversation_id !== undefined) {
    existing = await service.getConversation(ws.organization, ws.id, req.conversation_id);
    if (!existing || existing.organization !== auth.organization || existing.workspace_id !== ws.id) {
      throw new OperonError("not_found", `conversation_id: conversation ${JSON.stringify(req.conversation_id)} not found in workspace ${JSON.stringify(ws.id)}`, { field: "conversation_id" });
    }
  }
  const askedAt = new Date(clock.now()).toISOString();
  const conversationId = existing?.id ?? newId("conv", clock.now());
  const userMessage: Message & Record<string, unknown> = { id: newId("msg", clock.now()), role: "user", content: req.prompt, created_at: askedAt };
  const messageId = newId("msg", clock.now());
  opts.onStart?.({ conversation_id: conversationId, message_id: messageId, organization: ws.organization, workspace_id: ws.id, model: provider.model });

  let answer: QueryAnswer;
  let assistantMessage: Message & Record<string, unknown>;
  try {
    const turn = await runTurn({
      auth, deps: deps.assistant, provider, prompt: req.prompt, workspaceId: ws.id, conversationId, history: historyOf(existing),
      ...(deps.limits ? { limits: deps.limits } : {}), ...(opts.signal ? { signal: opts.signal } : {}),
      ...(opts.onEvent ? { onEvent: opts.onEvent } : {}), ...(opts.confirm ? { confirm: opts.confirm } : {}), ...(opts.stream ? { stream: true } : {}), ...(opts.log ? { log: opts.log } : {}),
    });
    answer = { conversation_id: conversationId, message_id: messageId, answer: turn.answer, tool_calls: turn.tool_calls, model: turn.model, usage: turn.usage };
    assistantMessage = { id: messageId, role: "assistant", content: turn.answer, created_at: new Date(clock.now()).toISOString(), tool_calls: turn.tool_calls, model: turn.model, usage: turn.usage, ended: turn.ended };
  } catch (e) {
    if (!(e instanceof UpstreamError)) throw e;
    const partial = e.turn ?? { tool_calls: [], usage: { input_tokens: 0, output_tokens: 0 }, model: provider.model };
    assistantMessage = { id: messageId, role: "assistant", content: "", created_at: new Date(clock.now()).toISOString(), tool_calls: partial.tool_calls, model: partial.model, usage: partial.usage, error: { code: "upstream_error", message: e.message } };
    await record(deps, ws, conversationId, existing, req.prompt, [userMessage, assistantMessage]);
    throw new OperonError("upstream_error", e.message, { conversation_id: conversationId });
  }
  await record(deps, ws, conversationId, existing, req.prompt, [userMessage, assistantMessage]);
  return answer;
}

/** Appends the turn's messages to the conversation as it is now (another turn may have been recorded meanwhile). */
async function record(deps: QueryDeps, ws: WorkspaceRecord, id: string, existing: ConversationRecord | undefined, prompt: string, messages: Message[]): Promise<void> {
  const { service, clock } = deps.assistant;
  const current = existing ? (await service.getConversation(ws.organization, ws.id, id)) ?? existing : undefined;
  const now = new Date(clock.now()).toISOString();
  await service.saveConversation({
    id, organization: ws.organization, workspace_id: ws.id,
    title: current?.title ?? titleOf(prompt),
    created_at: current?.created_at ?? messages[0]?.created_at ?? now,
    updated_at: now,
    messages: [...(current?.messages ?? []), ...messages],
  });
}
