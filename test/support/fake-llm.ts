/**
 * Fake LLM providers at the protocol level: a node:http server speaking the OpenAI
 * chat-completions wire format (POST /v1/chat/completions) or the Anthropic Messages format
 * (POST /v1/messages), answering each request with the next step of a script the test
 * writes — tool calls, a final answer, an HTTP error, garbage or silence. Every request
 * body is kept, so a test can check which tools were offered and what came back to the model.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type Wire = "openai" | "anthropic";
export interface ScriptedCall { name: string; arguments: unknown; id?: string }
/** One reply: tool calls (with optional text), a final text, a raw HTTP answer, or a delay before another step. */
export type Step =
  | { calls: ScriptedCall[]; text?: string }
  | { text: string }
  | { status: number; body: string; contentType?: string }
  | { delayMs: number; then?: Step };

/** A request as the script sees it, whatever the wire format. */
export interface FakeRequest {
  n: number;
  body: Record<string, unknown>;
  /** Names of the tools offered. */
  tools: string[];
  /** The tool results sent back since the model's last message, in order. */
  results: Array<{ id: string; content: string; is_error: boolean }>;
  /** Every text the request carries (system prompt, messages, results), for leak checks. */
  allText: string;
}

export type Script = (req: FakeRequest) => Step;

export interface FakeLlm { wire: Wire; baseUrl: string; requests: FakeRequest[]; script(s: Script | Step[]): void; close(): Promise<void> }

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

function describe(wire: Wire, body: Record<string, unknown>, n: number): FakeRequest {
  const tools = ((body.tools as Array<Record<string, unknown>> | undefined) ?? []).map((t) => String(wire === "openai" ? (t.function as { name: string }).name : t.name));
  const messages = (body.messages as Array<{ role: string; content: unknown; tool_call_id?: string }> | undefined) ?? [];
  const results: FakeRequest["results"] = [];
  if (wire === "openai") {
    for (let i = messages.length - 1; i >= 0 && messages[i]?.role === "tool"; i--) {
      const m = messages[i];
      if (m) results.unshift({ id: String(m.tool_call_id), content: String(m.content), is_error: /^[a-z_]+: /.test(String(m.content)) && !String(m.content).startsWith("{") });
    }
  } else {
    const last = messages[messages.length - 1];
    if (last?.role === "user" && Array.isArray(last.content)) {
      for (const b of last.content as Array<Record<string, unknown>>) {
        if (b.type === "tool_result") results.push({ id: String(b.tool_use_id), content: typeof b.content === "string" ? b.content : JSON.stringify(b.content), is_error: b.is_error === true });
      }
    }
  }
  return { n, body, tools, results, allText: JSON.stringify(body) };
}

let seq = 0;
function reply(wire: Wire, model: string, step: { calls?: ScriptedCall[]; text?: string }): unknown {
  const calls = (step.calls ?? []).map((c) => ({ ...c, id: c.id ?? `call_${++seq}` }));
  if (wire === "openai") {
    return {
      id: `chatcmpl-${++seq}`, object: "chat.completion", created: Math.floor(Date.now() / 1000), model,
      choices: [{
        index: 0,
        message: { role: "assistant", content: step.text ?? null, ...(calls.length ? { tool_calls: calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments) } })) } : {}) },
        finish_reason: calls.length ? "tool_calls" : "stop",
      }],
      usage: { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 },
    };
  }
  return {
    id: `msg_${++seq}`, type: "message", role: "assistant", model,
    content: [...(step.text ? [{ type: "text", text: step.text }] : []), ...calls.map((c) => ({ type: "tool_use", id: c.id, name: c.name, input: c.arguments }))],
    stop_reason: calls.length ? "tool_use" : "end_turn", stop_sequence: null,
    usage: { input_tokens: 100, output_tokens: 10 },
  };
}

/**
 * A streamed chat completion (`stream: true`): the text word by word, each tool call's
 * arguments in two pieces, the finish reason, then the usage (stream_options.include_usage).
 */
