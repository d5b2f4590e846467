/**
 * Hostile inputs to the chart renderer, built here: a gzip bomb CSV and structure, a 50 MB
 * line without a newline, a quote left open over millions of lines, a bigWig whose chromosome
 * tree or data index points at itself or past the file's end or declares absurd counts, BAM
 * headers and indexes with crafted counts and offsets, a BGZF block whose ISIZE lies, a
 * truncated BAM. Each render ends `{ok: false, data: true}` with a sentence naming the limit
 * or the fault, within bounded time and memory (the bigWig loop through a real render worker,
 * whose RSS is sampled). Bounds: media/charts/bounded-read.ts and binary-checks.ts.
 */
import t, { type Test } from "tap";
import { execFile } from "node:child_process";
import { closeSync, copyFileSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Worker } from "node:worker_threads";
import { gunzipSync, gzipSync } from "node:zlib";
import { CoverageOptions, StructureOptions, VolcanoOptions } from "../../plots/options.js";
import { renderTask, type RenderResult, type RenderTask } from "../../media/charts/render-worker.js";
import { ensureBamIndex, loadCoverage, readAnnotation } from "../../media/charts/coverage-data.js";
import { LINE_MAX_BYTES, STRUCTURE_MAX_BYTES, TABLE_MAX_BYTES } from "../../media/charts/bounded-read.js";

const run = promisify(execFile);
const F = join(import.meta.dirname, "../fixtures/charts/coverage");
const BW = join(F, "lambda.bw"), BAM = join(F, "lambda.bam");
const CHR = "NC_001416.1";
const work = mkdtempSync(join(tmpdir(), "chart-hostile-"));
t.teardown(() => rmSync(work, { recursive: true, force: true }));

const frame = { width: 800, height: 400, source: "x" };
const volcano = (primary: string): RenderTask => ({ type: "volcano_plot", options: VolcanoOptions.parse({}), frame, format: "svg", inputs: { primary }, workDir: work });
const coverage = (primary: string, bamIndex?: string): RenderTask => ({
  type: "coverage_track", options: CoverageOptions.parse({ region: `${CHR}:1-40000` }), frame, format: "svg", inputs: { primary, ...(bamIndex ? { bamIndex } : {}) }, workDir: work,
});

/**
 * A gzip file of `bytes` bytes of `pattern` after `prefix`: one member of 64 MB repeated
 * (a gzip file may be several members), so neither the test nor the disk holds much.
 */
function gzipBomb(prefix: string, pattern: string, bytes: number): Buffer {
  const member = gzipSync(Buffer.alloc(64 << 20, pattern), { level: 9 });
  const parts = [gzipSync(prefix)];
  for (let n = 0; n < bytes; n += 64 << 20) parts.push(member);
  return Buffer.concat(parts);
}

/** `line` written `times` times to a file, a megabyte at a time. */
function writeRepeated(path: string, head: string, chunk: string, times: number): void {
  const fd = openSync(path, "w");
  writeSync(fd, head);
  const block = Buffer.from(chunk.repeat(Math.max(1, Math.floor((1 << 20) / chunk.length))));
  const per = block.length / chunk.length;
  for (let n = 0; n < times; n += per) writeSync(fd, block, 0, Math.min(per, times - n) * chunk.length);
  closeSync(fd);
}

/** Renders inline; returns the result, the time taken and how much this process's RSS grew. */
async function timed(task: RenderTask): Promise<{ r: RenderResult; ms: number; rssGrowth: number }> {
  const rss0 = process.memoryUsage.rss();
  let peak = rss0;
  const tick = setInterval(() => { peak = Math.max(peak, process.memoryUsage.rss()); }, 20);
  const t0 = Date.now();
  try {
    const r = await renderTask(task);
    return { r, ms: Date.now() - t0, rssGrowth: Math.max(peak, process.memoryUsage.rss()) - rss0 };
  } finally {
    clearInterval(tick);
  }
}

const failsWith = (t: Test, r: RenderResult, re: RegExp) => {
  t.ok(!r.ok && r.data, `a data error: ${r.ok ? "rendered" : r.error}`);
  if (!r.ok) t.match(r.error, re);
};

t.test("a gzip bomb CSV stops at the decompressed-bytes cap", async (t) => {
  const p = join(work, "bomb.csv.gz");
  // `#` lines before the header are no rows: only the byte cap stops this file.
  writeFileSync(p, gzipBomb("", `#${"x".repeat(8190)}\n`, TABLE_MAX_BYTES + (64 << 20)));
  const { r, ms, rssGrowth } = await timed(volcano(p));
  failsWith(t, r, /more than 1 GB once decompressed; a chart reads at most 1 GB \(1,073,741,824 bytes\)/);
  t.ok(rssGrowth < 400 << 20, `RSS grew ${(rssGrowth / 1e6).toFixed(0)} MB`);
  t.ok(ms < 60_000, `${ms} ms`);
});

