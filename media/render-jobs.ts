/**
 * Render jobs: `POST /v1/visualizations/render` hands a job here and answers 202 at once.
 * Records live in the object store under `_system/` (any replica reads any job); the replica
 * that accepted a job holds it: it waits for a slot of the organization's limit (a render is
 * a compute task like a tool run), renders in a worker thread with a memory cap and a
 * deadline, writes the image and the TSV of the data drawn without overwriting anything, and
 * heartbeats the record meanwhile. A job whose holder stopped is read as `failed`
 * (plots/render-job.ts) and written so by the next sweep of any replica.
 */
import { randomBytes } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { Worker } from "node:worker_threads";
import { Counter, Histogram, type Registry } from "prom-client";
import { ulid } from "../core/ids.js";
import { RENDER_ACTIVE_PREFIX, renderActiveKey, renderJobKey, renderJobsPrefix, workspaceRoot } from "../core/layout.js";
import { StoreError, type Clock, type ObjectStore, type SlotGate } from "../core/ports.js";
import { DEFAULT_SIZE, FILE_OPTIONS, type PlotType } from "../plots/options.js";
import { candidateStem, effectiveJob, HEARTBEAT_MS, outputStem, type OutputFormat, type RenderJobRecord } from "../plots/render-job.js";
import { sanitizeMessage } from "../core/redact.js";
import { readJson, updateJson, writeJson } from "../adapters/json-store.js";
import type { RenderResult, RenderTask } from "./charts/render-worker.js";
import { messageOf, OperonError } from "../core/errors.js";


export interface RenderJobsDeps {
  store: ObjectStore;
  clock: Clock;
  slots: SlotGate;
  /** This process, as the holder written into the jobs it runs. */
  instance?: string;
  /** Worker threads at once on this server (default: the CPUs). */
  workers?: number;
  /** A render taking longer than this fails (default 10 minutes). */
  timeoutMs?: number;
  /** Heap limit of a render worker, MB (default 2048). */
  workerHeapMb?: number;
  metrics?: Registry;
  log?: (msg: string) => void;
}

export interface SubmitRender {
  organization: string; workspace: string; keyId: string;
  type: PlotType; filePath: string; options: Record<string, unknown>;
  format: OutputFormat; outputFolder: string;
}

const CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz";
/** Each character mirrored in the alphabet: key order becomes newest first. */
const invert = (s: string) => [...s].map((c) => CROCKFORD[31 - CROCKFORD.indexOf(c)] ?? c).join("");
const jobKey = (org: string, ws: string, id: string) => renderJobKey(org, ws, invert(id.slice("render-".length)));
const workerUrl = new URL(`./charts/render-worker${import.meta.url.endsWith(".ts") ? ".ts" : ".js"}`, import.meta.url);

export class RenderJobs {
  readonly instance: string;
  private readonly held = new Map<string, { abort: AbortController; worker?: Worker }>();
  private readonly waiting: Array<() => void> = [];
  private busy = 0;
  private readonly maxWorkers: number;
  private sweeper: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly total: Counter | undefined;
  private readonly seconds: Histogram | undefined;

