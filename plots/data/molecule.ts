/**
 * The molecule a structure picture draws: the atoms kept (first model; no water, no hydrogen
 * when heavier atoms exist), grouped into residues with their trace atom (Cα, or P for nucleic
 * acids), trace segments, secondary structure (the file's records, else an estimate from the
 * Cα trace), covalent bonds from atomic radii, and the highlighted residues the user named.
 */
import { ChartError } from "../chart.js";
import type { StructureOpts } from "../options.js";
import { isWater, type Atom, type Structure } from "./structure-file.js";
import { dist, type V } from "./vectors.js";

const COVALENT: Record<string, number> = { H: 0.31, C: 0.76, N: 0.71, O: 0.66, S: 1.05, P: 1.07, Se: 1.2, F: 0.57, Cl: 1.02, Br: 1.2, I: 1.39, B: 0.84, Si: 1.11 };
/** Van der Waals radii (Bondi), Å. */
export const VDW: Record<string, number> = { H: 1.1, C: 1.7, N: 1.55, O: 1.52, S: 1.8, P: 1.8, Se: 1.9, F: 1.47, Cl: 1.75, Br: 1.85, I: 1.98, Fe: 1.94, Zn: 1.39, Mg: 1.73, Ca: 2.0, Na: 2.27, K: 2.75, Mn: 1.97, Cu: 1.4 };
export const IONS = new Set(["Fe", "Zn", "Mg", "Ca", "Na", "K", "Mn", "Cu", "Co", "Ni", "Cd", "Hg", "Cs", "Sr", "Ba", "Li", "Rb"]);
const NUCLEOTIDES = new Set(["A", "C", "G", "U", "T", "DA", "DC", "DG", "DT", "DU", "I", "DI"]);

export type SS = "helix" | "sheet" | "coil";
export interface Residue {
  chain: string; resSeq: number; iCode: string; resName: string;
  atoms: number[]; // indices into the drawn atoms
  trace?: number; // CA (protein) or P (nucleic acid)
  kind: "protein" | "nucleic" | "ligand";
  ss: SS;
  highlighted: boolean;
}
export const resLabel = (r: { chain: string; resSeq: number; iCode: string }) => `${r.chain}${r.resSeq}${r.iCode}`;

export interface Highlight { spec: string; residues: Residue[] }

export interface Molecule {
  /** The atoms drawn, and how many waters and hydrogens were left out. */
  atoms: Atom[];
  waters: number;
  hydrogens: number;
  residues: Residue[];
  /** Each drawn atom's residue (index into `residues`). */
  residueOf: Int32Array;
  highlights: Highlight[];
  /** Notes on highlight ranges not all in the structure. */
  partial: string[];
}

/** The atoms drawn and their residues; a structure of water only, or a highlight not in it, is the user's mistake. */
export function moleculeOf(s: Structure, opts: StructureOpts): Molecule {
  const waters = s.atoms.filter((a) => isWater(a.resName)).length;
  let atoms = s.atoms.filter((a) => !isWater(a.resName));
  if (!atoms.length) throw new ChartError("the structure has only water molecules: nothing to draw");
  const hydrogens = atoms.filter((a) => a.element === "H" || a.element === "D").length;
  if (hydrogens < atoms.length) atoms = atoms.filter((a) => a.element !== "H" && a.element !== "D");
  const residues = groupResidues(atoms);
  const { list: highlights, partial } = resolveHighlights(opts.highlight_residues, residues);
  const residueOf = new Int32Array(atoms.length);
  residues.forEach((r, ri) => { for (const i of r.atoms) residueOf[i] = ri; });
  return { atoms, waters, hydrogens, residues, residueOf, highlights, partial };
}

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
export function traceSegments(res: Residue[], pos: (i: number) => V): Residue[][] {
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

/** Secondary structure from the file's records, else estimated (see estimateSecondary); says which in the TSV's words. */
export function assignSecondary(s: Structure, residues: Residue[], segs: Residue[][], pos: (i: number) => V): string {
  if (s.secondary.length) {
    for (const r of residues) {
      if (r.kind !== "protein") continue;
      const hit = s.secondary.find((e) => e.chain === r.chain && r.resSeq >= e.start && r.resSeq <= e.end);
      if (hit) r.ss = hit.kind;
    }
    return "secondary structure from the file's records (HELIX/SHEET or _struct_conf/_struct_sheet_range)";
  }
  const k = estimateSecondary(segs, pos);
  return `the file has no secondary-structure records: helices and strands ESTIMATED from Cα–Cα distances (${k} residues assigned), not DSSP`;
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
    markHelices(seg, p);
    markStrands(seg, p, (i) => hasPartner(seg[i]!, p[i]!, index.get(seg[i]!)!, all, grid, pos));
    assigned += seg.filter((r) => r.ss !== "coil").length;
  }
  return assigned;
}

/** Helices: runs of at least three i with CA(i)–CA(i+3) 4.4–5.7 Å and CA(i)–CA(i+4) 5.5–7 Å, through i + 3. */
function markHelices(seg: Residue[], p: readonly V[]): void {
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
}

/** Strands: runs of at least three extended coil residues (CA(i−1)–CA(i+1) ≥ 6.2 Å) that each have a partner. */
function markStrands(seg: Residue[], p: readonly V[], partnered: (i: number) => boolean): void {
  const n = seg.length;
  const e = new Array<boolean>(n).fill(false);
  for (let i = 1; i + 1 < n; i++) {
    if (seg[i]!.ss !== "coil" || dist(p[i - 1]!, p[i + 1]!) < 6.2) continue;
    e[i] = partnered(i);
  }
  for (let i = 0; i < n;) {
    if (!e[i]) { i++; continue; }
    let j = i;
    while (j < n && e[j]) j++;
    if (j - i >= 3) for (let k = i; k < j; k++) seg[k]!.ss = "sheet";
    i = j;
  }
}

/** Whether a residue (trace at `at`, number `me` in `all`) has a non-neighbouring, non-helix Cα within 5.5 Å. */
function hasPartner(r: Residue, at: V, me: number, all: readonly Residue[], grid: Map<string, number[]>, pos: (i: number) => V): boolean {
  const [gx, gy, gz] = [Math.floor(at[0] / 5.5), Math.floor(at[1] / 5.5), Math.floor(at[2] / 5.5)];
  let partner = false;
  for (let dx = -1; dx <= 1 && !partner; dx++) for (let dy = -1; dy <= 1 && !partner; dy++) for (let dz = -1; dz <= 1 && !partner; dz++) {
    for (const j of grid.get(`${gx + dx},${gy + dy},${gz + dz}`) ?? []) {
      const o = all[j]!;
      if (Math.abs(j - me) <= 3 && o.chain === r.chain) continue;
      if (o.kind === "protein" && o.ss !== "helix" && dist(pos(o.trace!), at) <= 5.5) { partner = true; break; }
    }
  }
  return partner;
}

/** The residues each highlight_residues entry ("A:25", "A:30-35") names, marked highlighted; a chain or residue not there is the user's mistake. */
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

/** Covalent bonds among `subset` (distance < r1 + r2 + 0.45 Å), found through a spatial grid: O(n). */
export function findBonds(subset: number[], atoms: Atom[], pos: (i: number) => V): Array<[number, number]> {
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
