import t from "tap";
import fc from "fast-check";
import { buildInvocation, defaultCatalogue, secondaryCandidates, toolInputJsonSchema } from "../../core/tools/index.js";
import type { Invocation, OutputFile, Runtime, ToolDefinition } from "../../core/tools/index.js";
import type { Issue } from "../../core/issues.js";
import { checkArgument, normalizeWorkspacePath } from "../../core/paths.js";
import { checkText } from "../../core/tools/params.js";

/** The part of a tap test the helpers use. */
interface Test { fail(message: string): unknown }
type Params = Record<string, unknown>;

const RUNTIMES: readonly Runtime[] = ["local", "container"];

function tool(id: string): ToolDefinition {
  const found = defaultCatalogue.get(id);
  if (!found) throw new Error(`tool ${id} is not in the catalogue`);
  return found;
}

/** Builds and asserts success; undefined (after a failed assertion) when the build fails. */
function build(tt: Test, id: string, params: Params, runtime: Runtime = "local"): Invocation | undefined {
  const r = buildInvocation(tool(id), params, { runtime });
  if (!r.ok) {
    tt.fail(`${id} ${JSON.stringify(params)} (${runtime}) should build, got ${JSON.stringify(r.errors)}`);
    return undefined;
  }
  return r.invocation;
}

/** Builds and asserts failure; the errors (empty after a failed assertion when the build succeeds). */
function fail(tt: Test, id: string, params: Params, runtime: Runtime = "local"): Issue[] {
  const r = buildInvocation(tool(id), params, { runtime });
  if (r.ok) {
    tt.fail(`${id} ${JSON.stringify(params)} should not build, got argv ${JSON.stringify(r.invocation.argv)}`);
    return [];
  }
  return r.errors;
}

const o = (path: string, secondary: string[] = []): OutputFile => ({ path, secondary });
const count = <T>(xs: readonly T[], x: T) => xs.filter((y) => y === x).length;

/* ------------------------------------------------------------------ 1. catalogue */

t.test("catalogue", async (t) => {
  const expected = ["samtools", "bcftools", "tabix", "bwa", "bowtie2", "hisat2", "minimap2", "bedtools", "fastqc", "trimmomatic", "picard", "gatk", "annovar"];
  for (const id of expected) t.ok(defaultCatalogue.ids.includes(id), `catalogue has ${id}`);
  t.same([...defaultCatalogue.ids], [...defaultCatalogue.ids].sort(), "ids are sorted");
  t.equal(defaultCatalogue.get("nope"), undefined, "unknown id gives undefined");

  for (const id of defaultCatalogue.ids) {
    const def = tool(id);
    t.equal(def.id, id, `${id}: id matches its catalogue key`);
    t.ok(def.description.length > 0, `${id}: description`);
    t.ok(def.version.length > 0, `${id}: version`);
    const lastSegment = def.image.split("/").pop() ?? "";
    t.match(lastSegment, /^[^:]+:[^:]+$/, `${id}: image ${def.image} is pinned with a tag`);
    t.notOk(/:latest$/.test(def.image), `${id}: image is not :latest`);
    t.ok(def.localExecutables.length > 0, `${id}: has local executables`);
    t.ok(Object.keys(def.commands).length > 0, `${id}: has commands`);
    if (def.defaultCommand !== undefined) t.ok(Object.hasOwn(def.commands, def.defaultCommand), `${id}: default command exists`);
  }

  t.match(tool("annovar").imageNote ?? "", /user[- ]supplied|build an image|supply your own/i, "annovar imageNote says the image is user-supplied");
  t.same(Object.keys(tool("samtools").commands),
    ["view", "sort", "index", "merge", "stats", "flagstat", "idxstats", "depth", "coverage", "tabix"], "samtools commands are exactly the spec's list");
  t.equal(tool("fastqc").defaultCommand, "fastqc", "fastqc has a default command");
});

t.test("toolInputJsonSchema", async (t) => {
  for (const id of defaultCatalogue.ids) {
    const schema = toolInputJsonSchema(tool(id));
    t.equal(schema["type"], "object", `${id}: object schema`);
    const props = schema["properties"] as Record<string, unknown> | undefined;
    t.ok(props, `${id}: has properties`);
    const keys = Object.keys(props ?? {});
    for (const k of ["command", "inputFile", "args", "threads"]) t.ok(keys.includes(k), `${id}: property ${k}`);
    t.ok(keys.includes(`${id}Command`), `${id}: property ${id}Command`);
    if (id === "fastqc") t.notOk(keys.includes("outputFile"), "fastqc: no outputFile (FastQC names its own outputs)");
    else t.ok(keys.includes("outputFile"), `${id}: property outputFile`);
    t.doesNotThrow(() => JSON.stringify(schema), `${id}: schema is serialisable`);
  }
});

/* ------------------------------------------------------------------ 2. argv table */

interface ArgvCase {
  name: string;
  tool: string;
  params: Params;
  /** argv for the local runtime. */
  argv: string[];
  /** argv for the container runtime, when it differs. */
  containerArgv?: string[];
  command?: string;
  stdout?: string;
  outputs: OutputFile[];
  /** `[param, source, local]` of every staged input, in order. */
  inputs: Array<[string, string, string]>;
  mkdirs?: string[];
}

const HAND_TRIM_TAIL = ["LEADING:3", "TRAILING:3", "SLIDINGWINDOW:4:15", "MINLEN:36"];

