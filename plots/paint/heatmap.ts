/**
 * A heatmap drawn: the cells as a few paths (one per colour level, runs of equal colour in a
 * row merged), the dendrograms with their leaves at the cells' edges, gene and sample labels,
 * the colour bar with integer ticks and the NA key, and the note lines.
 */
import type { Dendrogram } from "../data/clustering.js";
import type { HeatmapData } from "../data/heatmap.js";
import { fmt } from "../data/numbers.js";
import { CB_TITLE, CB_W, NOTE_H, PAD_B, PAD_L, type HeatmapLayout } from "../layout/heatmap.js";
import { SIZE } from "../layout/text.js";
import { r2, text } from "./svg.js";

const NA_FILL = "#d4d4d4";
/** Colour levels of the cells. */
const LEVELS = 256;

/**
 * Cells: one path per colour level (runs of equal colour in a row merged), each cell drawn a
 * little over its neighbours so anti-aliasing leaves no seams. A few paths instead of one
 * rect per cell keep a 1,000 × 50 heatmap quick to rasterise. Colours come in LEVELS steps
 * (finer than the eye tells apart), each level's colour taken at its middle; −1 = missing.
 */
export function heatmapCells(d: HeatmapData, lay: HeatmapLayout, cmap: (t: number) => string): string {
  const ns = d.samples.length, ng = d.genes.length, lim = d.lim;
  const { x0, y0, colW, rowH } = lay;
  const lut = Array.from({ length: LEVELS }, (_, k) => cmap((k + 0.5) / LEVELS));
  const level = (v: number) => (v === v ? Math.min(LEVELS - 1, Math.floor(((Math.max(-lim, Math.min(lim, v)) + lim) / (2 * lim)) * LEVELS)) : -1);
  const byLevel = new Map<number, string[]>();
  const ow = 0.4;
  const hFull = `v${r2(rowH + 0.4)}h`, hLast = `v${r2(rowH)}h`;
  // Every row spans the same columns: the x and width text of a run from column c to e is made once.
  const runText = new Map<number, [string, string, string]>();
  const run = (c: number, e: number): [string, string, string] => {
    let t = runText.get(c * (ns + 1) + e);
    if (!t) {
      const xa = r2(x0 + c * colW), w = r2(x0 + e * colW + (e === ns ? 0 : ow) - xa);
      runText.set(c * (ns + 1) + e, t = [`M${xa} `, `h${w}`, String(-w)]);
    }
    return t;
  };
  const lev = new Int16Array(ns);
  for (let r = 0; r < ng; r++) {
    const zr = d.z[d.rowOrder[r]!]!;
    const yy = String(r2(y0 + r * rowH));
    const hv = r === ng - 1 ? hLast : hFull;
    for (let c = 0; c < ns; c++) lev[c] = level(zr[d.colOrder[c]!]!);
    for (let c = 0; c < ns;) {
      const k = lev[c]!;
      let e = c + 1;
      while (e < ns && lev[e] === k) e++;
      const [mx, hw, back] = run(c, e);
      let list = byLevel.get(k);
      if (!list) byLevel.set(k, list = []);
      list.push(mx + yy + hw + hv + back + "z");
      c = e;
    }
  }
  const cellPaths = [...byLevel.entries()].sort((a, b) => a[0] - b[0]).map(([k, dd]) => `<path fill="${k < 0 ? NA_FILL : lut[k]}" d="${dd.join("")}"/>`);
  return `<g class="cells">${cellPaths.join("")}</g>`
    + `<rect x="${r2(x0)}" y="${r2(y0)}" width="${r2(lay.x1 - x0)}" height="${r2(rowH * ng)}" fill="none" stroke="#444" stroke-width="0.6"/>`;
}

/** A dendrogram's path: leaves at `pos(i)` (the i-th drawn), a merge at `depth(height)` across. */
function dendrogram(tree: Dendrogram, n: number, pos: (leafIndex: number) => number, depth: (h: number) => number, vertical: boolean): string {
  const at = new Float64Array(n + tree.merges.length);
  const ht = new Float64Array(n + tree.merges.length);
  tree.order.forEach((leaf, i) => { at[leaf] = pos(i); });
  const segs: string[] = [];
  tree.merges.forEach((mg, k) => {
    const id = n + k;
    at[id] = (at[mg.a]! + at[mg.b]!) / 2;
    ht[id] = mg.height;
    const pa = at[mg.a]!, pb = at[mg.b]!, ha = depth(ht[mg.a]!), hb = depth(ht[mg.b]!), h = depth(mg.height);
    segs.push(vertical
      ? `M${r2(pa)} ${r2(ha)}V${r2(h)}H${r2(pb)}V${r2(hb)}`
      : `M${r2(ha)} ${r2(pa)}H${r2(h)}V${r2(pb)}H${r2(hb)}`);
  });
  return `<path d="${segs.join("")}" fill="none" stroke="#444" stroke-width="0.8"/>`;
}