t.test("a 50 MB line without a newline fails at the line cap, without being held", async (t) => {
  const p = join(work, "oneline.csv");
  writeRepeated(p, "gene,log2FoldChange,padj\n", "A,1,0.5,", (50 << 20) / 8);
  const { r, rssGrowth } = await timed(volcano(p));
  failsWith(t, r, new RegExp(`a line longer than 16 MB \\(${LINE_MAX_BYTES.toLocaleString("en-US")} bytes\\)`));
  t.ok(rssGrowth < 200 << 20, `RSS grew ${(rssGrowth / 1e6).toFixed(0)} MB`);
  // The same line gzipped, and as the header.
  const gz = join(work, "oneline.csv.gz");
  writeFileSync(gz, gzipSync(readFileSync(p).subarray(25)));
  failsWith(t, (await timed(volcano(gz))).r, /a line longer than 16 MB/);
});

t.test("a quote left open over short lines fails at the record cap", async (t) => {
  const p = join(work, "openquote.csv");
  writeRepeated(p, "gene,log2FoldChange,padj\nA,1,\"", "x\n", 12 << 20);
  const { r } = await timed(volcano(p));
  failsWith(t, r, /a record longer than 16 MB .*quote left open/);
});

t.test("an annotation file with a 50 MB line fails at the line cap", async (t) => {
  const p = join(work, "long.gtf");
  writeRepeated(p, `${CHR}\tx\tgene\t1\t100\t.\t+\t.\tgene_id "g1"; gene_name "`, "AAAAAAAA", (50 << 20) / 8);
  await t.rejects(readAnnotation(p), { name: "ChartError", message: /the annotation file has a line longer than 16 MB/ });
});

t.test("a structure that decompresses past its cap fails naming the cap", async (t) => {
  const p = join(work, "bomb.pdb.gz");
  writeFileSync(p, gzipBomb("HEADER    BOMB\n", "A", STRUCTURE_MAX_BYTES + (64 << 20)));
  const task: RenderTask = { type: "structure_3d", options: StructureOptions.parse({}), frame, format: "svg", inputs: { primary: p }, workDir: work };
  const { r, rssGrowth } = await timed(task);
  failsWith(t, r, /the structure file is more than 256 MB once decompressed; a chart reads at most 256 MB/);
  t.ok(rssGrowth < 600 << 20, `RSS grew ${(rssGrowth / 1e6).toFixed(0)} MB`);
});

// ---------- bigWig ----------

const bw = readFileSync(BW);
const CHROM_TREE = Number(bw.readBigUInt64LE(8)), INDEX = Number(bw.readBigUInt64LE(24));
const KEY = bw.readUInt32LE(CHROM_TREE + 8);
function patchedBigWig(name: string, patch: (b: Buffer) => void): string {
  const b = Buffer.from(bw);
  patch(b);
  const p = join(work, name);
  writeFileSync(p, b);
  return p;
}
/** The chromosome tree's root (a leaf with one contig) turned into an inner node whose one child is itself. */
const selfChromTree = patchedBigWig("self-chrom.bw", (b) => {
  const node = CHROM_TREE + 32;
  b[node] = 0;
  b.writeUInt16LE(1, node + 2);
  b.writeBigUInt64LE(BigInt(node), node + 4 + KEY);
});

/** A render in a worker thread, as media/render-jobs.ts runs one; the process's peak RSS sampled meanwhile. */
async function inWorker(task: RenderTask, limitMs: number): Promise<{ r: RenderResult | "timeout"; ms: number; rssGrowth: number }> {
  const rss0 = process.memoryUsage.rss();
  let peak = rss0;
  const tick = setInterval(() => { peak = Math.max(peak, process.memoryUsage.rss()); }, 20);
  const t0 = Date.now();
  const w = new Worker(new URL("../../media/charts/render-worker.ts", import.meta.url), { workerData: { operonRender: true }, resourceLimits: { maxOldGenerationSizeMb: 1024 }, stdout: false, stderr: false });
  try {
    const r = await new Promise<RenderResult | "timeout">((resolve, reject) => {
      const timer = setTimeout(() => resolve("timeout"), limitMs);
      w.once("message", (m: RenderResult) => { clearTimeout(timer); resolve(m); });
      w.once("error", (e) => { clearTimeout(timer); reject(e); });
      w.postMessage(task);
    });
    return { r, ms: Date.now() - t0, rssGrowth: peak - rss0 };
  } finally {
    clearInterval(tick);
    await w.terminate();
  }
}

