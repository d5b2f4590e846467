/**
 * pca_plot: samples of a genes × samples count matrix (nf-core/rnaseq's
 * `salmon.merged.gene_counts.tsv` and the like) placed on two principal components of
 * log2(CPM + 1) of the most variable genes, coloured by group, labelled without overlap.
 *
 * Also the count-matrix reading the heatmap shares: the gene column (the first, or
 * `gene_col`), annotation columns told apart from samples by their text (gene_name is used
 * for labels), NA / empty / non-numeric / negative cells counted, library sizes and
 * log2(CPM + 1), per-gene variance and the most variable genes.
 */
import { scaleLinear } from "d3-scale";
import { PCA } from "ml-pca";
import { isMissing } from "../core/delimited.js";
import { ChartError, type Chart, type Frame, type TableSink } from "./chart.js";
import { findColumn } from "./data/columns.js";
import { fmt, numberOf } from "./data/numbers.js";
import { leftAxisWidth } from "./layout/axes.js";
import { placeLabels, type Box, type LabelRequest, type PlacedLabel } from "./layout/labels.js";
import { SIZE, textWidth } from "./layout/text.js";
import { axis } from "./paint/axis.js";
import { GREY, PALETTE } from "./paint/colours.js";
import { drawLabels } from "./paint/labels.js";
import { r2, svgDocument, text } from "./paint/svg.js";
import type { PcaOpts } from "./options.js";

// ---------------------------------------------------------------------------------------------
// The count matrix (shared with heatmap.ts)

/** A genes × samples matrix as read: NaN where a cell was missing or unusable. */
export interface CountMatrix {
  /** Sample columns, in file order. */
  samples: string[];
  ids: string[];
  /** Row labels: gene_name (or the like) when the file has it and the cell is filled, else the id. */
  labels: string[];
  /** One row per gene, one value per sample; NaN = missing, non-numeric or negative. */
  values: Float64Array[];
  idColumn: string;
  labelColumn: string;
  /** Text columns left out of the samples (gene_name, description, …). */
  annotationColumns: string[];
  skipped: { missing: number; nonNumeric: number; negative: number };
}

/** Columns whose name says they hold gene symbols, most specific first. */
const NAME_COLUMNS = ["gene_name", "gene_symbol", "symbol", "genesymbol", "external_gene_name", "hgnc_symbol", "mgi_symbol", "name", "gene"];
/** How many data rows decide which columns are text (annotations) and which are samples. */
const CLASSIFY_ROWS = 200;

/**
 * Reads the matrix a row at a time. The first rows are held until the columns are classified:
 * a column whose present cells are mostly text is an annotation, the rest are samples.
 */
export class CountMatrixReader {
  private readonly header: readonly string[];
  private readonly idCol: number;
  private held: string[][] = [];
  private sampleCols: number[] | undefined;
  private labelCol = -1;
  private annotation: number[] = [];
  readonly ids: string[] = [];
  readonly labels: string[] = [];
  readonly values: Float64Array[] = [];
  readonly skipped = { missing: 0, nonNumeric: 0, negative: 0 };

  constructor(header: readonly string[], geneCol: string | undefined) {
    this.header = header;
    if (header.length < 2) throw new ChartError("the count matrix has a single column; it needs a gene column and one column per sample");
    this.idCol = geneCol === undefined ? 0 : findColumn(header, geneCol, [], "gene_col", "gene");
  }

  row(cells: readonly string[]): void {
    if (this.sampleCols) { this.take(cells); return; }
    this.held.push(cells.slice());
    if (this.held.length >= CLASSIFY_ROWS) this.classify();
  }

