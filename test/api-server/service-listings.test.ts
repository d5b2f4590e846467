/**
 * Listings of service data read only what they return: a page of conversations reads the
 * page's conversations (through the activity index), not every conversation of the
 * workspace; an organization's keys are read without reading other organizations' keys.
 * Data stored before the indexes existed is still listed.
 */
import t from "tap";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLocalObjectStore } from "../../adapters/local/object-store.js";
import { ServiceStore, hashKey, type ConversationRecord, type KeyRecord } from "../../services/store.js";
import type { ObjectStore } from "../../core/ports.js";
import { SECRET, testApp } from "../support/app.js";

/** A local store that counts whole-object reads by key prefix. */
function countingStore() {
  const dir = mkdtempSync(join(tmpdir(), "operon-listings-"));
  const local = createLocalObjectStore({ root: dir, publicUrl: "http://localhost", signingSecret: SECRET });
  const gets: string[] = [];
  const store: ObjectStore = { ...local, get: (key, range) => { gets.push(key); return local.get(key, range); } };
  return { store, gets, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

const conv = (i: number, ws = "ws1", org = "acme"): ConversationRecord => ({
  id: `c${String(i).padStart(4, "0")}`, organization: org, workspace_id: ws, title: `chat ${i}`,
  created_at: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString(),
  // Activity in an order unrelated to the ids; some share a millisecond.
  updated_at: new Date(Date.UTC(2026, 5, 1) + ((i * 7919) % 500) * 60_000 + (i % 3 === 0 ? 0 : 1)).toISOString(),
  messages: [{ role: "user", content: `hello ${i}` }],
});
const byActivity = (a: ConversationRecord, b: ConversationRecord) => (a.updated_at !== b.updated_at ? (a.updated_at < b.updated_at ? 1 : -1) : a.id < b.id ? -1 : 1);

t.test("conversations: a page reads only its conversations; every one once, by most recent activity", async (t) => {
  const { store, gets, cleanup } = countingStore();
  t.teardown(cleanup);
  const a = await testApp({ store });
  t.teardown(() => a.close());
  await a.service.createWorkspace("acme", "ws1");
  await a.service.createWorkspace("acme", "ws2");
  const h = { authorization: `Bearer ${await a.key("acme", ["conversations"])}` };
  const all = Array.from({ length: 500 }, (_, i) => conv(i));
  for (const c of all) await a.service.saveConversation(c);
  for (let i = 0; i < 30; i++) await a.service.saveConversation(conv(1000 + i, "ws2"));
  const expected = [...all].sort(byActivity).map((c) => c.id);

  gets.length = 0;
  const first = await a.app.inject({ method: "GET", url: "/v1/conversations?workspace_id=ws1", headers: h });
  t.equal(first.statusCode, 200);
  const body = first.json() as { data: Array<{ id: string; message_count: number }>; has_more: boolean; next_cursor: string | null };
  t.same(body.data.map((c) => c.id), expected.slice(0, 20), "the 20 most recently active");
  t.equal(body.has_more, true);
  t.equal(body.next_cursor, expected[19], "next_cursor is the last conversation's id (spec: `before`)");
  const convReads = gets.filter((k) => k.includes("/conversations/")).length;
  t.ok(convReads <= 21, `read ${convReads} of 500 conversations for a page of 20`);

  const seen: string[] = [];
  let before: string | null = null;
  let pages = 0;
  do {
    const r = await a.app.inject({ method: "GET", url: `/v1/conversations?workspace_id=ws1&limit=100${before ? `&before=${before}` : ""}`, headers: h });
    const p = r.json() as typeof body;
    seen.push(...p.data.map((c) => c.id));
    before = p.next_cursor;
    pages++;
  } while (before !== null && pages < 20);
  t.same(seen, expected, "pages of 100 through `before`: every conversation once, in order");
  t.equal(pages, 5);

  // New activity moves a conversation to the top, once; its old place is gone.
  const moved = { ...all[123]!, updated_at: "2027-01-01T00:00:00.000Z", messages: [...all[123]!.messages, { role: "assistant", content: "hi" }] };
  await a.service.saveConversation(moved);
  const after = await a.service.listConversations("acme", "ws1", 100);
  t.equal(after?.items[0]?.id, moved.id, "most recent first");
  t.equal(after?.items[0]?.messages.length, 2);
  const everything = await a.service.listConversations("acme", "ws1", 100_000);
  t.equal(everything?.items.filter((c) => c.id === moved.id).length, 1, "listed once");
  t.equal(everything?.items.length, 500);

  // An entry left by an interrupted save (its conversation has other activity) is skipped.
  await store.put("_system/orgs/acme/conversation-activity/ws1/0000000000000.c0001", "c0001");
  const top = await a.service.listConversations("acme", "ws1", 3);
  t.same(top?.items.map((c) => c.id), [moved.id, ...expected.filter((id) => id !== moved.id).slice(0, 2)], "a stale entry is not shown");
  t.equal((await a.service.listConversations("acme", "ws1", 100_000))?.items.length, 500, "nor counted twice");
  t.equal(await a.service.listConversations("acme", "ws1", 10, "nope"), undefined, "`before` must be a conversation of the workspace");
  t.equal(await a.service.listConversations("acme", "ws2", 10, expected[0]), undefined);
});

t.test("conversations stored before the activity index are indexed on the first listing", async (t) => {
  const { store, cleanup } = countingStore();
  t.teardown(cleanup);
  const old = [conv(1), conv(2), conv(3)];
  for (const c of old) await store.put(`_system/orgs/acme/workspaces/ws1/conversations/${c.id}.json`, JSON.stringify(c));
  const service = new ServiceStore(store);
  const page = await service.listConversations("acme", "ws1", 2);
  t.same(page?.items.map((c) => c.id), [...old].sort(byActivity).slice(0, 2).map((c) => c.id));
  t.equal(page?.hasMore, true);
});

t.test("keys: an organization's keys are read without reading other organizations'", async (t) => {
  const { store, gets, cleanup } = countingStore();
  t.teardown(cleanup);
  const service = new ServiceStore(store);
  for (let i = 0; i < 40; i++) await service.createKey({ organization: "big", scopes: ["files"], workspaces: null });
  const mine = [];
  for (let i = 0; i < 3; i++) mine.push((await service.createKey({ organization: "acme", scopes: ["files"], workspaces: null, name: `k${i}` })).record);
  t.equal((await service.listKeys("acme")).length, 3, "the first listing of this store builds the index once");
  gets.length = 0;
  const listed = await new ServiceStore(store).listKeys("acme");
  t.same(listed.map((k) => k.id).sort(), mine.map((k) => k.id).sort(), "acme's keys");
  const keyReads = gets.filter((k) => k.startsWith("_system/keys/")).length;
  t.equal(keyReads, 3, "only acme's key records were read");
  t.equal((await service.listKeys("big")).length, 40);
  t.same(await service.listKeys("nobody"), []);
});

t.test("keys stored before the per-organization index are listed", async (t) => {
  const { store, cleanup } = countingStore();
  t.teardown(cleanup);
  const rec: KeyRecord = {
    id: "key_0123456789abcdef", organization: "acme", scopes: ["files"], workspaces: null, name: "old",
    created_at: "2026-01-01T00:00:00.000Z", revoked_at: null, last_used_at: null, hash: hashKey("sk_live_old"),
  };
  await store.put(`_system/keys/${rec.id}.json`, JSON.stringify(rec));
  await store.put(`_system/key-hashes/${rec.hash}.json`, JSON.stringify({ id: rec.id }));
  const service = new ServiceStore(store);
  t.same((await service.listKeys("acme")).map((k) => k.id), [rec.id], "the old key is listed");
  const made = await new ServiceStore(store).createKey({ organization: "acme", scopes: ["tools"], workspaces: null });
  t.same((await new ServiceStore(store).listKeys("acme")).map((k) => k.id), [rec.id, made.record.id], "with new ones, oldest first");
});
