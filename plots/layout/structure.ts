/**
 * A structure picture's geometry. Orientation: the molecule turned to its principal axes
 * (largest extent horizontal, second vertical, the N-terminus left and up, never mirrored),
 * then the user's rotate_x / rotate_y. Projection: orthographic, fitted into the plot box with
 * the drawn radius as padding, with the depth of each point for depth cueing. Around it: the
 * title and subtitle, the legend's rows at the bottom, the labels of highlighted residues (off
 * the highlighted atoms, the legend and the scale bar) and the scale bar's length.
 */
import { ChartError, type Frame } from "../chart.js";
import { resLabel, VDW, type Molecule, type Residue } from "../data/molecule.js";
import type { Structure } from "../data/structure-file.js";
import { add, cross, dot, mul, symmetricEigen3, type V } from "../data/vectors.js";
import type { StructureOpts } from "../options.js";
import { placeLabels, type Box, type PlacedLabel } from "./labels.js";
import { SIZE, textWidth } from "./text.js";

export interface Orientation {
  /** View coordinates of each drawn atom (x, y, z; z toward the viewer), and their depth range. */
  view: Float64Array;
  zMin: number;
  zMax: number;
  pos: (i: number) => V;
}

/** The view coordinates: principal axes of the drawn atoms, then rotate_x about the horizontal axis and rotate_y about the vertical one. */
export function orient(mol: Molecule, opts: StructureOpts): Orientation {
  const { atoms, residues } = mol;
  const n = atoms.length;
  let cx = 0, cy = 0, cz = 0;
  for (const a of atoms) { cx += a.x; cy += a.y; cz += a.z; }
  cx /= n; cy /= n; cz /= n;
  const cov = [[0, 0, 0], [0, 0, 0], [0, 0, 0]];
  for (const a of atoms) {
    const d = [a.x - cx, a.y - cy, a.z - cz];
    for (let i = 0; i < 3; i++) for (let j = 0; j < 3; j++) cov[i]![j]! += d[i]! * d[j]!;
  }
  const { vectors } = symmetricEigen3(cov);
  let [e1, e2] = [vectors[0]!, vectors[1]!];
  const first = residues.find((r) => r.trace !== undefined)?.trace ?? 0;
  const f0: V = [atoms[first]!.x - cx, atoms[first]!.y - cy, atoms[first]!.z - cz];
  if (dot(f0, e1) > 0) e1 = mul(e1, -1); // the N-terminus (first residue) on the left…
  if (dot(f0, e2) < 0) e2 = mul(e2, -1); // …and toward the top
  const e3 = cross(e1, e2); // a proper rotation: never a mirror image
  const ax = (opts.rotate_x * Math.PI) / 180, ay = (opts.rotate_y * Math.PI) / 180;
  const view = new Float64Array(n * 3);
  let zMin = Infinity, zMax = -Infinity;
  for (let i = 0; i < n; i++) {
    const a = atoms[i]!;
    const d: V = [a.x - cx, a.y - cy, a.z - cz];
    let x = dot(d, e1), y = dot(d, e2), z = dot(d, e3);
    [y, z] = [y * Math.cos(ax) - z * Math.sin(ax), y * Math.sin(ax) + z * Math.cos(ax)];
    [x, z] = [x * Math.cos(ay) + z * Math.sin(ay), -x * Math.sin(ay) + z * Math.cos(ay)];
    view[3 * i] = x; view[3 * i + 1] = y; view[3 * i + 2] = z;
    if (z < zMin) zMin = z;
    if (z > zMax) zMax = z;
  }
  return { view, zMin, zMax, pos: (i: number): V => [view[3 * i]!, view[3 * i + 1]!, view[3 * i + 2]!] };
}

export interface Projection extends Orientation {
  plot: Box;
  /** px per Å, and view coordinates → picture px. */
  scale: number;
  SX: (x: number) => number;
  SY: (y: number) => number;
  /** How far toward white a point at depth z fades, and its depth as a fraction (0 nearest, 1 farthest). */
  fogOf: (z: number) => number;
  depthT: (z: number) => number;
}