  private classify(): void {
    const sampleCols: number[] = [];
    for (let c = 0; c < this.header.length; c++) {
      if (c === this.idCol) continue;
      let present = 0, numeric = 0;
      for (const r of this.held) {
        const cell = r[c] ?? "";
        if (isMissing(cell)) continue;
        present++;
        if (numberOf(cell) !== undefined) numeric++;
      }
      if (present > 0 && numeric < present / 2) this.annotation.push(c);
      else sampleCols.push(c);
    }
    this.sampleCols = sampleCols;
    const lower = this.header.map((h) => h.trim().toLowerCase());
    for (const name of NAME_COLUMNS) {
      const i = lower.indexOf(name);
      if (i >= 0 && (i === this.idCol || this.annotation.includes(i))) { this.labelCol = i; break; }
    }
    const held = this.held;
    this.held = [];
    for (const r of held) this.take(r);
  }

  private take(cells: readonly string[]): void {
    const cols = this.sampleCols!;
    const v = new Float64Array(cols.length);
    for (let j = 0; j < cols.length; j++) {
      const cell = cells[cols[j]!] ?? "";
      const x = numberOf(cell);
      if (x === undefined) {
        v[j] = NaN;
        if (isMissing(cell)) this.skipped.missing++; else this.skipped.nonNumeric++;
      } else if (x < 0) { v[j] = NaN; this.skipped.negative++; } else v[j] = x;
    }
    const id = (cells[this.idCol] ?? "").trim();
    const name = this.labelCol >= 0 ? (cells[this.labelCol] ?? "").trim() : "";
    this.ids.push(id);
    this.labels.push(name && !isMissing(name) ? name : id);
    this.values.push(v);
  }

  finish(): CountMatrix {
    if (!this.sampleCols) this.classify();
    const samples = this.sampleCols!.map((c) => this.header[c]!);
    if (samples.length === 0) {
      throw new ChartError(`the count matrix has no sample columns: every column besides the gene column holds text (${this.annotation.map((c) => JSON.stringify(this.header[c])).join(", ")}); the samples' columns must hold counts`);
    }
    if (this.values.length === 0) throw new ChartError("the count matrix has a header but no genes");
    return {
      samples, ids: this.ids, labels: this.labels, values: this.values,
      idColumn: this.header[this.idCol]!, labelColumn: this.header[this.labelCol >= 0 ? this.labelCol : this.idCol]!,
      annotationColumns: this.annotation.map((c) => this.header[c]!), skipped: this.skipped,
    };
  }
}

/** The TSV comment about unusable cells, or nothing when every cell was a count. */
export function skippedComment(m: CountMatrix): string[] {
  const { missing, nonNumeric, negative } = m.skipped;
  if (missing + nonNumeric + negative === 0) return [];
  const parts = [];
  if (missing) parts.push(`${missing} NA or empty`);
  if (nonNumeric) parts.push(`${nonNumeric} non-numeric`);
  if (negative) parts.push(`${negative} negative`);
  return [`skipped cells (not counts): ${parts.join(", ")}`];
}

export interface LogCpm {
  /** log2(CPM + 1) per gene over the kept samples; NaN stays NaN. */
  rows: Float64Array[];
  /** Indices (into CountMatrix.samples) of the samples kept: those with a non-zero library. */
  kept: number[];
  libSizes: number[];
  /** Samples left out because their column sums to 0. */
  empty: string[];
}

/** Counts per million over each sample's library (its column's sum in this file), log2(x + 1). */
export function log2Cpm(m: CountMatrix): LogCpm {
  const ns = m.samples.length;
  const lib = new Float64Array(ns);
  for (const v of m.values) for (let j = 0; j < ns; j++) { const x = v[j]!; if (x === x) lib[j]! += x; }
  const kept: number[] = [];
  const empty: string[] = [];
  for (let j = 0; j < ns; j++) { if (lib[j]! > 0) kept.push(j); else empty.push(m.samples[j]!); }
  const scale = kept.map((j) => 1e6 / lib[j]!);
  const rows = m.values.map((v) => {
    const out = new Float64Array(kept.length);
    for (let k = 0; k < kept.length; k++) out[k] = Math.log2(v[kept[k]!]! * scale[k]! + 1);
    return out;
  });
  return { rows, kept, libSizes: kept.map((j) => lib[j]!), empty };
}

