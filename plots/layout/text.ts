/**
 * Text as layout sees it: the font every chart is drawn with (DejaVu Sans, whose advance
 * widths font-metrics.ts holds), the sizes text is set at, how wide a string is, and the ways
 * a string is made to fit a width (cut with an ellipsis, or set smaller first). Layout measures
 * every text before placing it, so labels, margins and overlaps match the drawn pixels.
 */
import { BOLD, REGULAR } from "./font-metrics.js";

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

/** `s` cut with an ellipsis to fit `max` px at `size`. */
export function fitText(s: string, size: number, max: number, bold = false): string {
  if (textWidth(s, size, bold) <= max) return s;
  const chars = [...s];
  while (chars.length > 1 && textWidth(chars.join("") + "…", size, bold) > max) chars.pop();
  return chars.join("") + "…";
}

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
 * Largest size ≤ `max` (down to `min`, in steps of 0.25 px) at which `s` fits `width`; cut
 * with … if it never does, or nothing when not even the ellipsis fits.
 */
export function shrinkText(s: string, width: number, max: number, min: number, bold = false): { text: string; size: number } {
  let size = max;
  while (size > min && textWidth(s, size, bold) > width) size = Math.max(min, size - 0.25);
  if (textWidth(s, size, bold) <= width) return { text: s, size };
  let t = s;
  while (t.length > 1 && textWidth(t + "…", size, bold) > width) t = t.slice(0, -1);
  return { text: t.length >= 1 && width > textWidth("…", size, bold) ? t + "…" : "", size };
}
