/**
 * Hostile files made in the test, small on disk and in the test's memory: gzip bombs streamed
 * through zlib a megabyte at a time, and a sampler of a process's RSS.
 */
import { once } from "node:events";
import { createGzip } from "node:zlib";

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
  const t = setInterval(() => { max = Math.max(max, process.memoryUsage.rss()); }, ms);
  return { get max() { return max; }, stop() { clearInterval(t); max = Math.max(max, process.memoryUsage.rss()); return max; } };
}