/** Sample variance (n − 1) over the values present; NaN with fewer than two. */
export function variance(v: Float64Array): number {
  let n = 0, mean = 0, m2 = 0;
  for (let i = 0; i < v.length; i++) {
    const x = v[i]!;
    if (x !== x) continue;
    n++;
    const d = x - mean;
    mean += d / n;
    m2 += d * (x - mean);
  }
  return n < 2 ? NaN : m2 / (n - 1);
}

/** Indices of the `n` rows with the largest variance (> 0) among `eligible`, largest first; ties keep file order. */
export function mostVariable(rows: readonly Float64Array[], n: number, eligible: (i: number) => boolean = () => true): { index: number[]; variable: number } {
  const cand: Array<{ i: number; v: number }> = [];
  for (let i = 0; i < rows.length; i++) {
    if (!eligible(i)) continue;
    const v = variance(rows[i]!);
    if (v > 1e-12) cand.push({ i, v });
  }
  cand.sort((a, b) => b.v - a.v || a.i - b.i);
  return { index: cand.slice(0, n).map((c) => c.i), variable: cand.length };
}

// ---------------------------------------------------------------------------------------------
// Title (shared with heatmap.ts)

/** `s` at the largest size from `max` down to `min` that fits `width`; cut with an ellipsis if even `min` does not. */
export function fitLine(s: string, width: number, max: number, min: number, bold = false): { text: string; size: number } {
  const w1 = textWidth(s, 1, bold);
  const size = Math.max(min, Math.min(max, w1 > 0 ? width / w1 : max));
  if (textWidth(s, size, bold) <= width) return { text: s, size };
  const chars = [...s];
  while (chars.length > 1 && textWidth(chars.join("") + "\u2026", size, bold) > width) chars.pop();
  return { text: chars.join("") + "\u2026", size };
}

/**
 * The title centred at the top (the user's, or the chart's default naming the file) and, under
 * a default title, a line saying what is drawn. `height` is where the block ends; the tallest
 * the block can be does not depend on `W`, so a layout may reserve it before `W` is final.
 */
export function titleBlock(title: string, subtitle: string | undefined, W: number): { svg: string; height: number } {
  const t = fitLine(title, W - 24, SIZE.title, 11, true);
  const parts = [text(W / 2, 14 + t.size / 2, t.text, { size: r2(t.size), anchor: "middle", weight: "bold", baseline: "middle" })];
  let h = 14 + t.size;
  if (subtitle) {
    const st = fitLine(subtitle, W - 24, SIZE.tick, 8);
    parts.push(text(W / 2, h + 5 + st.size / 2, st.text, { size: r2(st.size), anchor: "middle", fill: "#444", baseline: "middle" }));
    h += 5 + st.size;
  }
  return { svg: `<g class="title">${parts.join("")}</g>`, height: h };
}

// ---------------------------------------------------------------------------------------------
// Groups (color_by)

const SHEET_SAMPLE_COLUMNS = ["sample", "sample_id", "Sample", "sample_name", "SampleID"];

