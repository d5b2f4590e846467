/**
 * The SHA-256 of files that were stored without the api-server reading their bytes (a
 * multipart upload, confirmed in seconds whatever its size): computed here, in the
 * background, and recorded on the object (store.describe), so that the checksum is known
 * before any run uses the file (the engine refuses a file input whose checksum is missing;
 * docs/storage.md#multipart-uploads).
 *
 * Pending work is a marker in storage (core/layout.ts pendingChecksumKey), rewritten while
 * the file is read (a heartbeat with the bytes hashed so far) and removed once the checksum
 * is recorded, so an api-server that restarts, or another replica, takes up what was left.
 * Each process hashes at most `concurrency` files at once and takes organizations in turn,
 * so one organization's terabytes do not hold back another's file.
 */
import { createHash } from "node:crypto";
import { PENDING_CHECKSUMS_PREFIX, pendingChecksumKey } from "../core/layout.js";
import type { Clock, ObjectInfo, ObjectStore } from "../core/ports.js";
import { readJson } from "../adapters/json-store.js";

/** A file waiting for its checksum, as its marker records it. */
export interface PendingChecksum {
  storageKey: string;
  organization: string;
  size: number;
  queuedAt: string;
  /** Rewritten while the file is read; a marker not rewritten for `staleMs` is taken up again. */
  heartbeatAt: string;
  /** Bytes hashed so far. */
  hashed: number;
}

export interface ChecksumOptions {
  /** Files hashed at once by this process (default 2). */
  concurrency?: number;
  /** How often a marker is rewritten while its file is read (default 30 s). */
  heartbeatMs?: number;
  /** A marker not rewritten for this long belongs to nobody (default 2 minutes). */
  staleMs?: number;
}

const markerOf = (storageKey: string) => pendingChecksumKey(createHash("sha256").update(storageKey).digest("hex"));

/** The marker of a file whose checksum is still being computed, if any. */
export async function pendingChecksum(store: ObjectStore, storageKey: string): Promise<PendingChecksum | undefined> {
  return readJson<PendingChecksum>(store, markerOf(storageKey));
}

export class Checksums {
  private readonly queues = new Map<string, string[]>();
  /** Storage key → its organization, for every file queued or being hashed here. */
  private readonly known = new Map<string, string>();
  private readonly running = new Map<string, AbortController>();
  private readonly tasks = new Set<Promise<void>>();
  private turn = 0;
  private closed = false;
  private readonly concurrency: number;
  private readonly heartbeatMs: number;
  private readonly staleMs: number;

  constructor(private readonly store: ObjectStore, private readonly clock: Clock, private readonly onError: (e: unknown, storageKey: string) => void, o: ChecksumOptions = {}) {
    this.concurrency = o.concurrency ?? 2;
    this.heartbeatMs = o.heartbeatMs ?? 30_000;
    this.staleMs = o.staleMs ?? 120_000;
  }

  /** Records that the checksum of the object at `info.key` is wanted (a marker): whoever finds the marker unattended computes it. */
  async mark(organization: string, info: { key: string; size: number }): Promise<void> {
    const now = new Date(this.clock.now()).toISOString();
    const marker: PendingChecksum = { storageKey: info.key, organization, size: info.size, queuedAt: now, heartbeatAt: now, hashed: 0 };
    await this.store.put(markerOf(info.key), JSON.stringify(marker), { contentType: "application/json" });
  }

  /** Computes the checksum of the object at `key` here, in its organization's turn (its marker written already). */
  start(organization: string, key: string): void {
    this.enqueue(organization, key);
  }

  /** mark, then start. */
  async request(organization: string, info: ObjectInfo): Promise<void> {
    await this.mark(organization, info);
    this.start(organization, info.key);
  }

