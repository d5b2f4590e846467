/**
 * A supervised list-and-watch cache of one kind of object (client-go's informer, reduced to
 * what Operon needs). It lists, then watches from the list's resourceVersion with bookmarks;
 * a watch the server ends is resumed; a watch that errors, answers 410 Gone, or goes quiet
 * (no event, no bookmark, no server close within `quietMs`) is abandoned and the cache is
 * rebuilt by a fresh list, so a dead connection never leaves the operator blind. Handlers get
 * only the object that changed — no ADDED/MODIFIED/DELETED switch: callers re-read the level.
 */
import type { KubeClient } from "./client.js";
import { KubeError } from "./client.js";

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    creationTimestamp?: string;
    deletionTimestamp?: string;
    ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string; controller?: boolean; blockOwnerDeletion?: boolean }>;
  };
}

interface ListResult<T> { metadata: { resourceVersion: string; continue?: string }; items: T[] }
export interface WatchEvent<T> { type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR"; object: T & { code?: number; message?: string } }

/**
 * The events of a watch response (one JSON object a line), in order. `onChunk` is called as
 * each chunk of the body arrives, before its events.
 */
export async function* watchEvents<T>(body: AsyncIterable<unknown>, onChunk?: () => void): AsyncGenerator<WatchEvent<T>> {
  let buf = "";
  for await (const chunk of body) {
    onChunk?.();
    buf += (chunk as Buffer).toString("utf8");
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line) continue;
      yield JSON.parse(line) as WatchEvent<T>;
    }
  }
}

export interface InformerOptions<T extends KubeObject> {
  client: KubeClient;
  /** Collection path, e.g. `/apis/batch/v1/namespaces/ns/jobs`. */
  path: string;
  labelSelector?: string;
  /**
   * `labelSelector` as a predicate, for objects that reach the cache other than through the
   * list or the watch (`assume`): one that does not match is not cached, and drops the cached
   * version it replaces (it left the selection, as a watch would say with DELETED).
   */
  accept?: (obj: T) => boolean;
  /** Called with the new object, or the last known one when it was deleted. */
  onChange?: (obj: T) => void;
  /** A watch with no sign of life for this long is abandoned and the cache relisted. */
  quietMs?: number;
  onError?: (error: unknown) => void;
  /** Page size of the list. */
  pageSize?: number;
  /**
   * What of each object to keep in the cache (client-go's SetTransform): listed, watched and
   * assumed objects all pass through it, after `metadata.managedFields` (never needed here,
   * often the largest part) is dropped. The operator keeps every Job for a day; keeping only
   * what it reads bounds its memory.
   */
  transform?: (obj: T) => T;
  /**
   * An index of the cache (client-go's Indexer, one index): the key an object is filed
   * under, or undefined for none. `byIndex(key)` then answers without a scan.
   */
  indexBy?: (obj: T) => string | undefined;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** True when `a` is a newer resourceVersion than `b` (they are etcd revisions in practice). */
export function newer(a: string | undefined, b: string | undefined): boolean {
  if (!a) return false;
  if (!b) return true;
  const x = Number(a);
  const y = Number(b);
  return Number.isFinite(x) && Number.isFinite(y) ? x > y : a !== b;
}

export class Informer<T extends KubeObject> {
  private readonly cache = new Map<string, T>();
  /** indexBy's key → the cached objects filed under it, by name. */
  private readonly index = new Map<string, Map<string, T>>();
  private stopped = false;
  private abort: AbortController | undefined;
  private synced!: Promise<void>;
  /** How often the cache was rebuilt by a list (the first one included). */
  relists = 0;

  constructor(private readonly opts: InformerOptions<T>) {}

  /** Starts listing and watching; resolves once the first list is in the cache. */
  start(): Promise<void> {
    let resolveSynced!: () => void;
    let rejectSynced!: (e: unknown) => void;
    this.synced = new Promise<void>((res, rej) => { resolveSynced = res; rejectSynced = rej; });
    void (async () => {
      let failures = 0;
      let first = true;
      while (!this.stopped) {
        try {
          let rv = await this.relist();
          if (first) { first = false; resolveSynced(); }
          failures = 0;
          // Resume after a normal close; relist after an error, a 410 or a quiet stream.
          for (;;) {
            if (this.stopped) return;
            const next = await this.watchOnce(rv);
            if (next === undefined) break;
            rv = next;
          }
        } catch (e) {
          if (this.stopped) return;
          failures++;
          this.opts.onError?.(e);
          if (first && failures >= 30) { rejectSynced(e); return; }
        }
        if (!this.stopped) await sleep(Math.min(5000, 100 * 2 ** Math.min(failures, 6)));
      }
    })();
    return this.synced;
  }

  stop(): void {
    this.stopped = true;
    this.abort?.abort();
  }

  get(name: string): T | undefined { return this.cache.get(name); }
  list(): T[] { return [...this.cache.values()]; }
  /** The cached objects `indexBy` files under `key` (empty without `indexBy`). */
  byIndex(key: string): T[] { return [...(this.index.get(key)?.values() ?? [])]; }

