/**
 * A cartoon's geometry in view space: for one trace segment, points along a Catmull-Rom
 * spline through the Cα (P) atoms — strands' guide points smoothed to flatten the pleat —
 * each with its tangent, the ribbon's normal (from the Cα bisector, kept consistent along a
 * strand) and half-width: helices ramp in and out over 0.6 residue, strands end in an
 * arrowhead over their last residue, loops are tubes (width 0). paint/structure-cartoon.ts
 * draws ribbons and tubes between consecutive samples.
 */
import type { Residue, SS } from "../data/molecule.js";
import { add, dot, mul, norm, sub, type V } from "../data/vectors.js";

export interface CartoonSample { p: V; t: V; nrm: V; w: number; kind: SS; res: number }

const HELIX_W = 1.35, SHEET_W = 1.1, HEAD_W = 1.9;

type Run = { kind: SS; s: number; e: number };

/** Samples along a segment, `S` per residue, plus the points where a strand's arrowhead starts and ends. */
export function cartoonSamples(seg: Residue[], pos: (i: number) => V, S: number): CartoonSample[] {
  const m = seg.length;
  const pts = seg.map((r) => pos(r.trace!));
  const nucleic = seg[0]!.kind === "nucleic";
  const ss = seg.map((r) => (nucleic ? "coil" : r.ss));
  const { guide, smoothN } = guideAndNormals(pts, ss);
  const runs = ssRuns(ss);
  const g = (i: number) => guide[Math.max(0, Math.min(m - 1, i))]!;
  const at = (u: number): V => {
    if (m === 1) return g(0);
    const i = Math.min(m - 2, Math.floor(u));
    return catmullRom(g(i - 1), g(i), g(i + 1), g(i + 2), u - i);
  };
  const samples: CartoonSample[] = [];
  let prevU = -1, prevAfter = true;
  for (const [u, after] of sampleParams(m, S, runs)) {
    if (Math.abs(u - prevU) < 1e-9 && after === prevAfter) continue;
    prevU = u; prevAfter = after;
    const p = at(u);
    const tan = m === 1 ? [1, 0, 0] as V : norm(sub(at(Math.min(m - 1, u + 0.02)), at(Math.max(0, u - 0.02))));
    const i = Math.min(m - 1, Math.floor(u)), t = u - i;
    let nv = norm(add(mul(smoothN[i]!, 1 - t), mul(smoothN[Math.min(m - 1, i + 1)]!, t)));
    nv = norm(sub(nv, mul(tan, dot(nv, tan))));
    const { w, kind } = widthAt(runs, m, u, after);
    samples.push({ p, t: tan, nrm: nv, w, kind, res: Math.min(m - 1, Math.round(u)) });
  }
  return samples;
}

/** Strand guide points smoothed (flattens the pleat); ribbon normals from the Cα bisector, smoothed along strands. */
function guideAndNormals(pts: readonly V[], ss: readonly SS[]): { guide: V[]; smoothN: V[] } {
  const m = pts.length;
  const guide = pts.map((p, i) => (ss[i] === "sheet" && i > 0 && i < m - 1 && ss[i - 1] === "sheet" && ss[i + 1] === "sheet" ? mul(add(add(pts[i - 1]!, mul(p, 2)), pts[i + 1]!), 0.25) : p));
  const normals: V[] = pts.map((p, i) => (i > 0 && i < m - 1 ? norm(sub(mul(p, 2), add(pts[i - 1]!, pts[i + 1]!))) : [0, 0, 0]));
  if (m > 2) { normals[0] = normals[1]!; normals[m - 1] = normals[m - 2]!; } else normals.fill([0, 0, 1]);
  for (let i = 1; i < m; i++) if (ss[i] === "sheet" && ss[i - 1] === "sheet" && dot(normals[i]!, normals[i - 1]!) < 0) normals[i] = mul(normals[i]!, -1);
  const smoothN = normals.map((nv, i) => (ss[i] === "sheet" ? norm(add(add(normals[Math.max(0, i - 1)]!, mul(nv, 2)), normals[Math.min(m - 1, i + 1)]!)) : nv));
  return { guide, smoothN };
}

/** Secondary-structure runs in residue coordinates u (u = i at residue i's Cα). */
function ssRuns(ss: readonly SS[]): Run[] {
  const runs: Run[] = [];
  for (let i = 0; i < ss.length; i++) {
    if (ss[i] === "coil") continue;
    const last = runs[runs.length - 1];
    if (last && last.kind === ss[i] && last.e === i - 1) last.e = i; else runs.push({ kind: ss[i]!, s: i, e: i });
  }
  return runs;
}

/** Ribbon half-width at u: helices ramp in and out over 0.6 residue; strands end in an arrowhead over their last residue. */
function widthAt(runs: readonly Run[], m: number, u: number, afterShoulder: boolean): { w: number; kind: SS } {
  for (const r of runs) {
    const u0 = Math.max(0, r.s - 0.5), u1 = Math.min(m - 1, r.e + 0.5);
    if (u < u0 - 1e-9 || u > u1 + 1e-9) continue;
    if (r.kind === "helix") return { w: HELIX_W * Math.max(0.2, Math.min(1, (u - u0) / 0.6 + 0.2, (u1 - u) / 0.6 + 0.2)), kind: "helix" };
    const uh = Math.max(u0 + 0.3, r.e - 1 + 0.5 * 0);
    if (u < uh || (u === uh && !afterShoulder)) return { w: SHEET_W, kind: "sheet" };
    return { w: Math.max(0.05, HEAD_W * (1 - (u - uh) / Math.max(0.3, u1 - uh))), kind: "sheet" };
  }
  return { w: 0, kind: "coil" };
}

/** Where samples fall: `S` per residue, and at each strand's start, shoulder (twice: before and after) and tip; sorted. */
function sampleParams(m: number, S: number, runs: readonly Run[]): Array<[number, boolean]> {
  const us: Array<[number, boolean]> = [];
  for (let i = 0; i < Math.max(1, m - 1); i++) for (let k = 0; k < S; k++) us.push([m === 1 ? 0 : i + k / S, true]);
  if (m > 1) us.push([m - 1, true]);
  for (const r of runs) if (r.kind === "sheet") {
    const u0 = Math.max(0, r.s - 0.5), uh = Math.max(u0 + 0.3, r.e - 1);
    us.push([uh, false], [uh, true], [Math.min(m - 1, r.e + 0.5), true]);
    if (u0 > 0) us.push([u0, true]);
  }
  us.sort((x, y) => x[0] - y[0] || (x[1] ? 1 : 0) - (y[1] ? 1 : 0));
  return us;
}

/** The Catmull-Rom spline through b and c (a and d the neighbours) at t in [0, 1]. */
function catmullRom(a: V, b: V, c: V, d: V, t: number): V {
  const t2 = t * t, t3 = t2 * t;
  return [0, 1, 2].map((k) => 0.5 * (2 * b[k]! + (-a[k]! + c[k]!) * t + (2 * a[k]! - 5 * b[k]! + 4 * c[k]! - d[k]!) * t2 + (-a[k]! + 3 * b[k]! - 3 * c[k]! + d[k]!) * t3)) as V;
}
