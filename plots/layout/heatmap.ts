/**
 * A heatmap's geometry, every text measured: room for the title and the column dendrogram
 * above, the row dendrogram left, gene labels and the colour bar right, sample labels (read
 * upwards) underneath. Without a user's width, columns are kept between 9 and 56 px wide by
 * resizing the picture; without a user's height, rows get a height by gene count (labelled up
 * to 250 genes) and the picture grows to fit. Labels too small to read (under MIN_FONT) are
 * left out, and a note line says so.
 */
import { ChartError, type Frame } from "../chart.js";
import type { CountMatrix } from "../data/count-matrix.js";
import type { HeatmapData } from "../data/heatmap.js";
import { fmt } from "../data/numbers.js";
import type { HeatmapOpts } from "../options.js";
import { SIZE, textWidth } from "./text.js";
import { titleLines } from "./title.js";

/** The colour bar's title. */
export const CB_TITLE = "z-score (log2 CPM+1)";
/** The smallest font a label is drawn with; rows or columns too thin for it go unlabelled. */
export const MIN_FONT = 6;
export const PAD_L = 12, PAD_R = 12, PAD_B = 10;
/** The colour bar's width, and the height of a note line. */
export const CB_W = 14, NOTE_H = 15;

export interface HeatmapLayout {
  W: number;
  H: number;
  title: string;
  subtitle: string | undefined;
  /** The cells' box: columns x0…x1 of colW px, rows y0…y1 of rowH px. */
  x0: number;
  x1: number;
  colW: number;
  y0: number;
  y1: number;
  rowH: number;
  /** Gene labels (drawn order), their font and the room they take right of the cells; 0 when left out. */
  labels: string[];
  geneFont: number;
  geneLabels: boolean;
  geneW: number;
  sampleFont: number;
  sampleLabels: boolean;
  colDendroH: number;
  /** The colour bar: its x, height and integer ticks; the NA key's y. */
  cbX: number;
  cbH: number;
  ticks: number[];
  naY: number;
  /** Note lines under the picture (label sets left out). */
  notes: string[];
}

/** What the horizontal layout depends on besides the width. */
interface Across { ns: number; widestGene: number; rowDendroW: number; cbBlockW: number }
type XSpan = { geneW: number; x0: number; x1: number; colW: number };

/** The cells' horizontal extent in a picture `W` wide when gene labels take `geneFont`. */
function xSpan(a: Across, geneFont: number, W: number): XSpan {
  const geneW = geneFont >= MIN_FONT ? a.widestGene * geneFont + 6 : 0;
  const x0 = PAD_L + (a.rowDendroW ? a.rowDendroW + 4 : 0);
  const x1 = W - PAD_R - a.cbBlockW - 18 - geneW;
  return { geneW, x0, x1, colW: (x1 - x0) / a.ns };
}

// Up to 250 genes the rows stay tall enough for 6 px labels (at most 1,800 px of rows); beyond, thin unlabelled rows.
const rowHFor = (n: number) => (n <= 60 ? 15 : n <= 150 ? 12 : n <= 250 ? 7.2 : Math.max(1.5, Math.min(5, 1800 / n)));
const geneFontFor = (rowH: number) => Math.min(SIZE.tick, rowH * 0.85);

