/**
 * The last lines of a text object, read from its end: byte ranges going backwards (64 KiB,
 * then doubling) until enough line breaks are seen, so a tail of a large step log costs
 * about the bytes it returns, never the whole object. Bounded by `maxBytes`: when that many
 * bytes hold fewer lines, the lines wholly inside them are returned.
 */
import type { ObjectStore } from "../core/ports.js";

const NL = 0x0a;
const FIRST_CHUNK = 64 * 1024;
export const MAX_TAIL_BYTES = 16 * 1024 * 1024;

/**
 * The last `lines` lines of `buf`. A final line break ends the last line (it does not start
 * an empty one). `complete`: `buf` starts at the beginning of the text; otherwise its first
 * line may be partial and is dropped when the lines do not reach back that far.
 */
export function lastLines(buf: Buffer, lines: number, complete = true): Buffer {
  let i = buf.length > 0 && buf[buf.length - 1] === NL ? buf.length - 2 : buf.length - 1;
  for (let seen = 0; i >= 0; i--) {
    if (buf[i] === NL && ++seen === lines) return buf.subarray(i + 1);
  }
  if (complete) return buf;
  const first = buf.indexOf(NL);
  return first < 0 || first === buf.length - 1 ? buf : buf.subarray(first + 1);
}

async function readAll(body: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(Buffer.from(c));
  return Buffer.concat(chunks);
}

/** The last `lines` lines of the object `key` of `size` bytes, read with ranged GETs from its end. */
export async function tailObject(store: ObjectStore, key: string, size: number, lines: number, maxBytes = MAX_TAIL_BYTES): Promise<Buffer> {
  const parts: Buffer[] = [];
  let start = size;
  let read = 0;
  let breaks = 0;
  let chunk = FIRST_CHUNK;
  while (start > 0 && read < maxBytes) {
    const from = Math.max(0, start - Math.min(chunk, maxBytes - read));
    const { body } = await store.get(key, { start: from, end: start - 1 });
    const part = await readAll(body);
    // A final line break is not counted: it ends the last line.
    const counted = start === size && part.length > 0 && part[part.length - 1] === NL ? part.subarray(0, -1) : part;
    for (let j = counted.indexOf(NL); j >= 0; j = counted.indexOf(NL, j + 1)) breaks++;
    parts.unshift(part);
    read += part.length;
    start = from;
    chunk *= 2;
    if (breaks >= lines || part.length === 0) break;
  }
  return lastLines(Buffer.concat(parts), lines, start === 0);
}
