/**
 * Bounded reading of the user files a chart renders. Every reader in this folder goes through
 * here, so a hostile or broken file ends the render with a sentence naming the limit it hit
 * (a `ChartError`, the job's error) instead of exhausting the worker's memory or running until
 * the deadline:
 * - `boundedChunks` / `boundedLines` / `readBounded`: text files, gzipped or not — the bytes
 *   read once decompressed are capped (a gzip bomb stops at the cap), and so is the length of
 *   a line (a file without newlines is never accumulated whole). The counting is the viewers'
 *   (`boundedBytes`, media/readers/bounded.ts); the sentences are a chart's.
 * - `BoundedFile`: the file handle the @gmod BAM and bigWig readers are given — reads past the
 *   end are clipped, one read is capped, a whole-file read of a large file is refused, and the
 *   total read count and bytes are capped (whatever loop a crafted index sends the library
 *   into, it runs out of reads).
 * Row caps stay with their readers (TABLE_MAX_ROWS in render-worker.ts, MAX_MANHATTAN_ROWS).
 * docs/security.md ("Bounds on chart inputs") lists every bound and its value.
 */
import { createReadStream } from "node:fs";
import { open, stat } from "node:fs/promises";
import { StringDecoder } from "node:string_decoder";
import { ChartError } from "../../plots/chart.js";
import { boundedBytes, ReaderError } from "../readers/bounded.js";
import { messageOf } from "../../core/errors.js";

const MB = 1024 * 1024;
const GB = 1024 * MB;

/** A gene table (volcano, heatmap, PCA, pathway) once decompressed: real ones are at most a few hundred MB. */
export const TABLE_MAX_BYTES = 1 * GB;
/** GWAS summary statistics for a Manhattan plot once decompressed (real ones reach 1–2 GB). */
export const MANHATTAN_MAX_BYTES = 4 * GB;
/** A GTF / GFF3 / BED annotation once decompressed (GENCODE's human GTF is about 1.6 GB). */
export const ANNOTATION_MAX_BYTES = 4 * GB;
/** One line (or one quoted record) of a text input. A matrix of 100,000 samples has lines of about 1 MB. */
export const LINE_MAX_BYTES = 16 * MB;
/** A structure (PDB / mmCIF) is parsed whole: the file, and its text once decompressed. */
export const STRUCTURE_MAX_BYTES = 256 * MB;
/** A PCA sample sheet is parsed whole. */
export const SAMPLE_SHEET_MAX_BYTES = 16 * MB;
/** One read by the BAM / bigWig readers (a header, an index node, a run of data blocks). */
export const BINARY_MAX_READ_BYTES = 512 * MB;
/** All reads of one BAM / bigWig render together. */
export const BINARY_MAX_TOTAL_BYTES = 8 * GB;
/** Read calls of one BAM / bigWig render. */
export const BINARY_MAX_READS = 200_000;

const isGz = (p: string) => /\.(gz|bgz)$/i.test(p);
const size = (n: number) => (n >= GB ? `${+(n / GB).toFixed(1)} GB` : `${+(n / MB).toFixed(1)} MB`);

export interface TextBounds {
  /** Bytes read at most (after decompression). */
  maxBytes: number;
  /** What the file is, for messages ("the file", "the annotation file"). */
  what: string;
  /** Why this limit, appended to the message. */
  why?: string;
  /** Longest line; default LINE_MAX_BYTES. */
  maxLine?: number;
  /** Gunzip whatever the name (default: when it ends .gz / .bgz). */
  gzip?: boolean;
}

function overBytes(b: TextBounds, gz: boolean): ChartError {
  return new ChartError(`${b.what} is more than ${size(b.maxBytes)}${gz ? " once decompressed" : ""}; a chart reads at most ${size(b.maxBytes)} (${b.maxBytes.toLocaleString("en-US")} bytes)${b.why ? `: ${b.why}` : ""}`);
}

export function overLine(b: Pick<TextBounds, "what" | "maxLine">, record = false): ChartError {
  const max = b.maxLine ?? LINE_MAX_BYTES;
  return new ChartError(`${b.what} has a ${record ? "record" : "line"} longer than ${size(max)} (${max.toLocaleString("en-US")} bytes), the most a chart reads in one ${record ? "record (is a quote left open?)" : "line"}; is it really a text table?`);
}

function gzError(e: ReaderError, what: string): ChartError {
  // The zlib error that ended the read (its cause), else the reader's own message.
  const msg = e.cause === undefined ? e.message : messageOf(e.cause);
  return new ChartError(`${what} could not be decompressed (${msg}); is it really gzipped?`);
}

/**
 * The file's bytes (gunzipped when the name ends .gz / .bgz), chunk by chunk, failing as soon
 * as more than `maxBytes` have come out or a line (ended by LF or CR) grows past `maxLine`.
 * A plain file larger than the cap fails before anything is read. The counting is
 * `boundedBytes` (media/readers/bounded.ts); its errors become this folder's sentences.
 */
