/**
 * A Manhattan plot's data: the columns of a GWAS summary-statistics file, its rows streamed
 * into typed arrays (a million SNPs stay a few flat arrays; SNP ids are kept in blocks of
 * joined text), chromosome names normalised and put in natural order, each chromosome's
 * extent, and the loci: the best SNP of each genome-wide significant region.
 */
import { ChartError } from "../chart.js";
import type { ManhattanOpts } from "../options.js";
import { findColumn, optionalColumn } from "./columns.js";
import { GrowableF64, GrowableU16 } from "./growable.js";
import { fastNumber } from "./numbers.js";
import { pValueOf } from "./pvalues.js";

export const MANHATTAN_COLUMNS = {
  chr: ["chr", "CHR", "chrom", "chromosome", "CHROM", "#CHROM", "#chrom"],
  pos: ["pos", "BP", "position", "POS", "base_pair_location", "bp"],
  pvalue: ["p", "P", "pval", "p_value", "PVAL", "P_BOLT_LMM", "p.value", "P.value", "pvalue"],
  snp: ["snp", "SNP", "rsid", "variant_id", "ID", "MarkerName", "rs"],
} as const;

/** More rows than this is not a Manhattan plot any more: the file is refused (memory stays bounded). */
export const MAX_MANHATTAN_ROWS = 10_000_000;
/** Two SNPs closer than this on one chromosome belong to one locus (one label). */
export const LOCUS_BP = 500_000;
/** SNP ids are kept joined by "\n" in blocks of this many. */
const BLOCK = 4096;

/** `chr1` / `Chr1` / `1` → `1`, `chrX` → `X`, `M` / `chrM` / `MT` → `MT`; other contigs as written. */
export function chromName(raw: string): string {
  const s = raw.trim().replace(/^chr(?:om(?:osome)?)?[_-]?/i, "");
  if (s === "") return raw.trim();
  if (/^(m|mt)$/i.test(s)) return "MT";
  if (/^[xy]$/i.test(s)) return s.toUpperCase();
  if (/^\d+$/.test(s)) return String(Number(s));
  return s;
}

const collator = new Intl.Collator("en", { numeric: true, sensitivity: "base" });
const SEX: Record<string, number> = { X: 0, Y: 1, XY: 2, MT: 3 };
/** Natural chromosome order: numbers ascending, then X, Y, XY, MT, then other contigs (natural sort). */
export function compareChrom(a: string, b: string): number {
  const rank = (c: string): [number, number] => /^\d+$/.test(c) ? [0, Number(c)] : c in SEX ? [1, SEX[c]!] : [2, 0];
  const [ra, va] = rank(a), [rb, vb] = rank(b);
  return ra - rb || va - vb || collator.compare(a, b) || (a < b ? -1 : a > b ? 1 : 0);
}

/** `2` → `chr2`, `X` → `chrX`, `MT` → `chrMT`; other contigs as written. */
export const chromLabel = (name: string) => (/^(\d+|X|Y|XY|MT)$/.test(name) ? `chr${name}` : name);

export interface SnpColumns {
  chr: number;
  pos: number;
  p: number;
  snp: number | undefined;
  /** The columns' names as the file writes them (for messages and the TSV). */
  names: { chr: string; pos: string; p: string; snp: string | undefined };
}

/** The chromosome, position, p-value and (optional) SNP id columns. */
export function snpColumns(header: readonly string[], opts: ManhattanOpts): SnpColumns {
  const chr = findColumn(header, opts.chr_col, MANHATTAN_COLUMNS.chr, "chr_col", "chromosome");
  const pos = findColumn(header, opts.pos_col, MANHATTAN_COLUMNS.pos, "pos_col", "position");
  const p = findColumn(header, opts.pvalue_col, MANHATTAN_COLUMNS.pvalue, "pvalue_col", "p-value");
  const snp = opts.snp_col !== undefined ? findColumn(header, opts.snp_col, [], "snp_col", "SNP") : optionalColumn(header, MANHATTAN_COLUMNS.snp);
  return { chr, pos, p, snp, names: { chr: header[chr]!, pos: header[pos]!, p: header[p]!, snp: snp !== undefined ? header[snp]! : undefined } };
}

/** The SNPs read so far: chromosome index, position and p of each usable row, and what was skipped. */
export class SnpTable {
  readonly chr = new GrowableU16(1 << 14);
  readonly pos = new GrowableF64(1 << 14);
  readonly p = new GrowableF64(1 << 14);
  /** Normalised chromosome names, in the order first seen (a SNP's `chr` indexes this). */
  readonly chromNames: string[] = [];
  private readonly chromIndex = new Map<string, number>();
  private readonly rawToIndex = new Map<string, number>();
  // SNP ids in blocks of BLOCK joined by "\n": flat strings, no per-row objects kept.
  private readonly idBlocks: string[] = [];
  private idBuf: string[] = [];
  rows = 0;
  badChr = 0;
  badPos = 0;
  badP = 0;
  skipped = 0;

  constructor(readonly cols: SnpColumns) {}

