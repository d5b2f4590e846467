/**
 * The shipped WikiPathways collection (data/wikipathways/, CC0): the compact form the
 * converter (scripts/wikipathways/convert.ts) writes from GPML, and the pure helpers that
 * match a file's gene identifiers — symbols, Entrez ids, Ensembl ids with or without a
 * version suffix — to the genes drawn on the pathways.
 */

export type Organism = "human" | "mouse";

export interface PathwayNode {
  id: string;
  label: string;
  /** GPML DataNode type (GeneProduct, Protein, Rna, Metabolite, Pathway, …) or "Label" for GPML Labels. */
  type: "GeneProduct" | "Protein" | "Rna" | "Metabolite" | "Pathway" | "Label" | "Group" | string;
  /** Centre and size on the GPML board (GPML units ≈ px at 100 %). */
  x: number; y: number; w: number; h: number;
  xref?: { db: string; id: string };
  /** Normalized gene keys (see `geneKey`) this node stands for; empty for metabolites, labels. */
  genes: string[];
  /** Drawing hints kept from GPML: bold text, font size, text colour (hex without #). */
  bold?: boolean;
  fontSize?: number;
  color?: string;
}

export interface PathwayEdge {
  from?: string;
  to?: string;
  /** The polyline as drawn (elbow connectors already routed), in board units. */
  points: Array<[number, number]>;
  /** GPML ArrowHead at the end: Arrow, TBar, mim-conversion, mim-catalysis, mim-inhibition, … or "Line". */
  arrow: string;
  /** An ArrowHead at the start, when GPML gives one. */
  arrowStart?: string;
  dashed?: boolean;
}

export interface PathwayShape {
  /** GPML ShapeType (Rectangle, Oval, RoundedRectangle, Mitochondria, Cell, …) or "Complex" for a complex's outline. */
  shape: string;
  x: number; y: number; w: number; h: number;
  label?: string;
  color?: string;
  thick?: boolean;
}

export interface Pathway {
  id: string;
  title: string;
  organism: Organism;
  /** GPML Version attribute, e.g. WP254_r137122. */
  revision?: string;
  /** Commit of wikipathways/wikipathways-database the GPML was read at. */
  commit?: string;
  width: number;
  height: number;
  nodes: PathwayNode[];
  edges: PathwayEdge[];
  shapes?: PathwayShape[];
}

/** Normalized identifier (see `normalizeId`) → gene key. */
export type IdMap = Record<string, string>;

export interface PathwayCollection {
  release: string;
  source: string;
  licence: string;
  pathways: Pathway[];
  ids: { human: IdMap; mouse: IdMap };
}

/** Node types that stand for a gene or its product (and so can match a file's genes). */
export const GENE_TYPES: ReadonlySet<string> = new Set(["GeneProduct", "Protein", "Rna", "Unknown", ""]);

/**
 * An identifier as the maps store it: trimmed, upper-cased, an Ensembl version suffix
 * (`ENSG00000141510.17`) and a database prefix (`ncbigene:`, `entrez:`, `ensembl:`) dropped.
 */
export function normalizeId(raw: string): string {
  let s = raw.trim().replace(/^"|"$/g, "").toUpperCase();
  s = s.replace(/^(NCBIGENE|ENTREZ|ENTREZGENE|ENSEMBL|HGNC\.SYMBOL|SYMBOL):/, "");
  const ens = /^(ENS[A-Z]*[GTP]\d{6,})\.\d+$/.exec(s);
  if (ens) s = ens[1]!;
  return s;
}

/** The gene key an identifier maps to for an organism, if any. */
export function geneKeyOf(ids: IdMap, raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  const n = normalizeId(raw);
  if (!n || n === "NA") return undefined;
  return Object.prototype.hasOwnProperty.call(ids, n) ? ids[n] : undefined;
}

/** The distinct gene keys drawn on a pathway. */
export function pathwayGenes(p: Pathway): Set<string> {
  const s = new Set<string>();
  for (const n of p.nodes) for (const g of n.genes) s.add(g);
  return s;
}

/** Every gene key on the shipped pathways of one organism. */
export function collectionUniverse(c: PathwayCollection, organism: Organism): Set<string> {
  const s = new Set<string>();
  for (const p of c.pathways) if (p.organism === organism) for (const g of pathwayGenes(p)) s.add(g);
  return s;
}

/**
 * Build an organism's id map from its pathways' gene nodes: each node's label (symbol),
 * its Xref id (Entrez or Ensembl, as GPML gives it) and any aliases (old symbol → current
 * symbol, or current symbol → the label used on the pathway) all lead to one key. Nodes that
 * share an Xref id or a label share a key; the key is the upper-cased label first seen.
 * Fills in each node's `genes`.
 */
export function buildIdMap(pathways: readonly Pathway[], aliases: Readonly<Record<string, readonly string[]>> = {}): IdMap {
  const ids: IdMap = {};
  const set = (k: string, key: string) => { if (k && !(k in ids)) ids[k] = key; };
  for (const p of pathways) {
    for (const n of p.nodes) {
      if (!GENE_TYPES.has(n.type)) { n.genes = []; continue; }
      const label = normalizeId(n.label.replace(/\s+/g, " "));
      const xid = n.xref && n.xref.id ? normalizeId(n.xref.id) : "";
      if (!label && !xid) { n.genes = []; continue; }
      const key = (xid && ids[xid]) || (label && ids[label]) || label || xid;
      n.genes = [key];
      set(label, key);
      set(xid, key);
      set(key, key);
      for (const a of aliases[label] ?? []) set(normalizeId(a), key);
    }
  }
  return ids;
}
