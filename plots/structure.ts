/**
 * structure_3d: a static picture of a PDB/mmCIF structure — cartoon, sticks or a van der
 * Waals surface — drawn in pure TypeScript as vector SVG.
 *
 * Why pure TypeScript: it needs no GPU and no browser, so it works the same in the api-server
 * worker in embedded and in cluster mode, draws true vector SVG (not a screenshot), and is
 * deterministic and fast. The other route — headless Chromium with software WebGL running
 * 3Dmol.js — was considered and not taken: it needs a browser in every worker, is slow to
 * start, and yields a bitmap.
 *
 * How: orthographic projection after orienting the molecule on its principal axes (largest
 * extent horizontal, second vertical, then the user's rotate_x / rotate_y), the painter's
 * algorithm (primitives sorted back to front), depth cueing (far primitives fade toward the
 * white background), and Lambert shading with a small specular term from one fixed light.
 * Primitives are drawn in thin depth slices; inside a slice outlines go first, then bodies,
 * then highlights, so tubes and sticks join without seams.
 */
import { interpolateTurbo } from "d3-scale-chromatic";
import { type Chart, ChartError, type Frame } from "./chart.js";
import { fmt } from "./data/numbers.js";
import { type Box, placeLabels } from "./layout/labels.js";
import { SIZE, textWidth } from "./layout/text.js";
import { colormap } from "./paint/colours.js";
import { drawLabels } from "./paint/labels.js";
import { colorbar } from "./paint/legend.js";
import { r2, svgDocument, text } from "./paint/svg.js";
import type { StructureOpts } from "./options.js";
import { type Atom, isWater, type Structure } from "./data/structure-file.js";

// --- small vector helpers ------------------------------------------------------------------

