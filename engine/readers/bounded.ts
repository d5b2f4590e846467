/**
 * The one way the viewers read a user's bytes as text: decompressed when gzipped (bgzip's
 * many members too), counted after decompression, with a longest line. A file past a bound
 * ends the read with a `ReaderError` naming the bound and its value, instead of the reader
 * holding whatever the file decides (a 194 KB gzip that inflates to 50 million rows, a
 * 40 MB "line" that a line splitter would copy again for every chunk).
 */
import { Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import { boundSize } from "../../core/sizes.js";

/** The read ended: a bound was reached (the message names it and its value) or the bytes are not what they claim. */
export class ReaderError extends Error {
  /** Which bound ended the read, when one did. */
  constructor(message: string, readonly bound?: "bytes" | "line") { super(message); this.name = "ReaderError"; }
}

export interface TextBounds {
  gz: boolean;
  /** Bytes after decompression the read may take. */
  maxBytes: number;
  /** Longest line (bytes between two newlines). */
  maxLineBytes: number;
  /** What the bound is for, ending the message: "the table viewer". */
  reader: string;
}

/**
 * The text of `source` in chunks (UTF-8, a character never split across two chunks), within
 * `bounds`; the caller may stop early. The source is destroyed when the read ends either way.
 */
export async function* boundedText(source: AsyncIterable<Uint8Array>, bounds: TextBounds): AsyncGenerator<string> {
  const src = Readable.from(source, { objectMode: false });
  const stream = bounds.gz ? src.pipe(createGunzip({ chunkSize: 64 * 1024 })) : src;
  if (bounds.gz) src.on("error", (e) => stream.destroy(e));
  const decoder = new TextDecoder("utf-8");
  let total = 0;
  let line = 0;
  try {
    for await (const c of stream as AsyncIterable<Buffer>) {
      total += c.length;
      if (total > bounds.maxBytes) throw new ReaderError(`the file is larger than ${boundSize(bounds.maxBytes)}${bounds.gz ? " once decompressed" : ""}; ${bounds.reader} reads at most that much`, "bytes");
      line = longestLine(c, line, bounds.maxLineBytes);
      if (line < 0) throw new ReaderError(`a line of the file is longer than ${boundSize(bounds.maxLineBytes)}; ${bounds.reader} reads lines up to that length`, "line");
      yield decoder.decode(c, { stream: true });
    }
    const tail = decoder.decode();
    if (tail) yield tail;
  } catch (e) {
    if (e instanceof ReaderError) throw e;
    const code = (e as { code?: string }).code;
    if (code === "Z_DATA_ERROR" || code === "Z_BUF_ERROR" || code === "ERR_INVALID_ARG_TYPE") throw new ReaderError(`the file is not valid gzip (${(e as Error).message})`);
    throw e;
  } finally {
    src.destroy();
    stream.destroy();
  }
}

/**
 * The length of the line still open after `c`, given `open` bytes open before it; -1 when a
 * line of `c` (or the one it continues) is longer than `max`.
 */
function longestLine(c: Buffer, open: number, max: number): number {
  if (c.length <= max) {
    // Only the first line (continuing the open one) and the last can be too long.
    const first = c.indexOf(10);
    if (first < 0) return open + c.length > max ? -1 : open + c.length;
    return open + first > max ? -1 : c.length - c.lastIndexOf(10) - 1;
  }
  let from = 0;
  for (;;) {
    const nl = c.indexOf(10, from);
    if (nl < 0) return open + c.length - from > max ? -1 : open + c.length - from;
    if (open + nl - from > max) return -1;
    open = 0;
    from = nl + 1;
  }
}
