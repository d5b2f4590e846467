/**
 * Floods of bad keys (docs/security.md#api-keys): a per-address rate limit runs before authentication, so
 * random keys from one address are refused with 429 (Retry-After) after the limit without a
 * store read each, while the per-key limit stays; unknown keys are cached briefly and apart
 * from known keys, so they cost one read per burst and never evict a good key; a key created
 * after a failed lookup works within that brief time (never longer than the key cache TTL).
 */
import t from "tap";
import type { LightMyRequestResponse } from "fastify";
import { Authenticator, KEY_CACHE_MAX_ENTRIES, NEGATIVE_KEY_CACHE_MS } from "../../api-server/auth.js";
import { generateKey, hashKey, type KeyRecord, type ServiceStore } from "../../services/store.js";
import { StoreError, type ObjectStore } from "../../core/ports.js";
import { testApp } from "../support/app.js";

const ATTACKER = "203.0.113.7";
const CLIENT = "198.51.100.9";

/** Counts the store reads (get, head, list) whose key starts with a prefix, by wrapping the store's methods. */
function countReads(store: ObjectStore): { count(prefix?: string): number; reset(): void } {
  const reads: string[] = [];
  const s = store as unknown as Record<"get" | "head" | "list", (key: string, ...rest: unknown[]) => Promise<unknown>>;
  for (const method of ["get", "head", "list"] as const) {
    const original = s[method].bind(store);
    s[method] = (key, ...rest) => { reads.push(key); return original(key, ...rest); };
  }
  return {
    count: (prefix = "") => reads.filter((k) => k.startsWith(prefix)).length,
    reset: () => { reads.length = 0; },
  };
}

t.test("a flood of random keys from one address: 429 after the per-address limit, a bounded number of store reads", async (t) => {
  const limit = 20;
  const a = await testApp({ ipRateLimit: limit });
  t.teardown(() => a.close());
  await a.service.createWorkspace("acme", "w1");
  const good = { authorization: `Bearer ${await a.key("acme", ["files"])}` };
  const reads = countReads(a.store);
  const get = (address: string, headers: Record<string, string>, url = "/v1/files?workspace_id=w1") =>
    a.app.inject({ method: "GET", url, headers, remoteAddress: address });

  t.equal((await get(CLIENT, good)).statusCode, 200, "the good key works (and is cached now)");
  reads.reset();
  const flood: LightMyRequestResponse[] = [];
  for (let i = 0; i < 200; i++) flood.push(await get(ATTACKER, { authorization: `Bearer ${generateKey()}` }));
  const statuses = flood.map((r) => r.statusCode);
  t.same(statuses.slice(0, limit), Array(limit).fill(401), `the first ${limit} are looked up: 401`);
  t.same(statuses.slice(limit), Array(200 - limit).fill(429), "the rest: 429, before any lookup");
  const limited = flood[flood.length - 1] as LightMyRequestResponse;
  t.equal(limited.json().error, "rate_limited", "error rate_limited");
  t.match(limited.json().message, /per minute from one address/, "the message says which limit");
  t.ok(Number(limited.headers["retry-after"]) > 0 && Number(limited.headers["retry-after"]) <= 60, "Retry-After: seconds until the window ends");
  t.equal(limited.json().request_id, limited.headers["x-request-id"], "the error envelope");
  t.ok(reads.count() <= limit, `at most ${limit} store reads for 200 bad keys (${reads.count()})`);
  t.equal(reads.count("_system/key-hashes/"), limit, "one key lookup per request let through");

  reads.reset();
  t.equal((await get(ATTACKER, {})).statusCode, 429, "from that address even a request without a key is refused first");
  t.equal((await get(ATTACKER, good)).statusCode, 429, "and a good key, too: the address is over its limit");
  t.equal(reads.count(), 0, "none of these read the store");

  for (let i = 0; i < 5; i++) t.equal((await get(CLIENT, good)).statusCode, 200, `the good key from its own address still works (${i + 1})`);
  t.equal(reads.count("_system/key-hashes/") + reads.count("_system/keys/"), 0, "and stays cached: no key lookup");

  for (const url of ["/healthz", "/readyz", "/v1/openapi.json"]) {
    t.equal((await a.app.inject({ method: "GET", url, remoteAddress: ATTACKER })).statusCode, 200, `${url} is not limited per address`);
  }
});

t.test("the per-key limit still applies below the per-address one", async (t) => {
  const a = await testApp({ rateLimit: 3, ipRateLimit: 1000 });
  t.teardown(() => a.close());
  const key = { "x-api-key": await a.key("acme", ["files"]) };
  const other = { "x-api-key": await a.key("acme", ["files"]) };
  const get = (headers: Record<string, string>) => a.app.inject({ method: "GET", url: "/v1/workspaces", headers, remoteAddress: CLIENT });
  for (let i = 0; i < 3; i++) t.equal((await get(key)).statusCode, 200, `request ${i + 1}`);
  const limited = await get(key);
  t.equal(limited.statusCode, 429, "the key's own limit");
  t.match(limited.json().message, /rate limit of 3 requests per minute exceeded/);
  t.ok(Number(limited.headers["retry-after"]) > 0, "Retry-After");
  t.equal((await get(other)).statusCode, 200, "another key from the same address works");
});

