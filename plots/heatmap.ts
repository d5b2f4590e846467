/**
 * heatmap: the most variable genes of a genes × samples count matrix, as log2(CPM + 1)
 * z-scored per gene, rows and columns ordered by hierarchical clustering (average linkage on
 * Euclidean distances between z-score profiles) with their dendrograms, a colour bar, gene
 * labels on the right and sample labels underneath sized so none overlap. This module
 * composes data/count-matrix.ts, data/heatmap.ts and data/clustering.ts → layout/heatmap.ts
 * → paint/heatmap.ts and writes the TSV: the matrix as drawn.
 */
import type { Chart, Frame, TableSink } from "./chart.js";
import { CountMatrixReader, skippedComment, type CountMatrix } from "./data/count-matrix.js";
import { heatmapData, type HeatmapData } from "./data/heatmap.js";
import { fmt } from "./data/numbers.js";
import { heatmapLayout, type HeatmapLayout } from "./layout/heatmap.js";
import { titleLines } from "./layout/title.js";
import type { HeatmapOpts } from "./options.js";
import { colormap } from "./paint/colours.js";
import { heatmapCells, heatmapColorbar, heatmapDendrograms, heatmapLabels, heatmapNotes } from "./paint/heatmap.js";
import { svgDocument } from "./paint/svg.js";
import { paintTitle } from "./paint/title.js";

export function heatmapChart(header: readonly string[], opts: HeatmapOpts, frame: Frame): TableSink {
  const reader = new CountMatrixReader(header, opts.gene_col);
  return {
    row: (cells) => reader.row(cells),
    finish: () => renderHeatmap(reader.finish(), opts, frame),
  };
}

function renderHeatmap(m: CountMatrix, opts: HeatmapOpts, frame: Frame): Chart {
  const d = heatmapData(m, opts);
  const lay = heatmapLayout(d, m, opts, frame);
  const cmap = colormap(opts.colormap);
  const parts = [
    paintTitle(titleLines(lay.title, lay.subtitle, lay.W), lay.W),
    heatmapCells(d, lay, cmap),
    heatmapDendrograms(d, lay),
    heatmapLabels(d, lay),
    heatmapColorbar(d, lay, cmap),
    heatmapNotes(lay),
  ];
  const rows = d.rowOrder.map((r, i) => [lay.labels[i]!, ...d.colOrder.map((c) => { const v = d.z[r]![c]!; return v === v ? v : "NA"; })] as Array<string | number>);
  return {
    svg: svgDocument(lay.W, lay.H, parts.join(""), lay.title),
    width: Math.round(lay.W), height: Math.round(lay.H),
    data: { header: ["gene", ...d.colOrder.map((c) => d.samples[c]!)], rows, comments: heatmapComments(m, d, lay, opts, frame) },
  };
}

/** The TSV's comments: genes and values, how rows and columns are ordered, colours, cells left out. */
function heatmapComments(m: CountMatrix, d: HeatmapData, lay: HeatmapLayout, opts: HeatmapOpts, frame: Frame): string[] {
  const ng = d.genes.length, ns = d.samples.length;
  const method = (what: string, n: number) => `${what} ordered by hierarchical clustering: average linkage (UPGMA) on Euclidean distances between the ${n} z-scores of each ${what === "rows" ? "gene" : "sample"}`;
  const comments = [
    `source: ${frame.source}`,
    `rows: the ${ng} most variable genes (variance of log2(CPM + 1) across samples; CPM over each sample's column sum in this file) of ${d.variable} that vary; values: per-gene z-scores of log2(CPM + 1) (mean 0, sample standard deviation 1)`,
    d.rowTree ? method("rows", ns) : "rows by decreasing variance (cluster_rows is off)",
    d.colTree ? method("columns", ng) : "columns in the file's order (cluster_cols is off)",
    `colours: ${opts.colormap}, centred on 0, saturating at ±${fmt(d.lim)}${d.zmax > d.lim ? ` (the largest |z| is ${fmt(d.zmax)})` : ""}`,
    `gene labels from column "${m.labelColumn}"`,
  ];
  if (d.naCells) comments.push(`cells without a value (drawn grey, NA here): ${d.naCells}; distances use the samples both genes have`);
  comments.push(...skippedComment(m));
  if (d.lc.empty.length) comments.push(`samples left out, their counts sum to 0: ${d.lc.empty.join(", ")}`);
  if (m.annotationColumns.length) comments.push(`annotation columns (not samples): ${m.annotationColumns.join(", ")}`);
  comments.push(...lay.notes);
  return comments;
}
