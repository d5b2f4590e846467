/**
 * A volcano plot's data: the columns of a differential-expression results table (DESeq2,
 * edgeR, limma), its rows streamed into typed arrays, and each gene's −log10 p and category
 * (up, down, not significant) under the thresholds; which changed genes deserve a label.
 */
import { ChartError } from "../chart.js";
import type { VolcanoOpts } from "../options.js";
import { findColumn, optionalColumn } from "./columns.js";
import { GrowableF64 } from "./growable.js";
import { fastNumber } from "./numbers.js";
import { negLog10, pFloor, pValueOf, type PFloor } from "./pvalues.js";

export const VOLCANO_COLUMNS = {
  log2fc: ["log2FoldChange", "log2fc", "logFC", "log2FC", "log2_fold_change"],
  pvalue: ["padj", "adj.P.Val", "FDR", "qvalue", "pvalue", "P.Value", "PValue", "p_value"],
  gene: ["gene_name", "gene_id", "symbol", "gene", "Gene", "gene_symbol", "SYMBOL"],
} as const;

export type VolcanoCategory = "up" | "down" | "ns";

/** Whether a p-value column holds adjusted p-values (padj, adj.P.Val, FDR, q-values). */
export const isAdjusted = (name: string) => /adj|fdr|q[._-]?val/i.test(name);

export interface VolcanoColumns {
  fc: number;
  p: number;
  gene: number | undefined;
  fcName: string;
  pName: string;
  adjusted: boolean;
}

/** The fold-change, p-value and gene columns: named by the options, else found by their common names. */
export function volcanoColumns(header: readonly string[], opts: VolcanoOpts): VolcanoColumns {
  const fc = findColumn(header, opts.log2fc_col, VOLCANO_COLUMNS.log2fc, "log2fc_col", "log2 fold change");
  const p = findColumn(header, opts.pvalue_col, VOLCANO_COLUMNS.pvalue, "pvalue_col", "p-value");
  let gene: number | undefined;
  if (opts.gene_col !== undefined) gene = findColumn(header, opts.gene_col, [], "gene_col", "gene");
  else {
    gene = optionalColumn(header, VOLCANO_COLUMNS.gene);
    // R's write.csv writes the row names (gene ids) under an empty first header cell.
    if (gene === undefined && header[0] === "" && fc !== 0 && p !== 0) gene = 0;
  }
  const fcName = header[fc]!, pName = header[p]!;
  return { fc, p, gene, fcName, pName, adjusted: isAdjusted(pName) };
}

/** The rows read so far: fold change, p and gene name of each usable row, and what was skipped. */
export class VolcanoTable {
  readonly fc = new GrowableF64();
  readonly p = new GrowableF64();
  readonly genes: string[] = [];
  rows = 0;
  badFc = 0;
  badP = 0;
  skipped = 0;
  /** write.table with row names writes one header cell fewer than each row holds: the row name comes first. */
  shift: number | undefined;

  constructor(private readonly header: readonly string[], private readonly cols: VolcanoColumns) {}

  row(cells: readonly string[]): void {
    const { header, cols } = this;
    if (this.shift === undefined) this.shift = cells.length === header.length + 1 && header[0] !== "" ? 1 : 0;
    const shift = this.shift;
    this.rows++;
    const f = fastNumber(cells[cols.fc + shift]);
    const pv = pValueOf(cells[cols.p + shift]);
    if (f === undefined) this.badFc++;
    if (pv === undefined) this.badP++;
    if (f === undefined || pv === undefined) { this.skipped++; return; }
    this.fc.push(f);
    this.p.push(pv);
    const g = cols.gene !== undefined ? cells[cols.gene + shift] : shift === 1 ? cells[0] : undefined;
    this.genes.push(g === undefined || g.trim() === "" ? `row ${this.rows}` : g.trim());
  }

  /** The error when no row was usable. */
  check(): void {
    const { fcName, pName } = this.cols;
    if (this.fc.n === 0) throw new ChartError(`no row has both a numeric ${fcName} and a numeric ${pName} (${this.rows} data rows read; ${this.badFc} without a numeric ${fcName}, ${this.badP} without a ${pName} between 0 and 1)`);
  }
}

export interface VolcanoPoints {
  n: number;
  /** log2 fold change and p of each point (the first `n` values). */
  F: Float64Array;
  P: Float64Array;
  /** −log10 p of each point (a p of 0 at the floor). */
  y: Float64Array;
  cat: VolcanoCategory[];
  counts: Record<VolcanoCategory, number>;
  floor: PFloor;
  /** The largest −log10 p and |log2 FC| to show (the threshold lines at least). */
  ymax: number;
  xmax: number;
}

/** Heights and categories of the points under the thresholds of `opts`. */
export function volcanoPoints(t: VolcanoTable, opts: VolcanoOpts): VolcanoPoints {
  const n = t.fc.n;
  const F = t.fc.a, P = t.p.a;
  const floor = pFloor(P, n);
  const y = new Float64Array(n);
  const cat: VolcanoCategory[] = new Array(n);
  const counts = { up: 0, down: 0, ns: 0 };
  let ymax = -Math.log10(opts.threshold_pvalue), xmax = opts.threshold_fc * 1.25;
  for (let i = 0; i < n; i++) {
    const v = P[i]!, f = F[i]!;
    y[i] = negLog10(v, floor.floor) + 0; // + 0 turns −0 (p = 1) into 0
    const sig = v < opts.threshold_pvalue;
    const c: VolcanoCategory = sig && f >= opts.threshold_fc ? "up" : sig && f <= -opts.threshold_fc ? "down" : "ns";
    cat[i] = c;
    counts[c]++;
    if (y[i]! > ymax) ymax = y[i]!;
    if (Math.abs(f) > xmax) xmax = Math.abs(f);
  }
  return { n, F, P, y, cat, counts, floor, ymax, xmax };
}

/** The changed genes, most significant first (smallest p, then largest |log2FC|); the first `top` get labels. */
export function changedGenes(pts: VolcanoPoints, top: number): { changed: number[]; wanted: number[] } {
  const { n, cat, P, F } = pts;
  const changed: number[] = [];
  for (let i = 0; i < n; i++) if (cat[i] !== "ns") changed.push(i);
  changed.sort((a, b) => P[a]! - P[b]! || Math.abs(F[b]!) - Math.abs(F[a]!) || a - b);
  return { changed, wanted: changed.slice(0, top) };
}
