/**
 * p-values as volcano and Manhattan plots read and draw them: a cell is a p-value when it is
 * a number in [0, 1]; a point's height is −log10 p, and a p of 0 (below floating-point range)
 * is drawn at the smallest positive p of the file (its "floor").
 */
import { fastNumber } from "./numbers.js";

/** A cell as a p-value: a number between 0 and 1, else undefined (the caller counts those). */
export function pValueOf(cell: string | undefined): number | undefined {
  const p = fastNumber(cell);
  return p !== undefined && (p < 0 || p > 1) ? undefined : p;
}

export interface PFloor {
  /** The smallest positive p (Infinity when there is none). */
  minPos: number;
  /** How many p-values are exactly 0. */
  zeros: number;
  /** The p a 0 is drawn at: `minPos`, or 1e-300 when no p is positive. */
  floor: number;
}

/** The floor of the first `n` p-values. */
export function pFloor(P: Float64Array, n: number): PFloor {
  let minPos = Infinity, zeros = 0;
  for (let i = 0; i < n; i++) { const v = P[i]!; if (v === 0) zeros++; else if (v < minPos) minPos = v; }
  return { minPos, zeros, floor: Number.isFinite(minPos) ? minPos : 1e-300 };
}

/** −log10 p, a p of 0 taken at the floor. */
export const negLog10 = (v: number, floor: number) => -Math.log10(v === 0 ? floor : v);

/** The floor as the TSV's comments state it. */
export const floorText = (f: PFloor) => (Number.isFinite(f.minPos) ? String(f.minPos) : "1e-300 (none is positive)");
