/**
 * A heatmap's data: the most variable genes of a count matrix as per-gene z-scores of
 * log2(CPM + 1), the order of rows and columns (hierarchical clustering, or the genes by
 * variance and the samples as in the file) and the symmetric z range the colours span.
 */
import { ChartError } from "../chart.js";
import type { HeatmapOpts } from "../options.js";
import { averageLinkage, euclideanDistances, type Dendrogram } from "./clustering.js";
import { log2Cpm, mostVariable, type CountMatrix, type LogCpm } from "./count-matrix.js";

/** Colours saturate at ±this z-score (a few outlying cells would otherwise wash the rest out). */
const Z_CAP = 3;

export interface HeatmapData {
  lc: LogCpm;
  /** The samples kept (those with counts), in file order. */
  samples: string[];
  /** The genes drawn (indices into the matrix), most variable first, and how many vary at all. */
  genes: number[];
  variable: number;
  /** z-scores per drawn gene (NaN where a value is missing), and how many are missing. */
  z: Float64Array[];
  naCells: number;
  rowTree: Dendrogram | undefined;
  colTree: Dendrogram | undefined;
  /** Rows (indices into `genes`) and columns (into `samples`) in drawing order. */
  rowOrder: number[];
  colOrder: number[];
  /** The largest |z|, and where the colours saturate (symmetric about 0). */
  zmax: number;
  lim: number;
}

export function heatmapData(m: CountMatrix, opts: HeatmapOpts): HeatmapData {
  const lc = log2Cpm(m);
  const samples = lc.kept.map((j) => m.samples[j]!);
  const ns = samples.length;
  if (ns < 2) throw new ChartError(`a heatmap of z-scores needs at least 2 samples with counts; this matrix has ${ns}${lc.empty.length ? ` (and ${lc.empty.length} whose counts sum to 0: ${lc.empty.join(", ")})` : ""}`);
  const top = mostVariable(lc.rows, opts.top_n);
  if (top.variable < 2) throw new ChartError(`a heatmap needs at least 2 genes whose expression varies between samples; this matrix has ${top.variable} of ${m.values.length}`);
  // The chosen genes, most variable first: the order drawn when rows are not clustered.
  const genes = top.index;
  const { z, naCells } = zScores(lc.rows, genes, ns);
  const { rowTree, colTree } = clusterTrees(z, ns, opts);
  const rowOrder = rowTree ? rowTree.order : genes.map((_, i) => i);
  const colOrder = colTree ? colTree.order : samples.map((_, i) => i);
  // z range: symmetric, so every map is centred on 0.
  let zmax = 0;
  for (const r of z) for (const x of r) if (x === x && Math.abs(x) > zmax) zmax = Math.abs(x);
  const lim = Math.max(1, Math.min(Z_CAP, Math.ceil(zmax * 2) / 2));
  return { lc, samples, genes, variable: top.variable, z, naCells, rowTree, colTree, rowOrder, colOrder, zmax, lim };
}

/** z-scores per gene over the samples it has values for (sample sd, n − 1). */
function zScores(rows: readonly Float64Array[], genes: readonly number[], ns: number): { z: Float64Array[]; naCells: number } {
  let naCells = 0;
  const z = genes.map((gi) => {
    const v = rows[gi]!;
    let n = 0, sum = 0;
    for (const x of v) if (x === x) { n++; sum += x; }
    const mean = sum / n;
    let ss = 0;
    for (const x of v) if (x === x) ss += (x - mean) ** 2;
    const sd = Math.sqrt(ss / (n - 1));
    const out = new Float64Array(ns);
    for (let s = 0; s < ns; s++) { const x = v[s]!; out[s] = (x - mean) / sd; if (x !== x) naCells++; }
    return out;
  });
  return { z, naCells };
}

/** The rows' and columns' trees, each when its clustering is on. */
function clusterTrees(z: readonly Float64Array[], ns: number, opts: HeatmapOpts): { rowTree: Dendrogram | undefined; colTree: Dendrogram | undefined } {
  const ng = z.length;
  let rowTree: Dendrogram | undefined, colTree: Dendrogram | undefined;
  if (opts.cluster_rows && ng > 1) rowTree = averageLinkage(euclideanDistances(z, ns), ng);
  if (opts.cluster_cols && ns > 1) {
    const cols = Array.from({ length: ns }, (_, s) => Float64Array.from(z, (r) => r[s]!));
    colTree = averageLinkage(euclideanDistances(cols, ng), ns);
  }
  return { rowTree, colTree };
}