const argvCases: ArgvCase[] = [
  /* samtools */
  { name: "samtools sort with threads", tool: "samtools", params: { command: "sort", inputFile: "data/s1.bam", threads: 4 },
    argv: ["samtools", "sort", "-@", "4", "-o", "s1.sorted.bam", "in/1/s1.bam"],
    outputs: [o("s1.sorted.bam")], inputs: [["inputFile", "data/s1.bam", "in/1/s1.bam"]] },
  { name: "samtools sort by name, threads as a digit string, outputFile in a folder, samtoolsCommand key",
    tool: "samtools", params: { samtoolsCommand: "sort", inputFile: "data/s1.bam", byName: "true", threads: "2", outputFile: "sorted/by-name.bam" },
    argv: ["samtools", "sort", "-@", "2", "-n", "-o", "sorted/by-name.bam", "in/1/s1.bam"], command: "sort",
    outputs: [o("sorted/by-name.bam")], inputs: [["inputFile", "data/s1.bam", "in/1/s1.bam"]], mkdirs: ["sorted"] },
  { name: "samtools index (file staged under its own name, .bai beside it)", tool: "samtools",
    params: { command: "index", inputFile: "data/s1.sorted.bam" },
    argv: ["samtools", "index", "s1.sorted.bam"],
    outputs: [o("s1.sorted.bam", ["s1.sorted.bam.bai"])], inputs: [["inputFile", "data/s1.sorted.bam", "s1.sorted.bam"]] },
  { name: "samtools index csi", tool: "samtools", params: { command: "index", inputFile: "s1.bam", csi: true },
    argv: ["samtools", "index", "-c", "s1.bam"], outputs: [o("s1.bam", ["s1.bam.csi"])], inputs: [["inputFile", "s1.bam", "s1.bam"]] },
  { name: "samtools index cram", tool: "samtools", params: { command: "index", inputFile: "data/x.cram" },
    argv: ["samtools", "index", "x.cram"], outputs: [o("x.cram", ["x.cram.crai"])], inputs: [["inputFile", "data/x.cram", "x.cram"]] },
  { name: "samtools flagstat captures stdout", tool: "samtools", params: { command: "flagstat", inputFile: "data/s1.bam", threads: 2 },
    argv: ["samtools", "flagstat", "-@", "2", "in/1/s1.bam"], stdout: "s1.flagstat.txt",
    outputs: [o("s1.flagstat.txt")], inputs: [["inputFile", "data/s1.bam", "in/1/s1.bam"]] },
  { name: "samtools idxstats ignores threads", tool: "samtools", params: { command: "idxstats", inputFile: "data/s1.bam", threads: 2 },
    argv: ["samtools", "idxstats", "in/1/s1.bam"], stdout: "s1.idxstats.txt",
    outputs: [o("s1.idxstats.txt")], inputs: [["inputFile", "data/s1.bam", "in/1/s1.bam"]] },
  { name: "samtools view with a region (last positional)", tool: "samtools",
    params: { command: "view", inputFile: "data/s1.bam", region: "chr1:1000-2000", minMapQ: 20 },
    argv: ["samtools", "view", "-b", "-q", "20", "-o", "s1.view.bam", "in/1/s1.bam", "chr1:1000-2000"],
    outputs: [o("s1.view.bam")], inputs: [["inputFile", "data/s1.bam", "in/1/s1.bam"]] },
  { name: "samtools view to SAM (by extension) with reference and flags", tool: "samtools",
    params: { command: "view", inputFile: "data/s1.cram", reference: "refs/ref.fa", outputFile: "out.sam", includeFlags: 2, excludeFlags: "1024", args: ["-M"] },
    argv: ["samtools", "view", "-h", "-f", "2", "-F", "1024", "-T", "in/2/ref.fa", "-M", "-o", "out.sam", "in/1/s1.cram"],
    outputs: [o("out.sam")], inputs: [["inputFile", "data/s1.cram", "in/1/s1.cram"], ["reference", "refs/ref.fa", "in/2/ref.fa"]] },
  { name: "samtools merge with inputFiles", tool: "samtools", params: { command: "merge", inputFiles: ["data/a.bam", "other/b.bam"] },
    argv: ["samtools", "merge", "-f", "-o", "a.merged.bam", "in/1/a.bam", "in/2/b.bam"],
    outputs: [o("a.merged.bam")], inputs: [["inputFiles/0", "data/a.bam", "in/1/a.bam"], ["inputFiles/1", "other/b.bam", "in/2/b.bam"]] },
  { name: "samtools merge with inputFile and inputFile2 of the same basename", tool: "samtools",
    params: { command: "merge", inputFile: "x/s.bam", inputFile2: "y/s.bam", outputFile: "m.bam", threads: 3 },
    argv: ["samtools", "merge", "-@", "3", "-f", "-o", "m.bam", "in/1/s.bam", "in/2/s.bam"],
    outputs: [o("m.bam")], inputs: [["inputFile", "x/s.bam", "in/1/s.bam"], ["inputFile2", "y/s.bam", "in/2/s.bam"]] },

  /* bcftools */
  { name: "bcftools mpileup (BCF by default)", tool: "bcftools",
    params: { command: "mpileup", inputFile: "data/s1.bam", reference: "refs/ref.fa", region: "chr1", maxDepth: 250 },
    argv: ["bcftools", "mpileup", "-f", "in/2/ref.fa", "-r", "chr1", "-d", "250", "-O", "b", "-o", "s1.pileup.bcf", "in/1/s1.bam"],
    outputs: [o("s1.pileup.bcf")], inputs: [["inputFile", "data/s1.bam", "in/1/s1.bam"], ["reference", "refs/ref.fa", "in/2/ref.fa"]] },
  { name: "bcftools call (multiallelic, variants only, vcf.gz)", tool: "bcftools",
    params: { command: "call", inputFile: "s1.pileup.bcf", threads: 2 },
    argv: ["bcftools", "call", "--threads", "2", "-m", "-v", "-O", "z", "-o", "s1.pileup.calls.vcf.gz", "in/1/s1.pileup.bcf"],
    outputs: [o("s1.pileup.calls.vcf.gz")], inputs: [["inputFile", "s1.pileup.bcf", "in/1/s1.pileup.bcf"]] },
  { name: "bcftools call consensus caller, all sites, BCF", tool: "bcftools",
    params: { bcftoolsCommand: "call", inputFile: "p.bcf", multiallelic: false, variantsOnly: "false", outputFile: "calls.bcf" },
    argv: ["bcftools", "call", "-c", "-O", "b", "-o", "calls.bcf", "in/1/p.bcf"], command: "call",
    outputs: [o("calls.bcf")], inputs: [["inputFile", "p.bcf", "in/1/p.bcf"]] },

  /* tabix */
  { name: "tabix index, vcf preset from extension", tool: "tabix", params: { command: "index", inputFile: "data/calls.vcf.gz" },
    argv: ["tabix", "-f", "-p", "vcf", "calls.vcf.gz"],
    outputs: [o("calls.vcf.gz", ["calls.vcf.gz.tbi"])], inputs: [["inputFile", "data/calls.vcf.gz", "calls.vcf.gz"]] },
  { name: "tabix index, bed preset, csi", tool: "tabix", params: { command: "index", inputFile: "regions.bed.gz", csi: true },
    argv: ["tabix", "-f", "-p", "bed", "-C", "regions.bed.gz"],
    outputs: [o("regions.bed.gz", ["regions.bed.gz.csi"])], inputs: [["inputFile", "regions.bed.gz", "regions.bed.gz"]] },
  { name: "tabix index, unknown extension: no preset", tool: "tabix", params: { command: "index", inputFile: "x/t.txt.gz" },
    argv: ["tabix", "-f", "t.txt.gz"], outputs: [o("t.txt.gz", ["t.txt.gz.tbi"])], inputs: [["inputFile", "x/t.txt.gz", "t.txt.gz"]] },

  /* aligners */
  { name: "bwa index", tool: "bwa", params: { command: "index", inputFile: "refs/hg38.fa" },
    argv: ["bwa", "index", "hg38.fa"],
    outputs: [o("hg38.fa", ["hg38.fa.amb", "hg38.fa.ann", "hg38.fa.bwt", "hg38.fa.pac", "hg38.fa.sa"])],
    inputs: [["inputFile", "refs/hg38.fa", "hg38.fa"]] },
  { name: "bwa mem paired-end, SAM on stdout", tool: "bwa",
    params: { command: "mem", reference: "refs/hg38.fa", inputFile: "data/s1_R1.fastq.gz", inputFile2: "data/s1_R2.fastq.gz", threads: 8,
      readGroup: "@RG\\tID:s1\\tSM:s1", markShorterSplits: true },
    argv: ["bwa", "mem", "-t", "8", "-R", "@RG\\tID:s1\\tSM:s1", "-M", "in/1/hg38.fa", "in/2/s1_R1.fastq.gz", "in/3/s1_R2.fastq.gz"],
    stdout: "s1_R1.sam", outputs: [o("s1_R1.sam")],
    inputs: [["reference", "refs/hg38.fa", "in/1/hg38.fa"], ["inputFile", "data/s1_R1.fastq.gz", "in/2/s1_R1.fastq.gz"],
      ["inputFile2", "data/s1_R2.fastq.gz", "in/3/s1_R2.fastq.gz"]] },
  { name: "bowtie2 build", tool: "bowtie2", params: { command: "build", inputFile: "refs/ref.fa", threads: 2 },
    argv: ["bowtie2-build", "--threads", "2", "ref.fa", "ref.fa"],
    outputs: [o("ref.fa", ["ref.fa.1.bt2", "ref.fa.2.bt2", "ref.fa.3.bt2", "ref.fa.4.bt2", "ref.fa.rev.1.bt2", "ref.fa.rev.2.bt2"])],
    inputs: [["inputFile", "refs/ref.fa", "ref.fa"]] },
  { name: "bowtie2 align paired-end", tool: "bowtie2",
    params: { command: "align", reference: "refs/ref.fa", inputFile: "data/s1_R1.fq.gz", inputFile2: "data/s1_R2.fq.gz", threads: 4, preset: "very-sensitive", readGroupId: "s1" },
    argv: ["bowtie2", "-p", "4", "--very-sensitive", "--rg-id", "s1", "-x", "in/1/ref.fa", "-1", "in/2/s1_R1.fq.gz", "-2", "in/3/s1_R2.fq.gz", "-S", "s1_R1.sam"],
    outputs: [o("s1_R1.sam")],
    inputs: [["reference", "refs/ref.fa", "in/1/ref.fa"], ["inputFile", "data/s1_R1.fq.gz", "in/2/s1_R1.fq.gz"], ["inputFile2", "data/s1_R2.fq.gz", "in/3/s1_R2.fq.gz"]] },
  { name: "bowtie2 align single-end", tool: "bowtie2", params: { command: "align", reference: "ref.fa", inputFile: "data/s1.fastq" },
    argv: ["bowtie2", "-x", "in/1/ref.fa", "-U", "in/2/s1.fastq", "-S", "s1.sam"],
    outputs: [o("s1.sam")], inputs: [["reference", "ref.fa", "in/1/ref.fa"], ["inputFile", "data/s1.fastq", "in/2/s1.fastq"]] },
  { name: "hisat2 align single-end, no spliced alignment", tool: "hisat2",
    params: { command: "align", reference: "refs/ref.fa", inputFile: "data/s1.fastq.gz", noSpliced: true },
    argv: ["hisat2", "--no-spliced-alignment", "--summary-file", "s1.hisat2-summary.txt", "-x", "in/1/ref.fa", "-U", "in/2/s1.fastq.gz", "-S", "s1.sam"],
    outputs: [o("s1.sam"), o("s1.hisat2-summary.txt")],
    inputs: [["reference", "refs/ref.fa", "in/1/ref.fa"], ["inputFile", "data/s1.fastq.gz", "in/2/s1.fastq.gz"]] },
  { name: "hisat2 align paired-end with threads and named outputs", tool: "hisat2",
    params: { command: "align", reference: "ref.fa", inputFile: "r1.fq", inputFile2: "r2.fq", threads: 6, outputFile: "rna.sam", outputFile2: "rna.summary" },
    argv: ["hisat2", "-p", "6", "--summary-file", "rna.summary", "-x", "in/1/ref.fa", "-1", "in/2/r1.fq", "-2", "in/3/r2.fq", "-S", "rna.sam"],
    outputs: [o("rna.sam"), o("rna.summary")],
    inputs: [["reference", "ref.fa", "in/1/ref.fa"], ["inputFile", "r1.fq", "in/2/r1.fq"], ["inputFile2", "r2.fq", "in/3/r2.fq"]] },
  { name: "minimap2 align", tool: "minimap2",
    params: { command: "align", reference: "refs/ref.fa", inputFile: "data/ont.fastq.gz", preset: "map-ont", threads: 4 },
    argv: ["minimap2", "-a", "-x", "map-ont", "-t", "4", "-o", "ont.sam", "in/1/ref.fa", "in/2/ont.fastq.gz"],
    outputs: [o("ont.sam")], inputs: [["reference", "refs/ref.fa", "in/1/ref.fa"], ["inputFile", "data/ont.fastq.gz", "in/2/ont.fastq.gz"]] },
  { name: "minimap2 index", tool: "minimap2", params: { command: "index", inputFile: "refs/ref.fa", preset: "sr" },
    argv: ["minimap2", "-x", "sr", "-d", "ref.fa.mmi", "in/1/ref.fa"],
    outputs: [o("ref.fa.mmi")], inputs: [["inputFile", "refs/ref.fa", "in/1/ref.fa"]] },

  /* bedtools */
  { name: "bedtools genomecov bedGraph on stdout", tool: "bedtools", params: { command: "genomecov", inputFile: "data/s1.bam", bedGraph: true },
    argv: ["bedtools", "genomecov", "-ibam", "in/1/s1.bam", "-bg"], stdout: "s1.genomecov.txt",
    outputs: [o("s1.genomecov.txt")], inputs: [["inputFile", "data/s1.bam", "in/1/s1.bam"]] },

  /* qc */
  { name: "fastqc on a pair (default command)", tool: "fastqc",
    params: { inputFile: "data/s1_R1.fastq.gz", inputFile2: "data/s1_R2.fq", threads: 2 },
    argv: ["fastqc", "--outdir", "qc", "--threads", "2", "in/1/s1_R1.fastq.gz", "in/2/s1_R2.fq"], command: "fastqc",
    outputs: [o("qc/s1_R1_fastqc.html"), o("qc/s1_R1_fastqc.zip"), o("qc/s1_R2_fastqc.html"), o("qc/s1_R2_fastqc.zip")],
    inputs: [["inputFile", "data/s1_R1.fastq.gz", "in/1/s1_R1.fastq.gz"], ["inputFile2", "data/s1_R2.fq", "in/2/s1_R2.fq"]], mkdirs: ["qc"] },
  { name: "fastqc on one BAM", tool: "fastqc", params: { command: "fastqc", inputFile: "s1.bam" },
    argv: ["fastqc", "--outdir", "qc", "in/1/s1.bam"],
    outputs: [o("qc/s1_fastqc.html"), o("qc/s1_fastqc.zip")], inputs: [["inputFile", "s1.bam", "in/1/s1.bam"]], mkdirs: ["qc"] },
  { name: "trimmomatic PE with defaults", tool: "trimmomatic",
    params: { command: "PE", inputFile: "data/s1_R1.fastq.gz", inputFile2: "data/s1_R2.fastq.gz", threads: 4 },
    argv: ["TrimmomaticPE", "-threads", "4", "-phred33", "in/1/s1_R1.fastq.gz", "in/2/s1_R2.fastq.gz",
      "s1_R1.paired.fastq.gz", "s1_R1.unpaired.fastq.gz", "s1_R2.paired.fastq.gz", "s1_R2.unpaired.fastq.gz", ...HAND_TRIM_TAIL],
    containerArgv: ["trimmomatic", "PE", "-threads", "4", "-phred33", "in/1/s1_R1.fastq.gz", "in/2/s1_R2.fastq.gz",
      "s1_R1.paired.fastq.gz", "s1_R1.unpaired.fastq.gz", "s1_R2.paired.fastq.gz", "s1_R2.unpaired.fastq.gz", ...HAND_TRIM_TAIL],
    outputs: [o("s1_R1.paired.fastq.gz"), o("s1_R2.paired.fastq.gz"), o("s1_R1.unpaired.fastq.gz"), o("s1_R2.unpaired.fastq.gz")],
    inputs: [["inputFile", "data/s1_R1.fastq.gz", "in/1/s1_R1.fastq.gz"], ["inputFile2", "data/s1_R2.fastq.gz", "in/2/s1_R2.fastq.gz"]] },
  { name: "trimmomatic SE with adapters, phred64 and custom steps", tool: "trimmomatic",
    params: { command: "SE", inputFile: "r.fq.gz", adapters: "adapters/TruSeq3-SE.fa", phred: "64", trimSteps: ["HEADCROP:5", "MINLEN:50"], outputFile: "t.fq.gz" },
    argv: ["TrimmomaticSE", "-phred64", "in/1/r.fq.gz", "t.fq.gz", "ILLUMINACLIP:in/2/TruSeq3-SE.fa:2:30:10", "HEADCROP:5", "MINLEN:50"],
    containerArgv: ["trimmomatic", "SE", "-phred64", "in/1/r.fq.gz", "t.fq.gz", "ILLUMINACLIP:in/2/TruSeq3-SE.fa:2:30:10", "HEADCROP:5", "MINLEN:50"],
    outputs: [o("t.fq.gz")], inputs: [["inputFile", "r.fq.gz", "in/1/r.fq.gz"], ["adapters", "adapters/TruSeq3-SE.fa", "in/2/TruSeq3-SE.fa"]] },

  /* java */
  { name: "picard SortSam", tool: "picard", params: { command: "SortSam", inputFile: "data/s1.sam" },
    argv: ["PicardCommandLine", "SortSam", "-I", "in/1/s1.sam", "-O", "s1.sorted.bam", "--SORT_ORDER", "coordinate"],
    containerArgv: ["picard", "SortSam", "-I", "in/1/s1.sam", "-O", "s1.sorted.bam", "--SORT_ORDER", "coordinate"],
    outputs: [o("s1.sorted.bam")], inputs: [["inputFile", "data/s1.sam", "in/1/s1.sam"]] },
  { name: "picard SortSam queryname with extra args", tool: "picard",
    params: { picardCommand: "SortSam", inputFile: "s1.bam", sortOrder: "queryname", outputFile: "qn.bam", args: ["--VALIDATION_STRINGENCY", "LENIENT"] },
    argv: ["PicardCommandLine", "SortSam", "-I", "in/1/s1.bam", "-O", "qn.bam", "--SORT_ORDER", "queryname", "--VALIDATION_STRINGENCY", "LENIENT"],
    containerArgv: ["picard", "SortSam", "-I", "in/1/s1.bam", "-O", "qn.bam", "--SORT_ORDER", "queryname", "--VALIDATION_STRINGENCY", "LENIENT"],
    command: "SortSam", outputs: [o("qn.bam")], inputs: [["inputFile", "s1.bam", "in/1/s1.bam"]] },
  { name: "gatk HaplotypeCaller", tool: "gatk", params: { command: "HaplotypeCaller", inputFile: "data/s1.bam", reference: "refs/ref.fa" },
    argv: ["gatk", "HaplotypeCaller", "-I", "in/1/s1.bam", "-R", "in/2/ref.fa", "-O", "s1.vcf.gz"],
    outputs: [o("s1.vcf.gz", ["s1.vcf.gz.tbi"])], inputs: [["inputFile", "data/s1.bam", "in/1/s1.bam"], ["reference", "refs/ref.fa", "in/2/ref.fa"]] },
  { name: "gatk HaplotypeCaller GVCF with region, threads and java options", tool: "gatk",
    params: { command: "HaplotypeCaller", inputFile: "data/s1.bam", reference: "refs/ref.fa", region: "chr20", emitRefConfidence: "GVCF", threads: 4, javaOptions: "-Xmx4g" },
    argv: ["gatk", "--java-options", "-Xmx4g", "HaplotypeCaller", "-I", "in/1/s1.bam", "-R", "in/2/ref.fa", "-L", "chr20", "-ERC", "GVCF",
      "--native-pair-hmm-threads", "4", "-O", "s1.g.vcf.gz"],
    outputs: [o("s1.g.vcf.gz", ["s1.g.vcf.gz.tbi"])], inputs: [["inputFile", "data/s1.bam", "in/1/s1.bam"], ["reference", "refs/ref.fa", "in/2/ref.fa"]] },
];

