/**
 * Coverage track input: per-base read depth over a region from a BAM (with its .bai, built
 * with `samtools index` when the BAM has none), or a bigWig's signal (from a zoom level when
 * a bin spans many bases), binned for the renderer; and gene annotations (GTF / GFF3 / BED,
 * gzipped or not) read line by line.
 *
 * BAM depth is counted as `samtools depth` does by default: reads flagged unmapped (0x4),
 * secondary (0x100), QC-fail (0x200) or duplicate (0x400) are left out; every aligned base of
 * an M/=/X CIGAR operation counts one; deletions (D) and reference skips (N) do not count
 * (`samtools depth -J` would count deletions); no mapping- or base-quality threshold; both
 * mates count where they overlap (no `-s`).
 */
import { execFile } from "node:child_process";
import { access, mkdir } from "node:fs/promises";
import { basename, join } from "node:path";
import { BamFile } from "@gmod/bam";
import { BigWig } from "@gmod/bbi";
import { AnnotationParser, annotationKindOf, detectAnnotationKind, type Feature } from "../../plots/data/annotation.js";
import { ChartError } from "../../plots/chart.js";
import { binCount, binDepth, binSizeFor, type CoverageTrack } from "../../plots/data/coverage.js";
import { checkBamHeader, checkBamIndex, checkBigWigHeader, checkBigWigIndex } from "./binary-checks.js";
import { ANNOTATION_MAX_BYTES, boundedLines, BoundedFile } from "./bounded-read.js";
import { messageOf } from "../../core/errors.js";

/** A BAM region is counted base by base: longer than this is refused (memory and time stay bounded). */
export const BAM_MAX_REGION = 10_000_000;
/** Records are fetched in windows this long, so one window's reads are in memory at a time. */
const BAM_WINDOW = 250_000;
/** `samtools index` of the BAM is stopped after this long (the render's own deadline is 10 minutes). */
export const SAMTOOLS_INDEX_TIMEOUT_MS = 8 * 60_000;
const FLAG_EXCLUDE = 0x4 | 0x100 | 0x200 | 0x400;
export const BAM_FILTER_NOTE = "depth as samtools depth counts it by default: reads flagged unmapped, secondary, QC-fail or duplicate are left out; deletions and reference skips are not counted; no mapping- or base-quality threshold; overlapping mates both count";

const exists = (p: string) => access(p).then(() => true, () => false);
const comma = (v: number) => Math.round(v).toLocaleString("en-US");
const regionText = (chr: string, s: number, e: number) => `${chr}:${comma(s)}-${comma(e)}`;

function contigList(names: readonly string[], max = 8): string {
  return names.slice(0, max).join(", ") + (names.length > max ? `, … (${names.length} in all)` : "");
}

/** The genes of an annotation file (kind from the extension, through .gz; else from the content), streamed line by line within the bounds of bounded-read.ts. */
export async function readAnnotation(path: string): Promise<Feature[]> {
  let parser: AnnotationParser | undefined;
  const head: string[] = [];
  const known = annotationKindOf(path);
  if (known) parser = new AnnotationParser(known);
  for await (const line of boundedLines(path, { maxBytes: ANNOTATION_MAX_BYTES, what: "the annotation file", why: "a whole-genome GTF is under 2 GB; keep the chromosomes you draw" })) {
    if (parser) { parser.line(line); continue; }
    head.push(line);
    if (head.length >= 200) { parser = new AnnotationParser(detectAnnotationKind(head)); for (const l of head) parser.line(l); }
  }
  if (!parser) { parser = new AnnotationParser(detectAnnotationKind(head)); for (const l of head) parser.line(l); }
  return parser.finish();
}

function run(cmd: string, args: readonly string[]): Promise<{ stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { maxBuffer: 4 << 20, timeout: SAMTOOLS_INDEX_TIMEOUT_MS, killSignal: "SIGKILL" }, (err, _stdout, stderr) => {
      if (err?.killed) reject(new ChartError(`indexing the BAM file (samtools index) took longer than ${SAMTOOLS_INDEX_TIMEOUT_MS / 60_000} minutes and was stopped; upload its .bai index next to it`));
      else if (err) reject(Object.assign(err, { stderr: String(stderr) }));
      else resolve({ stderr: String(stderr) });
    });
  });
}

