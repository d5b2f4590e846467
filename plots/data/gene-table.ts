/**
 * The gene table a pathway map reads — a gene list or a DE / enrichment table: its gene
 * column(s) (symbols, Entrez or Ensembl ids, a header line that is itself a gene), optional
 * log2 fold change and p-value columns; the organism (given, or told from the identifiers);
 * and the file's genes keyed as the shipped pathways key them (one record per gene, the row
 * with the smallest p winning).
 */
import { ChartError } from "../chart.js";
import type { PathwayOpts } from "../options.js";
import { findColumn } from "./columns.js";
import { numberOf } from "./numbers.js";
import { geneKeyOf, normalizeId, type IdMap, type Organism, type Pathway, type PathwayCollection } from "./pathways.js";

const GENE_COLUMNS = ["gene_name", "gene_id", "symbol", "gene", "Gene", "gene_symbol", "Symbol", "SYMBOL", "GeneID", "gene_ids", "ensembl_gene_id", "entrez_id", "EntrezID"];
const FC_COLUMNS = ["log2FoldChange", "log2fc", "logFC", "log2FC", "avg_log2FC", "log2_fold_change"];
const P_COLUMNS = ["padj", "pvalue", "P.Value", "adj.P.Val", "FDR", "p_val_adj", "PValue", "qvalue", "p_value"];

/** A column named by an option (it must exist), else the first common name present, else none. */
function columnIfAny(header: readonly string[], requested: string | undefined, candidates: readonly string[], option: string, what: string): number | undefined {
  if (requested !== undefined) return findColumn(header, requested, candidates, option, what);
  try { return findColumn(header, undefined, candidates, option, what); } catch { return undefined; }
}

/** A gene of the file: the identifier as written, its fold change and p. */
export interface GeneRow { raw: string; fc: number | undefined; p: number | undefined }

const looksMouseSymbol = (v: string) => /^[A-Z][a-z0-9][A-Za-z0-9.-]*$/.test(v) && /[a-z]/.test(v);
const looksHumanSymbol = (v: string) => /^[A-Z0-9][A-Z0-9.-]*$/.test(v) && /[A-Z]/.test(v) && !/^ENS/.test(v);

/** Organism from the identifiers: Ensembl prefixes, then which map matches more (symbols by their case). */
function detectOrganism(values: readonly string[], ids: { human: IdMap; mouse: IdMap }): { organism: Organism; why: string } {
  let ensH = 0, ensM = 0, h = 0, m = 0;
  for (const v of values) {
    const n = normalizeId(v);
    if (/^ENSMUSG\d/.test(n)) ensM++; else if (/^ENSG\d/.test(n)) ensH++;
    const inH = geneKeyOf(ids.human, v) !== undefined, inM = geneKeyOf(ids.mouse, v) !== undefined;
    if (inH && !looksMouseSymbol(v.trim())) h++;
    if (inM && !looksHumanSymbol(v.trim())) m++;
  }
  if (ensH + ensM > 0 && ensH + ensM >= values.length / 2) return ensM > ensH ? { organism: "mouse", why: `${ensM} ENSMUSG identifiers` } : { organism: "human", why: `${ensH} ENSG identifiers` };
  // RIKEN clone (1500015O10Rik) and Gm12345 gene names exist only in mouse, in any case
  const mouseNames = values.filter((v) => /^([0-9A-Z]{4,}RIK|GM\d{2,})$/i.test(v.trim())).length;
  const humanOnly = values.filter((v) => geneKeyOf(ids.human, v) !== undefined && geneKeyOf(ids.mouse, v) === undefined).length;
  if (mouseNames >= 2 && mouseNames > humanOnly) return { organism: "mouse", why: `${mouseNames} RIKEN/Gm mouse gene names such as ${values.find((v) => /RIK$|^GM\d/i.test(v.trim()))!.trim()}` };
  if (m > h) return { organism: "mouse", why: `${m} identifiers match mouse pathway genes (${h} human)` };
  if (h > 0) return { organism: "human", why: `${h} identifiers match human pathway genes (${m} mouse)` };
  const mouseCase = values.filter((v) => looksMouseSymbol(v.trim())).length;
  return mouseCase > values.length / 2 ? { organism: "mouse", why: "symbols are capitalized as mouse symbols are" } : { organism: "human", why: "no identifier matched either organism's pathways; human assumed" };
}

/** The table read so far: its columns, and each row's gene identifiers (one per gene column), fold change and p. */
export class GeneTable {
  readonly geneCols: number[];
  readonly fcCol: number | undefined;
  readonly pCol: number | undefined;
  readonly rows: Array<{ genes: string[]; fc: number | undefined; p: number | undefined }> = [];
  emptyGene = 0;