  row(cells: readonly string[]): void {
    const cols = this.cols;
    if (++this.rows > MAX_MANHATTAN_ROWS) throw new ChartError(`the file has more than ${MAX_MANHATTAN_ROWS.toLocaleString("en-US")} rows, too many for a Manhattan plot (at most ${MAX_MANHATTAN_ROWS.toLocaleString("en-US")}); filter it first, e.g. keep SNPs with p < 0.01, or split it by chromosome`);
    const rawChr = cells[cols.chr] ?? "";
    const pos = fastNumber(cells[cols.pos]);
    const p = pValueOf(cells[cols.p]);
    let ci = this.rawToIndex.get(rawChr);
    const chrOk = ci !== undefined || (rawChr.trim() !== "" && !/^(na|nan|\.)$/i.test(rawChr.trim()));
    const posOk = pos !== undefined && pos >= 0;
    if (!chrOk || !posOk || p === undefined) {
      if (!chrOk) this.badChr++;
      if (!posOk) this.badPos++;
      if (p === undefined) this.badP++;
      this.skipped++;
      return;
    }
    if (ci === undefined) ci = this.chromOf(rawChr);
    this.chr.push(ci); this.pos.push(pos); this.p.push(p);
    if (cols.snp !== undefined) {
      let id = cells[cols.snp] ?? "";
      if (id.includes("\n") || id.includes("\r")) id = id.replace(/[\n\r]/g, " ");
      this.idBuf.push(id);
      if (this.idBuf.length === BLOCK) { this.idBlocks.push(this.idBuf.join("\n")); this.idBuf = []; }
    }
  }

  /** The index of a chromosome written `rawChr` for the first time (a new name gets the next index). */
  private chromOf(rawChr: string): number {
    const name = chromName(rawChr);
    let ci = this.chromIndex.get(name);
    if (ci === undefined) {
      if (this.chromNames.length >= 65_535) throw new ChartError(`the file names more than 65,535 chromosomes or contigs (column "${this.cols.names.chr}"); a Manhattan plot needs far fewer: keep the assembled chromosomes`);
      ci = this.chromNames.length;
      this.chromNames.push(name);
      this.chromIndex.set(name, ci);
    }
    if (this.rawToIndex.size < 100_000) this.rawToIndex.set(rawChr, ci);
    return ci;
  }

  /** The end of the file: no usable row is the user's mistake; the last block of ids is kept. */
  finish(): void {
    const { names } = this.cols;
    if (this.p.n === 0) throw new ChartError(`no row has a chromosome, a numeric position and a p-value between 0 and 1 (${this.rows} data rows read; ${this.badChr} without a chromosome in "${names.chr}", ${this.badPos} without a numeric "${names.pos}", ${this.badP} without a numeric "${names.p}")`);
    if (this.idBuf.length) { this.idBlocks.push(this.idBuf.join("\n")); this.idBuf = []; }
  }

  /** SNP ids of the given rows, read block by block (row order); empty without an id column. */
  idsOf(rows: Uint32Array): Map<number, string> {
    const ids = new Map<number, string>();
    if (this.cols.snp === undefined) return ids;
    const byRow = Uint32Array.from(rows).sort();
    let b = -1, lines: string[] = [];
    for (const i of byRow) {
      const bi = Math.floor(i / BLOCK);
      if (bi !== b) { b = bi; lines = this.idBlocks[bi]!.split("\n"); }
      ids.set(i, lines[i - bi * BLOCK] ?? "");
    }
    return ids;
  }
}

export interface Chromosomes {
  /** Lowest and highest position of each chromosome's SNPs. */
  lo: Float64Array;
  hi: Float64Array;
  /** Chromosome indices in plot order (natural order of their names). */
  order: number[];
}

export function chromosomes(t: SnpTable): Chromosomes {
  const n = t.p.n, C = t.chr.a, POS = t.pos.a;
  const k = t.chromNames.length;
  const lo = new Float64Array(k).fill(Infinity), hi = new Float64Array(k).fill(-Infinity);
  for (let i = 0; i < n; i++) {
    const c = C[i]!, x = POS[i]!;
    if (x < lo[c]!) lo[c] = x;
    if (x > hi[c]!) hi[c] = x;
  }
  const order = t.chromNames.map((_, i) => i).sort((a, b) => compareChrom(t.chromNames[a]!, t.chromNames[b]!));
  return { lo, hi, order };
}

/**
 * The genome-wide significant SNPs among `drawn` (smallest p first) and the loci they form:
 * the best SNP per chromosome within LOCUS_BP.
 */
export function lociOf(t: SnpTable, drawn: Uint32Array, significance: number): { sig: number[]; leads: number[] } {
  const C = t.chr.a, POS = t.pos.a, P = t.p.a;
  const sig: number[] = [];
  for (let j = 0; j < drawn.length; j++) { const i = drawn[j]!; if (P[i]! < significance) sig.push(i); }
  sig.sort((a, b) => P[a]! - P[b]! || a - b);
  const leads: number[] = [];
  for (const i of sig) if (!leads.some((l) => C[l] === C[i] && Math.abs(POS[l]! - POS[i]!) < LOCUS_BP)) leads.push(i);
  return { sig, leads };
}
