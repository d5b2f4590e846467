/**
 * Reads a part of a file and its MD5 off the main thread. The CLI sends four parts at once;
 * hashing a 64 MiB part on the main thread (about 0.1 s) stalls every socket meanwhile, and
 * on a small machine the storage server wants the other core. Workers read the slice with
 * plain reads, hash it, and hand the bytes over without a copy (a transferred ArrayBuffer).
 * Workers hold the process only while they have work.
 */
import { Worker } from "node:worker_threads";

const WORKER = `
const { parentPort } = require("node:worker_threads");
const fs = require("node:fs");
const crypto = require("node:crypto");
parentPort.on("message", ({ id, path, start, end }) => {
  let fd;
  try {
    fd = fs.openSync(path, "r");
    const buf = Buffer.allocUnsafeSlow(end - start);
    for (let off = 0; off < buf.length;) {
      const n = fs.readSync(fd, buf, off, buf.length - off, start + off);
      if (n === 0) throw new Error("the file is shorter than when the upload began (was it changed?)");
      off += n;
    }
    const md5 = crypto.createHash("md5").update(buf).digest();
    parentPort.postMessage({ id, md5, bytes: buf.buffer }, [buf.buffer]);
  } catch (e) {
    parentPort.postMessage({ id, error: String(e && e.message || e) });
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
});
`;

interface Job { resolve(v: { body: Buffer; md5: Buffer }): void; reject(e: Error): void }

/** A pool of `size` workers reading parts of files with their MD5. */
export class PartReader {
  private readonly workers: Array<{ w: Worker; busy: number }> = [];
  private readonly jobs = new Map<number, Job>();
  private next = 0;

  constructor(private readonly size: number) {}

  /** Bytes `start` to `end` (exclusive) of the file at `path`, and their MD5. */
  async read(path: string, start: number, end: number): Promise<{ body: Buffer; md5: Buffer }> {
    const slot = this.slot();
    const id = this.next++;
    slot.busy++;
    if (slot.busy === 1) slot.w.ref();
    try {
      return await new Promise((resolve, reject) => {
        this.jobs.set(id, { resolve, reject });
        slot.w.postMessage({ id, path, start, end });
      });
    } finally {
      slot.busy--;
      if (slot.busy === 0) slot.w.unref();
    }
  }

  /** Stops the workers (what is in flight fails). */
  async close(): Promise<void> {
    await Promise.all(this.workers.map(async (s) => s.w.terminate()));
    this.workers.length = 0;
  }

  private slot(): { w: Worker; busy: number } {
    const idle = this.workers.find((s) => s.busy === 0);
    if (idle) return idle;
    if (this.workers.length < this.size) {
      const w = new Worker(WORKER, { eval: true });
      w.unref();
      w.on("message", (m: { id: number; md5?: Uint8Array; bytes?: ArrayBuffer; error?: string }) => {
        const job = this.jobs.get(m.id);
        this.jobs.delete(m.id);
        if (!job) return;
        if (m.error !== undefined || !m.bytes || !m.md5) job.reject(new Error(m.error ?? "no bytes"));
        else job.resolve({ body: Buffer.from(m.bytes), md5: Buffer.from(m.md5) });
      });
      w.on("error", (e) => { for (const j of this.jobs.values()) j.reject(e); this.jobs.clear(); });
      const s = { w, busy: 0 };
      this.workers.push(s);
      return s;
    }
    return this.workers.reduce((a, b) => (b.busy < a.busy ? b : a));
  }
}
