/**
 * An axis drawn: its line, ticks, tick labels, optional grid lines and title, for a d3-like
 * scale at the bottom or the left of a plot. The room it needs is layout/axes.ts.
 */
import { fmt } from "../data/numbers.js";
import { SIZE, textWidth } from "../layout/text.js";
import { r2, text } from "./svg.js";

type Scale = { (v: number): number; ticks(n?: number): number[]; domain(): number[] };
export interface AxisOptions { ticks?: number; format?: (v: number) => string; tickValues?: number[]; tickLabels?: string[]; grid?: { from: number; to: number } }

const line = (x1: number, y1: number, x2: number, y2: number, stroke = "#333", w = 1) => `<line x1="${r2(x1)}" y1="${r2(y1)}" x2="${r2(x2)}" y2="${r2(y2)}" stroke="${stroke}" stroke-width="${w}"/>`;

/**
 * An axis with ticks, tick labels and a title. `at` is the y of a bottom axis or the x of a
 * left axis; `from`/`to` its pixel extent. Returns the SVG and how much room it takes
 * beyond `at` (for margins).
 */
export function axis(scale: Scale, orient: "bottom" | "left", at: number, label: string, o: AxisOptions = {}): { svg: string; extent: number } {
  const values = o.tickValues ?? scale.ticks(o.ticks ?? 6);
  const f = o.format ?? ((v: number) => fmt(v));
  const labels = o.tickLabels ?? values.map(f);
  const [d0, d1] = scale.domain() as [number, number];
  const [p0, p1] = [scale(d0), scale(d1)].sort((a, b) => a - b) as [number, number];
  return orient === "bottom" ? bottomAxis(scale, at, label, values, labels, p0, p1, o.grid) : leftAxis(scale, at, label, values, labels, p0, p1, o.grid);
}

function bottomAxis(scale: Scale, at: number, label: string, values: number[], labels: string[], p0: number, p1: number, grid: AxisOptions["grid"]): { svg: string; extent: number } {
  const parts: string[] = [line(p0, at, p1, at)];
  values.forEach((v, i) => {
    const x = scale(v);
    if (grid) parts.push(line(x, grid.from, x, grid.to, "#e6e6e6"));
    parts.push(line(x, at, x, at + 5), text(x, at + 7, labels[i] ?? "", { anchor: "middle", baseline: "hanging" }));
  });
  parts.push(text((p0 + p1) / 2, at + 7 + SIZE.tick + 10, label, { size: SIZE.axis, anchor: "middle", baseline: "hanging" }));
  return { svg: `<g class="axis">${parts.join("")}</g>`, extent: 7 + SIZE.tick + 10 + SIZE.axis + 2 };
}

function leftAxis(scale: Scale, at: number, label: string, values: number[], labels: string[], p0: number, p1: number, grid: AxisOptions["grid"]): { svg: string; extent: number } {
  const parts: string[] = [line(at, p0, at, p1)];
  const widest = Math.max(0, ...labels.map((l) => textWidth(l, SIZE.tick)));
  values.forEach((v, i) => {
    const y = scale(v);
    if (grid) parts.push(line(grid.from, y, grid.to, y, "#e6e6e6"));
    parts.push(line(at - 5, y, at, y), text(at - 7, y, labels[i] ?? "", { anchor: "end", baseline: "middle" }));
  });
  const lx = at - 7 - widest - 8 - SIZE.axis / 2;
  parts.push(text(lx, (p0 + p1) / 2, label, { size: SIZE.axis, anchor: "middle", baseline: "middle", rotate: -90 }));
  return { svg: `<g class="axis">${parts.join("")}</g>`, extent: 7 + widest + 8 + SIZE.axis };
}
