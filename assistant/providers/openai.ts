/**
 * The `openai` provider: the chat-completions wire format with tool calls, through the
 * official `openai` SDK. It serves OpenAI itself and the OpenAI-compatible servers people
 * run themselves (Ollama, vLLM, llama.cpp's server) through OPERON_LLM_BASE_URL. Replies are
 * checked before use, since a compatible server may answer with anything.
 */
import OpenAI from "openai";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import { parseArguments, UpstreamError, type ChatMessage, type Completion, type LlmProvider, type LlmSettings, type SendOptions, type StreamEvent, type ToolCallRequest } from "./types.js";
import { upstreamError } from "./errors.js";

export const OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1";

function toWire(system: string, messages: readonly ChatMessage[]): ChatCompletionMessageParam[] {
  const out: ChatCompletionMessageParam[] = [{ role: "system", content: system }];
  for (const m of messages) {
    if (m.role === "user") out.push({ role: "user", content: m.content });
    else if (m.role === "tool") out.push({ role: "tool", tool_call_id: m.tool_call_id, content: m.content });
    else {
      const calls = m.tool_calls ?? [];
      out.push({
        role: "assistant",
        content: m.content === "" && calls.length > 0 ? null : m.content,
        ...(calls.length > 0 ? { tool_calls: calls.map((c) => ({ id: c.id, type: "function" as const, function: { name: c.name, arguments: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments ?? {}) } })) } : {}),
      });
    }
  }
  return out;
}

const STOP: Record<string, Completion["stop"]> = { stop: "end", tool_calls: "tool_calls", function_call: "tool_calls", length: "max_tokens" };

export function createOpenAIProvider(settings: LlmSettings): LlmProvider {
  const baseURL = settings.baseUrl ?? OPENAI_DEFAULT_BASE_URL;
  // Self-hosted servers need no key; the SDK wants one (and would otherwise read OPENAI_API_KEY).
  const client = new OpenAI({ apiKey: settings.apiKey ?? "none", baseURL, maxRetries: settings.maxRetries ?? 2 });
  // OpenAI's newer models take max_completion_tokens only; the compatible servers all take max_tokens.
  const tokensField = baseURL.replace(/\/+$/, "") === OPENAI_DEFAULT_BASE_URL ? "max_completion_tokens" : "max_tokens";
  return {
    name: "openai",
    model: settings.model,
    async send(o: SendOptions): Promise<Completion> {
      const tools: ChatCompletionTool[] = o.tools.map((t) => ({ type: "function", function: { name: t.name, description: t.description, parameters: t.input_schema } }));
      let res: unknown;
      try {
        res = await client.chat.completions.create({
          model: settings.model,
          messages: toWire(o.system, o.messages),
          ...(tools.length > 0 ? { tools } : {}),
          [tokensField]: o.maxOutputTokens,
        }, { signal: o.signal, timeout: o.timeoutMs });
      } catch (e) {
        throw upstreamError("openai", e, o);
      }
      return parseCompletion(res, settings.model);
    },
    async *stream(o: SendOptions): AsyncIterable<StreamEvent> {
      const tools: ChatCompletionTool[] = o.tools.map((t) => ({ type: "function", function: { name: t.name, description: t.description, parameters: t.input_schema } }));
      // The chunks folded into one chat completion (tool call arguments come in pieces, by index).
      const message: { content: string; tool_calls: Array<{ id?: string; function: { name?: string; arguments: string } }> } = { content: "", tool_calls: [] };
      let finish: unknown;
      let model: unknown;
      let usage: { prompt_tokens?: unknown; completion_tokens?: unknown } | undefined;
      try {
        const chunks = await client.chat.completions.create({
          model: settings.model,
          messages: toWire(o.system, o.messages),
          ...(tools.length > 0 ? { tools } : {}),
          [tokensField]: o.maxOutputTokens,
          stream: true,
          stream_options: { include_usage: true },
        }, { signal: o.signal, timeout: o.timeoutMs });
        for await (const chunk of chunks) {
          const c = chunk as { model?: unknown; usage?: typeof usage | null; choices?: Array<{ delta?: { content?: unknown; tool_calls?: unknown }; finish_reason?: unknown }> };
          if (typeof c.model === "string" && c.model !== "") model = c.model;
          if (c.usage) usage = c.usage;
          const choice = Array.isArray(c.choices) ? c.choices[0] : undefined;
          if (!choice) continue;
          if (choice.finish_reason) finish = choice.finish_reason;
          const delta = choice.delta;
          if (typeof delta?.content === "string" && delta.content !== "") {
            message.content += delta.content;
            yield { type: "text", delta: delta.content };
          }
          for (const tc of Array.isArray(delta?.tool_calls) ? (delta.tool_calls as Array<{ index?: unknown; id?: unknown; function?: { name?: unknown; arguments?: unknown } }>) : []) {
            const i = typeof tc.index === "number" ? tc.index : message.tool_calls.length;
            const slot = (message.tool_calls[i] ??= { function: { arguments: "" } });
            if (typeof tc.id === "string" && tc.id !== "") slot.id = tc.id;
            if (typeof tc.function?.name === "string" && tc.function.name !== "") slot.function.name = tc.function.name;
            if (typeof tc.function?.arguments === "string") slot.function.arguments += tc.function.arguments;
          }
        }
      } catch (e) {
        throw upstreamError("openai", e, o);
      }
      const completion = parseCompletion({ choices: [{ message: { content: message.content, tool_calls: message.tool_calls.filter(Boolean) }, finish_reason: finish }], usage, model }, settings.model);
      for (const call of completion.tool_calls) yield { type: "tool_call", call };
      yield { type: "done", completion };
    },
  };
}

/** A chat completion as the agent needs it, or an UpstreamError saying what is wrong with it. */
export function parseCompletion(res: unknown, requested: string): Completion {
  const r = res as { choices?: Array<{ message?: { content?: unknown; tool_calls?: unknown }; finish_reason?: unknown }>; usage?: { prompt_tokens?: unknown; completion_tokens?: unknown }; model?: unknown } | null;
  const choice = r && typeof r === "object" && Array.isArray(r.choices) ? r.choices[0] : undefined;
  if (!choice?.message || typeof choice.message !== "object") {
    throw new UpstreamError(`the LLM provider (openai) answered with something that is not a chat completion: ${JSON.stringify(res).slice(0, 200)}`);
  }
  const calls: ToolCallRequest[] = [];
  const wire = Array.isArray(choice.message.tool_calls) ? (choice.message.tool_calls as unknown[]) : [];
  for (const [n, c] of wire.entries()) {
    const fn = (c as { function?: { name?: unknown; arguments?: unknown } }).function;
    const id = (c as { id?: unknown }).id;
    const parsed = parseArguments(typeof fn?.arguments === "string" ? fn.arguments : fn?.arguments === undefined ? undefined : JSON.stringify(fn.arguments));
    calls.push({
      id: typeof id === "string" && id !== "" ? id : `call_${n}`,
      name: typeof fn?.name === "string" ? fn.name : "",
      ...parsed,
      ...(typeof fn?.name !== "string" || fn.name === "" ? { invalid: "name: the tool call names no tool" } : {}),
    });
  }
  const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  return {
    text: typeof choice.message.content === "string" ? choice.message.content : "",
    tool_calls: calls,
    usage: { input_tokens: num(r?.usage?.prompt_tokens), output_tokens: num(r?.usage?.completion_tokens) },
    model: typeof r?.model === "string" && r.model !== "" ? r.model : requested,
    stop: calls.length > 0 ? "tool_calls" : STOP[String(choice.finish_reason)] ?? "other",
  };
}
