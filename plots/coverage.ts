/**
 * Coverage track (plot type `coverage_track`), the pure part: read depth (or a bigWig's
 * signal) over one region, binned to about one bin per pixel, drawn as a filled area — the
 * mean depth of each bin with a darker outline, and, when a bin holds more than one base,
 * the bin's maximum as a paler envelope behind it — on genomic coordinates, with the genes
 * of an annotation file that overlap the region drawn underneath (exons as boxes, introns as
 * lines, strand as chevrons, names never overlapping). The TSV holds one row per bin drawn.
 * Reading BAM / bigWig files happens in media/charts/coverage-data.ts.
 */
import { scaleLinear } from "d3-scale";
import type { Feature } from "./data/annotation.js";
import { type Chart, type Frame } from "./chart.js";
import { fmt } from "./data/numbers.js";
import { leftAxisWidth } from "./layout/axes.js";
import { SIZE, textWidth } from "./layout/text.js";
import { axis } from "./paint/axis.js";
import { esc, r2, text, svgDocument } from "./paint/svg.js";
import type { CoverageOpts } from "./options.js";

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

const COLOR = { outline: "#0072B2", mean: "#7DB4DD", max: "#C3DCF0", gene: "#2F2F2F" } as const;
const PAD = 14;
const GENE = { box: 10, line: 1.2, gap: 3, label: SIZE.label, row: 0, maxRows: 8 };
GENE.row = GENE.box + GENE.gap + GENE.label + 9;

const comma = (v: number) => Math.round(v).toLocaleString("en-US");

/** Cut a string with an ellipsis so it fits `w` px at `size`. */
function fit(s: string, w: number, size: number, bold = false): string {
  if (textWidth(s, size, bold) <= w) return s;
  let t = s;
  while (t.length > 1 && textWidth(t + "…", size, bold) > w) t = t.slice(0, -1);
  return t + "…";
}

/** Genomic tick values and labels for [start, end] over `px` pixels, none overlapping or leaving [lo, hi] px. */
function genomicTicks(start: number, end: number, x: (v: number) => number, px: number, lo: number, hi: number): { values: number[]; labels: string[]; unit: "bp" | "Mb" } {
  const span = end - start + 1;
  const unit = span >= 2_000_000 ? "Mb" : "bp";
  const widest = textWidth(unit === "Mb" ? "000.000" : comma(end), SIZE.tick);
  const n = Math.max(2, Math.floor(px / (widest + 28)));
  let values = scaleLinear().domain([start, end]).ticks(n).filter((v) => Number.isInteger(v) && v >= start && v <= end);
  if (values.length === 0) values = [start, end];
  let labels: string[];
  if (unit === "Mb") {
    const step = values.length > 1 ? values[1]! - values[0]! : span;
    const dec = Math.max(0, Math.min(6, Math.ceil(-Math.log10(step / 1e6) - 1e-9)));
    labels = values.map((v) => (v / 1e6).toFixed(dec));
  } else labels = values.map(comma);
  const keep = values.map((v, i) => { const w = textWidth(labels[i]!, SIZE.tick); return x(v) - w / 2 >= lo && x(v) + w / 2 <= hi; });
  return { values: values.filter((_, i) => keep[i]), labels: labels.filter((_, i) => keep[i]), unit };
}

interface PlacedGene { f: Feature; row: number; x0: number; x1: number; label: string; lx: number; bold: boolean }

