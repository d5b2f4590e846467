/**
 * The viewers' file readers run here, not on the API's event loop: each organization that is
 * reading gets its own worker thread (worker.ts) with its own heap cap, one read at a time,
 * each under a deadline. A hostile file can therefore only exhaust its own organization's
 * worker — that worker is ended (out of memory, past the deadline) and the read fails with a
 * sentence naming the bound — while every other organization's reads go on in theirs.
 * Workers are few (`maxWorkers`); an organization waiting for one gets the next that frees,
 * in arrival order, and an idle worker gives its place up to a waiting organization.
 */
import { Worker } from "node:worker_threads";
import { ReaderError } from "./bounded.js";
import type { FromWorker, ReaderOp, ReaderResults, ToWorker } from "./worker.js";
import { messageOf } from "../../core/errors.js";

export interface ReaderPoolOptions {
  /** Heap of one organization's worker, MB (default 768). */
  heapMb?: number;
  /** Longest one read may take (default 60 s). */
  timeoutMs?: number;
  /** An idle worker ends after this long (default 60 s). */
  idleMs?: number;
  /** Workers alive at once, across organizations (default 8). */
  maxWorkers?: number;
}

export type OpenSource = () => Promise<AsyncIterable<Uint8Array>>;

interface Job { op: ReaderOp; open: OpenSource; resolve: (v: unknown) => void; reject: (e: Error) => void }
/** A worker and the read it is doing: what its messages, its error and its exit go to. */
interface Slot { worker: Worker; current?: (m: FromWorker) => void; fail?: (e: Error) => void; ending?: boolean }
interface OrgReader { slot?: Slot; queue: Job[]; running: boolean; idle?: NodeJS.Timeout }

/** Bytes sent to a worker per message. */
const BATCH_BYTES = 1024 * 1024;
const workerUrl = new URL(`./worker${import.meta.url.endsWith(".ts") ? ".ts" : ".js"}`, import.meta.url);

export class ReaderPool {
  readonly heapMb: number;
  readonly timeoutMs: number;
  private readonly idleMs: number;
  private readonly maxWorkers: number;
  private readonly orgs = new Map<string, OrgReader>();
  /** Organizations with work and no worker, in arrival order. */
  private readonly waiting: string[] = [];
  private live = 0;
  private nextId = 1;
  private closed = false;

  constructor(o: ReaderPoolOptions = {}) {
    this.heapMb = o.heapMb ?? 768;
    this.timeoutMs = o.timeoutMs ?? 60_000;
    this.idleMs = o.idleMs ?? 60_000;
    this.maxWorkers = Math.max(1, o.maxWorkers ?? 8);
  }

  /** One read of `org`'s, in its worker; `open` gives the file's bytes, called only if the worker asks for them. */
  run<K extends ReaderOp["kind"]>(org: string, op: Extract<ReaderOp, { kind: K }>, open: OpenSource): Promise<ReaderResults[K]> {
    if (this.closed) return Promise.reject(new Error("the readers are closed"));
    return new Promise<ReaderResults[K]>((resolve, reject) => {
      let r = this.orgs.get(org);
      if (!r) { r = { queue: [], running: false }; this.orgs.set(org, r); }
      r.queue.push({ op, open, resolve: resolve as (v: unknown) => void, reject });
      this.pump(org);
    });
  }