  constructor(private readonly deps: RenderJobsDeps) {
    this.instance = deps.instance ?? `api-${randomBytes(6).toString("hex")}`;
    this.maxWorkers = Math.max(1, deps.workers ?? availableParallelism());
    if (deps.metrics) {
      this.total = new Counter({ name: "operon_render_jobs_total", help: "Render jobs finished, by plot type and status", labelNames: ["type", "status"], registers: [deps.metrics] });
      this.seconds = new Histogram({ name: "operon_render_duration_seconds", help: "From a render's start (slot taken) to its result", labelNames: ["type"], buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300], registers: [deps.metrics] });
    }
  }

  private now = () => new Date(this.deps.clock.now()).toISOString();
  private log = (m: string) => this.deps.log?.(m);

  /** Accept a job: its record is written (queued) before this returns; it runs in the background. */
  async submit(s: SubmitRender): Promise<RenderJobRecord> {
    if (this.stopped) throw new Error("render jobs are stopping");
    const id = `render-${ulid(this.deps.clock.now(), randomBytes(10))}`;
    const at = this.now();
    const job: RenderJobRecord = {
      job_id: id, organization: s.organization, workspace_id: s.workspace, key_id: s.keyId,
      type: s.type, file_path: s.filePath, options: s.options, output_format: s.format, output_folder: s.outputFolder,
      status: "queued", output_path: null, data_path: null, error: null,
      created_at: at, started_at: null, completed_at: null, owner: { instance: this.instance, heartbeat_at: at }, image: null,
    };
    const key = jobKey(s.organization, s.workspace, id);
    await writeJson(this.deps.store, key, job, true);
    await this.deps.store.put(renderActiveKey(id), key, { contentType: "text/plain" });
    void this.hold(job, key);
    return job;
  }

  async get(org: string, ws: string, id: string): Promise<RenderJobRecord | undefined> {
    const job = await readJson<RenderJobRecord>(this.deps.store, jobKey(org, ws, id));
    if (!job || job.organization !== org || job.workspace_id !== ws) return undefined;
    return effectiveJob(job, this.deps.clock.now());
  }

  /** A workspace's jobs, newest first; `cursor` is the last job id of the previous page. */
  async list(org: string, ws: string, limit: number, cursor?: string): Promise<{ items: RenderJobRecord[]; nextCursor: string | null }> {
    const prefix = renderJobsPrefix(org, ws);
    const page = await this.deps.store.list(prefix, { limit, ...(cursor ? { cursor: jobKey(org, ws, cursor) } : {}) });
    const now = this.deps.clock.now();
    const items = (await Promise.all(page.items.map((i) => readJson<RenderJobRecord>(this.deps.store, i.key))))
      .filter((j): j is RenderJobRecord => !!j).map((j) => effectiveJob(j, now));
    const last = items[items.length - 1];
    return { items, nextCursor: page.nextCursor && last ? last.job_id : null };
  }

  /**
   * Write `failed` into jobs whose holder went quiet (any replica may do it, the write is the
   * same), and — at start-up of a single-server install — into this store's jobs held by an
   * earlier process, which cannot still be running.
   */
  async sweep(opts: { previousProcessesAreGone?: boolean } = {}): Promise<number> {
    let n = 0, cursor: string | undefined;
    do {
      const page = await this.deps.store.list(RENDER_ACTIVE_PREFIX, { limit: 500, ...(cursor ? { cursor } : {}) });
      for (const marker of page.items) {
        const id = marker.key.slice(RENDER_ACTIVE_PREFIX.length);
        if (this.held.has(id)) continue;
        const { body } = await this.deps.store.get(marker.key).catch(() => ({ body: undefined }));
        if (!body) continue;
        let key = "";
        for await (const c of body) key += Buffer.from(c).toString("utf8");
        const now = this.deps.clock.now();
        const done = await updateJson<RenderJobRecord>(this.deps.store, key, (j) => {
          if (j.status === "completed" || j.status === "failed") return undefined;
          if (opts.previousProcessesAreGone && j.owner?.instance !== this.instance) {
            return { ...j, status: "failed", completed_at: this.now(), owner: null, error: j.status === "running"
              ? "the server restarted while this job was rendering; submit the render again"
              : "the server restarted before this job could start; submit the render again" };
          }
          const e = effectiveJob(j, now);
          return e.status === "failed" ? { ...e, owner: null } : undefined;
        });
        if (!done || done.status === "completed" || done.status === "failed") {
          if (done?.status === "failed" && done.owner === null) n++;
          await this.deps.store.delete(marker.key).catch(() => undefined);
        }
      }
      cursor = page.nextCursor;
    } while (cursor);
    return n;
  }

  /** Sweep now (at start-up) and then every heartbeat period. */
  async start(opts: { previousProcessesAreGone?: boolean } = {}): Promise<void> {
    const n = await this.sweep(opts);
    if (n) this.log(`render jobs: ${n} left unfinished by a stopped server marked failed`);
    this.sweeper = setInterval(() => { this.sweep().catch((e: unknown) => this.log(`render sweep: ${messageOf(e)}`)); }, HEARTBEAT_MS * 3);
    this.sweeper.unref();
  }

  /** Stop: jobs this server holds end `failed` (they would otherwise wait for the heartbeat timeout). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.sweeper) clearInterval(this.sweeper);
    for (const h of this.held.values()) { h.abort.abort(); void h.worker?.terminate(); }
    // Real time, not the injected clock: this waits on the workers' own ends.
    const deadline = performance.now() + 5000;
    while (this.held.size && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  }

  /** Jobs this server holds now (for tests and metrics). */
  get holding(): number { return this.held.size; }

  private async hold(job: RenderJobRecord, key: string): Promise<void> {
    const abort = new AbortController();
    const h: { abort: AbortController; worker?: Worker } = { abort };
    this.held.set(job.job_id, h);
    let cur = job;
    let chain = Promise.resolve();
    const write = (change: (j: RenderJobRecord) => RenderJobRecord) => {
      chain = chain.then(async () => {
        const next = await updateJson<RenderJobRecord>(this.deps.store, key, (j) => (j.status === "completed" || j.status === "failed") ? undefined : change(j));
        if (next) cur = next;
      }).catch((e: unknown) => this.log(`render ${job.job_id}: writing its record failed: ${messageOf(e)}`));
      return chain;
    };
    const beat = setInterval(() => { void write((j) => ({ ...j, owner: { instance: this.instance, heartbeat_at: this.now() } })); }, HEARTBEAT_MS);
    beat.unref();
    let release: (() => void) | undefined;
    let started: number | undefined;
    const finish = async (patch: Partial<RenderJobRecord>) => {
      const status = patch.status ?? "failed";
      await write((j) => ({ ...j, ...patch, status, completed_at: this.now(), owner: null }));
      this.total?.inc({ type: job.type, status });
      if (started !== undefined) this.seconds?.observe({ type: job.type }, (performance.now() - started) / 1000);
    };
    let dir: string | undefined;
    try {
      release = await this.deps.slots(job.organization, job.job_id, abort.signal, "render");
      await this.workerSlot(abort.signal);
      started = performance.now();
      await write((j) => ({ ...j, status: "running", started_at: this.now(), owner: { instance: this.instance, heartbeat_at: this.now() } }));
      dir = await mkdtemp(join(tmpdir(), "operon-render-"));
      const task = await this.stage(cur, dir);
      const result = await this.runWorker(task, h, abort.signal);
      if (!result.ok) {
        await finish({ status: "failed", error: result.data ? result.error : `the render failed: ${sanitizeMessage(result.error.split(dir).join("…"))}` });
        return;
      }
      const out = await this.publish(cur, result);
      await finish({ status: "completed", output_path: out.image, data_path: out.data, error: null, image: { width: result.width, height: result.height, bytes: result.image.byteLength } });
    } catch (e) {
      const msg = abort.signal.aborted ? "the server stopped before this render finished; submit it again"
        : e instanceof RenderInputError ? e.message : `the render failed: ${sanitizeMessage(messageOf(e))}`;
      await finish({ status: "failed", error: msg });
    } finally {
      clearInterval(beat);
      release?.();
      if (started) { this.busy--; this.waiting.shift()?.(); }
      if (dir) await rm(dir, { recursive: true, force: true }).catch(() => undefined);
      await chain;
      await this.deps.store.delete(renderActiveKey(job.job_id)).catch(() => undefined);
      this.held.delete(job.job_id);
    }
  }

  private async workerSlot(signal: AbortSignal): Promise<void> {
    while (this.busy >= this.maxWorkers) {
      await new Promise<void>((resolve, reject) => {
        this.waiting.push(resolve);
        signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true });
      });
    }
    this.busy++;
  }

  /** Local paths for the worker: the store's own file where it has one, else a download into `dir`. */
  private async stage(job: RenderJobRecord, dir: string): Promise<RenderTask> {
    const root = workspaceRoot(job.organization, job.workspace_id);
    const local = async (rel: string, name: string, what: string): Promise<string> => {
      const key = root + rel;
      const p = this.deps.store.localPath?.(key);
      if (p) {
        if (!(await this.deps.store.head(key))) throw new RenderInputError("not_found", `${what} ${JSON.stringify(rel)} is no longer in the workspace`);
        return p;
      }
      try {
        const { body } = await this.deps.store.get(key);
        const dest = join(dir, name);
        await pipeline(Readable.from(body as AsyncIterable<Uint8Array>), createWriteStream(dest));
        return dest;
      } catch (e) {
        if (e instanceof StoreError && e.code === "NotFound") throw new RenderInputError("not_found", `${what} ${JSON.stringify(rel)} is no longer in the workspace`);
        throw e;
      }
    };
    const base = job.file_path.split("/").pop() ?? "input";
    const inputs: RenderTask["inputs"] = { primary: await local(job.file_path, `in-${base}`, "the file") };
    for (const opt of FILE_OPTIONS[job.type]) {
      const rel = job.options[opt];
      if (typeof rel !== "string") continue;
      const p = await local(rel, `${opt}-${rel.split("/").pop() ?? opt}`, `options.${opt}`);
      if (opt === "sample_sheet") inputs.sheet = p;
      if (opt === "annotation") inputs.annotation = p;
    }
    if (job.type === "coverage_track" && /\.bam$/i.test(job.file_path)) {
      for (const idx of [`${job.file_path}.bai`, job.file_path.replace(/\.bam$/i, ".bai")]) {
        if (await this.deps.store.head(root + idx)) { inputs.bamIndex = await local(idx, `in-${base}.bai`, "the index"); break; }
      }
    }
    const size = DEFAULT_SIZE[job.type];
    const o = job.options;
    const frame = { width: typeof o.width === "number" ? o.width : size.width, height: typeof o.height === "number" ? o.height : size.height, source: base, ...(typeof o.title === "string" ? { title: o.title } : {}) };
    return { type: job.type, options: job.options, frame, format: job.output_format, inputs, workDir: dir };
  }

  private runWorker(task: RenderTask, h: { worker?: Worker }, signal: AbortSignal): Promise<RenderResult> {
    return new Promise((resolve) => {
      const w = new Worker(workerUrl, { workerData: { operonRender: true }, resourceLimits: { maxOldGenerationSizeMb: this.deps.workerHeapMb ?? 2048 }, stdout: false, stderr: false });
      h.worker = w;
      let settled = false;
      const done = (r: RenderResult) => { if (settled) return; settled = true; clearTimeout(timer); void w.terminate(); resolve(r); };
      const limit = this.deps.timeoutMs ?? 10 * 60_000;
      const timer = setTimeout(() => done({ ok: false, data: true, error: `the render took longer than ${Math.round(limit / 1000)} s and was stopped` }), limit);
      signal.addEventListener("abort", () => done({ ok: false, data: true, error: "the server stopped before this render finished; submit it again" }), { once: true });
      w.on("message", (r: RenderResult) => done(r));
      w.on("error", (e: Error & { code?: string }) => done(e.code === "ERR_WORKER_OUT_OF_MEMORY"
        ? { ok: false, data: true, error: `the render ran out of memory (${this.deps.workerHeapMb ?? 2048} MB); the file is too large for this plot` }
        : { ok: false, data: false, error: e.message }));
      w.on("exit", (code) => done({ ok: false, data: false, error: `the render worker exited (code ${code}) without a result` }));
      w.postMessage(task);
    });
  }

  /** The image and its TSV under the first free name in the output folder — never over an existing file. */
  private async publish(job: RenderJobRecord, r: Extract<RenderResult, { ok: true }>): Promise<{ image: string; data: string }> {
    const root = workspaceRoot(job.organization, job.workspace_id);
    const stem = outputStem(job.file_path, job.type);
    const type = job.output_format === "png" ? "image/png" : "image/svg+xml";
    for (let n = 1; n < 1000; n++) {
      const name = `${job.output_folder}${candidateStem(stem, n)}`;
      const image = `${name}.${job.output_format}`, data = `${name}.tsv`;
      if (await this.deps.store.head(root + data)) continue;
      try {
        await this.deps.store.put(root + image, r.image, { contentType: type, ifNoneMatch: "*" });
      } catch (e) {
        if (e instanceof StoreError && e.code === "PreconditionFailed") continue;
        throw e;
      }
      try {
        await this.deps.store.put(root + data, r.tsv, { contentType: "text/tab-separated-values; charset=utf-8", ifNoneMatch: "*" });
      } catch (e) {
        await this.deps.store.delete(root + image).catch(() => undefined);
        if (e instanceof StoreError && e.code === "PreconditionFailed") continue;
        throw e;
      }
      return { image, data };
    }
    throw new RenderInputError("conflict", `no free file name for ${stem} in ${job.output_folder || "the workspace root"}`);
  }
}

/**
 * A problem with the job's inputs or outputs found while staging them (an input gone:
 * `not_found`; no free output name: `conflict`): its message is the job's error as is.
 */
class RenderInputError extends OperonError {}