/** Dendrograms: leaves at the heatmap's edge, the root farthest out. */
export function heatmapDendrograms(d: HeatmapData, lay: HeatmapLayout): string {
  const { x0, y0, rowH, colW } = lay;
  const parts: string[] = [];
  if (d.rowTree) {
    const maxH = Math.max(...d.rowTree.merges.map((x) => x.height), 1e-12);
    const right = x0 - 3, left = PAD_L;
    parts.push(`<g class="row-dendrogram">${dendrogram(d.rowTree, d.genes.length, (i) => y0 + (i + 0.5) * rowH, (h) => right - (h / maxH) * (right - left), false)}</g>`);
  }
  if (d.colTree) {
    const maxH = Math.max(...d.colTree.merges.map((x) => x.height), 1e-12);
    const bottom = y0 - 3, topY = y0 - 3 - lay.colDendroH;
    parts.push(`<g class="col-dendrogram">${dendrogram(d.colTree, d.samples.length, (i) => x0 + (i + 0.5) * colW, (h) => bottom - (h / maxH) * (bottom - topY), true)}</g>`);
  }
  return parts.join("");
}

/** Gene labels right of the rows; sample labels under the columns, reading upwards. */
export function heatmapLabels(d: HeatmapData, lay: HeatmapLayout): string {
  const parts: string[] = [];
  if (lay.geneLabels) {
    const t = lay.labels.map((l, r) => text(lay.x1 + 4, lay.y0 + (r + 0.5) * lay.rowH, l, { size: r2(lay.geneFont), baseline: "middle" }));
    parts.push(`<g class="gene-labels">${t.join("")}</g>`);
  }
  if (lay.sampleLabels) {
    const t = d.colOrder.map((s, c) => text(lay.x0 + (c + 0.5) * lay.colW, lay.y1 + 6, d.samples[s]!, { size: r2(lay.sampleFont), anchor: "end", baseline: "middle", rotate: -90 }));
    parts.push(`<g class="sample-labels">${t.join("")}</g>`);
  }
  return parts.join("");
}

/** Colour bar with integer ticks, its title, and the NA key when some cell is missing. */
export function heatmapColorbar(d: HeatmapData, lay: HeatmapLayout, cmap: (t: number) => string): string {
  const { cbX, cbH, y0, naY } = lay;
  const lim = d.lim;
  const cb: string[] = [];
  const steps = 64;
  for (let i = 0; i < steps; i++) {
    const t0 = i / steps;
    cb.push(`<rect x="${r2(cbX)}" y="${r2(y0 + cbH - (i + 1) * cbH / steps)}" width="${CB_W}" height="${r2(cbH / steps + 0.4)}" fill="${cmap(t0 + 0.5 / steps)}"/>`);
  }
  cb.push(`<rect x="${r2(cbX)}" y="${r2(y0)}" width="${CB_W}" height="${r2(cbH)}" fill="none" stroke="#444" stroke-width="0.5"/>`);
  for (const t of lay.ticks) {
    const yy = y0 + cbH - ((t + lim) / (2 * lim)) * cbH;
    cb.push(`<line x1="${r2(cbX + CB_W)}" y1="${r2(yy)}" x2="${r2(cbX + CB_W + 3)}" y2="${r2(yy)}" stroke="#444" stroke-width="0.8"/>`);
    cb.push(text(cbX + CB_W + 5, yy, fmt(t), { baseline: "middle" }));
  }
  cb.push(text(cbX, y0 - 9, CB_TITLE, { size: SIZE.legend }));
  if (d.naCells) {
    cb.push(`<rect x="${r2(cbX)}" y="${r2(naY - 6)}" width="12" height="12" fill="${NA_FILL}" stroke="#444" stroke-width="0.5"/>`);
    cb.push(text(cbX + 18, naY, "NA (missing)", { size: SIZE.legend, baseline: "middle" }));
  }
  return `<g class="colorbar">${cb.join("")}</g>`;
}

/** The note lines at the bottom, last one lowest. */
export function heatmapNotes(lay: HeatmapLayout): string {
  const { notes, H } = lay;
  return notes.map((n, i) => text(PAD_L, H - PAD_B - (notes.length - 1 - i) * NOTE_H - 3, n, { size: SIZE.label, fill: "#555" })).join("");
}