t.test("argv table", async (t) => {
  for (const c of argvCases) {
    for (const runtime of RUNTIMES) {
      t.test(`${c.name} (${runtime})`, async (t) => {
        const r = buildInvocation(tool(c.tool), c.params, { runtime });
        if (!r.ok) { t.fail(`expected ok, got ${JSON.stringify(r.errors)}`); return; }
        const inv = r.invocation;
        t.equal(r.command, c.command ?? c.params["command"], "command");
        t.strictSame(inv.argv, runtime === "container" && c.containerArgv ? c.containerArgv : c.argv, "argv");
        if (c.stdout === undefined) t.notOk("stdout" in inv, "no stdout capture");
        else t.equal(inv.stdout, c.stdout, "stdout");
        t.strictSame(inv.outputs, c.outputs, "outputs");
        t.strictSame(inv.inputs.map((i) => [i.param, i.source, i.local]), c.inputs, "inputs");
        t.strictSame(inv.mkdirs, c.mkdirs ?? [], "mkdirs");
      });
    }
  }
});

/* ------------------------------------------------------------------ 3. errors */

t.test("errors", async (t) => {
  t.test("missing required parameter", async (t) => {
    t.match(fail(t, "samtools", { command: "sort" }), [{ code: "missing_parameter", path: "/inputFile" }]);
    t.match(fail(t, "bwa", { command: "mem", inputFile: "r1.fq" }), [{ code: "missing_parameter", path: "/reference" }]);
    const gatkErrors = fail(t, "gatk", { command: "BaseRecalibrator", inputFile: "s.bam" });
    t.same(gatkErrors.map((e) => [e.code, e.path]), [["missing_parameter", "/reference"], ["missing_parameter", "/knownSites"]]);
    t.match(fail(t, "annovar", { command: "table_annovar", inputFile: "x.vcf", database: "humandb", protocol: "refGene" }),
      [{ code: "missing_parameter", path: "/operation" }]);
  });

  t.test("unknown, missing and conflicting commands", async (t) => {
    const errs = fail(t, "samtools", { command: "bogus", inputFile: "x.bam" });
    t.match(errs, [{ code: "unknown_command", path: "/command" }]);
    t.same(errs[0]?.valid_values, Object.keys(tool("samtools").commands), "valid_values lists the commands");
    t.match(fail(t, "samtools", { samtoolsCommand: "bogus", inputFile: "x.bam" }), [{ code: "unknown_command", path: "/samtoolsCommand" }]);
    t.match(fail(t, "samtools", { command: "toString", inputFile: "x.bam" }), [{ code: "unknown_command" }], "inherited property names are not commands");
    t.match(fail(t, "samtools", { command: 7, inputFile: "x.bam" }), [{ code: "unknown_command" }]);
    t.match(fail(t, "samtools", { inputFile: "x.bam" }), [{ code: "missing_command" }]);
    t.match(fail(t, "samtools", { command: "sort", samtoolsCommand: "index", inputFile: "x.bam" }), [{ code: "conflicting_command" }]);
    const same = build(t, "samtools", { command: "sort", samtoolsCommand: "sort", inputFile: "x.bam" });
    t.ok(same, "command and <tool>Command may agree");
  });

  t.test("bad threads", async (t) => {
    for (const threads of ["abc", "4x", "-1", "", 0, 257, 1.5, true]) {
      t.match(fail(t, "samtools", { command: "sort", inputFile: "x.bam", threads }), [{ code: "invalid_parameter", path: "/threads" }], `threads ${JSON.stringify(threads)}`);
    }
  });

  t.test("unknown parameter", async (t) => {
    t.match(fail(t, "samtools", { command: "sort", inputFile: "x.bam", bogus: 1 }), [{ code: "unknown_field" }]);
    t.match(fail(t, "fastqc", { inputFile: "x.fq", outputFile: "y.html" }), [{ code: "unknown_field" }], "fastqc accepts no outputFile");
  });

  t.test("after interpolation, `${` is literal text (an escaped `$${`), passed through verbatim", async (t) => {
    const inv = build(t, "samtools", { command: "sort", inputFile: "x.bam", args: ["--tag", "${HOME}"] });
    t.ok(inv?.argv.includes("${HOME}"), "literal ${HOME} reaches argv as one element");
    t.match(fail(t, "samtools", { command: "sort", inputFile: "x.bam", threads: "${threads}" }), [{ code: "invalid_parameter", path: "/threads" }],
      "a typed parameter still holding ${...} after interpolation is not a number");
  });

  t.test("invalid outputFile", async (t) => {
    const targets: Array<[string, Params]> = [
      ["samtools", { command: "sort", inputFile: "x.bam" }],
      ["samtools", { command: "index", inputFile: "x.bam" }],
      ["samtools", { command: "flagstat", inputFile: "x.bam" }],
      ["bcftools", { command: "call", inputFile: "x.bcf" }],
      ["bwa", { command: "index", inputFile: "ref.fa" }],
      ["tabix", { command: "index", inputFile: "x.vcf.gz" }],
      ["picard", { command: "SortSam", inputFile: "x.bam" }],
      ["gatk", { command: "HaplotypeCaller", inputFile: "x.bam", reference: "r.fa" }],
      ["annovar", { command: "table_annovar", inputFile: "x.vcf", database: "humandb", protocol: "refGene", operation: "g" }],
    ];
    for (const bad of ["../x", "/abs", "-rf", "a//b", "a/../../b", "./x", "a/", "a\\b"]) {
      for (const [id, params] of targets) {
        for (const runtime of RUNTIMES) {
          const errs = fail(t, id, { ...params, outputFile: bad }, runtime);
          t.match(errs, [{ code: "invalid_parameter", path: "/outputFile", message: /outputFile/ }], `${id} ${String(params["command"])} outputFile ${JSON.stringify(bad)} (${runtime})`);
        }
      }
    }
    t.match(fail(t, "hisat2", { command: "align", reference: "r.fa", inputFile: "x.fq", outputFile2: "../s.txt" }),
      [{ code: "invalid_parameter", path: "/outputFile2", message: /outputFile2/ }]);
  });

  t.test("values checked only at build time", async (t) => {
    t.match(fail(t, "trimmomatic", { command: "SE", inputFile: "x.fq", trimSteps: ["MINLEN:36", "rm -rf /"] }), [{ code: "invalid_parameter", path: "/trimSteps/1" }]);
    t.match(fail(t, "samtools", { command: "merge", inputFiles: ["a.bam", "a/"] }), [{ code: "invalid_parameter", path: "/inputFiles/1" }],
      "an input path ending in / cannot be staged");
    t.match(fail(t, "gatk", { command: "HaplotypeCaller", inputFile: "x.bam", reference: "r.fa", javaOptions: "-Xmx4g; rm -rf /" }),
      [{ code: "invalid_parameter", path: "/javaOptions" }]);
    t.match(fail(t, "annovar", { command: "annotate_variation", inputFile: "x.avinput", database: "-rf" }), [{ code: "invalid_parameter", path: "/database" }]);
  });
});