/**
 * The BAM's index: `<bam>.bai` or `<bam minus .bam>.bai` when there is one (a `.csi` too),
 * else one built into `workDir` with `samtools index` (a .bai; a .csi when a contig is too
 * long for a .bai). An unsorted or broken BAM is the user's problem and says so.
 */
export async function ensureBamIndex(bamPath: string, workDir: string): Promise<string> {
  const stem = bamPath.replace(/\.bam$/i, "");
  for (const p of [`${bamPath}.bai`, `${stem}.bai`, `${bamPath}.csi`]) if (p !== bamPath && await exists(p)) return p;
  // samtools would allocate what a crafted header says (2^31 contigs): the header is checked first.
  await checkBamHeader(bamPath);
  await mkdir(workDir, { recursive: true });
  const out = join(workDir, `${basename(bamPath).replace(/[^A-Za-z0-9._-]+/g, "_") || "input"}.bai`);
  const unsorted = /unsorted|not sorted|NO_COOR reads not in a single block|out of order|cannot be indexed/i;
  const fail = (e: unknown): never => {
    if (e instanceof ChartError) throw e;
    const err = e as NodeJS.ErrnoException & { stderr?: string };
    if (err.code === "ENOENT") throw new Error("samtools is not installed on this server (needed to index the BAM file)", { cause: e });
    const msg = (err.stderr ?? err.message).trim().split("\n").filter(Boolean).slice(-2).join(" ");
    if (unsorted.test(msg)) throw new ChartError("the BAM file is not sorted by coordinate, so it cannot be indexed; sort it (samtools sort) and render again");
    throw new ChartError(`the BAM file could not be indexed (samtools index: ${msg || "failed"}); is it a valid BAM file?`);
  };
  try {
    await run("samtools", ["index", "-b", "-o", out, bamPath]);
    return out;
  } catch (e) {
    // A read past 2^29 (a contig longer than 512 Mb) fits only a CSI index; anything else is final.
    const msg = String((e as { stderr?: string }).stderr ?? "");
    if (e instanceof ChartError || !/cannot be indexed/i.test(msg)) fail(e);
  }
  const csi = out.replace(/\.bai$/, ".csi");
  try {
    await run("samtools", ["index", "-c", "-o", csi, bamPath]);
  } catch (e) {
    fail(e);
  }
  return csi;
}

/** Depth (or signal) over `region`, binned to about `bins` bins (1-bp bins when the region is shorter). */
export async function loadCoverage(input: { path: string; kind: "bam" | "bigwig"; indexPath?: string }, region: { chr: string; start: number; end: number }, bins: number, features: Feature[]): Promise<CoverageTrack> {
  return input.kind === "bam" ? loadBam(input.path, input.indexPath, region, bins, features) : loadBigWig(input.path, region, bins, features);
}

/** Clip a region to its contig's length; a start past the end is the user's mistake. */
function clip(region: { chr: string; start: number; end: number }, length: number | undefined, notes: string[]): { start: number; end: number } {
  if (length === undefined || length <= 0) return { start: region.start, end: region.end };
  if (region.start > length) throw new ChartError(`region ${regionText(region.chr, region.start, region.end)} starts past the end of ${region.chr}, which is ${comma(length)} bp long`);
  if (region.end > length) {
    notes.push(`the region asked for ends at ${region.end}; ${region.chr} is ${length} bp long, so it was drawn to ${length}`);
    return { start: region.start, end: length };
  }
  return { start: region.start, end: region.end };
}

