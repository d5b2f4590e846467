/**
 * The `anthropic` provider: the Messages API with tool use, through the official
 * `@anthropic-ai/sdk`. The agent's neutral messages become alternating user/assistant
 * turns: tool calls are `tool_use` blocks of the assistant's message and their results
 * `tool_result` blocks of the next user message. Replies are checked before use.
 */
import Anthropic from "@anthropic-ai/sdk";
import { UpstreamError, type ChatMessage, type Completion, type LlmProvider, type LlmSettings, type SendOptions, type StreamEvent, type ToolCallRequest } from "./types.js";
import { upstreamError } from "./errors.js";

export const ANTHROPIC_DEFAULT_BASE_URL = "https://api.anthropic.com";

type Block = Record<string, unknown>;
type WireMessage = { role: "user" | "assistant"; content: Block[] };

function toWire(messages: readonly ChatMessage[]): WireMessage[] {
  const out: WireMessage[] = [];
  const push = (role: "user" | "assistant", blocks: Block[]) => {
    const last = out[out.length - 1];
    // Consecutive messages of one role (tool results, then a user's words) are one turn.
    if (last && last.role === role) last.content.push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (const m of messages) {
    if (m.role === "user") push("user", [{ type: "text", text: m.content }]);
    else if (m.role === "tool") push("user", [{ type: "tool_result", tool_use_id: m.tool_call_id, content: m.content, ...(m.is_error ? { is_error: true } : {}) }]);
    else {
      const blocks: Block[] = m.content !== "" ? [{ type: "text", text: m.content }] : [];
      for (const c of m.tool_calls ?? []) blocks.push({ type: "tool_use", id: c.id, name: c.name, input: c.arguments !== null && typeof c.arguments === "object" && !Array.isArray(c.arguments) ? c.arguments : {} });
      push("assistant", blocks.length > 0 ? blocks : [{ type: "text", text: "(no answer)" }]);
    }
  }
  return out;
}

const STOP: Record<string, Completion["stop"]> = { end_turn: "end", stop_sequence: "end", tool_use: "tool_calls", max_tokens: "max_tokens" };

export function createAnthropicProvider(settings: LlmSettings): LlmProvider {
  const client = new Anthropic({ apiKey: settings.apiKey ?? "none", baseURL: settings.baseUrl ?? ANTHROPIC_DEFAULT_BASE_URL, maxRetries: settings.maxRetries ?? 2 });
  return {
    name: "anthropic",
    model: settings.model,
    async send(o: SendOptions): Promise<Completion> {
      let res: unknown;
      try {
        res = await client.messages.create({
          model: settings.model,
          system: o.system,
          max_tokens: o.maxOutputTokens,
          messages: toWire(o.messages) as unknown as Anthropic.MessageParam[],
          ...(o.tools.length > 0 ? { tools: o.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.input_schema as Anthropic.Tool.InputSchema })) } : {}),
        }, { signal: o.signal, timeout: o.timeoutMs });
      } catch (e) {
        throw upstreamError("anthropic", e, o);
      }
      return parseMessage(res, settings.model);
    },
    async *stream(o: SendOptions): AsyncIterable<StreamEvent> {
      // The stream's events folded into one message (a tool_use block's input comes as JSON in pieces).
      const blocks: Array<Block & { json?: string }> = [];
      let model: unknown;
      let stop: unknown;
      const usage: { input_tokens?: unknown; output_tokens?: unknown } = {};
      try {
        const events = await client.messages.create({
          model: settings.model,
          system: o.system,
          max_tokens: o.maxOutputTokens,
          messages: toWire(o.messages) as unknown as Anthropic.MessageParam[],
          ...(o.tools.length > 0 ? { tools: o.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.input_schema as Anthropic.Tool.InputSchema })) } : {}),
          stream: true,
        }, { signal: o.signal, timeout: o.timeoutMs });
        for await (const event of events) {
          const e = event as unknown as { type?: unknown; index?: unknown; message?: { model?: unknown; usage?: { input_tokens?: unknown } }; content_block?: Block; delta?: { type?: unknown; text?: unknown; partial_json?: unknown; stop_reason?: unknown }; usage?: { output_tokens?: unknown } };
          const i = typeof e.index === "number" ? e.index : -1;
          if (e.type === "message_start") { model = e.message?.model; usage.input_tokens = e.message?.usage?.input_tokens; }
          else if (e.type === "content_block_start" && i >= 0 && e.content_block) blocks[i] = { ...e.content_block };
          else if (e.type === "content_block_delta" && i >= 0) {
            const b = (blocks[i] ??= { type: e.delta?.type === "input_json_delta" ? "tool_use" : "text" });
            if (e.delta?.type === "text_delta" && typeof e.delta.text === "string") {
              b.text = `${typeof b.text === "string" ? b.text : ""}${e.delta.text}`;
              yield { type: "text", delta: e.delta.text };
            } else if (e.delta?.type === "input_json_delta" && typeof e.delta.partial_json === "string") b.json = (b.json ?? "") + e.delta.partial_json;
          } else if (e.type === "message_delta") { stop = e.delta?.stop_reason; usage.output_tokens = e.usage?.output_tokens; }
        }
      } catch (e) {
        throw upstreamError("anthropic", e, o);
      }
      const content = blocks.filter(Boolean).map(({ json, ...b }) => {
        if (b.type !== "tool_use" || json === undefined || json.trim() === "") return b;
        try { return { ...b, input: JSON.parse(json) as unknown }; } catch { return { ...b, input: json }; }
      });
      const completion = parseMessage({ content, stop_reason: stop, usage, model }, settings.model);
      for (const call of completion.tool_calls) yield { type: "tool_call", call };
      yield { type: "done", completion };
    },
  };
}

/** A Messages API reply as the agent needs it, or an UpstreamError saying what is wrong with it. */
export function parseMessage(res: unknown, requested: string): Completion {
  const r = res as { content?: unknown; stop_reason?: unknown; usage?: { input_tokens?: unknown; output_tokens?: unknown }; model?: unknown } | null;
  if (!r || typeof r !== "object" || !Array.isArray(r.content)) {
    throw new UpstreamError(`the LLM provider (anthropic) answered with something that is not a message: ${JSON.stringify(res).slice(0, 200)}`);
  }
  let text = "";
  const calls: ToolCallRequest[] = [];
  for (const [n, b] of (r.content as Block[]).entries()) {
    if (b?.type === "text" && typeof b.text === "string") text += b.text;
    else if (b?.type === "tool_use") {
      const input = b.input;
      const name = typeof b.name === "string" ? b.name : "";
      calls.push({
        id: typeof b.id === "string" && b.id !== "" ? b.id : `toolu_${n}`,
        name,
        arguments: input ?? {},
        ...(name === "" ? { invalid: "name: the tool call names no tool" } : input !== undefined && (input === null || typeof input !== "object" || Array.isArray(input)) ? { invalid: "arguments: must be a JSON object" } : {}),
      });
    }
  }
  const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  return {
    text,
    tool_calls: calls,
    usage: { input_tokens: num(r.usage?.input_tokens), output_tokens: num(r.usage?.output_tokens) },
    model: typeof r.model === "string" && r.model !== "" ? r.model : requested,
    stop: calls.length > 0 ? "tool_calls" : STOP[String(r.stop_reason)] ?? "other",
  };
}