/* ------------------------------------------------------------------ 4. injection safety */

const HAND_PICKED = [
  "x; rm -rf /", "$(id)", "`id`", "a && b", "| cat /etc/passwd", "'\"", "\n", " ", "two words", "a\tb", "$HOME", "*", "~",
  "-o", "--help", "view", "-b", "in/1/s1.bam", "\\", "$${x}", "$", "}{", "😀", "é",
];

/** Arbitrary strings, hand-picked ones first (as examples) and often among the generated ones. */
const anyString = fc.oneof(
  fc.constantFrom(...HAND_PICKED),
  fc.string(),
  fc.string({ unit: "binary" }),
  fc.string({ unit: "grapheme" }),
  fc.array(fc.constantFrom(...HAND_PICKED, "/", "..", ".", "${", "a"), { maxLength: 5 }).map((xs) => xs.join("")),
);
const noRef = (s: string) => !s.includes("${");
const runtimeArb = fc.constantFrom<Runtime>(...RUNTIMES);
const examples = <T>(xs: readonly T[]): Array<[T, Runtime]> => xs.map((x) => [x, "local"]);

/**
 * Each hostile value is either refused with an issue at its own field (the trust boundary:
 * core/paths.ts and the parameter schemas), or accepted as exactly one argv element in its
 * place. Which values are refused is the checkers' rule, tested in test/core/paths.test.ts.
 */
