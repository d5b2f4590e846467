/**
 * A Manhattan plot's geometry. The x axis reads one of three ways (see xLayout): one
 * chromosome on a position axis in Mb, a few in panels of their own, or the whole genome end
 * to end (chromosomes as wide as their spans, labelled by name). The y axis is −log10 p; the
 * threshold lines are named in the right margin. Points that are not past the suggestive line
 * are thinned to one per plot cell (1 px column × THIN_BAND_PX px row band, the smallest p
 * kept), so a million SNPs draw fast and the SVG stays small; points past it are never thinned.
 */
import { scaleLinear } from "d3-scale";
import { ChartError, type Frame } from "../chart.js";
import { chromLabel, type Chromosomes, type SnpTable } from "../data/manhattan.js";
import { fmt } from "../data/numbers.js";
import { negLog10 } from "../data/pvalues.js";
import type { ManhattanOpts } from "../options.js";
import { BOTTOM_AXIS_HEIGHT, leftAxisWidth } from "./axes.js";
import { placeLabels, type PlacedLabel } from "./labels.js";
import { fitText, SIZE, textWidth } from "./text.js";

type Linear = ReturnType<typeof scaleLinear<number, number>>;

/** The thinning cell: one pixel column × this many pixel rows. */
export const THIN_BAND_PX = 2;
/** Up to this many chromosomes get a panel each with its own position scale (when they fit). */
export const MAX_PANELS = 4;
/** More chromosomes still get panels when every one holds a region no longer than this (fine-mapping loci). */
export const REGION_BP = 10_000_000;
/** The narrowest panel, and the gap between panels (px). */
const MIN_PANEL_PX = 120, PANEL_GAP = 28;
export const PAD = 14;

/** Where each chromosome starts on the genome axis (cumulative position) and which of the two colours it gets. */
export interface GenomeOffsets { widths: Float64Array; start: Float64Array; parity: Uint8Array; total: number }

/** Chromosomes end to end in plot order, each as wide as its SNPs' span (at least 0.2 % of all), with small gaps. */
export function genomeOffsets(ch: Chromosomes): GenomeOffsets {
  const { lo, hi, order } = ch;
  const k = lo.length;
  let spanSum = 0;
  for (let c = 0; c < k; c++) spanSum += hi[c]! - lo[c]!;
  if (spanSum === 0) spanSum = k;
  const widths = new Float64Array(k);
  let widthSum = 0;
  for (let c = 0; c < k; c++) { widths[c] = Math.max(hi[c]! - lo[c]!, spanSum * 0.002); widthSum += widths[c]!; }
  const gap = widthSum * Math.min(0.006, 0.2 / k);
  const start = new Float64Array(k), parity = new Uint8Array(k);
  let acc = 0;
  order.forEach((c, j) => { start[c] = acc - lo[c]!; parity[c] = j % 2; acc += widths[c]! + gap; });
  return { widths, start, parity, total: acc - gap };
}

export interface ManhattanFrame {
  W: number;
  H: number;
  title: string;
  top: number;
  bottom: number;
  left: number;
  right: number;
  /** −log10 p → px, and its (integer) ticks. */
  ys: Linear;
  yTicks: number[];
  /** Genome position (cumulative) → px, for the genome-wide axis. */
  xs: Linear;
  /** −log10 of the significance and suggestive lines. */
  sigY: number;
  sugY: number | undefined;
  /** The lines' names in the right margin (name, then `p = …`). */
  sigText: string[];
  sugText: string[] | undefined;
}

/** The title, the y scale up to the highest point or line, and the plot box with room for the lines' names on the right. */
export function manhattanFrame(t: SnpTable, floor: number, total: number, opts: ManhattanOpts, frame: Frame): ManhattanFrame {
  const n = t.p.n, P = t.p.a;
  const sigY = -Math.log10(opts.significance_line);
  const sugY = opts.suggestive_line === false ? undefined : -Math.log10(opts.suggestive_line);
  let ymax = Math.max(sigY, sugY ?? 0);
  for (let i = 0; i < n; i++) { const y = negLog10(P[i]!, floor); if (y > ymax) ymax = y; }
  const W = frame.width, H = frame.height;
  const title = fitText(frame.title ?? `Manhattan plot — ${frame.source}`, SIZE.title, W - 2 * PAD, true);
  const top = PAD + SIZE.title + 16;
  const bottom = H - PAD - BOTTOM_AXIS_HEIGHT;
  const ys = scaleLinear().domain([0, ymax * 1.05]).range([bottom, top]).nice();
  const yTicks = ys.ticks(6).filter((v) => Number.isInteger(v));
  const left = PAD + leftAxisWidth(yTicks.map((v) => fmt(v)));
  // The threshold lines are named in the right margin, off the points.
  const sigText = ["genome-wide", `p = ${fmt(opts.significance_line)}`];
  const sugText = opts.suggestive_line === false ? undefined : ["suggestive", `p = ${fmt(opts.suggestive_line)}`];
  const marginW = Math.max(...[...sigText, ...(sugText ?? [])].map((s) => textWidth(s, SIZE.label))) + 6;
  const right = W - PAD - marginW;
  if (right - left < 200 || bottom - top < 80) throw new ChartError(`the picture is too small for a Manhattan plot (${W}×${H} px); make it wider or taller`);
  const xs = scaleLinear().domain([0, total]).range([left + 3, right - 3]);
  return { W, H, title, top, bottom, left, right, ys, yTicks, xs, sigY, sugY, sigText, sugText };
}