/** Genes into rows: each row's genes (with their labels) never overlap. */
function packGenes(features: readonly Feature[], x: (v: number) => number, left: number, right: number, isBold: (f: Feature) => boolean): { placed: PlacedGene[]; rows: number; dropped: Feature[] } {
  const sorted = [...features].sort((a, b) => a.start - b.start || b.end - a.end);
  const rowEnds: number[] = [];
  const placed: PlacedGene[] = [], dropped: Feature[] = [];
  for (const f of sorted) {
    const x0 = Math.max(left, x(f.start - 0.5)), x1 = Math.min(right, x(f.end + 0.5));
    if (x1 < left || x0 > right) continue;
    const bold = isBold(f);
    const label = fit(f.name, right - left, GENE.label, bold);
    const lw = textWidth(label, GENE.label, bold);
    const lx = Math.min(right - lw / 2, Math.max(left + lw / 2, (x0 + x1) / 2));
    const a = Math.min(x0, lx - lw / 2), b = Math.max(x1, lx + lw / 2);
    let row = rowEnds.findIndex((e) => e + 8 <= a);
    if (row < 0 && rowEnds.length < GENE.maxRows) { row = rowEnds.length; rowEnds.push(-Infinity); }
    if (row < 0) { dropped.push(f); continue; }
    rowEnds[row] = b;
    placed.push({ f, row, x0, x1, label, lx, bold });
  }
  return { placed, rows: rowEnds.length, dropped };
}

/** SVG of one gene: the gene line, exon boxes, strand chevrons (white on exons), the name below. */
function drawGene(g: PlacedGene, y: number, x: (v: number) => number, bold: boolean): string {
  const mid = y + GENE.box / 2;
  const parts = [`<line x1="${r2(g.x0)}" y1="${r2(mid)}" x2="${r2(g.x1)}" y2="${r2(mid)}" stroke="${COLOR.gene}" stroke-width="${GENE.line}"/>`];
  const boxes: Array<[number, number]> = [];
  for (const [a, b] of g.f.exons) {
    const ex0 = Math.max(g.x0, x(a - 0.5)), ex1 = Math.min(g.x1, x(b + 0.5));
    if (ex1 < g.x0 || ex0 > g.x1) continue;
    const w = Math.max(1, ex1 - ex0);
    boxes.push([ex0, ex0 + w]);
    parts.push(`<rect x="${r2(ex0)}" y="${r2(y)}" width="${r2(w)}" height="${GENE.box}" fill="${COLOR.gene}"/>`);
  }
  if (g.f.strand !== ".") {
    const dir = g.f.strand === "+" ? 1 : -1, h = 2.6, step = 24;
    const n = Math.floor((g.x1 - g.x0) / step);
    for (let i = 0; i < n; i++) {
      const cx = g.x0 + (g.x1 - g.x0) * (i + 0.5) / n;
      const onExon = boxes.some(([a, b]) => cx - h >= a && cx + h <= b);
      parts.push(`<polyline points="${r2(cx - dir * h / 2)},${r2(mid - h)} ${r2(cx + dir * h / 2)},${r2(mid)} ${r2(cx - dir * h / 2)},${r2(mid + h)}" fill="none" stroke="${onExon ? "#ffffff" : COLOR.gene}" stroke-width="1"/>`);
    }
  }
  parts.push(text(g.lx, y + GENE.box + GENE.gap, g.label, { size: GENE.label, anchor: "middle", baseline: "hanging", fill: "#222", ...(bold ? { weight: "bold" as const } : {}) }));
  return `<g class="gene"><title>${esc(`${g.f.name} ${g.f.chr}:${comma(g.f.start)}-${comma(g.f.end)} (${g.f.strand})`)}</title>${parts.join("")}</g>`;
}

/** A step path through the bins: `[x0, x1, value]` per bin. */
function stepPoints(bins: ReadonlyArray<readonly [number, number, number]>, y: (v: number) => number): string {
  const pts: string[] = [];
  for (const [x0, x1, v] of bins) pts.push(`${r2(x0)},${r2(y(v))}`, `${r2(x1)},${r2(y(v))}`);
  return pts.join(" L");
}

