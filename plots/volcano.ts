/**
 * Volcano plot (plot type `volcano_plot`): −log10 p against log2 fold change for a
 * differential-expression results table (DESeq2, edgeR, limma), rows streamed one at a time.
 * Genes up (log2FC ≥ threshold and p < threshold), down and not significant are coloured;
 * dashed threshold lines; the most significant changed genes labelled without overlap; a
 * legend with the counts. The TSV holds one row per point drawn. This module composes the
 * steps: data/volcano.ts → layout/volcano.ts → paint/volcano.ts.
 */
import type { Chart, ChartData, Frame, TableSink } from "./chart.js";
import { floorText } from "./data/pvalues.js";
import { changedGenes, volcanoColumns, VolcanoTable, volcanoPoints, type VolcanoColumns, type VolcanoPoints } from "./data/volcano.js";
import { volcanoLabels, volcanoLayout } from "./layout/volcano.js";
import type { VolcanoOpts } from "./options.js";
import { svgDocument } from "./paint/svg.js";
import { paintVolcano } from "./paint/volcano.js";

export function volcanoChart(header: readonly string[], opts: VolcanoOpts, frame: Frame): TableSink {
  const cols = volcanoColumns(header, opts);
  const table = new VolcanoTable(header, cols);
  return {
    row: (cells) => table.row(cells),
    finish: () => { table.check(); return drawVolcano(header, cols, table, opts, frame); },
  };
}

function drawVolcano(header: readonly string[], cols: VolcanoColumns, table: VolcanoTable, opts: VolcanoOpts, frame: Frame): Chart {
  const pts = volcanoPoints(table, opts);
  const lay = volcanoLayout(pts, cols, opts, frame);
  const { changed, wanted } = changedGenes(pts, opts.top_labels);
  const { placed, dropped } = volcanoLabels(pts, table.genes, changed, wanted, lay);
  const pWord = cols.adjusted ? "adjusted p" : "p";
  const body = paintVolcano(pts, lay, placed, opts, `−log₁₀ ${pWord} (${cols.pName})`);
  const svg = svgDocument(lay.W, lay.H, body, lay.title);
  const comments = volcanoComments(header, cols, table, pts, opts, frame);
  comments.push(`labelled: the ${wanted.length} most significant changed genes${dropped ? ` (${dropped} of them could not be placed without overlap and are not labelled)` : ""}`);
  const data: ChartData = {
    header: ["gene", "log2FoldChange", cols.pName, "neg_log10_p", "category"],
    rows: Array.from({ length: pts.n }, (_, i) => [table.genes[i]!, pts.F[i]!, pts.P[i]!, +pts.y[i]!.toPrecision(8), pts.cat[i]!] as Array<string | number>),
    comments,
  };
  return { svg, width: lay.W, height: lay.H, data };
}

/** The TSV's comments: columns used, thresholds, counts, rows skipped, p-values of 0. */
function volcanoComments(header: readonly string[], cols: VolcanoColumns, table: VolcanoTable, pts: VolcanoPoints, opts: VolcanoOpts, frame: Frame): string[] {
  const { fcName, pName, gene: geneCol } = cols;
  const { counts, floor } = pts;
  const comments = [
    `volcano plot of ${frame.source}`,
    `columns used: log2 fold change "${fcName}", ${cols.adjusted ? "adjusted p-value" : "p-value"} "${pName}", gene ${geneCol !== undefined ? (header[geneCol] === "" ? "the first column (row names, no header)" : `"${header[geneCol]}"`) : table.shift === 1 ? "the row names (first cell of each row)" : "(none found: rows are named by their row number)"}`,
    `thresholds: up = ${fcName} >= ${opts.threshold_fc} and ${pName} < ${opts.threshold_pvalue}; down = ${fcName} <= -${opts.threshold_fc} and ${pName} < ${opts.threshold_pvalue}`,
    `counts: up ${counts.up}, down ${counts.down}, not significant ${counts.ns}; points drawn ${pts.n}`,
    `skipped ${table.skipped} of ${table.rows} rows: ${table.badFc} with a missing or non-numeric ${fcName} (NA, empty or text), ${table.badP} with a missing or non-numeric ${pName} (NA, empty, text or outside 0..1)`,
  ];
  if (floor.zeros > 0) comments.push(`${floor.zeros} genes have ${pName} = 0 (below floating-point range); they are drawn at the smallest positive ${pName} in the file, ${floorText(floor)} (neg_log10_p ${+(-Math.log10(floor.floor)).toPrecision(6)})`);
  return comments;
}
