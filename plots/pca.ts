/**
 * pca_plot: samples of a genes × samples count matrix (nf-core/rnaseq's
 * `salmon.merged.gene_counts.tsv` and the like) placed on two principal components of
 * log2(CPM + 1) of the most variable genes, coloured by group, labelled without overlap.
 * This module composes data/count-matrix.ts and data/pca.ts → layout/pca.ts → paint/pca.ts
 * and writes the TSV: one row per sample with its group and scores.
 */
import type { Chart, Frame, TableSink } from "./chart.js";
import { CountMatrixReader, skippedComment, type CountMatrix } from "./data/count-matrix.js";
import { groupsOf, principalComponents, UNASSIGNED, type PcaResult, type SampleGroups } from "./data/pca.js";
import { pcaLayout, sampleLabels } from "./layout/pca.js";
import { SIZE } from "./layout/text.js";
import { titleLines } from "./layout/title.js";
import type { PcaOpts } from "./options.js";
import { drawLabels } from "./paint/labels.js";
import { pcaFrame, pcaLegend, pcaPoints } from "./paint/pca.js";
import { svgDocument, text } from "./paint/svg.js";
import { paintTitle } from "./paint/title.js";

export function pcaChart(header: readonly string[], opts: PcaOpts, frame: Frame, sheet?: { header: string[]; rows: string[][] }): TableSink {
  const reader = new CountMatrixReader(header, opts.gene_col);
  return {
    row: (cells) => reader.row(cells),
    finish: () => renderPca(reader.finish(), opts, frame, sheet),
  };
}

function renderPca(m: CountMatrix, opts: PcaOpts, frame: Frame, sheet: { header: string[]; rows: string[][] } | undefined): Chart {
  const r = principalComponents(m, opts);
  const g = groupsOf(r.samples, opts.color_by, sheet);
  const W = frame.width, H = frame.height;
  const title = frame.title ?? `PCA \u2014 ${frame.source}`;
  const subtitle = frame.title === undefined ? `log2(CPM + 1) of the ${r.genes.length} most variable genes, centred` : undefined;
  const head = titleLines(title, subtitle, W);
  const lay = pcaLayout(r, g, opts, frame, head.height);

  const parts = [paintTitle(head, W), pcaFrame(lay), pcaPoints(r, g, lay)];
  if (g) parts.push(pcaLegend(g, lay));
  const notes: string[] = [];
  let dropped = 0;
  if (opts.label_samples) {
    const labels = sampleLabels(r, lay);
    dropped = labels.dropped;
    parts.push(`<g class="labels">${drawLabels(labels.kept)}</g>`);
    if (dropped) notes.push(`${dropped} of ${r.samples.length} sample labels left out for lack of room (every sample is in the TSV)`);
  }
  if (notes.length) parts.push(text(10, H - 8, notes.join("; "), { size: SIZE.label, fill: "#555" }));

  const comments = pcaComments(m, r, g, frame);
  if (dropped) comments.push(notes[0]!);
  const [ca, cb] = opts.components;
  const rows = r.samples.map((s, i) => [s, g ? g.groups[i]! : "", r.xs[i]!, r.ys[i]!] as Array<string | number>);
  return {
    svg: svgDocument(W, H, parts.join(""), title),
    width: W, height: H,
    data: { header: ["sample", "group", `PC${ca}`, `PC${cb}`], rows, comments },
  };
}

/** The TSV's comments: method, explained variance, genes used and left out, samples and groups. */
function pcaComments(m: CountMatrix, r: PcaResult, g: SampleGroups | undefined, frame: Frame): string[] {
  const comps = r.explained.map((e, i) => `PC${i + 1} ${(100 * e).toFixed(2)}%`);
  const comments = [
    `source: ${frame.source}`,
    `log2(CPM + 1) per gene, CPM over each sample's column sum in this file; the ${r.genes.length} most variable genes (variance across samples) of ${r.variable} that vary; centred, not scaled; PCA by singular value decomposition (ml-pca)`,
    `explained variance of every component: ${comps.join(", ")}`,
    `genes used: ${r.genes.length}`,
  ];
  if (r.droppedMissing) comments.push(`genes left out for a missing value (NA, empty, non-numeric or negative) in some sample: ${r.droppedMissing}`);
  comments.push(...skippedComment(m));
  if (r.lc.empty.length) comments.push(`samples left out, their counts sum to 0: ${r.lc.empty.join(", ")}`);
  if (m.annotationColumns.length) comments.push(`annotation columns (not samples): ${m.annotationColumns.join(", ")}`);
  if (g) comments.push(g.note + (g.groups.includes(UNASSIGNED) ? `; samples without a group: ${r.samples.filter((_, i) => g.groups[i] === UNASSIGNED).join(", ")} (drawn grey as "${UNASSIGNED}")` : ""));
  return comments;
}
