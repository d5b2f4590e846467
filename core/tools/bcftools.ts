/** bcftools: variant calling and VCF/BCF manipulation. */
import { z } from "zod";
import type { CommandDefinition, Params, ToolDefinition, BuildContext } from "./types.js";
import { Stager, bool, commonParams, extraArgs, flag, int, invocation, oneOf, optBool, optEnum, optInt, out, outputPath, program, stem, file, text, expression, value, optText, optValue } from "./params.js";

const COMMANDS = ["mpileup", "call", "view", "index", "filter", "norm", "stats", "query", "sort", "concat"] as const;
const TYPES = ["vcf", "vcf.gz", "bcf", "ubcf"] as const;

const schema = z.strictObject({
  ...commonParams("bcftools", COMMANDS),
  inputFiles: z.array(file()).min(1).max(1000).optional(),
  region: text().optional(),
  outputType: oneOf(TYPES).optional(),
  include: expression().optional(),
  exclude: expression().optional(),
  format: value().optional(),
  multiallelic: bool().optional(),
  variantsOnly: bool().optional(),
  maxDepth: int(1, 1_000_000).optional(),
  minMapQ: int(0, 255).optional(),
});

function typeFlag(p: Params, output: string): string[] {
  const t = optEnum(p, "outputType", TYPES) ?? (/\.vcf\.gz$/i.test(output) ? "vcf.gz" : /\.bcf$/i.test(output) ? "bcf" : "vcf");
  return ["-O", t === "vcf.gz" ? "z" : t === "bcf" ? "b" : t === "ubcf" ? "u" : "v"];
}

const bcf = (ctx: BuildContext) => program(ctx, ["bcftools"]);
const threads = (p: Params) => flag("--threads", optInt(p, "threads"));

/** A command of the shape `bcftools CMD [opts] -o OUT IN`. */
function simple(cmd: string, description: string, suffix: string, opts: (p: Params) => string[], withThreads = true): CommandDefinition {
  return {
    description,
    required: ["inputFile"],
    ...(withThreads ? { threaded: true } : {}),
    build(p, ctx) {
      const s = new Stager(p);
      const input = s.file("inputFile");
      const output = outputPath(p, "outputFile", `${stem(input)}${suffix}`);
      return invocation(bcf(ctx), [cmd, ...(withThreads ? threads(p) : []), ...opts(p), ...typeFlag(p, output), ...extraArgs(p), "-o", output, input], s, [out(output)]);
    },
  };
}