  /** Every change of the cache goes through `set` and `remove`, which keep the index current. */
  private set(obj: T): void {
    const name = obj.metadata.name;
    this.unindex(name);
    this.cache.set(name, obj);
    const key = this.opts.indexBy?.(obj);
    if (key === undefined) return;
    let bucket = this.index.get(key);
    if (!bucket) this.index.set(key, (bucket = new Map()));
    bucket.set(name, obj);
  }

  private remove(name: string): void {
    this.unindex(name);
    this.cache.delete(name);
  }

  private unindex(name: string): void {
    const old = this.cache.get(name);
    const key = old && this.opts.indexBy?.(old);
    if (key === undefined) return;
    const bucket = this.index.get(key);
    bucket?.delete(name);
    if (bucket?.size === 0) this.index.delete(key);
  }

  /**
   * Puts an object this process just wrote into the cache (the API's answer), unless the cache
   * already holds a newer version. The watch event that follows is then a no-op.
   */
  assume(written: T): void {
    const obj = this.keep(written);
    const cur = this.cache.get(obj.metadata.name);
    if (cur && !newer(obj.metadata.resourceVersion, cur.metadata.resourceVersion)) return;
    if (this.opts.accept && !this.opts.accept(obj)) this.remove(obj.metadata.name);
    else this.set(obj);
  }

  /** Whether the first list is in the cache. */
  get isSynced(): boolean { return this.relists > 0; }

  /** The part of an object the cache keeps. */
  private keep(obj: T): T {
    let out = obj;
    if ("managedFields" in obj.metadata) {
      const { managedFields: _drop, ...metadata } = obj.metadata as T["metadata"] & { managedFields?: unknown };
      out = { ...obj, metadata };
    }
    return this.opts.transform ? this.opts.transform(out) : out;
  }

  private async relist(): Promise<string> {
    const seen = new Map<string, T>();
    let cont: string | undefined;
    let rv: string;
    do {
      const page = await this.opts.client.request<ListResult<T>>("GET", this.opts.path, {
        query: { labelSelector: this.opts.labelSelector, limit: this.opts.pageSize ?? 500, continue: cont },
      });
      for (const item of page.items) seen.set(item.metadata.name, this.keep(item));
      rv = page.metadata.resourceVersion;
      cont = page.metadata.continue || undefined;
    } while (cont);
    this.relists++;
    const changed: T[] = [];
    for (const [name, old] of this.cache) if (!seen.has(name)) { this.remove(name); changed.push(old); }
    for (const [name, obj] of seen) {
      const old = this.cache.get(name);
      this.set(obj);
      if (!old || old.metadata.resourceVersion !== obj.metadata.resourceVersion) changed.push(obj);
    }
    for (const obj of changed) this.emit(obj);
    return rv;
  }

  private emit(obj: T): void {
    try { this.opts.onChange?.(obj); } catch (e) { this.opts.onError?.(e); }
  }

  /** One watch; returns the resourceVersion to resume from, or undefined to relist. */
  private async watchOnce(rv: string): Promise<string | undefined> {
    const quietMs = this.opts.quietMs ?? 90_000;
    const abort = new AbortController();
    this.abort = abort;
    let quiet: NodeJS.Timeout | undefined;
    let wentQuiet = false;
    const alive = () => {
      if (quiet) clearTimeout(quiet);
      quiet = setTimeout(() => { wentQuiet = true; abort.abort(); }, quietMs);
    };
    alive();
    try {
      // The server closes the watch after timeoutSeconds; a live stream also sends bookmarks.
      const res = await this.opts.client.stream(this.opts.path, {
        query: { watch: 1, resourceVersion: rv, allowWatchBookmarks: true, labelSelector: this.opts.labelSelector, timeoutSeconds: Math.max(1, Math.floor((quietMs * 0.6) / 1000)) },
        signal: abort.signal,
      });
      for await (const ev of watchEvents<T>(res, alive)) {
        if (ev.type === "ERROR") {
          // 410 Gone: our resourceVersion is too old. Anything else: start over too.
          throw new KubeError(ev.object.code ?? 500, "WatchError", ev.object.message ?? "watch error");
        }
        const objRv = ev.object.metadata.resourceVersion;
        if (objRv) rv = objRv;
        if (ev.type === "BOOKMARK") continue;
        const obj = this.keep(ev.object);
        const name = obj.metadata.name;
        if (ev.type === "DELETED") {
          this.remove(name);
          this.emit(obj);
        } else {
          const cur = this.cache.get(name);
          if (cur && cur.metadata.resourceVersion === objRv) continue; // already assumed
          this.set(obj);
          this.emit(obj);
        }
      }
      if (wentQuiet) throw new Error(`watch of ${this.opts.path} went quiet for ${quietMs} ms`);
      return rv;
    } catch (e) {
      if (this.stopped) return undefined;
      this.opts.onError?.(wentQuiet ? new Error(`watch of ${this.opts.path} went quiet for ${quietMs} ms; relisting`) : e);
      return undefined;
    } finally {
      if (quiet) clearTimeout(quiet);
      abort.abort();
    }
  }
}
