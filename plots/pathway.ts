/**
 * pathway_map: a WikiPathways diagram (shipped subset, CC0) with the file's genes on it.
 * Input is a gene list or a DE / enrichment table (gene, optional log2 fold change and p);
 * the organism comes from the options or the identifiers; the pathway is the one named, or
 * the one most enriched for the file's significant genes (one-sided hypergeometric test).
 * The GPML layout is scaled into the frame and drawn with the file's fold changes. This module
 * composes data/gene-table.ts, data/enrichment.ts and data/pathway-match.ts →
 * layout/pathway.ts → paint/pathway.ts and writes the TSV: every gene box drawn.
 */
import type { Chart, ChartData, Frame, TableSink } from "./chart.js";
import { choosePathway, type EnrichmentResult, type PathwayChoice } from "./data/enrichment.js";
import { fileGenes, GeneTable, type FileGenes } from "./data/gene-table.js";
import { fmt } from "./data/numbers.js";
import { matchPathway, type PathwayMatch } from "./data/pathway-match.js";
import type { Pathway, PathwayCollection } from "./data/pathways.js";
import { nodeBox, pathwayLayout, type PathwayLayout } from "./layout/pathway.js";
import type { PathwayOpts } from "./options.js";
import { pathwayEdges, pathwayLegend, pathwayNodes, pathwayShapes, pathwayTitle } from "./paint/pathway.js";
import { r2, svgDocument } from "./paint/svg.js";

export function pathwayChart(header: readonly string[], opts: PathwayOpts, frame: Frame, collection: PathwayCollection): TableSink {
  const table = new GeneTable(header, opts, collection);
  return {
    row: (cells) => table.row(cells),
    finish(): Chart {
      const fg = fileGenes(table, opts, collection);
      const choice = choosePathway(table, fg, opts, collection);
      return drawPathway(choice.pathway, table, fg, choice, opts, frame, collection);
    },
  };
}

function drawPathway(p: Pathway, table: GeneTable, fg: FileGenes, choice: PathwayChoice, opts: PathwayOpts, frame: Frame, collection: PathwayCollection): Chart {
  const m = matchPathway(p, table, fg, opts);
  const titleText = frame.title ?? `${p.id} ${p.title} (${fg.organism})`;
  const lay = pathwayLayout(p, m, titleText, frame);
  const body = pathwayShapes(p, lay) + pathwayEdges(p, lay) + pathwayNodes(p, m, fg, lay) + pathwayTitle(lay) + pathwayLegend(lay, m.lim);
  const data: ChartData = {
    header: ["node_label", "node_type", "xref", "file_gene", "log2FoldChange", "pvalue", "highlighted", "x", "y"],
    rows: geneBoxRows(p, m, fg, lay),
    comments: pathwayComments(p, table, fg, choice, m, opts, collection),
  };
  return { svg: svgDocument(lay.W, lay.H, body, titleText), width: lay.W, height: lay.H, data };
}

/** One TSV row per gene box drawn (in GPML order): the node, the file's gene and values, where it is drawn. */
function geneBoxRows(p: Pathway, m: PathwayMatch, fg: FileGenes, lay: PathwayLayout): Array<Array<string | number>> {
  const rows: Array<Array<string | number>> = [];
  for (const n of p.nodes) {
    if (!(n.w > 0 && n.h > 0) || n.type === "Label" || n.type === "Metabolite" || n.type === "Pathway") continue;
    const key = n.genes[0];
    if (!key) continue;
    const g = fg.byKey.get(key);
    const { cx, cy } = nodeBox(n, lay);
    rows.push([n.label, n.type, n.xref ? `${n.xref.db}:${n.xref.id}` : "", g?.raw ?? "", g?.fc ?? "", g?.p ?? "", m.highlightKeys.has(key) ? "yes" : "no", r2(cx), r2(cy)]);
  }
  return rows;
}

/** The TSV's comments: source, pathway, organism, columns, matches, significance and enrichment, fill, rows left out. */
function pathwayComments(p: Pathway, table: GeneTable, fg: FileGenes, choice: PathwayChoice, m: PathwayMatch, opts: PathwayOpts, collection: PathwayCollection): string[] {
  const { header, fcCol, pCol } = table;
  const { organism: org, byKey } = fg;
  const { results, significant, universe } = choice;
  const enr = results.find((r) => r.id === p.id);
  const enrText = (r: EnrichmentResult) => `${r.id} ${r.title}: p = ${fmt(r.p, 3)} (${r.k} of ${r.K} pathway genes significant)`;
  const comments = [
    `WikiPathways (${collection.licence}); ${collection.release}`,
    `pathway: ${p.id} "${p.title}" (${org}), revision ${p.revision ?? "unknown"}${p.commit ? `, GPML at wikipathways-database commit ${p.commit}` : ""}`,
    `organism: ${org} (${fg.why})`,
    `columns: genes ${table.geneColumnNames()}${fcCol !== undefined ? `; log2 fold change ${JSON.stringify(header[fcCol])}` : "; no log2 fold change column"}${pCol !== undefined ? `; p-value ${JSON.stringify(header[pCol])}` : "; no p-value column"}`,
    `matched: ${m.matchedNodes.length} of ${m.geneNodes.length} gene boxes (${m.matchedGenes.length} of ${m.pGenes.size} distinct genes on the pathway) are in the file`,
    pCol !== undefined ? `significant genes: ${significant.size} with ${header[pCol]} < ${opts.threshold_pvalue} (of ${byKey.size} file genes on shipped ${org} pathways)` : `significant genes: all ${significant.size} file genes on shipped ${org} pathways (no p-value column)`,
    `enrichment: one-sided hypergeometric test; universe: ${choice.manyGenes ? `the file's genes that are on shipped ${org} pathways` : `all genes on the shipped ${org} pathways`} (N = ${universe.size}), significant in it n = ${[...significant].filter((k) => universe.has(k)).length}`,
    opts.pathway_id ? `pathway named by pathway_id; its enrichment: ${enr ? enrText(enr) : "n/a"}` : `best-enriched pathway: ${enrText(results[0]!)}`,
    ...(opts.pathway_id ? [] : [`next: ${results.slice(1, 3).map(enrText).join("; ") || "none"}`]),
  ];
  if (m.colorFc && m.anyFc) comments.push(`fill: log2 fold change on a symmetric RdBu scale from −${fmt(m.lim)} (blue) to +${fmt(m.lim)} (red); genes without a fold change are pale yellow`);
  else if (fcCol !== undefined && !opts.color_by_fc) comments.push("fill: color_by_fc is false; genes in the file are pale yellow");
  if (table.emptyGene) comments.push(`skipped: ${table.emptyGene} rows without a gene identifier`);
  if (fg.unmatched) comments.push(`not on any shipped ${org} pathway: ${fg.unmatched} rows`);
  if (fg.naFc) comments.push(`NA/empty/non-numeric log2 fold change: ${fg.naFc} rows of matched genes`);
  if (fg.naP) comments.push(`NA/empty/non-numeric p-value: ${fg.naP} rows of matched genes`);
  if (m.highlightMissing.length) comments.push(`highlight_genes not on this pathway: ${m.highlightMissing.join(", ")}`);
  return comments;
}