t.test("injection safety", async (t) => {
  const refusedAt = (r: ReturnType<typeof buildInvocation>, path: string) => !r.ok && r.errors.every((e) => e.code === "invalid_parameter" && e.path.startsWith(path));

  t.test("region is refused at /region or is exactly one argv element, the last", async (t) => {
    const regionArb = anyString.filter((s) => s.length > 0 && noRef(s));
    fc.assert(fc.property(regionArb, runtimeArb, (s, runtime) => {
      const r = buildInvocation(tool("samtools"), { command: "view", inputFile: "data/s1.bam", region: s }, { runtime });
      if (checkText(s) !== undefined) return refusedAt(r, "/region");
      if (!r.ok) return false;
      const argv = r.invocation.argv;
      return JSON.stringify(argv) === JSON.stringify(["samtools", "view", "-b", "-o", "s1.view.bam", "in/1/s1.bam", s])
        && count(argv, s) === count(["samtools", "view", "-b", "-o", "s1.view.bam", "in/1/s1.bam"], s) + 1;
    }), { numRuns: 400, examples: examples(HAND_PICKED.filter((s) => s.length > 0 && noRef(s))) });
    t.pass("property held");
  });

  t.test("a positional region that would read as an option is refused", async (t) => {
    for (const region of ["-o", "--help", "-b"]) {
      t.match(fail(t, "samtools", { command: "view", inputFile: "data/s1.bam", region }), [{ code: "invalid_parameter", path: "/region" }], region);
    }
  });

  t.test("args elements are refused at /args/i or stay single argv elements", async (t) => {
    const argArb = anyString.filter(noRef);
    fc.assert(fc.property(argArb, runtimeArb, (s, runtime) => {
      const r = buildInvocation(tool("samtools"), { command: "view", inputFile: "data/s1.bam", args: [s] }, { runtime });
      if (checkArgument(s) !== undefined) return refusedAt(r, "/args/0");
      if (!r.ok) return false;
      return JSON.stringify(r.invocation.argv) === JSON.stringify(["samtools", "view", "-b", s, "-o", "s1.view.bam", "in/1/s1.bam"]);
    }), { numRuns: 400, examples: examples(HAND_PICKED.filter(noRef)) });
    t.pass("property held");
  });

  // Names the workspace path normalizer accepts as one segment; those starting with "-" or
  // "." are staged with a "_" prefix (see "input names that would read as options").
  const fileNameArb = anyString.filter((s) => noRef(s) && !s.includes("/") && normalizeWorkspacePath(s).ok && !s.startsWith("-") && !s.startsWith("."));

  t.test("input file names are refused at /inputFile, or staged verbatim as single argv elements", async (t) => {
    fc.assert(fc.property(anyString.filter(noRef), runtimeArb, (s, runtime) => {
      const source = `data/${s}`;
      const r = buildInvocation(tool("samtools"), { command: "view", inputFile: source, outputFile: "out.bam" }, { runtime });
      const n = normalizeWorkspacePath(source);
      if (!n.ok) return refusedAt(r, "/inputFile");
      if (!r.ok) return false;
      const [staged, ...rest] = r.invocation.inputs;
      if (!staged || rest.length || staged.source !== n.path || staged.param !== "inputFile") return false;
      const argv = r.invocation.argv;
      return count(argv, staged.local) === 1
        && JSON.stringify(argv) === JSON.stringify(["samtools", "view", "-b", "-o", "out.bam", staged.local]);
    }), { numRuns: 400, examples: examples(HAND_PICKED.filter(noRef)) });
    t.pass("property held");
  });

  t.test("no argv element joins two parameters", async (t) => {
    const okRegion = anyString.filter((s) => s.length > 0 && noRef(s) && checkText(s) === undefined);
    const okArg = anyString.filter((s) => noRef(s) && checkArgument(s) === undefined);
    fc.assert(fc.property(okRegion, okArg, fileNameArb, fc.integer({ min: 1, max: 256 }), runtimeArb,
      (region, arg, name, threads, runtime) => {
        const r = buildInvocation(tool("samtools"),
          { command: "view", inputFile: `data/${name}`, region, args: [arg, arg], threads, minMapQ: 30, outputFile: "o/out.bam" }, { runtime });
        if (!r.ok) return false;
        return JSON.stringify(r.invocation.argv) === JSON.stringify(
          ["samtools", "view", "-@", String(threads), "-b", "-q", "30", arg, arg, "-o", "o/out.bam", `in/1/${name}`, region]);
      }), { numRuns: 300 });
    // eslint-disable-next-line no-control-regex
    const okValue = anyString.filter((s) => s.length > 0 && noRef(s) && !s.startsWith("-") && !/[\u0000-\u0008\u000b-\u001f\u007f]/.test(s) && !s.includes("@"));
    fc.assert(fc.property(okValue, okValue, runtimeArb,
      (format, include, runtime) => {
        const r = buildInvocation(tool("bcftools"), { command: "query", inputFile: "c.vcf.gz", format, include }, { runtime });
        if (!r.ok) return false;
        return JSON.stringify(r.invocation.argv) === JSON.stringify(["bcftools", "query", "-f", format, "-i", include, "-o", "c.query.tsv", "in/1/c.vcf.gz"]);
      }), { numRuns: 300 });
    fc.assert(fc.property(fileNameArb, fileNameArb, fileNameArb, runtimeArb, (ref, r1, r2, runtime) => {
      const r = buildInvocation(tool("bwa"), { command: "mem", reference: `refs/${ref}`, inputFile: `a/${r1}`, inputFile2: `b/${r2}`, outputFile: "x.sam" }, { runtime });
      if (!r.ok) return false;
      return JSON.stringify(r.invocation.argv) === JSON.stringify(["bwa", "mem", `in/1/${ref}`, `in/2/${r1}`, `in/3/${r2}`]);
    }), { numRuns: 300 });
    t.pass("properties held");
  });

  t.test("hand-picked hostile values, one by one", async (t) => {
    const refused = ["x; rm -rf /", "| cat /etc/passwd", "\n", "a\tb", "~", "in/1/s1.bam", "\\"];
    for (const s of HAND_PICKED.filter((x) => x.length > 0 && noRef(x) && !x.startsWith("-"))) {
      if (refused.includes(s)) {
        t.match(fail(t, "samtools", { command: "view", inputFile: "data/s1.bam", region: s, args: [s] }),
          [{ code: "invalid_parameter", path: "/args/0" }, { code: "invalid_parameter", path: "/region" }], `refused: ${JSON.stringify(s)}`);
        continue;
      }
      const inv = build(t, "samtools", { command: "view", inputFile: "data/s1.bam", region: s, args: [s] });
      if (!inv) continue;
      t.strictSame(inv.argv, ["samtools", "view", "-b", s, "-o", "s1.view.bam", "in/1/s1.bam", s], JSON.stringify(s));
    }
  });

  t.test("file parameters that leave the workspace are refused at their field", async (t) => {
    const hostile = ["../../../acme/workspaces/ws-a/secret.txt", "ok/../../../../acme/x", "/etc/passwd", "data/a\\b.bam", "_system/keys/k.json", "a//b", "data/\u0000x", "data/\u2025/x", "data/%2e%2e/x"];
    for (const v of hostile) {
      t.match(fail(t, "samtools", { command: "view", inputFile: v }), [{ code: "invalid_parameter", path: "/inputFile" }], `inputFile ${JSON.stringify(v)}`);
      t.match(fail(t, "samtools", { command: "merge", inputFiles: ["data/ok.bam", v] }), [{ code: "invalid_parameter", path: "/inputFiles/1" }], `inputFiles/1 ${JSON.stringify(v)}`);
      t.match(fail(t, "bwa", { command: "mem", reference: v, inputFile: "r.fq" }), [{ code: "invalid_parameter", path: "/reference" }], `reference ${JSON.stringify(v)}`);
      t.match(fail(t, "trimmomatic", { command: "SE", inputFile: "r.fq", adapters: v }), [{ code: "invalid_parameter", path: "/adapters" }], `adapters ${JSON.stringify(v)}`);
    }
    t.strictSame(build(t, "samtools", { command: "view", inputFile: "./data/s1.bam", outputFile: "o.bam" })?.inputs, [{ param: "inputFile", source: "data/s1.bam", local: "in/1/s1.bam" }], "a ./ prefix is normalized away");
  });

  t.test("output names stay inside the run folder and never replace what it reserves", async (t) => {
    for (const v of ["../../x", "/abs", "a/../../b", "run.json", "logs", "logs/x.log", "-rf", "sub/-x", ".hidden", "a\tb", "a\\b", "./x"]) {
      t.match(fail(t, "samtools", { command: "sort", inputFile: "data/s1.bam", outputFile: v }), [{ code: "invalid_parameter", path: "/outputFile" }], `outputFile ${JSON.stringify(v)}`);
    }
    // An index step publishes its input under the input's name: one named run.json is refused too.
    t.match(fail(t, "tabix", { command: "index", inputFile: "pipelines/old/run.json" }), [{ code: "invalid_parameter" }], "derived name run.json");
    const inv = build(t, "samtools", { command: "sort", inputFile: "data/s1.bam", outputFile: "sub/dir/x.bam" });
    t.strictSame(inv?.mkdirs, ["sub/dir"], "a sub-folder of an output is created before the tool runs");
  });

  t.test("input names that would read as options are never placed first", async (t) => {
    const inv = build(t, "samtools", { command: "sort", inputFile: "data/-rf", outputFile: "out.bam" });
    t.strictSame(inv?.argv, ["samtools", "sort", "-o", "out.bam", "in/1/_-rf"], "staged with a _ prefix");
    // Commands that stage under the basename refuse a name starting with "-".
    t.match(fail(t, "samtools", { command: "index", inputFile: "data/-rf.bam" }), [{ code: "invalid_parameter" }]);
    t.match(fail(t, "bwa", { command: "index", inputFile: "data/--help.fa" }), [{ code: "invalid_parameter" }]);
  });
});