type V = [number, number, number];
const sub = (a: V, b: V): V => [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
const add = (a: V, b: V): V => [a[0] + b[0], a[1] + b[1], a[2] + b[2]];
const mul = (a: V, k: number): V => [a[0] * k, a[1] * k, a[2] * k];
const dot = (a: V, b: V) => a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
const cross = (a: V, b: V): V => [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
const len = (a: V) => Math.hypot(a[0], a[1], a[2]);
const norm = (a: V): V => { const l = len(a); return l > 1e-9 ? [a[0] / l, a[1] / l, a[2] / l] : [0, 0, 1]; };
const dist = (a: V, b: V) => Math.hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);

/** Eigen-decomposition of a symmetric 3×3 matrix (cyclic Jacobi): eigenvalues descending, unit eigenvectors. */
export function symmetricEigen3(m: number[][]): { values: number[]; vectors: V[] } {
  const a = m.map((r) => [...r]);
  const v = [[1, 0, 0], [0, 1, 0], [0, 0, 1]];
  for (let sweep = 0; sweep < 50; sweep++) {
    const off = a[0]![1]! ** 2 + a[0]![2]! ** 2 + a[1]![2]! ** 2;
    if (off < 1e-22) break;
    for (const [p, q] of [[0, 1], [0, 2], [1, 2]] as const) {
      const apq = a[p]![q]!;
      if (Math.abs(apq) < 1e-300) continue;
      const theta = (a[q]![q]! - a[p]![p]!) / (2 * apq);
      const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
      const c = 1 / Math.sqrt(t * t + 1), s = t * c;
      for (let k = 0; k < 3; k++) {
        const akp = a[k]![p]!, akq = a[k]![q]!;
        a[k]![p] = c * akp - s * akq; a[k]![q] = s * akp + c * akq;
      }
      for (let k = 0; k < 3; k++) {
        const apk = a[p]![k]!, aqk = a[q]![k]!;
        a[p]![k] = c * apk - s * aqk; a[q]![k] = s * apk + c * aqk;
      }
      for (let k = 0; k < 3; k++) {
        const vkp = v[k]![p]!, vkq = v[k]![q]!;
        v[k]![p] = c * vkp - s * vkq; v[k]![q] = s * vkp + c * vkq;
      }
    }
  }
  const order = [0, 1, 2].sort((i, j) => a[j]![j]! - a[i]![i]!);
  return { values: order.map((i) => a[i]![i]!), vectors: order.map((i) => [v[0]![i]!, v[1]![i]!, v[2]![i]!] as V) };
}

// --- colours -------------------------------------------------------------------------------

type RGB = [number, number, number];
const rgbCache = new Map<string, RGB>();
const hexToRgb = (h: string): RGB => {
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
const rgbHex = (c: RGB) => `#${hex2(c[0])}${hex2(c[1])}${hex2(c[2])}`;
const mix = (a: RGB, b: RGB, t: number): RGB => [a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t, a[2] + (b[2] - a[2]) * t];
const WHITE: RGB = [255, 255, 255];

/** AlphaFold's confidence bands (the AlphaFold DB colours). */
export const PLDDT_BANDS = [
  { min: 90, label: "Very high (> 90)", color: "#0053D6" },
  { min: 70, label: "Confident (70–90)", color: "#65CBF3" },
  { min: 50, label: "Low (50–70)", color: "#FFDB13" },
  { min: -Infinity, label: "Very low (< 50)", color: "#FF7D45" },
] as const;
export const plddtColor = (v: number) => PLDDT_BANDS.find((b) => v > b.min)!.color;
const plddtBand = (v: number) => PLDDT_BANDS.find((b) => v > b.min)!.label.replace(/ \(.*$/, "").toLowerCase();

/** Highlighted residues: magenta, apart from the rainbow, the pLDDT bands and the chain palette. */
export const HIGHLIGHT = "#E6007E";
/**
 * Chain colours: the Okabe–Ito palette without black and yellow (too dark / too pale as
 * ribbons), with Tol's olive and wine; sky blue last, as it is the one easily confused (with
 * the first, blue, once depth-cued) — only a structure of eight chains or more uses it.
 */
export const CHAIN_COLORS = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#999933", "#882255", "#56B4E9"] as const;
/** Element colours for hetero atoms (Jmol/CPK family). */
const ELEMENT_COLORS: Record<string, string> = { N: "#3050F8", O: "#FF0D0D", S: "#E8C22A", P: "#FF8000", Se: "#FFA100", F: "#90E050", Cl: "#1FF01F", Br: "#A62929", I: "#940094", Fe: "#E06633", Zn: "#7D80B0", Mg: "#8AFF00", Ca: "#3DFF00", Mn: "#9C7AC7", Cu: "#C88033", Na: "#AB5CF2", K: "#8F40D4", H: "#E0E0E0" };
const LIGAND_CARBON = "#8C8C8C";
/** Elements without a colour of their own (tan: apart from the chain palette and the highlight). */
const OTHER_ELEMENT = "#C8A070";
/** Rainbow for N→C: turbo without its darkest ends. */
const rainbow = (t: number) => interpolateTurbo(0.08 + 0.84 * Math.max(0, Math.min(1, t)));

const COVALENT: Record<string, number> = { H: 0.31, C: 0.76, N: 0.71, O: 0.66, S: 1.05, P: 1.07, Se: 1.2, F: 0.57, Cl: 1.02, Br: 1.2, I: 1.39, B: 0.84, Si: 1.11 };
const VDW: Record<string, number> = { H: 1.1, C: 1.7, N: 1.55, O: 1.52, S: 1.8, P: 1.8, Se: 1.9, F: 1.47, Cl: 1.75, Br: 1.85, I: 1.98, Fe: 1.94, Zn: 1.39, Mg: 1.73, Ca: 2.0, Na: 2.27, K: 2.75, Mn: 1.97, Cu: 1.4 };
const IONS = new Set(["Fe", "Zn", "Mg", "Ca", "Na", "K", "Mn", "Cu", "Co", "Ni", "Cd", "Hg", "Cs", "Sr", "Ba", "Li", "Rb"]);
const NUCLEOTIDES = new Set(["A", "C", "G", "U", "T", "DA", "DC", "DG", "DT", "DU", "I", "DI"]);

// --- lighting ------------------------------------------------------------------------------

const LIGHT = norm([-0.4, 0.55, 0.75]);
const HALF = norm(add(LIGHT, [0, 0, 1]));
/** Two-sided Lambert + Blinn specular for a surface normal in view space (z toward the viewer). */
function lit(c: RGB, n: V, fog: number, specular = 0.3): RGB {
  const d = Math.abs(dot(n, LIGHT));
  const k = 0.5 + 0.55 * d;
  const sp = specular * Math.abs(dot(n, HALF)) ** 30;
  const base: RGB = [c[0] * k, c[1] * k, c[2] * k];
  return mix(mix(base, WHITE, sp), WHITE, fog);
}

// --- residues ------------------------------------------------------------------------------

type SS = "helix" | "sheet" | "coil";
interface Residue {
  chain: string; resSeq: number; iCode: string; resName: string;
  atoms: number[]; // indices into the drawn atoms
  trace?: number; // CA (protein) or P (nucleic acid)
  kind: "protein" | "nucleic" | "ligand";
  ss: SS;
  highlighted: boolean;
}
const resLabel = (r: { chain: string; resSeq: number; iCode: string }) => `${r.chain}${r.resSeq}${r.iCode}`;

function groupResidues(atoms: Atom[]): Residue[] {
  const out: Residue[] = [];
  let cur: Residue | undefined;
  for (let i = 0; i < atoms.length; i++) {
    const a = atoms[i]!;
    if (!cur || cur.chain !== a.chain || cur.resSeq !== a.resSeq || cur.iCode !== a.iCode || cur.resName !== a.resName) {
      cur = { chain: a.chain, resSeq: a.resSeq, iCode: a.iCode, resName: a.resName, atoms: [], kind: "ligand", ss: "coil", highlighted: false };
      out.push(cur);
    }
    cur.atoms.push(i);
  }
  for (const r of out) {
    const ca = r.atoms.find((i) => atoms[i]!.name === "CA" && atoms[i]!.element === "C");
    const p = r.atoms.find((i) => atoms[i]!.name === "P" && atoms[i]!.element === "P");
    if (ca !== undefined) { r.kind = "protein"; r.trace = ca; } else if (p !== undefined && (NUCLEOTIDES.has(r.resName) || !atoms[p]!.hetero)) { r.kind = "nucleic"; r.trace = p; }
  }
  return out;
}

/** Consecutive residues of one chain whose trace atoms are bonded-distance apart. */
function traceSegments(res: Residue[], pos: (i: number) => V): Residue[][] {
  const segs: Residue[][] = [];
  let cur: Residue[] = [];
  for (const r of res) {
    if (r.trace === undefined) continue;
    const prev = cur[cur.length - 1];
    const maxGap = r.kind === "nucleic" ? 8 : 4.3;
    if (prev && (prev.chain !== r.chain || prev.kind !== r.kind || dist(pos(prev.trace!), pos(r.trace)) > maxGap)) { segs.push(cur); cur = []; }
    cur.push(r);
  }
  if (cur.length) segs.push(cur);
  return segs;
}

/**
 * Secondary structure when the file has no HELIX/SHEET (or _struct_conf/_struct_sheet_range)
 * records — an ESTIMATE from the Cα trace alone, not DSSP: a helix where CA(i)–CA(i+3) is
 * 4.4–5.7 Å and CA(i)–CA(i+4) 5.5–7 Å for at least three consecutive i (α-helix: ≈5.0 and
 * ≈6.2 Å); a strand where the chain is extended (CA(i−1)–CA(i+1) ≥ 6.2 Å; ideal 6.4–7 Å) for
 * three or more residues and each has a Cα of a non-neighbouring residue within 5.5 Å (a
 * partner strand).
 */
function estimateSecondary(segs: Residue[][], pos: (i: number) => V): number {
  let assigned = 0;
  const all = segs.flat();
  const grid = new Map<string, number[]>();
  const key = (p: V) => `${Math.floor(p[0] / 5.5)},${Math.floor(p[1] / 5.5)},${Math.floor(p[2] / 5.5)}`;
  all.forEach((r, i) => { const k = key(pos(r.trace!)); (grid.get(k) ?? grid.set(k, []).get(k)!).push(i); });
  const index = new Map(all.map((r, i) => [r, i]));
  for (const seg of segs) {
    if (seg[0]!.kind !== "protein") continue;
    const p = seg.map((r) => pos(r.trace!));
    const n = seg.length;
    const h = new Array<boolean>(n).fill(false);
    for (let i = 0; i + 4 < n; i++) {
      const d3 = dist(p[i]!, p[i + 3]!), d4 = dist(p[i]!, p[i + 4]!);
      h[i] = d3 >= 4.4 && d3 <= 5.7 && d4 >= 5.5 && d4 <= 7;
    }
    for (let i = 0; i < n;) {
      if (!h[i]) { i++; continue; }
      let j = i;
      while (j < n && h[j]) j++;
      if (j - i >= 3) for (let k = i; k <= Math.min(n - 1, j - 1 + 3); k++) seg[k]!.ss = "helix";
      i = j;
    }
    const e = new Array<boolean>(n).fill(false);
    for (let i = 1; i + 1 < n; i++) {
      if (seg[i]!.ss !== "coil" || dist(p[i - 1]!, p[i + 1]!) < 6.2) continue;
      const me = index.get(seg[i]!)!;
      const [gx, gy, gz] = [Math.floor(p[i]![0] / 5.5), Math.floor(p[i]![1] / 5.5), Math.floor(p[i]![2] / 5.5)];
      let partner = false;
      for (let dx = -1; dx <= 1 && !partner; dx++) for (let dy = -1; dy <= 1 && !partner; dy++) for (let dz = -1; dz <= 1 && !partner; dz++) {
        for (const j of grid.get(`${gx + dx},${gy + dy},${gz + dz}`) ?? []) {
          const o = all[j]!;
          if (Math.abs(j - me) <= 3 && o.chain === seg[i]!.chain) continue;
          if (o.kind === "protein" && o.ss !== "helix" && dist(pos(o.trace!), p[i]!) <= 5.5) { partner = true; break; }
        }
      }
      e[i] = partner;
    }
    for (let i = 0; i < n;) {
      if (!e[i]) { i++; continue; }
      let j = i;
      while (j < n && e[j]) j++;
      if (j - i >= 3) for (let k = i; k < j; k++) seg[k]!.ss = "sheet";
      i = j;
    }
    assigned += seg.filter((r) => r.ss !== "coil").length;
  }
  return assigned;
}

// --- drawing primitives ----------------------------------------------------------------------

/** One drawable thing at a depth: up to three layers (outline, body, highlight) of SVG items. */
interface Item { kind: "line" | "poly" | "circle"; attrs: string; d: string }
interface Prim { z: number; layers: [Item[], Item[], Item[]] }

const P = (x: number, y: number) => `${r2(x)} ${r2(y)}`;
const lineItem = (x1: number, y1: number, x2: number, y2: number, attrs: string): Item => ({ kind: "line", attrs, d: `M${P(x1, y1)}L${P(x2, y2)}` });
const polyItem = (pts: Array<[number, number]>, attrs: string): Item => ({ kind: "poly", attrs, d: `M${pts.map(([x, y]) => P(x, y)).join("L")}Z` });

/** Back to front in slices `slice` Å thick; within a slice layer by layer; consecutive identical styles merged into one path. */
function emit(prims: Prim[], slice: number, group = false): string {
  prims.sort((a, b) => a.z - b.z);
  const out: string[] = [];
  let i = 0;
  while (i < prims.length) {
    const z0 = prims[i]!.z;
    let j = i;
    while (j < prims.length && prims[j]!.z - z0 <= slice) j++;
    for (let layer = 0; layer < 3; layer++) {
      let curAttrs = "", curKind = "", buf = "";
      const flush = () => { if (buf) out.push(`<path d="${buf}" ${curAttrs}/>`); buf = ""; };
      if (group) {
        // big pictures: one path per style within a slice (order inside a thin slice matters little)
        const byStyle = new Map<string, string[]>();
        for (let k = i; k < j; k++) for (const it of prims[k]!.layers[layer as 0 | 1 | 2]) {
          if (it.kind === "circle") { out.push(it.d); continue; }
          const key = it.attrs;
          (byStyle.get(key) ?? byStyle.set(key, []).get(key)!).push(it.d);
        }
        for (const [attrs, ds] of byStyle) out.push(`<path d="${ds.join("")}" ${attrs}/>`);
        continue;
      }
      for (let k = i; k < j; k++) {
        for (const it of prims[k]!.layers[layer as 0 | 1 | 2]) {
          if (it.kind === "circle") { flush(); curAttrs = ""; out.push(it.d); continue; }
          if (it.attrs !== curAttrs || it.kind !== curKind) { flush(); curAttrs = it.attrs; curKind = it.kind; }
          buf += it.d;
        }
      }
      flush();
    }
    i = j;
  }
  return out.join("");
}

// --- the chart -----------------------------------------------------------------------------

interface Highlight { spec: string; residues: Residue[] }

function resolveHighlights(specs: readonly string[], residues: Residue[]): { list: Highlight[]; partial: string[] } {
  const chains = [...new Set(residues.map((r) => r.chain))];
  const list: Highlight[] = [];
  const partial: string[] = [];
  for (const spec of specs) {
    const m = /^([A-Za-z0-9]{1,4}):(-?\d+)(?:-(-?\d+))?$/.exec(spec);
    if (!m) throw new ChartError(`highlight_residues "${spec}" must look like A:25 or A:30-35`);
    let chain = m[1]!;
    if (!chains.includes(chain)) {
      // A file whose only chain is unnamed: any chain letter means that chain.
      if (chains.length === 1 && chains[0] === "") chain = "";
      else throw new ChartError(`highlight_residues "${spec}": chain ${chain} is not in the structure; its chains are ${chains.map((c) => c || "(blank)").join(", ")}`);
    }
    const lo = +m[2]!, hi = m[3] === undefined ? lo : +m[3];
    if (hi < lo) throw new ChartError(`highlight_residues "${spec}": the range runs backwards (write ${m[1]}:${hi}-${lo})`);
    const inChain = residues.filter((r) => r.chain === chain);
    const nums = inChain.map((r) => r.resSeq);
    const range = `${Math.min(...nums)}–${Math.max(...nums)}`;
    const hit = inChain.filter((r) => r.resSeq >= lo && r.resSeq <= hi);
    const chainName = chain === "" ? "the (unnamed) chain" : `chain ${chain}`;
    if (!hit.length) throw new ChartError(`highlight_residues "${spec}": ${chainName} has no residue ${lo === hi ? lo : `${lo}–${hi}`}; its residues run ${range}${nums.length !== Math.max(...nums) - Math.min(...nums) + 1 ? " (with gaps)" : ""}`);
    const missing = hi - lo + 1 - new Set(hit.map((r) => r.resSeq)).size;
    if (missing > 0) partial.push(`${spec}: ${missing} residue number(s) of the range are not in the structure`);
    hit.forEach((r) => { r.highlighted = true; });
    list.push({ spec, residues: hit });
  }
  return { list, partial };
}

export function structureChart(s: Structure, opts: StructureOpts, frame: Frame): Chart {
  const W = frame.width, H = frame.height;
  const style = opts.style;
  const waters = s.atoms.filter((a) => isWater(a.resName)).length;
  let atoms = s.atoms.filter((a) => !isWater(a.resName));
  if (!atoms.length) throw new ChartError("the structure has only water molecules: nothing to draw");
  const hydrogens = atoms.filter((a) => a.element === "H" || a.element === "D").length;
  if (hydrogens < atoms.length) atoms = atoms.filter((a) => a.element !== "H" && a.element !== "D");
  const residues = groupResidues(atoms);
  const { list: highlights, partial } = resolveHighlights(opts.highlight_residues, residues);

  // Orientation: principal axes of the drawn atoms.
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
    // rotate_x about the horizontal axis, then rotate_y about the vertical one
    [y, z] = [y * Math.cos(ax) - z * Math.sin(ax), y * Math.sin(ax) + z * Math.cos(ax)];
    [x, z] = [x * Math.cos(ay) + z * Math.sin(ay), -x * Math.sin(ay) + z * Math.cos(ay)];
    view[3 * i] = x; view[3 * i + 1] = y; view[3 * i + 2] = z;
    if (z < zMin) zMin = z;
    if (z > zMax) zMax = z;
  }
  const pos = (i: number): V => [view[3 * i]!, view[3 * i + 1]!, view[3 * i + 2]!];

  // Secondary structure: the file's records, else an estimate from the Cα trace.
  const segs = traceSegments(residues, pos);
  let ssSource: string;
  if (s.secondary.length) {
    for (const r of residues) {
      if (r.kind !== "protein") continue;
      const hit = s.secondary.find((e) => e.chain === r.chain && r.resSeq >= e.start && r.resSeq <= e.end);
      if (hit) r.ss = hit.kind;
    }
    ssSource = "secondary structure from the file's records (HELIX/SHEET or _struct_conf/_struct_sheet_range)";
  } else {
    const k = estimateSecondary(segs, pos);
    ssSource = `the file has no secondary-structure records: helices and strands ESTIMATED from Cα–Cα distances (${k} residues assigned), not DSSP`;
  }

  // Colours.
  const chains = [...new Set(residues.map((r) => r.chain))];
  /** One polymer chain (ligands aside): coloured as a rainbow N→C instead of one flat colour. */
  const singleChain = new Set(residues.filter((r) => r.trace !== undefined).map((r) => r.chain)).size === 1;
  const traceRes = residues.filter((r) => r.trace !== undefined);
  const chainIndex = new Map<string, Residue[]>();
  for (const r of traceRes) (chainIndex.get(r.chain) ?? chainIndex.set(r.chain, []).get(r.chain)!).push(r);
  const bValues = atoms.map((a) => a.b);
  const bLo = Math.min(...bValues), bHi = Math.max(...bValues);
  if (opts.color_by === "plddt" && (bLo < 0 || bHi > 100)) {
    throw new ChartError(`color_by plddt needs pLDDT values (0–100) in the B-factor column, but it runs ${fmt(bLo)}–${fmt(bHi)}; this does not look like an AlphaFold model — use color_by bfactor`);
  }
  const bMap = colormap("viridis");
  const bT = (b: number) => (bHi > bLo ? (b - bLo) / (bHi - bLo) : 0.5);
  const rankInChain = new Map<Residue, number>();
  for (const list of chainIndex.values()) list.forEach((r, i) => rankInChain.set(r, list.length > 1 ? i / (list.length - 1) : 0.5));
  const residueOf = new Int32Array(n);
  residues.forEach((r, ri) => { for (const i of r.atoms) residueOf[i] = ri; });
  const chainBase = (r: Residue) => {
    if (singleChain && rankInChain.has(r)) return rainbow(rankInChain.get(r)!);
    return CHAIN_COLORS[chainPos.get(r.chain)! % CHAIN_COLORS.length]!;
  };
  /** The colour of a residue (its trace atom's value for B-factor / pLDDT). */
  const residueValue = (r: Residue) => (r.trace !== undefined ? atoms[r.trace]!.b : r.atoms.reduce((s2, i) => s2 + atoms[i]!.b, 0) / r.atoms.length);
  const resColorCache = new Map<Residue, string>();
  const residueColor = (r: Residue): string => {
    let c = resColorCache.get(r);
    if (c === undefined) { c = residueColorRaw(r); resColorCache.set(r, c); }
    return c;
  };
  const chainPos = new Map(chains.map((c, i) => [c, i]));
  function residueColorRaw(r: Residue): string {
    if (opts.color_by === "bfactor") return bMap(bT(residueValue(r)));
    if (opts.color_by === "plddt") return plddtColor(residueValue(r));
    return r.kind === "ligand" ? LIGAND_CARBON : chainBase(r);
  }
  /** Atom colours: by value for bfactor/plddt; by chain (carbons) and element (others) for chain colouring. */
  const atomColor = (i: number, carbon?: string): string => {
    const a = atoms[i]!;
    if (opts.color_by === "bfactor") return bMap(bT(a.b));
    if (opts.color_by === "plddt") return plddtColor(a.b);
    if (a.element !== "C") return ELEMENT_COLORS[a.element] ?? OTHER_ELEMENT;
    return carbon ?? residueColor(residues[residueOf[i]!]!);
  };

  // What the legend explains: polymer chains, ligand carbons and the element colours used.
  const polymerChains = [...chainIndex.keys()];
  const ligandAtoms = residues.filter((r) => r.trace === undefined).flatMap((r) => r.atoms);
  const ligandsDrawn = ligandAtoms.length > 0;
  const elementAtoms: number[] = [];
  if (style !== "surface") {
    if (opts.color_by === "chain") elementAtoms.push(...(style === "stick" ? atoms.map((_, i) => i) : ligandAtoms));
    elementAtoms.push(...highlights.flatMap((h) => h.residues.flatMap((r) => r.atoms)));
  }
  const ELEMENT_ORDER = Object.keys(ELEMENT_COLORS);
  const legendElements = [...new Set(elementAtoms.map((i) => atoms[i]!.element).filter((e) => e !== "C" && e !== "H" && e !== "D"))]
    .map((e) => (e in ELEMENT_COLORS ? e : "other")).filter((e, i, all) => all.indexOf(e) === i)
    .sort((a, b) => (ELEMENT_ORDER.indexOf(a) + 1 || 99) - (ELEMENT_ORDER.indexOf(b) + 1 || 99));

  // Layout: title, subtitle, plot area, legend strip.
  const titleText = frame.title ?? `${s.id ? s.id.toUpperCase() : frame.source} — ${style === "surface" ? "van der Waals surface" : style === "stick" ? "sticks" : "cartoon"}`;
  let subtitle = s.title ?? "";
  const maxTextW = W - 32;
  const clip = (t: string, size: number, bold = false) => {
    if (textWidth(t, size, bold) <= maxTextW) return t;
    let lo = 0, hi = t.length;
    while (lo < hi) { const mid = Math.ceil((lo + hi) / 2); if (textWidth(t.slice(0, mid) + "…", size, bold) <= maxTextW) lo = mid; else hi = mid - 1; }
    return t.slice(0, lo).trimEnd() + "…";
  };
  subtitle = subtitle ? clip(subtitle, SIZE.tick) : "";
  const headerH = subtitle ? 54 : 38;
  const legend = buildLegend();
  const legendH = legend.height;
  const plot: Box = { x: 16, y: headerH + 4, w: W - 32, h: H - headerH - 4 - legendH - 14 };
  if (plot.h < 60 || plot.w < 60) throw new ChartError(`the image is too small for this structure's picture (${W}×${H}); make it larger`);

  // Fit: extents of everything drawn, with the drawn radius as padding.
  const pad = style === "surface" ? 2.0 : style === "stick" ? 0.6 : 2.2;
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
  const SX = (x: number) => ox + x * scale, SY = (y: number) => oy - y * scale;
  const zSpan = Math.max(zMax - zMin, 1e-6);
  // Depth cue: far parts fade toward white — less when colour encodes a value, so that a
  // faded colour is not read as another band or value.
  const fogMax = opts.color_by === "chain" ? 0.55 : 0.3;
  const fogOf = (z: number) => fogMax * ((zMax - z) / zSpan) ** 1.1;
  const depthT = (z: number) => (zMax - z) / zSpan;

  const prims: Prim[] = [];
  const overlay: Prim[] = [];
  // Sphere shading: a ball of ball-and-stick gets a strong highlight and dark rim; a surface
  // sphere a softer one, so that the packed spheres read as one surface rather than marbles.
  const gradients = new Map<string, string>();
  const gradientFor = (c: RGB, soft = false): string => {
    const key = `${soft ? "s" : "b"}${rgbHex(c)}`;
    let id = gradients.get(key);
    if (!id) { id = `g${gradients.size}`; gradients.set(key, id); }
    return id;
  };

  // Sticks (and ball-and-stick): half-bonds and lone atoms.
  const bonds = (subset: number[]) => findBonds(subset, atoms, pos);
  const stickPrims = (subset: number[], radius: number, colorOf: (i: number) => string, target: Prim[], ballRadius = 0, merge = false) => {
    const bonded = new Uint8Array(n);
    const q = (c: RGB): RGB => (merge ? [Math.round(c[0] / 12) * 12, Math.round(c[1] / 12) * 12, Math.round(c[2] / 12) * 12] : c);
    for (const [a, b] of bonds(subset)) {
      bonded[a] = 1; bonded[b] = 1;
      const pa = pos(a), pb = pos(b);
      const axis = norm(sub(pb, pa));
      const nrm = norm(sub([0, 0, 1], mul(axis, axis[2]))); // the cylinder normal facing the viewer
      const mid = mul(add(pa, pb), 0.5);
      for (const [from, c] of [[pa, a], [pb, b]] as const) {
        const z = (from[2] + mid[2]) / 2;
        const fog = fogOf(z);
        let w = 2 * radius * scale * (1 - 0.3 * depthT(z));
        if (merge) w = Math.round(w * 4) / 4;
        const base = hexToRgb(colorOf(c));
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
    for (const i of subset) {
      const a = atoms[i]!;
      const lone = !bonded[i];
      if (!lone && ballRadius <= 0) continue;
      const r = lone ? Math.max(ballRadius, IONS.has(a.element) ? 0.9 : 0.45) : ballRadius;
      const p = pos(i);
      const base = hexToRgb(colorOf(i));
      const c = mix(base, WHITE, fogOf(p[2]));
      target.push({ z: p[2] + r, layers: [[], [{ kind: "circle", attrs: "", d: `<circle cx="${r2(SX(p[0]))}" cy="${r2(SY(p[1]))}" r="${r2(r * scale)}" fill="url(#${gradientFor(c)})"/>` }], []] });
    }
  };

  const comments: string[] = [];
  let slice = 0.35;
  let visible: Set<number> | undefined;
  /** Surface: highlighted residues that barely show; drawn dashed on top and labelled "(hidden)". */
  const hiddenHighlights = new Set<Residue>();

  if (style === "cartoon") {
    const residuesN = traceRes.length;
    const samples = Math.max(3, Math.min(8, Math.round(5000 / Math.max(1, residuesN))));
    for (const seg of segs) cartoonSegment(seg, samples);
    const others = residues.filter((r) => r.trace === undefined).flatMap((r) => r.atoms);
    stickPrims(others, 0.16, (i) => atomColor(i, opts.color_by === "chain" ? LIGAND_CARBON : undefined), prims, 0.32);
    if (residuesN === 0 && others.length === 0) throw new ChartError("no protein or nucleic-acid chain and no ligand to draw as a cartoon");
    comments.push(`cartoon: spline through Cα (P for nucleic acids), ${samples} samples per residue; helices as ribbons, strands as arrows, loops as tubes; ligands and other hetero groups as ball-and-stick`);
  } else if (style === "stick") {
    slice = 1.0;
    const all = atoms.map((_, i) => i);
    stickPrims(all, 0.2, (i) => atomColor(i), prims, 0, n > 4000);
    comments.push("sticks: bonds from covalent radii (distance < r1 + r2 + 0.45 Å), each half coloured by its atom");
  } else {
    slice = 0;
    visible = surface();
    comments.push(`van der Waals surface: every atom a sphere of its van der Waals radius (Bondi); ${visible.size} of ${n} atoms visible and drawn`);
    if (hiddenHighlights.size) comments.push(`${hiddenHighlights.size} highlighted residue(s) hidden behind the surface from this view: drawn dashed on top and labelled "(hidden)"`);
  }

  // Highlighted residues on top: ball-and-stick, carbons in the highlight colour.
  const hlAtoms = highlights.flatMap((h) => h.residues.flatMap((r) => r.atoms));
  if (hlAtoms.length && style !== "surface") {
    const unique = [...new Set(hlAtoms)];
    stickPrims(unique, style === "stick" ? 0.34 : 0.24, (i) => (atoms[i]!.element === "C" ? HIGHLIGHT : ELEMENT_COLORS[atoms[i]!.element] ?? OTHER_ELEMENT), overlay, style === "stick" ? 0 : 0.34);
    // a CA-only residue still gets a visible ball
    for (const h of highlights) for (const r of h.residues) if (r.atoms.length === 1) {
      const p = pos(r.atoms[0]!);
      overlay.push({ z: p[2] + 1, layers: [[], [{ kind: "circle", attrs: "", d: `<circle cx="${r2(SX(p[0]))}" cy="${r2(SY(p[1]))}" r="${r2(Math.max(4, 0.9 * scale))}" fill="url(#${gradientFor(hexToRgb(HIGHLIGHT))})"/>` }], []] });
    }
  }

  const body = emit(prims, slice, style === "stick" && n > 4000) + emit(overlay, 1.0);

  // Labels for highlighted residues.
  const anchor = (r: Residue): V => (r.trace !== undefined ? pos(r.trace) : r.atoms.map(pos).reduce((s2, p) => add(s2, p), [0, 0, 0] as V).map((v) => v / r.atoms.length) as V);
  // A label starts from the residue's outermost atom (seen from the molecule's centre), so it
  // sits beside the highlighted residue rather than on it; on a surface, from an atom that shows.
  const labelAnchor = (r: Residue): V => {
    const shown = visible ? r.atoms.filter((i) => visible!.has(i)) : r.atoms;
    let best = anchor(r), bestD = -1;
    for (const i of shown.length ? shown : r.atoms) { const p = pos(i); const d = p[0] * p[0] + p[1] * p[1]; if (d > bestD) { bestD = d; best = p; } }
    return best;
  };
  // One label per highlight: a single residue by name and number ("ASP A25"), a range by its
  // ends ("A30–35", at its middle residue).
  const labelReqs = highlights.map((h) => {
    const rs = h.residues;
    const mid = rs[Math.floor((rs.length - 1) / 2)]!;
    const p = labelAnchor(mid);
    const hidden = rs.every((r) => hiddenHighlights.has(r));
    const name = rs.length === 1 ? `${mid.resName} ${resLabel(mid)}` : `${resLabel(rs[0]!)}–${rs[rs.length - 1]!.resSeq}${rs[rs.length - 1]!.iCode}`;
    return { x: SX(p[0]), y: SY(p[1]), text: `${name}${hidden ? " (hidden)" : ""}` };
  });
  // Labels keep off the highlighted atoms themselves, the legend and the scale bar.
  const hlBoxes: Box[] = [];
  for (const h of highlights) for (const r of h.residues) for (const i of r.atoms) {
    if (visible && !visible.has(i)) continue;
    const rad = visible ? Math.min(8, (VDW[atoms[i]!.element] ?? 1.7) * scale * 0.6) : Math.max(3, 0.3 * scale);
    hlBoxes.push({ x: SX(view[3 * i]!) - rad, y: SY(view[3 * i + 1]!) - rad, w: 2 * rad, h: 2 * rad });
  }
  const barA = [1, 2, 5, 10, 20, 50, 100].find((v) => v * scale >= 40) ?? 100;
  const barY = plot.y + plot.h + 4;
  const barBox: Box = { x: plot.x - 2, y: barY - 3, w: barA * scale + 4, h: 4 + SIZE.label + 8 };
  const { placed, dropped } = placeLabels(labelReqs, { x: 4, y: headerH, w: W - 8, h: H - headerH - legendH - 4 }, [legend.box, barBox, ...hlBoxes], 4);
  const labelsSvg = drawLabels(placed);
  if (dropped) comments.push(`${dropped} highlighted residue label(s) found no free place and were left out (all are listed below)`);

  // Scale bar: orthographic, so one length holds everywhere.
  const scalebar = `<g class="scalebar"><line x1="${r2(plot.x)}" y1="${r2(barY)}" x2="${r2(plot.x + barA * scale)}" y2="${r2(barY)}" stroke="#333" stroke-width="2"/>`
    + text(plot.x + (barA * scale) / 2, barY + 4, `${barA} Å`, { anchor: "middle", baseline: "hanging", size: SIZE.label }) + "</g>";

  const defs = gradients.size
    ? `<defs>${[...gradients].map(([key, id]) => {
      const c = key.slice(1), rgb = hexToRgb(c);
      if (key[0] === "s") return `<radialGradient id="${id}" cx="0.5" cy="0.5" r="0.5" fx="0.38" fy="0.32"><stop offset="0" stop-color="${rgbHex(mix(rgb, WHITE, 0.35))}"/><stop offset="0.6" stop-color="${c}"/><stop offset="1" stop-color="${rgbHex(mix(rgb, [0, 0, 0], 0.3))}"/></radialGradient>`;
      return `<radialGradient id="${id}" cx="0.5" cy="0.5" r="0.5" fx="0.36" fy="0.3"><stop offset="0" stop-color="${rgbHex(mix(rgb, WHITE, 0.7))}"/><stop offset="0.5" stop-color="${c}"/><stop offset="1" stop-color="${rgbHex(mix(rgb, [0, 0, 0], 0.45))}"/></radialGradient>`;
    }).join("")}</defs>`
    : "";
  const head = text(W / 2, 24, clip(titleText, SIZE.title, true), { size: SIZE.title, weight: "bold", anchor: "middle" })
    + (subtitle ? text(W / 2, 42, subtitle, { size: SIZE.tick, anchor: "middle", fill: "#555" }) : "");
  const svg = svgDocument(W, H, defs + head + `<g class="molecule" stroke-linejoin="round" fill="none">${body}</g>` + labelsSvg + scalebar + legend.svg, titleText);

  // TSV: one row per residue drawn.
  const drawnResidues = residues.filter((r) => style !== "cartoon" || r.trace !== undefined || r.atoms.length > 0);
  const valueHeader = opts.color_by === "bfactor" ? "b_factor" : opts.color_by === "plddt" ? "plddt" : "chain_color";
  const header = ["chain", "residue_number", "residue_name", "secondary_structure", valueHeader, ...(opts.color_by === "plddt" ? ["plddt_band"] : []), "color", "highlighted", "x_px", "y_px"];
  const rows = drawnResidues.map((r) => {
    const p = anchor(r);
    const v = residueValue(r);
    const ss = r.kind === "protein" ? r.ss : r.kind === "nucleic" ? "nucleotide" : "ligand";
    const col = residueColor(r);
    const value: string | number = opts.color_by === "chain" ? (r.kind === "ligand" ? "ligand" : singleChain ? "rainbow N→C" : `chain ${r.chain || "(blank)"}`) : +v.toFixed(2);
    return [r.chain, r.iCode ? `${r.resSeq}${r.iCode}` : r.resSeq, r.resName, ss, value, ...(opts.color_by === "plddt" ? [plddtBand(v)] : []), rgbHex(hexToRgb(col)), r.highlighted ? "yes" : "no", r2(SX(p[0])), r2(SY(p[1]))];
  });
  comments.unshift(
    `${s.id ?? frame.source}${s.title ? `: ${s.title}` : ""}`,
    `style ${style}; ${n} atoms drawn in ${residues.length} residues, chains ${chains.map((c) => c || "(blank)").join(", ")}`,
    `orientation: principal axes of the atom coordinates (largest extent horizontal, second vertical), then rotate_x ${opts.rotate_x}°, rotate_y ${opts.rotate_y}°; orthographic, ${r2(scale)} px per Å`,
    ssSource,
  );
  if (s.models > 1) comments.push(`the file holds ${s.models} models; the first is drawn`);
  if (waters) comments.push(`${waters} water atom(s) not drawn`);
  if (hydrogens && hydrogens < s.atoms.length - waters) comments.push(`${hydrogens} hydrogen atom(s) not drawn`);
  if (opts.color_by === "bfactor") comments.push(bHi > bLo ? `B-factor colour scale (viridis) from ${fmt(bLo)} to ${fmt(bHi)} Å²` : `every atom has B-factor ${fmt(bLo)}: one colour`);
  if (opts.color_by === "plddt") comments.push("pLDDT bands (AlphaFold DB): > 90 very high #0053D6; 70–90 confident #65CBF3; 50–70 low #FFDB13; ≤ 50 very low #FF7D45; values read from the B-factor column");
  if (opts.color_by === "chain") comments.push(singleChain ? "one chain: coloured as a rainbow from the N-terminus (blue) to the C-terminus (red)" : "coloured by chain");
  for (const p of partial) comments.push(`highlight ${p}`);
  comments.push("x_px, y_px: where the residue's Cα (P; else its centre) is drawn in the SVG");
  return { svg, width: W, height: H, data: { header, rows, comments } };

  // --- style builders (closures over the state above) ---

  function cartoonSegment(seg: Residue[], S: number) {
    const m = seg.length;
    const pts = seg.map((r) => pos(r.trace!));
    const nucleic = seg[0]!.kind === "nucleic";
    const ss = seg.map((r) => (nucleic ? "coil" : r.ss));
    // Strand guide points smoothed (flattens the pleat); ribbon normals from the Cα bisector.
    const guide = pts.map((p, i) => (ss[i] === "sheet" && i > 0 && i < m - 1 && ss[i - 1] === "sheet" && ss[i + 1] === "sheet" ? mul(add(add(pts[i - 1]!, mul(p, 2)), pts[i + 1]!), 0.25) : p));
    const normals: V[] = pts.map((p, i) => (i > 0 && i < m - 1 ? norm(sub(mul(p, 2), add(pts[i - 1]!, pts[i + 1]!))) : [0, 0, 0]));
    if (m > 2) { normals[0] = normals[1]!; normals[m - 1] = normals[m - 2]!; } else normals.fill([0, 0, 1]);
    for (let i = 1; i < m; i++) if (ss[i] === "sheet" && ss[i - 1] === "sheet" && dot(normals[i]!, normals[i - 1]!) < 0) normals[i] = mul(normals[i]!, -1);
    const smoothN = normals.map((nv, i) => (ss[i] === "sheet" ? norm(add(add(normals[Math.max(0, i - 1)]!, mul(nv, 2)), normals[Math.min(m - 1, i + 1)]!)) : nv));
    // Secondary-structure runs in residue coordinates u (u = i at residue i's Cα).
    const runs: Array<{ kind: SS; s: number; e: number }> = [];
    for (let i = 0; i < m; i++) {
      if (ss[i] === "coil") continue;
      const last = runs[runs.length - 1];
      if (last && last.kind === ss[i] && last.e === i - 1) last.e = i; else runs.push({ kind: ss[i]!, s: i, e: i });
    }
    const HELIX_W = 1.35, SHEET_W = 1.1, HEAD_W = 1.9;
    /** Ribbon half-width at u: helices ramp in and out over 0.6 residue; strands end in an arrowhead over their last residue. */
    const widthAt = (u: number, afterShoulder: boolean): { w: number; kind: SS } => {
      for (const r of runs) {
        const u0 = Math.max(0, r.s - 0.5), u1 = Math.min(m - 1, r.e + 0.5);
        if (u < u0 - 1e-9 || u > u1 + 1e-9) continue;
        if (r.kind === "helix") return { w: HELIX_W * Math.max(0.2, Math.min(1, (u - u0) / 0.6 + 0.2, (u1 - u) / 0.6 + 0.2)), kind: "helix" };
        const uh = Math.max(u0 + 0.3, r.e - 1 + 0.5 * 0);
        if (u < uh || (u === uh && !afterShoulder)) return { w: SHEET_W, kind: "sheet" };
        return { w: Math.max(0.05, HEAD_W * (1 - (u - uh) / Math.max(0.3, u1 - uh))), kind: "sheet" };
      }
      return { w: 0, kind: "coil" };
    };
    const us: Array<[number, boolean]> = [];
    for (let i = 0; i < Math.max(1, m - 1); i++) for (let k = 0; k < S; k++) us.push([m === 1 ? 0 : i + k / S, true]);
    if (m > 1) us.push([m - 1, true]);
    for (const r of runs) if (r.kind === "sheet") {
      const u0 = Math.max(0, r.s - 0.5), uh = Math.max(u0 + 0.3, r.e - 1);
      us.push([uh, false], [uh, true], [Math.min(m - 1, r.e + 0.5), true]);
      if (u0 > 0) us.push([u0, true]);
    }
    us.sort((x, y) => x[0] - y[0] || (x[1] ? 1 : 0) - (y[1] ? 1 : 0));
    const samples: Array<{ p: V; t: V; nrm: V; w: number; kind: SS; res: number }> = [];
    const cr = (a: V, b: V, c: V, d: V, t: number): V => {
      const t2 = t * t, t3 = t2 * t;
      return [0, 1, 2].map((k) => 0.5 * (2 * b[k]! + (-a[k]! + c[k]!) * t + (2 * a[k]! - 5 * b[k]! + 4 * c[k]! - d[k]!) * t2 + (-a[k]! + 3 * b[k]! - 3 * c[k]! + d[k]!) * t3)) as V;
    };
    const g = (i: number) => guide[Math.max(0, Math.min(m - 1, i))]!;
    const at = (u: number): V => {
      if (m === 1) return g(0);
      const i = Math.min(m - 2, Math.floor(u));
      return cr(g(i - 1), g(i), g(i + 1), g(i + 2), u - i);
    };
    let prevU = -1, prevAfter = true;
    for (const [u, after] of us) {
      if (Math.abs(u - prevU) < 1e-9 && after === prevAfter) continue;
      prevU = u; prevAfter = after;
      const p = at(u);
      const tan = m === 1 ? [1, 0, 0] as V : norm(sub(at(Math.min(m - 1, u + 0.02)), at(Math.max(0, u - 0.02))));
      const i = Math.min(m - 1, Math.floor(u)), t = u - i;
      let nv = norm(add(mul(smoothN[i]!, 1 - t), mul(smoothN[Math.min(m - 1, i + 1)]!, t)));
      nv = norm(sub(nv, mul(tan, dot(nv, tan))));
      const { w, kind } = widthAt(u, after);
      samples.push({ p, t: tan, nrm: nv, w, kind, res: Math.min(m - 1, Math.round(u)) });
    }
    const tube = nucleic ? 0.85 : 0.3;
    for (let k = 0; k + 1 < samples.length; k++) {
      const a = samples[k]!, b = samples[k + 1]!;
      const res = seg[a.res]!;
      const baseHex = residueColor(res);
      const base = hexToRgb(baseHex);
      if (dist(a.p, b.p) < 1e-6 && Math.abs(a.w - b.w) < 1e-6) continue;
      const ribbon = a.w > 0 && b.w > 0;
      const zmid = (a.p[2] + b.p[2]) / 2;
      const fog = fogOf(zmid);
      if (ribbon) {
        const h = 0.22;
        const sA = norm(cross(a.t, a.nrm)), sB = norm(cross(b.t, b.nrm));
        const nAvg = norm(add(a.nrm, b.nrm)), sAvg = norm(add(sA, sB));
        const sig = nAvg[2] >= 0 ? 1 : -1, sig2 = sAvg[2] >= 0 ? 1 : -1;
        const wa = a.w, wb = b.w;
        const corner = (s: typeof a, side: V, w: number, e: number, f: number): [number, number] => {
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
        // silhouette: the face's far long edge and the rim's outer long edge
        const far = sig2 > 0 ? [A2, B2] : [A1, B1];
        const outer = Math.abs(sAvg[2]) > 0.08 ? (sig > 0 ? [rimA2, rimB2] : [rimA1, rimB1]) : (sig2 > 0 ? [A1, B1] : [A2, B2]);
        const edges = [lineItem(far[0]![0], far[0]![1], far[1]![0], far[1]![1], `stroke="${edge}" stroke-width="${ew}" stroke-linecap="round"`),
          lineItem(outer[0]![0], outer[0]![1], outer[1]![0], outer[1]![1], `stroke="${edge}" stroke-width="${ew}" stroke-linecap="round"`)];
        // cross edges: where a ribbon starts or ends, and the arrowhead's shoulder
        const startEl = k === 0 || samples[k - 1]!.w === 0;
        if (startEl) edges.push(lineItem(A1[0], A1[1], A2[0], A2[1], `stroke="${edge}" stroke-width="${ew}" stroke-linecap="round"`));
        if (b.w > a.w + 0.3) edges.push(lineItem(B1[0], B1[1], B2[0], B2[1], `stroke="${edge}" stroke-width="${ew}" stroke-linecap="round"`));
        const endEl = k + 2 >= samples.length || samples[k + 2]!.w === 0;
        if (endEl && wb > 0.3) edges.push(lineItem(B1[0], B1[1], B2[0], B2[1], `stroke="${edge}" stroke-width="${ew}" stroke-linecap="round"`));
        prims.push({ z: zmid + 0.2, layers: [[], items, edges] });
      } else {
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
        prims.push({
          z: zmid, layers: [
            [lineItem(ox1, oy1, ox2, oy2, `stroke="${edge}" stroke-width="${r2(w + Math.max(1, 0.12 * scale))}"${cap(tubeEnd || tubeEnd2)}`)],
            [lineItem(x1, y1, x2, y2, `stroke="${body2}" stroke-width="${r2(w)}"${cap(tubeEnd || tubeEnd2)}`)],
            w > 3 ? [lineItem(x1 + px * off, y1 + py * off, x2 + px * off, y2 + py * off, `stroke="${hl}" stroke-width="${r2(w * 0.3)}"`)] : [],
          ],
        });
      }
    }
  }

  function surface(): Set<number> {
    // A depth buffer decides which spheres show at all; only those are written to the SVG.
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
    const vis = new Set<number>();
    const pixels = new Map<number, number>();
    for (const o of owner) if (o >= 0) { vis.add(o); pixels.set(o, (pixels.get(o) ?? 0) + step * step); }
    // A highlighted residue counts as seen when at least a quarter of a carbon's disc of it shows.
    const minShown = 0.25 * Math.PI * (1.7 * scale) ** 2;
    for (const h of highlights) for (const r of h.residues) {
      if (r.atoms.reduce((sum, i) => sum + (pixels.get(i) ?? 0), 0) < minShown) hiddenHighlights.add(r);
    }
    const levels = 24;
    for (const i of vis) {
      const p = pos(i);
      const rA = VDW[atoms[i]!.element] ?? 1.7;
      const hl = residues[residueOf[i]!]!.highlighted;
      let base = hexToRgb(hl ? HIGHLIGHT : atomColorSurface(i));
      const fog = Math.round(fogOf(p[2]) * levels) / levels; // quantised so gradients are shared
      base = mix(base, WHITE, fog);
      prims.push({ z: p[2], layers: [[], [{ kind: "circle", attrs: "", d: `<circle cx="${r2(SX(p[0]))}" cy="${r2(SY(p[1]))}" r="${r2(rA * scale)}" fill="url(#${gradientFor(base.map((v) => Math.round(v / 4) * 4) as RGB, true)})"/>` }], []] });
    }
    // Highlighted residues hidden by the surface in front: drawn on top, dashed and translucent.
    for (const h of highlights) for (const r of h.residues) {
      if (!hiddenHighlights.has(r)) continue;
      for (const i of r.atoms) {
        const p = pos(i);
        overlay.push({ z: p[2], layers: [[], [{ kind: "circle", attrs: "", d: `<circle cx="${r2(SX(p[0]))}" cy="${r2(SY(p[1]))}" r="${r2((VDW[atoms[i]!.element] ?? 1.7) * scale * 0.8)}" fill="${HIGHLIGHT}" fill-opacity="0.45" stroke="${HIGHLIGHT}" stroke-width="1.2" stroke-dasharray="3 2"/>` }], []] });
      }
    }
    return vis;
  }

  /** Surface colours: chain / rainbow / value for every atom (no element colours on a surface). */
  function atomColorSurface(i: number): string {
    const a = atoms[i]!;
    if (opts.color_by === "bfactor") return bMap(bT(a.b));
    if (opts.color_by === "plddt") return plddtColor(a.b);
    return residueColor(residues[residueOf[i]!]!);
  }

  function buildLegend(): { svg: string; height: number; box: Box } {
        const parts: string[] = [];
    let wTotal = 0;
    const items: Array<{ w: number; draw: (x: number, y0: number) => string }> = [];
    const sw = (color: string, label: string) => ({
      w: 14 + textWidth(label, SIZE.legend) + 18,
      draw: (x: number, y0: number) => `<rect x="${r2(x)}" y="${r2(y0 + 8)}" width="10" height="10" fill="${color}" stroke="#333" stroke-width="0.4"/>` + text(x + 14, y0 + 13, label, { size: SIZE.legend, baseline: "middle" }),
    });
    if (opts.color_by === "plddt") {
      items.push({ w: textWidth("pLDDT:", SIZE.legend, true) + 10, draw: (x, y0) => text(x, y0 + 13, "pLDDT:", { size: SIZE.legend, weight: "bold", baseline: "middle" }) });
      for (const b of PLDDT_BANDS) items.push(sw(b.color, b.label));
    } else if (opts.color_by === "bfactor") {
      const w = 200;
      items.push({ w: w + 20, draw: (x, y0) => colorbar(bMap, x, y0 + 14, w, 9, bLo, bHi > bLo ? bHi : bLo + 1e-9, "B-factor (Å²)") });
    } else if (singleChain && traceRes.length) {
      const w = 150;
      const label = "N-terminus → C-terminus";
      items.push({
        w: w + 14 + textWidth(label, SIZE.legend),
        draw: (x, y0) => `<g>${Array.from({ length: 30 }, (_, i) => `<rect x="${r2(x + (i * w) / 30)}" y="${r2(y0 + 8)}" width="${r2(w / 30 + 0.4)}" height="10" fill="${rainbow(i / 29)}"/>`).join("")}<rect x="${r2(x)}" y="${r2(y0 + 8)}" width="${w}" height="10" fill="none" stroke="#333" stroke-width="0.4"/></g>` + text(x + w + 8, y0 + 13, label, { size: SIZE.legend, baseline: "middle" }),
      });
    } else {
      // polymer chains (a chain of only hetero groups is drawn in the ligand colour), as many
      // as fit in two rows; the palette repeats after eight
      const avail = 2 * (W - 32) - 260;
      let used = 0, shown = 0;
      for (const c of polymerChains) {
        const it = sw(CHAIN_COLORS[chainPos.get(c)! % CHAIN_COLORS.length]!, `Chain ${c || "(blank)"}`);
        if (used + it.w > avail) break;
        items.push(it); used += it.w; shown++;
      }
      if (shown < polymerChains.length) {
        const more = `+${polymerChains.length - shown} more chains (colours repeat every ${CHAIN_COLORS.length})`;
        items.push({ w: textWidth(more, SIZE.legend) + 18, draw: (x, y0) => text(x, y0 + 13, more, { size: SIZE.legend, baseline: "middle", fill: "#555" }) });
      }
    }
    if (opts.color_by === "chain" && ligandsDrawn) items.push(sw(LIGAND_CARBON, style === "surface" ? "Ligand" : "Ligand carbon"));
    for (const e of legendElements) items.push(sw(ELEMENT_COLORS[e] ?? OTHER_ELEMENT, e in ELEMENT_COLORS ? e : "Other element"));
    if (opts.highlight_residues.length) items.push(sw(HIGHLIGHT, "Highlighted residue"));
    // pack into centred rows
    const maxW = W - 32;
    const rows: Array<typeof items> = [[]];
    let rowW = 0;
    for (const it of items) {
      if (rowW + it.w - 18 > maxW && rows[rows.length - 1]!.length) { rows.push([]); rowW = 0; }
      rows[rows.length - 1]!.push(it); rowW += it.w;
    }
    const rowH = opts.color_by === "bfactor" ? 40 : 22;
    const height = rows.length * rowH + 18;
    let minX = W;
    rows.forEach((row, ri) => {
      const rw = row.reduce((s2, it) => s2 + it.w, 0) - 18;
      wTotal = Math.max(wTotal, rw);
      let x = Math.max(16, (W - rw) / 2);
      minX = Math.min(minX, x);
      const y0 = H - height + 8 + ri * rowH + (opts.color_by === "bfactor" ? 10 : 0);
      for (const it of row) { parts.push(it.draw(x, y0)); x += it.w; }
    });
    const box = { x: minX - 4, y: H - height, w: wTotal + 8, h: height };
    return { svg: `<g class="legend">${parts.join("")}</g>`, height, box };
  }
}

/** Covalent bonds among `subset` (distance < r1 + r2 + 0.45 Å), found through a spatial grid: O(n). */
function findBonds(subset: number[], atoms: Atom[], pos: (i: number) => V): Array<[number, number]> {
  const cell = 2.6;
  const grid = new Map<number, number[]>();
  const key = (x: number, y: number, z: number) => ((x + 2048) * 4096 + (y + 2048)) * 4096 + (z + 2048);
  const cellOf = (p: V) => [Math.floor(p[0] / cell), Math.floor(p[1] / cell), Math.floor(p[2] / cell)] as const;
  for (const i of subset) { const [x, y, z] = cellOf(pos(i)); const k = key(x, y, z); (grid.get(k) ?? grid.set(k, []).get(k)!).push(i); }
  const out: Array<[number, number]> = [];
  for (const i of subset) {
    const a = atoms[i]!;
    if (IONS.has(a.element)) continue;
    const ra = COVALENT[a.element] ?? 0.77;
    const p = pos(i);
    const [x, y, z] = cellOf(p);
    for (let dx = -1; dx <= 1; dx++) for (let dy = -1; dy <= 1; dy++) for (let dz = -1; dz <= 1; dz++) {
      for (const j of grid.get(key(x + dx, y + dy, z + dz)) ?? []) {
        if (j <= i) continue;
        const b = atoms[j]!;
        if (IONS.has(b.element)) continue;
        const d = dist(p, pos(j));
        if (d > 0.4 && d < ra + (COVALENT[b.element] ?? 0.77) + 0.45) out.push([i, j]);
      }
    }
  }
  return out;
}
