/**
 * POST /v1/query/stream against a listening app and a fake OpenAI-format provider, the
 * stream parsed with eventsource-parser: the events in order with their ids; a client that
 * drops mid-stream and resumes with Last-Event-ID gets the rest without duplicates; a dropped
 * turn still completes and is recorded; the keep-alive comment; POST /v1/query/stop; the
 * JSON errors before a turn starts.
 */
import t from "tap";
import type { AddressInfo } from "node:net";
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { testApp, type TestApp } from "../support/app.js";
import { startFakeLlm, type FakeLlm } from "../support/fake-llm.js";
import { until } from "../support/wait.js";

const oa: FakeLlm = await startFakeLlm("openai");
t.teardown(() => oa.close());
const a: TestApp = await testApp({ llm: { settings: { provider: "openai", model: "gpt-test", baseUrl: oa.baseUrl, apiKey: "sk-test", maxRetries: 0 }, keepAliveMs: 100 } });
t.teardown(() => a.close());
await a.app.listen({ port: 0, host: "127.0.0.1" });
const base = `http://127.0.0.1:${(a.app.server.address() as AddressInfo).port}`;
await a.service.createWorkspace("acme", "ws1");
await a.service.createWorkspace("acme", "ws2");
await a.store.put("orgs/acme/workspaces/ws1/data/a.txt", "hello\n");
const key = { authorization: `Bearer ${await a.key("acme", ["query", "files", "conversations"])}` };
const otherOrg = { authorization: `Bearer ${await a.key("other", ["query"])}` };
const ws2Only = { authorization: `Bearer ${await a.key("acme", ["query"], ["ws2"])}` };

interface Ev { id: number; event: string; data: Record<string, unknown> }
interface Streamed { status: number; type: string; events: Ev[]; comments: string[]; body?: unknown }

/** Calls a stream route and parses it with eventsource-parser; `until` drops the connection after the event it accepts. */
async function stream(method: "GET" | "POST", path: string, opts: { body?: object; headers?: Record<string, string>; until?: (e: Ev) => boolean; onEvent?: (e: Ev) => void } = {}): Promise<Streamed> {
  const abort = new AbortController();
  const res = await fetch(`${base}${path}`, {
    method, signal: abort.signal,
    headers: { ...key, ...(opts.body ? { "content-type": "application/json" } : {}), accept: "text/event-stream", ...opts.headers },
    ...(opts.body ? { body: JSON.stringify(opts.body) } : {}),
  });
  const type = res.headers.get("content-type") ?? "";
  if (!type.startsWith("text/event-stream")) return { status: res.status, type, events: [], comments: [], body: await res.json() };
  const events: Ev[] = [];
  const comments: string[] = [];
  let dropped = false;
  const parser = createParser({
    onEvent: (m: EventSourceMessage) => {
      if (dropped) return;
      const e = { id: Number(m.id), event: m.event ?? "", data: JSON.parse(m.data) as Record<string, unknown> };
      events.push(e);
      opts.onEvent?.(e);
      if (opts.until?.(e)) { dropped = true; abort.abort(); }
    },
    onComment: (c) => comments.push(c),
  });
  const decoder = new TextDecoder();
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      parser.feed(decoder.decode(chunk, { stream: true }));
      if (dropped) break;
    }
  } catch (e) {
    if (!dropped) throw e;
  }
  return { status: res.status, type, events, comments };
}

/** The event types with consecutive content events as one; the text of the content events. */
const kinds = (events: Ev[]) => events.map((e) => e.event).filter((k, i, all) => k !== "content" || all[i - 1] !== "content");
const textOf = (events: Ev[]) => events.filter((e) => e.event === "content").map((e) => String(e.data.delta)).join("");

const conversation = async (id: string, headers = key) => {
  const r = await a.app.inject({ method: "GET", url: `/v1/conversations/${id}?workspace_id=ws1`, headers });
  return r.statusCode === 200 ? (r.json() as { data: { messages: Array<{ role: string; content: string; ended?: string }> } }).data : undefined;
};

