/**
 * The file's genes on the pathway drawn: which gene boxes are in the file, which genes are
 * highlighted (and which asked-for ones are not on this pathway), whether boxes are filled by
 * fold change and the symmetric limit of that scale.
 */
import type { PathwayOpts } from "../options.js";
import type { FileGenes, GeneTable } from "./gene-table.js";
import { niceCeil } from "./numbers.js";
import { GENE_TYPES, geneKeyOf, normalizeId, pathwayGenes, type Pathway, type PathwayNode } from "./pathways.js";

export interface PathwayMatch {
  /** Fill gene boxes by fold change (asked for, and the file has a fold-change column). */
  colorFc: boolean;
  highlightKeys: Set<string>;
  /** highlight_genes that are not on this pathway. */
  highlightMissing: string[];
  /** The distinct genes on the pathway, and those of them in the file. */
  pGenes: Set<string>;
  matchedGenes: string[];
  /** Gene boxes, and those whose gene is in the file. */
  geneNodes: PathwayNode[];
  matchedNodes: PathwayNode[];
  /** The fold-change scale runs −lim…+lim. */
  lim: number;
  /** Some matched box has a fold change; some has none (or fold change is not drawn); the pathway has metabolites. */
  anyFc: boolean;
  hasNeutral: boolean;
  hasMetab: boolean;
}

export function matchPathway(p: Pathway, table: GeneTable, fg: FileGenes, opts: PathwayOpts): PathwayMatch {
  const { byKey } = fg;
  const colorFc = opts.color_by_fc && table.fcCol !== undefined;
  const highlightKeys = new Set<string>();
  const highlightMissing: string[] = [];
  const pGenes = pathwayGenes(p);
  for (const h of opts.highlight_genes) {
    const k = geneKeyOf(fg.ids, h) ?? normalizeId(h);
    if (pGenes.has(k)) highlightKeys.add(k); else highlightMissing.push(h);
  }
  // fold-change scale: symmetric around 0
  const geneNodes = p.nodes.filter((n) => GENE_TYPES.has(n.type) && n.genes.length);
  let maxAbs = 0;
  if (colorFc) for (const n of geneNodes) { const g = byKey.get(n.genes[0]!); if (g?.fc !== undefined) maxAbs = Math.max(maxAbs, Math.abs(g.fc)); }
  const lim = maxAbs > 0 ? niceCeil(maxAbs) : 1;
  const matchedNodes = geneNodes.filter((n) => byKey.has(n.genes[0]!));
  const matchedGenes = [...pGenes].filter((g) => byKey.has(g));
  const hasMetab = p.nodes.some((n) => n.type === "Metabolite");
  const hasNeutral = matchedNodes.some((n) => !colorFc || byKey.get(n.genes[0]!)?.fc === undefined);
  const anyFc = colorFc && matchedNodes.some((n) => byKey.get(n.genes[0]!)?.fc !== undefined);
  return { colorFc, highlightKeys, highlightMissing, pGenes, matchedGenes, geneNodes, matchedNodes, lim, anyFc, hasNeutral, hasMetab };
}