const commands: Record<(typeof COMMANDS)[number], CommandDefinition> = {
  mpileup: {
    description: "Pile up alignments (inputFile and/or inputFiles) against the reference (genotype likelihoods for `call`).",
    required: ["reference"],
    threaded: true,
    requiredAnyOf: [["inputFile"], ["inputFiles"]],
    build(p, ctx) {
      const s = new Stager(p);
      const first = s.optFile("inputFile");
      const list = ((p["inputFiles"] as string[] | undefined) ?? []).map((f, i) => s.add(`inputFiles/${i}`, f));
      const inputs = first ? [first, ...list] : list;
      const ref = s.file("reference");
      const output = outputPath(p, "outputFile", `${stem(inputs[0] ?? "calls")}.pileup.bcf`);
      return invocation(bcf(ctx), [
        "mpileup", ...threads(p), "-f", ref, ...flag("-r", optText(p, "region")), ...flag("-d", optInt(p, "maxDepth")),
        ...flag("-q", optInt(p, "minMapQ")), ...typeFlag(p, output), ...extraArgs(p), "-o", output, ...inputs,
      ], s, [out(output)]);
    },
  },
  call: simple("call", "Call SNVs and indels from an mpileup (multiallelic caller by default).", ".calls.vcf.gz",
    (p) => [optBool(p, "multiallelic") === false ? "-c" : "-m", ...(optBool(p, "variantsOnly") === false ? [] : ["-v"])]),
  view: simple("view", "Subset, filter and convert VCF/BCF.", ".view.vcf.gz",
    (p) => [...flag("-r", optText(p, "region")), ...flag("-i", optValue(p, "include")), ...flag("-e", optValue(p, "exclude"))]),
  filter: simple("filter", "Soft- or hard-filter records with an expression (include/exclude).", ".filtered.vcf.gz",
    (p) => [...flag("-i", optValue(p, "include")), ...flag("-e", optValue(p, "exclude"))]),
  norm: {
    description: "Left-align and normalise indels against the reference.",
    required: ["inputFile", "reference"],
    threaded: true,
    build(p, ctx) {
      const s = new Stager(p);
      const input = s.file("inputFile");
      const ref = s.file("reference");
      const output = outputPath(p, "outputFile", `${stem(input)}.norm.vcf.gz`);
      return invocation(bcf(ctx), ["norm", ...threads(p), "-f", ref, ...typeFlag(p, output), ...extraArgs(p), "-o", output, input], s, [out(output)]);
    },
  },
  // bcftools sort has no --threads option.
  sort: simple("sort", "Sort VCF/BCF records by position.", ".sorted.vcf.gz", () => [], false),
  index: {
    description: "Index a bgzip-compressed VCF or a BCF (CSI by default; tbi with args [\"-t\"]). The output is the indexed file with its index beside it.",
    required: ["inputFile"],
    reads: { inputFile: "bgzip" },
    threaded: true,
    build(p, ctx) {
      const s = new Stager(p);
      const input = s.indexed("input.vcf.gz");
      const extra = extraArgs(p);
      const tbi = extra.includes("-t") || extra.includes("--tbi");
      return invocation(bcf(ctx), ["index", ...threads(p), "-f", ...extra, input], s, [out(input, [input + (tbi ? ".tbi" : ".csi")])]);
    },
  },
  stats: {
    description: "Summary statistics of a VCF/BCF, written to outputFile.",
    required: ["inputFile"],
    threaded: true,
    build(p, ctx) {
      const s = new Stager(p);
      const input = s.file("inputFile");
      const output = outputPath(p, "outputFile", `${stem(input)}.bcftools-stats.txt`);
      return invocation(bcf(ctx), ["stats", ...threads(p), ...extraArgs(p), input], s, [out(output)], { stdout: output });
    },
  },
  query: {
    description: "Extract fields as text with a format string (format, e.g. \"%CHROM\\t%POS\\n\").",
    required: ["inputFile", "format"],
    build(p, ctx) {
      const s = new Stager(p);
      const input = s.file("inputFile");
      const output = outputPath(p, "outputFile", `${stem(input)}.query.tsv`);
      return invocation(bcf(ctx), [
        "query", "-f", optValue(p, "format") as string, ...flag("-i", optValue(p, "include")), ...flag("-e", optValue(p, "exclude")),
        ...extraArgs(p), "-o", output, input,
      ], s, [out(output)]);
    },
  },
  concat: {
    description: "Concatenate VCF/BCF files of the same samples (inputFiles).",
    required: ["inputFiles"],
    threaded: true,
    build(p, ctx) {
      const s = new Stager(p);
      const inputs = (p["inputFiles"] as string[]).map((f, i) => s.add(`inputFiles/${i}`, f));
      const output = outputPath(p, "outputFile", `${stem(inputs[0] ?? "concat")}.concat.vcf.gz`);
      return invocation(bcf(ctx), ["concat", ...threads(p), ...typeFlag(p, output), ...extraArgs(p), "-o", output, ...inputs], s, [out(output)]);
    },
  },
};

export const bcftools: ToolDefinition = {
  id: "bcftools",
  description: "Variant calling (mpileup + call) and VCF/BCF filtering, normalisation, indexing and statistics.",
  version: "1.21",
  image: "quay.io/biocontainers/bcftools:1.21--h3a4d415_1",
  // VCF/BCF through gzip or bgzip, read from start to end (a region, -r, needs an index, so
  // bgzip); the reference (mpileup -f, norm -f) at random through its .fai: uncompressed or
  // bgzip ("Cannot index files compressed with gzip, please use bgzip").
  reads: { inputFile: "gzip", inputFile2: "gzip", inputFiles: "gzip", reference: "bgzip" },
  localExecutables: ["bcftools"],
  commands,
  fileParams: ["inputFile", "inputFile2", "inputFiles", "reference"],
  inputSchema: schema,
};
