/**
 * Coverage track input against the tools the numbers must agree with: per-base BAM depth
 * equals `samtools depth -a` (same default filters), bins are means of that depth, bigWig
 * values equal the bedGraph the file was written from, the index is built when missing, and
 * the errors a scientist meets (no reads, unknown contig, unsorted BAM) say what is wrong.
 * Fixtures: test/fixtures/charts/coverage/ (make.sh there says how each was made).
 */
import t from "tap";
import { execFile } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { gunzipSync, gzipSync } from "node:zlib";
import { ChartError } from "../../plots/chart.js";
import { ensureBamIndex, loadCoverage, readAnnotation } from "../../media/charts/coverage-data.js";

const run = promisify(execFile);
const F = join(import.meta.dirname, "../fixtures/charts/coverage");
const BAM = join(F, "lambda.bam"), BW = join(F, "lambda.bw");
const CHR = "NC_001416.1", LEN = 48502;
const work = mkdtempSync(join(tmpdir(), "coverage-data-"));
t.teardown(() => rmSync(work, { recursive: true, force: true }));

/** `samtools depth -a` over a region (or the contig), as an array indexed from `from`. */
async function samtoolsDepth(bam: string, bai: string, from: number, to: number, extra: string[] = []): Promise<number[]> {
  const { stdout } = await run("samtools", ["depth", "-a", ...extra, "-r", `${CHR}:${from}-${to}`, "-X", bam, bai], { maxBuffer: 64 << 20 });
  const out = new Array<number>(to - from + 1).fill(0);
  for (const line of stdout.split("\n")) {
    if (!line) continue;
    const [, pos, d] = line.split("\t");
    out[Number(pos) - from] = Number(d);
  }
  return out;
}

/** The bedGraph the bigWig was written from, as per-base values over the contig (0 where absent). */
function bedGraphBases(): Float64Array {
  const v = new Float64Array(LEN);
  for (const line of gunzipSync(readFileSync(join(F, "lambda.depth.bedgraph.gz"))).toString("utf8").split("\n")) {
    if (!line) continue;
    const [, s, e, val] = line.split("\t");
    for (let i = Number(s); i < Number(e); i++) v[i] = Number(val);
  }
  return v;
}

let bai = "";
t.before(async () => {
  t.notOk(existsSync(`${BAM}.bai`) || existsSync(join(F, "lambda.bai")), "the fixture BAM has no index beside it");
  bai = await ensureBamIndex(BAM, work);
});

t.test("a missing index is built into the work directory; an existing one is used", async (t) => {
  t.ok(bai.startsWith(work) && bai.endsWith(".bai") && existsSync(bai), `built ${bai}`);
  t.notOk(existsSync(`${BAM}.bai`), "nothing written beside the input");
  const { stdout } = await run("samtools", ["view", "-c", "-X", BAM, bai, `${CHR}:1000-2000`]);
  t.ok(Number(stdout) > 100, `samtools reads the built index (${stdout.trim()} reads in ${CHR}:1000-2000)`);
  const copy = join(work, "copy.bam");
  copyFileSync(BAM, copy);
  copyFileSync(bai, join(work, "copy.bai"));
  t.equal(await ensureBamIndex(copy, join(work, "w2")), join(work, "copy.bai"), "<name>.bai beside the BAM");
  copyFileSync(bai, `${copy}.bai`);
  t.equal(await ensureBamIndex(copy, join(work, "w2")), `${copy}.bai`, "<name>.bam.bai beside the BAM wins");
  t.notOk(existsSync(join(work, "w2", "copy.bam.bai")), "no index built when one exists");
});

t.test("an unsorted BAM cannot be indexed and says so", async (t) => {
  const unsorted = join(work, "byname.bam");
  await run("samtools", ["sort", "-n", "-o", unsorted, BAM]);
  await t.rejects(ensureBamIndex(unsorted, join(work, "w3")), { name: "ChartError", message: /not sorted by coordinate.*samtools sort/ });
  const junk = join(work, "junk.bam");
  writeFileSync(junk, "not a bam at all\n");
  await t.rejects(ensureBamIndex(junk, join(work, "w4")), ChartError);
});

