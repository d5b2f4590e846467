/**
 * Big inputs for the chart benchmarks, made here (deterministic: a seeded PRNG, the same bytes
 * on every run), never committed:
 * - `deseq2-20000.csv`: a DESeq2-like results table of 20,000 genes written the way R's
 *   write.csv writes one (row names under an empty first header cell, strings quoted, NA):
 *   baseMean, log2FoldChange, lfcSE, stat, pvalue, padj (Benjamini–Hochberg); about 10% of the
 *   genes carry a real change, about 6% have padj NA (independent filtering).
 * - `gwas-1000000.tsv`: GWAS summary statistics of 1,000,000 SNPs on chr1…22 and X (SNPs per
 *   chromosome in proportion to the GRCh38 lengths, positions sorted), p uniform under the
 *   null with eight association peaks, four of them genome-wide significant (the widest
 *   spans more than one 500 kb locus).
 * - `counts-1000x50.tsv`: an RNA-seq count matrix of 1,000 genes × 50 samples (gene_id, then
 *   one integer column per sample, as featureCounts / tximport users write it): three sample
 *   groups (17, 17 and 16 samples, interleaved in the file so clustering has to reorder them),
 *   library sizes varying ±30 %, a third of the genes in four modules that move with the
 *   groups, gamma–Poisson (negative binomial) noise with dispersion 0.1.
 *
 * Usage: tsx bench/charts-inputs.ts <output-folder> [--snps N] [--genes N] [--matrix-genes N] [--samples N]
 */
import { mkdirSync, createWriteStream, type WriteStream } from "node:fs";
import { join } from "node:path";

/** mulberry32: a small, fast, seeded PRNG of 32-bit unsigned integers (the benches' one generator). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

/** The same generator, uniform in [0, 1). */
export function prng(seed: number): () => number {
  const next = mulberry32(seed);
  return () => next() / 4294967296;
}

const normal = (rand: () => number) => {
  let u = 0;
  while (u === 0) u = rand();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rand());
};

