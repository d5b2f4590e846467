/**
 * Legends drawn: a vertical list of coloured markers with their labels, and a colour bar
 * with its end values, for the charts whose colour encodes a value.
 */
import { fmt } from "../data/numbers.js";
import type { Box } from "../layout/labels.js";
import { SIZE, textWidth } from "../layout/text.js";
import { r2, text } from "./svg.js";

export interface LegendItem { label: string; color: string; shape?: "circle" | "square" | "line" }

/** A vertical legend; returns its SVG and box so callers can keep labels off it. */
export function legend(items: readonly LegendItem[], x: number, y: number, title?: string): { svg: string; box: Box } {
  const row = SIZE.legend + 6;
  const parts: string[] = [];
  let yy = y;
  if (title) { parts.push(text(x, yy + SIZE.legend / 2, title, { size: SIZE.legend, weight: "bold", baseline: "middle" })); yy += row; }
  for (const it of items) {
    const cy = yy + SIZE.legend / 2;
    if (it.shape === "line") parts.push(`<line x1="${r2(x)}" y1="${r2(cy)}" x2="${r2(x + 12)}" y2="${r2(cy)}" stroke="${it.color}" stroke-width="2"/>`);
    else if (it.shape === "square") parts.push(`<rect x="${r2(x)}" y="${r2(cy - 5)}" width="10" height="10" fill="${it.color}"/>`);
    else parts.push(`<circle cx="${r2(x + 5)}" cy="${r2(cy)}" r="4.5" fill="${it.color}"/>`);
    parts.push(text(x + 17, cy, it.label, { size: SIZE.legend, baseline: "middle" }));
    yy += row;
  }
  const w = 17 + Math.max(title ? textWidth(title, SIZE.legend, true) - 17 : 0, ...items.map((i) => textWidth(i.label, SIZE.legend)));
  return { svg: `<g class="legend">${parts.join("")}</g>`, box: { x, y, w, h: yy - y } };
}

/** A horizontal or vertical colour bar with its scale labels. */
export function colorbar(map: (t: number) => string, x: number, y: number, w: number, h: number, lo: number, hi: number, label: string): string {
  const steps = 48;
  const vertical = h > w;
  const cells: string[] = [];
  for (let i = 0; i < steps; i++) {
    const t = i / (steps - 1);
    cells.push(vertical
      ? `<rect x="${r2(x)}" y="${r2(y + h - (i + 1) * h / steps)}" width="${r2(w)}" height="${r2(h / steps + 0.5)}" fill="${map(t)}"/>`
      : `<rect x="${r2(x + i * w / steps)}" y="${r2(y)}" width="${r2(w / steps + 0.5)}" height="${r2(h)}" fill="${map(t)}"/>`);
  }
  const labels = vertical
    ? text(x + w + 4, y + h, fmt(lo), { baseline: "middle" }) + text(x + w + 4, y, fmt(hi), { baseline: "middle" }) + text(x, y - 8, label, { size: SIZE.legend })
    : text(x, y + h + 4, fmt(lo), { baseline: "hanging" }) + text(x + w, y + h + 4, fmt(hi), { anchor: "end", baseline: "hanging" }) + text(x + w / 2, y - 6, label, { size: SIZE.legend, anchor: "middle" });
  return `<g class="colorbar">${cells.join("")}<rect x="${r2(x)}" y="${r2(y)}" width="${r2(w)}" height="${r2(h)}" fill="none" stroke="#333" stroke-width="0.5"/>${labels}</g>`;
}
