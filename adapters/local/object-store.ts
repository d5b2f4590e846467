/**
 * The filesystem ObjectStore of embedded mode. Objects live under `<root>/objects/<key>`,
 * their SHA-256, content type and metadata in a sidecar under `<root>/meta/<key>.json`.
 * Writes stream to `<root>/tmp/` while hashing and appear by rename (or link, for
 * if-none-match), so an object is never visible half written and an aborted upload leaves
 * nothing. Presigned URLs point at the api-server (see presign.ts).
 */
import { createHash, randomUUID } from "node:crypto";
import { once } from "node:events";
import { createReadStream, createWriteStream } from "node:fs";
import { link, mkdir, readFile, readdir, rename, rm, stat, unlink, writeFile } from "node:fs/promises";
import { dirname, join, resolve, sep } from "node:path";
import { Transform, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ByteRange, ByteStream, Clock, GetResult, ListOptions, ListPage, ObjectInfo, ObjectStore, PresignOptions, PutOptions } from "../../core/ports.js";
import { SYSTEM_PREFIX, isSystemKey } from "../../core/layout.js";
import { StoreError } from "../../core/ports.js";
import { checkedKey } from "../key-guard.js";
import { presignUrl } from "./presign.js";

export interface LocalStoreConfig {
  root: string;
  /** Base URL of the api-server that serves presigned URLs. */
  publicUrl: string;
  signingSecret: string;
  clock?: Clock;
}

interface Sidecar { sha256: string; contentType?: string; metadata?: Record<string, string> }

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
  };
}
