/**
 * Manhattan plot (plot type `manhattan_plot`), the pure part: −log10 p of every SNP of a GWAS
 * summary-statistics file along the genome, rows streamed one at a time into typed arrays.
 * Chromosomes run in natural order (1…22, X, Y, MT, then other contigs sorted), in two
 * alternating colours, placed end to end with a small gap and labelled by name — or, for one
 * chromosome or a few, on position axes in Mb (see xLayout); the genome-wide significance line
 * is solid, the suggestive line dashed; the best SNP of each genome-wide significant locus is
 * labelled. A million points stay fast and the SVG small: points that are not past the
 * suggestive line are thinned to one per plot cell (1 px column × 2 px row band; the smallest
 * p in each cell is kept) — points past the suggestive line are never thinned. The TSV lists
 * exactly the points drawn.
 */
import { scaleLinear } from "d3-scale";
import { ChartError, type Chart, type Frame, type TableSink } from "./chart.js";
import { findColumn, optionalColumn } from "./data/columns.js";
import { fastNumber, fmt } from "./data/numbers.js";
import { leftAxisWidth } from "./layout/axes.js";
import { placeLabels } from "./layout/labels.js";
import { fitText, SIZE, textWidth } from "./layout/text.js";
import { axis } from "./paint/axis.js";
import { PALETTE } from "./paint/colours.js";
import { drawLabels } from "./paint/labels.js";
import { r2, svgDocument, text } from "./paint/svg.js";
import type { ManhattanOpts } from "./options.js";

export const MANHATTAN_COLUMNS = {
  chr: ["chr", "CHR", "chrom", "chromosome", "CHROM", "#CHROM", "#chrom"],
  pos: ["pos", "BP", "position", "POS", "base_pair_location", "bp"],
  pvalue: ["p", "P", "pval", "p_value", "PVAL", "P_BOLT_LMM", "p.value", "P.value", "pvalue"],
  snp: ["snp", "SNP", "rsid", "variant_id", "ID", "MarkerName", "rs"],
} as const;

/** More rows than this is not a Manhattan plot any more: the file is refused (memory stays bounded). */
export const MAX_MANHATTAN_ROWS = 10_000_000;
/** The thinning cell: one pixel column × this many pixel rows. */
export const THIN_BAND_PX = 2;
/** Two SNPs closer than this on one chromosome belong to one locus (one label). */
export const LOCUS_BP = 500_000;
/** Alternating chromosome colours (Okabe–Ito blue and a mid grey). */
export const MANHATTAN_COLORS = [PALETTE[0], "#8c8c8c"] as const;
const SIGNIFICANCE_COLOR = PALETTE[3];
const PAD = 14;
const POINT_R = 1.7;
const BLOCK = 4096;

/** `chr1` / `Chr1` / `1` → `1`, `chrX` → `X`, `M` / `chrM` / `MT` → `MT`; other contigs as written. */
export function chromName(raw: string): string {
  const s = raw.trim().replace(/^chr(?:om(?:osome)?)?[_-]?/i, "");
  if (s === "") return raw.trim();
  if (/^(m|mt)$/i.test(s)) return "MT";
  if (/^[xy]$/i.test(s)) return s.toUpperCase();
  if (/^\d+$/.test(s)) return String(Number(s));
  return s;
}

const collator = new Intl.Collator("en", { numeric: true, sensitivity: "base" });
const SEX: Record<string, number> = { X: 0, Y: 1, XY: 2, MT: 3 };
/** Natural chromosome order: numbers ascending, then X, Y, XY, MT, then other contigs (natural sort). */
export function compareChrom(a: string, b: string): number {
  const rank = (c: string): [number, number] => /^\d+$/.test(c) ? [0, Number(c)] : c in SEX ? [1, SEX[c]!] : [2, 0];
  const [ra, va] = rank(a), [rb, vb] = rank(b);
  return ra - rb || va - vb || collator.compare(a, b) || (a < b ? -1 : a > b ? 1 : 0);
}

/** Up to this many chromosomes get a panel each with its own position scale (when they fit). */
export const MAX_PANELS = 4;
/** More chromosomes still get panels when every one holds a region no longer than this (fine-mapping loci). */
export const REGION_BP = 10_000_000;
/** The narrowest panel, and the gap between panels (px). */
const MIN_PANEL_PX = 120, PANEL_GAP = 28;

