/**
 * A known answer for variant-calling tests: a random 20 kb reference (mulberry32, seeded —
 * every run is the same, and with no repeats, so every read maps uniquely), a diploid sample
 * made from it with SNVs planted at known places (every third one heterozygous, the rest
 * homozygous), and paired reads simulated from the sample's two haplotypes with wgsim
 * (Debian samtools) with no further mutations, only sequencing errors. Written into `dir`.
 */
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface PlantedSnv { pos: number; ref: string; alt: string; gt: "0/1" | "1/1" }
export interface PlantedSample { reference: string; reads1: string; reads2: string; snvs: PlantedSnv[]; pairs: number }

function mulberry32(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const fasta = (seq: string[]) => `>chr1\n${seq.join("").match(/.{1,60}/g)?.join("\n")}\n`;

/** wgsim pairs of one haplotype, without mutations of its own (-r 0 -R 0 -X 0). */
function wgsim(dir: string, haplotype: string, pairs: number, seed: number, r1: string, r2: string): void {
  const r = spawnSync("wgsim", ["-N", String(pairs), "-1", "100", "-2", "100", "-r", "0", "-R", "0", "-X", "0", "-S", String(seed), haplotype, r1, r2], { cwd: dir, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`wgsim failed (${r.status}): ${r.stderr}`);
}

/** `snvs` SNVs, one in each 1.5 kb window from 800 on; `pairs` read pairs in all (half from each haplotype). */
export function plantedSample(dir: string, opts: { seed: number; snvs?: number; pairs?: number }): PlantedSample {
  const { seed, snvs: count = 12, pairs = 3000 } = opts;
  const rand = mulberry32(seed);
  const ref = Array.from({ length: 20_000 }, () => "ACGT"[Math.floor(rand() * 4)] as string);
  const [h1, h2] = [[...ref], [...ref]];
  const snvs: PlantedSnv[] = [];
  for (let i = 0; i < count; i++) {
    const pos = 800 + i * 1500 + Math.floor(rand() * 500);
    const base = ref[pos - 1] as string;
    const alt = "ACGT".replace(base, "")[Math.floor(rand() * 3)] as string;
    const het = i % 3 === 2;
    h1[pos - 1] = alt;
    if (!het) h2[pos - 1] = alt;
    snvs.push({ pos, ref: base, alt, gt: het ? "0/1" : "1/1" });
  }
  writeFileSync(join(dir, "ref.fa"), fasta(ref));
  writeFileSync(join(dir, "h1.fa"), fasta(h1));
  writeFileSync(join(dir, "h2.fa"), fasta(h2));
  wgsim(dir, "h1.fa", pairs / 2, seed + 1, "h1_1.fq", "h1_2.fq");
  wgsim(dir, "h2.fa", pairs / 2, seed + 2, "h2_1.fq", "h2_2.fq");
  const cat = (a: string, b: string) => Buffer.concat([readFileSync(join(dir, a)), readFileSync(join(dir, b))]);
  writeFileSync(join(dir, "r1.fq"), cat("h1_1.fq", "h2_1.fq"));
  writeFileSync(join(dir, "r2.fq"), cat("h1_2.fq", "h2_2.fq"));
  return { reference: join(dir, "ref.fa"), reads1: join(dir, "r1.fq"), reads2: join(dir, "r2.fq"), snvs, pairs };
}