t.test("IPv6 clients are counted per /64", async (t) => {
  const a = await testApp({ ipRateLimit: 2 });
  t.teardown(() => a.close());
  const key = { "x-api-key": await a.key("acme", ["files"]) };
  const get = (address: string) => a.app.inject({ method: "GET", url: "/v1/workspaces", headers: key, remoteAddress: address });
  t.equal((await get("2001:db8:1:2::1")).statusCode, 200);
  t.equal((await get("2001:db8:1:2::abcd")).statusCode, 200);
  t.equal((await get("2001:db8:1:2:ffff::9")).statusCode, 429, "a third address of the same /64 is over the limit");
  t.equal((await get("2001:db8:1:3::1")).statusCode, 200, "another /64 is not");
});

/* ---------- the key caches, on the Authenticator with a stand-in service ---------- */

function keyRecord(key: string, id: string): KeyRecord {
  return {
    id, organization: "acme", scopes: ["files"], workspaces: null, name: "", created_at: new Date(0).toISOString(),
    revoked_at: null, last_used_at: null, hash: hashKey(key),
  };
}

/** A ServiceStore holding `keys`, counting lookups by hash; `fail` makes the next lookups throw as in an outage. */
function standIn() {
  const keys = new Map<string, KeyRecord>();
  const lookups = new Map<string, number>();
  const state = { fail: 0 };
  const service = {
    async findKeyByHash(hash: string) {
      lookups.set(hash, (lookups.get(hash) ?? 0) + 1);
      await new Promise((r) => setImmediate(r));
      if (state.fail > 0) { state.fail--; throw new StoreError("Unavailable", "object store unavailable"); }
      return keys.get(hash);
    },
    async touchKeys() { /* not under test */ },
  } as unknown as ServiceStore;
  let offset = 0;
  const clock = { now: () => 1_000_000 + offset, advance: (ms: number) => { offset += ms; } };
  return {
    service, clock, state,
    add(key: string) { keys.set(hashKey(key), keyRecord(key, `key_${String(keys.size).padStart(16, "0")}`)); },
    lookupsOf: (key: string) => lookups.get(hashKey(key)) ?? 0,
    total: () => [...lookups.values()].reduce((x, y) => x + y, 0),
  };
}

const auth = (key: string) => ({ authorization: `Bearer ${key}` });

t.test("an unknown key costs one lookup per burst, concurrent requests included", async (t) => {
  const s = standIn();
  const a = new Authenticator(s.service, 30, s.clock);
  const bad = generateKey();
  const results = await Promise.all(Array.from({ length: 50 }, () => a.authenticate(auth(bad))));
  t.ok(results.every((r) => "failure" in r && r.failure === "unknown"), "all unknown");
  for (let i = 0; i < 50; i++) await a.authenticate(auth(bad));
  t.equal(s.lookupsOf(bad), 1, "100 requests, one lookup");
  s.clock.advance(NEGATIVE_KEY_CACHE_MS);
  await a.authenticate(auth(bad));
  t.equal(s.lookupsOf(bad), 2, "looked up again once the brief negative caching is over");
});

t.test("unknown keys never evict known ones; the cache of unknown keys is bounded", async (t) => {
  const s = standIn();
  const a = new Authenticator(s.service, 30, s.clock);
  const good = generateKey();
  s.add(good);
  t.notOk("failure" in await a.authenticate(auth(good)), "the good key works");
  const first = generateKey();
  await a.authenticate(auth(first));
  for (let i = 0; i < KEY_CACHE_MAX_ENTRIES + 100; i++) await a.authenticate(auth(generateKey()));
  t.notOk("failure" in await a.authenticate(auth(good)), "the good key still works");
  t.equal(s.lookupsOf(good), 1, `after ${KEY_CACHE_MAX_ENTRIES + 100} random keys, the good key is still cached`);
  await a.authenticate(auth(first));
  t.equal(s.lookupsOf(first), 2, "the oldest unknown key was dropped from its bounded cache");
});

t.test("a key created after a failed lookup works within the negative caching time, never later than the key cache TTL", async (t) => {
  for (const ttlSeconds of [30, 1]) {
    const s = standIn();
    const a = new Authenticator(s.service, ttlSeconds, s.clock);
    const key = generateKey();
    t.match(await a.authenticate(auth(key)), { failure: "unknown" }, `ttl ${ttlSeconds} s: unknown before it exists`);
    s.add(key);
    const wait = Math.min(NEGATIVE_KEY_CACHE_MS, ttlSeconds * 1000);
    s.clock.advance(wait - 1);
    t.match(await a.authenticate(auth(key)), { failure: "unknown" }, `ttl ${ttlSeconds} s: still remembered as unknown just before ${wait} ms`);
    s.clock.advance(1);
    t.match(await a.authenticate(auth(key)), { keyId: /^key_/ }, `ttl ${ttlSeconds} s: works after ${wait} ms`);
  }
  t.ok(NEGATIVE_KEY_CACHE_MS <= 30_000 && NEGATIVE_KEY_CACHE_MS >= 1000, "a few seconds");
});

t.test("a failed lookup (store unavailable) is not cached", async (t) => {
  const s = standIn();
  const a = new Authenticator(s.service, 30, s.clock);
  const key = generateKey();
  s.add(key);
  s.state.fail = 1;
  await t.rejects(a.authenticate(auth(key)), { code: "Unavailable" }, "the outage is an error, not an unknown key");
  t.match(await a.authenticate(auth(key)), { keyId: /^key_/ }, "the next request looks it up again and works");
  t.equal(s.lookupsOf(key), 2);
});