/** Each sample's group from an object or a sample-sheet column; undefined when there is no color_by. */
function groupsOf(samples: readonly string[], colorBy: PcaOpts["color_by"], sheet: { header: string[]; rows: string[][] } | undefined): { groups: string[]; title: string; note: string } | undefined {
  if (colorBy === undefined) return undefined;
  let map: Map<string, string>;
  let title: string, note: string;
  if (typeof colorBy === "string") {
    if (!sheet) throw new ChartError(`color_by "${colorBy}" names a column of a sample sheet, but no sample_sheet was given; give sample_sheet (a CSV or TSV with one row per sample), or give color_by as an object mapping each sample to its group`);
    const list = sheet.header.map((h) => JSON.stringify(h)).join(", ");
    let c = sheet.header.indexOf(colorBy);
    if (c < 0) c = sheet.header.findIndex((h) => h.toLowerCase() === colorBy.toLowerCase());
    if (c < 0) throw new ChartError(`column "${colorBy}" (option color_by) is not in the sample sheet; its columns are: ${list}`);
    let s = SHEET_SAMPLE_COLUMNS.map((n) => sheet.header.indexOf(n)).find((i) => i >= 0) ?? -1;
    if (s < 0) s = sheet.header.findIndex((h) => SHEET_SAMPLE_COLUMNS.some((n) => n.toLowerCase() === h.toLowerCase()));
    if (s < 0) s = 0;
    if (s === c) throw new ChartError(`color_by "${colorBy}" is the sample sheet's sample-name column; name a column that holds groups (the sheet's columns are: ${list})`);
    map = new Map();
    for (const r of sheet.rows) {
      const name = (r[s] ?? "").trim();
      if (name && !map.has(name)) map.set(name, (r[c] ?? "").trim());
    }
    title = sheet.header[c]!;
    note = `groups: column "${sheet.header[c]}" of the sample sheet, matched on its column "${sheet.header[s]}"`;
    if (![...samples].some((x) => map.has(x))) {
      const shown = [...map.keys()].slice(0, 8).map((k) => JSON.stringify(k)).join(", ");
      throw new ChartError(`none of the count matrix's ${samples.length} samples (${samples.slice(0, 8).map((k) => JSON.stringify(k)).join(", ")}${samples.length > 8 ? ", …" : ""}) is in the sample sheet's column "${sheet.header[s]}" (${shown}${map.size > 8 ? ", …" : ""}); the sheet's first column, or one named sample, must hold the matrix's column names`);
    }
  } else {
    map = new Map(Object.entries(colorBy).map(([k, v]) => [k.trim(), v.trim()]));
    title = "group";
    note = "groups: the color_by mapping";
    if (map.size > 0 && !samples.some((x) => map.has(x))) {
      throw new ChartError(`none of the count matrix's samples (${samples.slice(0, 8).map((k) => JSON.stringify(k)).join(", ")}${samples.length > 8 ? ", …" : ""}) is named in color_by (${[...map.keys()].slice(0, 8).map((k) => JSON.stringify(k)).join(", ")})`);
    }
  }
  const groups = samples.map((x) => { const g = map.get(x); return g === undefined || g === "" || isMissing(g) ? UNASSIGNED : g; });
  return { groups, title, note };
}

const UNASSIGNED = "unassigned";
type Shape = "circle" | "square" | "triangle" | "diamond";
const SHAPES: readonly Shape[] = ["circle", "square", "triangle", "diamond"];

function marker(shape: Shape, x: number, y: number, r: number, fill: string, stroke = "#333"): string {
  const a = `fill="${fill}" stroke="${stroke}" stroke-width="0.6"`;
  switch (shape) {
    case "circle": return `<circle cx="${r2(x)}" cy="${r2(y)}" r="${r}" ${a}/>`;
    case "square": { const s = r * 0.9; return `<rect x="${r2(x - s)}" y="${r2(y - s)}" width="${r2(2 * s)}" height="${r2(2 * s)}" ${a}/>`; }
    case "triangle": { const s = r * 1.2; return `<path d="M${r2(x)} ${r2(y - s)}L${r2(x + s * 0.95)} ${r2(y + s * 0.7)}L${r2(x - s * 0.95)} ${r2(y + s * 0.7)}Z" ${a}/>`; }
    case "diamond": { const s = r * 1.25; return `<path d="M${r2(x)} ${r2(y - s)}L${r2(x + s)} ${r2(y)}L${r2(x)} ${r2(y + s)}L${r2(x - s)} ${r2(y)}Z" ${a}/>`; }
  }
}

// ---------------------------------------------------------------------------------------------
// Labels

type Segment = { x1: number; y1: number; x2: number; y2: number };

/** Whether a segment passes through a box (Liang–Barsky clipping). */
function segmentHitsBox(s: Segment, b: Box): boolean {
  let t0 = 0, t1 = 1;
  const dx = s.x2 - s.x1, dy = s.y2 - s.y1;
  const edges: Array<[number, number]> = [[-dx, s.x1 - b.x], [dx, b.x + b.w - s.x1], [-dy, s.y1 - b.y], [dy, b.y + b.h - s.y1]];
  for (const [p, q] of edges) {
    if (p === 0) { if (q < 0) return false; continue; }
    const t = q / p;
    if (p < 0) { if (t > t1) return false; if (t > t0) t0 = t; } else { if (t < t0) return false; if (t < t1) t1 = t; }
  }
  return t0 < t1;
}

