/**
 * A work queue with client-go's semantics (util/workqueue), the heart of a level-triggered
 * controller: a key waiting in the queue is held once however often it is added; a key
 * being processed is never handed out again until `done`, and if it was added meanwhile it
 * is queued again after `done`; `addAfter` delays an add; `addRateLimited` delays it by a
 * per-key exponential backoff that `resetBackoff` clears (client-go's Forget). Time comes from an injectable clock.
 */

export interface QueueClock {
  now(): number;
  setTimeout(fn: () => void, ms: number): { cancel(): void };
}

export const realQueueClock: QueueClock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref?.();
    return { cancel: () => clearTimeout(t) };
  },
};

/**
 * What a queue reports as it works, as client-go's workqueue metrics do (engine/controller.ts
 * binds them to Prometheus): `add` for an add that was not deduplicated (the key became
 * dirty), `queued` with the seconds from that add to the key being handed out, `worked` with
 * the seconds from being handed out to `done`, `retry` for every `addAfter` (and so every
 * `addRateLimited`), as client-go's delaying queue counts them.
 */
export interface QueueMetrics {
  add(): void;
  queued(seconds: number): void;
  worked(seconds: number): void;
  retry(): void;
}

export interface WorkQueueOptions {
  clock?: QueueClock;
  /** First retry delay of addRateLimited (doubles per failure). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  metrics?: QueueMetrics;
}

export class WorkQueue<K = string> {
  private readonly queue: K[] = [];
  private readonly dirty = new Set<K>();
  /** Keys being processed, with when each was handed out (clock time). */
  private readonly processing = new Map<K, number>();
  /** When each dirty key was added (clock time), for the queue-duration metric. */
  private readonly addedAt = new Map<K, number>();
  private readonly failures = new Map<K, number>();
  private readonly delayed = new Map<K, { at: number; timer: { cancel(): void } }>();
  private readonly waiters: Array<(k: K | undefined) => void> = [];
  private shuttingDown = false;
  private readonly clock: QueueClock;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly metrics: QueueMetrics | undefined;

  constructor(options: WorkQueueOptions = {}) {
    this.clock = options.clock ?? realQueueClock;
    this.baseDelayMs = options.baseDelayMs ?? 5;
    this.maxDelayMs = options.maxDelayMs ?? 60_000;
    this.metrics = options.metrics;
  }

  /** Marks `key` as needing work. Deduplicated while it waits; deferred while it is processed. */
  add(key: K): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.metrics) { this.metrics.add(); this.addedAt.set(key, this.clock.now()); }
    if (this.processing.has(key)) return;
    this.enqueue(key);
  }

  /** Hands a dirty key to a waiting `get`, or queues it. */
  private enqueue(key: K): void {
    const w = this.waiters.shift();
    if (w) { this.handOut(key); w(key); return; }
    this.queue.push(key);
  }

  /** A dirty key leaves the queue for a worker. */
  private handOut(key: K): void {
    const now = this.clock.now();
    this.dirty.delete(key);
    this.processing.set(key, now);
    const at = this.addedAt.get(key);
    if (at !== undefined) { this.addedAt.delete(key); this.metrics?.queued(Math.max(0, now - at) / 1000); }
  }

  /** Adds `key` after `ms`; an earlier pending delayed add of the same key wins. */
  addAfter(key: K, ms: number): void {
    if (this.shuttingDown) return;
    this.metrics?.retry();
    if (ms <= 0) { this.add(key); return; }
    const at = this.clock.now() + ms;
    const existing = this.delayed.get(key);
    if (existing && existing.at <= at) return;
    existing?.timer.cancel();
    const timer = this.clock.setTimeout(() => { this.delayed.delete(key); this.add(key); }, ms);
    this.delayed.set(key, { at, timer });
  }

  /** Adds `key` after its backoff: base · 2^(failures so far), capped. */
  addRateLimited(key: K): void {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    this.addAfter(key, Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** n));
  }

  /** Clears the backoff of `key` (after a successful reconcile; client-go's Forget). */
  resetBackoff(key: K): void { this.failures.delete(key); }

  numRequeues(key: K): number { return this.failures.get(key) ?? 0; }

  /** Waits for the next key; undefined once shut down and drained. */
  get(): Promise<K | undefined> {
    const key = this.queue.shift();
    if (key !== undefined) {
      this.handOut(key);
      return Promise.resolve(key);
    }
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /**
   * Ends processing of `key`; if it was added meanwhile, it is queued again now — even during
   * shut-down, since that add was accepted before it (a change is never lost).
   */
  done(key: K): void {
    const since = this.processing.get(key);
    this.processing.delete(key);
    if (since !== undefined) this.metrics?.worked(Math.max(0, this.clock.now() - since) / 1000);
    if (this.dirty.has(key)) this.enqueue(key);
  }

  get length(): number { return this.queue.length; }
  get processingCount(): number { return this.processing.size; }
  /** Keys added and not yet handed out (client-go's depth): queued, or waiting for their processing to end. */
  get depth(): number { return this.dirty.size; }

  /**
   * Seconds of work in progress not yet reported by `worked` (all keys being processed
   * together), and how long the longest of them has been running — client-go's
   * unfinished_work_seconds and longest_running_processor_seconds.
   */
  unfinishedWork(): { totalSeconds: number; longestSeconds: number } {
    const now = this.clock.now();
    let total = 0;
    let longest = 0;
    for (const since of this.processing.values()) {
      const s = Math.max(0, now - since) / 1000;
      total += s;
      longest = Math.max(longest, s);
    }
    return { totalSeconds: total, longestSeconds: longest };
  }

  /** Stops accepting keys, cancels delayed adds and wakes every waiting `get` with undefined. */
  shutDown(): void {
    this.shuttingDown = true;
    for (const d of this.delayed.values()) d.timer.cancel();
    this.delayed.clear();
    for (const w of this.waiters.splice(0)) w(undefined);
  }
}

/** Longest stretch the workers may keep the event loop to themselves. */
export const YIELD_EVERY_MS = 10;

/**
 * Runs `reconcile` on keys from `queue` with `workers` concurrent workers. A key is never
 * reconciled twice at once (the queue guarantees it). A result with `requeueAfterMs` adds the
 * key again after that time; a thrown error retries it with backoff.
 */
export async function runWorkers<K>(queue: WorkQueue<K>, workers: number,
  reconcile: (key: K) => Promise<{ requeueAfterMs?: number } | void>,
  onError: (key: K, error: unknown) => void = () => undefined): Promise<void> {
  // Let I/O run at least every YIELD_EVERY_MS: a reconcile that is served from caches
  // finishes in microtasks alone, and a queue that keeps refilling itself would otherwise
  // starve the event loop (no watch event, no HTTP answer, no create ever completing).
  let lastYield = Date.now();
  const worker = async () => {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      try {
        const r = await reconcile(key);
        queue.resetBackoff(key);
        if (r && r.requeueAfterMs !== undefined) queue.addAfter(key, r.requeueAfterMs);
      } catch (e) {
        onError(key, e);
        queue.addRateLimited(key);
      } finally {
        queue.done(key);
      }
      if (Date.now() - lastYield >= YIELD_EVERY_MS) {
        // Every worker waits here until the event loop has had its turn (only then is the
        // time reset), so no worker keeps the microtask queue busy while the others yield.
        await new Promise<void>((resolve) => setImmediate(resolve));
        lastYield = Date.now();
      }
    }
  };
  await Promise.all(Array.from({ length: workers }, worker));
}