/** Fit: the extents of everything drawn, with the drawn radius as padding, centred in `plot` (at most 80 px per Å). */
export function project(o: Orientation, plot: Box, opts: StructureOpts): Projection {
  const { view, zMin, zMax } = o;
  const n = view.length / 3;
  const pad = opts.style === "surface" ? 2.0 : opts.style === "stick" ? 0.6 : 2.2;
  let xMin = Infinity, xMax = -Infinity, yMin = Infinity, yMax = -Infinity;
  for (let i = 0; i < n; i++) {
    const x = view[3 * i]!, y = view[3 * i + 1]!;
    if (x < xMin) xMin = x;
    if (x > xMax) xMax = x;
    if (y < yMin) yMin = y;
    if (y > yMax) yMax = y;
  }
  const scale = Math.min(plot.w / (xMax - xMin + 2 * pad), plot.h / (yMax - yMin + 2 * pad), 80);
  const ox = plot.x + plot.w / 2 - ((xMin + xMax) / 2) * scale, oy = plot.y + plot.h / 2 + ((yMin + yMax) / 2) * scale;
  const zSpan = Math.max(zMax - zMin, 1e-6);
  // Depth cue: far parts fade toward white — less when colour encodes a value, so that a
  // faded colour is not read as another band or value.
  const fogMax = opts.color_by === "chain" ? 0.55 : 0.3;
  return {
    ...o, plot, scale,
    SX: (x: number) => ox + x * scale, SY: (y: number) => oy - y * scale,
    fogOf: (z: number) => fogMax * ((zMax - z) / zSpan) ** 1.1,
    depthT: (z: number) => (zMax - z) / zSpan,
  };
}

/** `t` cut with an ellipsis (at a word's end, spaces trimmed) to fit `maxW` px. */
function clip(t: string, size: number, maxW: number, bold = false): string {
  if (textWidth(t, size, bold) <= maxW) return t;
  let lo = 0, hi = t.length;
  while (lo < hi) { const mid = Math.ceil((lo + hi) / 2); if (textWidth(t.slice(0, mid) + "…", size, bold) <= maxW) lo = mid; else hi = mid - 1; }
  return t.slice(0, lo).trimEnd() + "…";
}

export interface StructureHeader { title: string; shownTitle: string; subtitle: string; height: number }

/** The title (the user's, or the id and style), the structure's own title under it, and the room they take. */
export function structureHeader(s: Structure, opts: StructureOpts, frame: Frame): StructureHeader {
  const style = opts.style;
  const title = frame.title ?? `${s.id ? s.id.toUpperCase() : frame.source} — ${style === "surface" ? "van der Waals surface" : style === "stick" ? "sticks" : "cartoon"}`;
  const maxTextW = frame.width - 32;
  const subtitle = s.title ? clip(s.title, SIZE.tick, maxTextW) : "";
  return { title, shownTitle: clip(title, SIZE.title, maxTextW, true), subtitle, height: subtitle ? 54 : 38 };
}

/** The plot box between the header and the legend; too small a picture is the user's mistake. */
export function plotBox(W: number, H: number, headerH: number, legendH: number): Box {
  const plot: Box = { x: 16, y: headerH + 4, w: W - 32, h: H - headerH - 4 - legendH - 14 };
  if (plot.h < 60 || plot.w < 60) throw new ChartError(`the image is too small for this structure's picture (${W}×${H}); make it larger`);
  return plot;
}

