/**
 * The filesystem ObjectStore of embedded mode. Objects live under `<root>/objects/<key>`,
 * their SHA-256, content type and metadata in a sidecar under `<root>/meta/<key>.json`.
 * Writes stream to `<root>/tmp/` while hashing and appear by rename (or link, for
 * if-none-match), so an object is never visible half written and an aborted upload leaves
 * nothing. Presigned URLs point at the api-server (see presign.ts).
 *
 * Multipart uploads live in `<root>/uploads/<upload id>/` (outside objects/, so never
 * listed): `upload.json`, one sparse data file of the object's final size into which each
 * part is written at its offset, and `parts/<n>.json` per part received; `complete` renames
 * the data file into objects/ (no copy of the bytes).
 */
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { once } from "node:events";
import { createReadStream, createWriteStream } from "node:fs";
import { link, mkdir, open, readFile, readdir, rename, rm, stat, unlink, utimes, writeFile } from "node:fs/promises";
import { dirname, join, resolve, sep } from "node:path";
import { Transform, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream/promises";
import type {
  ByteRange, ByteStream, Clock, GetResult, ListOptions, ListPage, MultipartUploads, ObjectInfo, ObjectStore, OpenUpload, PresignOptions, PutOptions, UploadedPart,
} from "../../core/ports.js";
import { SYSTEM_PREFIX, isSystemKey } from "../../core/layout.js";
import { StoreError } from "../../core/ports.js";
import { checkedKey } from "../key-guard.js";
import { presignPartUrl, presignUrl } from "./presign.js";
import { MAX_PARTS, checkUploadShape, partBytes, partCountOf, plainEtag } from "../../core/multipart.js";

export interface LocalStoreConfig {
  root: string;
  /** Base URL of the api-server that serves presigned URLs. */
  publicUrl: string;
  signingSecret: string;
  clock?: Clock;
}

/** An object's sidecar; no sha256 yet for an object made by a multipart upload, until `describe`. */
interface Sidecar { sha256?: string; contentType?: string; metadata?: Record<string, string> }

const systemClock: Clock = { now: () => Date.now() };

/** Hashes and counts bytes as they pass; fails with TooLarge past `max`. */
class Meter extends Transform {
  readonly hash = createHash("sha256");
  bytes = 0;
  constructor(private readonly max: number) { super(); }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes > this.max) { cb(new StoreError("TooLarge", `more than ${this.max} bytes`)); return; }
    this.hash.update(chunk);
    cb(null, chunk);
  }
}