export function coverageChart(track: CoverageTrack, opts: CoverageOpts, frame: Frame): Chart {
  const { chr, start, end, binSize } = track;
  const n = track.values.length;
  const length = end - start + 1;
  const W = frame.width, H = frame.height;
  const regionText = `${chr}:${comma(start)}-${comma(end)}`;
  const title = frame.title ?? `Coverage — ${frame.source} ${regionText}`;
  const isBam = track.source === "bam";

  // Summary: mean over every base of the region, the highest depth seen.
  let sum = 0, peak = 0;
  for (let b = 0; b < n; b++) {
    const bl = Math.min(end, start + (b + 1) * binSize - 1) - (start + b * binSize) + 1;
    sum += track.values[b]! * bl;
    peak = Math.max(peak, track.max[b]!, track.values[b]!);
  }
  const mean = sum / length;
  const showMax = binSize > 1;

  // Vertical layout: title, a summary line with the legend (the legend on a line of its own
  // when both do not fit), the depth panel, genes, the x axis.
  const titleY = PAD;
  const infoY = titleY + SIZE.title + 8;
  const xAxisRoom = 7 + SIZE.tick + 10 + SIZE.axis + 2;
  const y = scaleLinear().domain([0, Math.max(1, peak)]).nice(5);
  const yTicks = y.ticks(5);
  const yLabels = yTicks.map((v) => fmt(v));
  const left = PAD + leftAxisWidth(yLabels);
  const right = W - PAD - Math.max(8, textWidth(comma(end), SIZE.tick) / 2);

  const binText = binSize === 1 ? "1-bp bins" : `${comma(binSize)}-bp bins`;
  const info = `${isBam ? "Mean depth" : "Mean signal"} ${fmt(mean, 3)} · max ${fmt(peak, 3)} · ${binText}`;
  const legendItems: Array<[string, string, boolean]> = showMax ? [["mean per bin", COLOR.mean, true], ["max per bin", COLOR.max, false]] : [[isBam ? "depth per base" : "signal per base", COLOR.mean, true]];
  const legendW = legendItems.reduce((w, [label]) => w + 16 + textWidth(label, SIZE.legend) + 14, -14);
  const ownRow = left + textWidth(info, SIZE.legend) + 16 + legendW > right;
  const legendY = ownRow ? infoY + SIZE.legend + 6 : infoY;
  const top = legendY + SIZE.legend + 12;
  const plotBottom = Math.max(top + 40, H - PAD - xAxisRoom);
  y.range([plotBottom, top]);
  const x = scaleLinear().domain([start - 0.5, end + 0.5]).range([left, right]);

  const asked = opts.gene?.trim().toLowerCase();
  const isAsked = (f: Feature) => asked !== undefined && (f.name.toLowerCase() === asked || f.id?.toLowerCase() === asked || f.id?.toLowerCase().replace(/\.\d+$/, "") === asked);
  const genes = packGenes(track.features, x, left, right, isAsked);
  const geneTop = plotBottom + (genes.rows ? 10 : 0);
  const geneH = genes.rows ? genes.rows * GENE.row + 2 : 0;
  const axisY = geneTop + geneH;
  const height = axisY + xAxisRoom + PAD;

  const parts: string[] = [];
  const shownTitle = fit(title, W - 2 * PAD, SIZE.title, true);
  const tw = textWidth(shownTitle, SIZE.title, true);
  parts.push(text(Math.min(W - PAD - tw / 2, Math.max(PAD + tw / 2, (left + right) / 2)), titleY, shownTitle, { size: SIZE.title, weight: "bold", anchor: "middle", baseline: "hanging" }));
  parts.push(text(left, infoY, info, { size: SIZE.legend, baseline: "hanging", fill: "#333" }));
  let lx = ownRow ? left : right - legendW;
  for (const [label, color, outlined] of legendItems) {
    parts.push(`<rect x="${r2(lx)}" y="${r2(legendY + 1)}" width="11" height="${SIZE.legend - 2}" fill="${color}"${outlined ? ` stroke="${COLOR.outline}" stroke-width="1"` : ""}/>`);
    lx += 16;
    parts.push(text(lx, legendY, label, { size: SIZE.legend, baseline: "hanging", fill: "#333" }));
    lx += textWidth(label, SIZE.legend) + 14;
  }

  // Axes with grid lines; the x grid runs through the gene panel too.
  const xt = genomicTicks(start, end, x, right - left, 0, W);
  parts.push(axis(y, "left", left, isBam ? "Depth (reads)" : "Coverage (bigWig score)", { tickValues: yTicks, tickLabels: yLabels, grid: { from: left, to: right } }).svg);
  for (const v of xt.values) parts.push(`<line x1="${r2(x(v))}" y1="${r2(top)}" x2="${r2(x(v))}" y2="${r2(plotBottom)}" stroke="#eeeeee" stroke-width="1"/>`);

  // The depth: max envelope, mean area, mean outline.
  const bins: Array<[number, number, number]> = [];
  const binsMax: Array<[number, number, number]> = [];
  const rows: Array<Array<string | number>> = [];
  for (let b = 0; b < n; b++) {
    const bs = start + b * binSize, be = Math.min(end, bs + binSize - 1);
    const x0 = x(bs - 0.5), x1 = x(be + 0.5);
    bins.push([x0, x1, track.values[b]!]);
    binsMax.push([x0, x1, track.max[b]!]);
    rows.push([chr, bs, be, Math.round(track.values[b]! * 1000) / 1000, Math.round(track.max[b]! * 1000) / 1000]);
  }
  const base = `${r2(x(start - 0.5))},${r2(plotBottom)}`;
  const close = `L${r2(x(end + 0.5))},${r2(plotBottom)} Z`;
  if (showMax) parts.push(`<path d="M${base} L${stepPoints(binsMax, y)} ${close}" fill="${COLOR.max}" stroke="none"/>`);
  parts.push(`<path d="M${base} L${stepPoints(bins, y)} ${close}" fill="${COLOR.mean}" stroke="none"/>`);
  parts.push(`<path d="M${stepPoints(bins, y)}" fill="none" stroke="${COLOR.outline}" stroke-width="1.1" stroke-linejoin="round"/>`);
  // The panel's baseline and frame edges.
  parts.push(`<line x1="${r2(left)}" y1="${r2(plotBottom)}" x2="${r2(right)}" y2="${r2(plotBottom)}" stroke="#333" stroke-width="1"/>`);

  // Gene model.
  if (genes.rows) {
    parts.push(`<line x1="${r2(left)}" y1="${r2(geneTop - 5)}" x2="${r2(right)}" y2="${r2(geneTop - 5)}" stroke="#dddddd" stroke-width="0.8"/>`);
    for (const g of genes.placed) parts.push(drawGene(g, geneTop + g.row * GENE.row + 3, x, g.bold));
  }

  // The x axis at the bottom, in genomic coordinates.
  parts.push(axis(x, "bottom", axisY, `Position on ${chr} (${xt.unit})`, { tickValues: xt.values, tickLabels: xt.labels }).svg);

  const comments = [
    `coverage_track of ${frame.source}: ${track.source === "bam" ? "BAM" : "bigWig"}, region ${regionText} (${comma(length)} bp), ${n} bins of ${binSize} bp${n * binSize > length ? ` (the last one ${length - (n - 1) * binSize} bp)` : ""}`,
    ...(track.notes ?? []),
    `${isBam ? "mean depth" : "mean signal"} over the region ${fmt(mean, 4)}; highest ${fmt(peak, 4)}`,
  ];
  if (genes.placed.length) comments.push(`genes drawn (${genes.placed.length}): ${genes.placed.slice(0, 40).map((g) => `${g.f.name} ${g.f.chr}:${g.f.start}-${g.f.end} ${g.f.strand}`).join("; ")}${genes.placed.length > 40 ? "; …" : ""}`);
  if (genes.dropped.length) comments.push(`genes not drawn (no room in ${GENE.maxRows} rows): ${genes.dropped.length} — ${genes.dropped.slice(0, 20).map((f) => f.name).join(", ")}${genes.dropped.length > 20 ? ", …" : ""}`);
  comments.push("columns: start and end are 1-based inclusive; mean_depth is the mean over the bin's bases, max_depth the highest");

  return {
    svg: svgDocument(W, height, parts.join(""), title),
    width: W,
    height: Math.round(height),
    data: { header: ["chr", "start", "end", "mean_depth", "max_depth"], rows, comments },
  };
}