function openaiChunks(model: string, step: { calls?: ScriptedCall[]; text?: string }): unknown[] {
  const id = `chatcmpl-${++seq}`;
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({ id, object: "chat.completion.chunk", created: Math.floor(Date.now() / 1000), model, choices: [{ index: 0, delta, finish_reason: finish }] });
  const out: unknown[] = [chunk({ role: "assistant", content: "" })];
  for (const piece of (step.text ?? "").match(/\S+\s*|\s+/g) ?? []) out.push(chunk({ content: piece }));
  for (const [index, c] of (step.calls ?? []).entries()) {
    const args = typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments);
    const half = Math.floor(args.length / 2);
    out.push(chunk({ tool_calls: [{ index, id: c.id ?? `call_${++seq}`, type: "function", function: { name: c.name, arguments: args.slice(0, half) } }] }));
    out.push(chunk({ tool_calls: [{ index, function: { arguments: args.slice(half) } }] }));
  }
  out.push(chunk({}, step.calls?.length ? "tool_calls" : "stop"));
  out.push({ id, object: "chat.completion.chunk", created: Math.floor(Date.now() / 1000), model, choices: [], usage: { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 } });
  return out;
}

/** A streamed Messages reply: message_start, each block (text word by word, tool input JSON in two pieces), message_delta, message_stop. */
function anthropicEvents(model: string, step: { calls?: ScriptedCall[]; text?: string }): Array<[string, unknown]> {
  const out: Array<[string, unknown]> = [["message_start", { type: "message_start", message: { id: `msg_${++seq}`, type: "message", role: "assistant", model, content: [], stop_reason: null, usage: { input_tokens: 100, output_tokens: 1 } } }]];
  let index = 0;
  if (step.text) {
    out.push(["content_block_start", { type: "content_block_start", index, content_block: { type: "text", text: "" } }]);
    for (const piece of step.text.match(/\S+\s*|\s+/g) ?? []) out.push(["content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text: piece } }]);
    out.push(["content_block_stop", { type: "content_block_stop", index }]);
    index++;
  }
  for (const c of step.calls ?? []) {
    const args = typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments);
    const half = Math.floor(args.length / 2);
    out.push(["content_block_start", { type: "content_block_start", index, content_block: { type: "tool_use", id: c.id ?? `toolu_${++seq}`, name: c.name, input: {} } }]);
    for (const part of [args.slice(0, half), args.slice(half)]) out.push(["content_block_delta", { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: part } }]);
    out.push(["content_block_stop", { type: "content_block_stop", index }]);
    index++;
  }
  out.push(["message_delta", { type: "message_delta", delta: { stop_reason: step.calls?.length ? "tool_use" : "end_turn", stop_sequence: null }, usage: { output_tokens: 10 } }]);
  out.push(["message_stop", { type: "message_stop" }]);
  return out;
}

export async function startFakeLlm(wire: Wire): Promise<FakeLlm> {
  let script: Script = () => ({ text: "no script" });
  const requests: FakeRequest[] = [];
  const path = wire === "openai" ? "/v1/chat/completions" : "/v1/messages";
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      const raw = await readBody(req);
      if (req.method !== "POST" || req.url?.split("?")[0] !== path) {
        res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}` } }));
        return;
      }
      const body = JSON.parse(raw) as Record<string, unknown>;
      const r = describe(wire, body, requests.length);
      requests.push(r);
      let step = script(r);
      while ("delayMs" in step) {
        const ms = step.delayMs;
        await new Promise((ok) => setTimeout(ok, ms));
        if (res.destroyed || !step.then) { if (!res.destroyed) res.destroy(); return; }
        step = step.then;
      }
      if ("status" in step) {
        res.writeHead(step.status, { "content-type": step.contentType ?? "application/json" }).end(step.body);
        return;
      }
      if (body.stream === true && wire === "anthropic") {
        res.writeHead(200, { "content-type": "text/event-stream" });
        for (const [event, data] of anthropicEvents(String(body.model), step)) res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
        res.end();
        return;
      }
      if (body.stream === true && wire === "openai") {
        res.writeHead(200, { "content-type": "text/event-stream" });
        for (const chunk of openaiChunks(String(body.model), step)) res.write(`data: ${JSON.stringify(chunk)}\n\n`);
        res.end("data: [DONE]\n\n");
        return;
      }
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(reply(wire, String(body.model), step)));
    })();
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  const port = (server.address() as AddressInfo).port;
  return {
    wire,
    baseUrl: wire === "openai" ? `http://127.0.0.1:${port}/v1` : `http://127.0.0.1:${port}`,
    requests,
    script(s) {
      requests.length = 0;
      if (typeof s === "function") script = s;
      else { const steps = [...s]; script = () => steps.shift() ?? { text: "script ended" }; }
    },
    close: () => new Promise<void>((ok) => { server.closeAllConnections(); server.close(() => ok()); }),
  };
}

/** An OpenAI or Anthropic error body with this message. */
export const errorBody = (wire: Wire, message: string) => JSON.stringify(wire === "openai" ? { error: { message, type: "server_error", code: null } } : { type: "error", error: { type: "api_error", message } });
