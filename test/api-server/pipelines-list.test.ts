/**
 * Listing runs (`GET /v1/pipelines`) and reading step logs through the API, over the
 * embedded engine's run store: cursor pagination that returns every run of the workspace
 * exactly once, newest first, even while runs are being created, never another
 * organization's or workspace's runs; and logs streamed from storage, with `tail` reading
 * only the end of the object.
 */
import t from "tap";
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { createLocalObjectStore } from "../../adapters/local/object-store.js";
import { createLocalRunStore } from "../../adapters/local/run-store.js";
import { ulid } from "../../core/ids.js";
import type { ByteRange, ObjectStore, RunRecord, RunStatusValue } from "../../core/ports.js";
import { SECRET, testApp } from "../support/app.js";

const base = Date.parse("2026-11-01T00:00:00.000Z");

/** A finished run (the engine has nothing to do with it). */
function runAt(ms: number, organization: string, workspace: string, status: RunStatusValue = "completed", id = `run-${ulid(ms, randomBytes(10))}`): RunRecord {
  return {
    id, organization, workspace, pipelineId: "p", name: "P", source: { kind: "inline" },
    spec: { id: "p", steps: [{ stepId: "s1", toolName: "samtools", parameters: { command: "flagstat", inputFile: "in.bam" } }] },
    parameters: {}, inputChecksums: {}, outputFolder: `pipelines/${id}`, createdAt: new Date(ms).toISOString(),
    startedAt: null, completedAt: null, status, progressPct: 100, error: null, cancelRequested: false,
    steps: [{ stepId: "s1", toolName: "samtools", status: status === "completed" ? "completed" : "failed", startedAt: null, completedAt: null, exitCode: 0, error: null, attempt: 1, outputs: [] }],
    submittedBy: "key_1",
  };
}

const newestFirst = (a: RunRecord, b: RunRecord) => (a.createdAt !== b.createdAt ? (a.createdAt < b.createdAt ? 1 : -1) : a.id < b.id ? 1 : -1);

/** Ranged and whole reads of the store, to check what the logs route reads. */
const reads: Array<{ key: string; range?: ByteRange; bytes: number }> = [];
const appOf = async () => {
  const dir = join((await import("node:os")).tmpdir(), `operon-runs-${randomBytes(4).toString("hex")}`);
  mkdirSync(dir, { recursive: true });
  const local = createLocalObjectStore({ root: dir, publicUrl: "http://localhost", signingSecret: SECRET });
  const store: ObjectStore = {
    ...local,
    get: async (key, range) => {
      const got = await local.get(key, range);
      const rec = { key, ...(range ? { range } : {}), bytes: 0 };
      reads.push(rec);
      const body = got.body;
      async function* counted() { for await (const c of body) { rec.bytes += c.length; yield c; } }
      return { ...got, body: Object.assign(counted(), { destroy: (e?: Error) => body.destroy?.(e) }) };
    },
  };
  const a = await testApp({ store, engine: {} });
  return { a, cleanup: async () => { await a.close(); rmSync(dir, { recursive: true, force: true }); } };
};

const { a, cleanup } = await appOf();
t.teardown(cleanup);
const runs = a.engine!.runs;
await a.service.createWorkspace("acme", "ws1");
await a.service.createWorkspace("acme", "ws2");
await a.service.createWorkspace("globex", "ws1");
const h = { authorization: `Bearer ${await a.key("acme", ["tools"])}` };

interface Page { data: Array<{ id: string; status: string; workspace_id: string }>; has_more: boolean; next_cursor: string | null }
const list = async (query: string) => {
  const r = await a.app.inject({ method: "GET", url: `/v1/pipelines?${query}`, headers: h });
  return { status: r.statusCode, body: r.json() as Page & { error?: string; message?: string } };
};

// 250 runs in acme/ws1 — groups of five share a millisecond, so ties are ordered by id —
// interleaved in time with runs of the same workspace name in another organization and of
// another workspace of the same organization. Every third one failed.
const mine: RunRecord[] = [];
const others: RunRecord[] = [];
for (let i = 0; i < 250; i++) mine.push(runAt(base + Math.floor(i / 5) * 1000, "acme", "ws1", i % 3 === 0 ? "failed" : "completed"));
for (let i = 0; i < 40; i++) others.push(runAt(base + i * 1234, "globex", "ws1"), runAt(base + i * 1234 + 1, "acme", "ws2"));
for (const r of [...mine, ...others].sort(() => Math.random() - 0.5)) await runs.create(r);
mine.sort(newestFirst);

