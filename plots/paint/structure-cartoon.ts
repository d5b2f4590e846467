/**
 * The cartoon drawn between consecutive spline samples (layout/cartoon.ts): where both have a
 * width, a ribbon piece — its face and rim shaded by their normals, a dark silhouette along
 * the far and outer edges, cross edges where a ribbon starts or ends and at an arrowhead's
 * shoulder; elsewhere a tube piece — outline, body and highlight, butt-capped and lengthened
 * a little so consecutive pieces join without seams.
 */
import type { Residue } from "../data/molecule.js";
import { add, cross, dist, mul, norm, sub, type V } from "../data/vectors.js";
import { cartoonSamples, type CartoonSample } from "../layout/cartoon.js";
import { lineItem, polyItem, type Item } from "./depth-sort.js";
import { hexToRgb, LIGHT, lit, mix, rgbHex, WHITE, type RGB } from "./shading.js";
import type { StructureScene } from "./structure-scene.js";
import { r2 } from "./svg.js";

/** One trace segment as ribbons (helices, strands) and tubes (loops; nucleic acids, thicker), `S` samples per residue. */
export function cartoonPrims(sc: StructureScene, seg: Residue[], S: number): void {
  const samples = cartoonSamples(seg, sc.proj.pos, S);
  const tube = seg[0]!.kind === "nucleic" ? 0.85 : 0.3;
  for (let k = 0; k + 1 < samples.length; k++) {
    const a = samples[k]!, b = samples[k + 1]!;
    const base = hexToRgb(sc.colours.residueColor(seg[a.res]!));
    if (dist(a.p, b.p) < 1e-6 && Math.abs(a.w - b.w) < 1e-6) continue;
    if (a.w > 0 && b.w > 0) ribbonPiece(sc, samples, k, base);
    else tubePiece(sc, samples, k, base, tube);
  }
}

/** A ribbon piece from sample k to k + 1. */
function ribbonPiece(sc: StructureScene, samples: readonly CartoonSample[], k: number, base: RGB): void {
  const { SX, SY, scale, fogOf } = sc.proj;
  const a = samples[k]!, b = samples[k + 1]!;
  const zmid = (a.p[2] + b.p[2]) / 2;
  const fog = fogOf(zmid);
  const h = 0.22;
  const sA = norm(cross(a.t, a.nrm)), sB = norm(cross(b.t, b.nrm));
  const nAvg = norm(add(a.nrm, b.nrm)), sAvg = norm(add(sA, sB));
  const sig = nAvg[2] >= 0 ? 1 : -1, sig2 = sAvg[2] >= 0 ? 1 : -1;
  const wa = a.w, wb = b.w;
  const corner = (s: CartoonSample, side: V, w: number, e: number, f: number): [number, number] => {
    const q = add(add(s.p, mul(side, e * w)), mul(s.nrm, f * h));
    return [SX(q[0]), SY(q[1])];
  };
  const A1 = corner(a, sA, wa, 1, sig), A2 = corner(a, sA, wa, -1, sig), B1 = corner(b, sB, wb, 1, sig), B2 = corner(b, sB, wb, -1, sig);
  const faceC = rgbHex(lit(base, mul(nAvg, sig), fog));
  const rimA1 = corner(a, sA, wa, sig2, 1), rimA2 = corner(a, sA, wa, sig2, -1), rimB1 = corner(b, sB, wb, sig2, 1), rimB2 = corner(b, sB, wb, sig2, -1);
  const rimC = rgbHex(lit(mul(base, 0.85) as RGB, mul(sAvg, sig2), fog));
  const edge = rgbHex(mix(mix(base, [0, 0, 0], 0.65), WHITE, fog));
  const ew = r2(Math.max(0.6, 0.05 * scale));
  const items: Item[] = [];
  if (Math.abs(sAvg[2]) > 0.08) items.push(polyItem([rimA1, rimB1, rimB2, rimA2], `fill="${rimC}" stroke="${rimC}" stroke-width="0.5"`));
  items.push(polyItem([A1, B1, B2, A2], `fill="${faceC}" stroke="${faceC}" stroke-width="0.5"`));
  const line = (p: [number, number], q: [number, number]) => lineItem(p[0], p[1], q[0], q[1], `stroke="${edge}" stroke-width="${ew}" stroke-linecap="round"`);
  // silhouette: the face's far long edge and the rim's outer long edge
  const far = sig2 > 0 ? [A2, B2] : [A1, B1];
  const outer = Math.abs(sAvg[2]) > 0.08 ? (sig > 0 ? [rimA2, rimB2] : [rimA1, rimB1]) : (sig2 > 0 ? [A1, B1] : [A2, B2]);
  const edges = [line(far[0]!, far[1]!), line(outer[0]!, outer[1]!)];
  // cross edges: where a ribbon starts or ends, and the arrowhead's shoulder
  const startEl = k === 0 || samples[k - 1]!.w === 0;
  if (startEl) edges.push(line(A1, A2));
  if (b.w > a.w + 0.3) edges.push(line(B1, B2));
  const endEl = k + 2 >= samples.length || samples[k + 2]!.w === 0;
  if (endEl && wb > 0.3) edges.push(line(B1, B2));
  sc.prims.push({ z: zmid + 0.2, layers: [[], items, edges] });
}

