/**
 * A coverage track's geometry: the title, a summary line with the legend beside it (on a line
 * of its own when both do not fit), the depth panel and its y scale, the genes packed into
 * rows under it (names never overlapping; at most GENE.maxRows rows), and the x axis in
 * genomic coordinates (bp, or Mb for regions of 2 Mb and more) at the bottom.
 */
import { scaleLinear } from "d3-scale";
import type { Frame } from "../chart.js";
import type { Feature } from "../data/annotation.js";
import type { CoverageTrack } from "../data/coverage.js";
import { comma, fmt } from "../data/numbers.js";
import { BOTTOM_AXIS_HEIGHT, leftAxisWidth } from "./axes.js";
import { SIZE, textWidth } from "./text.js";

type Linear = ReturnType<typeof scaleLinear<number, number>>;

export const PAD = 14;
/** A gene's drawing: exon box height, line width, gap to its name, name size, row height, most rows. */
export const GENE = { box: 10, line: 1.2, gap: 3, label: SIZE.label, row: 0, maxRows: 8 };
GENE.row = GENE.box + GENE.gap + GENE.label + 9;

/** Cut a string with an ellipsis so it fits `w` px at `size`. */
function cutToWidth(s: string, w: number, size: number, bold = false): string {
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

export interface PlacedGene { f: Feature; row: number; x0: number; x1: number; label: string; lx: number; bold: boolean }

/** Genes into rows: each row's genes (with their labels) never overlap. */
function packGenes(features: readonly Feature[], x: (v: number) => number, left: number, right: number, isBold: (f: Feature) => boolean): { placed: PlacedGene[]; rows: number; dropped: Feature[] } {
  const sorted = [...features].sort((a, b) => a.start - b.start || b.end - a.end);
  const rowEnds: number[] = [];
  const placed: PlacedGene[] = [], dropped: Feature[] = [];
  for (const f of sorted) {
    const x0 = Math.max(left, x(f.start - 0.5)), x1 = Math.min(right, x(f.end + 0.5));
    if (x1 < left || x0 > right) continue;
    const bold = isBold(f);
    const label = cutToWidth(f.name, right - left, GENE.label, bold);
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

export interface CoverageLayout {
  W: number;
  /** The picture's height: as tall as the genes need (the frame's height is where the depth panel would end). */
  height: number;
  title: { text: string; x: number; y: number };
  info: { text: string; y: number };
  /** The legend: where it starts, its row, and its entries (a mean entry is drawn outlined). */
  legend: { x: number; y: number; items: Array<{ label: string; kind: "mean" | "max" }> };
  left: number;
  right: number;
  top: number;
  plotBottom: number;
  x: Linear;
  y: Linear;
  yTicks: number[];
  yLabels: string[];
  xTicks: { values: number[]; labels: string[]; unit: "bp" | "Mb" };
  genes: { placed: PlacedGene[]; rows: number; dropped: Feature[] };
  geneTop: number;
  axisY: number;
}

/** The whole vertical layout and both scales; `title` is the full title (cut to fit here). */
export function coverageLayout(track: CoverageTrack, summary: { mean: number; peak: number }, isAsked: (f: Feature) => boolean, title: string, frame: Frame): CoverageLayout {
  const { start, end, binSize } = track;
  const W = frame.width, H = frame.height;
  const isBam = track.source === "bam";
  const infoY = PAD + SIZE.title + 8;
  const y = scaleLinear().domain([0, Math.max(1, summary.peak)]).nice(5);
  const yTicks = y.ticks(5);
  const yLabels = yTicks.map((v) => fmt(v));
  const left = PAD + leftAxisWidth(yLabels);
  const right = W - PAD - Math.max(8, textWidth(comma(end), SIZE.tick) / 2);
  const binText = binSize === 1 ? "1-bp bins" : `${comma(binSize)}-bp bins`;
  const info = `${isBam ? "Mean depth" : "Mean signal"} ${fmt(summary.mean, 3)} · max ${fmt(summary.peak, 3)} · ${binText}`;
  const items: CoverageLayout["legend"]["items"] = binSize > 1 ? [{ label: "mean per bin", kind: "mean" }, { label: "max per bin", kind: "max" }] : [{ label: isBam ? "depth per base" : "signal per base", kind: "mean" }];
  const legendW = items.reduce((w, { label }) => w + 16 + textWidth(label, SIZE.legend) + 14, -14);
  const ownRow = left + textWidth(info, SIZE.legend) + 16 + legendW > right;
  const legendY = ownRow ? infoY + SIZE.legend + 6 : infoY;
  const top = legendY + SIZE.legend + 12;
  const plotBottom = Math.max(top + 40, H - PAD - BOTTOM_AXIS_HEIGHT);
  y.range([plotBottom, top]);
  const x = scaleLinear().domain([start - 0.5, end + 0.5]).range([left, right]);
  const genes = packGenes(track.features, x, left, right, isAsked);
  const geneTop = plotBottom + (genes.rows ? 10 : 0);
  const geneH = genes.rows ? genes.rows * GENE.row + 2 : 0;
  const axisY = geneTop + geneH;
  const shownTitle = cutToWidth(title, W - 2 * PAD, SIZE.title, true);
  const tw = textWidth(shownTitle, SIZE.title, true);
  return {
    W, height: axisY + BOTTOM_AXIS_HEIGHT + PAD,
    title: { text: shownTitle, x: Math.min(W - PAD - tw / 2, Math.max(PAD + tw / 2, (left + right) / 2)), y: PAD },
    info: { text: info, y: infoY },
    legend: { x: ownRow ? left : right - legendW, y: legendY, items },
    left, right, top, plotBottom, x, y, yTicks, yLabels,
    xTicks: genomicTicks(start, end, x, right - left, 0, W),
    genes, geneTop, axisY,
  };
}