t.test("250 runs in pages of 100: every run exactly once, newest first, only this workspace's", async (t) => {
  const seen: string[] = [];
  const sizes: number[] = [];
  let cursor: string | null = null;
  do {
    const { status, body } = await list(`workspace_id=ws1&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    t.equal(status, 200, `page ${sizes.length + 1}`, { body });
    if (status !== 200) break;
    seen.push(...body.data.map((r) => r.id));
    sizes.push(body.data.length);
    t.equal(body.has_more, body.next_cursor !== null, `page ${sizes.length}: has_more exactly with a next_cursor`);
    t.ok(body.data.every((r) => r.workspace_id === "ws1"), "runs of ws1");
    cursor = body.next_cursor;
  } while (cursor !== null && sizes.length < 10);
  t.same(sizes, [100, 100, 50], "three pages; the last has has_more false and next_cursor null");
  t.same(seen, mine.map((r) => r.id), "every run once, newest first (ties by id)");
  const foreign = new Set(others.map((r) => r.id));
  t.notOk(seen.some((id) => foreign.has(id)), "another organization's (or workspace's) runs never appear");

  const def = await list("workspace_id=ws1");
  t.equal(def.body.data.length, 100, "limit defaults to 100");
  t.equal(def.body.has_more, true);
  const max = await list("workspace_id=ws1&limit=1000");
  t.equal(max.body.data.length, 250, "limit up to 1000");
  t.equal(max.body.has_more, false);
  t.equal(max.body.next_cursor, null);
  t.equal((await list("workspace_id=ws1&limit=1001")).status, 400, "limit over 1000");
  const bad = await list("workspace_id=ws1&cursor=not-a-cursor");
  t.equal(bad.status, 400, "a cursor that was not handed out");
  t.equal(bad.body.error, "invalid_request");
  t.match(bad.body.message, /cursor/);

  const globex = { authorization: `Bearer ${await a.key("globex", ["tools"])}` };
  const theirs = await a.app.inject({ method: "GET", url: "/v1/pipelines?workspace_id=ws1&limit=1000", headers: globex });
  t.same((theirs.json() as Page).data.map((r) => r.id).sort(), others.filter((r) => r.organization === "globex").map((r) => r.id).sort(), "the other organization sees only its own");
  // A cursor from another listing only names a position: it never reveals anything.
  const crossed = await a.app.inject({ method: "GET", url: `/v1/pipelines?workspace_id=ws1&cursor=${def.body.next_cursor}`, headers: globex });
  t.ok((crossed.json() as Page).data.every((r) => foreign.has(r.id)), "a foreign cursor on the other organization lists its runs only");
});

t.test("status filter pages through the matching runs only", async (t) => {
  const failed = mine.filter((r) => r.status === "failed").map((r) => r.id);
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const { body } = await list(`workspace_id=ws1&status=failed&limit=30${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    seen.push(...body.data.map((r) => r.id));
    t.ok(body.data.every((r) => r.status === "failed"), "only failed runs");
    cursor = body.next_cursor;
    pages++;
  } while (cursor !== null && pages < 10);
  t.same(seen, failed, "every failed run once, in order");
  t.equal(pages, Math.ceil(failed.length / 30));
});

t.test("stable under concurrent inserts: runs created between pages neither repeat nor hide older ones", async (t) => {
  const first = await list("workspace_id=ws1&limit=100");
  const seen = first.body.data.map((r) => r.id);
  // New runs arrive (newer than everything listed, some in the same millisecond as the newest).
  const newest = Date.parse(mine[0]!.createdAt);
  const fresh = Array.from({ length: 20 }, (_, i) => runAt(newest + (i % 2 ? 0 : 60_000 + i), "acme", "ws1"));
  // And one older than everything (a replica whose clock is behind): it belongs after the cursor.
  const older = runAt(base - 1000, "acme", "ws1");
  await Promise.all([...fresh, older].map((r) => runs.create(r)));
  let cursor = first.body.next_cursor;
  while (cursor !== null) {
    const { body } = await list(`workspace_id=ws1&limit=100&cursor=${encodeURIComponent(cursor)}`);
    seen.push(...body.data.map((r) => r.id));
    cursor = body.next_cursor;
  }
  t.same(seen, [...mine.map((r) => r.id), older.id], "each run once, in order: the newer ones are not in later pages, the older one is");
  const all = await list("workspace_id=ws1&limit=1000");
  t.equal(all.body.data.length, 271, "a new listing has the new runs too");
  t.ok(fresh.every((r) => all.body.data.slice(0, 25).some((x) => x.id === r.id)), "at the top");
});

t.test("the local run store indexes runs stored before its index existed, and skips index entries without a run", async (t) => {
  const dir = join(a.dir, "legacy");
  mkdirSync(join(dir, "runs"), { recursive: true });
  const old = [runAt(base, "acme", "ws1"), runAt(base + 1, "acme", "ws1"), runAt(base + 2, "globex", "ws1")];
  for (const r of old) writeFileSync(join(dir, "runs", `${r.id}.json`), JSON.stringify(r));
  const legacy = createLocalRunStore(dir);
  t.same((await legacy.list({ organization: "acme", workspace: "ws1" })).map((r) => r.id), [old[1]!.id, old[0]!.id], "old runs listed, newest first");
  t.same((await legacy.list({ organization: "globex" })).map((r) => r.id), [old[2]!.id], "by organization");
  t.equal((await legacy.list({})).length, 3, "everything, for the operator");
  const later = runAt(base + 3, "acme", "ws1");
  await legacy.create(later);
  rmSync(join(dir, "runs", `${old[1]!.id}.json`)); // an index entry whose run is gone
  t.same((await legacy.list({ organization: "acme", workspace: "ws1", limit: 2 })).map((r) => r.id), [later.id, old[0]!.id], "a missing run is skipped, the page still full");
  t.same((await legacy.list({ organization: "acme", workspace: "ws1", after: { createdAt: later.createdAt, id: later.id } })).map((r) => r.id), [old[0]!.id], "after a position");
  t.ok(readdirSync(join(dir, "runs-index")).includes(".complete"), "indexed once");
});

t.test("step logs: streamed from storage; tail reads only the end of the object", async (t) => {
  const run = runAt(Date.now(), "acme", "ws1");
  await runs.create(run);
  const lines = Array.from({ length: 160_000 }, (_, i) => `line ${String(i).padStart(6, "0")} ${"x".repeat(i % 50)}`);
  const text = lines.join("\n") + "\n";
  t.ok(text.length > 5_000_000, `a log of ${(text.length / 1e6).toFixed(1)} MB`);
  const key = `orgs/acme/workspaces/ws1/${run.outputFolder}/logs/s1.log`;
  await a.store.put(key, text, { contentType: "text/plain" });
  const url = `/v1/pipelines/${run.id}/steps/s1/logs?workspace_id=ws1`;

  reads.length = 0;
  const whole = await a.app.inject({ method: "GET", url, headers: h });
  t.equal(whole.statusCode, 200);
  t.match(whole.headers["content-type"], /^text\/plain/);
  t.equal(whole.headers["content-length"], String(Buffer.byteLength(text)), "length known up front");
  t.ok(whole.body === text, "the whole log");
  t.same(reads.map((r) => [r.key, r.range]), [[key, undefined]], "one streamed read of the object");

  for (const n of [1, 5, 1000, 10_000]) {
    reads.length = 0;
    const r = await a.app.inject({ method: "GET", url: `${url}&tail=${n}`, headers: h });
    t.equal(r.statusCode, 200);
    t.ok(r.body === lines.slice(-n).join("\n") + "\n", `tail=${n}: the last ${n} lines`);
    const bytes = reads.reduce((s, x) => s + x.bytes, 0);
    t.ok(reads.every((x) => x.range !== undefined), `tail=${n}: only ranged reads`);
    t.ok(bytes <= Math.max(64 * 1024, 4 * Buffer.byteLength(r.body)), `tail=${n}: read ${bytes} bytes of ${text.length} for ${r.body.length}`);
  }
  t.equal((await a.app.inject({ method: "GET", url: `${url}&tail=0`, headers: h })).statusCode, 400, "tail ≥ 1");
  t.equal((await a.app.inject({ method: "GET", url: `${url}&tail=10001`, headers: h })).statusCode, 400, "tail ≤ 10,000");

  // No final line break; fewer lines than asked for; an empty log; no log at all.
  await a.store.put(key, "a\nb\nc");
  t.equal((await a.app.inject({ method: "GET", url: `${url}&tail=2`, headers: h })).body, "b\nc");
  t.equal((await a.app.inject({ method: "GET", url: `${url}&tail=10`, headers: h })).body, "a\nb\nc");
  await a.store.put(key, "");
  t.equal((await a.app.inject({ method: "GET", url: `${url}&tail=3`, headers: h })).body, "");
  await a.store.delete(key);
  const none = await a.app.inject({ method: "GET", url: `${url}&tail=3`, headers: h });
  t.equal(none.statusCode, 200);
  t.equal(none.body, "", "no log yet");
  t.equal((await a.app.inject({ method: "GET", url: `/v1/pipelines/${run.id}/steps/nope/logs`, headers: h })).statusCode, 404);
});
