/**
 * SVG text of the basic elements: escaping, coordinates rounded to 0.01 px, a text element
 * with its attributes, and the document every chart is wrapped in (white background, the one
 * font family layout measured with, a title element for accessibility).
 */
import { FONT_FAMILY, SIZE } from "../layout/text.js";

export const esc = (s: string) => s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);

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