/**
 * Ticks for a position axis (`data` in Mb): d3's ticks for about `want` of them, fewer if their
 * labels would come closer than 10 px or leave [minX, maxX]. When that leaves fewer than two
 * (a narrow panel whose round values sit at its ends), finer steps are tried, every tick or
 * every second or third, so that a panel still shows a scale.
 */
function positionTicks(data: Linear, scale: Linear, want: number, minX: number, maxX: number): { ticks: number[]; tickLabels: string[] } {
  const tries: Array<[number, number, number]> = []; // [count asked of d3, stride, offset]
  for (let n = want; n >= 1; n--) tries.push([n, 1, 0]);
  for (let n = want + 1; n <= want + 6; n++) for (let stride = 1; stride <= 3; stride++) for (let off = 0; off < stride; off++) tries.push([n, stride, off]);
  let best = { ticks: [] as number[], tickLabels: [] as string[] };
  for (const [n, stride, off] of tries) {
    const f = data.tickFormat(n);
    const vals = data.ticks(n).filter((v, i) => {
      const w = textWidth(f(v), SIZE.tick);
      return (i - off) % stride === 0 && scale(v) - w / 2 >= minX && scale(v) + w / 2 <= maxX;
    });
    const labels = vals.map(f);
    const clear = vals.every((v, i) => i === 0 || scale(v) - scale(vals[i - 1]!) >= (textWidth(labels[i]!, SIZE.tick) + textWidth(labels[i - 1]!, SIZE.tick)) / 2 + 10);
    if (clear && vals.length > best.ticks.length) best = { ticks: vals, tickLabels: labels };
    if (best.ticks.length >= 2) break;
  }
  return best;
}

export interface Panel { chrom: number; scale: Linear; ticks: number[]; tickLabels: string[]; title: string }
export interface XLayout { mode: "genome" | "region" | "panels"; ax: Float64Array; bx: Float64Array; panels: Panel[]; comment: string }

/**
 * How the x axis reads. One chromosome: its position in Mb across the whole plot. Two to
 * MAX_PANELS chromosomes, or more when every one is a region of at most REGION_BP (and each
 * panel gets MIN_PANEL_PX): one panel per chromosome with its own position ticks in Mb,
 * panels as wide as their spans (one px-per-Mb scale for all) except that none is narrower
 * than MIN_PANEL_PX (such a panel is drawn at a larger scale; its ticks say so). Otherwise
 * ("genome"): chromosomes end to end, labelled by name; ax/bx come from the genome scale. A
 * SNP is drawn at ax[c] + bx[c] × pos.
 */
export function xLayout(a: { order: readonly number[]; names: readonly string[]; lo: Float64Array; hi: Float64Array; left: number; right: number; W: number }, genome: GenomeOffsets, xs: Linear): XLayout {
  const k = a.order.length, plotW = a.right - a.left;
  const ax = new Float64Array(k), bx = new Float64Array(k);
  const fits = k * MIN_PANEL_PX + (k - 1) * PANEL_GAP <= plotW;
  const regional = a.order.every((c) => a.hi[c]! - a.lo[c]! <= REGION_BP);
  if (k > 1 && !(fits && (k <= MAX_PANELS || regional))) {
    for (let c = 0; c < k; c++) { ax[c] = xs(genome.start[c]!); bx[c] = (xs(genome.total) - xs(0)) / genome.total; }
    return { mode: "genome", ax, bx, panels: [], comment: "x axis: chromosomes end to end in plot order, each as wide as the span of its SNPs (cumulative position); ticks name the chromosomes" };
  }
  // Each panel's domain (Mb): the SNPs' span and 2 % either side (±5 kb around a single position).
  const dom = a.order.map((c) => {
    const span = a.hi[c]! - a.lo[c]!, pad = span > 0 ? span * 0.02 : 5_000;
    return [Math.max(0, a.lo[c]! - pad) / 1e6, (a.hi[c]! + pad) / 1e6] as const;
  });
  const { widths, floored } = panelWidths(dom, plotW - (k - 1) * PANEL_GAP);
  const panels = placePanels(a, dom, widths, ax, bx);
  const names = a.order.map((c) => chromLabel(a.names[c]!));
  const comment = k === 1
    ? `x axis: position on ${names[0]} in Mb (pos / 1,000,000)`
    : `x axis: one panel per chromosome (${names.join(", ")}), each with its own position ticks in Mb (pos / 1,000,000); panel widths ${floored.some((f) => f) ? `in proportion to the span of the SNPs, except ${a.order.filter((_, j) => floored[j]).map((c) => chromLabel(a.names[c]!)).join(", ")} (widened to ${MIN_PANEL_PX} px: a larger scale)` : "in proportion to the span of the SNPs (one scale for all)"}`;
  return { mode: k === 1 ? "region" : "panels", ax, bx, panels, comment };
}

