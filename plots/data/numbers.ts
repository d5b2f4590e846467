/**
 * Numbers in and out of a chart: a table cell read as a number (NA, empty and text are no
 * number; plain decimals take a fast path, since a Manhattan file has millions of cells), and
 * a number written for people, the same way in the picture, the TSV's comments and errors.
 */
import { parseNumber } from "../../core/delimited.js";

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

/** A number for people: no float noise, exponent form for the very small and large. */
export function fmt(v: number, digits = 3): string {
  if (!Number.isFinite(v)) return String(v);
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a < 1e-3 || a >= 1e6) return v.toExponential(Math.max(0, digits - 1)).replace(/\.?0+e/, "e").replace("-", "\u2212");
  return String(+v.toPrecision(digits)).replace("-", "\u2212");
}

/** A whole number with thousands separators (1,234,567), as genomic positions are read. */
export const comma = (v: number) => Math.round(v).toLocaleString("en-US");

/** 1, 1.5, 2, 3, 4, 5, 6, 8, 10 × 10^k at or above v: a round end for a colour scale. */
export function niceCeil(v: number): number {
  const e = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 1.5, 2, 3, 4, 5, 6, 8, 10]) if (m * e >= v - 1e-12) return m * e;
  return 10 * e;
}