/** A tube piece from sample k to k + 1 (radius `tube` Å, thinner with depth). */
function tubePiece(sc: StructureScene, samples: readonly CartoonSample[], k: number, base: RGB, tube: number): void {
  const { SX, SY, scale, fogOf, depthT } = sc.proj;
  const a = samples[k]!, b = samples[k + 1]!;
  const zmid = (a.p[2] + b.p[2]) / 2;
  const fog = fogOf(zmid);
  let x1 = SX(a.p[0]), y1 = SY(a.p[1]), x2 = SX(b.p[0]), y2 = SY(b.p[1]);
  const w = 2 * tube * scale * (1 - 0.2 * depthT(zmid));
  const axis = norm(sub(b.p, a.p));
  const nrm = norm(sub([0, 0, 1], mul(axis, axis[2])));
  const body2 = rgbHex(lit(base, nrm, fog, 0.1));
  const edge = rgbHex(mix(mix(base, [0, 0, 0], 0.6), WHITE, fog));
  const hl = rgbHex(mix(lit(base, nrm, 0, 0.1), WHITE, 0.3 + 0.7 * fog));
  const dx = x2 - x1, dy = y2 - y1, l = Math.hypot(dx, dy) || 1;
  let px = -dy / l, py = dx / l;
  if (px * LIGHT[0] - py * LIGHT[1] < 0) { px = -px; py = -py; }
  const off = w * 0.2;
  // Butt caps, each piece lengthened a little at both ends: consecutive pieces join
  // without the seams round caps leave where a later piece covers an earlier highlight.
  const tubeEnd = k === 0 || samples[k - 1]!.w > 0, tubeEnd2 = k + 2 >= samples.length || samples[k + 2]!.w > 0;
  const ext = Math.min(w * 0.3, 2), ux = dx / l, uy = dy / l;
  const [ox1, oy1, ox2, oy2] = [x1 - ux * ext * 0.5, y1 - uy * ext * 0.5, x2 + ux * ext * 0.5, y2 + uy * ext * 0.5];
  x1 -= ux * ext; y1 -= uy * ext; x2 += ux * ext; y2 += uy * ext;
  const cap = (end: boolean) => (end ? ` stroke-linecap="round"` : "");
  sc.prims.push({
    z: zmid, layers: [
      [lineItem(ox1, oy1, ox2, oy2, `stroke="${edge}" stroke-width="${r2(w + Math.max(1, 0.12 * scale))}"${cap(tubeEnd || tubeEnd2)}`)],
      [lineItem(x1, y1, x2, y2, `stroke="${body2}" stroke-width="${r2(w)}"${cap(tubeEnd || tubeEnd2)}`)],
      w > 3 ? [lineItem(x1 + px * off, y1 + py * off, x2 + px * off, y2 + py * off, `stroke="${hl}" stroke-width="${r2(w * 0.3)}"`)] : [],
    ],
  });
}