/** Whether two segments cross (touching ends do not count). */
function segmentsCross(a: Segment, b: Segment): boolean {
  const o = (ax: number, ay: number, bx: number, by: number, cx: number, cy: number) => Math.sign((bx - ax) * (cy - ay) - (by - ay) * (cx - ax));
  return o(a.x1, a.y1, a.x2, a.y2, b.x1, b.y1) * o(a.x1, a.y1, a.x2, a.y2, b.x2, b.y2) < 0
    && o(b.x1, b.y1, b.x2, b.y2, a.x1, a.y1) * o(b.x1, b.y1, b.x2, b.y2, a.x2, a.y2) < 0;
}

/**
 * The placed labels (most important first) whose leader line crosses no label or leader kept
 * before them, and whose text no kept leader crosses: in a tight cluster a leader drawn
 * through other names makes them unreadable, so such a label is left out instead.
 */
function untangle(placed: readonly PlacedLabel[]): PlacedLabel[] {
  const kept: PlacedLabel[] = [];
  for (const l of placed) {
    const clash = kept.some((k) => (l.leader && (segmentHitsBox(l.leader, k.box) || (k.leader && segmentsCross(l.leader, k.leader))))
      || (k.leader && segmentHitsBox(k.leader, l.box)));
    if (!clash) kept.push(l);
  }
  return kept;
}

// ---------------------------------------------------------------------------------------------
// The chart

export function pcaChart(header: readonly string[], opts: PcaOpts, frame: Frame, sheet?: { header: string[]; rows: string[][] }): TableSink {
  const reader = new CountMatrixReader(header, opts.gene_col);
  return {
    row: (cells) => reader.row(cells),
    finish: () => renderPca(reader.finish(), opts, frame, sheet),
  };
}

