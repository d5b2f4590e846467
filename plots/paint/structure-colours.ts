/**
 * The structure picture's colour schemes: by chain (a single chain as a rainbow from N- to
 * C-terminus, ligands grey, hetero atoms by element), by B-factor (viridis over the file's
 * range) or by pLDDT (AlphaFold DB's confidence bands), and magenta for highlighted residues.
 */
import { interpolateTurbo } from "d3-scale-chromatic";
import { ChartError } from "../chart.js";
import type { Molecule, Residue } from "../data/molecule.js";
import { fmt } from "../data/numbers.js";
import type { StructureOpts } from "../options.js";
import { colormap } from "./colours.js";

/** AlphaFold's confidence bands (the AlphaFold DB colours). */
export const PLDDT_BANDS = [
  { min: 90, label: "Very high (> 90)", color: "#0053D6" },
  { min: 70, label: "Confident (70–90)", color: "#65CBF3" },
  { min: 50, label: "Low (50–70)", color: "#FFDB13" },
  { min: -Infinity, label: "Very low (< 50)", color: "#FF7D45" },
] as const;
export const plddtColor = (v: number) => PLDDT_BANDS.find((b) => v > b.min)!.color;
export const plddtBand = (v: number) => PLDDT_BANDS.find((b) => v > b.min)!.label.replace(/ \(.*$/, "").toLowerCase();

/** Highlighted residues: magenta, apart from the rainbow, the pLDDT bands and the chain palette. */
export const HIGHLIGHT = "#E6007E";
/**
 * Chain colours: the Okabe–Ito palette without black and yellow (too dark / too pale as
 * ribbons), with Tol's olive and wine; sky blue last, as it is the one easily confused (with
 * the first, blue, once depth-cued) — only a structure of eight chains or more uses it.
 */
export const CHAIN_COLORS = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#999933", "#882255", "#56B4E9"] as const;
/** Element colours for hetero atoms (Jmol/CPK family). */
export const ELEMENT_COLORS: Record<string, string> = { N: "#3050F8", O: "#FF0D0D", S: "#E8C22A", P: "#FF8000", Se: "#FFA100", F: "#90E050", Cl: "#1FF01F", Br: "#A62929", I: "#940094", Fe: "#E06633", Zn: "#7D80B0", Mg: "#8AFF00", Ca: "#3DFF00", Mn: "#9C7AC7", Cu: "#C88033", Na: "#AB5CF2", K: "#8F40D4", H: "#E0E0E0" };
export const LIGAND_CARBON = "#8C8C8C";
/** Elements without a colour of their own (tan: apart from the chain palette and the highlight). */
export const OTHER_ELEMENT = "#C8A070";
/** Rainbow for N→C: turbo without its darkest ends. */
export const rainbow = (t: number) => interpolateTurbo(0.08 + 0.84 * Math.max(0, Math.min(1, t)));

/** The colours of one picture's residues and atoms under `color_by`. */
export class StructureColours {
  /** Chains in file order; whether there is one polymer chain; the residues with a trace atom, by chain. */
  readonly chains: string[];
  readonly singleChain: boolean;
  readonly traceRes: Residue[];
  readonly chainIndex = new Map<string, Residue[]>();
  /** The B-factor range and its colour map. */
  readonly bLo: number;
  readonly bHi: number;
  readonly bMap = colormap("viridis");
  readonly chainPos: Map<string, number>;
  private readonly rankInChain = new Map<Residue, number>();
  private readonly cache = new Map<Residue, string>();

  /** pLDDT colours need values 0–100 in the B-factor column: other values are the user's mistake. */
  constructor(private readonly mol: Molecule, private readonly opts: StructureOpts) {
    const { residues, atoms } = mol;
    this.chains = [...new Set(residues.map((r) => r.chain))];
    /** One polymer chain (ligands aside): coloured as a rainbow N→C instead of one flat colour. */
    this.singleChain = new Set(residues.filter((r) => r.trace !== undefined).map((r) => r.chain)).size === 1;
    this.traceRes = residues.filter((r) => r.trace !== undefined);
    for (const r of this.traceRes) (this.chainIndex.get(r.chain) ?? this.chainIndex.set(r.chain, []).get(r.chain)!).push(r);
    const bValues = atoms.map((a) => a.b);
    this.bLo = Math.min(...bValues); this.bHi = Math.max(...bValues);
    if (opts.color_by === "plddt" && (this.bLo < 0 || this.bHi > 100)) {
      throw new ChartError(`color_by plddt needs pLDDT values (0–100) in the B-factor column, but it runs ${fmt(this.bLo)}–${fmt(this.bHi)}; this does not look like an AlphaFold model — use color_by bfactor`);
    }
    for (const list of this.chainIndex.values()) list.forEach((r, i) => this.rankInChain.set(r, list.length > 1 ? i / (list.length - 1) : 0.5));
    this.chainPos = new Map(this.chains.map((c, i) => [c, i]));
  }

  /** A B-factor's place on the colour map (0.5 when every atom has the same). */
  bT(b: number): number { return this.bHi > this.bLo ? (b - this.bLo) / (this.bHi - this.bLo) : 0.5; }

  /** The value of a residue: its trace atom's B-factor / pLDDT, else its atoms' mean. */
  residueValue(r: Residue): number {
    const atoms = this.mol.atoms;
    return r.trace !== undefined ? atoms[r.trace]!.b : r.atoms.reduce((s2, i) => s2 + atoms[i]!.b, 0) / r.atoms.length;
  }

  /** The colour of a residue (its trace atom's value for B-factor / pLDDT). */
  residueColor(r: Residue): string {
    let c = this.cache.get(r);
    if (c === undefined) { c = this.residueColorRaw(r); this.cache.set(r, c); }
    return c;
  }

  private residueColorRaw(r: Residue): string {
    if (this.opts.color_by === "bfactor") return this.bMap(this.bT(this.residueValue(r)));
    if (this.opts.color_by === "plddt") return plddtColor(this.residueValue(r));
    if (r.kind === "ligand") return LIGAND_CARBON;
    if (this.singleChain && this.rankInChain.has(r)) return rainbow(this.rankInChain.get(r)!);
    return CHAIN_COLORS[this.chainPos.get(r.chain)! % CHAIN_COLORS.length]!;
  }

  /** Atom colours: by value for bfactor/plddt; by chain (carbons) and element (others) for chain colouring. */
  atomColor(i: number, carbon?: string): string {
    const a = this.mol.atoms[i]!;
    if (this.opts.color_by === "bfactor") return this.bMap(this.bT(a.b));
    if (this.opts.color_by === "plddt") return plddtColor(a.b);
    if (a.element !== "C") return ELEMENT_COLORS[a.element] ?? OTHER_ELEMENT;
    return carbon ?? this.residueColor(this.mol.residues[this.mol.residueOf[i]!]!);
  }

  /** Surface colours: chain / rainbow / value for every atom (no element colours on a surface). */
  atomColorSurface(i: number): string {
    const a = this.mol.atoms[i]!;
    if (this.opts.color_by === "bfactor") return this.bMap(this.bT(a.b));
    if (this.opts.color_by === "plddt") return plddtColor(a.b);
    return this.residueColor(this.mol.residues[this.mol.residueOf[i]!]!);
  }
}
