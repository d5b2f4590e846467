/**
 * `operon ask` against a listening app with a fake OpenAI-format provider: the answer on
 * stdout, tool progress and the conversation id on stderr, exit 0; --conversation continues
 * it; a dropped connection is resumed without repeating events; refusals exit 1; no key
 * exits 2.
 */
import t from "tap";
import type { AddressInfo } from "node:net";
import { askCommand } from "../../cli/ask.js";
import { testApp, type TestApp } from "../support/app.js";
import { startFakeLlm, type FakeLlm } from "../support/fake-llm.js";

const oa: FakeLlm = await startFakeLlm("openai");
t.teardown(() => oa.close());
const a: TestApp = await testApp({ llm: { settings: { provider: "openai", model: "gpt-test", baseUrl: oa.baseUrl, apiKey: "sk-test", maxRetries: 0 } } });
t.teardown(() => a.close());
await a.app.listen({ port: 0, host: "127.0.0.1" });
const url = `http://127.0.0.1:${(a.app.server.address() as AddressInfo).port}`;
await a.service.createWorkspace("acme", "ws1");
await a.store.put("orgs/acme/workspaces/ws1/data/a.txt", "hello\n");
const key = await a.key("acme", ["query", "files", "conversations"]);
const env = { OPERON_URL: url, OPERON_API_KEY: key };

async function ask(args: string[], e: NodeJS.ProcessEnv = env, fetchImpl: typeof fetch = fetch) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await askCommand(args, { out: (s) => out.push(s), err: (s) => err.push(s) }, e, fetchImpl);
  return { code, stdout: out.join("\n"), stderr: err.join("\n") };
}

t.test("streams the answer and the tool progress, then the conversation id; --conversation continues", async (t) => {
  oa.script([{ text: "Looking.", calls: [{ name: "service_list_files", arguments: { workspace_id: "ws1" } }] }, { text: "You have data/a.txt." }]);
  const r = await ask(["what files do I have?", "--workspace", "ws1"]);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, "Looking.\nYou have data/a.txt.");
  t.match(r.stderr, /→ service_list_files \{"workspace_id":"ws1"\}\n {2}✓ 1 files\nconversation: conv-/);
  const conv = /conversation: (conv-\S+)/.exec(r.stderr)?.[1] ?? "";

  oa.script([{ text: "You are welcome." }]);
  const again = await ask(["thanks", "--workspace", "ws1", "--conversation", conv]);
  t.equal(again.code, 0, again.stderr);
  t.equal(again.stdout, "You are welcome.");
  t.match(again.stderr, `conversation: ${conv}`);
  t.equal((oa.requests[0]?.body.messages as unknown[]).length, 4, "the history went to the model");
});

t.test("a dropped connection is resumed from the last event", async (t) => {
  oa.script([{ text: "Step one.", calls: [{ name: "service_list_files", arguments: { workspace_id: "ws1" } }] }, { delayMs: 300, then: { text: "Step two." } }]);
  // The first response's body breaks once the tool call (event 4) has come; the CLI resumes with GET and Last-Event-ID.
  const seen: string[] = [];
  const flaky: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    seen.push(`${init?.method ?? "GET"} ${String(input).replace(url, "")} ${new Headers(init?.headers).get("last-event-id") ?? ""}`.trim());
    if (seen.length > 1 || !res.body) return res;
    const reader = res.body.getReader();
    let text = "";
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { value, done } = await reader.read();
        if (done) { controller.close(); return; }
        controller.enqueue(value);
        text += new TextDecoder().decode(value);
        if (/^id: 4$/m.test(text)) { void reader.cancel(); controller.error(new Error("connection reset")); }
      },
    });
    return new Response(body, { status: res.status, headers: res.headers });
  };
  const r = await ask(["two steps", "--workspace", "ws1"], env, flaky);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, "Step one.\nStep two.", "each text once");
  const after = /connection dropped; resuming after event (\d+)/.exec(r.stderr)?.[1];
  t.ok(Number(after) >= 4, `dropped after the tool call (${after})`);
  t.match(seen[1], new RegExp(`^GET /v1/query/stream\\?conversation_id=conv-\\S+ ${after}$`), "resumed with GET and Last-Event-ID");
  t.equal((r.stderr.match(/→ service_list_files/g) ?? []).length, 1, "the tool call shown once");
});

t.test("refusals exit 1, a missing key 2", async (t) => {
  const unknown = await ask(["hi", "--workspace", "ws1", "--conversation", "conv-nope"]);
  t.equal(unknown.code, 1);
  t.match(unknown.stderr, /operon ask: conversation_id: conversation "conv-nope" not found.*\(not_found\)/);
  oa.script([{ status: 500, body: JSON.stringify({ error: { message: "boom" } }) }]);
  const failed = await ask(["hi", "--workspace", "ws1"]);
  t.equal(failed.code, 1);
  t.match(failed.stderr, /boom.*\(upstream_error\)/);
  const nokey = await ask(["hi"], { OPERON_URL: url, OPERON_DATA_DIR: "/nonexistent" });
  t.equal(nokey.code, 2);
  t.match(nokey.stderr, /no API key/);
  const down = await ask(["hi"], { OPERON_URL: "http://127.0.0.1:1", OPERON_API_KEY: key });
  t.equal(down.code, 2);
  t.match(down.stderr, /cannot reach/);
});
