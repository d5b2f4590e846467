/**
 * A PCA plot drawn: the framed plot with grid and dashed zero lines, one marker per sample
 * coloured and shaped by its group (Okabe–Ito colours, then the same colours in other
 * shapes; samples without a group grey, drawn first), the legend on the right.
 */
import { UNASSIGNED, type PcaResult, type SampleGroups } from "../data/pca.js";
import { POINT_R, type PcaLayout } from "../layout/pca.js";
import { SIZE } from "../layout/text.js";
import { axis } from "./axis.js";
import { GREY, PALETTE } from "./colours.js";
import { r2, text } from "./svg.js";

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

/** A group's colour and shape: the palette's colours in turn, then again in the next shape. */
function groupStyle(names: readonly string[], group: string): { color: string; shape: Shape } {
  if (group === UNASSIGNED) return { color: GREY, shape: "circle" };
  const i = names.indexOf(group);
  return { color: PALETTE[i % PALETTE.length]!, shape: SHAPES[Math.floor(i / PALETTE.length) % SHAPES.length]! };
}

/** Axes with grid lines, the plot's frame, and zero lines where the centred data's mean sits. */
export function pcaFrame(lay: PcaLayout): string {
  const { plot, x, y } = lay;
  const parts: string[] = [];
  parts.push(axis(x, "bottom", plot.y + plot.h, lay.xLabel, { grid: { from: plot.y, to: plot.y + plot.h } }).svg);
  parts.push(axis(y, "left", plot.x, lay.yLabel, { grid: { from: plot.x, to: plot.x + plot.w } }).svg);
  parts.push(`<rect x="${r2(plot.x)}" y="${r2(plot.y)}" width="${r2(plot.w)}" height="${r2(plot.h)}" fill="none" stroke="#333" stroke-width="1"/>`);
  const [x0d, x1d] = x.domain() as [number, number], [y0d, y1d] = y.domain() as [number, number];
  if (x0d < 0 && x1d > 0) parts.push(`<line x1="${r2(x(0))}" y1="${r2(plot.y)}" x2="${r2(x(0))}" y2="${r2(plot.y + plot.h)}" stroke="#bbb" stroke-dasharray="3 3"/>`);
  if (y0d < 0 && y1d > 0) parts.push(`<line x1="${r2(plot.x)}" y1="${r2(y(0))}" x2="${r2(plot.x + plot.w)}" y2="${r2(y(0))}" stroke="#bbb" stroke-dasharray="3 3"/>`);
  return parts.join("");
}

/** Points: unassigned first so coloured groups sit on top. */
export function pcaPoints(r: PcaResult, g: SampleGroups | undefined, lay: PcaLayout): string {
  const order = r.samples.map((_, i) => i).sort((a, b) => Number((g?.groups[b] ?? "") === UNASSIGNED) - Number((g?.groups[a] ?? "") === UNASSIGNED) || a - b);
  const pts: string[] = [];
  for (const i of order) {
    const st = g ? groupStyle(g.names, g.groups[i]!) : { color: PALETTE[0], shape: "circle" as Shape };
    pts.push(marker(st.shape, lay.x(r.xs[i]!), lay.y(r.ys[i]!), POINT_R, st.color));
  }
  return `<g class="points">${pts.join("")}</g>`;
}

/** The legend, right of the plot: its title, then one marker and name per group. */
export function pcaLegend(g: SampleGroups, lay: PcaLayout): string {
  const { plot, legendRow } = lay;
  const lx = plot.x + plot.w + 16;
  const items: string[] = [text(lx, plot.y + SIZE.legend / 2, g.title, { size: SIZE.legend, weight: "bold", baseline: "middle" })];
  let ly = plot.y + legendRow;
  for (const name of g.names) {
    const st = groupStyle(g.names, name);
    const cy = ly + SIZE.legend / 2;
    items.push(marker(st.shape, lx + 6, cy, 4.5, st.color), text(lx + 18, cy, name, { size: SIZE.legend, baseline: "middle" }));
    ly += legendRow;
  }
  return `<g class="legend">${items.join("")}</g>`;
}