/** Legend items of these widths packed into centred rows at the bottom: each item's row and x, the rows' y, the box. */
export function legendRows(widths: readonly number[], W: number, H: number, bfactor: boolean): { rows: Array<Array<{ item: number; x: number }>>; y0: number[]; height: number; box: Box } {
  const maxW = W - 32;
  const rows: number[][] = [[]];
  let rowW = 0;
  widths.forEach((w, i) => {
    if (rowW + w - 18 > maxW && rows[rows.length - 1]!.length) { rows.push([]); rowW = 0; }
    rows[rows.length - 1]!.push(i); rowW += w;
  });
  const rowH = bfactor ? 40 : 22;
  const height = rows.length * rowH + 18;
  let minX = W, wTotal = 0;
  const placed = rows.map((row) => {
    const rw = row.reduce((s2, i) => s2 + widths[i]!, 0) - 18;
    wTotal = Math.max(wTotal, rw);
    let x = Math.max(16, (W - rw) / 2);
    minX = Math.min(minX, x);
    return row.map((i) => { const at = { item: i, x }; x += widths[i]!; return at; });
  });
  const y0 = rows.map((_, ri) => H - height + 8 + ri * rowH + (bfactor ? 10 : 0));
  return { rows: placed, y0, height, box: { x: minX - 4, y: H - height, w: wTotal + 8, h: height } };
}

/** Where a residue is: its trace atom, else the centre of its atoms. */
export const residueAnchor = (r: Residue, pos: (i: number) => V): V => (r.trace !== undefined ? pos(r.trace) : r.atoms.map(pos).reduce((s2, p) => add(s2, p), [0, 0, 0] as V).map((v) => v / r.atoms.length) as V);

/** The scale bar: a round length of at least 40 px, under the plot. */
export function scaleBar(proj: Projection): { angstrom: number; y: number; box: Box } {
  const { plot, scale } = proj;
  const barA = [1, 2, 5, 10, 20, 50, 100].find((v) => v * scale >= 40) ?? 100;
  const barY = plot.y + plot.h + 4;
  return { angstrom: barA, y: barY, box: { x: plot.x - 2, y: barY - 3, w: barA * scale + 4, h: 4 + SIZE.label + 8 } };
}

/**
 * One label per highlight: a single residue by name and number ("ASP A25"), a range by its
 * ends ("A30–35", at its middle residue), "(hidden)" when the surface hides all of it. A label
 * starts from the residue's outermost atom (seen from the molecule's centre), so it sits
 * beside the highlighted residue rather than on it; on a surface, from an atom that shows.
 * Labels keep off the highlighted atoms themselves, the legend and the scale bar.
 */
export function highlightLabels(mol: Molecule, proj: Projection, visible: Set<number> | undefined, hidden: Set<Residue>, bounds: Box, obstacles: readonly Box[]): { placed: PlacedLabel[]; dropped: number } {
  const { pos, SX, SY, view, scale } = proj;
  const labelAnchor = (r: Residue): V => {
    const shown = visible ? r.atoms.filter((i) => visible.has(i)) : r.atoms;
    let best = residueAnchor(r, pos), bestD = -1;
    for (const i of shown.length ? shown : r.atoms) { const p = pos(i); const d = p[0] * p[0] + p[1] * p[1]; if (d > bestD) { bestD = d; best = p; } }
    return best;
  };
  const labelReqs = mol.highlights.map((h) => {
    const rs = h.residues;
    const mid = rs[Math.floor((rs.length - 1) / 2)]!;
    const p = labelAnchor(mid);
    const isHidden = rs.every((r) => hidden.has(r));
    const name = rs.length === 1 ? `${mid.resName} ${resLabel(mid)}` : `${resLabel(rs[0]!)}–${rs[rs.length - 1]!.resSeq}${rs[rs.length - 1]!.iCode}`;
    return { x: SX(p[0]), y: SY(p[1]), text: `${name}${isHidden ? " (hidden)" : ""}` };
  });
  const hlBoxes: Box[] = [];
  for (const h of mol.highlights) for (const r of h.residues) for (const i of r.atoms) {
    if (visible && !visible.has(i)) continue;
    const rad = visible ? Math.min(8, (VDW[mol.atoms[i]!.element] ?? 1.7) * scale * 0.6) : Math.max(3, 0.3 * scale);
    hlBoxes.push({ x: SX(view[3 * i]!) - rad, y: SY(view[3 * i + 1]!) - rad, w: 2 * rad, h: 2 * rad });
  }
  return placeLabels(labelReqs, bounds, [...obstacles, ...hlBoxes], 4);
}