/**
 * Panel widths in proportion to the domains (the 3 px inset at either end aside) sharing
 * `room` px; a panel under MIN_PANEL_PX gets that, the others share the rest.
 */
function panelWidths(dom: ReadonlyArray<readonly [number, number]>, room: number): { widths: number[]; floored: boolean[] } {
  const k = dom.length;
  const widths = new Array<number>(k).fill(0), floored = new Array<boolean>(k).fill(false);
  for (;;) {
    let free = room, sum = 0;
    for (let j = 0; j < k; j++) if (floored[j]) free -= MIN_PANEL_PX; else { free -= 6; sum += dom[j]![1] - dom[j]![0]; }
    let changed = false;
    for (let j = 0; j < k; j++) {
      widths[j] = floored[j] ? MIN_PANEL_PX : 6 + free * (dom[j]![1] - dom[j]![0]) / sum;
      if (!floored[j] && widths[j]! < MIN_PANEL_PX) { floored[j] = true; changed = true; }
    }
    if (!changed) break;
  }
  return { widths, floored };
}

/** The panels left to right: each one's scale, ticks and title; fills ax/bx of its chromosome. */
function placePanels(a: { order: readonly number[]; names: readonly string[]; left: number; W: number }, dom: ReadonlyArray<readonly [number, number]>, widths: readonly number[], ax: Float64Array, bx: Float64Array): Panel[] {
  const k = a.order.length;
  let pl = a.left - PANEL_GAP, prevRight = -Infinity;
  return a.order.map((c, j) => {
    const pw = widths[j]!;
    pl += (j === 0 ? 0 : widths[j - 1]!) + PANEL_GAP;
    const pr = pl + pw;
    const [d0, d1] = dom[j]!;
    const data = scaleLinear().domain([d0, d1]).range([pl + 3, pr - 3]);
    bx[c] = (data(d1) - data(d0)) / ((d1 - d0) * 1e6);
    ax[c] = data(d0) - bx[c]! * d0 * 1e6;
    // The axis line runs the panel's full width: the same mapping, its domain widened to [pl, pr].
    const scale = scaleLinear().domain([data.invert(pl), data.invert(pr)]).range([pl, pr]);
    // Tick labels may reach a little into the gaps (the outer ones into the margins, not past the
    // picture's padding) and stay 10 px apart, from each other and from the previous panel's.
    const reach = PANEL_GAP / 2 - 5;
    const minX = j === 0 ? PAD : Math.max(pl - reach, prevRight + 10), maxX = j === k - 1 ? a.W - PAD : pr + reach;
    const { ticks, tickLabels } = positionTicks(data, scale, Math.max(2, Math.round(pw / 110)), minX, maxX);
    prevRight = ticks.length ? scale(ticks.at(-1)!) + textWidth(tickLabels.at(-1)!, SIZE.tick) / 2 : pl;
    const name = chromLabel(a.names[c]!);
    const title = [`Position on ${name} (Mb)`, `${name} (Mb)`].find((t) => textWidth(t, SIZE.axis) <= pw) ?? fitText(name, SIZE.axis, pw);
    return { chrom: c, scale, ticks, tickLabels, title };
  });
}

/** Genome axis ticks at chromosome centres; a name that would touch its left neighbour is left out. */
export function genomeTicks(names: readonly string[], ch: Chromosomes, genome: GenomeOffsets, xs: Linear): { centres: number[]; tickLabels: string[] } {
  const centres: number[] = [], tickLabels: string[] = [];
  let lastRight = -Infinity;
  for (const c of ch.order) {
    const mid = genome.start[c]! + ch.lo[c]! + genome.widths[c]! / 2;
    centres.push(mid);
    const w = textWidth(names[c]!, SIZE.tick), px = xs(mid);
    if (px - w / 2 > lastRight + 3) { tickLabels.push(names[c]!); lastRight = px + w / 2; } else tickLabels.push("");
  }
  return { centres, tickLabels };
}