/* ------------------------------------------------------------------ 5. secondary files */

t.test("secondaryCandidates", async (t) => {
  const includes = (path: string, expected: string[]) => {
    const got = secondaryCandidates(path);
    for (const e of expected) t.ok(got.includes(e), `${path} → ${e}`);
  };
  includes("x.bam", ["x.bam.bai", "x.bam.csi", "x.bai"]);
  t.strictSame(secondaryCandidates("x.bam"), ["x.bam.bai", "x.bam.csi", "x.bai"]);
  t.strictSame(secondaryCandidates("data/x.bam"), ["data/x.bam.bai", "data/x.bam.csi", "data/x.bai"]);
  includes("ref.fa", ["ref.fa.fai", "ref.fa.bwt", "ref.dict", "ref.fa.1.bt2", "ref.fa.1.ht2"]);
  t.strictSame(secondaryCandidates("ref.fa"), [
    ...[".fai", ".gzi", ".amb", ".ann", ".bwt", ".pac", ".sa",
      ".1.bt2", ".2.bt2", ".3.bt2", ".4.bt2", ".rev.1.bt2", ".rev.2.bt2",
      ".1.ht2", ".2.ht2", ".3.ht2", ".4.ht2", ".5.ht2", ".6.ht2", ".7.ht2", ".8.ht2", ".mmi"].map((s) => "ref.fa" + s),
    "ref.dict",
  ]);
  includes("refs/hg38.fasta.gz", ["refs/hg38.fasta.gz.fai", "refs/hg38.fasta.gz.gzi", "refs/hg38.dict"]);
  includes("calls.vcf.gz", ["calls.vcf.gz.tbi", "calls.vcf.gz.csi"]);
  t.strictSame(secondaryCandidates("calls.vcf.gz"), ["calls.vcf.gz.tbi", "calls.vcf.gz.csi"]);
  t.strictSame(secondaryCandidates("x.cram"), ["x.cram.crai", "x.crai"]);
  t.strictSame(secondaryCandidates("x.bcf"), ["x.bcf.csi"]);
  t.strictSame(secondaryCandidates("reads.fastq"), []);
  t.strictSame(secondaryCandidates("reads.fastq.gz"), []);
  t.strictSame(secondaryCandidates("x.bam.bai"), []);
  t.strictSame(secondaryCandidates("X.BAM"), ["X.BAM.bai", "X.BAM.csi", "X.bai"], "case-insensitive");
});

