/**
 * A coverage track's data: read depth (or a bigWig's signal) over one region, binned to about
 * one bin per pixel (mean and maximum per bin), with the annotation's genes that overlap the
 * region; the region's summary (mean over every base, highest value) and which gene was asked
 * for. Reading BAM / bigWig files into a track happens in media/charts/coverage-data.ts.
 */
import type { Feature } from "./annotation.js";

export interface CoverageTrack {
  chr: string;
  /** 1-based inclusive region drawn. */
  start: number;
  end: number;
  /** Bases per bin (the last bin may be shorter). */
  binSize: number;
  /** Mean depth per bin. */
  values: Float64Array;
  /** Max depth per bin. */
  max: Float64Array;
  source: "bam" | "bigwig";
  /** Annotation features overlapping the region (may be empty). */
  features: Feature[];
  /** Lines for the TSV's comments from the reader: filters applied, reads counted, zoom level. */
  notes?: string[];
}

/** Bases per bin for a region of `length` bases drawn in about `bins` bins (1-bp bins when the region is smaller). */
export const binSizeFor = (length: number, bins: number): number => Math.max(1, Math.ceil(length / Math.max(1, Math.floor(bins))));

/** Number of bins of `binSize` bases covering `length` bases. */
export const binCount = (length: number, binSize: number): number => Math.ceil(length / binSize);

/**
 * Per-base depth (`depth[i]` is the depth at `start + i`) → mean and max per bin of `binSize`
 * bases; the last bin averages over the bases it holds.
 */
export function binDepth(depth: ArrayLike<number>, binSize: number): { values: Float64Array; max: Float64Array } {
  const n = binCount(depth.length, binSize);
  const values = new Float64Array(n), max = new Float64Array(n);
  for (let b = 0; b < n; b++) {
    const lo = b * binSize, hi = Math.min(depth.length, lo + binSize);
    let sum = 0, mx = 0;
    for (let i = lo; i < hi; i++) { const d = depth[i]!; sum += d; if (d > mx) mx = d; }
    values[b] = sum / (hi - lo);
    max[b] = mx;
  }
  return { values, max };
}

/** Mean over every base of the region (bins weighted by the bases they hold), and the highest value seen. */
export function coverageSummary(track: CoverageTrack): { mean: number; peak: number } {
  const { start, end, binSize } = track;
  let sum = 0, peak = 0;
  for (let b = 0; b < track.values.length; b++) {
    const bl = Math.min(end, start + (b + 1) * binSize - 1) - (start + b * binSize) + 1;
    sum += track.values[b]! * bl;
    peak = Math.max(peak, track.max[b]!, track.values[b]!);
  }
  return { mean: sum / (end - start + 1), peak };
}

/** Whether a feature is the gene asked for (by name or identifier, a version suffix optional), case-insensitive. */
export function isAskedGene(gene: string | undefined): (f: Feature) => boolean {
  const asked = gene?.trim().toLowerCase();
  return (f) => asked !== undefined && (f.name.toLowerCase() === asked || f.id?.toLowerCase() === asked || f.id?.toLowerCase().replace(/\.\d+$/, "") === asked);
}
