/**
 * Compressed inputs, the pure part (core/tools/compression.ts, core/spec/compression.ts):
 * every file parameter a catalogue command stages declares what it reads; names and bytes
 * (real gzip and real bgzip output) say what a file is; and a run's steps are refused where
 * a tool cannot read what it would be given, at the run's input or the step's parameter —
 * through an index step that passes its input on under another name, too.
 */
import t from "tap";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { dryBuildSteps } from "../../core/spec/resolve.js";
import { compressionIssues, compressionProbes } from "../../core/spec/compression.js";
import type { PipelineSpec } from "../../core/spec/schema.js";
import { compressionFromBytes, compressionFromName, readsOf, unreadable } from "../../core/tools/compression.js";
import { BUILTIN_TOOLS, buildInvocation, defaultCatalogue } from "../../core/tools/index.js";

const builtin = (id: string) => JSON.parse(readFileSync(new URL(`../../pipelines/builtin/${id}.pipeline.json`, import.meta.url), "utf8")) as PipelineSpec;
const ctx = { tools: defaultCatalogue };

/** Values for every parameter a command may need, so that each builds and stages what it can. */
const SAMPLE: Record<string, unknown> = {
  inputFile: "d/a.txt", inputFile2: "d/b.txt", reference: "d/r.fa", inputFiles: ["d/c.txt"], adapters: "d/ad.fa", knownSites: "d/k.vcf.gz",
  format: "%POS", region: "chr1:1-2", database: "humandb", protocol: "refGene", operation: "g", readGroupSample: "s1",
};

t.test("every file a catalogue command stages has a declared compression", async (t) => {
  for (const tool of BUILTIN_TOOLS) {
    const shape = (tool.inputSchema as unknown as { shape: Record<string, unknown> }).shape;
    const params = Object.fromEntries(Object.entries(SAMPLE).filter(([k]) => k in shape));
    for (const command of Object.keys(tool.commands)) {
      const built = buildInvocation(tool, { ...params, command }, { runtime: "local" });
      if (!built.ok) { t.fail(`${tool.id} ${command}: ${JSON.stringify(built.errors)}`); continue; }
      t.ok(built.invocation.inputs.length > 0, `${tool.id} ${command} stages files`);
      for (const f of built.invocation.inputs) t.ok(readsOf(tool, command, f.param), `${tool.id} ${command}: ${f.param} declares what it reads`);
    }
  }
});

t.test("names and bytes", async (t) => {
  t.equal(compressionFromName("data/r1.fastq.gz"), "gz");
  t.equal(compressionFromName("data/ref.fa.bgz"), "gz");
  t.equal(compressionFromName("data/s1.bam"), "none", "a BAM is BGZF inside, not a compressed file");
  const text = Buffer.from(">chr1\nACGT\n");
  t.equal(compressionFromBytes(gzipSync(text)), "gzip", "node's gzip");
  t.equal(compressionFromBytes(execFileSync("gzip", ["-c"], { input: text })), "gzip", "gzip(1)");
  t.equal(compressionFromBytes(execFileSync("bgzip", ["-c"], { input: text })), "bgzip", "bgzip(1)");
  t.equal(compressionFromBytes(text), "none");
  t.equal(compressionFromBytes(Buffer.alloc(0)), "none");
  t.equal(unreadable("plain", "gz"), "compressed");
  t.equal(unreadable("bgzip", "gz"), undefined, "gzip or bgzip: the bytes decide");
  t.equal(unreadable("bgzip", "gzip"), "gzip");
  t.equal(unreadable("bgzip", "bgzip"), undefined);
  t.equal(unreadable("gzip", "gzip"), undefined);
});

t.test("the built-in pipelines take .fastq.gz and .fq.gz reads", async (t) => {
  for (const [id, extra] of [["fastq-qc", {}], ["bwa-align", { reference: "data/ref.fa.gz" }], ["bowtie2-align", { reference: "data/ref.fa.gz" }],
    ["hisat2-align", { reference: "data/ref.fa" }], ["variant-calling", { reference: "data/ref.fa.gz" }]] as const) {
    const inputs = { reads1: "data/s1_R1.fastq.gz", reads2: "data/s1_R2.fq.gz", sampleName: "s1", ...extra };
    t.same(dryBuildSteps(builtin(id), inputs), [], `${id}: nothing refused`);
  }
});

