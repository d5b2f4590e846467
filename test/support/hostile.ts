/**
 * Hostile files made in the test, small on disk and in the test's memory: gzip bombs streamed
 * through zlib a megabyte at a time, BGZF (BAM) bombs of one repeated block, and a sampler of
 * a process's RSS.
 */
import { once } from "node:events";
import { crc32, createGzip, deflateRawSync } from "node:zlib";

/** `pattern` repeated to `bytes`, gzipped (level 9): a few hundred KB for hundreds of MB. */
export async function gzipBomb(pattern: string, bytes: number, prefix = ""): Promise<Buffer> {
  const gz = createGzip({ level: 9 });
  const out: Buffer[] = [];
  gz.on("data", (c: Buffer) => out.push(c));
  const ended = once(gz, "end");
  const block = Buffer.from(pattern.repeat(Math.max(1, Math.floor((1 << 20) / pattern.length))));
  if (prefix) gz.write(prefix);
  for (let n = prefix.length; n < bytes; n += block.length) {
    if (!gz.write(block.subarray(0, Math.min(block.length, bytes - n)))) await once(gz, "drain");
  }
  gz.end();
  await ended;
  return Buffer.concat(out);
}

/** Samples this process's RSS every `ms` until stopped; `max` is the highest seen (bytes). */
export function rssSampler(ms = 50): { readonly max: number; stop(): number } {
  let max = process.memoryUsage.rss();
  // Unref'd: a test that fails before stop() must still let the process end.
  const t = setInterval(() => { max = Math.max(max, process.memoryUsage.rss()); }, ms).unref();
  return { get max() { return max; }, stop() { clearInterval(t); max = Math.max(max, process.memoryUsage.rss()); return max; } };
}

/** One BGZF block (BGZF's gzip member with its BC extra field) holding `data` (≤ 65,280 bytes). */
export function bgzfBlock(data: Buffer): Buffer {
  const deflated = deflateRawSync(data, { level: 9 });
  const head = Buffer.from([31, 139, 8, 4, 0, 0, 0, 0, 0, 255, 6, 0, 66, 67, 2, 0, 0, 0]);
  head.writeUInt16LE(head.length + deflated.length + 8 - 1, 16);
  const tail = Buffer.alloc(8);
  tail.writeUInt32LE(crc32(data), 0);
  tail.writeUInt32LE(data.length, 4);
  return Buffer.concat([head, deflated, tail]);
}

/**
 * A BGZF header bomb: a valid magic (BAM's `BAM\1`, BCF's `BCF\2\2`) followed by a header text
 * length of `textBytes`, then that many bytes made of one repeated BGZF block (a few MB on
 * disk for a GB of header).
 */
export function bgzfHeaderBomb(magic: "BAM" | "BCF", textBytes: number): Buffer {
  const m = magic === "BAM" ? "BAM\x01" : "BCF\x02\x02";
  const first = Buffer.alloc(m.length + 4 + 65_000, 65);
  first.write(m, 0, "latin1");
  first.writeUInt32LE(textBytes, m.length);
  const block = bgzfBlock(Buffer.alloc(65_280, 65));
  const blocks = [bgzfBlock(first)];
  for (let n = 65_000; n < textBytes; n += 65_280) blocks.push(block);
  blocks.push(bgzfBlock(Buffer.alloc(0)));
  return Buffer.concat(blocks);
}