t.test("the events of a turn, in order, with sequence ids", async (t) => {
  oa.script([{ text: "Listing.", calls: [{ name: "service_list_files", arguments: { workspace_id: "ws1" } }] }, { text: "One file: data/a.txt." }]);
  const s = await stream("POST", "/v1/query/stream", { body: { prompt: "what files?", workspace_id: "ws1" } });
  t.equal(s.status, 200);
  t.match(s.type, /^text\/event-stream/);
  t.same(kinds(s.events), ["status", "content", "tool_call", "tool_result", "content", "done"]);
  t.same(s.events.map((e) => e.id), s.events.map((_, i) => i + 1), "ids are the sequence numbers");
  t.ok(s.events.filter((e) => e.event === "content").length > 2, "the text comes in pieces, as the model streams it");
  t.equal(textOf(s.events), "Listing.One file: data/a.txt.");
  t.equal(oa.requests[0]?.body.stream, true, "the chat-completions streaming API was used");
  t.ok(s.events.every((e) => e.data.type === e.event), "data.type is the event's type");
  const conv = String(s.events[0]?.data.conversation_id);
  t.match(conv, /^conv-/, "the first event carries the conversation id");
  t.match(s.events.find((e) => e.event === "tool_call")?.data, { tool: "service_list_files", input: { workspace_id: "ws1" } });
  t.match(s.events.find((e) => e.event === "tool_result")?.data, { tool: "service_list_files", status: "ok", summary: /1 files/ });
  t.match(s.events[s.events.length - 1]?.data, { answer: "One file: data/a.txt.", conversation_id: conv, model: "gpt-test", usage: { input_tokens: 200, output_tokens: 20 } });
  t.equal((await conversation(conv))?.messages.length, 2, "recorded");
});

t.test("a client that drops mid-stream resumes with Last-Event-ID: the rest, live, without duplicates", async (t) => {
  oa.script([{ calls: [{ name: "service_list_files", arguments: { workspace_id: "ws1" } }] }, { delayMs: 600, then: { text: "Done listing." } }]);
  const first = await stream("POST", "/v1/query/stream", { body: { prompt: "list", workspace_id: "ws1" }, until: (e) => e.event === "tool_result" });
  t.same(first.events.map((e) => e.event), ["status", "tool_call", "tool_result"], "dropped after the tool result");
  const conv = String(first.events[0]?.data.conversation_id);
  const last = first.events[first.events.length - 1]?.id ?? 0;
  t.notOk(await conversation(conv), "the turn is still running");
  const rest = await stream("POST", "/v1/query/stream", { body: { prompt: "list", workspace_id: "ws1", conversation_id: conv }, headers: { "last-event-id": String(last) } });
  t.equal(rest.status, 200);
  const ids = rest.events.map((e) => e.id);
  t.same(ids, ids.map((_, i) => last + 1 + i), "the events after the last one seen, no duplicates");
  t.same(kinds(rest.events), ["content", "done"]);
  t.equal(textOf(rest.events), "Done listing.");
  t.match(rest.events[rest.events.length - 1]?.data, { answer: "Done listing.", conversation_id: conv });
  const end = ids[ids.length - 1] ?? 0;
  t.equal(oa.requests.length, 2, "no new turn was started");
  t.equal((await conversation(conv))?.messages[1]?.content, "Done listing.");

  // GET resumes too (here a finished turn, still kept a while): from last_event_id, or the header.
  const replay = await stream("GET", `/v1/query/stream?conversation_id=${conv}&last_event_id=2`);
  t.same(replay.events.map((e) => e.id), Array.from({ length: end - 2 }, (_, i) => 3 + i));
  const header = await stream("GET", `/v1/query/stream?conversation_id=${conv}`, { headers: { "last-event-id": String(end - 1) } });
  t.same(header.events.map((e) => e.event), ["done"]);
  t.equal((await stream("GET", `/v1/query/stream?conversation_id=${conv}`, { headers: otherOrg })).status, 404, "another organization's");
  t.equal((await stream("GET", `/v1/query/stream?conversation_id=${conv}`, { headers: ws2Only })).status, 404, "another workspace's");
  t.equal((await stream("GET", "/v1/query/stream?conversation_id=conv-nope")).status, 404, "unknown");
});

t.test("a dropped turn still completes and is recorded; keep-alive comments", async (t) => {
  oa.script([{ delayMs: 400, then: { text: "Finished without you." } }]);
  const s = await stream("POST", "/v1/query/stream", { body: { prompt: "slow", workspace_id: "ws1" }, until: (e) => e.event === "status" });
  const conv = String(s.events[0]?.data.conversation_id);
  await until("the conversation", async () => (await conversation(conv))?.messages.length === 2, 10_000);
  t.equal((await conversation(conv))?.messages[1]?.content, "Finished without you.");

  oa.script([{ delayMs: 350, then: { text: "ok" } }]);
  const kept = await stream("POST", "/v1/query/stream", { body: { prompt: "slow again", workspace_id: "ws1" } });
  t.ok(kept.comments.some((c) => /keep-alive/.test(c)), "a comment keeps the connection alive");
  t.equal(kept.events[kept.events.length - 1]?.event, "done");
});

