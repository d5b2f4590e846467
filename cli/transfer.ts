/**
 * Moving files of any size between this machine and an Operon server, for `operon files
 * upload` and `operon files download` (cli/files.ts holds the commands and the small-file form
 * upload). A module of its own because a transfer of gigabytes is more than one request: it is
 * cut in pieces sent in parallel, survives a dropped connection (each piece is retried) and an
 * interruption (a rerun resumes), and shows its progress.
 *
 * Uploads by parts (the multipart flow of docs/api.md): POST /v1/files/upload-url with
 * `multipart: true`, each part's bytes PUT to its presigned URL (never with the API key) with
 * its Content-MD5 and exact Content-Length, the answer's ETag checked against that MD5, then
 * POST /v1/files/upload-confirm with every part's etag. Parts are 16 MiB unless asked
 * otherwise. At most `parallel` parts are in flight, each read from disk into memory with its
 * MD5 by a worker thread (cli/part-reader.ts; parts over 64 MiB are streamed twice from disk
 * instead: once for the MD5, once to send them), so memory stays within parallel × 64 MiB and
 * the sockets are never held up by hashing. Presigned requests go through node:http
 * (cli/http-fetch.ts). URLs of parts past
 * the first 1,000, or that expired (403), come from POST /v1/files/upload-parts.
 *
 * Resuming an upload: a state file per upload in $XDG_STATE_HOME/operon/uploads/ (else
 * ~/.local/state/operon/uploads/), named by a hash of the server, the workspace, the local
 * file's absolute path and where it goes, holds the upload id and the file's size and mtime
 * (another size or mtime: the old upload is aborted and a new one begun). Next to it,
 * `<id>.parts` logs the MD5 of each part as the storage acknowledged it. On a rerun, GET
 * /v1/files/upload-parts lists the parts the storage has: one is trusted when its size is the
 * part's size and its etag is the MD5 logged for it, or, for a part received but never logged
 * (the CLI was killed before it read the answer), the MD5 of the local slice, read again. Every
 * other part is sent (again). The state goes once the upload is confirmed, or the server no
 * longer knows the upload (404: it starts over).
 *
 * Downloads by ranges: GET /v1/files/download for the presigned link, the file's size, date
 * and sha256 from the listing, then ranges of 64 MiB fetched `parallel` at once into
 * `.NAME.<id>.part` next to the target, with a sidecar `.NAME.<id>.part.json` naming the file
 * (key, size, last_modified) and the ranges written (flushed to disk first). A rerun with the
 * same sidecar fetches only the missing ranges; another file under the key starts over. Once
 * complete, the size and the sha256 (against the listing's, when known) are checked, and the
 * partial file renamed to the target. An interrupted download keeps the partial file only
 * when a range is complete: there is something to resume; never anything under the target's name.
 *
 * Ctrl-C (SIGINT) or SIGTERM: in-flight requests are aborted, no upload is confirmed, the state
 * is kept, and the command exits 130 saying how to resume (`Interrupted`).
 */
