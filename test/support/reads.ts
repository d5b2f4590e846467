/**
 * Paired-end reads for pipeline tests: a random reference (seeded, so every run is the same)
 * and read pairs simulated from it with wgsim (Debian samtools), written into `dir`.
 */
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

export interface SimulatedReads { reference: string; reads1: string; reads2: string }

export function simulateReads(dir: string, opts: { seed: number; length?: number; pairs?: number; readLength?: number; names?: [string, string, string] }): SimulatedReads {
  const { seed, length = 20_000, pairs = 1000, readLength = 100 } = opts;
  const [reference, reads1, reads2] = opts.names ?? ["ref.fa", "r1.fastq", "r2.fastq"];
  let s = seed;
  const rand = () => ((s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const seq = Array.from({ length }, () => "ACGT"[Math.floor(rand() * 4)]).join("");
  writeFileSync(join(dir, reference), `>chr1\n${seq.match(/.{1,60}/g)?.join("\n")}\n`);
  const r = spawnSync("wgsim", ["-N", String(pairs), "-1", String(readLength), "-2", String(readLength), "-S", String(seed), reference, reads1, reads2], { cwd: dir, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`wgsim failed (${r.status}): ${r.stderr}`);
  return { reference: join(dir, reference), reads1: join(dir, reads1), reads2: join(dir, reads2) };
}