  /** Queues every pending file whose marker nobody rewrote for `staleMs` (at start, and from time to time). */
  async resume(maxPages = 10): Promise<number> {
    let cursor: string | undefined;
    let taken = 0;
    for (let page = 0; page < maxPages && !this.closed; page++) {
      const got = await this.store.list(PENDING_CHECKSUMS_PREFIX, { limit: 1000, ...(cursor ? { cursor } : {}) });
      for (const item of got.items) {
        const m = await readJson<PendingChecksum>(this.store, item.key).catch(() => undefined);
        if (!m || this.known.has(m.storageKey)) continue;
        if (this.clock.now() - Date.parse(m.heartbeatAt) < this.staleMs) continue;
        this.enqueue(m.organization, m.storageKey);
        taken++;
      }
      cursor = got.nextCursor;
      if (!cursor) break;
    }
    return taken;
  }

  /** Stops hashing (what was left stays pending, for the next process) and waits for the tasks. */
  async close(): Promise<void> {
    this.closed = true;
    for (const c of this.running.values()) c.abort();
    await Promise.allSettled([...this.tasks]);
  }

  /** Waits until nothing is queued or being hashed here (tests, benchmarks). */
  async idle(): Promise<void> {
    while (this.tasks.size > 0) await Promise.allSettled([...this.tasks]);
  }

  private enqueue(organization: string, storageKey: string): void {
    if (this.closed || this.known.has(storageKey)) return;
    this.known.set(storageKey, organization);
    const q = this.queues.get(organization) ?? [];
    q.push(storageKey);
    this.queues.set(organization, q);
    this.pump();
  }

  /** Starts files while slots are free, one organization after another. */
  private pump(): void {
    while (!this.closed && this.running.size < this.concurrency) {
      const orgs = [...this.queues.keys()];
      if (orgs.length === 0) return;
      const org = orgs[this.turn++ % orgs.length] as string;
      const q = this.queues.get(org) as string[];
      const key = q.shift() as string;
      if (q.length === 0) this.queues.delete(org);
      const abort = new AbortController();
      this.running.set(key, abort);
      const task = this.hash(key, abort.signal)
        .catch((e: unknown) => { if (!abort.signal.aborted) this.onError(e, key); })
        .finally(() => { this.running.delete(key); this.known.delete(key); this.tasks.delete(task); this.pump(); });
      this.tasks.add(task);
    }
  }

  /**
   * Reads the file and records its checksum, unless it already has one. A file replaced while
   * it was read (a newer upload) is read again; the marker goes once the checksum is there.
   */
  private async hash(storageKey: string, signal: AbortSignal): Promise<void> {
    const marker = markerOf(storageKey);
    for (let attempt = 0; attempt < 3 && !signal.aborted; attempt++) {
      const before = await this.store.head(storageKey);
      if (!before || before.sha256) break;
      const sha256 = await this.read(storageKey, marker, before.size, signal);
      if (sha256 === undefined) return;
      if (sha256 === "") continue; // fewer or more bytes than the object had: it changed meanwhile
      const after = await this.store.head(storageKey);
      if (after && after.size === before.size && after.etag === before.etag && after.lastModified.getTime() === before.lastModified.getTime() && !after.sha256) {
        await this.store.describe(storageKey, { sha256 });
        break;
      }
    }
    if (!signal.aborted) await this.store.delete(marker);
  }

  /** The SHA-256 of the object's `size` bytes, its marker rewritten meanwhile; undefined when stopped, "" when another number of bytes came. */
  private async read(storageKey: string, marker: string, size: number, signal: AbortSignal): Promise<string | undefined> {
    const m = await readJson<PendingChecksum>(this.store, marker);
    const h = createHash("sha256");
    let hashed = 0;
    const beat = setInterval(() => {
      if (!m) return;
      const next = { ...m, heartbeatAt: new Date(this.clock.now()).toISOString(), hashed };
      this.store.put(marker, JSON.stringify(next), { contentType: "application/json" }).catch(() => undefined);
    }, this.heartbeatMs);
    beat.unref();
    try {
      const { body } = await this.store.get(storageKey);
      const stop = () => body.destroy?.(new Error("checksum stopped"));
      signal.addEventListener("abort", stop, { once: true });
      try {
        for await (const chunk of body) { h.update(chunk); hashed += chunk.length; }
      } finally {
        signal.removeEventListener("abort", stop);
      }
    } finally {
      clearInterval(beat);
    }
    if (signal.aborted) return undefined;
    return hashed === size ? h.digest("hex") : "";
  }
}
