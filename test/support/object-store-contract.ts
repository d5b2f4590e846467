/**
 * The ObjectStore contract (docs/storage.md#the-object-store-contract): one suite that every adapter (s3, local-fs) must
 * pass, so both modes store, list, range, presign and take multipart uploads the same way.
 * Each case gets a fresh, empty store from `make()` and calls its `cleanup()` afterwards.
 */
import { createHash, randomBytes } from "node:crypto";
import type { Test } from "tap";
import { StoreError } from "../../core/ports.js";
import type { ByteStream, MultipartUploads, ObjectStore } from "../../core/ports.js";

export interface ObjectStoreContractOptions {
  /** Fetch presigned URLs with global `fetch` (the local adapter's are served by the api-server). Default true. */
  presignedFetch?: boolean;
}

type Make = () => Promise<{ store: ObjectStore; cleanup(): Promise<void> }>;
type Case = (t: Test, store: ObjectStore) => Promise<void>;

const KiB = 1024;
const MiB = 1024 * KiB;

export const sha256Hex = (data: Uint8Array | string): string => createHash("sha256").update(data).digest("hex");

export async function readAll(body: ByteStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks);
}

/** `data` as an async iterable of `chunkSize` slices, optionally failing after `failAfter` bytes. */
export async function* chunked(data: Uint8Array, chunkSize = 64 * KiB, failAfter?: number): AsyncGenerator<Uint8Array> {
  for (let offset = 0; offset < data.byteLength; offset += chunkSize) {
    if (failAfter !== undefined && offset >= failAfter) throw new Error("source stream failed midway");
    yield data.subarray(offset, Math.min(offset + chunkSize, data.byteLength));
    await Promise.resolve();
  }
}

export async function expectStoreError(t: Test, promise: Promise<unknown>, code: StoreError["code"], message: string): Promise<void> {
  try {
    await promise;
    t.fail(`${message}: expected StoreError ${code}, but it succeeded`);
  } catch (err) {
    t.ok(err instanceof StoreError, `${message}: a StoreError`, { found: err });
    t.equal((err as StoreError).code, code, `${message}: ${code}`);
  }
}

async function listAll(store: ObjectStore, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 1000; pages++) {
    const page = await store.list(prefix, cursor === undefined ? { limit: 1000 } : { limit: 1000, cursor });
    keys.push(...page.items.map((i) => i.key));
    if (page.nextCursor === undefined) return keys;
    cursor = page.nextCursor;
  }
  throw new Error("list did not end");
}

/** A presigned URL with one query parameter (matched by `name`) altered. */
function tamper(url: string, name: RegExp, change: (value: string) => string): string | undefined {
  const u = new URL(url);
  for (const [k, v] of u.searchParams) {
    if (name.test(k)) {
      u.searchParams.set(k, change(v));
      return u.toString();
    }
  }
  return undefined;
}

const flipLast = (s: string) => s.slice(0, -1) + (s.endsWith("0") ? "1" : "0");

const md5Of = (data: Uint8Array) => createHash("md5").update(data);

/** PUTs `bytes` to a part URL, with a Content-MD5 (of the bytes unless given); the status and the ETag header. */
async function sendPart(url: string, bytes: Uint8Array, md5: string | null = md5Of(bytes).digest("base64")): Promise<{ status: number; etag: string | null; text: string }> {
  const res = await fetch(url, { method: "PUT", body: new Uint8Array(bytes), headers: md5 === null ? {} : { "Content-MD5": md5 } });
  return { status: res.status, etag: res.headers.get("etag"), text: await res.text() };
}

/** The store's multipart uploads; the contract requires them of every adapter. */
function multipartOf(t: Test, store: ObjectStore): MultipartUploads {
  if (!store.multipart) {
    t.fail("the store has no multipart uploads");
    throw new Error("no multipart uploads");
  }
  return store.multipart;
}

/** An upload of `data` in parts of `partSize`: the parts' bytes, numbered from 1. */
function partsOf(data: Buffer, partSize: number): Array<{ partNumber: number; bytes: Buffer }> {
  const parts = [];
  for (let i = 0; i * partSize < data.length || i === 0; i++) parts.push({ partNumber: i + 1, bytes: data.subarray(i * partSize, Math.min((i + 1) * partSize, data.length)) });
  return parts;
}