export function createLocalObjectStore(config: LocalStoreConfig): ObjectStore {
  const clock = config.clock ?? systemClock;
  const objects = resolve(config.root, "objects");
  const meta = resolve(config.root, "meta");
  const tmp = resolve(config.root, "tmp");
  /**
   * The layer below the normalizer: a key that is not already normalized, or that would
   * resolve outside this store's root, is refused whatever produced it.
   */
  const checked = checkedKey;
  const inside = (base: string, path: string): string => {
    if (path !== base && !path.startsWith(base + sep)) throw new StoreError("InvalidKey", "invalid storage key: outside the store");
    return path;
  };
  const pathOf = (key: string) => inside(objects, resolve(objects, checked(key)));
  const metaOf = (key: string) => inside(meta, resolve(meta, `${checked(key)}.json`));
  const locks = new Map<string, Promise<unknown>>();

  /**
   * Listing cache, per directory: its sorted entries and each file's info (with the sidecar's
   * checksum and metadata). This store owns its directory, so every write here invalidates
   * the directory it touches; the directory's mtime is compared too, which catches files
   * added or removed behind the store's back (not in-place edits of a file's bytes).
   */
  interface DirEntry { name: string; sortKey: string; isDir: boolean; info?: ObjectInfo }
  const dirCache = new Map<string, { mtimeMs: number; checkedAt: number; entries: DirEntry[] }>();
  /** Directories are re-checked against the disk at most this often (in-process writes invalidate at once). */
  const RECHECK_MS = 1000;
  let generation = 0;
  /**
   * A write can create directories on its way down, which changes every ancestor's entries:
   * each ancestor's cached listing is dropped, so the next listing sees the write at once.
   */
  const invalidate = (key: string) => {
    generation++;
    dirCache.delete("");
    for (let cut = key.indexOf("/"); cut >= 0; cut = key.indexOf("/", cut + 1)) dirCache.delete(key.slice(0, cut + 1));
  };

  /** Serializes conditional writes to one key (embedded mode is a single process). */
  async function withLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = locks.get(key) ?? Promise.resolve();
    const next = prev.catch(() => undefined).then(fn);
    locks.set(key, next);
    try { return await next; } finally { if (locks.get(key) === next) locks.delete(key); }
  }

  async function readSidecar(key: string): Promise<Sidecar | undefined> {
    try { return JSON.parse(await readFile(metaOf(key), "utf8")) as Sidecar; } catch { return undefined; }
  }

  async function writeSidecar(key: string, s: Sidecar): Promise<void> {
    const t = join(tmp, `${randomUUID()}.json`);
    await mkdir(tmp, { recursive: true });
    await writeFile(t, JSON.stringify(s));
    try {
      await mkdir(dirname(metaOf(key)), { recursive: true });
      await rename(t, metaOf(key));
    } catch (e) {
      await rm(t, { force: true });
      throw e;
    }
  }

  async function info(key: string, withMeta = true): Promise<ObjectInfo | undefined> {
    const path = pathOf(key);
    let st;
    try { st = await stat(path); } catch { return undefined; }
    if (!st.isFile()) return undefined;
    const s = withMeta ? await readSidecar(key) : undefined;
    return {
      key, size: st.size, lastModified: st.mtime,
      ...(s?.sha256 ? { sha256: s.sha256, etag: s.sha256 } : {}),
      ...(s?.contentType ? { contentType: s.contentType } : {}),
      ...(s?.metadata ? { metadata: s.metadata } : {}),
    };
  }

  async function put(key: string, body: ByteStream | Uint8Array | string, options: PutOptions = {}): Promise<ObjectInfo> {
    pathOf(key); metaOf(key); // refused before a byte is written
    await mkdir(tmp, { recursive: true });
    const t = join(tmp, randomUUID());
    const meter = new Meter(options.maxBytes ?? Number.MAX_SAFE_INTEGER);
    const file = createWriteStream(t);
    try {
      const source = typeof body === "string" || body instanceof Uint8Array ? [typeof body === "string" ? Buffer.from(body) : body] : body;
      await pipeline(source as AsyncIterable<Uint8Array>, meter, file);
    } catch (e) {
      // The file may still be opening: wait until it is closed, then remove it.
      if (!file.closed) await once(file, "close").catch(() => undefined);
      await rm(t, { force: true });
      throw e;
    }
    const sha256 = meter.hash.digest("hex");
    const sidecar: Sidecar = { sha256, ...(options.contentType ? { contentType: options.contentType } : {}), ...(options.metadata ? { metadata: options.metadata } : {}) };
    const commit = async () => {
      const dest = pathOf(key);
      await mkdir(dirname(dest), { recursive: true });
      if (options.ifNoneMatch === "*" && (await info(key, false))) throw new StoreError("PreconditionFailed", `${key} already exists`);
      if (options.ifMatch !== undefined) {
        const cur = await info(key);
        if (!cur || cur.etag !== options.ifMatch) throw new StoreError("PreconditionFailed", `${key} does not match ${options.ifMatch}`);
      }
      await writeSidecar(key, sidecar);
      if (options.ifNoneMatch === "*") {
        // link() fails if the key appeared meanwhile (another process): create-if-absent.
        try { await link(t, dest); } finally { await unlink(t).catch(() => undefined); }
      } else {
        await rename(t, dest);
      }
    };
    try {
      if (options.ifMatch !== undefined || options.ifNoneMatch !== undefined) await withLock(key, commit);
      else await commit();
      invalidate(key);
    } catch (e) {
      await rm(t, { force: true });
      if ((e as NodeJS.ErrnoException).code === "EEXIST") throw new StoreError("PreconditionFailed", `${key} already exists`);
      throw e;
    }
    const st = await stat(pathOf(key));
    return { key, size: st.size, lastModified: st.mtime, sha256, etag: sha256, ...(options.contentType ? { contentType: options.contentType } : {}), ...(options.metadata ? { metadata: options.metadata } : {}) };
  }

  async function get(key: string, range?: ByteRange): Promise<GetResult> {
    const i = await info(key);
    if (!i) throw new StoreError("NotFound", `${key} not found`);
    if (!range) return { body: createReadStream(pathOf(key)), info: i };
    const end = Math.min(range.end ?? i.size - 1, i.size - 1);
    if (range.start < 0 || range.start >= i.size || end < range.start) throw new StoreError("RangeNotSatisfiable", `range ${range.start}-${range.end ?? ""} of ${i.size} bytes`);
    return { body: createReadStream(pathOf(key), { start: range.start, end }), info: i, range: { start: range.start, end, total: i.size } };
  }

  /**
   * Lexicographic walk: each directory's entries sorted with directories compared as
   * `name/`, which yields keys in byte order; keys up to the cursor are skipped.
   */
  async function list(prefix: string, options: ListOptions): Promise<ListPage> {
    if (prefix !== "") checked(prefix);
    const items: ObjectInfo[] = [];
    const cut = prefix.lastIndexOf("/");
    const baseDir = cut >= 0 ? prefix.slice(0, cut + 1) : "";
    const cursor = options.cursor;
    let more = false;
    const entriesOf = async (dirKey: string): Promise<DirEntry[] | undefined> => {
      const hit = dirCache.get(dirKey);
      const now = clock.now();
      if (hit && now - hit.checkedAt < RECHECK_MS) return hit.entries;
      let st;
      try { st = await stat(join(objects, dirKey)); } catch { return undefined; }
      if (hit && hit.mtimeMs === st.mtimeMs) { hit.checkedAt = now; return hit.entries; }
      let raw;
      try { raw = await readdir(join(objects, dirKey), { withFileTypes: true }); } catch { return undefined; }
      const entries = raw.map((e) => ({ name: e.name, isDir: e.isDirectory(), sortKey: e.name + (e.isDirectory() ? "/" : "") }))
        .sort((a, b) => (a.sortKey < b.sortKey ? -1 : a.sortKey > b.sortKey ? 1 : 0));
      dirCache.set(dirKey, { mtimeMs: st.mtimeMs, checkedAt: now, entries });
      if (dirCache.size > 10_000) dirCache.delete(dirCache.keys().next().value as string);
      return entries;
    };
    const walk = async (dirKey: string): Promise<boolean> => {
      const named = await entriesOf(dirKey);
      if (!named) return true;
      for (const e of named) {
        const key = dirKey + e.sortKey;
        if (e.isDir) {
          // Service data stays out of listings unless asked for by prefix.
          if (key === SYSTEM_PREFIX && !isSystemKey(prefix)) continue;
          // Skip subtrees entirely outside the prefix or entirely before the cursor.
          if (!(key.startsWith(prefix) || prefix.startsWith(key))) continue;
          if (cursor !== undefined && key < cursor && !cursor.startsWith(key)) continue;
          if (!(await walk(key))) return false;
          continue;
        }
        if (!key.startsWith(prefix) || (cursor !== undefined && key <= cursor)) continue;
        if (items.length === options.limit) { more = true; return false; }
        e.info ??= await info(key, true);
        if (e.info) items.push(options.withMetadata ? e.info : { key, size: e.info.size, lastModified: e.info.lastModified });
      }
      return true;
    };
    await walk(baseDir);
    const last = items[items.length - 1];
    return { items, ...(more && last ? { nextCursor: last.key } : {}) };
  }

  async function del(key: string): Promise<void> {
    checked(key);
    await rm(pathOf(key), { force: true });
    await rm(metaOf(key), { force: true });
    invalidate(key);
  }

  async function describe(key: string, d: { sha256: string; contentType?: string; metadata?: Record<string, string> }): Promise<ObjectInfo> {
    const cur = await info(key);
    if (!cur) throw new StoreError("NotFound", `${key} not found`);
    // Fields not given are kept from what the object already had.
    const contentType = d.contentType ?? cur.contentType;
    const metadata = d.metadata ?? cur.metadata;
    await writeSidecar(key, { sha256: d.sha256, ...(contentType ? { contentType } : {}), ...(metadata ? { metadata } : {}) });
    invalidate(key);
    return (await info(key)) as ObjectInfo;
  }

  const expires = (o: PresignOptions) => Math.floor(clock.now() / 1000) + o.expiresIn;
  const multipart = localMultipart({
    root: resolve(config.root, "uploads"), tmp, clock, pathOf, writeSidecar, invalidate, info, withLock,
    presign: (p) => presignPartUrl(config.publicUrl, config.signingSecret, p),
  });

  return {
    put,
    get,
    head: (key) => info(key),
    list,
    delete: del,
    describe,
    presignGet: async (key, o) => presignUrl(config.publicUrl, config.signingSecret, { method: "GET", key: checked(key), expires: expires(o) }),
    presignPut: async (key, o) => presignUrl(config.publicUrl, config.signingSecret, { method: "PUT", key: checked(key), expires: expires(o), ...(o.contentType ? { contentType: o.contentType } : {}), ...(o.size !== undefined ? { size: o.size } : {}) }),
    ping: async () => { await mkdir(objects, { recursive: true }); await stat(objects); },
    localPath: (key) => pathOf(key),
    version: () => generation,
    multipart,
  };
}