import { createHash } from "node:crypto";
import { createReadStream, openAsBlob } from "node:fs";
import { appendFile, mkdir, open, readFile, rename, rm, stat, writeFile, type FileHandle } from "node:fs/promises";
import { homedir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { pipeline } from "node:stream/promises";
import { setTimeout as delay } from "node:timers/promises";
import type { CliIO } from "./program.js";
import { ConnectionError, ServerError, causeOf, query, type ApiClient, type Page } from "./client.js";
import { humanSize } from "./output.js";
import { messageOf } from "../core/errors.js";
import { PartReader } from "./part-reader.js";
import { plainEtag } from "../core/multipart.js";

const MiB = 1024 ** 2;
export const DEFAULT_PARALLEL = 4;
/** Files larger than this go by parts (the form upload is one request, with no resume). */
export const DEFAULT_PART_THRESHOLD = 100 * MiB;
export const DEFAULT_RANGE_BYTES = 64 * MiB;
/** Parts up to this size are read into memory once; larger ones are streamed from disk. */
const BUFFERED_PART_BYTES = 64 * MiB;
const DEFAULT_PART_BYTES = 16 * MiB;
/** Tries of one part or range (the first included) before the transfer fails. */
const ATTEMPTS = 4;
const URLS_PER_REQUEST = 1000;
/** Progress redraws at most this often. */
const REDRAW_MS = 100;

/** A file as the API shows it. */
export interface FileView { name: string; key: string; size: number; content_type: string | null; last_modified: string; sha256: string | null; description?: string }

/** The CLI's output, plus (like run.ts's RunIO) whether stderr is a terminal and a way to write there without a newline. */
export type TransferIO = CliIO & { errIsTTY?: boolean; errRaw?(s: string): void };

/** A transfer stopped by SIGINT or SIGTERM; the message says what was kept (exit 130). */
export class Interrupted extends Error {}

/** What a transfer works with. */
export interface Transfer {
  client: ApiClient;
  /** For presigned URLs, which never get the API key. */
  fetch: typeof fetch;
  env: NodeJS.ProcessEnv;
  /** Aborted by SIGINT or SIGTERM. */
  signal: AbortSignal;
  progress: Progress;
  /** A line on stderr (the progress line cleared first). */
  note(line: string): void;
  /** Parts or ranges in flight at once. */
  parallel: number;
}

/** Runs `fn` with a signal that SIGINT or SIGTERM aborts; the handlers are removed afterwards. */
export async function interruptible<T>(fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const abort = new AbortController();
  const stop = () => abort.abort(new Interrupted("interrupted"));
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  try {
    return await fn(abort.signal);
  } finally {
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
  }
}

/**
 * Bytes done of a file, its rate and ETA, as one line on stderr redrawn in place (\r) at most
 * every 100 ms, when stderr is a terminal; nothing otherwise (the command prints one line per
 * file when it is done).
 */
export class Progress {
  private label = "";
  private total = 0;
  private done = 0;
  private atStart = 0;
  private started = 0;
  private drawn = 0;
  private shown = false;
  readonly tty: boolean;
  private readonly raw: (s: string) => void;

  constructor(io: TransferIO, private readonly now: () => number = Date.now) {
    this.tty = io.errIsTTY ?? process.stderr.isTTY === true;
    this.raw = io.errRaw ?? ((s) => { process.stderr.write(s); });
  }

  /** A new file of `total` bytes, `already` of them there before this run. */
  begin(label: string, total: number, already: number): void {
    Object.assign(this, { label, total, done: already, atStart: already, started: this.now(), drawn: 0 });
    this.draw(true);
  }

  add(bytes: number): void {
    this.done += bytes;
    this.draw(this.done === this.total);
  }

  /** Erases the line (before other output, and when the file is done). */
  clear(): void {
    if (this.shown) this.raw("\r\x1b[K");
    this.shown = false;
  }

  /** `name  1.2 GB / 4.0 GB  30%  85 MB/s  ETA 0:33`. */
  line(at = this.now()): string {
    const seconds = Math.max((at - this.started) / 1000, 0.001);
    const rate = (this.done - this.atStart) / seconds;
    const pct = this.total > 0 ? Math.floor((100 * this.done) / this.total) : 100;
    const eta = rate > 0 ? clock((this.total - this.done) / rate) : "--:--";
    const name = this.label.length > 32 ? `…${this.label.slice(-31)}` : this.label;
    return `${name}  ${humanSize(this.done)} / ${humanSize(this.total)}  ${pct}%  ${humanSize(Math.round(rate))}/s  ETA ${eta}`;
  }

  private draw(force: boolean): void {
    if (!this.tty) return;
    const at = this.now();
    if (!force && at - this.drawn < REDRAW_MS) return;
    this.drawn = at;
    this.raw(`\r\x1b[K${this.line(at)}`);
    this.shown = true;
  }
}

/** 75 → `1:15`, 3725 → `1:02:05`. */
function clock(seconds: number): string {
  const s = Math.ceil(seconds);
  const two = (n: number) => String(n).padStart(2, "0");
  return s >= 3600 ? `${Math.floor(s / 3600)}:${two(Math.floor(s / 60) % 60)}:${two(s % 60)}` : `${Math.floor(s / 60)}:${two(s % 60)}`;
}

/** A failure worth another try (a dropped connection, a 5xx, an expired URL): `error` is what to report when the tries are spent. */
class Transient extends Error {
  constructor(readonly error: Error) { super(error.message); }
}

/** `fn` again after a failure that is Transient, up to ATTEMPTS tries, waiting 0.25 s, 0.5 s, 1 s between them. */
async function retrying<T>(signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (e) {
      if (signal.aborted) throw signal.reason;
      if (!(e instanceof Transient)) throw e;
      if (attempt >= ATTEMPTS) throw e.error;
      await delay(250 * 2 ** (attempt - 1), undefined, { signal }).catch(() => { throw signal.reason; });
    }
  }
}

