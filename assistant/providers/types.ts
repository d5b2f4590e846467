/**
 * What the agent needs from an LLM, whatever its wire format: send the conversation so far
 * and the tool definitions, get back text, tool calls and token usage. The agent loop
 * (assistant/agent.ts) speaks only this; assistant/providers/openai.ts and anthropic.ts
 * translate it to the chat-completions and Messages formats with the official SDKs. A
 * provider failure of any kind is an UpstreamError carrying the provider's message only.
 */

/** A tool as offered to the model: its name, description and JSON Schema input. */
export interface ToolDefinition { name: string; description: string; input_schema: Record<string, unknown> }

/**
 * A tool call the model made. `arguments` is the parsed JSON; when the model sent
 * something that is not a JSON object, `invalid` says what was wrong (the agent answers it
 * as a tool error).
 */
export interface ToolCallRequest { id: string; name: string; arguments: unknown; invalid?: string }

/** The conversation in the provider-neutral form the agent keeps. */
export type ChatMessage =
  | { role: "user"; content: string }
  | { role: "assistant"; content: string; tool_calls?: ToolCallRequest[] }
  | { role: "tool"; tool_call_id: string; name: string; content: string; is_error: boolean };

export interface Usage { input_tokens: number; output_tokens: number }

export interface Completion {
  text: string;
  tool_calls: ToolCallRequest[];
  usage: Usage;
  /** The model that answered, as the provider names it. */
  model: string;
  /** Why the model stopped: its answer is complete, it wants tools, or it ran out of output tokens. */
  stop: "end" | "tool_calls" | "max_tokens" | "other";
}

export interface SendOptions {
  system: string;
  messages: readonly ChatMessage[];
  tools: readonly ToolDefinition[];
  maxOutputTokens: number;
  /** Aborts the request (the turn's deadline, or a stop). */
  signal: AbortSignal;
  /** The request's own time limit, in ms. */
  timeoutMs: number;
}

/** What a streaming provider yields: text as it comes, each tool call once complete, then the whole completion. */
export type StreamEvent =
  | { type: "text"; delta: string }
  | { type: "tool_call"; call: ToolCallRequest }
  | { type: "done"; completion: Completion };

export interface LlmProvider {
  readonly name: "openai" | "anthropic";
  readonly model: string;
  send(options: SendOptions): Promise<Completion>;
  /** The streaming variant (POST /v1/query/stream); a provider without it is used through `send`. */
  stream?(options: SendOptions): AsyncIterable<StreamEvent>;
}

/** How the server reaches its LLM (OPERON_LLM_*). */
export interface LlmSettings {
  provider: "openai" | "anthropic";
  model: string;
  baseUrl?: string | undefined;
  apiKey?: string | undefined;
  /** Retries of a failed request by the SDK (default 2; tests use 0). */
  maxRetries?: number;
}

/** The provider failed, timed out or answered with something unusable: a 502 `upstream_error`. */
export class UpstreamError extends Error {
  /** What the turn had done before the provider failed (set by the agent loop), so that it can still be recorded. */
  turn?: { tool_calls: unknown[]; usage: Usage; model: string };
  constructor(message: string) {
    super(message);
    this.name = "UpstreamError";
  }
}

/** Tool arguments the model sent as a JSON string (chat completions), parsed or explained. */
export function parseArguments(raw: string | null | undefined): { arguments: unknown; invalid?: string } {
  if (raw === undefined || raw === null || raw.trim() === "") return { arguments: {} };
  try {
    const v: unknown = JSON.parse(raw);
    if (v === null || typeof v !== "object" || Array.isArray(v)) return { arguments: v, invalid: "arguments: must be a JSON object" };
    return { arguments: v };
  } catch {
    return { arguments: raw, invalid: `arguments: not valid JSON (${JSON.stringify(raw.slice(0, 200))})` };
  }
}
