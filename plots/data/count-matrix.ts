/**
 * A genes × samples count matrix (nf-core/rnaseq's `salmon.merged.gene_counts.tsv` and the
 * like), as the PCA and the heatmap read it: the gene column (the first, or `gene_col`),
 * annotation columns told apart from samples by their text (gene_name is used for labels),
 * NA / empty / non-numeric / negative cells counted; then library sizes and log2(CPM + 1),
 * per-gene variance and the most variable genes.
 */
import { isMissing } from "../../core/delimited.js";
import { ChartError } from "../chart.js";
import { findColumn } from "./columns.js";
import { numberOf } from "./numbers.js";

/** A genes × samples matrix as read: NaN where a cell was missing or unusable. */
export interface CountMatrix {
  /** Sample columns, in file order. */
  samples: string[];
  ids: string[];
  /** Row labels: gene_name (or the like) when the file has it and the cell is filled, else the id. */
  labels: string[];
  /** One row per gene, one value per sample; NaN = missing, non-numeric or negative. */
  values: Float64Array[];
  idColumn: string;
  labelColumn: string;
  /** Text columns left out of the samples (gene_name, description, …). */
  annotationColumns: string[];
  skipped: { missing: number; nonNumeric: number; negative: number };
}

/** Columns whose name says they hold gene symbols, most specific first. */
const NAME_COLUMNS = ["gene_name", "gene_symbol", "symbol", "genesymbol", "external_gene_name", "hgnc_symbol", "mgi_symbol", "name", "gene"];
/** How many data rows decide which columns are text (annotations) and which are samples. */
const CLASSIFY_ROWS = 200;

/**
 * Reads the matrix a row at a time. The first rows are held until the columns are classified:
 * a column whose present cells are mostly text is an annotation, the rest are samples.
 */
export class CountMatrixReader {
  private readonly header: readonly string[];
  private readonly idCol: number;
  private held: string[][] = [];
  private sampleCols: number[] | undefined;
  private labelCol = -1;
  private annotation: number[] = [];
  readonly ids: string[] = [];
  readonly labels: string[] = [];
  readonly values: Float64Array[] = [];
  readonly skipped = { missing: 0, nonNumeric: 0, negative: 0 };

  constructor(header: readonly string[], geneCol: string | undefined) {
    this.header = header;
    if (header.length < 2) throw new ChartError("the count matrix has a single column; it needs a gene column and one column per sample");
    this.idCol = geneCol === undefined ? 0 : findColumn(header, geneCol, [], "gene_col", "gene");
  }

  row(cells: readonly string[]): void {
    if (this.sampleCols) { this.take(cells); return; }
    this.held.push(cells.slice());
    if (this.held.length >= CLASSIFY_ROWS) this.classify();
  }

  private classify(): void {
    const sampleCols: number[] = [];
    for (let c = 0; c < this.header.length; c++) {
      if (c === this.idCol) continue;
      let present = 0, numeric = 0;
      for (const r of this.held) {
        const cell = r[c] ?? "";
        if (isMissing(cell)) continue;
        present++;
        if (numberOf(cell) !== undefined) numeric++;
      }
      if (present > 0 && numeric < present / 2) this.annotation.push(c);
      else sampleCols.push(c);
    }
    this.sampleCols = sampleCols;
    const lower = this.header.map((h) => h.trim().toLowerCase());
    for (const name of NAME_COLUMNS) {
      const i = lower.indexOf(name);
      if (i >= 0 && (i === this.idCol || this.annotation.includes(i))) { this.labelCol = i; break; }
    }
    const held = this.held;
    this.held = [];
    for (const r of held) this.take(r);
  }

  private take(cells: readonly string[]): void {
    const cols = this.sampleCols!;
    const v = new Float64Array(cols.length);
    for (let j = 0; j < cols.length; j++) {
      const cell = cells[cols[j]!] ?? "";
      const x = numberOf(cell);
      if (x === undefined) {
        v[j] = NaN;
        if (isMissing(cell)) this.skipped.missing++; else this.skipped.nonNumeric++;
      } else if (x < 0) { v[j] = NaN; this.skipped.negative++; } else v[j] = x;
    }
    const id = (cells[this.idCol] ?? "").trim();
    const name = this.labelCol >= 0 ? (cells[this.labelCol] ?? "").trim() : "";
    this.ids.push(id);
    this.labels.push(name && !isMissing(name) ? name : id);
    this.values.push(v);
  }

