/**
 * Colour arithmetic for the shaded structure picture: colours as RGB triples (parsed once,
 * written back as hex), mixing (toward white for depth cueing), and lighting — two-sided
 * Lambert with a Blinn specular term from one fixed light.
 */
import { add, dot, norm, type V } from "../data/vectors.js";

export type RGB = [number, number, number];
const rgbCache = new Map<string, RGB>();
export const hexToRgb = (h: string): RGB => {
  let c = rgbCache.get(h);
  if (!c) { c = parseRgb(h); if (rgbCache.size < 4096) rgbCache.set(h, c); }
  return c;
};
const parseRgb = (h: string): RGB => {
  const m = /^#?([0-9a-f]{6})$/i.exec(h.trim());
  if (m) { const n = parseInt(m[1]!, 16); return [(n >> 16) & 255, (n >> 8) & 255, n & 255]; }
  const r = /rgb\((\d+),\s*(\d+),\s*(\d+)\)/.exec(h);
  return r ? [+r[1]!, +r[2]!, +r[3]!] : [128, 128, 128];
};
const hex2 = (v: number) => Math.max(0, Math.min(255, Math.round(v))).toString(16).padStart(2, "0");
export const rgbHex = (c: RGB) => `#${hex2(c[0])}${hex2(c[1])}${hex2(c[2])}`;
export const mix = (a: RGB, b: RGB, t: number): RGB => [a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t, a[2] + (b[2] - a[2]) * t];
export const WHITE: RGB = [255, 255, 255];

/** The light's direction in view space (z toward the viewer), and the half vector for the specular term. */
export const LIGHT = norm([-0.4, 0.55, 0.75]);
const HALF = norm(add(LIGHT, [0, 0, 1]));
/** Two-sided Lambert + Blinn specular for a surface normal in view space (z toward the viewer). */
export function lit(c: RGB, n: V, fog: number, specular = 0.3): RGB {
  const d = Math.abs(dot(n, LIGHT));
  const k = 0.5 + 0.55 * d;
  const sp = specular * Math.abs(dot(n, HALF)) ** 30;
  const base: RGB = [c[0] * k, c[1] * k, c[2] * k];
  return mix(mix(base, WHITE, sp), WHITE, fog);
}
