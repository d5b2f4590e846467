/**
 * What every chart shares: the result shape (an SVG document plus exactly the data drawn),
 * text measured with the font the picture is drawn with (DejaVu Sans), axes, legends,
 * non-overlapping labels, colour maps, column look-up by option or common name, and the
 * TSV of the drawn data. Pure: renderers in this folder turn parsed data into SVG text;
 * reading files and rasterising to PNG happen outside core/.
 */
import { scaleLinear } from "d3-scale";
import { interpolateMagma, interpolateRdBu, interpolateViridis } from "d3-scale-chromatic";
import { parseNumber } from "../core/delimited.js";
import { BOLD, REGULAR } from "./font-metrics.js";

/** A problem in the user's data or options, worded for a scientist (it becomes the job's `error`). */
export class ChartError extends Error {
  constructor(message: string) { super(message); this.name = "ChartError"; }
}

/** The data a chart drew, written next to the image as TSV. */
export interface ChartData {
  header: string[];
  rows: Array<Array<string | number>>;
  /** Lines written as `# ...` before the header: thresholds, skipped cells, sources. */
  comments: string[];
}

export interface Chart {
  svg: string;
  width: number;
  height: number;
  data: ChartData;
}

export const FONT_FAMILY = "DejaVu Sans";
/** Base sizes (px at 1×): titles, axis labels, tick labels, point labels. */
export const SIZE = { title: 16, axis: 13, tick: 11, label: 10, legend: 11 } as const;

/** Width in px of `s` drawn at `size` px in DejaVu Sans (bold when asked). */
export function textWidth(s: string, size: number, bold = false): number {
  const m = bold ? BOLD : REGULAR;
  let w = 0;
  for (const ch of s) w += m[ch.codePointAt(0)!] ?? 0.62;
  return w * size;
}

export const esc = (s: string) => s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);

/** A number for people: no float noise, exponent form for the very small and large. */
export function fmt(v: number, digits = 3): string {
  if (!Number.isFinite(v)) return String(v);
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a < 1e-3 || a >= 1e6) return v.toExponential(Math.max(0, digits - 1)).replace(/\.?0+e/, "e").replace("-", "\u2212");
  return String(+v.toPrecision(digits)).replace("-", "\u2212");
}

/** Coordinates rounded to 0.01 px keep SVGs small without visible error. */
export const r2 = (v: number) => Math.round(v * 100) / 100;

export interface TextOpts { size?: number; anchor?: "start" | "middle" | "end"; weight?: "normal" | "bold"; fill?: string; rotate?: number; baseline?: "middle" | "hanging" | "alphabetic"; }

export function text(x: number, y: number, s: string, o: TextOpts = {}): string {
  const attrs = [`x="${r2(x)}"`, `y="${r2(y)}"`, `font-size="${o.size ?? SIZE.tick}"`];
  if (o.anchor && o.anchor !== "start") attrs.push(`text-anchor="${o.anchor}"`);
  if (o.weight === "bold") attrs.push(`font-weight="bold"`);
  if (o.fill) attrs.push(`fill="${o.fill}"`);
  if (o.baseline === "middle") attrs.push(`dominant-baseline="central"`);
  if (o.baseline === "hanging") attrs.push(`dominant-baseline="hanging"`);
  if (o.rotate) attrs.push(`transform="rotate(${o.rotate} ${r2(x)} ${r2(y)})"`);
  return `<text ${attrs.join(" ")}>${esc(s)}</text>`;
}

/** The SVG document: white background, one font family, a title element for accessibility. */
export function svgDocument(width: number, height: number, body: string, title?: string): string {
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${Math.round(width)}" height="${Math.round(height)}" viewBox="0 0 ${Math.round(width)} ${Math.round(height)}" font-family="${FONT_FAMILY}, sans-serif" fill="#222">`
    + (title ? `<title>${esc(title)}</title>` : "")
    + `<rect width="100%" height="100%" fill="#ffffff"/>${body}</svg>`;
}