// Regression (found while writing these tests): indexes that catalogue commands declare as secondary outputs must be found
// by secondaryCandidates, or they do not travel with the file when it is staged from the
// workspace. Missed: tabix on .gff3.gz (the tool infers the gff preset for it) and GATK
// IndexFeatureFile on an uncompressed VCF (.vcf.idx).
t.test("secondaryCandidates covers the indexes catalogue commands produce", async (t) => {
  const cases: Array<[string, Params]> = [
    ["samtools", { command: "index", inputFile: "s.bam" }],
    ["samtools", { command: "index", inputFile: "s.bam", csi: true }],
    ["samtools", { command: "index", inputFile: "s.cram" }],
    ["tabix", { command: "index", inputFile: "c.vcf.gz" }],
    ["tabix", { command: "index", inputFile: "r.bed.gz", csi: true }],
    ["bcftools", { command: "index", inputFile: "c.bcf" }],
    ["bwa", { command: "index", inputFile: "ref.fa" }],
    ["bowtie2", { command: "build", inputFile: "ref.fa" }],
    ["hisat2", { command: "build", inputFile: "ref.fa" }],
    ["picard", { command: "BuildBamIndex", inputFile: "s.bam" }],
    ["picard", { command: "CreateSequenceDictionary", inputFile: "ref.fa" }],
    ["gatk", { command: "CreateSequenceDictionary", inputFile: "ref.fasta" }],
    ["gatk", { command: "IndexFeatureFile", inputFile: "c.vcf.gz" }],
    ["gatk", { command: "HaplotypeCaller", inputFile: "s.bam", reference: "ref.fa" }],
    ["tabix", { command: "index", inputFile: "genes.gff3.gz" }],
    ["gatk", { command: "IndexFeatureFile", inputFile: "c.vcf" }],
  ];
  for (const [id, params] of cases) {
    const inv = build(t, id, params);
    for (const out of inv?.outputs ?? []) {
      const candidates = secondaryCandidates(out.path);
      for (const s of out.secondary) t.ok(candidates.includes(s), `${id} ${String(params["command"])} ${out.path}: ${s} is a secondary candidate`);
    }
  }
});

