/**
 * The van der Waals surface: every atom a sphere of its radius, but only the spheres a depth
 * buffer finds in front somewhere are written to the SVG (softly shaded, depth-cued in a few
 * shared levels). Highlighted residues the surface hides are drawn over it, dashed and
 * translucent, so that they can still be found.
 */
import { VDW, type Residue } from "../data/molecule.js";
import { circlePrim } from "./depth-sort.js";
import { hexToRgb, mix, WHITE, type RGB } from "./shading.js";
import { HIGHLIGHT } from "./structure-colours.js";
import type { StructureScene } from "./structure-scene.js";
import { r2 } from "./svg.js";

/** The surface into the scene; returns the atoms that show, and adds to `hidden` the highlighted residues that barely do. */
export function surfacePrims(sc: StructureScene, hidden: Set<Residue>): Set<number> {
  const { owner, step } = depthBuffer(sc);
  const vis = new Set<number>();
  const pixels = new Map<number, number>();
  for (const o of owner) if (o >= 0) { vis.add(o); pixels.set(o, (pixels.get(o) ?? 0) + step * step); }
  // A highlighted residue counts as seen when at least a quarter of a carbon's disc of it shows.
  const minShown = 0.25 * Math.PI * (1.7 * sc.proj.scale) ** 2;
  for (const h of sc.mol.highlights) for (const r of h.residues) {
    if (r.atoms.reduce((sum, i) => sum + (pixels.get(i) ?? 0), 0) < minShown) hidden.add(r);
  }
  spheres(sc, vis);
  hiddenHighlights(sc, hidden);
  return vis;
}

/** Which atom is in front at each cell of the plot (cells of `step` px, coarser for very large pictures). */
function depthBuffer(sc: StructureScene): { owner: Int32Array; step: number } {
  const { atoms } = sc.mol;
  const { plot, scale, SX, SY, view } = sc.proj;
  const n = atoms.length;
  const gw = Math.ceil(plot.w), gh = Math.ceil(plot.h);
  let area = 0;
  for (let i = 0; i < n; i++) { const r = (VDW[atoms[i]!.element] ?? 1.7) * scale; area += r * r * 3.2; }
  const step = area > 6e6 ? Math.ceil(Math.sqrt(area / 6e6)) : 1;
  const bw = Math.ceil(gw / step) + 1, bh = Math.ceil(gh / step) + 1;
  const depth = new Float32Array(bw * bh).fill(-Infinity);
  const owner = new Int32Array(bw * bh).fill(-1);
  for (let i = 0; i < n; i++) {
    const rA = VDW[atoms[i]!.element] ?? 1.7;
    const r = rA * scale;
    const px = SX(view[3 * i]!) - plot.x, py = SY(view[3 * i + 1]!) - plot.y, z = view[3 * i + 2]!;
    const x0 = Math.max(0, Math.floor((px - r) / step)), x1 = Math.min(bw - 1, Math.ceil((px + r) / step));
    const y0 = Math.max(0, Math.floor((py - r) / step)), y1 = Math.min(bh - 1, Math.ceil((py + r) / step));
    for (let gy = y0; gy <= y1; gy++) {
      for (let gx = x0; gx <= x1; gx++) {
        const dx = gx * step - px, dy = gy * step - py;
        const d2 = dx * dx + dy * dy;
        if (d2 > r * r) continue;
        const zz = z + Math.sqrt(rA * rA - d2 / (scale * scale));
        const k = gy * bw + gx;
        if (zz > depth[k]!) { depth[k] = zz; owner[k] = i; }
      }
    }
  }
  return { owner, step };
}

/** The visible spheres, softly shaded; fog quantised to 24 levels and colours to steps of 4 so gradients are shared. */
function spheres(sc: StructureScene, vis: Set<number>): void {
  const { atoms, residues, residueOf } = sc.mol;
  const { pos, SX, SY, scale, fogOf } = sc.proj;
  const levels = 24;
  for (const i of vis) {
    const p = pos(i);
    const rA = VDW[atoms[i]!.element] ?? 1.7;
    const hl = residues[residueOf[i]!]!.highlighted;
    let base = hexToRgb(hl ? HIGHLIGHT : sc.colours.atomColorSurface(i));
    const fog = Math.round(fogOf(p[2]) * levels) / levels; // quantised so gradients are shared
    base = mix(base, WHITE, fog);
    sc.prims.push(circlePrim(p[2], `<circle cx="${r2(SX(p[0]))}" cy="${r2(SY(p[1]))}" r="${r2(rA * scale)}" fill="url(#${sc.gradients.idFor(base.map((v) => Math.round(v / 4) * 4) as RGB, true)})"/>`));
  }
}

/** Highlighted residues hidden by the surface in front: drawn on top, dashed and translucent. */
function hiddenHighlights(sc: StructureScene, hidden: Set<Residue>): void {
  const { atoms } = sc.mol;
  const { pos, SX, SY, scale } = sc.proj;
  for (const h of sc.mol.highlights) for (const r of h.residues) {
    if (!hidden.has(r)) continue;
    for (const i of r.atoms) {
      const p = pos(i);
      sc.overlay.push(circlePrim(p[2], `<circle cx="${r2(SX(p[0]))}" cy="${r2(SY(p[1]))}" r="${r2((VDW[atoms[i]!.element] ?? 1.7) * scale * 0.8)}" fill="${HIGHLIGHT}" fill-opacity="0.45" stroke="${HIGHLIGHT}" stroke-width="1.2" stroke-dasharray="3 2"/>`));
    }
  }
}