export interface Box { x: number; y: number; w: number; h: number }
export const overlaps = (a: Box, b: Box, pad = 0) => a.x < b.x + b.w + pad && b.x < a.x + a.w + pad && a.y < b.y + b.h + pad && b.y < a.y + a.h + pad;

type Scale = { (v: number): number; ticks(n?: number): number[]; domain(): number[] };

/**
 * An axis with ticks, tick labels and a title. `at` is the y of a bottom axis or the x of a
 * left axis; `from`/`to` its pixel extent. Returns the SVG and how much room it takes
 * beyond `at` (for margins).
 */
export function axis(scale: Scale, orient: "bottom" | "left", at: number, label: string, o: { ticks?: number; format?: (v: number) => string; tickValues?: number[]; tickLabels?: string[]; grid?: { from: number; to: number } } = {}): { svg: string; extent: number } {
  const values = o.tickValues ?? scale.ticks(o.ticks ?? 6);
  const f = o.format ?? ((v: number) => fmt(v));
  const labels = o.tickLabels ?? values.map(f);
  const [d0, d1] = scale.domain() as [number, number];
  const [p0, p1] = [scale(d0), scale(d1)].sort((a, b) => a - b) as [number, number];
  const parts: string[] = [];
  const line = (x1: number, y1: number, x2: number, y2: number, stroke = "#333", w = 1) => `<line x1="${r2(x1)}" y1="${r2(y1)}" x2="${r2(x2)}" y2="${r2(y2)}" stroke="${stroke}" stroke-width="${w}"/>`;
  if (orient === "bottom") {
    parts.push(line(p0, at, p1, at));
    values.forEach((v, i) => {
      const x = scale(v);
      if (o.grid) parts.push(line(x, o.grid.from, x, o.grid.to, "#e6e6e6"));
      parts.push(line(x, at, x, at + 5), text(x, at + 7, labels[i] ?? "", { anchor: "middle", baseline: "hanging" }));
    });
    parts.push(text((p0 + p1) / 2, at + 7 + SIZE.tick + 10, label, { size: SIZE.axis, anchor: "middle", baseline: "hanging" }));
    return { svg: `<g class="axis">${parts.join("")}</g>`, extent: 7 + SIZE.tick + 10 + SIZE.axis + 2 };
  }
  parts.push(line(at, p0, at, p1));
  const widest = Math.max(0, ...labels.map((l) => textWidth(l, SIZE.tick)));
  values.forEach((v, i) => {
    const y = scale(v);
    if (o.grid) parts.push(line(o.grid.from, y, o.grid.to, y, "#e6e6e6"));
    parts.push(line(at - 5, y, at, y), text(at - 7, y, labels[i] ?? "", { anchor: "end", baseline: "middle" }));
  });
  const lx = at - 7 - widest - 8 - SIZE.axis / 2;
  parts.push(text(lx, (p0 + p1) / 2, label, { size: SIZE.axis, anchor: "middle", baseline: "middle", rotate: -90 }));
  return { svg: `<g class="axis">${parts.join("")}</g>`, extent: 7 + widest + 8 + SIZE.axis };
}

/** Room a left axis needs for these tick labels and its title. */
export const leftAxisWidth = (labels: readonly string[]) => 7 + Math.max(0, ...labels.map((l) => textWidth(l, SIZE.tick))) + 8 + SIZE.axis + 4;

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

export interface LabelRequest { x: number; y: number; text: string; size?: number }
export interface PlacedLabel { text: string; x: number; y: number; anchor: "start" | "middle" | "end"; box: Box; leader?: { x1: number; y1: number; x2: number; y2: number } }

/**
 * Labels for points, none overlapping another label, a drawn point or an obstacle (legend,
 * axes), all inside `bounds`. Greedy in the order given (most important first): the eight
 * positions around the point, then the same at growing distance with a leader line. A label
 * that finds no room is left out — the caller reports how many (the TSV lists them all).
 */