/* ------------------------------------------------------------------ 6. every command builds */

const FILLERS: Record<string, unknown> = {
  inputFile: "data/in.bam",
  inputFile2: "data/in2.bam",
  reference: "data/ref.fa",
  inputFiles: ["a.bam", "b.bam"],
  format: "%CHROM\n",
  database: "humandb",
  protocol: "refGene",
  operation: "g",
  readGroupSample: "s1",
  region: "chr1:1-100",
  knownSites: "data/known.vcf.gz",
};

t.test("every command of every tool builds with plausible parameters", async (t) => {
  for (const id of defaultCatalogue.ids) {
    const def = tool(id);
    for (const [name, cmd] of Object.entries(def.commands)) {
      const params: Params = { command: name };
      for (const r of [...cmd.required, ...(cmd.requiredAnyOf?.[0] ?? [])]) params[r] = FILLERS[r] ?? `data/${r}.txt`;
      for (const runtime of RUNTIMES) {
        t.test(`${id} ${name} (${runtime})`, async (t) => {
          t.ok(cmd.description.length > 0, "has a description");
          const inv = build(t, id, params, runtime);
          if (!inv) return;
          t.ok(inv.argv.length > 0, "non-empty argv");
          t.ok(inv.argv.every((a) => typeof a === "string"), "every argv element is a string");
          t.notOk(inv.argv.some((a) => a.includes("${")), "no ${ in argv");
          t.ok(inv.outputs.length >= 1, "at least one output");
          if (runtime === "local") t.ok(def.localExecutables.includes(inv.argv[0] ?? ""), `local argv[0] ${inv.argv[0]} is a declared local executable`);
          for (const p of [...inv.outputs.flatMap((x) => [x.path, ...x.secondary]), ...inv.inputs.map((i) => i.local), ...(inv.stdout ? [inv.stdout] : [])]) {
            t.ok(!p.startsWith("/") && !p.startsWith("-") && !p.split("/").some((s) => s === "" || s === "." || s === ".."), `${p} is a plain relative path`);
          }
          t.equal(new Set(inv.inputs.map((i) => i.local)).size, inv.inputs.length, "staged inputs do not collide");
        });
      }
    }
  }
});

/* ------------------------------------------------------------------ further bugs found while reading */

// Regression (found while writing these tests): int(1, 256) only bounds numbers; a digit string (what a resolved
// `${threads}` reference gives) bypasses the bounds: threads "0" and "1000" build.
t.test("integer bounds apply to digit strings too", async (t) => {
  for (const threads of ["0", "1000"]) {
    t.match(fail(t, "samtools", { command: "sort", inputFile: "x.bam", threads }), [{ code: "invalid_parameter", path: "/threads" }], `threads ${threads}`);
  }
  t.match(fail(t, "samtools", { command: "view", inputFile: "x.bam", minMapQ: "300" }), [{ code: "invalid_parameter", path: "/minMapQ" }], "minMapQ 300");
});

// Regression (found while writing these tests): bcftools mpileup reads inputFiles when given, but `required` lists
// inputFile, so inputFiles alone is refused, and with both, inputFile is silently dropped.
t.test("bcftools mpileup with inputFiles", async (t) => {
  const inv = build(t, "bcftools", { command: "mpileup", inputFiles: ["a.bam", "b.bam"], reference: "ref.fa" });
  t.strictSame(inv?.argv, ["bcftools", "mpileup", "-f", "in/3/ref.fa", "-O", "b", "-o", "a.pileup.bcf", "in/1/a.bam", "in/2/b.bam"]);
});

// Regression (found while writing these tests): `bcftools sort` has no --threads option (its options are -m -o -O -T -W),
// yet the threads parameter adds `--threads N`, which bcftools sort rejects.
t.test("bcftools sort does not pass --threads", async (t) => {
  const inv = build(t, "bcftools", { command: "sort", inputFile: "c.vcf.gz", threads: 4 });
  t.notOk(inv?.argv.includes("--threads"), `argv ${JSON.stringify(inv?.argv)}`);
});

// Regression (found while writing these tests): FastQC names reports with case-sensitive, sequential suffix removal
// (.gz, .bz2, .txt, .fastq, .fq, .csfastq, .sam, .bam in that order). fastqcName strips
// case-insensitively and in two passes, so the declared outputs do not exist for these inputs.
t.test("fastqc output names follow FastQC's own rule", async (t) => {
  const cases: Array<[string, string]> = [["data/S1.FASTQ.GZ", "S1.FASTQ.GZ"], ["data/s1.fastq.txt", "s1"], ["data/s1.sam.fastq", "s1"]];
  for (const [input, name] of cases) {
    const inv = build(t, "fastqc", { inputFile: input });
    t.strictSame(inv?.outputs, [o(`qc/${name}_fastqc.html`), o(`qc/${name}_fastqc.zip`)], input);
  }
});