t.test("POST /v1/query/stop stops a running turn; 404 for an unknown, finished or another key's one", async (t) => {
  oa.script([{ delayMs: 3000, then: { text: "too late" } }]);
  let conv = "";
  const began = Date.now();
  const running = stream("POST", "/v1/query/stream", { body: { prompt: "forever", workspace_id: "ws1" }, onEvent: (e) => { if (e.event === "status") conv = String(e.data.conversation_id); } });
  await until("the turn to ask the model", async () => conv !== "" && oa.requests.length === 1, 10_000);
  const stop = (id: string, headers: Record<string, string> = key) => a.app.inject({ method: "POST", url: "/v1/query/stop", headers, payload: { conversation_id: id } });
  t.equal((await stop(conv, otherOrg)).statusCode, 404, "another organization's");
  t.equal((await stop(conv, ws2Only)).statusCode, 404, "another workspace's");
  const res = await stop(conv);
  t.equal(res.statusCode, 200, res.body);
  t.same(res.json(), { data: { conversation_id: conv, stopped: true } });
  const s = await running;
  t.ok(Date.now() - began < 2500, "the turn ended without waiting for the model");
  const done = s.events[s.events.length - 1];
  t.equal(done?.event, "done");
  t.match(done?.data, { stopped: true, answer: /Stopped: stopped at the user's request/ });
  await until("the conversation", async () => (await conversation(conv))?.messages.length === 2, 10_000);
  t.equal((await conversation(conv))?.messages[1]?.ended, "stopped", "recorded as stopped");
  t.equal((await stop(conv)).statusCode, 404, "finished");
  t.equal((await stop("conv-nope")).statusCode, 404, "unknown");
});

t.test("require_confirmation: a tool that changes data waits for POST /v1/query/confirm", async (t) => {
  const upload = { name: "service_create_upload_url", arguments: { workspace_id: "ws1", filename: "x.fq" } };
  const confirm = (payload: object) => a.app.inject({ method: "POST", url: "/v1/query/confirm", headers: key, payload });
  type A = { data: { conversation_id: string; answer: string; tool_calls: Array<{ tool: string; status: string; summary: string }>; pending_action?: { action_id: string; tool: string; input: unknown } } };

  // Approved, through POST /v1/query: the answer is the pending action; confirm answers with the rest.
  oa.script((r) => r.n === 0
    ? { calls: [{ name: "service_list_files", arguments: { workspace_id: "ws1" } }, upload] }
    : { text: `Result: ${r.results[1]?.content.slice(0, 40)}` });
  const res = await a.app.inject({ method: "POST", url: "/v1/query", headers: key, payload: { prompt: "let me upload", workspace_id: "ws1", require_confirmation: true } });
  t.equal(res.statusCode, 200, res.body);
  const paused = (res.json() as A).data;
  t.match(paused, { answer: "", pending_action: { tool: "service_create_upload_url", input: { filename: "x.fq" } } });
  t.same(paused.tool_calls.map((c) => c.tool), ["service_list_files"], "the read-only tool ran without asking");
  t.equal(oa.requests.length, 1, "paused before the tool ran");
  const actionId = String(paused.pending_action?.action_id);
  t.equal((await confirm({ conversation_id: paused.conversation_id, action_id: "act-nope", approve: true })).statusCode, 404, "not the pending action");
  t.equal((await confirm({ conversation_id: "conv-nope", action_id: actionId, approve: true })).statusCode, 404, "unknown conversation");
  const done = await confirm({ conversation_id: paused.conversation_id, action_id: actionId, approve: true });
  t.equal(done.statusCode, 200, done.body);
  const d = (done.json() as A).data;
  t.match(d.answer, /^Result: \{"uploadUrl"/, "the tool ran and the turn continued");
  t.notOk(d.pending_action);
  t.same(d.tool_calls.map((c) => [c.tool, c.status]), [["service_list_files", "ok"], ["service_create_upload_url", "ok"]]);
  t.equal((await confirm({ conversation_id: paused.conversation_id, action_id: actionId, approve: true })).statusCode, 404, "the turn has ended");

  // Declined, while streaming: the model is told.
  oa.script((r) => r.n === 0 ? { calls: [upload] } : { text: `Told: ${r.results[0]?.content}` });
  const s = await stream("POST", "/v1/query/stream", {
    body: { prompt: "upload again", workspace_id: "ws1", require_confirmation: true },
    onEvent: (e) => { if (e.event === "pending_action") void confirm({ conversation_id: String(e.data.conversation_id), action_id: String(e.data.action_id), approve: false }); },
  });
  t.same(kinds(s.events), ["status", "tool_call", "pending_action", "tool_result", "content", "done"]);
  t.match(s.events[2]?.data, { tool: "service_create_upload_url", input: { filename: "x.fq" }, action_id: /^act-/ });
  t.match(s.events[3]?.data, { status: "error", summary: /declined/ });
  t.match(s.events[s.events.length - 1]?.data, { answer: /^Told: forbidden: the user declined this action/ });

  // Without require_confirmation the tool just runs.
  oa.script([{ calls: [upload] }, { text: "ok" }]);
  const direct = await a.app.inject({ method: "POST", url: "/v1/query", headers: key, payload: { prompt: "upload", workspace_id: "ws1" } });
  t.same((direct.json() as A).data.tool_calls.map((c) => c.status), ["ok"]);
});

t.test("a confirmation that never comes ends with the turn's deadline, as declined", async (t) => {
  const b = await testApp({ llm: { settings: { provider: "openai", model: "gpt-test", baseUrl: oa.baseUrl, apiKey: "sk-test", maxRetries: 0 }, limits: { deadlineMs: 1500 } } });
  t.teardown(() => b.close());
  await b.service.createWorkspace("acme", "ws1");
  const bkey = { authorization: `Bearer ${await b.key("acme", ["query", "files", "tools", "conversations"])}` };
  oa.script((r) => r.n === 0 ? { calls: [{ name: "service_create_upload_url", arguments: { workspace_id: "ws1", filename: "x.fq" } }] } : { text: "unused" });
  const res = await b.app.inject({ method: "POST", url: "/v1/query", headers: bkey, payload: { prompt: "upload", workspace_id: "ws1", require_confirmation: true } });
  const paused = (res.json() as { data: { conversation_id: string; pending_action?: { action_id: string } } }).data;
  t.ok(paused.pending_action, "the turn waits for a confirmation");
  // Nobody confirms: past the deadline the turn ends and the conversation takes a new turn.
  await until("the unconfirmed turn to end", async () => {
    oa.script([{ text: "next turn" }]);
    const next = await b.app.inject({ method: "POST", url: "/v1/query", headers: bkey, payload: { prompt: "hello again", workspace_id: "ws1", conversation_id: paused.conversation_id } });
    return next.statusCode === 200;
  }, 10_000);
  const conv = await b.app.inject({ method: "GET", url: `/v1/conversations/${paused.conversation_id}?workspace_id=ws1`, headers: bkey });
  t.match(JSON.stringify(conv.json()), /declined|deadline|stopped before the user confirmed/, "the first turn is recorded as ended without the action");
  t.equal((await b.app.inject({ method: "POST", url: "/v1/query/confirm", headers: bkey, payload: { conversation_id: paused.conversation_id, action_id: String(paused.pending_action?.action_id), approve: true } })).statusCode, 404, "its action can no longer be confirmed");
});

t.test("the Anthropic Messages format streams too", async (t) => {
  const an: FakeLlm = await startFakeLlm("anthropic");
  t.teardown(() => an.close());
  const b: TestApp = await testApp({ llm: { settings: { provider: "anthropic", model: "claude-test", baseUrl: an.baseUrl, apiKey: "sk-ant-test", maxRetries: 0 } } });
  t.teardown(() => b.close());
  await b.service.createWorkspace("acme", "ws1");
  const bkey = `Bearer ${await b.key("acme", ["query", "files"])}`;
  an.script([{ text: "Let me look.", calls: [{ name: "service_list_files", arguments: { workspace_id: "ws1", prefix: "data/" } }] }, { text: "Nothing there yet." }]);
  const res = await b.app.inject({ method: "POST", url: "/v1/query/stream", headers: { authorization: bkey }, payload: { prompt: "files?", workspace_id: "ws1" } });
  t.equal(res.statusCode, 200);
  const events: Ev[] = [];
  const parser = createParser({ onEvent: (m) => events.push({ id: Number(m.id), event: m.event ?? "", data: JSON.parse(m.data) as Record<string, unknown> }) });
  parser.feed(res.body);
  t.same(kinds(events), ["status", "content", "tool_call", "tool_result", "content", "done"]);
  t.equal(textOf(events), "Let me look.Nothing there yet.");
  t.match(events.find((e) => e.event === "tool_call")?.data, { tool: "service_list_files", input: { workspace_id: "ws1", prefix: "data/" } }, "the tool input assembled from its pieces");
  t.match(events[events.length - 1]?.data, { answer: "Nothing there yet.", model: "claude-test", usage: { input_tokens: 200, output_tokens: 20 } });
  t.equal(an.requests[0]?.body.stream, true, "the streaming API was used");
});

t.test("errors before a turn starts are JSON", async (t) => {
  const none = await stream("POST", "/v1/query/stream", { body: { workspace_id: "ws1" } });
  t.equal(none.status, 400);
  t.match(none.body, { error: "invalid_request" });
  const unknown = await stream("POST", "/v1/query/stream", { body: { prompt: "hi", workspace_id: "ws1", conversation_id: "conv-nope" } });
  t.equal(unknown.status, 404);
  t.equal((await stream("POST", "/v1/query/stream", { body: { prompt: "hi", workspace_id: "ws1" }, headers: { authorization: `Bearer ${await a.key("acme", ["files"])}` } })).status, 403, "scope query");
});
