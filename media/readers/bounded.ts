/**
 * The one way a user's bytes are read within bounds (the viewers' readers here, the chart
 * renderer's text readers in media/charts/bounded-read.ts): decompressed when gzipped
 * (bgzip's many members too), counted after decompression, with a longest line. A file past
 * a bound ends the read with a `ReaderError` naming the bound and its value, instead of the
 * reader holding whatever the file decides (a 194 KB gzip that inflates to 50 million rows, a
 * 40 MB "line" that a line splitter would copy again for every chunk).
 */
import { Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import { boundSize } from "../../core/sizes.js";

/**
 * The read ended: a bound was reached (`bound` says which; the message names it and its
 * value) or the bytes are not what they claim (no `bound`: not valid gzip, the zlib error as
 * `cause`).
 */
export class ReaderError extends Error {
  /** Which bound ended the read, when one did. */
  constructor(message: string, readonly bound?: "bytes" | "line", options?: ErrorOptions) { super(message, options); this.name = "ReaderError"; }
}

export interface ByteBounds {
  gz: boolean;
  /** Bytes after decompression the read may take. */
  maxBytes: number;
  /** Longest line (bytes between two line ends, LF or CR). */
  maxLineBytes: number;
  /** What the bound is for, ending the message: "the table viewer" (default "the reader"). */
  reader?: string;
}

export interface TextBounds extends ByteBounds {
  reader: string;
}

/**
 * The bytes of `source` (gunzipped when `bounds.gz`) in chunks, within `bounds`; the caller
 * may stop early. The source is destroyed when the read ends either way.
 */
export async function* boundedBytes(source: AsyncIterable<Uint8Array>, bounds: ByteBounds): AsyncGenerator<Buffer> {
  const reader = bounds.reader ?? "the reader";
  const src = source instanceof Readable ? source : Readable.from(source, { objectMode: false });
  const stream = bounds.gz ? src.pipe(createGunzip({ chunkSize: 64 * 1024 })) : src;
  if (bounds.gz) src.on("error", (e) => stream.destroy(e));
  let total = 0;
  let line = 0;
  try {
    for await (const c of stream as AsyncIterable<Buffer>) {
      total += c.length;
      if (total > bounds.maxBytes) throw new ReaderError(`the file is larger than ${boundSize(bounds.maxBytes)}${bounds.gz ? " once decompressed" : ""}; ${reader} reads at most that much`, "bytes");
      line = openLine(c, line, bounds.maxLineBytes);
      if (line < 0) throw new ReaderError(`a line of the file is longer than ${boundSize(bounds.maxLineBytes)}; ${reader} reads lines up to that length`, "line");
      yield c;
    }
  } catch (e) {
    if (e instanceof ReaderError) throw e;
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && (code.startsWith("Z_") || code === "ERR_INVALID_ARG_TYPE")) {
      throw new ReaderError(`the file is not valid gzip (${(e as Error).message})`, undefined, { cause: e });
    }
    throw e;
  } finally {
    src.destroy();
    stream.destroy();
  }
}

/**
 * The text of `source` in chunks (UTF-8, a character never split across two chunks), within
 * `bounds` (those of `boundedBytes`); the caller may stop early.
 */
export async function* boundedText(source: AsyncIterable<Uint8Array>, bounds: TextBounds): AsyncGenerator<string> {
  const decoder = new TextDecoder("utf-8");
  for await (const c of boundedBytes(source, bounds)) yield decoder.decode(c, { stream: true });
  const tail = decoder.decode();
  if (tail) yield tail;
}

/**
 * The length of the line still open after `c`, given `open` bytes open before it; -1 when a
 * line of `c` (or the one it continues) is longer than `max`. A line ends at LF or CR.
 */
function openLine(c: Buffer, open: number, max: number): number {
  // The next LF and CR at or after `from`, each searched again only once passed.
  let from = 0, lf = c.indexOf(10), cr = c.indexOf(13);
  for (;;) {
    if (lf >= 0 && lf < from) lf = c.indexOf(10, from);
    if (cr >= 0 && cr < from) cr = c.indexOf(13, from);
    const end = lf < 0 ? cr : cr < 0 ? lf : Math.min(lf, cr);
    if (end < 0) return open + c.length - from > max ? -1 : open + c.length - from;
    if (open + end - from > max) return -1;
    open = 0;
    from = end + 1;
    if (c.length - from <= max) {
      // Every line from here is short enough but the last, still open.
      return c.length - Math.max(c.lastIndexOf(10), c.lastIndexOf(13)) - 1;
    }
  }
}