  finish(): CountMatrix {
    if (!this.sampleCols) this.classify();
    const samples = this.sampleCols!.map((c) => this.header[c]!);
    if (samples.length === 0) {
      throw new ChartError(`the count matrix has no sample columns: every column besides the gene column holds text (${this.annotation.map((c) => JSON.stringify(this.header[c])).join(", ")}); the samples' columns must hold counts`);
    }
    if (this.values.length === 0) throw new ChartError("the count matrix has a header but no genes");
    return {
      samples, ids: this.ids, labels: this.labels, values: this.values,
      idColumn: this.header[this.idCol]!, labelColumn: this.header[this.labelCol >= 0 ? this.labelCol : this.idCol]!,
      annotationColumns: this.annotation.map((c) => this.header[c]!), skipped: this.skipped,
    };
  }
}

/** The TSV comment about unusable cells, or nothing when every cell was a count. */
export function skippedComment(m: CountMatrix): string[] {
  const { missing, nonNumeric, negative } = m.skipped;
  if (missing + nonNumeric + negative === 0) return [];
  const parts = [];
  if (missing) parts.push(`${missing} NA or empty`);
  if (nonNumeric) parts.push(`${nonNumeric} non-numeric`);
  if (negative) parts.push(`${negative} negative`);
  return [`skipped cells (not counts): ${parts.join(", ")}`];
}

export interface LogCpm {
  /** log2(CPM + 1) per gene over the kept samples; NaN stays NaN. */
  rows: Float64Array[];
  /** Indices (into CountMatrix.samples) of the samples kept: those with a non-zero library. */
  kept: number[];
  libSizes: number[];
  /** Samples left out because their column sums to 0. */
  empty: string[];
}

/** Counts per million over each sample's library (its column's sum in this file), log2(x + 1). */
export function log2Cpm(m: CountMatrix): LogCpm {
  const ns = m.samples.length;
  const lib = new Float64Array(ns);
  for (const v of m.values) for (let j = 0; j < ns; j++) { const x = v[j]!; if (x === x) lib[j]! += x; }
  const kept: number[] = [];
  const empty: string[] = [];
  for (let j = 0; j < ns; j++) { if (lib[j]! > 0) kept.push(j); else empty.push(m.samples[j]!); }
  const scale = kept.map((j) => 1e6 / lib[j]!);
  const rows = m.values.map((v) => {
    const out = new Float64Array(kept.length);
    for (let k = 0; k < kept.length; k++) out[k] = Math.log2(v[kept[k]!]! * scale[k]! + 1);
    return out;
  });
  return { rows, kept, libSizes: kept.map((j) => lib[j]!), empty };
}

/** Sample variance (n − 1) over the values present; NaN with fewer than two. */
export function variance(v: Float64Array): number {
  let n = 0, mean = 0, m2 = 0;
  for (let i = 0; i < v.length; i++) {
    const x = v[i]!;
    if (x !== x) continue;
    n++;
    const d = x - mean;
    mean += d / n;
    m2 += d * (x - mean);
  }
  return n < 2 ? NaN : m2 / (n - 1);
}

/** Indices of the `n` rows with the largest variance (> 0) among `eligible`, largest first; ties keep file order. */
export function mostVariable(rows: readonly Float64Array[], n: number, eligible: (i: number) => boolean = () => true): { index: number[]; variable: number } {
  const cand: Array<{ i: number; v: number }> = [];
  for (let i = 0; i < rows.length; i++) {
    if (!eligible(i)) continue;
    const v = variance(rows[i]!);
    if (v > 1e-12) cand.push({ i, v });
  }
  cand.sort((a, b) => b.v - a.v || a.i - b.i);
  return { index: cand.slice(0, n).map((c) => c.i), variable: cand.length };
}