// ---- multipart uploads --------------------------------------------------------------------

/** Upload ids this store hands out: checked before one becomes part of a path. */
const UPLOAD_ID = /^[0-9a-f]{32}$/;
const PART_FILE = /^([1-9]\d{0,4})\.json$/;

/** `<uploads>/<id>/upload.json`. */
interface UploadRecord {
  key: string;
  size: number;
  partSize: number;
  contentType?: string;
  metadata?: Record<string, string>;
  /** ISO time of `create`. */
  initiated: string;
}

/** `<uploads>/<id>/parts/<n>.json`, written once the part's bytes are all in the data file. */
interface PartRecord { size: number; etag: string }

interface MultipartDeps {
  /** `<root>/uploads`. */
  root: string;
  /** The store's temporary directory (same filesystem): aborted uploads are moved there before removal. */
  tmp: string;
  clock: Clock;
  pathOf(key: string): string;
  writeSidecar(key: string, s: Sidecar): Promise<void>;
  invalidate(key: string): void;
  info(key: string): Promise<ObjectInfo | undefined>;
  withLock<T>(key: string, fn: () => Promise<T>): Promise<T>;
  presign(p: { key: string; uploadId: string; partNumber: number; size: number; expires: number }): string;
}

/** Counts the part's bytes and computes their MD5; fails with TooLarge past `expected`, before a byte too many is written. */
class PartMeter extends Transform {
  readonly md5 = createHash("md5");
  bytes = 0;
  constructor(private readonly expected: number, private readonly what: string) { super(); }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes > this.expected) { cb(new StoreError("TooLarge", `${this.what} takes exactly ${this.expected} bytes; more arrived`)); return; }
    this.md5.update(chunk);
    cb(null, chunk);
  }
}