t.test("a bigWig whose chromosome tree node points at itself fails at once in a render worker, memory flat", async (t) => {
  // 60 s: a worker starting on a loaded CI machine (load ~20 on 2 cores) took over 20 s to answer;
  // without the checks the library never answers at all.
  const { r, ms, rssGrowth } = await inWorker(coverage(selfChromTree), 60_000);
  t.not(r, "timeout", "the worker answered (the library alone loops for ever)");
  if (r !== "timeout") failsWith(t, r, /chromosome tree reaches the node at byte 376 twice \(a loop\)/);
  t.ok(ms < 60_000, `${ms} ms`);
  t.ok(rssGrowth < 300 << 20, `RSS grew ${(rssGrowth / 1e6).toFixed(0)} MB`);
});

t.test("crafted bigWig trees, offsets and counts end in a ChartError", async (t) => {
  const cases: Array<[string, (b: Buffer) => void, RegExp]> = [
    ["R-tree root pointing at itself", (b) => {
      const node = INDEX + 48;
      b[node] = 0;
      b.writeUInt16LE(1, node + 2);
      b.writeUInt32LE(0, node + 4); b.writeUInt32LE(0, node + 8); b.writeUInt32LE(0xffffffff, node + 12); b.writeUInt32LE(0xffffffff, node + 16);
      b.writeBigUInt64LE(BigInt(node), node + 20);
    }, /data index at byte 54,685 reaches the node at byte 54,733 twice \(a loop\)/],
    ["chromosome tree past the end", (b) => b.writeBigUInt64LE(1n << 40n, 8), /the chromosome tree is at byte 1,099,511,627,776, past the end of the file/],
    ["data index past the end", (b) => b.writeBigUInt64LE(BigInt(bw.length + 10), 24), /the data index is at byte .*past the end/],
    ["chromosome tree child past the end", (b) => {
      const node = CHROM_TREE + 32;
      b[node] = 0;
      b.writeBigUInt64LE(1n << 50n, node + 4 + KEY);
    }, /a child of the chromosome tree node at byte 376 is at byte .*past the end/],
    ["2^40 contigs declared", (b) => b.writeBigUInt64LE(1n << 40n, CHROM_TREE + 16), /its chromosome tree says it holds 1,099,511,627,776 contigs/],
    ["a node with more entries than the block size", (b) => b.writeUInt16LE(60000, CHROM_TREE + 32 + 2), /has 60,000 entries/],
    ["an R-tree leaf pointing at a block past the end", (b) => b.writeBigUInt64LE(1n << 45n, INDEX + 48 + 4 + 16), /lists a data block at bytes 35,184,372,088,832\+/],
    ["autoSql offset far away", (b) => b.writeBigUInt64LE(1n << 33n, 36), /autoSql or summary starts past byte 1,048,576/],
    ["a 4 GB data block size", (b) => b.writeUInt32LE(0xffffffff, 52), /decompress to up to 4,294,967,295 bytes/],
    ["truncated", () => undefined, /./],
  ];
  for (const [name, patch, re] of cases) {
    const p = name === "truncated" ? join(work, "trunc.bw") : patchedBigWig(`${name.replace(/\W+/g, "_")}.bw`, patch);
    if (name === "truncated") writeFileSync(p, bw.subarray(0, INDEX + 60));
    const t0 = Date.now();
    const r = await renderTask(coverage(p));
    t.ok(!r.ok && r.data, `${name}: a data error: ${r.ok ? "rendered" : r.error}`);
    if (!r.ok) t.match(r.error, re, name);
    t.ok(Date.now() - t0 < 5000, `${name}: ${Date.now() - t0} ms`);
  }
  // The unpatched file still draws.
  const ok = await loadCoverage({ path: BW, kind: "bigwig" }, { chr: CHR, start: 1, end: 40000 }, 500, []);
  t.ok(ok.max.some((v) => v > 0), "the real bigWig still reads");
});

// ---------- BAM ----------

const bai = await ensureBamIndex(BAM, join(work, "idx"));
const baiBytes = readFileSync(bai);

