/**
 * Which pathway a gene table is about: every shipped pathway of the organism tested for
 * over-representation of the file's significant genes (one-sided hypergeometric test, exact
 * terms summed in log space), and the pathway drawn — the one named, else the best.
 */
import { ChartError } from "../chart.js";
import type { PathwayOpts } from "../options.js";
import type { FileGenes, GeneTable } from "./gene-table.js";
import { collectionUniverse, pathwayGenes, type Organism, type Pathway, type PathwayCollection } from "./pathways.js";

const logFact: number[] = [0];
function logFactorial(n: number): number {
  for (let i = logFact.length; i <= n; i++) logFact.push(logFact[i - 1]! + Math.log(i));
  return logFact[n]!;
}
const logChoose = (a: number, b: number) => logFactorial(a) - logFactorial(b) - logFactorial(a - b);

/**
 * P(X ≥ k) for X ~ Hypergeometric(population N, K successes in it, n draws): the chance of
 * drawing at least k pathway genes among n significant ones. Exact terms summed in log space.
 */
export function hypergeometricSf(k: number, N: number, K: number, n: number): number {
  if (![k, N, K, n].every((v) => Number.isInteger(v) && v >= 0) || K > N || n > N) throw new RangeError(`hypergeometricSf: need integers 0 ≤ K, n ≤ N (got k=${k}, N=${N}, K=${K}, n=${n})`);
  const lo = Math.max(0, n - (N - K)), hi = Math.min(K, n);
  if (k <= lo) return 1;
  if (k > hi) return 0;
  const base = logChoose(N, n);
  const terms: number[] = [];
  for (let i = k; i <= hi; i++) terms.push(logChoose(K, i) + logChoose(N - K, n - i) - base);
  const m = Math.max(...terms);
  let s = 0;
  for (const t of terms) s += Math.exp(t - m);
  return Math.min(1, Math.exp(m) * s);
}

export interface EnrichmentResult { id: string; title: string; k: number; K: number; n: number; N: number; p: number }

/** Every pathway of an organism tested for over-representation of `significant` in `universe`, best first. */
export function enrichment(collection: PathwayCollection, organism: Organism, significant: ReadonlySet<string>, universe: ReadonlySet<string>): EnrichmentResult[] {
  const sig = [...significant].filter((g) => universe.has(g));
  const N = universe.size, n = sig.length;
  const out: EnrichmentResult[] = [];
  for (const p of collection.pathways) {
    if (p.organism !== organism) continue;
    const genes = pathwayGenes(p);
    let K = 0, k = 0;
    for (const g of genes) if (universe.has(g)) K++;
    for (const g of sig) if (genes.has(g)) k++;
    out.push({ id: p.id, title: p.title, k, K, n, N, p: N > 0 ? hypergeometricSf(k, N, K, n) : 1 });
  }
  return out.sort((a, b) => a.p - b.p || b.k - a.k || a.id.localeCompare(b.id, "en", { numeric: true }));
}

export interface PathwayChoice {
  /** A DE table of 200 genes or more is its own universe; a short list is tested against every gene on the shipped pathways. */
  manyGenes: boolean;
  universe: Set<string>;
  /** The file's significant genes (p below the threshold; every gene without a p-value column). */
  significant: Set<string>;
  /** Every pathway of the organism, best first. */
  results: EnrichmentResult[];
  pathway: Pathway;
}

/** The enrichment of every pathway, and the pathway to draw: `pathway_id`'s, else the most enriched. */
export function choosePathway(table: GeneTable, fg: FileGenes, opts: PathwayOpts, collection: PathwayCollection): PathwayChoice {
  const { pCol } = table;
  const { organism, shipped, byKey } = fg;
  const manyGenes = pCol !== undefined && table.rows.length >= 200;
  const universe = manyGenes ? new Set(byKey.keys()) : collectionUniverse(collection, organism);
  const significant = new Set<string>();
  for (const [k, g] of byKey) if (pCol === undefined || (g.p !== undefined && g.p < opts.threshold_pvalue)) significant.add(k);
  const results = enrichment(collection, organism, significant, universe);
  let pathway: Pathway;
  if (opts.pathway_id) {
    const found = shipped.find((p) => p.id === opts.pathway_id);
    if (!found) {
      const other = collection.pathways.find((p) => p.id === opts.pathway_id);
      throw new ChartError(`pathway ${opts.pathway_id} is not among the shipped ${organism} pathways${other ? ` (it is a ${other.organism} pathway: set organism to ${other.organism})` : ""}; the ${organism} pathways are: ${shipped.map((p) => `${p.id} (${p.title})`).join(", ")}`);
    }
    pathway = found;
  } else {
    const best = results[0];
    if (!best || best.k === 0) {
      throw new ChartError(significant.size === 0
        ? `no gene in the file is significant (p < ${opts.threshold_pvalue} in column "${table.header[pCol ?? 0]}") and on a shipped ${organism} pathway, so no pathway can be chosen; name one with pathway_id (${shipped.map((p) => p.id).join(", ")})`
        : `none of the file's significant genes is on a shipped ${organism} pathway; name one with pathway_id (${shipped.map((p) => p.id).join(", ")})`);
    }
    pathway = shipped.find((p) => p.id === best.id)!;
  }
  return { manyGenes, universe, significant, results, pathway };
}