export function objectStoreContract(t: Test, name: string, make: Make, options: ObjectStoreContractOptions = {}): Promise<unknown> {
  const presignedFetch = options.presignedFetch ?? true;
  const big = randomBytes(20 * MiB); // shared by the stream cases: 320 chunks of 64 KiB
  const bigSha = sha256Hex(big);

  const cases: Array<[string, Case]> = [
    ["list after write and after delete, with no wait: new folders and files show at once", async (t, store) => {
      const list = async (prefix: string) => (await store.list(prefix, { limit: 100 })).items.map((i) => i.key);
      t.strictSame(await list("ws/"), [], "empty before");
      for (let i = 0; i < 5; i++) {
        await store.put(`ws/reads/r${i}.fastq`, `read ${i}`);
        t.strictSame(await list("ws/"), Array.from({ length: i + 1 }, (_, j) => `ws/reads/r${j}.fastq`), `listed right after write ${i + 1} (a new folder the first time)`);
      }
      await store.put("ws/a/b/c/deep.txt", "deep");
      t.ok((await list("ws/")).includes("ws/a/b/c/deep.txt"), "three new folders at once");
      t.ok((await list("ws/a/")).includes("ws/a/b/c/deep.txt"));
      await store.delete("ws/reads/r2.fastq");
      t.notOk((await list("ws/")).includes("ws/reads/r2.fastq"), "gone from the listing right after delete");
      t.notOk((await list("ws/reads/")).includes("ws/reads/r2.fastq"));
    }],

    ["a key that is not normalized is refused before the store is asked", async (t, store) => {
      for (const key of ["a/../b", "../x", "/abs", "a//b", "a/./b", "a\\b", "a\u0000b", `a/${"x".repeat(300)}`]) {
        await expectStoreError(t, store.put(key, "x"), "InvalidKey", `put ${JSON.stringify(key).slice(0, 30)}`);
        await expectStoreError(t, store.get(key), "InvalidKey", `get ${JSON.stringify(key).slice(0, 30)}`);
        await expectStoreError(t, store.delete(key), "InvalidKey", `delete ${JSON.stringify(key).slice(0, 30)}`);
        await expectStoreError(t, store.presignGet(key, { expiresIn: 60 }), "InvalidKey", `presignGet ${JSON.stringify(key).slice(0, 30)}`);
      }
      await expectStoreError(t, store.list("a/../", { limit: 1 }), "InvalidKey", "list with a climbing prefix");
    }],

    ["put/get round trip of a string", async (t, store) => {
      const text = "hello, wörld\n";
      const bytes = Buffer.from(text, "utf8");
      const put = await store.put("docs/hello.txt", text, { contentType: "text/plain" });
      t.equal(put.key, "docs/hello.txt");
      t.equal(put.size, bytes.byteLength, "put: size in bytes, not characters");
      t.equal(put.sha256, sha256Hex(bytes), "put: sha256");
      const head = await store.head("docs/hello.txt");
      t.ok(head, "head finds it");
      t.equal(head?.size, bytes.byteLength, "head: size");
      t.equal(head?.sha256, sha256Hex(bytes), "head: sha256");
      t.ok(head?.lastModified instanceof Date, "head: lastModified is a Date");
      if (put.etag !== undefined) t.equal(head?.etag, put.etag, "put's etag is the stored object's etag");
      const got = await store.get("docs/hello.txt");
      t.equal((await readAll(got.body)).toString("utf8"), text, "get: the same bytes");
      t.equal(got.info.size, bytes.byteLength, "get: size");
      t.equal(got.info.sha256, sha256Hex(bytes), "get: sha256");
      t.equal(got.range, undefined, "get without a range reports no range");
    }],

    ["put/get round trip of a Uint8Array", async (t, store) => {
      const bytes = new Uint8Array(randomBytes(70_001));
      bytes[0] = 0;
      bytes[bytes.length - 1] = 255;
      const put = await store.put("bin/blob", bytes);
      t.equal(put.size, bytes.byteLength, "put: size");
      t.equal(put.sha256, sha256Hex(bytes), "put: sha256");
      const head = await store.head("bin/blob");
      t.equal(head?.size, bytes.byteLength, "head: size");
      t.equal(head?.sha256, sha256Hex(bytes), "head: sha256");
      const got = await store.get("bin/blob");
      t.ok(Buffer.from(bytes).equals(await readAll(got.body)), "get: the same bytes");
      t.equal(got.info.sha256, sha256Hex(bytes), "get: sha256");
    }],

    ["put/get round trip of a 20 MiB stream in 64 KiB chunks", async (t, store) => {
      const put = await store.put("reads/big.fastq", chunked(big), { contentType: "text/plain" });
      t.equal(put.size, big.byteLength, "put: size");
      t.equal(put.sha256, bigSha, "put: sha256 computed while streaming");
      const head = await store.head("reads/big.fastq");
      t.equal(head?.size, big.byteLength, "head: size");
      t.equal(head?.sha256, bigSha, "head: sha256");
      t.equal(head?.contentType, "text/plain", "head: contentType");
      if (put.etag !== undefined) t.equal(head?.etag, put.etag, "put's etag is the stored object's etag");
      const got = await store.get("reads/big.fastq");
      const hash = createHash("sha256");
      let size = 0;
      for await (const chunk of got.body) { hash.update(chunk); size += chunk.byteLength; }
      t.equal(size, big.byteLength, "get: every byte");
      t.equal(hash.digest("hex"), bigSha, "get: the same bytes (sha256)");
      t.equal(got.info.sha256, bigSha, "get: sha256");
    }],

    ["empty objects", async (t, store) => {
      const empty = sha256Hex("");
      const a = await store.put("empty/string", "");
      t.equal(a.size, 0, "empty string: size 0");
      t.equal(a.sha256, empty, "empty string: sha256");
      const b = await store.put("empty/stream", chunked(new Uint8Array(0)));
      t.equal(b.size, 0, "empty stream: size 0");
      t.equal(b.sha256, empty, "empty stream: sha256");
      t.equal((await store.head("empty/stream"))?.size, 0, "head: size 0");
      t.equal((await readAll((await store.get("empty/stream")).body)).byteLength, 0, "get: no bytes");
    }],

    ["contentType and user metadata round trip", async (t, store) => {
      const metadata = { description: "Lane 1 reads — échantillon №1", lane: "L001" };
      for (const [key, body] of [["meta/small.txt", "small"], ["meta/streamed.txt", chunked(Buffer.from("streamed"), 3)]] as const) {
        const put = await store.put(key, body, { contentType: "text/x-fastq", metadata });
        t.same(put.metadata ?? {}, metadata, `${key}: put returns the metadata`);
        t.equal(put.contentType, "text/x-fastq", `${key}: put returns the contentType`);
        const head = await store.head(key);
        t.equal(head?.contentType, "text/x-fastq", `${key}: head contentType`);
        t.same(head?.metadata ?? {}, metadata, `${key}: head metadata (non-ASCII intact, no sha256 key)`);
        const got = await store.get(key);
        await readAll(got.body);
        t.equal(got.info.contentType, "text/x-fastq", `${key}: get contentType`);
        t.same(got.info.metadata ?? {}, metadata, `${key}: get metadata`);
      }
      const page = await store.list("meta/", { limit: 10, withMetadata: true });
      t.same(page.items.map((i) => [i.key, i.contentType, i.metadata ?? {}]), [
        ["meta/small.txt", "text/x-fastq", metadata],
        ["meta/streamed.txt", "text/x-fastq", metadata],
      ], "list withMetadata: contentType and metadata");
    }],

    ["byte ranges", async (t, store) => {
      const data = Buffer.from(Array.from({ length: 100 }, (_, i) => i));
      await store.put("r/hundred", data);
      const mid = await store.get("r/hundred", { start: 10, end: 19 });
      t.same([...(await readAll(mid.body))], [...data.subarray(10, 20)], "start 10, end 19: exactly those 10 bytes");
      t.same(mid.range, { start: 10, end: 19, total: 100 }, "range reported, with the total");
      t.equal(mid.info.size, 100, "info.size is the full object size");
      const open = await store.get("r/hundred", { start: 90 });
      t.same([...(await readAll(open.body))], [...data.subarray(90)], "open-ended range: to the end");
      t.same(open.range, { start: 90, end: 99, total: 100 }, "open-ended range reported");
      const clamped = await store.get("r/hundred", { start: 95, end: 500 });
      t.same([...(await readAll(clamped.body))], [...data.subarray(95)], "an end past the object is clamped");
      t.same(clamped.range, { start: 95, end: 99, total: 100 }, "clamped range reported");
      const first = await store.get("r/hundred", { start: 0, end: 0 });
      t.same([...(await readAll(first.body))], [0], "a one-byte range");
      t.same(first.range, { start: 0, end: 0, total: 100 });
    }],

    ["unsatisfiable ranges", async (t, store) => {
      await store.put("r/ten", "0123456789");
      await expectStoreError(t, store.get("r/ten", { start: 10 }), "RangeNotSatisfiable", "start at the size");
      await expectStoreError(t, store.get("r/ten", { start: 50, end: 60 }), "RangeNotSatisfiable", "start past the end");
      await expectStoreError(t, store.get("r/ten", { start: 5, end: 2 }), "RangeNotSatisfiable", "end before start");
    }],

    ["missing keys", async (t, store) => {
      await expectStoreError(t, store.get("nope/missing"), "NotFound", "get of a missing key");
      await expectStoreError(t, store.get("nope/missing", { start: 0, end: 1 }), "NotFound", "ranged get of a missing key");
      t.equal(await store.head("nope/missing"), undefined, "head of a missing key is undefined");
    }],

    ["delete", async (t, store) => {
      await store.put("d/x", "x");
      await store.delete("d/x");
      await expectStoreError(t, store.get("d/x"), "NotFound", "get after delete");
      t.equal(await store.head("d/x"), undefined, "head after delete");
      t.same(await listAll(store, "d/"), [], "gone from listings");
      await store.delete("d/x");
      await store.delete("never/existed");
      t.pass("deleting an absent key is fine");
    }],

    ["list: lexicographic order and prefix filtering", async (t, store) => {
      for (const key of ["a/c", "a/b/3", "a/b2", "a/b/1", "b/1", "a/b/2"]) await store.put(key, key);
      const page = await store.list("a/b/", { limit: 100 });
      t.same(page.items.map((i) => i.key), ["a/b/1", "a/b/2", "a/b/3"], "only a/b/ keys, in order (not the sibling a/b2)");
      t.equal(page.nextCursor, undefined, "a single page has no cursor");
      t.same(page.items.map((i) => i.size), [5, 5, 5], "sizes");
      t.ok(page.items.every((i) => i.lastModified instanceof Date), "lastModified");
      t.same(await listAll(store, "a/"), ["a/b/1", "a/b/2", "a/b/3", "a/b2", "a/c"], "a/ in byte order");
      t.same(await listAll(store, ""), ["a/b/1", "a/b/2", "a/b/3", "a/b2", "a/c", "b/1"], "everything");
      t.same(await listAll(store, "zzz/"), [], "an unmatched prefix lists nothing");
    }],

    ["list: pagination with limit 2 over 5 keys", async (t, store) => {
      const keys = ["p/1", "p/2", "p/3", "p/4", "p/5"];
      for (const key of [...keys].reverse()) await store.put(key, key);
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await store.list("p/", cursor === undefined ? { limit: 2 } : { limit: 2, cursor });
        t.ok(page.items.length <= 2, `page ${pages + 1}: at most 2 items`);
        t.ok(page.items.length > 0, `page ${pages + 1}: not empty`);
        seen.push(...page.items.map((i) => i.key));
        cursor = page.nextCursor;
        pages++;
      } while (cursor !== undefined && pages < 10);
      t.same(seen, keys, "every key exactly once, in order");
      t.equal(pages, 3, "3 pages");
    }],

    ["list: three pages of 10 over 25 keys; the cursor is the last key of a page", async (t, store) => {
      const keys = Array.from({ length: 25 }, (_, i) => `q/${String(i).padStart(2, "0")}`);
      // Written out of order, with neighbours outside the prefix on both sides.
      for (const key of [...keys.filter((_, i) => i % 2), ...keys.filter((_, i) => i % 2 === 0), "p/x", "r/x"]) await store.put(key, key);
      const seen: string[] = [];
      const sizes: number[] = [];
      let cursor: string | undefined;
      do {
        const page = await store.list("q/", cursor === undefined ? { limit: 10 } : { limit: 10, cursor });
        seen.push(...page.items.map((i) => i.key));
        sizes.push(page.items.length);
        if (page.nextCursor !== undefined) t.equal(page.nextCursor, page.items[page.items.length - 1]?.key, `page ${sizes.length}: nextCursor is its last key`);
        cursor = page.nextCursor;
      } while (cursor !== undefined && sizes.length < 10);
      t.same(seen, keys, "every key exactly once, in order");
      t.same(sizes, [10, 10, 5], "three pages");
      // Any key is a cursor: the listing resumes right after it, whoever produced it.
      t.same((await store.list("q/", { limit: 3, cursor: "q/16" })).items.map((i) => i.key), ["q/17", "q/18", "q/19"], "resumes after a given key");
      t.same((await store.list("q/", { limit: 3, cursor: "q/165" })).items.map((i) => i.key), ["q/17", "q/18", "q/19"], "or after a key that does not exist");
      t.same((await store.list("q/", { limit: 3, cursor: "q/24" })).items, [], "nothing after the last key");
    }],

    ["list: withMetadata fills sha256", async (t, store) => {
      await store.put("m/1", "one", { contentType: "text/plain" });
      await store.put("m/2", chunked(Buffer.from("two")));
      const page = await store.list("m/", { limit: 10, withMetadata: true });
      t.same(page.items.map((i) => i.sha256), [sha256Hex("one"), sha256Hex("two")], "sha256 of each item");
      t.equal(page.items[0]?.contentType, "text/plain", "contentType");
      t.same(page.items.map((i) => i.size), [3, 3], "sizes");
    }],

    ["list: _system/ keys are hidden unless the prefix asks for them", async (t, store) => {
      await store.put("_system/keys/k1.json", "{}");
      await store.put("orgs/acme/x", "x");
      t.same(await listAll(store, ""), ["orgs/acme/x"], "list('') hides _system/");
      t.same(await listAll(store, "_system/"), ["_system/keys/k1.json"], "list('_system/') shows them");
      t.same((await store.list("", { limit: 1 })).items.map((i) => i.key), ["orgs/acme/x"],
        "a small page is not used up by hidden keys");
    }],

    ["ifNoneMatch '*': create only", async (t, store) => {
      const created = await store.put("c/once", "old", { ifNoneMatch: "*" });
      t.equal(created.size, 3, "creates an absent key");
      await expectStoreError(t, store.put("c/once", "new", { ifNoneMatch: "*" }), "PreconditionFailed", "string over an existing key");
      await expectStoreError(t, store.put("c/once", chunked(Buffer.from("newer")), { ifNoneMatch: "*" }), "PreconditionFailed",
        "stream over an existing key");
      t.equal((await readAll((await store.get("c/once")).body)).toString(), "old", "the old content is kept");
      const streamed = await store.put("c/stream", chunked(Buffer.from("streamed")), { ifNoneMatch: "*" });
      t.equal(streamed.sha256, sha256Hex("streamed"), "a stream creates an absent key");
      t.equal((await store.head("c/stream"))?.sha256, sha256Hex("streamed"), "with its sha256");
    }],

    ["ifMatch: optimistic concurrency", async (t, store) => {
      const v1 = await store.put("o/doc", "v1");
      await expectStoreError(t, store.put("o/doc", "v2", { ifMatch: "\"0123456789abcdef0123456789abcdef\"" }), "PreconditionFailed",
        "a wrong etag");
      await expectStoreError(t, store.put("o/doc", chunked(Buffer.from("v2")), { ifMatch: "\"0123456789abcdef0123456789abcdef\"" }),
        "PreconditionFailed", "a wrong etag (stream)");
      t.equal((await readAll((await store.get("o/doc")).body)).toString(), "v1", "unchanged");
      const etag1 = v1.etag ?? (await store.head("o/doc"))?.etag;
      t.ok(etag1, "the store reports an etag");
      const v2 = await store.put("o/doc", "v2", { ifMatch: etag1 });
      t.equal((await readAll((await store.get("o/doc")).body)).toString(), "v2", "the matching etag replaces");
      await expectStoreError(t, store.put("o/doc", "v3", { ifMatch: etag1 }), "PreconditionFailed", "a stale etag");
      const etag2 = v2.etag ?? (await store.head("o/doc"))?.etag;
      await store.put("o/doc", chunked(Buffer.from("v3")), { ifMatch: etag2 });
      t.equal((await readAll((await store.get("o/doc")).body)).toString(), "v3", "the matching etag replaces (stream)");
      await expectStoreError(t, store.put("o/absent", "x", { ifMatch: etag1 }), "PreconditionFailed", "ifMatch on an absent key");
      t.equal(await store.head("o/absent"), undefined, "nothing created");
    }],

    ["conditions hold when the object appears, not only when the upload starts", async (t, store) => {
      // The competing write lands while the conditional stream is still being read.
      async function* racing(competitor: () => Promise<unknown>): AsyncGenerator<Uint8Array> {
        yield Buffer.from("loser-part-1;");
        await competitor();
        yield Buffer.from("loser-part-2");
      }
      await expectStoreError(t, store.put("race/new", racing(() => store.put("race/new", "winner")), { ifNoneMatch: "*" }),
        "PreconditionFailed", "ifNoneMatch: created by someone else meanwhile");
      t.equal((await readAll((await store.get("race/new")).body)).toString(), "winner", "the competitor's object is kept");
      const v1 = await store.put("race/doc", "v1");
      const etag = v1.etag ?? (await store.head("race/doc"))?.etag;
      await expectStoreError(t, store.put("race/doc", racing(() => store.put("race/doc", "other")), { ifMatch: etag }),
        "PreconditionFailed", "ifMatch: replaced by someone else meanwhile");
      t.equal((await readAll((await store.get("race/doc")).body)).toString(), "other", "the competitor's object is kept");
    }],

    ["maxBytes: TooLarge, nothing stored", async (t, store) => {
      const systemBefore = await listAll(store, "_system/");
      await expectStoreError(t, store.put("big/s", "0123456789", { maxBytes: 9 }), "TooLarge", "a string over the limit");
      await expectStoreError(t, store.put("big/u", new Uint8Array(10), { maxBytes: 9 }), "TooLarge", "bytes over the limit");
      await expectStoreError(t, store.put("big/small", chunked(Buffer.alloc(100), 10), { maxBytes: 50 }), "TooLarge",
        "a small stream over the limit");
      await expectStoreError(t, store.put("big/large", chunked(big), { maxBytes: 10 * MiB }), "TooLarge",
        "a 20 MiB stream over a 10 MiB limit");
      for (const key of ["big/s", "big/u", "big/small", "big/large"]) t.equal(await store.head(key), undefined, `${key}: not stored`);
      t.same(await listAll(store, ""), [], "no object is visible");
      t.same(await listAll(store, "_system/"), systemBefore, "no temporary object is left behind");
      const exact = await store.put("big/exact", chunked(Buffer.alloc(100), 10), { maxBytes: 100 });
      t.equal(exact.size, 100, "exactly maxBytes is accepted");
      t.equal((await store.put("big/exact-s", "0123456789", { maxBytes: 10 })).size, 10, "exactly maxBytes (string)");
    }],

    ["a stream that fails midway stores nothing", async (t, store) => {
      const systemBefore = await listAll(store, "_system/");
      await t.rejects(store.put("fail/small", chunked(Buffer.alloc(1000), 100, 500)), /failed midway/, "small: put rejects with the stream's error");
      await t.rejects(store.put("fail/large", chunked(big, 64 * KiB, 17 * MiB)), /failed midway/,
        "large (after several parts): put rejects with the stream's error");
      t.equal(await store.head("fail/small"), undefined, "small: not stored");
      t.equal(await store.head("fail/large"), undefined, "large: not stored");
      t.same(await listAll(store, ""), [], "nothing visible");
      t.same(await listAll(store, "_system/"), systemBefore, "no temporary object is left behind");
      await store.put("fail/kept", "kept");
      await t.rejects(store.put("fail/kept", chunked(Buffer.alloc(1000), 100, 500)), /failed midway/);
      t.equal((await readAll((await store.get("fail/kept")).body)).toString(), "kept", "a failed overwrite keeps the old object");
    }],

    ["overwrite replaces content and metadata", async (t, store) => {
      await store.put("w/doc", "the first, longer version", { contentType: "text/plain", metadata: { description: "first" } });
      const second = await store.put("w/doc", chunked(Buffer.from("second")), { contentType: "application/json" });
      t.equal(second.size, 6);
      const got = await store.get("w/doc");
      t.equal((await readAll(got.body)).toString(), "second", "new content");
      t.equal(got.info.size, 6, "new size");
      t.equal(got.info.sha256, sha256Hex("second"), "new sha256");
      t.equal(got.info.contentType, "application/json", "new contentType");
      t.same(got.info.metadata ?? {}, {}, "old metadata gone");
    }],

    ["describe records sha256, contentType and metadata", async (t, store) => {
      await store.put("desc/file", "content", { contentType: "text/plain", metadata: { description: "old" } });
      const sha = sha256Hex("content");
      const described = await store.describe("desc/file", { sha256: sha, contentType: "text/csv", metadata: { description: "new" } });
      t.equal(described.sha256, sha, "returned sha256");
      t.equal(described.size, 7, "returned size");
      const head = await store.head("desc/file");
      t.equal(head?.sha256, sha, "head: sha256");
      t.equal(head?.contentType, "text/csv", "head: contentType");
      t.same(head?.metadata ?? {}, { description: "new" }, "head: metadata");
      t.equal((await readAll((await store.get("desc/file")).body)).toString(), "content", "content untouched");
      await expectStoreError(t, store.describe("desc/missing", { sha256: sha }), "NotFound", "describe of a missing key");
    }],

    ["ping", async (t, store) => {
      await store.ping();
      t.pass("ping resolves");
    }],
  ];

  const presignCases: Array<[string, Case]> = [
    ["presignGet: the URL serves the bytes, and byte ranges", async (t, store) => {
      await store.put("pg/file.txt", "presigned content", { contentType: "text/plain" });
      const url = await store.presignGet("pg/file.txt", { expiresIn: 3600 });
      const res = await fetch(url);
      t.equal(res.status, 200, "200");
      t.equal(await res.text(), "presigned content", "the bytes");
      const ranged = await fetch(url, { headers: { Range: "bytes=0-3" } });
      t.equal(ranged.status, 206, "a Range header gives 206");
      t.equal(await ranged.text(), "pres", "4 bytes");
    }],

    ["presignPut: the URL accepts a PUT, describe then records the sha256", async (t, store) => {
      const url = await store.presignPut("pp/upload.csv", { expiresIn: 3600, contentType: "text/csv" });
      const res = await fetch(url, { method: "PUT", body: "a,b\n1,2\n", headers: { "Content-Type": "text/csv" } });
      t.ok(res.ok, `PUT accepted (${res.status})`);
      await res.arrayBuffer();
      const got = await store.get("pp/upload.csv");
      t.equal((await readAll(got.body)).toString(), "a,b\n1,2\n", "the object is readable");
      t.equal(got.info.contentType, "text/csv", "with the signed contentType");
      await store.describe("pp/upload.csv", { sha256: sha256Hex("a,b\n1,2\n") });
      const head = await store.head("pp/upload.csv");
      t.equal(head?.sha256, sha256Hex("a,b\n1,2\n"), "describe recorded the sha256");
      t.equal(head?.contentType, "text/csv", "describe kept the contentType");
      const wrongType = await fetch(url, { method: "PUT", body: "x", headers: { "Content-Type": "text/html" } });
      t.equal(wrongType.status, 403, "a different Content-Type than the signed one is refused");
      await wrongType.arrayBuffer();
    }],

    ["presigned URLs with a tampered signature or expiry are refused", async (t, store) => {
      await store.put("pt/file", "secret");
      const getUrl = await store.presignGet("pt/file", { expiresIn: 60 });
      const badSig = tamper(getUrl, /signature|sig/i, flipLast);
      t.ok(badSig, "the URL carries a signature parameter");
      const badExpiry = tamper(getUrl, /expires|exp/i, (v) => String(Number(v) * 1000 || 999999));
      t.ok(badExpiry, "the URL carries an expiry parameter");
      for (const [what, url] of [["signature", badSig], ["expiry", badExpiry]] as const) {
        if (!url) continue;
        const res = await fetch(url);
        t.equal(res.status, 403, `tampered ${what}: 403`);
        t.not(await res.text(), "secret", `tampered ${what}: no content`);
      }
      // The same URL with the key swapped (wherever the URL carries it: path or query).
      const keyForm = ["pt/file", "pt%2Ffile", "pt%2ffile"].find((form) => getUrl.includes(form));
      t.ok(keyForm, "the URL names the key");
      const otherKey = keyForm ? getUrl.replace(keyForm, keyForm.replace(/file$/, "other")) : getUrl;
      await store.put("pt/other", "other");
      const res = await fetch(otherKey);
      t.equal(res.status, 403, "a URL signed for one key does not open another");
      await res.arrayBuffer();
      const putUrl = await store.presignPut("pt/new", { expiresIn: 60 });
      const badPut = tamper(putUrl, /signature|sig/i, flipLast);
      const put = await fetch(badPut ?? putUrl, { method: "PUT", body: "x" });
      t.equal(put.status, 403, "tampered PUT signature: 403");
      await put.arrayBuffer();
      t.equal(await store.head("pt/new"), undefined, "nothing written");
    }],

    ["an expired presigned URL is refused", async (t, store) => {
      await store.put("pe/file", "soon gone");
      const url = await store.presignGet("pe/file", { expiresIn: 1 });
      await new Promise((r) => setTimeout(r, 2100));
      const res = await fetch(url);
      t.equal(res.status, 403, "403 after expiry");
      await res.arrayBuffer();
    }],
  ];

  // Multipart uploads: the parts go by real HTTP PUT to their presigned URLs (the local
  // store's are served by the api-server), so these need presigned fetches too.
  const mpData = randomBytes(11 * MiB + 123); // parts of 5 MiB, 5 MiB and 1 MiB + 123 bytes
  const mpParts = partsOf(mpData, 5 * MiB);
  const hour = 3600_000;
  const multipartCases: Array<[string, Case]> = [
    ["multipart: parts sent out of order and in parallel make the object at complete, and only then", async (t, store) => {
      const mp = multipartOf(t, store);
      const key = "mp/reads.fastq";
      const id = await mp.create(key, { size: mpData.length, partSize: 5 * MiB, contentType: "text/x-fastq", metadata: { description: "lane 1" } });
      t.ok((await mp.listOpen(new Date(Date.now() + hour), 100)).some((u) => u.uploadId === id && u.key === key), "listOpen (before: in an hour) sees the upload");
      t.notOk((await mp.listOpen(new Date(Date.now() - hour), 100)).some((u) => u.uploadId === id), "listOpen (before: an hour ago) does not");
      const urls = new Map<number, string>();
      for (const p of [...mpParts].reverse()) urls.set(p.partNumber, await mp.presignPart(key, id, p.partNumber, { expiresIn: 300, size: p.bytes.length }));
      // Out of order and at once, part 2 twice (a part may be sent again before complete).
      const sends = [...mpParts].reverse().concat(mpParts.slice(1, 2)).map((p) => sendPart(urls.get(p.partNumber) ?? "", p.bytes));
      const answers = await Promise.all(sends);
      answers.forEach((a, i) => t.equal(a.status, 200, `PUT ${i + 1} answered 200`, { text: a.text }));
      t.strictSame(answers.slice(0, 3).map((a) => a.etag), [...mpParts].reverse().map((p) => `"${md5Of(p.bytes).digest("hex")}"`), "each answer's ETag is its part's MD5, quoted");
      t.equal(await store.head(key), undefined, "before complete: nothing at the key");
      t.strictSame(await listAll(store, ""), [], "before complete: nothing listed");
      t.strictSame(await listAll(store, "_system/"), [], "nor under _system/: the parts are listed nowhere");
      const parts = await mp.listParts(key, id);
      t.strictSame(parts, mpParts.map((p) => ({ partNumber: p.partNumber, size: p.bytes.length, etag: md5Of(p.bytes).digest("hex") })), "listParts: every part once, in order, size and MD5 hex etag");
      const info = await mp.complete(key, id, [...parts].reverse().map((p) => ({ partNumber: p.partNumber, etag: p.etag })));
      t.equal(info.key, key);
      t.equal(info.size, mpData.length, "complete answers the object's size");
      t.equal(info.sha256, undefined, "and no sha256 yet");
      t.equal(info.contentType, "text/x-fastq", "the content type given to create");
      t.equal(info.metadata?.description, "lane 1", "and its metadata");
      t.equal(sha256Hex(await readAll((await store.get(key)).body)), sha256Hex(mpData), "get: exactly the bytes, in part order");
      t.strictSame(await listAll(store, ""), [key], "listed once complete");
      await expectStoreError(t, mp.listParts(key, id), "NotFound", "listParts after complete");
      t.notOk((await mp.listOpen(new Date(Date.now() + hour), 100)).some((u) => u.uploadId === id), "listOpen no longer sees it");
      const described = await store.describe(key, { sha256: sha256Hex(mpData) });
      t.equal(described.sha256, sha256Hex(mpData), "describe records the sha256 afterwards");
      t.equal((await store.head(key))?.contentType, "text/x-fastq", "keeping the content type");
    }],

    ["multipart: a part whose Content-MD5 does not match its bytes is refused and not recorded", async (t, store) => {
      const mp = multipartOf(t, store);
      const bytes = randomBytes(1000);
      const id = await mp.create("mp/one", { size: 1000, partSize: 1000 });
      const url = await mp.presignPart("mp/one", id, 1, { expiresIn: 300, size: 1000 });
      const wrong = await sendPart(url, bytes, md5Of(Buffer.from("other")).digest("base64"));
      t.equal(wrong.status, 400, "a wrong Content-MD5: 400");
      t.match(wrong.text, /BadDigest|Content-MD5/, "saying the digest does not match", { text: wrong.text });
      const malformed = await sendPart(url, bytes, "not-an-md5");
      t.equal(malformed.status, 400, "a malformed Content-MD5: 400");
      t.strictSame(await mp.listParts("mp/one", id), [], "no part recorded");
      t.equal((await sendPart(url, bytes)).status, 200, "the same URL with the right Content-MD5: 200");
      t.equal((await sendPart(url, bytes, null)).status, 200, "and without one (it is optional)");
      t.strictSame(await mp.listParts("mp/one", id), [{ partNumber: 1, size: 1000, etag: md5Of(bytes).digest("hex") }], "recorded once");
      await mp.abort("mp/one", id);
    }],

    ["multipart: a part of the wrong length is refused", async (t, store) => {
      const mp = multipartOf(t, store);
      const id = await mp.create("mp/len", { size: 1000, partSize: 1000 });
      const url = await mp.presignPart("mp/len", id, 1, { expiresIn: 300, size: 1000 });
      // S3 signs the Content-Length (403 for another); the api-server counts it (400).
      const refusal = mp.putPart ? 400 : 403;
      for (const n of [999, 1001, 0]) t.equal((await sendPart(url, randomBytes(n))).status, refusal, `${n} bytes for a 1000-byte part: refused`);
      t.strictSame(await mp.listParts("mp/len", id), [], "no part recorded");
      if (mp.putPart) {
        // The store itself, below the route's own count.
        for (const n of [999, 1001]) await expectStoreError(t, mp.putPart("mp/len", id, 1, chunked(randomBytes(n), 100), { size: 1000 }), "TooLarge", `putPart of ${n} bytes`);
        await expectStoreError(t, mp.putPart("mp/len", id, 1, chunked(randomBytes(10)), { size: 10 }), "TooLarge", "putPart declaring another size than the part's");
        await expectStoreError(t, mp.putPart("mp/len", id, 2, chunked(randomBytes(10)), { size: 10 }), "PreconditionFailed", "putPart of a part the upload does not have");
        t.strictSame(await mp.listParts("mp/len", id), [], "still no part recorded");
      }
      await mp.abort("mp/len", id);
    }],

    ["multipart: complete with a missing part or a wrong etag fails, stores nothing, and leaves the upload open", async (t, store) => {
      const mp = multipartOf(t, store);
      const data = randomBytes(10 * MiB + 10);
      const parts = partsOf(data, 5 * MiB);
      const key = "mp/gap";
      const id = await mp.create(key, { size: data.length, partSize: 5 * MiB });
      const etagOf = (n: number) => md5Of(parts[n - 1]?.bytes ?? Buffer.alloc(0)).digest("hex");
      const send = async (n: number) => t.equal((await sendPart(await mp.presignPart(key, id, n, { expiresIn: 300, size: parts[n - 1]?.bytes.length ?? 0 }), parts[n - 1]?.bytes ?? Buffer.alloc(0))).status, 200, `part ${n} sent`);
      await send(1);
      await send(3);
      const all = [1, 2, 3].map((n) => ({ partNumber: n, etag: etagOf(n) }));
      await expectStoreError(t, mp.complete(key, id, all), "PreconditionFailed", "part 2 never sent");
      await expectStoreError(t, mp.complete(key, id, all.filter((p) => p.partNumber !== 2)), "PreconditionFailed", "part 2 left out of the list");
      t.equal(await store.head(key), undefined, "nothing at the key");
      await send(2);
      await expectStoreError(t, mp.complete(key, id, all.map((p) => (p.partNumber === 1 ? { partNumber: 1, etag: md5Of(Buffer.from("x")).digest("hex") } : p))), "PreconditionFailed", "a wrong etag for part 1");
      t.equal(await store.head(key), undefined, "still nothing at the key");
      t.strictSame(await listAll(store, ""), [], "nor listed");
      const info = await mp.complete(key, id, all.map((p) => ({ partNumber: p.partNumber, etag: `"${p.etag}"` })));
      t.equal(info.size, data.length, "the upload was still open: complete (etags quoted this time) succeeds");
      t.equal(sha256Hex(await readAll((await store.get(key)).body)), sha256Hex(data), "with exactly the bytes");
    }],

    ["multipart: abort discards the upload", async (t, store) => {
      const mp = multipartOf(t, store);
      const id = await mp.create("mp/gone", { size: 100, partSize: 100 });
      const bytes = randomBytes(100);
      t.equal((await sendPart(await mp.presignPart("mp/gone", id, 1, { expiresIn: 300, size: 100 }), bytes)).status, 200, "a part sent");
      await mp.abort("mp/gone", id);
      await expectStoreError(t, mp.listParts("mp/gone", id), "NotFound", "listParts after abort");
      await expectStoreError(t, mp.complete("mp/gone", id, [{ partNumber: 1, etag: md5Of(bytes).digest("hex") }]), "NotFound", "complete after abort");
      t.equal(await store.head("mp/gone"), undefined, "nothing at the key");
      t.notOk((await mp.listOpen(new Date(Date.now() + hour), 100)).some((u) => u.uploadId === id), "listOpen no longer sees it");
      await mp.abort("mp/gone", id);
      t.pass("aborting again is not an error");
      const late = await sendPart(await mp.presignPart("mp/gone", id, 1, { expiresIn: 300, size: 100 }), bytes);
      t.equal(late.status, 404, "a part sent after abort: 404");
    }],

    ["multipart, stores taking parts themselves (putPart): complete waits for a part in flight and refuses new ones", async (t, store) => {
      const mp = multipartOf(t, store);
      const putPart = mp.putPart?.bind(mp);
      if (!putPart) { t.pass("this store takes no parts itself (its part URLs are the store's own)"); return; }
      const bytes = randomBytes(100);
      const etag = md5Of(bytes).digest("hex");
      const id = await mp.create("mp/wait", { size: 100, partSize: 100 });
      let release = () => undefined as void;
      const gate = new Promise<void>((r) => { release = r; });
      async function* slow(): AsyncGenerator<Uint8Array> { yield bytes.subarray(0, 50); await gate; yield bytes.subarray(50); }
      const order: string[] = [];
      const inFlight = putPart("mp/wait", id, 1, slow(), { size: 100, md5: md5Of(bytes).digest("base64") }).then((p) => { order.push("part"); return p; });
      await new Promise((r) => setTimeout(r, 50));
      const completed = mp.complete("mp/wait", id, [{ partNumber: 1, etag }]).then((i) => { order.push("complete"); return i; });
      await new Promise((r) => setTimeout(r, 50));
      t.strictSame(order, [], "complete waits while the part is still arriving");
      // Awaited only after the release: were it queued behind the part in flight, it must not hang the case.
      const late = putPart("mp/wait", id, 1, chunked(randomBytes(100)), { size: 100 });
      late.catch(() => undefined);
      await new Promise((r) => setTimeout(r, 20));
      release();
      await expectStoreError(t, late, "NotFound", "a part begun once complete has started");
      t.strictSame(await inFlight, { partNumber: 1, size: 100, etag }, "the part in flight is stored");
      t.equal((await completed).size, 100, "complete then makes the object of it");
      t.strictSame(order, ["part", "complete"], "in that order");
      t.equal(sha256Hex(await readAll((await store.get("mp/wait")).body)), sha256Hex(bytes), "with its bytes");
      // The same part number sent twice at once: one write after the other, one record.
      const id2 = await mp.create("mp/twice", { size: 100, partSize: 100 });
      const other = randomBytes(100);
      const [a, b] = await Promise.all([putPart("mp/twice", id2, 1, chunked(bytes, 7), { size: 100 }), putPart("mp/twice", id2, 1, chunked(other, 7), { size: 100 })]);
      t.strictSame([a.etag, b.etag], [etag, md5Of(other).digest("hex")], "both stored, in turn");
      t.strictSame(await mp.listParts("mp/twice", id2), [b], "the last one is the part");
      await mp.complete("mp/twice", id2, [b]);
      t.equal(sha256Hex(await readAll((await store.get("mp/twice")).body)), sha256Hex(other), "its bytes, not a mix of both");
    }],

    ["multipart: a key that is not normalized is refused before the store is asked", async (t, store) => {
      const mp = multipartOf(t, store);
      for (const key of ["a/../b", "/abs", "a//b"]) {
        await expectStoreError(t, mp.create(key, { size: 10, partSize: 10 }), "InvalidKey", `create ${key}`);
        await expectStoreError(t, mp.presignPart(key, "u", 1, { expiresIn: 60, size: 10 }), "InvalidKey", `presignPart ${key}`);
        await expectStoreError(t, mp.listParts(key, "u"), "InvalidKey", `listParts ${key}`);
        await expectStoreError(t, mp.complete(key, "u", [{ partNumber: 1, etag: "x" }]), "InvalidKey", `complete ${key}`);
        await expectStoreError(t, mp.abort(key, "u"), "InvalidKey", `abort ${key}`);
      }
      t.strictSame(await mp.listOpen(new Date(Date.now() + hour), 100), [], "no upload was begun");
    }],

    ["multipart: a part URL tampered with, or expired, is refused (403)", async (t, store) => {
      const mp = multipartOf(t, store);
      const id = await mp.create("mp/signed", { size: 100, partSize: 100 });
      const bytes = randomBytes(100);
      const url = await mp.presignPart("mp/signed", id, 1, { expiresIn: 300, size: 100 });
      const tampered = [
        ["signature", tamper(url, /signature/i, flipLast)],
        ["part number", tamper(url, /^part_?number$/i, () => "2")],
        ["expiry", tamper(url, /^(x-amz-)?expires$/i, (v) => String(Number(v) + 1000))],
      ] as const;
      for (const [what, changed] of tampered) {
        t.ok(changed, `the URL carries its ${what}`);
        const res = await sendPart(changed ?? url, bytes);
        t.equal(res.status, 403, `tampered ${what}: 403`);
      }
      const soon = await mp.presignPart("mp/signed", id, 1, { expiresIn: 1, size: 100 });
      await new Promise((r) => setTimeout(r, 2100));
      t.equal((await sendPart(soon, bytes)).status, 403, "expired: 403");
      t.strictSame(await mp.listParts("mp/signed", id), [], "no part recorded");
      await mp.abort("mp/signed", id);
    }],
  ];

  return t.test(name, async (t) => {
    for (const [caseName, run] of [...cases, ...presignCases, ...multipartCases]) {
      const isPresign = presignCases.some(([n]) => n === caseName) || multipartCases.some(([n]) => n === caseName);
      if (isPresign && !presignedFetch) {
        await t.test(caseName, { skip: "presigned URLs are served elsewhere for this adapter (presignedFetch: false)" }, () => undefined);
        continue;
      }
      await t.test(caseName, async (t) => {
        const { store, cleanup } = await make();
        try {
          await run(t, store);
        } finally {
          await cleanup();
        }
      });
    }
  });
}