t.test("BAM depth equals samtools depth -a at every position (1-bp bins)", async (t) => {
  for (const [from, to] of [[1, 2500], [29_401, 30_400], [31_950, 32_700], [47_900, LEN]] as const) {
    const track = await loadCoverage({ path: BAM, kind: "bam", indexPath: bai }, { chr: CHR, start: from, end: to }, 5000, []);
    t.equal(track.binSize, 1);
    t.equal(track.values.length, to - from + 1);
    const want = await samtoolsDepth(BAM, bai, from, to);
    let mismatches = 0, first = -1;
    for (let i = 0; i < want.length; i++) if (track.values[i] !== want[i] || track.max[i] !== want[i]) { mismatches++; if (first < 0) first = from + i; }
    t.equal(mismatches, 0, `${CHR}:${from}-${to}: every base equals samtools depth${first >= 0 ? ` (first difference at ${first})` : ""}`);
    t.ok(want.some((d) => d > 0), "the region has reads");
  }
  // The default filters matter in this file: counting duplicates gives other numbers.
  const withDups = await samtoolsDepth(BAM, bai, 1, 2500, ["-g", "0x400"]);
  const ours = await loadCoverage({ path: BAM, kind: "bam", indexPath: bai }, { chr: CHR, start: 1, end: 2500 }, 5000, []);
  t.ok(withDups.some((d, i) => d !== ours.values[i]), "duplicates are excluded, as samtools depth does");
});

t.test("BAM bins are the mean and max of samtools depth over each bin", async (t) => {
  const track = await loadCoverage({ path: BAM, kind: "bam", indexPath: bai }, { chr: CHR, start: 1, end: LEN }, 100, []);
  const binSize = Math.ceil(LEN / 100);
  t.equal(track.binSize, binSize);
  t.equal(track.values.length, Math.ceil(LEN / binSize));
  const depth = await samtoolsDepth(BAM, bai, 1, LEN);
  for (let b = 0; b < track.values.length; b++) {
    const slice = depth.slice(b * binSize, Math.min(LEN, (b + 1) * binSize));
    const mean = slice.reduce((a, c) => a + c, 0) / slice.length;
    if (Math.abs(track.values[b]! - mean) > 1e-9 || track.max[b] !== Math.max(...slice)) { t.fail(`bin ${b}: ${track.values[b]} / ${track.max[b]} vs ${mean} / ${Math.max(...slice)}`); return; }
  }
  t.pass("every bin matches");
  t.match(track.notes?.join("\n") ?? "", /unmapped, secondary, QC-fail or duplicate/, "the filters are stated for the TSV");
  const { stdout } = await run("samtools", ["view", "-c", "-F", "0x704", BAM]);
  t.match(track.notes?.join("\n") ?? "", new RegExp(`reads counted: ${stdout.trim()}$`, "m"), `reads counted = samtools view -c -F 0x704 (${stdout.trim()})`);
});

t.test("a region with no reads says so, and where the file has reads", async (t) => {
  await t.rejects(loadCoverage({ path: BAM, kind: "bam", indexPath: bai }, { chr: CHR, start: 30_501, end: 31_500 }, 800, []),
    { name: "ChartError", message: /^no reads in NC_001416\.1:30,501-31,500 .*the file has reads on NC_001416\.1 \([\d,]+ reads\)/ });
  await t.rejects(loadCoverage({ path: BW, kind: "bigwig" }, { chr: CHR, start: 30_501, end: 31_500 }, 800, []),
    { name: "ChartError", message: /^no reads in NC_001416\.1:30,501-31,500: the bigWig file has no signal there/ });
});

