/**
 * Sticks and ball-and-stick: each covalent bond as two half-bonds coloured by their atoms —
 * shaded cylinders (outline, body, a highlight stripe on the lit side) thinner with depth —
 * and a shaded ball for each atom asked for and for every atom without a bond.
 */
import { findBonds, IONS } from "../data/molecule.js";
import { add, mul, norm, sub, type V } from "../data/vectors.js";
import { circlePrim, lineItem, type Prim } from "./depth-sort.js";
import { hexToRgb, LIGHT, lit, mix, rgbHex, WHITE, type RGB } from "./shading.js";
import type { StructureScene } from "./structure-scene.js";
import { r2 } from "./svg.js";

export interface StickStyle {
  /** Stick radius, Å. */
  radius: number;
  colorOf: (i: number) => string;
  /** Ball radius for every atom (0: balls only for atoms without a bond). */
  ballRadius?: number;
  /** Big pictures: widths and colours quantised so that many sticks share a style (and a path). */
  merge?: boolean;
}

/** Sticks among the atoms `subset` (and balls), into `target`. */
export function stickPrims(sc: StructureScene, subset: number[], st: StickStyle, target: Prim[]): void {
  const { atoms } = sc.mol;
  const { pos } = sc.proj;
  const bonded = new Uint8Array(atoms.length);
  for (const [a, b] of findBonds(subset, atoms, pos)) {
    bonded[a] = 1; bonded[b] = 1;
    halfBonds(sc, pos(a), a, pos(b), b, st, target);
  }
  const ballRadius = st.ballRadius ?? 0;
  for (const i of subset) {
    const a = atoms[i]!;
    const lone = !bonded[i];
    if (!lone && ballRadius <= 0) continue;
    const r = lone ? Math.max(ballRadius, IONS.has(a.element) ? 0.9 : 0.45) : ballRadius;
    const { SX, SY, scale, fogOf } = sc.proj;
    const p = pos(i);
    const base = hexToRgb(st.colorOf(i));
    const c = mix(base, WHITE, fogOf(p[2]));
    target.push(circlePrim(p[2] + r, `<circle cx="${r2(SX(p[0]))}" cy="${r2(SY(p[1]))}" r="${r2(r * scale)}" fill="url(#${sc.gradients.idFor(c)})"/>`));
  }
}

/** The bond a–b as two halves, each from its atom to the middle in the atom's colour. */
function halfBonds(sc: StructureScene, pa: V, a: number, pb: V, b: number, st: StickStyle, target: Prim[]): void {
  const { SX, SY, scale, fogOf, depthT } = sc.proj;
  const merge = st.merge ?? false;
  const q = (c: RGB): RGB => (merge ? [Math.round(c[0] / 12) * 12, Math.round(c[1] / 12) * 12, Math.round(c[2] / 12) * 12] : c);
  const axis = norm(sub(pb, pa));
  const nrm = norm(sub([0, 0, 1], mul(axis, axis[2]))); // the cylinder normal facing the viewer
  const mid = mul(add(pa, pb), 0.5);
  for (const [from, c] of [[pa, a], [pb, b]] as const) {
    const z = (from[2] + mid[2]) / 2;
    const fog = fogOf(z);
    let w = 2 * st.radius * scale * (1 - 0.3 * depthT(z));
    if (merge) w = Math.round(w * 4) / 4;
    const base = hexToRgb(st.colorOf(c));
    const body = rgbHex(q(lit(base, nrm, fog, 0.15)));
    const edge = rgbHex(q(mix(mix(base, [0, 0, 0], 0.6), WHITE, fog)));
    const hl = rgbHex(q(mix(lit(base, nrm, 0, 0.15), WHITE, 0.35 + 0.65 * fog)));
    const x1 = SX(from[0]), y1 = SY(from[1]), x2 = SX(mid[0]), y2 = SY(mid[1]);
    // the highlight stripe sits on the lit side: toward the light's screen direction
    const dx = x2 - x1, dy = y2 - y1, l = Math.hypot(dx, dy) || 1;
    let px = -dy / l, py = dx / l;
    if (px * LIGHT[0] - py * LIGHT[1] < 0) { px = -px; py = -py; }
    const off = w * 0.2;
    target.push({
      z, layers: [
        [lineItem(x1, y1, x2, y2, `stroke="${edge}" stroke-width="${r2(w + Math.max(1, w * 0.18))}"`)],
        [lineItem(x1, y1, x2, y2, `stroke="${body}" stroke-width="${r2(w)}" stroke-linecap="round"`)],
        w >= 2.5 && !merge ? [lineItem(x1 + px * off, y1 + py * off, x2 + px * off, y2 + py * off, `stroke="${hl}" stroke-width="${r2(w * 0.28)}" stroke-linecap="round"`)] : [],
      ],
    });
  }
}