export function placeLabels(reqs: readonly LabelRequest[], bounds: Box, obstacles: readonly Box[] = [], pointRadius = 3): { placed: PlacedLabel[]; dropped: number } {
  const taken: Box[] = [...obstacles];
  const points: Box[] = reqs.map((r) => ({ x: r.x - pointRadius, y: r.y - pointRadius, w: 2 * pointRadius, h: 2 * pointRadius }));
  const placed: PlacedLabel[] = [];
  let dropped = 0;
  const inside = (b: Box) => b.x >= bounds.x && b.y >= bounds.y && b.x + b.w <= bounds.x + bounds.w && b.y + b.h <= bounds.y + bounds.h;
  for (const r of reqs) {
    const size = r.size ?? SIZE.label;
    const w = textWidth(r.text, size), h = size * 1.15;
    let done: PlacedLabel | undefined;
    for (const dist of [4, 14, 26, 40, 56]) {
      const d = dist + pointRadius;
      const cands: Array<[number, number, "start" | "middle" | "end"]> = [
        [r.x + d, r.y - d / 2 - h / 2, "start"], [r.x - d, r.y - d / 2 - h / 2, "end"], [r.x, r.y - d - h, "middle"], [r.x, r.y + d, "middle"],
        [r.x + d, r.y + d / 2 - h / 2, "start"], [r.x - d, r.y + d / 2 - h / 2, "end"], [r.x + d, r.y - h / 2, "start"], [r.x - d, r.y - h / 2, "end"],
      ];
      for (const [ax, top, anchor] of cands) {
        const left = anchor === "start" ? ax : anchor === "end" ? ax - w : ax - w / 2;
        const box = { x: left, y: top, w, h };
        if (!inside(box) || taken.some((t) => overlaps(box, t, 1)) || points.some((p) => overlaps(box, p))) continue;
        const leader = dist >= 14 ? { x1: r.x, y1: r.y, x2: Math.max(left, Math.min(left + w, r.x)), y2: Math.max(top, Math.min(top + h, r.y)) } : undefined;
        done = { text: r.text, x: ax, y: top + h / 2, anchor, box, ...(leader ? { leader } : {}) };
        break;
      }
      if (done) break;
    }
    if (done) { placed.push(done); taken.push(done.box); } else dropped++;
  }
  return { placed, dropped };
}

/** SVG for placed labels (leader lines under the text, text with a white halo). */
export function drawLabels(labels: readonly PlacedLabel[], size: number = SIZE.label): string {
  return labels.map((l) => (l.leader ? `<line x1="${r2(l.leader.x1)}" y1="${r2(l.leader.y1)}" x2="${r2(l.leader.x2)}" y2="${r2(l.leader.y2)}" stroke="#555" stroke-width="0.7"/>` : "")
    + `<text x="${r2(l.x)}" y="${r2(l.y)}" font-size="${size}" text-anchor="${l.anchor}" dominant-baseline="central" stroke="#fff" stroke-width="3" stroke-linejoin="round" paint-order="stroke">${esc(l.text)}</text>`).join("");
}

/** Okabe–Ito: eight colours distinguishable with the common colour-vision deficiencies. */
export const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"] as const;
export const GREY = "#9a9a9a";

export const COLORMAPS = ["viridis", "magma", "RdBu", "coolwarm"] as const;
export type Colormap = (typeof COLORMAPS)[number];

const coolwarmStops = ["#3b4cc0", "#6788ee", "#9abbff", "#c9d7f0", "#edd1c2", "#f7a889", "#e26952", "#b40426"];
const coolwarm = scaleLinear<string>().domain(coolwarmStops.map((_, i) => i / (coolwarmStops.length - 1))).range(coolwarmStops).clamp(true);

