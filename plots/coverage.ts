/**
 * Coverage track (plot type `coverage_track`): read depth (or a bigWig's signal) over one
 * region, binned to about one bin per pixel, drawn as a filled area on genomic coordinates
 * with the genes of an annotation file that overlap the region drawn underneath. The TSV
 * holds one row per bin drawn. This module composes data/coverage.ts → layout/coverage.ts →
 * paint/coverage.ts; reading BAM / bigWig files happens in media/charts/coverage-data.ts.
 */
import type { Chart, Frame } from "./chart.js";
import { coverageSummary, isAskedGene, type CoverageTrack } from "./data/coverage.js";
import { comma, fmt } from "./data/numbers.js";
import { coverageLayout, GENE, type CoverageLayout } from "./layout/coverage.js";
import type { CoverageOpts } from "./options.js";
import { coverageDepth, coverageGenesAndAxis, coverageHeader } from "./paint/coverage.js";
import { svgDocument } from "./paint/svg.js";

export function coverageChart(track: CoverageTrack, opts: CoverageOpts, frame: Frame): Chart {
  const regionText = `${track.chr}:${comma(track.start)}-${comma(track.end)}`;
  const title = frame.title ?? `Coverage — ${frame.source} ${regionText}`;
  const summary = coverageSummary(track);
  const lay = coverageLayout(track, summary, isAskedGene(opts.gene), title, frame);
  const body = coverageHeader(lay) + coverageDepth(track, lay) + coverageGenesAndAxis(track, lay);
  return {
    svg: svgDocument(lay.W, lay.height, body, title),
    width: lay.W,
    height: Math.round(lay.height),
    data: { header: ["chr", "start", "end", "mean_depth", "max_depth"], rows: coverageRows(track), comments: coverageComments(track, summary, lay, regionText, frame) },
  };
}

/** One TSV row per bin: its 1-based inclusive bases, mean and max (to 0.001). */
function coverageRows(track: CoverageTrack): Array<Array<string | number>> {
  const { chr, start, end, binSize } = track;
  const rows: Array<Array<string | number>> = [];
  for (let b = 0; b < track.values.length; b++) {
    const bs = start + b * binSize, be = Math.min(end, bs + binSize - 1);
    rows.push([chr, bs, be, Math.round(track.values[b]! * 1000) / 1000, Math.round(track.max[b]! * 1000) / 1000]);
  }
  return rows;
}

/** The TSV's comments: source, region and bins, the reader's notes, the summary, genes drawn and not. */
function coverageComments(track: CoverageTrack, summary: { mean: number; peak: number }, lay: CoverageLayout, regionText: string, frame: Frame): string[] {
  const { binSize } = track;
  const n = track.values.length, length = track.end - track.start + 1;
  const isBam = track.source === "bam";
  const { placed, dropped } = lay.genes;
  const comments = [
    `coverage_track of ${frame.source}: ${track.source === "bam" ? "BAM" : "bigWig"}, region ${regionText} (${comma(length)} bp), ${n} bins of ${binSize} bp${n * binSize > length ? ` (the last one ${length - (n - 1) * binSize} bp)` : ""}`,
    ...(track.notes ?? []),
    `${isBam ? "mean depth" : "mean signal"} over the region ${fmt(summary.mean, 4)}; highest ${fmt(summary.peak, 4)}`,
  ];
  if (placed.length) comments.push(`genes drawn (${placed.length}): ${placed.slice(0, 40).map((g) => `${g.f.name} ${g.f.chr}:${g.f.start}-${g.f.end} ${g.f.strand}`).join("; ")}${placed.length > 40 ? "; …" : ""}`);
  if (dropped.length) comments.push(`genes not drawn (no room in ${GENE.maxRows} rows): ${dropped.length} — ${dropped.slice(0, 20).map((f) => f.name).join(", ")}${dropped.length > 20 ? ", …" : ""}`);
  comments.push("columns: start and end are 1-based inclusive; mean_depth is the mean over the bin's bases, max_depth the highest");
  return comments;
}