/** Two-sided normal p-value of z (erfc by Numerical Recipes' Chebyshev fit; relative error < 1.2e-7). */
function twoSidedP(z: number): number {
  const x = Math.abs(z) / Math.SQRT2;
  const t = 1 / (1 + 0.5 * x);
  const erfc = t * Math.exp(-x * x - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return Math.min(1, erfc);
}

async function write(out: WriteStream, lines: Iterable<string>): Promise<void> {
  let buf = "";
  for (const l of lines) {
    buf += l;
    if (buf.length > 1 << 20) { if (!out.write(buf)) await new Promise<void>((r) => out.once("drain", () => r())); buf = ""; }
  }
  out.write(buf);
  await new Promise<void>((res, rej) => out.end((e?: Error | null) => (e ? rej(e) : res())));
}

export async function writeDeseq2(path: string, genes = 20_000, seed = 20240601): Promise<void> {
  const rand = prng(seed);
  const rows = Array.from({ length: genes }, (_, i) => {
    const baseMean = Math.exp(normal(rand) * 2 + 4);
    const lfcSE = 0.08 + 1.2 / Math.sqrt(baseMean + 1);
    const de = rand() < 0.1;
    const lfc = (de ? (rand() < 0.5 ? -1 : 1) * (0.8 + Math.abs(normal(rand)) * 1.5) : 0) + normal(rand) * lfcSE;
    const stat = lfc / lfcSE;
    const pvalue = twoSidedP(stat);
    const filtered = baseMean < 3 && rand() < 0.9; // DESeq2's independent filtering: padj NA
    return { id: `ENSG${String(100000 + i * 7).padStart(11, "0")}`, baseMean, lfc, lfcSE, stat, pvalue, filtered };
  });
  // Benjamini–Hochberg over the genes that were not filtered.
  const tested = rows.filter((r) => !r.filtered).sort((a, b) => a.pvalue - b.pvalue);
  const padj = new Map<string, number>();
  let running = 1;
  for (let j = tested.length - 1; j >= 0; j--) {
    running = Math.min(running, (tested[j]!.pvalue * tested.length) / (j + 1));
    padj.set(tested[j]!.id, Math.min(1, running));
  }
  const num = (v: number) => String(+v.toPrecision(7));
  function* lines() {
    yield `"","baseMean","log2FoldChange","lfcSE","stat","pvalue","padj"\n`;
    for (const r of rows) {
      const q = padj.get(r.id);
      yield `"${r.id}",${num(r.baseMean)},${num(r.lfc)},${num(r.lfcSE)},${num(r.stat)},${num(r.pvalue)},${q === undefined ? "NA" : num(q)}\n`;
    }
  }
  await write(createWriteStream(path), lines());
}

/** GRCh38 chromosome lengths (Mb, rounded). */
const CHROMS: Array<[string, number]> = [
  ["1", 248.96], ["2", 242.19], ["3", 198.3], ["4", 190.21], ["5", 181.54], ["6", 170.81], ["7", 159.35], ["8", 145.14],
  ["9", 138.39], ["10", 133.8], ["11", 135.09], ["12", 133.28], ["13", 114.36], ["14", 107.04], ["15", 101.99], ["16", 90.34],
  ["17", 83.26], ["18", 80.37], ["19", 58.62], ["20", 64.44], ["21", 46.71], ["22", 50.82], ["X", 156.04],
];

export async function writeGwas(path: string, snps = 1_000_000, seed = 7): Promise<void> {
  const rand = prng(seed);
  const total = CHROMS.reduce((s, [, l]) => s + l, 0);
  // Peaks: chromosome, position (Mb), −log10 p at the lead SNP, width (Mb).
  const peaks: Array<[string, number, number, number]> = [
    ["2", 60.5, 14, 0.3], ["6", 32.6, 22, 0.8], ["10", 112.9, 9.5, 0.25], ["16", 53.8, 6.5, 0.2],
    ["3", 12.3, 5.6, 0.15], ["12", 70.1, 6, 0.2], ["19", 45.4, 11, 0.15], ["X", 67.5, 5.4, 0.2],
  ];
  function* lines() {
    yield "SNP\tCHR\tBP\tA1\tA2\tBETA\tSE\tP\n";
    let id = 1;
    const counts = CHROMS.map(([, mb]) => Math.floor((snps * mb) / total));
    counts[0]! += snps - counts.reduce((s, c) => s + c, 0);
    for (const [ci, [chr, mb]] of CHROMS.entries()) {
      const count = counts[ci]!;
      const len = Math.round(mb * 1e6);
      const pos = new Float64Array(count);
      for (let i = 0; i < count; i++) pos[i] = 1 + Math.floor(rand() * (len - 1));
      pos.sort();
      const here = peaks.filter((p) => p[0] === chr);
      for (let i = 0; i < count; i++) {
        let p = rand();
        for (const [, at, top, width] of here) {
          const d = Math.abs(pos[i]! / 1e6 - at);
          if (d < 3 * width) { const lp = top * Math.exp(-((d / width) ** 2)) * (0.6 + 0.4 * rand()); p = Math.min(p, 10 ** -lp); }
        }
        const se = 0.01 + rand() * 0.03;
        const z = Math.max(0.01, Math.sqrt(2) * Math.abs(normal(rand)) + 0.01);
        const beta = (rand() < 0.5 ? -1 : 1) * z * se;
        const [a1, a2] = ["AC", "AG", "CT", "GT", "AT", "CG"][Math.floor(rand() * 6)]!.split("");
        yield `rs${id++}\t${chr}\t${pos[i]}\t${a1}\t${a2}\t${beta.toFixed(5)}\t${se.toFixed(5)}\t${p.toPrecision(4)}\n`;
      }
    }
  }
  await write(createWriteStream(path), lines());
}

/** A gamma(shape k ≥ 1, scale 1) variate: Marsaglia–Tsang. */
function gamma(rand: () => number, k: number): number {
  const d = k - 1 / 3, c = 1 / Math.sqrt(9 * d);
  for (;;) {
    let x: number, v: number;
    do { x = normal(rand); v = 1 + c * x; } while (v <= 0);
    v = v * v * v;
    const u = rand();
    if (u < 1 - 0.0331 * x ** 4 || Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v;
  }
}

/** A Poisson variate of mean mu: Knuth's product below 30, a rounded normal above (|error| ≪ the noise). */
function poisson(rand: () => number, mu: number): number {
  if (mu < 30) {
    const l = Math.exp(-mu);
    let k = 0, p = rand();
    while (p > l) { k++; p *= rand(); }
    return k;
  }
  return Math.max(0, Math.round(mu + Math.sqrt(mu) * normal(rand)));
}

export async function writeCounts(path: string, genes = 1_000, samples = 50, seed = 424242): Promise<void> {
  const rand = prng(seed);
  const groups = 3, dispersion = 0.1;
  const group = Array.from({ length: samples }, (_, j) => j % groups); // interleaved: A B C A B C …
  const names = group.map((g, j) => `${"ABC"[g]}${String(Math.floor(j / groups) + 1).padStart(2, "0")}`);
  const libSize = Array.from({ length: samples }, () => 0.7 + 0.6 * rand());
  const modules = 4;
  // Module effects (log2 fold) per group: each module up in one group and down in another.
  const effect = Array.from({ length: modules }, (_, m) => Array.from({ length: groups }, (_, g) => (g === m % groups ? 1.6 : g === (m + 1) % groups ? -1.2 : 0) * (0.8 + 0.4 * rand())));
  function* lines() {
    yield `gene_id\t${names.join("\t")}\n`;
    for (let i = 0; i < genes; i++) {
      const base = Math.exp(normal(rand) * 1.5 + 5.5);
      const module = rand() < 1 / 3 ? Math.floor(rand() * modules) : -1;
      const scale = 0.6 + 0.8 * rand();
      const cells: number[] = [];
      for (let j = 0; j < samples; j++) {
        const lfc = module >= 0 ? effect[module]![group[j]!]! * scale : 0;
        const mu = base * libSize[j]! * 2 ** lfc;
        const k = 1 / dispersion;
        cells.push(poisson(rand, mu * gamma(rand, k) / k));
      }
      yield `ENSG${String(200000 + i * 13).padStart(11, "0")}\t${cells.join("\t")}\n`;
    }
  }
  await write(createWriteStream(path), lines());
}

async function main() {
  const args = process.argv.slice(2);
  const dir = args.find((a) => !a.startsWith("--"));
  if (!dir) { console.error("usage: tsx bench/charts-inputs.ts <output-folder> [--snps N] [--genes N] [--matrix-genes N] [--samples N]"); process.exit(2); }
  const opt = (name: string, def: number) => { const i = args.indexOf(name); return i >= 0 ? Number(args[i + 1]) : def; };
  mkdirSync(dir, { recursive: true });
  const genes = opt("--genes", 20_000), snps = opt("--snps", 1_000_000);
  const deseq = join(dir, `deseq2-${genes}.csv`), gwas = join(dir, `gwas-${snps}.tsv`);
  await writeDeseq2(deseq, genes);
  await writeGwas(gwas, snps);
  const mGenes = opt("--matrix-genes", 1_000), samples = opt("--samples", 50);
  const counts = join(dir, `counts-${mGenes}x${samples}.tsv`);
  await writeCounts(counts, mGenes, samples);
  console.log(`${deseq}\n${gwas}\n${counts}`);
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