export function heatmapLayout(d: HeatmapData, m: CountMatrix, opts: HeatmapOpts, frame: Frame): HeatmapLayout {
  const ns = d.samples.length, ng = d.genes.length;
  const userH = opts.height !== undefined;
  const title = frame.title ?? `Heatmap \u2014 ${frame.source}`;
  const subtitle = frame.title === undefined ? `Top ${ng} most variable genes; per-gene z-scores of log2(CPM + 1)` : undefined;
  // Room for the title at its largest: W may still grow or shrink below.
  const titleH = titleLines(title, subtitle, Infinity).height + 14;
  const colDendroH = d.colTree ? 56 : 0;
  const ticks: number[] = [];
  for (let t = -Math.floor(d.lim); t <= Math.floor(d.lim); t++) ticks.push(t);
  const tickW = Math.max(...ticks.map((t) => textWidth(fmt(t), SIZE.tick)));
  const cbBlockW = Math.max(textWidth(CB_TITLE, SIZE.legend), CB_W + 5 + tickW, d.naCells ? 18 + textWidth("NA (missing)", SIZE.legend) : 0);
  const y0 = titleH + Math.max(colDendroH ? colDendroH + 4 : 0, SIZE.legend + 10);
  const labels = d.rowOrder.map((r) => m.labels[d.genes[r]!]!);
  const across: Across = { ns, widestGene: Math.max(...labels.map((l) => textWidth(l, 1))), rowDendroW: d.rowTree ? 72 : 0, cbBlockW };
  // Row height: the user's height decides it; otherwise labelled rows for up to 150 genes, thin rows beyond.
  let rowH = userH ? 0 : rowHFor(ng);
  const fitted = fitWidth(across, opts, frame.width, userH ? SIZE.tick : geneFontFor(rowH));
  const W = fitted.W;
  let lx = fitted.lx;
  const sampleFont = Math.min(SIZE.tick, lx.colW * 0.85);
  const sampleLabels = sampleFont >= MIN_FONT;
  const bottomLabelsH = sampleLabels ? 6 + Math.max(...d.samples.map((s) => textWidth(s, sampleFont))) : 0;
  const bottomFor = (nNotes: number) => bottomLabelsH + 8 + nNotes * NOTE_H + PAD_B;
  if (userH) ({ rowH, lx } = fitRows(across, W, frame.height, y0, ng, sampleLabels, bottomFor));
  const geneFont = geneFontFor(rowH);
  const geneLabels = geneFont >= MIN_FONT;
  if (!geneLabels) lx = xSpan(across, 0, W);
  const notes: string[] = [];
  if (!geneLabels) notes.push(`gene labels left out: ${ng} rows of ${fmt(rowH, 2)} px are too thin to label (the TSV lists the genes in drawn order)`);
  if (!sampleLabels) notes.push(`sample labels left out: ${ns} columns of ${fmt(lx.colW, 2)} px are too narrow (the TSV lists them in drawn order)`);
  const hmH = rowH * ng;
  const y1 = y0 + hmH;
  const cbH = Math.max(60, Math.min(180, hmH));
  const naY = y0 + cbH + 26;
  const contentBottom = Math.max(y1 + bottomFor(notes.length), d.naCells ? naY + 20 : y0 + cbH + 24);
  const H = userH ? frame.height : Math.ceil(contentBottom);
  return {
    W, H, title, subtitle, x0: lx.x0, x1: lx.x1, colW: lx.colW, y0, y1, rowH, labels, geneFont, geneLabels, geneW: lx.geneW,
    sampleFont, sampleLabels, colDendroH, cbX: lx.x1 + 4 + lx.geneW + 14, cbH, ticks, naY, notes,
  };
}

/** The picture's width: the user's, else resized so columns are 9–56 px wide (320–4000 px in all). */
function fitWidth(a: Across, opts: HeatmapOpts, W0: number, geneFont: number): { W: number; lx: XSpan } {
  const userW = opts.width !== undefined, ns = a.ns;
  let W = W0;
  let lx = xSpan(a, geneFont, W);
  if (!userW && lx.colW > 56) { W = Math.max(320, W - (lx.colW - 56) * ns); lx = xSpan(a, geneFont, W); }
  if (!userW && lx.colW < 9 && ns > 0) { W = Math.min(4000, W + (9 - lx.colW) * ns); lx = xSpan(a, geneFont, W); }
  if (lx.colW < 1) throw new ChartError(`${ns} samples do not fit in ${W} px; give a larger width`);
  return { W, lx };
}

/** With the user's height: rows share what is left; a note line is kept for each label set left out. */
function fitRows(a: Across, W: number, H: number, y0: number, ng: number, sampleLabels: boolean, bottomFor: (nNotes: number) => number): { rowH: number; lx: XSpan } {
  let nNotes = sampleLabels ? 0 : 1;
  let rowH = (H - y0 - bottomFor(nNotes)) / ng;
  if (geneFontFor(rowH) < MIN_FONT) { nNotes++; rowH = (H - y0 - bottomFor(nNotes)) / ng; }
  const lx = xSpan(a, geneFontFor(rowH), W);
  if (rowH < 0.5) throw new ChartError(`${ng} genes do not fit in ${H} px; give a larger height or a smaller top_n`);
  return { rowH, lx };
}