  constructor(readonly header: readonly string[], opts: PathwayOpts, collection: PathwayCollection) {
    const lowerHeader = header.map((h) => h.toLowerCase());
    if (opts.gene_col !== undefined) this.geneCols = [findColumn(header, opts.gene_col, GENE_COLUMNS, "gene_col", "gene")];
    else {
      this.geneCols = [];
      for (const c of GENE_COLUMNS) { const i = lowerHeader.indexOf(c.toLowerCase()); if (i >= 0 && !this.geneCols.includes(i)) this.geneCols.push(i); }
      if (!this.geneCols.length) this.geneCols = [0];
    }
    this.fcCol = columnIfAny(header, opts.log2fc_col, FC_COLUMNS, "log2fc_col", "log2 fold change");
    this.pCol = columnIfAny(header, opts.pvalue_col, P_COLUMNS, "pvalue_col", "p-value");
    if (this.geneCols.some((g) => g === this.fcCol || g === this.pCol)) throw new ChartError(`the gene column "${header[this.geneCols[0]!]}" is also the fold-change or p-value column; name the gene column with option gene_col`);
    // A one-column gene list without a header: its first line is a gene, not a column name.
    const known = [...GENE_COLUMNS, ...FC_COLUMNS, ...P_COLUMNS].map((c) => c.toLowerCase());
    const headerIsGene = header.length === 1 && opts.gene_col === undefined && !known.includes(lowerHeader[0] ?? "") && (geneKeyOf(collection.ids.human, header[0]) !== undefined || geneKeyOf(collection.ids.mouse, header[0]) !== undefined);
    if (headerIsGene) this.row(header);
  }

  row(cells: readonly string[]): void {
    const genes = this.geneCols.map((i) => (cells[i] ?? "").trim()).filter((g) => g !== "" && g.toUpperCase() !== "NA");
    if (!genes.length) { this.emptyGene++; return; }
    this.rows.push({ genes, fc: this.fcCol === undefined ? undefined : numberOf(cells[this.fcCol]), p: this.pCol === undefined ? undefined : numberOf(cells[this.pCol]) });
  }

  /** The gene column(s) as the messages name them. */
  geneColumnNames(): string {
    return this.geneCols.map((i) => JSON.stringify(this.header[i] ?? "")).join(" or ");
  }
}

export interface FileGenes {
  organism: Organism;
  /** Why this organism: "given", or what in the identifiers said so. */
  why: string;
  ids: IdMap;
  /** The shipped pathways of the organism. */
  shipped: Pathway[];
  /** The file's genes by gene key. */
  byKey: Map<string, GeneRow>;
  /** Rows whose gene is on no shipped pathway, and matched rows without a fold change or p. */
  unmatched: number;
  naFc: number;
  naP: number;
}

/** The organism and the file's genes keyed; no gene identifier, or none on a shipped pathway, is the user's mistake. */
export function fileGenes(table: GeneTable, opts: PathwayOpts, collection: PathwayCollection): FileGenes {
  const { rows } = table;
  if (!rows.length) throw new ChartError("the file holds no gene identifiers (the gene column is empty)");
  const firstIds = rows.map((r) => r.genes[0]!);
  const det = opts.organism ? { organism: opts.organism, why: "given" } : detectOrganism(firstIds, collection.ids);
  const organism = det.organism;
  const ids = collection.ids[organism];
  const shipped = collection.pathways.filter((p) => p.organism === organism);
  if (!shipped.length) throw new ChartError(`no ${organism} pathways are shipped`);
  const { byKey, unmatched, naFc, naP } = keyGenes(table, ids);
  if (byKey.size === 0) {
    const examples = [...new Set(firstIds)].slice(0, 3).join(", ");
    throw new ChartError(`none of the file's ${rows.length} gene identifiers (column ${table.geneColumnNames()}, e.g. ${examples}) is a gene on the shipped ${organism} pathways (${shipped.map((p) => `${p.id} ${p.title}`).join(", ")}); genes are matched by symbol, Entrez id or Ensembl id`
      + (det.why === "given" || /ENS/.test(det.why) ? "" : `; the organism ${organism} was detected from the identifiers (${det.why}): set organism if that is wrong`));
  }
  return { organism, why: det.why, ids, shipped, byKey, unmatched, naFc, naP };
}

/** The file's genes, one record per gene key (the row with the smallest p wins). */
function keyGenes(table: GeneTable, ids: IdMap): { byKey: Map<string, GeneRow>; unmatched: number; naFc: number; naP: number } {
  const byKey = new Map<string, GeneRow>();
  let unmatched = 0, naFc = 0, naP = 0;
  for (const r of table.rows) {
    let key: string | undefined, raw = "";
    for (const g of r.genes) { key = geneKeyOf(ids, g); if (key) { raw = g; break; } }
    if (!key) { unmatched++; continue; }
    if (table.fcCol !== undefined && r.fc === undefined) naFc++;
    if (table.pCol !== undefined && r.p === undefined) naP++;
    const prev = byKey.get(key);
    if (!prev || (r.p !== undefined && (prev.p === undefined || r.p < prev.p))) byKey.set(key, { raw, fc: r.fc, p: r.p });
  }
  return { byKey, unmatched, naFc, naP };
}