t.test("an unknown contig lists the file's contigs; a region past the end is clipped", async (t) => {
  await t.rejects(loadCoverage({ path: BAM, kind: "bam", indexPath: bai }, { chr: "chr1", start: 1, end: 1000 }, 800, []),
    { name: "ChartError", message: /contig chr1 is not in the BAM file; its contigs are: NC_001416\.1/ });
  await t.rejects(loadCoverage({ path: BW, kind: "bigwig" }, { chr: "lambda", start: 1, end: 1000 }, 800, []),
    { name: "ChartError", message: /contig lambda is not in the bigWig file; its contigs are: NC_001416\.1/ });
  await t.rejects(loadCoverage({ path: BAM, kind: "bam", indexPath: bai }, { chr: CHR, start: 50_000, end: 60_000 }, 800, []),
    { name: "ChartError", message: /starts past the end of NC_001416\.1, which is 48,502 bp long/ });
  const clipped = await loadCoverage({ path: BAM, kind: "bam", indexPath: bai }, { chr: CHR, start: 48_001, end: 60_000 }, 800, []);
  t.equal(clipped.end, LEN);
  t.match(clipped.notes?.join("\n") ?? "", /drawn to 48502/);
});

t.test("bigWig values equal the bedGraph they were written from", async (t) => {
  const bg = bedGraphBases();
  for (const [from, to] of [[1, 900], [29_801, 30_300], [10_001, 10_640]] as const) {
    const track = await loadCoverage({ path: BW, kind: "bigwig" }, { chr: CHR, start: from, end: to }, to - from + 1, []);
    t.equal(track.binSize, 1);
    let bad = 0;
    for (let i = 0; i < track.values.length; i++) if (track.values[i] !== bg[from - 1 + i]) bad++;
    t.equal(bad, 0, `${CHR}:${from}-${to} base by base`);
  }
  // Bins of up to 64 bp are still read at full resolution: exact means and maxima.
  const track = await loadCoverage({ path: BW, kind: "bigwig" }, { chr: CHR, start: 1, end: LEN }, 880, []);
  t.equal(track.binSize, Math.ceil(LEN / 880));
  let bad = 0;
  for (let b = 0; b < track.values.length; b++) {
    const s = bg.subarray(b * track.binSize, Math.min(LEN, (b + 1) * track.binSize));
    const mean = s.reduce((a, c) => a + c, 0) / s.length;
    if (Math.abs(track.values[b]! - mean) > 1e-9 || track.max[b] !== Math.max(...s)) bad++;
  }
  t.equal(bad, 0, "whole genome in 56-bp bins: exact");
});

t.test("wide bigWig bins come from a zoom level, close to the exact means", async (t) => {
  const bg = bedGraphBases();
  const track = await loadCoverage({ path: BW, kind: "bigwig" }, { chr: CHR, start: 1, end: LEN }, 40, []);
  t.ok(track.binSize > 64);
  t.match(track.notes?.join("\n") ?? "", /zoom level/);
  let worst = 0;
  for (let b = 0; b < track.values.length; b++) {
    const s = bg.subarray(b * track.binSize, Math.min(LEN, (b + 1) * track.binSize));
    const mean = s.reduce((a, c) => a + c, 0) / s.length;
    worst = Math.max(worst, Math.abs(track.values[b]! - mean));
    t.ok(track.max[b]! >= Math.max(...s) - 1e-6 || track.max[b]! >= track.values[b]!, `bin ${b} max`);
  }
  t.ok(worst < 1.5, `zoomed means within 1.5 reads of the exact ones (worst ${worst.toFixed(3)})`);
});

t.test("annotation files are read by extension, gzipped too", async (t) => {
  const gtf = await readAnnotation(join(F, "lambda.gtf"));
  const bed = await readAnnotation(join(F, "lambda.bed"));
  t.equal(gtf.length, 19);
  t.same(bed.map((f) => [f.name, f.chr, f.start, f.end, f.strand]), gtf.map((f) => [f.name, f.chr, f.start, f.end, f.strand]), "GTF and BED give the same genes");
  const gz = join(work, "lambda.gtf.gz");
  writeFileSync(gz, gzipSync(readFileSync(join(F, "lambda.gtf"))));
  t.same(await readAnnotation(gz), gtf, "gzipped GTF");
  const noExt = join(work, "genes.txt");
  copyFileSync(join(F, "lambda.gtf"), noExt);
  t.same(await readAnnotation(noExt), gtf, "kind detected from the content");
});