t.test("crafted BAI counts and offsets end in a ChartError before @gmod/bam reads them", async (t) => {
  const cases: Array<[string, (b: Buffer) => void, RegExp]> = [
    ["n_ref 2^31-1", (b) => b.writeInt32LE(0x7fffffff, 4), /contig count is 2,147,483,647, more than the 10,000,000/],
    ["a bin with 2^31-1 chunks", (b) => b.writeInt32LE(0x7fffffff, 16), /chunk count is 2,147,483,647, which needs/],
    ["n_bin 2^31-1", (b) => b.writeInt32LE(0x7fffffff, 8), /bin count is 2,147,483,647/],
    ["a chunk past the end of the BAM", (b) => b.writeBigUInt64LE(1n << 50n, 20), /points at byte 17,179,869,184 of the BAM/],
    ["not an index", (b) => b.write("XXXX", 0), /magic number/],
  ];
  for (const [name, patch, re] of cases) {
    const b = Buffer.from(baiBytes);
    patch(b);
    const p = join(work, `${name.replace(/\W+/g, "_")}.bai`);
    writeFileSync(p, b);
    const t0 = Date.now();
    const r = await renderTask(coverage(BAM, p));
    t.ok(!r.ok && r.data, `${name}: a data error: ${r.ok ? "rendered" : r.error}`);
    if (!r.ok) t.match(r.error, re, name);
    t.ok(Date.now() - t0 < 5000, `${name}: ${Date.now() - t0} ms`);
  }
  const trunc = join(work, "short.bai");
  writeFileSync(trunc, baiBytes.subarray(0, 30));
  failsWith(t, await renderTask(coverage(BAM, trunc)), /\(\.bai\) is corrupt .*needs \d+ bytes.*only \d+ (are )?left/);
});

t.test("a CSI with crafted counts ends in a ChartError", async (t) => {
  const csi = join(work, "lambda.csi");
  await run("samtools", ["index", "-c", "-o", csi, BAM]);
  const raw = gunzipSync(readFileSync(csi));
  const lAux = raw.readInt32LE(12);
  const nRefAt = 16 + lAux;
  const b = Buffer.from(raw);
  b.writeInt32LE(0x7fffffff, nRefAt + 4 + 4 + 4 + 8); // the first bin's chunk count
  const p = join(work, "crafted.csi");
  writeFileSync(p, gzipSync(b));
  failsWith(t, await renderTask(coverage(BAM, p)), /the BAM index \(\.csi\) is corrupt .*chunk count is 2,147,483,647/);
  // The real CSI still reads.
  const r = await renderTask(coverage(BAM, csi));
  t.ok(r.ok, r.ok ? "the real CSI draws" : r.error);
});

/** The BAM with its decompressed bytes patched, recompressed with bgzip. */
async function patchedBam(name: string, patch: (raw: Buffer) => Buffer): Promise<string> {
  const raw = patch(Buffer.from(gunzipSync(readFileSync(BAM))));
  const p = join(work, name);
  writeFileSync(`${p}.raw`, raw);
  await run("bgzip", ["-f", "-c", `${p}.raw`], { encoding: "buffer", maxBuffer: 64 << 20 }).then(({ stdout }) => writeFileSync(p, stdout));
  rmSync(`${p}.raw`);
  return p;
}

t.test("crafted BAM headers fail before samtools or @gmod/bam allocate what they say", async (t) => {
  const lText = gunzipSync(readFileSync(BAM)).readInt32LE(4);
  const huge = await patchedBam("ltext.bam", (b) => { b.writeInt32LE(0x7fffff00, 4); return b; });
  await t.rejects(ensureBamIndex(huge, join(work, "i1")), { name: "ChartError", message: /header text length is 2,147,483,392 bytes; a chart reads at most 268,435,456/ });
  const refs = await patchedBam("nref.bam", (b) => { b.writeInt32LE(0x7fffffff, 8 + lText); return b; });
  await t.rejects(ensureBamIndex(refs, join(work, "i2")), { name: "ChartError", message: /2,147,483,647 contigs; a chart accepts at most 10,000,000/ });
  const t0 = Date.now();
  failsWith(t, await renderTask(coverage(refs, bai)), /2,147,483,647 contigs/);
  t.ok(Date.now() - t0 < 5000, `${Date.now() - t0} ms`);
});

t.test("a BGZF block whose ISIZE lies, and a truncated BAM, end in a ChartError", async (t) => {
  const b = Buffer.from(readFileSync(BAM));
  const bsize = b.readUInt16LE(16) + 1;
  b.writeUInt32LE(0xfffffff0, bsize - 4); // the first block's ISIZE
  const lying = join(work, "isize.bam");
  writeFileSync(lying, b);
  failsWith(t, await renderTask(coverage(lying, bai)), /could not be decompressed|BAM/);
  const short = join(work, "short.bam");
  writeFileSync(short, readFileSync(BAM).subarray(0, 20_000));
  const t0 = Date.now();
  const r = await renderTask(coverage(short, bai));
  failsWith(t, r, /points at byte .* of the BAM, which has 20,000/);
  t.ok(Date.now() - t0 < 5000, `${Date.now() - t0} ms`);
  // Without an index beside it, samtools refuses to index it: a data error too.
  const alone = join(work, "alone", "short.bam");
  await run("mkdir", ["-p", join(work, "alone")]);
  copyFileSync(short, alone);
  failsWith(t, await renderTask(coverage(alone)), /BAM/);
});
