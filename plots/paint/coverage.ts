/**
 * A coverage track drawn: the title, summary line and legend; the depth as a filled area —
 * the mean of each bin with a darker outline, and, when a bin holds more than one base, the
 * bin's maximum as a paler envelope behind it — over a grid; the genes underneath (exons as
 * boxes, introns as lines, strand as chevrons, the asked-for gene's name in bold); the axes.
 */
import type { CoverageTrack } from "../data/coverage.js";
import { comma } from "../data/numbers.js";
import { GENE, type CoverageLayout, type PlacedGene } from "../layout/coverage.js";
import { SIZE, textWidth } from "../layout/text.js";
import { axis } from "./axis.js";
import { esc, r2, text } from "./svg.js";

const COLOR = { outline: "#0072B2", mean: "#7DB4DD", max: "#C3DCF0", gene: "#2F2F2F" } as const;

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

/** The title, the summary line and the legend beside it (or under it). */
export function coverageHeader(lay: CoverageLayout): string {
  const parts: string[] = [];
  parts.push(text(lay.title.x, lay.title.y, lay.title.text, { size: SIZE.title, weight: "bold", anchor: "middle", baseline: "hanging" }));
  parts.push(text(lay.left, lay.info.y, lay.info.text, { size: SIZE.legend, baseline: "hanging", fill: "#333" }));
  let lx = lay.legend.x;
  const legendY = lay.legend.y;
  for (const { label, kind } of lay.legend.items) {
    parts.push(`<rect x="${r2(lx)}" y="${r2(legendY + 1)}" width="11" height="${SIZE.legend - 2}" fill="${COLOR[kind]}"${kind === "mean" ? ` stroke="${COLOR.outline}" stroke-width="1"` : ""}/>`);
    lx += 16;
    parts.push(text(lx, legendY, label, { size: SIZE.legend, baseline: "hanging", fill: "#333" }));
    lx += textWidth(label, SIZE.legend) + 14;
  }
  return parts.join("");
}

/** The depth panel: the y axis with grid lines, the x grid, max envelope, mean area, mean outline, baseline. */
export function coverageDepth(track: CoverageTrack, lay: CoverageLayout): string {
  const { start, end, binSize } = track;
  const { x, y, left, right, top, plotBottom } = lay;
  const parts: string[] = [];
  parts.push(axis(y, "left", left, track.source === "bam" ? "Depth (reads)" : "Coverage (bigWig score)", { tickValues: lay.yTicks, tickLabels: lay.yLabels, grid: { from: left, to: right } }).svg);
  for (const v of lay.xTicks.values) parts.push(`<line x1="${r2(x(v))}" y1="${r2(top)}" x2="${r2(x(v))}" y2="${r2(plotBottom)}" stroke="#eeeeee" stroke-width="1"/>`);
  const bins: Array<[number, number, number]> = [];
  const binsMax: Array<[number, number, number]> = [];
  for (let b = 0; b < track.values.length; b++) {
    const bs = start + b * binSize, be = Math.min(end, bs + binSize - 1);
    const x0 = x(bs - 0.5), x1 = x(be + 0.5);
    bins.push([x0, x1, track.values[b]!]);
    binsMax.push([x0, x1, track.max[b]!]);
  }
  const base = `${r2(x(start - 0.5))},${r2(plotBottom)}`;
  const close = `L${r2(x(end + 0.5))},${r2(plotBottom)} Z`;
  if (binSize > 1) parts.push(`<path d="M${base} L${stepPoints(binsMax, y)} ${close}" fill="${COLOR.max}" stroke="none"/>`);
  parts.push(`<path d="M${base} L${stepPoints(bins, y)} ${close}" fill="${COLOR.mean}" stroke="none"/>`);
  parts.push(`<path d="M${stepPoints(bins, y)}" fill="none" stroke="${COLOR.outline}" stroke-width="1.1" stroke-linejoin="round"/>`);
  // The panel's baseline and frame edges.
  parts.push(`<line x1="${r2(left)}" y1="${r2(plotBottom)}" x2="${r2(right)}" y2="${r2(plotBottom)}" stroke="#333" stroke-width="1"/>`);
  return parts.join("");
}

/** The gene model under the depth, and the x axis at the bottom in genomic coordinates. */
export function coverageGenesAndAxis(track: CoverageTrack, lay: CoverageLayout): string {
  const parts: string[] = [];
  if (lay.genes.rows) {
    parts.push(`<line x1="${r2(lay.left)}" y1="${r2(lay.geneTop - 5)}" x2="${r2(lay.right)}" y2="${r2(lay.geneTop - 5)}" stroke="#dddddd" stroke-width="0.8"/>`);
    for (const g of lay.genes.placed) parts.push(drawGene(g, lay.geneTop + g.row * GENE.row + 3, lay.x, g.bold));
  }
  parts.push(axis(lay.x, "bottom", lay.axisY, `Position on ${track.chr} (${lay.xTicks.unit})`, { tickValues: lay.xTicks.values, tickLabels: lay.xTicks.labels }).svg);
  return parts.join("");
}