const isMissing = (e: unknown) => (e as NodeJS.ErrnoException | undefined)?.code === "ENOENT";

/** Runs `fn` over `items`, `limit` at a time. */
async function inBatches<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += limit) out.push(...(await Promise.all(items.slice(i, i + limit).map(fn))));
  return out;
}

/**
 * The local store's MultipartUploads. Writes of one part number are serialized; `complete`
 * and `abort` mark the upload closing (a new part is refused with NotFound), and `complete`
 * waits for the parts in flight before it checks them. Embedded mode is a single process,
 * so this state is in memory.
 */
function localMultipart(d: MultipartDeps): MultipartUploads {
  interface UploadState { closing: boolean; inflight: Set<Promise<unknown>> }
  const states = new Map<string, UploadState>();
  const stateOf = (id: string): UploadState => {
    let s = states.get(id);
    if (!s) { s = { closing: false, inflight: new Set() }; states.set(id, s); }
    return s;
  };
  const dirOf = (id: string) => {
    if (!UPLOAD_ID.test(id)) throw new StoreError("InvalidKey", "invalid upload id");
    return join(d.root, id);
  };
  const partPath = (id: string, n: number) => join(dirOf(id), "parts", `${n}.json`);
  const noSuchUpload = (key: string, id: string) => new StoreError("NotFound", `no such upload ${id} of ${key} (completed or aborted)`);

  /** The upload's record; NotFound when there is none for `key` (another key's upload id included). */
  async function readUpload(key: string, id: string): Promise<UploadRecord> {
    d.pathOf(key); // the key is checked first
    let rec: UploadRecord;
    try { rec = JSON.parse(await readFile(join(dirOf(id), "upload.json"), "utf8")) as UploadRecord; } catch (e) {
      if (e instanceof StoreError || !(isMissing(e) || e instanceof SyntaxError)) throw e;
      throw noSuchUpload(key, id);
    }
    if (rec.key !== key) throw noSuchUpload(key, id);
    return rec;
  }

  async function readPart(id: string, n: number): Promise<PartRecord | undefined> {
    try { return JSON.parse(await readFile(partPath(id, n), "utf8")) as PartRecord; } catch (e) {
      if (isMissing(e)) return undefined;
      throw e;
    }
  }

  /** Writes `value` as JSON to `path` by rename from a temporary file beside it. */
  async function writeJson(path: string, value: unknown): Promise<void> {
    const t = `${path}.${randomUUID()}.tmp`;
    try {
      await writeFile(t, JSON.stringify(value));
      await rename(t, path);
    } catch (e) {
      await rm(t, { force: true });
      throw e;
    }
  }

  /** The size part `n` of `rec` must have, or a StoreError when there is no such part. */
  function expectedSize(rec: UploadRecord, n: number): number {
    const count = partCountOf(rec.size, rec.partSize);
    if (!Number.isInteger(n) || n < 1 || n > count) throw new StoreError("PreconditionFailed", `part ${n}: this upload has parts 1..${count}`);
    return partBytes(rec.size, rec.partSize, n);
  }

  async function create(key: string, o: { size: number; partSize: number; contentType?: string; metadata?: Record<string, string> }): Promise<string> {
    d.pathOf(key);
    checkUploadShape(o.size, o.partSize);
    const id = randomBytes(16).toString("hex");
    const dir = dirOf(id);
    await mkdir(join(dir, "parts"), { recursive: true });
    try {
      // Sparse: no block is written before the parts arrive.
      const data = await open(join(dir, "data"), "wx");
      try { await data.truncate(o.size); } finally { await data.close(); }
      const rec: UploadRecord = {
        key, size: o.size, partSize: o.partSize, ...(o.contentType ? { contentType: o.contentType } : {}),
        ...(o.metadata ? { metadata: o.metadata } : {}), initiated: new Date(d.clock.now()).toISOString(),
      };
      await writeJson(join(dir, "upload.json"), rec); // last: the upload exists once whole
    } catch (e) {
      await rm(dir, { recursive: true, force: true });
      throw e;
    }
    return id;
  }

  /** Streams part `n` into the data file at its offset; its record is written only once the bytes are all there and match `md5`. */
  async function writePart(key: string, id: string, rec: UploadRecord, n: number, body: ByteStream, md5: string | undefined): Promise<UploadedPart> {
    const size = expectedSize(rec, n);
    const what = `part ${n} of upload ${id}`;
    await rm(partPath(id, n), { force: true });
    const meter = new PartMeter(size, what);
    let file;
    try {
      file = createWriteStream(join(dirOf(id), "data"), { flags: "r+", start: (n - 1) * rec.partSize });
      await pipeline(body, meter, file);
    } catch (e) {
      if (file && !file.closed) await once(file, "close").catch(() => undefined);
      throw isMissing(e) ? noSuchUpload(key, id) : e;
    }
    if (meter.bytes !== size) throw new StoreError("TooLarge", `${what} takes exactly ${size} bytes; the body ended after ${meter.bytes}`);
    const etag = meter.md5.digest("hex");
    if (md5 !== undefined && md5 !== etag) throw new StoreError("BadDigest", `${what}: the Content-MD5 does not match the part's bytes`);
    try { await writeJson(partPath(id, n), { size, etag } satisfies PartRecord); } catch (e) {
      throw isMissing(e) ? noSuchUpload(key, id) : e; // aborted meanwhile
    }
    return { partNumber: n, size, etag };
  }

  async function putPart(key: string, id: string, n: number, body: ByteStream, o: { size: number; md5?: string }): Promise<UploadedPart> {
    const rec = await readUpload(key, id);
    const size = expectedSize(rec, n);
    if (o.size !== size) throw new StoreError("TooLarge", `part ${n} of upload ${id} takes exactly ${size} bytes, not ${o.size}`);
    let md5: string | undefined;
    if (o.md5 !== undefined) {
      const digest = Buffer.from(o.md5, "base64");
      if (digest.length !== 16 || digest.toString("base64") !== o.md5) throw new StoreError("BadDigest", "Content-MD5 is not the base64 of 16 bytes");
      md5 = digest.toString("hex");
    }
    // No await from the check to the registration: `complete` either sees this part in flight or refuses it.
    const state = stateOf(id);
    if (state.closing) throw new StoreError("NotFound", `upload ${id} of ${key} is being completed or aborted`);
    const written = d.withLock(`\u0000part:${id}:${n}`, () => writePart(key, id, rec, n, body, md5));
    state.inflight.add(written);
    try { return await written; } finally {
      state.inflight.delete(written);
      if (state.inflight.size === 0 && !state.closing) states.delete(id);
    }
  }

  async function listParts(key: string, id: string): Promise<UploadedPart[]> {
    await readUpload(key, id);
    let names: string[];
    try { names = await readdir(join(dirOf(id), "parts")); } catch (e) {
      if (isMissing(e)) throw noSuchUpload(key, id);
      throw e;
    }
    const numbers = names.map((name) => PART_FILE.exec(name)?.[1]).filter((n): n is string => n !== undefined).map(Number).sort((a, b) => a - b);
    const parts = await inBatches(numbers, 64, async (n) => {
      const p = await readPart(id, n);
      return p ? { partNumber: n, size: p.size, etag: p.etag } : undefined;
    });
    return parts.filter((p): p is UploadedPart => p !== undefined);
  }

  /** PreconditionFailed naming the first part that is not given, not received, or received with another etag. */
  async function checkParts(key: string, id: string, rec: UploadRecord, parts: ReadonlyArray<{ partNumber: number; etag: string }>): Promise<void> {
    const count = partCountOf(rec.size, rec.partSize);
    const given = new Map<number, string>();
    for (const p of parts) {
      if (!Number.isInteger(p.partNumber) || p.partNumber < 1 || p.partNumber > count) throw new StoreError("PreconditionFailed", `${key}: part ${p.partNumber} is not a part of this upload (1..${count})`);
      if (given.has(p.partNumber)) throw new StoreError("PreconditionFailed", `${key}: part ${p.partNumber} is given twice`);
      given.set(p.partNumber, plainEtag(p.etag));
    }
    const numbers = Array.from({ length: count }, (_, i) => i + 1);
    const problems = await inBatches(numbers, 64, async (n) => {
      const etag = given.get(n);
      if (etag === undefined) return `part ${n} is missing from the parts given`;
      const received = await readPart(id, n);
      if (!received) return `part ${n} was not received`;
      if (received.etag !== etag) return `part ${n}: etag ${etag} is not the part's (${received.etag})`;
      if (received.size !== expectedSize(rec, n)) return `part ${n} has ${received.size} bytes, not ${expectedSize(rec, n)}`;
      return undefined;
    });
    const problem = problems.find((p) => p !== undefined);
    if (problem) throw new StoreError("PreconditionFailed", `${key}: ${problem}`);
  }

  async function complete(key: string, id: string, parts: ReadonlyArray<{ partNumber: number; etag: string }>): Promise<ObjectInfo> {
    await readUpload(key, id);
    return d.withLock(`\u0000upload:${id}`, async () => {
      const state = stateOf(id);
      state.closing = true;
      let done = false;
      try {
        await Promise.allSettled([...state.inflight]);
        const rec = await readUpload(key, id); // again: it may have been aborted or completed meanwhile
        await checkParts(key, id, rec, parts);
        const dest = d.pathOf(key);
        await mkdir(dirname(dest), { recursive: true });
        await d.writeSidecar(key, { ...(rec.contentType ? { contentType: rec.contentType } : {}), ...(rec.metadata ? { metadata: rec.metadata } : {}) });
        const data = join(dirOf(id), "data");
        const now = new Date();
        await utimes(data, now, now);
        await rename(data, dest); // atomic: the object appears whole, its bytes never copied
        done = true;
        d.invalidate(key);
        await rm(dirOf(id), { recursive: true, force: true, maxRetries: 3 });
      } finally {
        // A failed complete leaves the upload open: parts may be sent again, and complete retried.
        if (!done) state.closing = false;
        if (done || state.inflight.size === 0) states.delete(id);
      }
      const made = await d.info(key);
      if (!made) throw new StoreError("NotFound", `${key} vanished right after its upload completed`);
      return made;
    });
  }

  async function abort(key: string, id: string): Promise<void> {
    d.pathOf(key);
    const dir = dirOf(id);
    await d.withLock(`\u0000upload:${id}`, async () => {
      try { await readUpload(key, id); } catch (e) {
        if (e instanceof StoreError && e.code === "NotFound") return;
        throw e;
      }
      const state = stateOf(id);
      state.closing = true;
      // Moved away first: a part still arriving can no longer record itself, then removed.
      const trash = join(d.tmp, `aborted-upload-${id}-${randomUUID()}`);
      await mkdir(d.tmp, { recursive: true });
      await rename(dir, trash);
      if (state.inflight.size === 0) states.delete(id);
      await rm(trash, { recursive: true, force: true, maxRetries: 3 });
    });
  }

  async function listOpen(before: Date, limit: number): Promise<OpenUpload[]> {
    let ids: string[];
    try { ids = (await readdir(d.root)).filter((name) => UPLOAD_ID.test(name)); } catch (e) {
      if (isMissing(e)) return [];
      throw e;
    }
    const open = await inBatches(ids, 64, async (id): Promise<OpenUpload | undefined> => {
      try {
        const rec = JSON.parse(await readFile(join(d.root, id, "upload.json"), "utf8")) as UploadRecord;
        return { key: rec.key, uploadId: id, initiated: new Date(rec.initiated) };
      } catch { return undefined; } // being created or removed
    });
    return open.filter((u): u is OpenUpload => u !== undefined && u.initiated.getTime() < before.getTime())
      .sort((a, b) => a.initiated.getTime() - b.initiated.getTime())
      .slice(0, Math.max(0, limit));
  }

  return {
    create,
    presignPart: async (key, id, n, o) => {
      d.pathOf(key);
      dirOf(id);
      if (!Number.isInteger(n) || n < 1 || n > MAX_PARTS) throw new RangeError(`part number ${n}: 1..${MAX_PARTS}`);
      if (!Number.isSafeInteger(o.size) || o.size < 0) throw new RangeError(`part size ${o.size}`);
      return d.presign({ key, uploadId: id, partNumber: n, size: o.size, expires: Math.floor(d.clock.now() / 1000) + o.expiresIn });
    },
    listParts,
    complete,
    abort,
    listOpen,
    putPart,
  };
}