function renderPca(m: CountMatrix, opts: PcaOpts, frame: Frame, sheet: { header: string[]; rows: string[][] } | undefined): Chart {
  const lc = log2Cpm(m);
  const samples = lc.kept.map((j) => m.samples[j]!);
  if (samples.length < 3) {
    throw new ChartError(`a PCA needs at least 3 samples with counts; this matrix has ${samples.length} (${samples.map((s) => JSON.stringify(s)).join(", ") || "none"})${lc.empty.length ? `, and ${lc.empty.length} whose counts sum to 0 (${lc.empty.join(", ")})` : ""}`);
  }
  const complete = (i: number) => lc.rows[i]!.every((x) => x === x);
  let droppedMissing = 0;
  for (let i = 0; i < lc.rows.length; i++) if (!complete(i)) droppedMissing++;
  const top = mostVariable(lc.rows, opts.top_n, complete);
  if (top.variable < 2) {
    throw new ChartError(`a PCA needs at least 2 genes whose expression varies between samples; this matrix has ${top.variable} (of ${m.values.length} genes${droppedMissing ? `, ${droppedMissing} left out for a missing value in some sample` : ""})`);
  }
  const genes = top.index;
  const data = samples.map((_, s) => genes.map((g) => lc.rows[g]![s]!));
  const pca = new PCA(data, { method: "SVD", center: true, scale: false });
  const available = Math.min(samples.length - 1, genes.length);
  const explained = pca.getExplainedVariance().slice(0, available);
  const [ca, cb] = opts.components;
  const maxComp = Math.max(ca, cb);
  if (maxComp > available) {
    throw new ChartError(`component ${maxComp} was asked for, but ${samples.length} samples and ${genes.length} genes give ${available} principal components; choose components between 1 and ${available}`);
  }
  const scores = pca.predict(data, { nComponents: maxComp });
  const xs = samples.map((_, s) => scores.get(s, ca - 1));
  const ys = samples.map((_, s) => scores.get(s, cb - 1));

  const g = groupsOf(samples, opts.color_by, sheet);
  const groupNames: string[] = [];
  if (g) {
    for (const x of g.groups) if (x !== UNASSIGNED && !groupNames.includes(x)) groupNames.push(x);
    if (g.groups.includes(UNASSIGNED)) groupNames.push(UNASSIGNED);
  }
  const style = (group: string) => {
    if (group === UNASSIGNED) return { color: GREY, shape: "circle" as Shape };
    const i = groupNames.indexOf(group);
    return { color: PALETTE[i % PALETTE.length]!, shape: SHAPES[Math.floor(i / PALETTE.length) % SHAPES.length]! };
  };

  // Layout
  const W = frame.width, H = frame.height;
  const R = 5.5;
  const title = frame.title ?? `PCA \u2014 ${frame.source}`;
  const subtitle = frame.title === undefined ? `log2(CPM + 1) of the ${genes.length} most variable genes, centred` : undefined;
  const head = titleBlock(title, subtitle, W);
  const top0 = head.height + 14;
  const legendRow = SIZE.legend + 7;
  const legendW = g ? 24 + Math.max(textWidth(g.title, SIZE.legend, true), ...groupNames.map((n) => 20 + textWidth(n, SIZE.legend))) : 0;
  const pct = (c: number) => `${(100 * explained[c - 1]!).toFixed(1)}%`;
  const xLabel = `PC${ca} (${pct(ca)} variance)`, yLabel = `PC${cb} (${pct(cb)} variance)`;
  const pad = (lo: number, hi: number) => { const span = hi - lo || Math.abs(hi) || 1; return [lo - span * 0.08, hi + span * 0.08] as const; };
  const xDom = pad(Math.min(...xs), Math.max(...xs)), yDom = pad(Math.min(...ys), Math.max(...ys));
  const yScale0 = scaleLinear().domain(yDom).nice();
  const yTicks = yScale0.ticks(6).map((v) => fmt(v));
  const left = 10 + leftAxisWidth(yTicks);
  const bottomAxis = 7 + SIZE.tick + 10 + SIZE.axis + 2;
  const notesRoom = 16;
  const plot: Box = { x: left, y: top0, w: W - left - (g ? legendW + 12 : 18), h: H - top0 - bottomAxis - 10 - notesRoom };
  if (plot.w < 120 || plot.h < 100) throw new ChartError(`the figure is too small (${W} × ${H} px) for a PCA plot with this legend; give a larger width or height`);
  const x = scaleLinear().domain(xDom).nice().range([plot.x, plot.x + plot.w]);
  const y = scaleLinear().domain(yDom).nice().range([plot.y + plot.h, plot.y]);

  const parts: string[] = [];
  parts.push(head.svg);
  const xa = axis(x, "bottom", plot.y + plot.h, xLabel, { grid: { from: plot.y, to: plot.y + plot.h } });
  const ya = axis(y, "left", plot.x, yLabel, { grid: { from: plot.x, to: plot.x + plot.w } });
  parts.push(xa.svg, ya.svg);
  parts.push(`<rect x="${r2(plot.x)}" y="${r2(plot.y)}" width="${r2(plot.w)}" height="${r2(plot.h)}" fill="none" stroke="#333" stroke-width="1"/>`);
  // Zero lines: where the centred data's mean sits.
  const [x0d, x1d] = x.domain() as [number, number], [y0d, y1d] = y.domain() as [number, number];
  if (x0d < 0 && x1d > 0) parts.push(`<line x1="${r2(x(0))}" y1="${r2(plot.y)}" x2="${r2(x(0))}" y2="${r2(plot.y + plot.h)}" stroke="#bbb" stroke-dasharray="3 3"/>`);
  if (y0d < 0 && y1d > 0) parts.push(`<line x1="${r2(plot.x)}" y1="${r2(y(0))}" x2="${r2(plot.x + plot.w)}" y2="${r2(y(0))}" stroke="#bbb" stroke-dasharray="3 3"/>`);

  // Points: unassigned first so coloured groups sit on top.
  const order = samples.map((_, i) => i).sort((a, b) => Number((g?.groups[b] ?? "") === UNASSIGNED) - Number((g?.groups[a] ?? "") === UNASSIGNED) || a - b);
  const pts: string[] = [];
  for (const i of order) {
    const st = g ? style(g.groups[i]!) : { color: PALETTE[0], shape: "circle" as Shape };
    pts.push(marker(st.shape, x(xs[i]!), y(ys[i]!), R, st.color));
  }
  parts.push(`<g class="points">${pts.join("")}</g>`);

  // Legend, right of the plot.
  if (g) {
    const lx = plot.x + plot.w + 16;
    const items: string[] = [text(lx, plot.y + SIZE.legend / 2, g.title, { size: SIZE.legend, weight: "bold", baseline: "middle" })];
    let ly = plot.y + legendRow;
    for (const name of groupNames) {
      const st = style(name);
      const cy = ly + SIZE.legend / 2;
      items.push(marker(st.shape, lx + 6, cy, 4.5, st.color), text(lx + 18, cy, name, { size: SIZE.legend, baseline: "middle" }));
      ly += legendRow;
    }
    parts.push(`<g class="legend">${items.join("")}</g>`);
  }

  // Sample labels: the points farthest from the centre first (they are the ones people ask about).
  const notes: string[] = [];
  let dropped = 0;
  if (opts.label_samples) {
    const cx = x(0), cy = y(0);
    const reqs: LabelRequest[] = samples.map((s, i) => ({ x: x(xs[i]!), y: y(ys[i]!), text: s }))
      .sort((a, b) => Math.hypot(b.x - cx, b.y - cy) - Math.hypot(a.x - cx, a.y - cy));
    const placed = placeLabels(reqs, { x: plot.x + 2, y: plot.y + 2, w: plot.w - 4, h: plot.h - 4 }, [], R);
    const kept = untangle(placed.placed);
    dropped = placed.dropped + placed.placed.length - kept.length;
    parts.push(`<g class="labels">${drawLabels(kept)}</g>`);
    if (dropped) notes.push(`${dropped} of ${samples.length} sample labels left out for lack of room (every sample is in the TSV)`);
  }
  if (notes.length) parts.push(text(10, H - 8, notes.join("; "), { size: SIZE.label, fill: "#555" }));

  const comps = explained.map((e, i) => `PC${i + 1} ${(100 * e).toFixed(2)}%`);
  const comments = [
    `source: ${frame.source}`,
    `log2(CPM + 1) per gene, CPM over each sample's column sum in this file; the ${genes.length} most variable genes (variance across samples) of ${top.variable} that vary; centred, not scaled; PCA by singular value decomposition (ml-pca)`,
    `explained variance of every component: ${comps.join(", ")}`,
    `genes used: ${genes.length}`,
  ];
  if (droppedMissing) comments.push(`genes left out for a missing value (NA, empty, non-numeric or negative) in some sample: ${droppedMissing}`);
  comments.push(...skippedComment(m));
  if (lc.empty.length) comments.push(`samples left out, their counts sum to 0: ${lc.empty.join(", ")}`);
  if (m.annotationColumns.length) comments.push(`annotation columns (not samples): ${m.annotationColumns.join(", ")}`);
  if (g) comments.push(g.note + (g.groups.includes(UNASSIGNED) ? `; samples without a group: ${samples.filter((_, i) => g.groups[i] === UNASSIGNED).join(", ")} (drawn grey as "${UNASSIGNED}")` : ""));
  if (dropped) comments.push(notes[0]!);
  const data2 = samples.map((s, i) => [s, g ? g.groups[i]! : "", xs[i]!, ys[i]!] as Array<string | number>);
  return {
    svg: svgDocument(W, H, parts.join(""), title),
    width: W, height: H,
    data: { header: ["sample", "group", `PC${ca}`, `PC${cb}`], rows: data2, comments },
  };
}