/** `2` → `chr2`, `X` → `chrX`, `MT` → `chrMT`; other contigs as written. */
export const chromLabel = (name: string) => (/^(\d+|X|Y|XY|MT)$/.test(name) ? `chr${name}` : name);

/**
 * Ticks for a position axis (`data` in Mb): d3's ticks for about `want` of them, fewer if their
 * labels would come closer than 10 px or leave [minX, maxX]. When that leaves fewer than two
 * (a narrow panel whose round values sit at its ends), finer steps are tried, every tick or
 * every second or third, so that a panel still shows a scale.
 */
function positionTicks(data: ReturnType<typeof scaleLinear<number, number>>, scale: ReturnType<typeof scaleLinear<number, number>>, want: number, minX: number, maxX: number): { ticks: number[]; tickLabels: string[] } {
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

interface Panel { chrom: number; scale: ReturnType<typeof scaleLinear<number, number>>; ticks: number[]; tickLabels: string[]; title: string }
interface XLayout { mode: "genome" | "region" | "panels"; ax: Float64Array; bx: Float64Array; panels: Panel[]; comment: string }

/**
 * How the x axis reads. One chromosome: its position in Mb across the whole plot. Two to
 * MAX_PANELS chromosomes, or more when every one is a region of at most REGION_BP (and each
 * panel gets MIN_PANEL_PX): one panel per chromosome with its own position ticks in Mb,
 * panels as wide as their spans (one px-per-Mb scale for all) except that none is narrower
 * than MIN_PANEL_PX (such a panel is drawn at a larger scale; its ticks say so). Otherwise
 * ("genome"): chromosomes end to end, labelled by name; the caller fills ax/bx then. A SNP
 * is drawn at ax[c] + bx[c] × pos.
 */
function xLayout(a: { order: readonly number[]; names: readonly string[]; lo: Float64Array; hi: Float64Array; left: number; right: number; W: number }): XLayout {
  const k = a.order.length, plotW = a.right - a.left;
  const ax = new Float64Array(k), bx = new Float64Array(k);
  const fits = k * MIN_PANEL_PX + (k - 1) * PANEL_GAP <= plotW;
  const regional = a.order.every((c) => a.hi[c]! - a.lo[c]! <= REGION_BP);
  if (k > 1 && !(fits && (k <= MAX_PANELS || regional))) {
    return { mode: "genome", ax, bx, panels: [], comment: "x axis: chromosomes end to end in plot order, each as wide as the span of its SNPs (cumulative position); ticks name the chromosomes" };
  }
  // Each panel's domain (Mb): the SNPs' span and 2 % either side (±5 kb around a single position).
  const dom = a.order.map((c) => {
    const span = a.hi[c]! - a.lo[c]!, pad = span > 0 ? span * 0.02 : 5_000;
    return [Math.max(0, a.lo[c]! - pad) / 1e6, (a.hi[c]! + pad) / 1e6] as const;
  });
  // Widths in proportion to the domains (the 3 px inset at either end aside); a panel under
  // MIN_PANEL_PX gets that, the others share the rest.
  const room = plotW - (k - 1) * PANEL_GAP;
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
  let pl = a.left - PANEL_GAP, prevRight = -Infinity;
  const panels: Panel[] = a.order.map((c, j) => {
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
  const names = a.order.map((c) => chromLabel(a.names[c]!));
  const comment = k === 1
    ? `x axis: position on ${names[0]} in Mb (pos / 1,000,000)`
    : `x axis: one panel per chromosome (${names.join(", ")}), each with its own position ticks in Mb (pos / 1,000,000); panel widths ${floored.some((f) => f) ? `in proportion to the span of the SNPs, except ${a.order.filter((_, j) => floored[j]).map((c) => chromLabel(a.names[c]!)).join(", ")} (widened to ${MIN_PANEL_PX} px: a larger scale)` : "in proportion to the span of the SNPs (one scale for all)"}`;
  return { mode: k === 1 ? "region" : "panels", ax, bx, panels, comment };
}

class Grow {
  chr = new Uint16Array(1 << 14);
  pos = new Float64Array(1 << 14);
  p = new Float64Array(1 << 14);
  n = 0;
  push(c: number, pos: number, p: number) {
    if (this.n === this.chr.length) {
      const cap = this.n * 2;
      const c2 = new Uint16Array(cap); c2.set(this.chr); this.chr = c2;
      const p2 = new Float64Array(cap); p2.set(this.pos); this.pos = p2;
      const q2 = new Float64Array(cap); q2.set(this.p); this.p = q2;
    }
    this.chr[this.n] = c; this.pos[this.n] = pos; this.p[this.n] = p; this.n++;
  }
}

export function manhattanChart(header: readonly string[], opts: ManhattanOpts, frame: Frame): TableSink {
  const chrCol = findColumn(header, opts.chr_col, MANHATTAN_COLUMNS.chr, "chr_col", "chromosome");
  const posCol = findColumn(header, opts.pos_col, MANHATTAN_COLUMNS.pos, "pos_col", "position");
  const pCol = findColumn(header, opts.pvalue_col, MANHATTAN_COLUMNS.pvalue, "pvalue_col", "p-value");
  const snpCol = opts.snp_col !== undefined ? findColumn(header, opts.snp_col, [], "snp_col", "SNP") : optionalColumn(header, MANHATTAN_COLUMNS.snp);
  const names = { chr: header[chrCol]!, pos: header[posCol]!, p: header[pCol]!, snp: snpCol !== undefined ? header[snpCol]! : undefined };

  const data = new Grow();
  const chromIndex = new Map<string, number>();
  const chromNames: string[] = [];
  const rawToIndex = new Map<string, number>();
  // SNP ids in blocks of BLOCK joined by "\n": flat strings, no per-row objects kept.
  const idBlocks: string[] = [];
  let idBuf: string[] = [];
  let rows = 0, badChr = 0, badPos = 0, badP = 0, skipped = 0;

  return {
    row(cells) {
      if (++rows > MAX_MANHATTAN_ROWS) throw new ChartError(`the file has more than ${MAX_MANHATTAN_ROWS.toLocaleString("en-US")} rows, too many for a Manhattan plot (at most ${MAX_MANHATTAN_ROWS.toLocaleString("en-US")}); filter it first, e.g. keep SNPs with p < 0.01, or split it by chromosome`);
      const rawChr = cells[chrCol] ?? "";
      const pos = fastNumber(cells[posCol]);
      let p = fastNumber(cells[pCol]);
      if (p !== undefined && (p < 0 || p > 1)) p = undefined;
      let ci = rawToIndex.get(rawChr);
      const chrOk = ci !== undefined || (rawChr.trim() !== "" && !/^(na|nan|\.)$/i.test(rawChr.trim()));
      const posOk = pos !== undefined && pos >= 0;
      if (!chrOk || !posOk || p === undefined) {
        if (!chrOk) badChr++;
        if (!posOk) badPos++;
        if (p === undefined) badP++;
        skipped++;
        return;
      }
      if (ci === undefined) {
        const name = chromName(rawChr);
        ci = chromIndex.get(name);
        if (ci === undefined) {
          if (chromNames.length >= 65_535) throw new ChartError(`the file names more than 65,535 chromosomes or contigs (column "${names.chr}"); a Manhattan plot needs far fewer: keep the assembled chromosomes`);
          ci = chromNames.length;
          chromNames.push(name);
          chromIndex.set(name, ci);
        }
        if (rawToIndex.size < 100_000) rawToIndex.set(rawChr, ci);
      }
      data.push(ci, pos, p);
      if (snpCol !== undefined) {
        let id = cells[snpCol] ?? "";
        if (id.includes("\n") || id.includes("\r")) id = id.replace(/[\n\r]/g, " ");
        idBuf.push(id);
        if (idBuf.length === BLOCK) { idBlocks.push(idBuf.join("\n")); idBuf = []; }
      }
    },
    finish(): Chart {
      if (data.n === 0) throw new ChartError(`no row has a chromosome, a numeric position and a p-value between 0 and 1 (${rows} data rows read; ${badChr} without a chromosome in "${names.chr}", ${badPos} without a numeric "${names.pos}", ${badP} without a numeric "${names.p}")`);
      if (idBuf.length) { idBlocks.push(idBuf.join("\n")); idBuf = []; }
      return draw();
    },
  };

  function draw(): Chart {
    const n = data.n, C = data.chr, POS = data.pos, P = data.p;
    const k = chromNames.length;
    // Chromosome extents and order.
    const lo = new Float64Array(k).fill(Infinity), hi = new Float64Array(k).fill(-Infinity);
    let minPos = Infinity, zeros = 0;
    for (let i = 0; i < n; i++) {
      const c = C[i]!, x = POS[i]!, v = P[i]!;
      if (x < lo[c]!) lo[c] = x;
      if (x > hi[c]!) hi[c] = x;
      if (v === 0) zeros++; else if (v < minPos) minPos = v;
    }
    const floor = Number.isFinite(minPos) ? minPos : 1e-300;
    const order = chromNames.map((_, i) => i).sort((a, b) => compareChrom(chromNames[a]!, chromNames[b]!));
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
    const total = acc - gap;

    // Scales and frame.
    const sigY = -Math.log10(opts.significance_line);
    const sugY = opts.suggestive_line === false ? undefined : -Math.log10(opts.suggestive_line);
    let ymax = Math.max(sigY, sugY ?? 0);
    for (let i = 0; i < n; i++) { const v = P[i]!; const y = -Math.log10(v === 0 ? floor : v); if (y > ymax) ymax = y; }
    const W = frame.width, H = frame.height;
    const title = fitText(frame.title ?? `Manhattan plot — ${frame.source}`, SIZE.title, W - 2 * PAD, true);
    const top = PAD + SIZE.title + 16;
    const bottom = H - PAD - (7 + SIZE.tick + 10 + SIZE.axis + 2);
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

    // The x axis (see xLayout): a SNP is drawn at ax[c] + bx[c] × pos px.
    const layout = xLayout({ order, names: chromNames, lo, hi, left, right, W });
    const { ax, bx } = layout;
    if (layout.mode === "genome") for (let c = 0; c < k; c++) { ax[c] = xs(start[c]!); bx[c] = (xs(total) - xs(0)) / total; }

    // Thinning: every point with p below keepP is drawn; the others keep the smallest p per cell.
    const keepP = opts.suggestive_line === false ? opts.significance_line : Math.max(opts.suggestive_line, opts.significance_line);
    const cols = Math.ceil(right - left) + 2, bands = Math.ceil((bottom - top) / THIN_BAND_PX) + 2;
    const cell = new Int32Array(cols * bands).fill(-1);
    const ky = ys(0) - ys(1); // px per −log10 unit
    const drawnIdx: number[] = [];
    for (let i = 0; i < n; i++) {
      const v = P[i]!;
      if (v < keepP) { drawnIdx.push(i); continue; }
      const col = Math.max(0, Math.min(cols - 1, Math.floor(ax[C[i]!]! + bx[C[i]!]! * POS[i]! - left)));
      const band = Math.max(0, Math.min(bands - 1, Math.floor((-Math.log10(v === 0 ? floor : v)) * ky / THIN_BAND_PX)));
      const key = col * bands + band, cur = cell[key]!;
      if (cur < 0 || v < P[cur]!) cell[key] = i;
    }
    for (let j = 0; j < cell.length; j++) if (cell[j]! >= 0) drawnIdx.push(cell[j]!);
    const m = drawnIdx.length;
    const gx = new Float64Array(m);
    const idxArr = Uint32Array.from(drawnIdx);
    for (let j = 0; j < m; j++) { const i = idxArr[j]!; gx[j] = ax[C[i]!]! + bx[C[i]!]! * POS[i]!; } // px
    const perm = Array.from({ length: m }, (_, j) => j).sort((a, b) => gx[a]! - gx[b]! || idxArr[a]! - idxArr[b]!);
    const drawn = Uint32Array.from(perm, (j) => idxArr[j]!);

    // SNP ids of the points drawn, read block by block (row order).
    const ids = new Map<number, string>();
    if (snpCol !== undefined) {
      const byRow = Uint32Array.from(drawn).sort();
      let b = -1, lines: string[] = [];
      for (const i of byRow) {
        const bi = Math.floor(i / BLOCK);
        if (bi !== b) { b = bi; lines = idBlocks[bi]!.split("\n"); }
        ids.set(i, lines[i - bi * BLOCK] ?? "");
      }
    }
    const label = (i: number) => { const s = ids.get(i)?.trim(); return s ? s : `${chromNames[C[i]!]}:${POS[i]}`; };

    const parts: string[] = [];
    parts.push(text(W / 2, PAD + SIZE.title / 2, title, { size: SIZE.title, weight: "bold", anchor: "middle", baseline: "middle" }));

    if (layout.mode === "genome") {
      // x ticks at chromosome centres; a label that would touch its left neighbour is left out.
      const centres: number[] = [], tickLabels: string[] = [];
      let lastRight = -Infinity;
      for (const c of order) {
        const mid = start[c]! + lo[c]! + widths[c]! / 2;
        centres.push(mid);
        const w = textWidth(chromNames[c]!, SIZE.tick), px = xs(mid);
        if (px - w / 2 > lastRight + 3) { tickLabels.push(chromNames[c]!); lastRight = px + w / 2; } else tickLabels.push("");
      }
      const xAxis = axis(xs, "bottom", bottom, "Chromosome", { tickValues: centres, tickLabels });
      parts.push(xAxis.svg.replace(/<line x1="[^"]+" y1="[^"]+" x2="[^"]+" y2="[^"]+" stroke="#333" stroke-width="1"\/>/, `<line x1="${r2(left)}" y1="${r2(bottom)}" x2="${r2(right)}" y2="${r2(bottom)}" stroke="#333" stroke-width="1"/>`));
    } else {
      // One position axis per panel (a single one for one chromosome), in Mb.
      for (const p of layout.panels) parts.push(axis(p.scale, "bottom", bottom, p.title, { tickValues: p.ticks, tickLabels: p.tickLabels }).svg);
    }
    parts.push(axis(ys, "left", left, "−log₁₀ p", { tickValues: yTicks }).svg);

    // Points, one path per colour: zero-length segments with round caps are dots.
    const paths: [string[], string[]] = [[], []];
    const r1 = (v: number) => Math.round(v * 10) / 10;
    for (let j = 0; j < m; j++) {
      const i = drawn[j]!, v = P[i]!;
      paths[parity[C[i]!]! as 0 | 1].push(`M${r1(gx[perm[j]!]!)} ${r1(ys(-Math.log10(v === 0 ? floor : v)))}h0`);
    }
    for (const q of [0, 1] as const) if (paths[q].length) parts.push(`<path class="points-${q}" d="${paths[q].join("")}" stroke="${MANHATTAN_COLORS[q]}" stroke-width="${2 * POINT_R}" stroke-linecap="round" fill="none"/>`);

    // Threshold lines, and their names in the right margin: the name above the line's end and
    // its p below; when the two lines are too close for that, one line of text each ("p = …",
    // the colour and the TSV say which is which), pushed apart so they never touch.
    const lineH = SIZE.label * 1.15;
    const marks: Array<{ y: number; lines: string[]; color: string }> = [];
    if (sugY !== undefined) {
      parts.push(`<line x1="${r2(left)}" y1="${r2(ys(sugY))}" x2="${r2(right)}" y2="${r2(ys(sugY))}" stroke="#666" stroke-width="1" stroke-dasharray="5 4"/>`);
      marks.push({ y: ys(sugY), lines: sugText!, color: "#444" });
    }
    parts.push(`<line x1="${r2(left)}" y1="${r2(ys(sigY))}" x2="${r2(right)}" y2="${r2(ys(sigY))}" stroke="${SIGNIFICANCE_COLOR}" stroke-width="1.2"/>`);
    marks.push({ y: ys(sigY), lines: sigText, color: SIGNIFICANCE_COLOR });
    marks.sort((a, b) => a.y - b.y);
    const twoLines = marks.length < 2 || marks[1]!.y - marks[0]!.y >= 2 * (lineH + 3) + 2;
    const lx = right + 5;
    if (twoLines) {
      for (const m of marks) {
        parts.push(text(lx, m.y - 3 - lineH / 2, m.lines[0]!, { size: SIZE.label, fill: m.color, baseline: "middle" }));
        parts.push(text(lx, m.y + 3 + lineH / 2, m.lines[1]!, { size: SIZE.label, fill: m.color, baseline: "middle" }));
      }
    } else {
      const [a, b] = marks as [typeof marks[0], typeof marks[0]];
      const gap = lineH + 2, mid = (a.y + b.y) / 2;
      const ya = Math.min(a.y, mid - gap / 2), yb = Math.max(b.y, mid + gap / 2);
      parts.push(text(lx, ya, a.lines[1]!, { size: SIZE.label, fill: a.color, baseline: "middle" }));
      parts.push(text(lx, yb, b.lines[1]!, { size: SIZE.label, fill: b.color, baseline: "middle" }));
    }

    // Loci: the best SNP per chromosome within LOCUS_BP, genome-wide significant only.
    const sig: number[] = [];
    for (let j = 0; j < m; j++) { const i = drawn[j]!; if (P[i]! < opts.significance_line) sig.push(i); }
    sig.sort((a, b) => P[a]! - P[b]! || a - b);
    const leads: number[] = [];
    for (const i of sig) if (!leads.some((l) => C[l] === C[i] && Math.abs(POS[l]! - POS[i]!) < LOCUS_BP)) leads.push(i);
    const wanted = leads.slice(0, opts.top_labels);
    const xOf = (i: number) => ax[C[i]!]! + bx[C[i]!]! * POS[i]!, yOf = (i: number) => ys(-Math.log10(P[i]! === 0 ? floor : P[i]!));
    const { placed, dropped } = placeLabels(wanted.map((i) => ({ x: xOf(i), y: yOf(i), text: label(i) })), { x: left + 2, y: top - 8, w: right - left - 2, h: bottom - top + 6 }, [], 2.5);
    parts.push(`<g class="labels">${drawLabels(placed)}</g>`);

    const svg = svgDocument(W, H, parts.join(""), title);
    const comments = [
      `manhattan plot of ${frame.source}`,
      `columns used: chromosome "${names.chr}", position "${names.pos}", p-value "${names.p}", SNP ${names.snp !== undefined ? `"${names.snp}"` : "(none found: SNPs are named chr:pos)"}`,
      `chromosomes in plot order: ${order.map((c) => chromNames[c]).join(", ")} (names normalised: a chr prefix dropped, M written MT)`,
      layout.comment,
      `lines: genome-wide significance p = ${opts.significance_line} (solid)${opts.suggestive_line === false ? "; no suggestive line" : `; suggestive p = ${opts.suggestive_line} (dashed)`}`,
      `points: ${n} SNPs read, ${m} drawn, ${n - m} thinned away; thinning rule: a SNP with p >= ${keepP} is drawn only if it has the smallest p among the SNPs falling in the same plot cell (1 px column x ${THIN_BAND_PX} px row band); no SNP with p < ${keepP} is thinned`,
      `skipped ${skipped} of ${rows} rows: ${badChr} with no chromosome, ${badPos} with a missing or non-numeric position, ${badP} with a missing or non-numeric p-value (NA, empty, text or outside 0..1)`,
    ];
    if (zeros > 0) comments.push(`${zeros} SNPs have p = 0 (below floating-point range); they are drawn at the smallest positive p in the file, ${Number.isFinite(minPos) ? minPos : "1e-300 (none is positive)"}`);
    comments.push(`genome-wide significant: ${sig.length} SNPs in ${leads.length} loci (best SNP per chromosome within ${LOCUS_BP / 1000} kb); labelled ${placed.length}${leads.length > wanted.length ? ` (top_labels = ${opts.top_labels})` : ""}${dropped ? `; ${dropped} could not be placed without overlap` : ""}`);

    const rowsOut: Array<Array<string | number>> = new Array(m);
    for (let j = 0; j < m; j++) {
      const i = drawn[j]!, v = P[i]!;
      rowsOut[j] = [label(i), chromNames[C[i]!]!, POS[i]!, v, +(-Math.log10(v === 0 ? floor : v) + 0).toPrecision(8)];
    }
    return { svg, width: W, height: H, data: { header: ["snp", "chr", "pos", "p", "neg_log10_p"], rows: rowsOut, comments } };
  }
}