/**
 * `work` on every item, `width` at once. The first failure stops the rest (their requests are
 * aborted) and is thrown; when `signal` is aborted, its reason is.
 */
async function pool<T>(items: readonly T[], width: number, signal: AbortSignal, work: (item: T, signal: AbortSignal) => Promise<void>): Promise<void> {
  const failed = new AbortController();
  const both = AbortSignal.any([signal, failed.signal]);
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async () => {
    while (!both.aborted && next < items.length) {
      const item = items[next++] as T;
      try {
        await work(item, both);
      } catch (e) {
        if (!signal.aborted && !failure) { failure = { error: e }; failed.abort(); }
        return;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
  if (signal.aborted) throw signal.reason;
  if (failure) throw failure.error;
}

/** A request to a presigned URL (no API key); a transport failure is Transient. */
async function fetchPresigned(t: Transfer, url: string, init: RequestInit, what: string): Promise<Response> {
  try {
    return await t.fetch(url, init);
  } catch (e) {
    if (init.signal?.aborted) throw e;
    throw new Transient(new ConnectionError(`${what}: ${causeOf(e)}`));
  }
}

/** The storage's refusal as an error (the S3 code or the API's, when the body has one): Transient unless 404, 410 or 416. */
async function refusal(res: Response, what: string): Promise<Error> {
  const text = await res.text().catch(() => "");
  let code = /<Code>([^<]+)<\/Code>/.exec(text)?.[1];
  try { code ??= (JSON.parse(text) as { error?: unknown }).error as string | undefined; } catch { /* not JSON */ }
  const error = new ServerError(res.status, typeof code === "string" ? code : undefined, `${what}: the storage answered HTTP ${res.status}${typeof code === "string" ? ` (${code})` : ""}`);
  return [404, 410, 416].includes(res.status) ? error : new Transient(error);
}


/** Writes JSON through a temporary file renamed into place: a reader sees the old or the new, never half. */
async function writeJsonAtomic(path: string, value: unknown): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, JSON.stringify(value), { mode: 0o600 });
  await rename(tmp, path);
}

async function readJsonFile<T>(path: string): Promise<T | undefined> {
  try { return JSON.parse(await readFile(path, "utf8")) as T; } catch { return undefined; }
}

/** The file `key` of `workspace` as the listing shows it (size, date, sha256), or undefined. */
export async function fileOf(client: ApiClient, workspace: string, key: string): Promise<FileView | undefined> {
  // In key order a key comes before every longer key it is a prefix of: the first page holds it.
  const page = await client.json<Page<FileView>>("GET", "/v1/files" + query({ workspace_id: workspace, prefix: key, limit: 10 }));
  return page.data.find((f) => f.key === key);
}

/** Polls the listing until the server has computed `key`'s sha256 (in the background, after an upload by parts). */
export async function waitChecksum(t: Transfer, workspace: string, key: string): Promise<FileView> {
  for (let wait = 250; ; wait = Math.min(wait * 2, 5000)) {
    const f = await fileOf(t.client, workspace, key);
    if (!f) throw new ServerError(404, "not_found", `${key}: no longer in workspace ${workspace} (not_found)`);
    if (f.sha256) return f;
    await delay(wait, undefined, { signal: t.signal }).catch(() => {
      throw new Interrupted(`${key} is uploaded; its sha256 was not computed yet (see operon files ls --prefix ${key} --json)`);
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Uploads by parts

/** One file to upload: where it is, its size and mtime, and where it goes. */
export interface UploadRequest { local: string; size: number; mtimeMs: number; name: string; workspace: string; folder?: string; description?: string }

/** What a rerun needs to resume an upload, kept in the state file. */
interface UploadState {
  version: 1;
  server: string;
  workspace: string;
  local: string;
  folder: string | null;
  name: string;
  size: number;
  mtimeMs: number;
  uploadId: string;
  fileKey: string;
  partSize: number;
  partCount: number;
  createdAt: string;
}

type Shape = Pick<UploadState, "size" | "partSize" | "partCount">;

/** Part `n`'s bytes of the file: [start, end). */
function partBounds(s: Shape, n: number): { start: number; end: number } {
  const start = (n - 1) * s.partSize;
  return { start, end: n < s.partCount ? start + s.partSize : s.size };
}

/** Where `$XDG_STATE_HOME/operon/uploads/` is (else `~/.local/state/operon/uploads/`). */
export function uploadStateDir(env: NodeJS.ProcessEnv): string {
  return join(env.XDG_STATE_HOME || join(env.HOME || homedir(), ".local", "state"), "operon", "uploads");
}

/**
 * An upload's state file and its parts log. A state that cannot be written is not fatal: the
 * upload goes on, told once that an interruption would start it over.
 */
class UploadStateFiles {
  readonly json: string;
  readonly log: string;
  private warned = false;

  constructor(private readonly t: Transfer, req: UploadRequest) {
    const id = createHash("sha256").update(JSON.stringify([t.client.conn.base, req.workspace, resolve(req.local), req.folder ?? "", req.name])).digest("hex").slice(0, 32);
    this.json = join(uploadStateDir(t.env), `${id}.json`);
    this.log = join(uploadStateDir(t.env), `${id}.parts`);
  }

  load(): Promise<UploadState | undefined> {
    return readJsonFile<UploadState>(this.json);
  }

  /** The MD5s logged per part number. */
  async logged(): Promise<Map<number, string>> {
    const text = await readFile(this.log, "utf8").catch(() => "");
    const m = new Map<number, string>();
    for (const line of text.split("\n")) {
      const [n, md5] = line.split(" ");
      if (n && md5 && /^[0-9a-f]{32}$/.test(md5)) m.set(Number(n), md5);
    }
    return m;
  }

  async save(s: UploadState): Promise<void> {
    await this.kept(async () => {
      await mkdir(dirname(this.json), { recursive: true, mode: 0o700 });
      await rm(this.log, { force: true });
      await writeJsonAtomic(this.json, s);
    });
  }

  logPart(n: number, md5: string): Promise<void> {
    return this.kept(() => appendFile(this.log, `${n} ${md5}\n`, { mode: 0o600 }));
  }

  async remove(): Promise<void> {
    await rm(this.json, { force: true });
    await rm(this.log, { force: true });
  }

  private async kept(write: () => Promise<void>): Promise<void> {
    try { await write(); } catch (e) {
      if (!this.warned) this.t.note(`cannot keep the upload's state in ${dirname(this.json)} (${messageOf(e)}): an interrupted upload will start over`);
      this.warned = true;
    }
  }
}

/** Part URLs: the ones given, more through POST /v1/files/upload-parts (parts past the first 1,000, expired ones). */
class PartUrls {
  private refreshing: Promise<void> | undefined;

  constructor(private readonly t: Transfer, private readonly s: UploadState, private readonly urls: Map<number, string>, private readonly pending: () => number[]) {}

  async get(n: number): Promise<string> {
    for (let tries = 0; tries < 3; tries++) {
      const url = this.urls.get(n);
      if (url !== undefined) return new URL(url, this.t.client.conn.base).href;
      this.refreshing ??= this.refresh(n).finally(() => { this.refreshing = undefined; });
      await this.refreshing;
    }
    throw new ConnectionError(`POST /v1/files/upload-parts gave no URL for part ${n}`);
  }

  /** A 403 from `url`: URLs are issued together and expire together, so every one is asked again. */
  expire(url: string): void {
    if ([...this.urls.values()].some((u) => new URL(u, this.t.client.conn.base).href === url)) this.urls.clear();
  }

  private async refresh(n: number): Promise<void> {
    const numbers = [n, ...this.pending().filter((p) => p !== n && !this.urls.has(p))].slice(0, URLS_PER_REQUEST);
    const got = await this.t.client.data<{ parts: Array<{ partNumber: number; uploadUrl: string }> }>("POST", "/v1/files/upload-parts", {
      body: { workspace_id: this.s.workspace, upload_id: this.s.uploadId, part_numbers: numbers },
    });
    for (const p of got.parts) this.urls.set(p.partNumber, p.uploadUrl);
  }
}

async function md5Of(b: Blob): Promise<Buffer> {
  const h = createHash("md5");
  const reader = b.stream().getReader();
  for (let r = await reader.read(); !r.done; r = await reader.read()) h.update(r.value);
  return h.digest();
}

/** Workers reading parts and their MD5 (cli/part-reader.ts), shared by every upload of this process. */
const reader = new PartReader(4);

/** A part's bytes (in memory up to 64 MiB, else a slice of the file read as it is sent) and its MD5. */
async function partBytes(file: Blob, local: string, start: number, end: number): Promise<{ body: Buffer | Blob; md5: Buffer }> {
  try {
    if (end - start > BUFFERED_PART_BYTES) { const slice = file.slice(start, end); return { body: slice, md5: await md5Of(slice) }; }
    return await reader.read(local, start, end);
  } catch (e) {
    throw new Error(`${local}: cannot read (${messageOf(e)}; was it changed while uploading?)`, { cause: e });
  }
}

interface PartsUpload { req: UploadRequest; state: UploadState; file: Blob; urls: PartUrls; done: Map<number, string>; files: UploadStateFiles }

/** One try of PUTting part `n`: its MD5 hex, the ETag the storage acknowledged it with. */
async function putPart(t: Transfer, u: PartsUpload, n: number, signal: AbortSignal): Promise<string> {
  const { start, end } = partBounds(u.state, n);
  const { body, md5 } = await partBytes(u.file, u.req.local, start, end);
  const what = `${u.req.local}: part ${n}`;
  const url = await u.urls.get(n);
  // The bytes as they are (a Buffer, or a Blob that fetch streams from the file): a body
  // stream of our own would cost more CPU than the MD5. Progress counts a part once stored.
  const res = await fetchPresigned(t, url, {
    method: "PUT", body, signal,
    headers: { "content-length": String(end - start), "content-md5": md5.toString("base64") },
  } as RequestInit, what);
  if (res.status === 403) u.urls.expire(url);
  if (!res.ok) throw await refusal(res, what);
  await res.body?.cancel();
  const etag = plainEtag(res.headers.get("etag") ?? "");
  if (etag !== md5.toString("hex")) throw new Transient(new ConnectionError(`${what}: the storage acknowledged it with ETag ${etag || "(none)"}, not its MD5 ${md5.toString("hex")}`));
  t.progress.add(end - start);
  return etag;
}

/** The parts the server has that can be trusted (see the module's comment), or undefined when the upload is gone. */
async function receivedParts(t: Transfer, u: Omit<PartsUpload, "urls" | "done">): Promise<Map<number, string> | undefined> {
  let listed: Shape & { parts: Array<{ partNumber: number; size: number; etag: string }> };
  try {
    listed = await t.client.data("GET", "/v1/files/upload-parts" + query({ workspace_id: u.state.workspace, upload_id: u.state.uploadId }));
  } catch (e) {
    if (e instanceof ServerError && e.status === 404) return undefined;
    throw e;
  }
  if (listed.size !== u.req.size) return undefined;
  Object.assign(u.state, { partSize: listed.partSize, partCount: listed.partCount });
  const logged = await u.files.logged();
  const done = new Map<number, string>();
  for (const p of listed.parts) {
    const etag = plainEtag(p.etag);
    const { start, end } = partBounds(u.state, p.partNumber);
    if (p.partNumber < 1 || p.partNumber > u.state.partCount || p.size !== end - start) continue;
    if (logged.get(p.partNumber) === etag || (await partBytes(u.file, u.req.local, start, end)).md5.toString("hex") === etag) done.set(p.partNumber, etag);
  }
  return done;
}

/**
 * Parts of 16 MiB unless asked otherwise (grown to stay within 10,000 parts): small enough
 * that four in flight keep the link busy while the next ones are read and hashed.
 */
const defaultPartSize = (size: number) => Math.max(DEFAULT_PART_BYTES, Math.ceil(size / 10_000 / MiB) * MiB);

/** POST /v1/files/upload-url with multipart: the upload's state (saved) and its first part URLs. */
async function beginUpload(t: Transfer, req: UploadRequest, files: UploadStateFiles, partSize: number | undefined): Promise<{ state: UploadState; urls: Map<number, string> }> {
  const a = await t.client.data<{ uploadId?: unknown; fileKey: string; partSize: number; partCount: number; parts?: Array<{ partNumber: number; uploadUrl: string }> }>("POST", "/v1/files/upload-url", {
    body: { workspace_id: req.workspace, filename: req.name, size: req.size, multipart: true, ...(req.folder !== undefined ? { path: req.folder } : {}), ...(partSize !== undefined ? { part_size: partSize } : {}), ...(req.description !== undefined ? { description: req.description } : {}) },
  });
  if (typeof a.uploadId !== "string" || !Array.isArray(a.parts)) {
    throw new ConnectionError(`${t.client.conn.base} does not take uploads by parts (POST /v1/files/upload-url answered no uploadId): files over its form upload limit cannot be sent to it`);
  }
  const state: UploadState = {
    version: 1, server: t.client.conn.base, workspace: req.workspace, local: resolve(req.local), folder: req.folder ?? null, name: req.name,
    size: req.size, mtimeMs: req.mtimeMs, uploadId: a.uploadId, fileKey: a.fileKey, partSize: a.partSize, partCount: a.partCount, createdAt: new Date().toISOString(),
  };
  await files.save(state);
  return { state, urls: new Map(a.parts.map((p) => [p.partNumber, p.uploadUrl])) };
}

/** The saved upload of this file, with the parts it has, when it can be resumed; otherwise undefined (a stale one aborted, its state removed). */
async function resumable(t: Transfer, req: UploadRequest, file: Blob, files: UploadStateFiles): Promise<{ state: UploadState; done: Map<number, string> } | undefined> {
  const state = await files.load();
  if (!state) return undefined;
  if (state.version === 1 && state.size === req.size && state.mtimeMs === req.mtimeMs) {
    const done = await receivedParts(t, { req, state, file, files });
    if (done) return { state, done };
  } else {
    // The file changed since: its old upload will never be confirmed.
    await t.client.data("POST", "/v1/files/upload-abort", { body: { workspace_id: state.workspace, upload_id: state.uploadId } }).catch(() => undefined);
  }
  await files.remove();
  return undefined;
}

/** Sends `req` by parts, resuming the upload an earlier run left (see the module's comment). */
export async function uploadByParts(t: Transfer, req: UploadRequest, o: { partSize?: number } = {}): Promise<FileView> {
  const files = new UploadStateFiles(t, req);
  let file: Blob;
  try { file = await openAsBlob(req.local); } catch (e) { throw new Error(`${req.local}: cannot read (${messageOf(e)})`, { cause: e }); }
  const resumed = await resumable(t, req, file, files);
  const { state, urls } = resumed ? { state: resumed.state, urls: new Map<number, string>() } : await beginUpload(t, req, files, o.partSize ?? defaultPartSize(req.size));
  const done = resumed?.done ?? new Map<number, string>();
  if (resumed) t.note(`resuming ${req.local}: ${done.size} of ${state.partCount} parts already received`);
  const all = Array.from({ length: state.partCount }, (_, i) => i + 1);
  const pending = all.filter((n) => !done.has(n));
  const u: PartsUpload = { req, state, file, done, files, urls: new PartUrls(t, state, urls, () => all.filter((n) => !done.has(n))) };
  t.progress.begin(req.name, req.size, [...done.keys()].reduce((sum, n) => sum + partBounds(state, n).end - partBounds(state, n).start, 0));
  try {
    await pool(pending, t.parallel, t.signal, async (n, signal) => {
      const etag = await retrying(signal, () => putPart(t, u, n, signal));
      done.set(n, etag);
      await files.logPart(n, etag);
    });
  } catch (e) {
    if (!t.signal.aborted) throw e;
    throw new Interrupted(`${req.local}: ${done.size} of ${state.partCount} parts received and kept; run the same command again to resume`);
  } finally {
    t.progress.clear();
  }
  // Parts are read with plain reads: a file changed meanwhile is caught here, before anything is visible.
  const now = await stat(req.local);
  if (now.size !== req.size || now.mtimeMs !== req.mtimeMs) {
    await t.client.data("POST", "/v1/files/upload-abort", { body: { workspace_id: state.workspace, upload_id: state.uploadId } }).catch(() => undefined);
    await files.remove();
    throw new Error(`${req.local}: changed while it was uploading; nothing was confirmed (run again to send it as it is now)`);
  }
  return confirmParts(t, u);
}

/** POST /v1/files/upload-confirm with every part's etag; the state goes once the upload is confirmed or gone. */
async function confirmParts(t: Transfer, u: PartsUpload): Promise<FileView> {
  const parts = [...u.done].sort((a, b) => a[0] - b[0]).map(([n, etag]) => ({ part_number: n, etag }));
  try {
    const f = await t.client.data<FileView>("POST", "/v1/files/upload-confirm", {
      body: { workspace_id: u.state.workspace, file_key: u.state.fileKey, filename: u.req.name, size: u.req.size, upload_id: u.state.uploadId, parts },
    });
    await u.files.remove();
    return f;
  } catch (e) {
    if (e instanceof ServerError && e.status === 404) await u.files.remove();
    throw e;
  }
}

// ---------------------------------------------------------------------------------------------
// Downloads by ranges

/** What a partial download is of: a sidecar that differs from the file now is not resumed. */
interface DownloadState { version: 1; server: string; workspace: string; key: string; size: number; lastModified: string; rangeSize: number; done: number[] }

/** The presigned link, asked again when it expired (403). */
class Link {
  private url: Promise<string> | undefined;

  constructor(private readonly t: Transfer, private readonly workspace: string, private readonly key: string) {}

  get(): Promise<string> {
    this.url ??= this.t.client.data<{ downloadUrl: string }>("GET", "/v1/files/download" + query({ workspace_id: this.workspace, key: this.key }))
      .then((l) => new URL(l.downloadUrl, this.t.client.conn.base).href);
    this.url.catch(() => { this.url = undefined; });
    return this.url;
  }

  expire(): void { this.url = undefined; }
}

interface Ranged { t: Transfer; key: string; size: number; link: Link; fh: FileHandle }

async function* chunksOf(body: ReadableStream<Uint8Array>, signal: AbortSignal): AsyncGenerator<Uint8Array> {
  const reader = body.getReader();
  const cancel = () => { void reader.cancel().catch(() => undefined); };
  signal.addEventListener("abort", cancel, { once: true });
  try {
    for (;;) {
      if (signal.aborted) throw signal.reason;
      const { done, value } = await reader.read();
      if (signal.aborted) throw signal.reason;
      if (done) return;
      yield value;
    }
  } finally {
    signal.removeEventListener("abort", cancel);
  }
}

/** One try of range [start, end) written in place; a 200 answer stands for a range that is the whole file. */
async function fetchRange(r: Ranged, start: number, end: number, signal: AbortSignal): Promise<void> {
  const { t, key, size } = r;
  const what = `downloading ${key}`;
  let got = 0;
  try {
    const url = await r.link.get();
    const res = await fetchPresigned(t, url, { headers: { range: `bytes=${start}-${end - 1}` }, signal }, what);
    if (res.status === 403) r.link.expire();
    if (!res.ok || !res.body) throw await refusal(res, what);
    const range = res.headers.get("content-range");
    if (res.status === 200 ? start !== 0 || end !== size : range !== `bytes ${start}-${end - 1}/${size}`) {
      await res.body.cancel().catch(() => undefined);
      throw new ConnectionError(`${what}: asked for bytes ${start}-${end - 1} of ${size}, the storage answered ${range ? `bytes ${range}` : `HTTP ${res.status}`} (did the file change? run the command again)`);
    }
    for await (const chunk of chunksOf(res.body, signal)) {
      if (got + chunk.byteLength > end - start) throw new ConnectionError(`${what}: more bytes came than the ${end - start} asked for`);
      await r.fh.write(chunk, 0, chunk.byteLength, start + got);
      got += chunk.byteLength;
      t.progress.add(chunk.byteLength);
    }
    if (got !== end - start) throw new Transient(new ConnectionError(`${what}: ${got} bytes came, not the ${end - start} announced`));
  } catch (e) {
    t.progress.add(-got);
    if (signal.aborted || e instanceof Transient || e instanceof ServerError || e instanceof ConnectionError) throw e;
    throw new Transient(new ConnectionError(`${what}: ${causeOf(e)}`));
  }
}

/** The partial file and its sidecar for `key` downloaded to `target`. */
function partialOf(t: Transfer, workspace: string, key: string, target: string): { part: string; side: string } {
  const id = createHash("sha256").update(JSON.stringify([t.client.conn.base, workspace, key])).digest("hex").slice(0, 12);
  const part = join(dirname(target), `.${basename(target)}.${id}.part`);
  return { part, side: `${part}.json` };
}

/** The ranges already written, when the sidecar is of the same file and the partial file is there; otherwise a fresh partial file. */
async function rangesDone(want: DownloadState, p: { part: string; side: string }): Promise<Set<number>> {
  const had = await readJsonFile<DownloadState>(p.side);
  const size = await stat(p.part).then((s) => s.size, () => -1);
  const same = had && (["version", "server", "workspace", "key", "size", "lastModified", "rangeSize"] as const).every((k) => had[k] === want[k]);
  if (same && size === want.size && Array.isArray(had.done)) return new Set(had.done);
  await rm(p.side, { force: true });
  const fh = await open(p.part, "w", 0o644);
  try { await fh.truncate(want.size); } finally { await fh.close(); }
  return new Set();
}

async function sha256File(path: string, signal: AbortSignal): Promise<string> {
  const hash = createHash("sha256");
  await pipeline(createReadStream(path), hash, { signal });
  return hash.digest("hex");
}

/**
 * Fetches `key` into `target` by ranges, `t.parallel` at once, resuming a partial download an
 * earlier run left (see the module's comment).
 */
export async function downloadByRanges(t: Transfer, workspace: string, key: string, target: string, o: { rangeSize: number }): Promise<{ size: number; sha256: string }> {
  const link = new Link(t, workspace, key);
  await link.get(); // no such file: refused before anything is written
  const file = await fileOf(t.client, workspace, key);
  if (!file) throw new ServerError(404, "not_found", `${key}: not found (not_found)`);
  const p = partialOf(t, workspace, key, target);
  const want: DownloadState = { version: 1, server: t.client.conn.base, workspace, key, size: file.size, lastModified: file.last_modified, rangeSize: o.rangeSize, done: [] };
  let done: Set<number>;
  try { done = await rangesDone(want, p); } catch (e) { throw new ConnectionError(`downloading ${key}: ${causeOf(e)}`); }
  const ranges = Array.from({ length: Math.ceil(file.size / o.rangeSize) }, (_, i) => ({ i, start: i * o.rangeSize, end: Math.min(file.size, (i + 1) * o.rangeSize) }));
  if (done.size > 0) t.note(`resuming ${key}: ${done.size} of ${ranges.length} ranges already in ${p.part}`);
  t.progress.begin(basename(key), file.size, ranges.filter((r) => done.has(r.i)).reduce((s, r) => s + r.end - r.start, 0));
  const fh = await open(p.part, "r+");
  let saving = Promise.resolve();
  try {
    await pool(ranges.filter((r) => !done.has(r.i)), t.parallel, t.signal, async (r, signal) => {
      await retrying(signal, () => fetchRange({ t, key, size: file.size, link, fh }, r.start, r.end, signal));
      await fh.datasync();
      done.add(r.i);
      saving = saving.then(() => writeJsonAtomic(p.side, { ...want, done: [...done].sort((a, b) => a - b) }));
      await saving;
    });
  } catch (e) {
    await fh.close();
    await saving.catch(() => undefined);
    if (done.size === 0) await Promise.all([rm(p.part, { force: true }), rm(p.side, { force: true })]);
    if (!t.signal.aborted) throw e;
    throw new Interrupted(done.size === 0 ? `nothing written to ${target}` : `nothing written to ${target}; ${done.size} of ${ranges.length} ranges kept in ${p.part}: run the same command again to resume`);
  } finally {
    t.progress.clear();
  }
  await fh.close();
  return finishDownload(t, { key, file, target, ...p });
}

/** Checks the complete partial file (size, sha256 against the listing's when known) and renames it to the target. */
async function finishDownload(t: Transfer, d: { key: string; file: FileView; target: string; part: string; side: string }): Promise<{ size: number; sha256: string }> {
  const size = (await stat(d.part)).size;
  if (size !== d.file.size) throw new ConnectionError(`downloading ${d.key}: ${size} bytes written, not the file's ${d.file.size}`);
  let sha256: string;
  try { sha256 = await sha256File(d.part, t.signal); } catch (e) {
    if (t.signal.aborted) throw new Interrupted(`nothing written to ${d.target}; the complete download is kept in ${d.part}: run the same command again to check and finish it`);
    throw e;
  }
  if (d.file.sha256 && sha256 !== d.file.sha256) {
    await Promise.all([rm(d.part, { force: true }), rm(d.side, { force: true })]);
    throw new ConnectionError(`downloading ${d.key}: the bytes' SHA-256 ${sha256} is not the file's ${d.file.sha256}; nothing kept, run the command again`);
  }
  await rename(d.part, d.target);
  await rm(d.side, { force: true });
  return { size, sha256 };
}
