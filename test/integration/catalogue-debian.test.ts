/**
 * The tool catalogue against the real Debian tools: every argv that `buildInvocation`
 * produces for the local runtime is run on data this test makes (a random reference and
 * wgsim reads), chained the way a pipeline chains steps, and every declared output and
 * secondary file must exist afterwards. `make test` installs the Debian packages.
 */
import t, { type Test } from "tap";
import { spawnSync } from "node:child_process";
import { closeSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { buildInvocation, defaultCatalogue, secondaryCandidates } from "../../core/tools/index.js";

const root = mkdtempSync(join(tmpdir(), "operon-catalogue-"));
t.teardown(() => spawnSync("rm", ["-rf", root]));

// A random 20 kb reference and 2,000 read pairs simulated from it.
let seed = 42;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
const seq = Array.from({ length: 20_000 }, () => "ACGT"[Math.floor(rand() * 4)]).join("");
writeFileSync(join(root, "ref.fa"), `>chr1\n${seq.match(/.{1,60}/g)?.join("\n")}\n`);
const sim = spawnSync("wgsim", ["-N", "2000", "-1", "100", "-2", "100", "-S", "7", "ref.fa", "r1.fastq", "r2.fastq"], { cwd: root });
if (sim.status !== 0) throw new Error(`wgsim failed: ${sim.stderr}`);

let n = 0;
/** Runs one step like an executor would; returns the root-relative paths of its outputs. */
function step(tt: Test, tool: string, params: Record<string, unknown>): string[] {
  const label = `${tool} ${String(params.command ?? "")}`.trim();
  const wd = join(root, "work", String(++n));
  mkdirSync(wd, { recursive: true });
  const r = buildInvocation(defaultCatalogue.get(tool)!, params, { runtime: "local" });
  if (!r.ok) { tt.fail(`${label}: ${JSON.stringify(r.errors)}`); return []; }
  const inv = r.invocation;
  for (const i of inv.inputs) {
    const src = join(root, i.source);
    const dst = join(wd, i.local);
    mkdirSync(dirname(dst), { recursive: true });
    copyFileSync(src, dst);
    // Secondary files travel with their primary, renamed along with it.
    for (const sec of secondaryCandidates(src)) {
      if (existsSync(sec)) copyFileSync(sec, join(dirname(dst), basename(sec).replace(basename(src), basename(dst))));
    }
  }
  for (const d of inv.mkdirs) mkdirSync(join(wd, d), { recursive: true });
  const fd = inv.stdout ? openSync(join(wd, inv.stdout), "w") : "ignore";
  const res = spawnSync(inv.argv[0]!, inv.argv.slice(1), { cwd: wd, stdio: ["ignore", fd, "pipe"], encoding: "utf8", env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: wd } });
  if (typeof fd === "number") closeSync(fd);
  tt.equal(res.status, 0, `${label} exits 0${res.status ? `: ${res.stderr.slice(-300)}` : ""}`);
  const outs: string[] = [];
  for (const o of inv.outputs) {
    const p = join(wd, o.path);
    tt.ok(existsSync(p) && statSync(p).size > 0, `${label} wrote ${o.path}`);
    for (const s of o.secondary) tt.ok(existsSync(join(wd, s)), `${label} wrote secondary ${s}`);
    // Publish into out/<n>/ (with secondaries) so later steps read it like a run folder.
    const pub = join(root, "out", String(n), o.path);
    mkdirSync(dirname(pub), { recursive: true });
    if (existsSync(p)) copyFileSync(p, pub);
    for (const s of o.secondary) if (existsSync(join(wd, s))) copyFileSync(join(wd, s), join(root, "out", String(n), s));
    outs.push(`out/${n}/${o.path}`);
  }
  return outs;
}

t.test("alignment and variant calling chain (bwa, samtools, bcftools, tabix)", async (t) => {
  const [ref] = step(t, "bwa", { command: "index", inputFile: "ref.fa" });
  const [sam] = step(t, "bwa", { command: "mem", reference: ref, inputFile: "r1.fastq", inputFile2: "r2.fastq", outputFile: "s1.sam", threads: 2, readGroup: "@RG\\tID:s1\\tSM:s1" });
  const [sorted] = step(t, "samtools", { command: "sort", inputFile: sam, outputFile: "s1.sorted.bam" });
  const [indexed] = step(t, "samtools", { command: "index", inputFile: sorted });
  const [flagstat] = step(t, "samtools", { command: "flagstat", inputFile: indexed });
  t.match(readFileSync(join(root, flagstat!), "utf8"), /4000 \+ 0 in total/, "flagstat counts every simulated read");
  for (const command of ["idxstats", "stats", "depth", "coverage"]) step(t, "samtools", { command, inputFile: indexed });
  step(t, "samtools", { command: "view", inputFile: indexed, region: "chr1:1-5000", outputFile: "region.bam" });
  const [bcf] = step(t, "bcftools", { command: "mpileup", inputFile: indexed, reference: "ref.fa" });
  const [vcf] = step(t, "bcftools", { command: "call", inputFile: bcf, outputFile: "s1.vcf.gz" });
  const [tbi] = step(t, "tabix", { command: "index", inputFile: vcf });
  step(t, "samtools", { command: "tabix", inputFile: vcf });
  step(t, "bcftools", { command: "view", inputFile: tbi, region: "chr1" });
  step(t, "bcftools", { command: "stats", inputFile: vcf });
  step(t, "samtools", { command: "merge", inputFiles: [sorted, sorted], outputFile: "merged.bam" });
  step(t, "bedtools", { command: "genomecov", inputFile: indexed, bedGraph: true });
  step(t, "bedtools", { command: "bamtobed", inputFile: indexed });
});

t.test("other aligners (bowtie2, hisat2, minimap2)", async (t) => {
  const [bt2] = step(t, "bowtie2", { command: "build", inputFile: "ref.fa" });
  step(t, "bowtie2", { command: "align", reference: bt2, inputFile: "r1.fastq", inputFile2: "r2.fastq" });
  const [ht2] = step(t, "hisat2", { command: "build", inputFile: "ref.fa" });
  step(t, "hisat2", { command: "align", reference: ht2, inputFile: "r1.fastq" });
  step(t, "minimap2", { command: "align", reference: "ref.fa", inputFile: "r1.fastq", inputFile2: "r2.fastq", preset: "sr" });
});

t.test("QC and Picard (fastqc, trimmomatic, picard)", async (t) => {
  step(t, "fastqc", { inputFile: "r1.fastq", inputFile2: "r2.fastq" });
  step(t, "trimmomatic", { command: "PE", inputFile: "r1.fastq", inputFile2: "r2.fastq" });
  step(t, "trimmomatic", { command: "SE", inputFile: "r1.fastq" });
  const [sam] = step(t, "bwa", { command: "mem", reference: "out/1/ref.fa", inputFile: "r1.fastq", outputFile: "p.sam" });
  const [sorted] = step(t, "picard", { command: "SortSam", inputFile: sam });
  step(t, "picard", { command: "MarkDuplicates", inputFile: sorted });
  step(t, "picard", { command: "BuildBamIndex", inputFile: sorted });
  step(t, "picard", { command: "CreateSequenceDictionary", inputFile: "ref.fa" });
  step(t, "tabix", { command: "bgzip", inputFile: "r1.fastq" });
});