export async function* boundedChunks(path: string, b: TextBounds): AsyncGenerator<Buffer> {
  const gz = b.gzip ?? isGz(path);
  if (!gz && (await stat(path)).size > b.maxBytes) throw overBytes(b, false);
  try {
    yield* boundedBytes(createReadStream(path, { highWaterMark: 1 << 20 }), { gz, maxBytes: b.maxBytes, maxLineBytes: b.maxLine ?? LINE_MAX_BYTES });
  } catch (e) {
    if (!(e instanceof ReaderError)) throw e;
    throw e.bound === "bytes" ? overBytes(b, gz) : e.bound === "line" ? overLine(b) : gzError(e, b.what);
  }
}

/** The file's lines (LF, CRLF; without the terminator), within the bounds of `boundedChunks`. */
export async function* boundedLines(path: string, b: TextBounds): AsyncGenerator<string> {
  const dec = new StringDecoder("utf8");
  let rest = "";
  for await (const chunk of boundedChunks(path, b)) {
    const s = rest + dec.write(chunk);
    let i = 0;
    for (let j = s.indexOf("\n"); j >= 0; i = j + 1, j = s.indexOf("\n", i)) {
      yield s.charCodeAt(j - 1) === 13 && j > i ? s.slice(i, j - 1) : s.slice(i, j);
    }
    rest = s.slice(i);
  }
  rest += dec.end();
  if (rest) yield rest.endsWith("\r") ? rest.slice(0, -1) : rest;
}

/** A whole text file (gunzipped when named so) of at most `maxBytes`, as a string. */
export async function readBounded(path: string, b: TextBounds): Promise<string> {
  const parts: Buffer[] = [];
  for await (const c of boundedChunks(path, { maxLine: b.maxBytes, ...b })) parts.push(c);
  return Buffer.concat(parts).toString("utf8");
}

/**
 * A read-only file handle (the generic-filehandle2 interface @gmod/bam and @gmod/bbi take)
 * with bounds: reads past the end are clipped to it (never allocated), one read of more than
 * BINARY_MAX_READ_BYTES and a whole-file read of a file that large fail, and so does the
 * render's BINARY_MAX_READS-th read or its BINARY_MAX_TOTAL_BYTES-th byte.
 */
export class BoundedFile {
  reads = 0;
  bytes = 0;
  private sizeP?: Promise<number>;
  constructor(readonly path: string, readonly what: string, readonly limits = { maxRead: BINARY_MAX_READ_BYTES, maxTotal: BINARY_MAX_TOTAL_BYTES, maxReads: BINARY_MAX_READS }) {}

  size(): Promise<number> {
    this.sizeP ??= stat(this.path).then((s) => s.size);
    return this.sizeP;
  }

  private count(n: number): void {
    if (++this.reads > this.limits.maxReads) {
      throw new ChartError(`reading ${this.what} took more than ${this.limits.maxReads.toLocaleString("en-US")} reads, the most a chart makes; its index is probably corrupt (a loop or far too many entries)`);
    }
    this.bytes += n;
    if (this.bytes > this.limits.maxTotal) {
      throw new ChartError(`reading ${this.what} took more than ${size(this.limits.maxTotal)} of reads, the most a chart reads; its index is probably corrupt, or the region is too large`);
    }
  }

  async read(length: number, position = 0): Promise<Uint8Array<ArrayBuffer>> {
    const total = await this.size();
    if (!Number.isSafeInteger(position) || position < 0 || !Number.isSafeInteger(length) || length < 0) {
      throw new ChartError(`${this.what} is corrupt: it points at bytes ${String(position)}+${String(length)}, which are not a position in a file`);
    }
    const n = Math.max(0, Math.min(length, total - position));
    if (n > this.limits.maxRead) {
      throw new ChartError(`${this.what} asks for one read of ${size(n)}; a chart reads at most ${size(this.limits.maxRead)} at once (is its index corrupt, or the region very deep?)`);
    }
    this.count(n);
    if (n === 0) return new Uint8Array(0);
    const fh = await open(this.path, "r");
    try {
      const buf = new Uint8Array(n);
      const { bytesRead } = await fh.read(buf, 0, n, position);
      return buf.subarray(0, bytesRead);
    } finally {
      await fh.close();
    }
  }

  readFile(options?: { signal?: AbortSignal }): Promise<Uint8Array<ArrayBuffer>>;
  readFile(options: BufferEncoding | { signal?: AbortSignal; encoding: BufferEncoding }): Promise<string>;
  async readFile(options?: BufferEncoding | { signal?: AbortSignal; encoding?: BufferEncoding }): Promise<Uint8Array<ArrayBuffer> | string> {
    const total = await this.size();
    const buf = await this.read(total, 0);
    const enc = typeof options === "string" ? options : options?.encoding;
    return enc ? Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength).toString(enc) : buf;
  }

  async stat(): Promise<{ size: number }> { return { size: await this.size() }; }
  async close(): Promise<void> { /* each read opens and closes */ }
}