async function loadBam(path: string, indexPath: string | undefined, region: { chr: string; start: number; end: number }, bins: number, features: Feature[]): Promise<CoverageTrack> {
  // The library trusts the file: the header and the index are checked first (binary-checks.ts), and it reads through a BoundedFile.
  const file = new BoundedFile(path, "the BAM file");
  const { nRef } = await checkBamHeader(path);
  const idx = indexPath ?? `${path}.bai`;
  await checkBamIndex(idx, await file.size(), nRef);
  const index = new BoundedFile(idx, "the BAM index");
  const bam = new BamFile(/\.csi$/i.test(idx) ? { bamFilehandle: file, csiFilehandle: index } : { bamFilehandle: file, baiFilehandle: index });
  try {
    await bam.getHeader();
  } catch (e) {
    if (e instanceof ChartError) throw e;
    throw new ChartError(`the file could not be read as a BAM file (${messageOf(e)})`);
  }
  const refs = bam.indexToChr ?? [];
  const id = bam.chrToIndex?.[region.chr];
  if (id === undefined) {
    const alt = region.chr.startsWith("chr") ? region.chr.slice(3) : `chr${region.chr}`;
    const hint = bam.chrToIndex?.[alt] !== undefined ? ` (did you mean ${alt}?)` : "";
    throw new ChartError(`contig ${region.chr} is not in the BAM file${hint}; its contigs are: ${contigList(refs.map((r) => r.refName))}`);
  }
  const notes: string[] = [];
  const { start, end } = clip(region, refs[id]?.length, notes);
  const length = end - start + 1;
  if (length > BAM_MAX_REGION) {
    throw new ChartError(`region ${regionText(region.chr, start, end)} is ${comma(length)} bp; a coverage track from a BAM file covers at most ${comma(BAM_MAX_REGION)} bp (a bigWig file can be drawn over whole chromosomes)`);
  }

  // Difference array over the region: +1 where an aligned block starts, −1 past its end.
  const diff = new Int32Array(length + 1);
  const s0 = start - 1, e0 = end; // 0-based half-open
  let reads = 0;
  for (let ws = s0; ws < e0; ws += BAM_WINDOW) {
    const we = Math.min(e0, ws + BAM_WINDOW);
    const records = await bam.getRecordsForRange(region.chr, ws, we).catch((e: unknown) => {
      if (e instanceof ChartError) throw e;
      throw new ChartError(`the BAM file could not be read in ${regionText(region.chr, ws + 1, we)} (${messageOf(e)}); is it corrupt or truncated?`);
    });
    for (const r of records) {
      // Each read is counted once: in the window where it starts (or the first window).
      if (r.start < ws && ws !== s0) continue;
      if (r.start >= we) continue;
      if (r.flags & FLAG_EXCLUDE) continue;
      let pos = r.start, counted = false;
      for (const op of r.NUMERIC_CIGAR) {
        const len = op >>> 4, code = op & 0xf;
        if (code === 0 || code === 7 || code === 8) {
          const a = Math.max(pos, s0), b = Math.min(pos + len, e0);
          if (b > a) { diff[a - s0]! += 1; diff[b - s0]! -= 1; counted = true; }
          pos += len;
        } else if (code === 2 || code === 3) pos += len;
      }
      if (counted) reads++;
    }
    bam.clearFeatureCache();
  }
  const depth = new Int32Array(length);
  let d = 0, any = false;
  for (let i = 0; i < length; i++) { d += diff[i]!; depth[i] = d; if (d > 0) any = true; }

  if (!any) {
    const withReads: string[] = [];
    for (let i = 0; i < refs.length && withReads.length < 6; i++) {
      const c = await bam.lineCount(refs[i]!.refName).catch(() => 0);
      if (c > 0) withReads.push(`${refs[i]!.refName} (${comma(c)} reads)`);
    }
    throw new ChartError(`no reads in ${regionText(region.chr, start, end)} (reads flagged unmapped, secondary, QC-fail or duplicate are not counted); `
      + (withReads.length ? `the file has reads on ${withReads.join(", ")}` : "the file's index lists no mapped reads at all"));
  }
  const binSize = binSizeFor(length, bins);
  const { values, max } = binDepth(depth, binSize);
  notes.push(BAM_FILTER_NOTE, `reads counted: ${reads}`);
  return { chr: region.chr, start, end, binSize, values, max, source: "bam", features, notes };
}