/** The points drawn: every SNP with p < keepP, the others thinned to the smallest p per plot cell; in x order. */
export interface Thinned { keepP: number; drawn: Uint32Array; /** x (px) of each drawn point, in `drawn` order. */ x: Float64Array }

export function thin(t: SnpTable, floor: number, x: XLayout, fr: ManhattanFrame, opts: ManhattanOpts): Thinned {
  const n = t.p.n, C = t.chr.a, POS = t.pos.a, P = t.p.a;
  const { ax, bx } = x;
  const keepP = opts.suggestive_line === false ? opts.significance_line : Math.max(opts.suggestive_line, opts.significance_line);
  const cols = Math.ceil(fr.right - fr.left) + 2, bands = Math.ceil((fr.bottom - fr.top) / THIN_BAND_PX) + 2;
  const cell = new Int32Array(cols * bands).fill(-1);
  const ky = fr.ys(0) - fr.ys(1); // px per −log10 unit
  const drawnIdx: number[] = [];
  for (let i = 0; i < n; i++) {
    const v = P[i]!;
    if (v < keepP) { drawnIdx.push(i); continue; }
    const col = Math.max(0, Math.min(cols - 1, Math.floor(ax[C[i]!]! + bx[C[i]!]! * POS[i]! - fr.left)));
    const band = Math.max(0, Math.min(bands - 1, Math.floor(negLog10(v, floor) * ky / THIN_BAND_PX)));
    const key = col * bands + band, cur = cell[key]!;
    if (cur < 0 || v < P[cur]!) cell[key] = i;
  }
  for (let j = 0; j < cell.length; j++) if (cell[j]! >= 0) drawnIdx.push(cell[j]!);
  const m = drawnIdx.length;
  const gx = new Float64Array(m);
  const idxArr = Uint32Array.from(drawnIdx);
  for (let j = 0; j < m; j++) { const i = idxArr[j]!; gx[j] = ax[C[i]!]! + bx[C[i]!]! * POS[i]!; } // px
  const perm = Array.from({ length: m }, (_, j) => j).sort((a, b) => gx[a]! - gx[b]! || idxArr[a]! - idxArr[b]!);
  return { keepP, drawn: Uint32Array.from(perm, (j) => idxArr[j]!), x: Float64Array.from(perm, (j) => gx[j]!) };
}

/** A threshold line's name placed in the right margin. */
export interface MarginText { y: number; text: string; sig: boolean }

/**
 * The threshold lines' names in the right margin: the name above the line's end and its p
 * below; when the two lines are too close for that, one line of text each ("p = …", the
 * colour and the TSV say which is which), pushed apart so they never touch.
 */
export function thresholdTexts(fr: ManhattanFrame): MarginText[] {
  const lineH = SIZE.label * 1.15;
  const marks: Array<{ y: number; lines: string[]; sig: boolean }> = [];
  if (fr.sugY !== undefined) marks.push({ y: fr.ys(fr.sugY), lines: fr.sugText!, sig: false });
  marks.push({ y: fr.ys(fr.sigY), lines: fr.sigText, sig: true });
  marks.sort((a, b) => a.y - b.y);
  const twoLines = marks.length < 2 || marks[1]!.y - marks[0]!.y >= 2 * (lineH + 3) + 2;
  if (twoLines) return marks.flatMap((m) => [{ y: m.y - 3 - lineH / 2, text: m.lines[0]!, sig: m.sig }, { y: m.y + 3 + lineH / 2, text: m.lines[1]!, sig: m.sig }]);
  const [a, b] = marks as [typeof marks[0], typeof marks[0]];
  const gap = lineH + 2, mid = (a.y + b.y) / 2;
  return [{ y: Math.min(a.y, mid - gap / 2), text: a.lines[1]!, sig: a.sig }, { y: Math.max(b.y, mid + gap / 2), text: b.lines[1]!, sig: b.sig }];
}

/** Labels for the lead SNPs `wanted` (most significant first), none overlapping. */
export function lociLabels(t: SnpTable, wanted: readonly number[], label: (i: number) => string, x: XLayout, fr: ManhattanFrame, floor: number): { placed: PlacedLabel[]; dropped: number } {
  const C = t.chr.a, POS = t.pos.a, P = t.p.a;
  const xOf = (i: number) => x.ax[C[i]!]! + x.bx[C[i]!]! * POS[i]!, yOf = (i: number) => fr.ys(negLog10(P[i]!, floor));
  return placeLabels(wanted.map((i) => ({ x: xOf(i), y: yOf(i), text: label(i) })), { x: fr.left + 2, y: fr.top - 8, w: fr.right - fr.left - 2, h: fr.bottom - fr.top + 6 }, [], 2.5);
}