  /** Workers alive (for tests and metrics). */
  get workers(): number { return this.live; }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.orgs.values()].map(async (r) => {
      clearTimeout(r.idle);
      for (const j of r.queue.splice(0)) j.reject(new Error("the readers are closed"));
      r.slot?.fail?.(new Error("the readers are closed"));
      await r.slot?.worker.terminate();
    }));
    this.orgs.clear();
  }

  private pump(org: string): void {
    const r = this.orgs.get(org);
    if (!r || r.running || this.closed) return;
    const job = r.queue.shift();
    if (!job) {
      if (r.slot?.ending) r.slot = undefined;
      if (!r.slot) { this.orgs.delete(org); return; }
      clearTimeout(r.idle);
      if (this.waiting.length > 0) this.retire(org);
      else r.idle = setTimeout(() => this.retire(org), this.idleMs).unref();
      return;
    }
    clearTimeout(r.idle);
    if (r.slot?.ending) r.slot = undefined;
    if (!r.slot) {
      if (this.live >= this.maxWorkers) {
        r.queue.unshift(job);
        if (!this.waiting.includes(org)) this.waiting.push(org);
        this.retireOneIdle();
        return;
      }
      r.slot = this.spawn(org, r);
    }
    r.running = true;
    void this.execute(r.slot, job).finally(() => { r.running = false; this.pump(org); });
  }

  private spawn(org: string, r: OrgReader): Slot {
    this.live++;
    const w = new Worker(workerUrl, { workerData: { operonReader: true }, resourceLimits: { maxOldGenerationSizeMb: this.heapMb }, stdout: false, stderr: false });
    const slot: Slot = { worker: w };
    w.unref();
    w.on("message", (m: FromWorker) => slot.current?.(m));
    w.on("error", (e: Error & { code?: string }) => {
      if (r.slot === slot) r.slot = undefined;
      slot.fail?.(e.code === "ERR_WORKER_OUT_OF_MEMORY" ? new ReaderError(`reading the file needed more than ${this.heapMb} MB of memory, the most one organization's reader may use`) : e);
    });
    w.once("exit", () => {
      if (r.slot === slot) r.slot = undefined;
      this.live--;
      slot.fail?.(new ReaderError("the file's reader stopped"));
      this.admitWaiting();
      if (this.orgs.get(org) === r && !r.running && r.queue.length === 0 && !r.slot) this.orgs.delete(org);
    });
    return slot;
  }

  /** End `org`'s idle worker (its kept tables go with it) and let a waiting organization in. */
  private retire(org: string): void {
    const r = this.orgs.get(org);
    if (!r || r.running || !r.slot) return;
    clearTimeout(r.idle);
    const slot = r.slot;
    r.slot = undefined;
    void slot.worker.terminate();
  }

  /** Makes a place by ending some organization's idle worker (the waiting one gets it at its exit). */
  private retireOneIdle(): void {
    for (const [org, r] of this.orgs) {
      if (!r.running && r.slot && r.queue.length === 0) { this.retire(org); return; }
    }
  }

  private admitWaiting(): void {
    while (this.waiting.length > 0 && this.live < this.maxWorkers) this.pump(this.waiting.shift() as string);
  }

  private execute(slot: Slot, job: Job): Promise<void> {
    const id = this.nextId++;
    const w = slot.worker;
    const send = (m: ToWorker, transfer: ArrayBuffer[] = []) => w.postMessage(m, transfer);
    let source: AsyncIterator<Uint8Array> | undefined;
    return new Promise<void>((settle) => {
      let done = false;
      let deadline: NodeJS.Timeout | undefined;
      const finish = (err: Error | undefined, value?: unknown) => {
        if (done) return;
        done = true;
        clearTimeout(deadline);
        clearTimeout(boot);
        slot.current = undefined;
        slot.fail = undefined;
        void source?.return?.();
        if (err) job.reject(err); else job.resolve(value);
        settle();
      };
      const overtime = (ms: number) => () => {
        slot.ending = true;
        slot.fail = undefined;
        finish(new ReaderError(`reading the file took longer than ${Math.round(ms / 1000)} s, the most one read may take`));
        void w.terminate();
      };
      // The read's time counts from its first message (a worker may still be starting on a busy
      // machine); a worker that never starts is ended too.
      const boot = setTimeout(overtime(this.timeoutMs), this.timeoutMs + 30_000);
      slot.fail = (e) => finish(e);
      slot.current = (m) => {
        if (m.id !== id) return;
        deadline ??= setTimeout(overtime(this.timeoutMs), this.timeoutMs);
        if (m.type === "done") finish(undefined, m.value);
        else if (m.type === "failed") finish(m.bounded ? new ReaderError(m.message) : new Error(m.message));
        else if (m.type === "pull") {
          void (async () => {
            try {
              source ??= (await job.open())[Symbol.asyncIterator]();
              // Up to a megabyte per message: fewer round trips than the store's own chunks.
              const parts: Uint8Array[] = [];
              let n = 0, ended = false;
              while (n < BATCH_BYTES) {
                const next = await source.next();
                if (next.done) { ended = true; break; }
                parts.push(next.value);
                n += next.value.length;
              }
              if (done) return;
              if (n > 0) {
                const batch = new Uint8Array(n);
                let at = 0;
                for (const p of parts) { batch.set(p, at); at += p.length; }
                send({ type: "chunk", id, data: batch }, [batch.buffer]);
              }
              if (ended) send({ type: "end", id });
            } catch (e) {
              if (!done) send({ type: "source-error", id, message: messageOf(e) });
            }
          })();
        }
      };
      send({ type: "op", id, op: job.op });
    });
  }
}
