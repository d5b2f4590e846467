/**
 * `operon ask "PROMPT" [--workspace W] [--conversation ID]`: one agent turn through
 * POST /v1/query/stream, its server-sent events parsed with eventsource-parser. The model's
 * text goes to stdout as it comes; tool progress (each call and its outcome) and the
 * conversation id to stderr, so the answer can be piped. A dropped connection is resumed
 * (GET /v1/query/stream with Last-Event-ID): the turn runs on the server whatever happens to
 * the connection. Exit 0 answered, 1 the API refused the query or the turn failed, 2 usage
 * and connection problems. Defaults as `operon run`: the local server and its bootstrap key.
 */
import { Command } from "commander";
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { parseCli, UsageError, type CliIO, type Ctx } from "./program.js";
import { ApiClient, ServerError, apiPath, causeOf, ConnectionError, failure, query, resolveConnection, withConnection } from "./client.js";

/** Reconnections after a dropped connection before giving up. */
const MAX_RESUMES = 3;

interface AskOptions { workspace?: string; conversation?: string; url?: string; key?: string }

export function askCli(ctx: Ctx, fetchImpl: typeof fetch = ctx.fetch ?? fetch): Command {
  const cmd = new Command("ask")
    .summary("Ask the agent, streaming its answer and tool progress")
    .description("Ask Operon's agent, which chains the assistant tools with the key's authority, and stream the turn: the "
      + "model's text on stdout as it comes, each tool call and its outcome on stderr, then the conversation id to continue "
      + "it with --conversation. The turn runs on the server: a dropped connection is resumed.")
    .argument("<PROMPT>", "what to ask")
    .option("--workspace <id>", "the workspace the agent acts in (required when the key is limited to workspaces)")
    .option("--conversation <id>", "continue this conversation");
  return withConnection(cmd)
    .addHelpText("after", `
Exit codes: 0 answered, 1 refused by the API (unknown workspace or conversation, no LLM configured)
or the turn failed, 2 usage error, no API key or server unreachable.

Example:
  operon ask "align data/r1.fq and data/r2.fq to data/ref.fa, call variants and show me the VCF" \\
    --workspace default`)
    .action(async (prompt: string, opts: AskOptions) => { ctx.code = await ask(prompt, opts, ctx.io, ctx.env, fetchImpl); });
}

/** `operon ask …` with the words after `ask`, as the tests call it. */
export async function askCommand(args: string[], io: CliIO, env: NodeJS.ProcessEnv, fetchImpl: typeof fetch = fetch): Promise<number> {
  const ctx: Ctx = { io, env, code: 0 };
  return parseCli(askCli(ctx, fetchImpl), args, ctx);
}

async function ask(prompt: string, opts: AskOptions, io: CliIO, env: NodeJS.ProcessEnv, fetchImpl: typeof fetch): Promise<number> {
  if (prompt.trim() === "") throw new UsageError("PROMPT must not be empty");
  const client = new ApiClient(resolveConnection(opts, env), fetchImpl);
  const headers = { accept: "text/event-stream" };
  const body = { prompt, ...(opts.workspace ? { workspace_id: opts.workspace } : {}), ...(opts.conversation ? { conversation_id: opts.conversation } : {}) };

  const state: TurnState = { lastId: 0, conversationId: undefined, ended: undefined, text: "" };
  for (let attempt = 0; ; attempt++) {
    let res: Response;
    try {
      res = attempt === 0 || state.conversationId === undefined
        ? await client.raw("POST", "/v1/query/stream", { headers, body })
        : await client.raw("GET", apiPath`/v1/query/stream` + query({ conversation_id: state.conversationId }), { headers: { ...headers, "last-event-id": String(state.lastId) } });
    } catch (e) {
      if (attempt > 0 && attempt < MAX_RESUMES) continue;
      io.err(`operon ask: ${causeOf(e)}`);
      return 2;
    }
    if (!(res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
      const text = await res.text().catch(() => "");
      const f = failure(res, text, `${res.status}`);
      io.err(`operon ask: ${f.message}`);
      return f instanceof ServerError && f.status >= 400 && f.code ? 1 : 2;
    }
    try {
      await read(res, state, io);
    } catch (e) {
      if (!(e instanceof ConnectionError) || attempt >= MAX_RESUMES) { io.err(`operon ask: ${causeOf(e)}`); return 2; }
    }
    if (state.ended) break;
    if (attempt >= MAX_RESUMES) { io.err("operon ask: the stream ended before the turn did"); return 2; }
    io.err(`operon ask: connection dropped; resuming after event ${state.lastId}`);
  }
  if (state.conversationId) io.err(`conversation: ${state.conversationId}`);
  return state.ended === "done" ? 0 : 1;
}

/** `text`: the model's text not yet printed (stdout is written a line at a time). */
interface TurnState { lastId: number; conversationId: string | undefined; ended: "done" | "error" | undefined; text: string }

/** Reads one connection's events into the terminal; a transport failure is a ConnectionError (resumable). */
async function read(res: Response, state: TurnState, io: CliIO): Promise<void> {
  const parser = createParser({ onEvent: (m: EventSourceMessage) => show(m, state, io) });
  const decoder = new TextDecoder();
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) parser.feed(decoder.decode(chunk, { stream: true }));
  } catch (e) {
    throw new ConnectionError(causeOf(e));
  }
}

function show(m: EventSourceMessage, state: TurnState, io: CliIO): void {
  const id = Number(m.id);
  if (Number.isInteger(id)) {
    if (id <= state.lastId) return; // already shown (a resumed stream)
    state.lastId = id;
  }
  let d: Record<string, unknown>;
  try { d = JSON.parse(m.data) as Record<string, unknown>; } catch { return; }
  const s = (v: unknown) => (typeof v === "string" ? v : JSON.stringify(v));
  if (m.event === "content") {
    state.text += s(d.delta);
    const lines = state.text.split("\n");
    state.text = lines.pop() ?? "";
    for (const l of lines) io.out(l);
    return;
  }
  // Anything else ends the model's text so far.
  if (state.text !== "") { io.out(state.text); state.text = ""; }
  switch (m.event) {
    case "status": if (typeof d.conversation_id === "string") state.conversationId = d.conversation_id; break;
    case "tool_call": io.err(`→ ${s(d.tool)} ${s(d.input)}`.slice(0, 300)); break;
    case "tool_result": io.err(`  ${d.status === "ok" ? "✓" : "✗"} ${s(d.summary)}`); break;
    case "pending_action": io.err(`  waiting for confirmation of ${s(d.tool)} (action ${s(d.action_id)})`); break;
    case "done": state.ended = "done"; break;
    case "error": state.ended = "error"; io.err(`operon ask: ${s(d.message)} (${s(d.code)})`); break;
    default: break;
  }
}