t.test("refused by name: the run's input is named, with what to do", async (t) => {
  const issues = dryBuildSteps(builtin("hisat2-align"), { reads1: "data/r1.fq.gz", reads2: "data/r2.fq.gz", reference: "data/ref.fa.gz", sampleName: "s1" });
  t.equal(issues.length, 1, JSON.stringify(issues));
  t.match(issues[0], { code: "unsupported_compression", path: "/input/reference" });
  t.match(issues[0]?.message, /^input "reference" \(data\/ref\.fa\.gz\) is gzip-compressed, and step "build_index" \(hisat2 build\) reads its inputFile uncompressed only: decompress it/);

  const literal = (toolName: string, parameters: Record<string, unknown>): Pick<PipelineSpec, "steps" | "inputs"> => ({ steps: [{ stepId: "s", toolName, parameters }] });
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ["bedtools", { command: "getfasta", inputFile: "d/x.bed.gz", reference: "d/ref.fa.gz" }, "/steps/0/parameters/reference"],
    ["trimmomatic", { command: "SE", inputFile: "d/r.fq.gz", adapters: "d/adapters.fa.gz" }, "/steps/0/parameters/adapters"],
    ["tabix", { command: "bgzip", inputFile: "d/calls.vcf.gz" }, "/steps/0/parameters/inputFile"],
    ["bedtools", { command: "bamtobed", inputFile: "d/s1.bam.gz" }, "/steps/0/parameters/inputFile"],
    ["annovar", { command: "convert2annovar", inputFile: "d/calls.vcf.gz" }, "/steps/0/parameters/inputFile"],
  ];
  for (const [tool, params, path] of cases) {
    const found = dryBuildSteps(literal(tool, params), {});
    t.same(found.map((i) => [i.code, i.path]), [["unsupported_compression", path]], `${tool} ${String(params.command)}: ${JSON.stringify(found)}`);
  }
  t.same(dryBuildSteps(literal("bedtools", { command: "intersect", inputFile: "d/a.bed.gz", inputFile2: "d/b.bed" }), {}), [], "intervals read through gzip");
});

t.test("refused by bytes: a plain-gzip reference where bgzip is needed, through the step that passes it on", async (t) => {
  const spec = builtin("variant-calling");
  const inputs = { reads1: "data/r1.fq.gz", reads2: "data/r2.fq.gz", reference: "data/ref.fa.gz", sampleName: "s1" };
  t.same(compressionProbes(spec, inputs, ctx), ["data/ref.fa.gz"], "the reference's bytes decide (mpileup reads it through bwa index's output)");
  t.same(compressionIssues(spec, inputs, { ...ctx, known: new Map([["data/ref.fa.gz", "bgzip"]]) }), [], "bgzip: fine");
  const gz = compressionIssues(spec, inputs, { ...ctx, known: new Map([["data/ref.fa.gz", "gzip"]]) });
  t.same(gz.map((i) => [i.code, i.path]), [["unsupported_compression", "/input/reference"]]);
  t.match(gz[0]?.message, /plain gzip, not bgzip, and step "mpileup" \(bcftools mpileup\) reads its reference uncompressed or bgzip-compressed only.*recompress it with bgzip/);

  const tabix: Pick<PipelineSpec, "steps" | "inputs"> = { inputs: [{ name: "vcf", type: "file" }], steps: [{ stepId: "idx", toolName: "tabix", parameters: { command: "index", inputFile: "${vcf}" } }] };
  t.same(compressionProbes(tabix, { vcf: "calls/x.vcf.gz" }, ctx), ["calls/x.vcf.gz"]);
  t.match(compressionIssues(tabix, { vcf: "calls/x.vcf.gz" }, { ...ctx, known: new Map([["calls/x.vcf.gz", "gzip"]]) }), [{ path: "/input/vcf" }]);
  t.same(compressionProbes(tabix, { vcf: "calls/x.vcf" }, ctx), [], "an uncompressed file needs no bytes read");
  t.same(compressionProbes(builtin("bwa-align"), inputs, ctx), [], "bwa reads gzip and bgzip alike: nothing to read");
});