/** t in [0, 1] → colour. RdBu runs blue (low) to red (high), as heatmaps of z-scores read. */
export function colormap(name: Colormap): (t: number) => string {
  switch (name) {
    case "viridis": return interpolateViridis;
    case "magma": return interpolateMagma;
    case "RdBu": return (t) => interpolateRdBu(1 - t);
    case "coolwarm": return (t) => coolwarm(t);
  }
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

/**
 * The index of a column: the one an option names (exactly, then case-insensitively), else
 * the first of the common names present. A name that is not there is the user's mistake:
 * the message names the option and lists the file's columns.
 */
export function findColumn(header: readonly string[], requested: string | undefined, candidates: readonly string[], option: string, what: string): number {
  const list = () => header.map((h) => JSON.stringify(h)).join(", ");
  if (requested !== undefined) {
    let i = header.indexOf(requested);
    if (i < 0) i = header.findIndex((h) => h.toLowerCase() === requested.toLowerCase());
    if (i < 0) throw new ChartError(`column "${requested}" (option ${option}) is not in the file; its columns are: ${list()}`);
    return i;
  }
  for (const c of candidates) { const i = header.indexOf(c); if (i >= 0) return i; }
  for (const c of candidates) { const i = header.findIndex((h) => h.toLowerCase() === c.toLowerCase()); if (i >= 0) return i; }
  throw new ChartError(`no ${what} column found (looked for ${candidates.join(", ")}); name it with option ${option}; the file's columns are: ${list()}`);
}

/** A numeric cell, or undefined for NA / empty / non-numeric (the caller counts those). */
export const numberOf = (cell: string | undefined): number | undefined => (cell === undefined ? undefined : parseNumber(cell));

/**
 * `numberOf` with a fast path for the plain decimals that fill large tables (a million
 * rows: the regex of `parseNumber` would cost seconds); anything unusual goes to `numberOf`.
 */
export function fastNumber(cell: string | undefined): number | undefined {
  if (cell === undefined || cell.length === 0) return undefined;
  const c = cell.charCodeAt(0);
  if ((c >= 48 && c <= 57) || c === 45 || c === 46) {
    const second = cell.length > 1 ? cell.charCodeAt(1) | 32 : 0;
    if (!(c === 48 && (second === 120 || second === 98 || second === 111))) { // 0x, 0b, 0o are not decimals
      const v = Number(cell);
      if (Number.isFinite(v)) return v;
    }
  }
  return numberOf(cell);
}

/** The first common name present (exactly, then case-insensitively), or undefined. */
export function optionalColumn(header: readonly string[], candidates: readonly string[]): number | undefined {
  for (const c of candidates) { const i = header.indexOf(c); if (i >= 0) return i; }
  for (const c of candidates) { const i = header.findIndex((h) => h.toLowerCase() === c.toLowerCase()); if (i >= 0) return i; }
  return undefined;
}

/** `s` cut with an ellipsis to fit `max` px at `size`. */
export function fitText(s: string, size: number, max: number, bold = false): string {
  if (textWidth(s, size, bold) <= max) return s;
  const chars = [...s];
  while (chars.length > 1 && textWidth(chars.join("") + "…", size, bold) > max) chars.pop();
  return chars.join("") + "…";
}

/** The TSV written next to the image: `# ` comment lines, the header, the rows drawn. */
export function toTsv(d: ChartData): string {
  const cell = (v: string | number) => (typeof v === "number" ? (Number.isInteger(v) ? String(v) : String(+v.toPrecision(8))) : v.replace(/[\t\n\r]/g, " "));
  return d.comments.map((c) => `# ${c.replace(/\n/g, " ")}\n`).join("") + d.header.join("\t") + "\n" + d.rows.map((r) => r.map(cell).join("\t")).join("\n") + (d.rows.length ? "\n" : "");
}

/** The frame a renderer draws in: SVG size in px, the title (the user's or a default), the file's name. */
export interface Frame { width: number; height: number; title?: string; source: string }

/**
 * Table-driven charts take rows one at a time (the file is streamed; a renderer keeps only
 * what it draws, in typed arrays where it can) and build the chart at the end.
 */
export interface TableSink {
  row(cells: readonly string[]): void;
  finish(): Chart;
}