/** A bin's bases that bigWig data covers at most this many per bin are read unzoomed (exact values). */
const BIGWIG_RAW_MAX_BIN = 64;

async function loadBigWig(path: string, region: { chr: string; start: number; end: number }, bins: number, features: Feature[]): Promise<CoverageTrack> {
  // The library trusts the file: header, chromosome tree and the index nodes over the region are checked first (binary-checks.ts).
  const file = new BoundedFile(path, "the bigWig file");
  const layout = await checkBigWigHeader(file);
  const bw = new BigWig({ filehandle: file });
  let header;
  try {
    header = await bw.getHeader();
  } catch (e) {
    if (e instanceof ChartError) throw e;
    throw new ChartError(`the file could not be read as a bigWig file (${messageOf(e)})`);
  }
  const names = Object.keys(header.refsByName);
  const id = header.refsByName[region.chr];
  if (id === undefined) {
    const alt = region.chr.startsWith("chr") ? region.chr.slice(3) : `chr${region.chr}`;
    const hint = header.refsByName[alt] !== undefined ? ` (did you mean ${alt}?)` : "";
    throw new ChartError(`contig ${region.chr} is not in the bigWig file${hint}; its contigs are: ${contigList(names)}`);
  }
  const notes: string[] = [];
  const { start, end } = clip(region, header.refsByNumber[id]?.length, notes);
  const length = end - start + 1;
  const binSize = binSizeFor(length, bins);
  const n = binCount(length, binSize);
  const s0 = start - 1, e0 = end;
  const zoomed = binSize > BIGWIG_RAW_MAX_BIN && header.zoomLevels.length > 0;
  // A zoom level at most a quarter of a bin wide (the library picks reductionLevel ≤ 2 / scale).
  const chrId = layout.contigs.get(region.chr)?.id ?? id;
  for (const ix of zoomed ? layout.indexes : layout.indexes.slice(0, 1)) await checkBigWigIndex(file, ix, chrId, s0, e0);
  const feats = (await bw.getFeatures(region.chr, s0, e0, zoomed ? { scale: 8 / binSize } : { scale: 1 }).catch((e: unknown) => {
    if (e instanceof ChartError) throw e;
    throw new ChartError(`the bigWig file could not be read in ${regionText(region.chr, start, end)} (${messageOf(e)}); is it corrupt or truncated?`);
  })) as Array<{ start: number; end: number; score?: number; maxScore?: number; summary?: boolean }>;
  const sums = new Float64Array(n), max = new Float64Array(n);
  let any = false, summary = false;
  for (const f of feats) {
    const a = Math.max(f.start, s0), b = Math.min(f.end, e0);
    if (b <= a) continue;
    const score = f.score ?? 0;
    const top = f.maxScore ?? score;
    if (f.summary) summary = true;
    if (score !== 0 || top !== 0) any = true;
    for (let bin = Math.floor((a - s0) / binSize), last = Math.floor((b - 1 - s0) / binSize); bin <= last; bin++) {
      const lo = Math.max(a, s0 + bin * binSize), hi = Math.min(b, s0 + (bin + 1) * binSize);
      sums[bin]! += score * (hi - lo);
      if (top > max[bin]!) max[bin] = top;
    }
  }
  if (!any) {
    throw new ChartError(`no reads in ${regionText(region.chr, start, end)}: the bigWig file has no signal there (its contigs: ${contigList(names)})`);
  }
  const values = new Float64Array(n);
  for (let bin = 0; bin < n; bin++) values[bin] = sums[bin]! / (Math.min(e0, s0 + (bin + 1) * binSize) - (s0 + bin * binSize));
  notes.push(summary
    ? "bigWig values from a zoom level (precomputed summaries): a bin's mean weights each summary by its span, its max is the summaries' max; bases without data count as 0"
    : "bigWig values at full resolution; bases without data count as 0");
  return { chr: region.chr, start, end, binSize, values, max, source: "bigwig", features, notes };
}
