/**
 * Read aligners: bwa, bowtie2, hisat2 and minimap2. Each has an index command whose output
 * is the reference itself with its index files beside it (so `${index.outputFile}` brings
 * the whole index to the align step), and an align command writing SAM.
 */
import { z } from "zod";
import type { BuildContext, CommandDefinition, Params, ToolDefinition } from "./types.js";
import { Stager, basename, bool, commonParams, extraArgs, flag, invocation, oneOf, optBool, optEnum, optInt, optText, optValue, out, outputPath, podResources, program, stem, text, value } from "./params.js";

const readGroup = () => value().optional();

/**
 * Reads and references as the aligners read them (checked with the Debian binaries): FASTQ
 * and FASTA through zlib, so plain gzip and bgzip alike. An align command's `reference` is
 * the index prefix (its FASTA is not read again), so its compression does not matter.
 */
const GZIP_READS = { inputFile: "gzip", inputFile2: "gzip", reference: "gzip" } as const;
const readGroupId = () => text().optional();

function indexCommand(description: string, prog: (ctx: BuildContext) => readonly string[], suffixes: readonly string[],
  argv: (p: Params, ref: string) => string[], pod: Pick<CommandDefinition, "threaded" | "resources" | "reads">): CommandDefinition {
  return {
    description,
    required: ["inputFile"],
    ...pod,
    build(p, ctx) {
      const s = new Stager(p);
      const ref = s.indexed("reference.fa");
      return invocation(prog(ctx), argv(p, ref), s, [out(ref, suffixes.map((x) => ref + x))]);
    },
  };
}

/** Every align command stages the reference, then the reads (a mate in inputFile2 when paired). */
function stageReads(p: Params) {
  const s = new Stager(p);
  const ref = s.file("reference");
  const r1 = s.file("inputFile");
  const r2 = s.optFile("inputFile2");
  return { s, ref, r1, r2, output: outputPath(p, "outputFile", `${stem(r1)}.sam`) };
}

/** bowtie2 and hisat2 take the index prefix, then -U, or -1/-2 for pairs. */
function stageIndexedReads(p: Params) {
  const { s, ref, r1, r2, output } = stageReads(p);
  return { s, r1, output, readArgs: ["-x", ref, ...(r2 ? ["-1", r1, "-2", r2] : ["-U", r1])] };
}

/* ---------- bwa ---------- */
const BWA = ["index", "mem"] as const;
export const bwa: ToolDefinition = {
  id: "bwa",
  description: "Burrows-Wheeler Aligner for short reads against a large reference (bwa mem).",
  version: "0.7.18",
  image: "quay.io/biocontainers/bwa:0.7.18--he4a0461_0",
  reads: GZIP_READS,
  localExecutables: ["bwa"],
  fileParams: ["inputFile", "inputFile2", "reference"],
  inputSchema: z.strictObject({ ...commonParams("bwa", BWA), readGroup: readGroup(), markShorterSplits: bool().optional() }),
  commands: {
    index: indexCommand("Build the FM-index of a reference FASTA (the output is the reference with .amb .ann .bwt .pac .sa beside it).",
      (ctx) => program(ctx, ["bwa"]), [".amb", ".ann", ".bwt", ".pac", ".sa"], (p, ref) => ["index", ...extraArgs(p), ref],
      // Single-threaded; a human reference takes about 5 GB.
      { resources: podResources("1", "6Gi", "8Gi", "20Gi") }),
    mem: {
      description: "Align single-end (inputFile) or paired-end (inputFile, inputFile2) reads; SAM to outputFile.",
      required: ["inputFile", "reference"],
      threaded: true,
      // The human index (about 5.5 GB) in memory plus the reads in flight; FASTQs in, SAM out.
      resources: podResources("4", "10Gi", "16Gi", "50Gi"),
      build(p, ctx) {
        const { s, ref, r1, r2, output } = stageReads(p);
        return invocation(program(ctx, ["bwa"]), [
          "mem", ...flag("-t", optInt(p, "threads")), ...flag("-R", optValue(p, "readGroup")), ...(optBool(p, "markShorterSplits") ? ["-M"] : []),
          ...extraArgs(p), ref, r1, ...(r2 ? [r2] : []),
        ], s, [out(output)], { stdout: output });
      },
    },
  },
};


/* ---------- bowtie2 ---------- */
const BT2 = ["build", "align"] as const;
const BT2_SUFFIXES = [".1.bt2", ".2.bt2", ".3.bt2", ".4.bt2", ".rev.1.bt2", ".rev.2.bt2"];
export const bowtie2: ToolDefinition = {
  id: "bowtie2",
  description: "Fast gapped short-read aligner (bowtie2-build to index, align to map).",
  version: "2.5.4",
  image: "quay.io/biocontainers/bowtie2:2.5.4--he96a11b_6",
  reads: GZIP_READS,
  localExecutables: ["bowtie2", "bowtie2-build"],
  fileParams: ["inputFile", "inputFile2", "reference"],
  inputSchema: z.strictObject({ ...commonParams("bowtie2", BT2), preset: oneOf(["very-fast", "fast", "sensitive", "very-sensitive"]).optional(), readGroupId: readGroupId() }),
  commands: {
    build: indexCommand("Build the index of a reference FASTA, using the reference path as index prefix.",
      (ctx) => program(ctx, ["bowtie2-build"]), BT2_SUFFIXES, (p, ref) => [...flag("--threads", optInt(p, "threads")), ...extraArgs(p), ref, ref],
      { threaded: true, resources: podResources("4", "8Gi", "16Gi", "20Gi") }),
    align: {
      description: "Align single-end or paired-end reads to an index (reference = the indexed FASTA); SAM to outputFile.",
      required: ["inputFile", "reference"],
      threaded: true,
      resources: podResources("4", "6Gi", "8Gi", "50Gi"),
      build(p, ctx) {
        const { s, output, readArgs } = stageIndexedReads(p);
        const preset = optEnum(p, "preset", ["very-fast", "fast", "sensitive", "very-sensitive"]);
        return invocation(program(ctx, ["bowtie2"]), [
          ...flag("-p", optInt(p, "threads")), ...(preset ? [`--${preset}`] : []), ...flag("--rg-id", optText(p, "readGroupId")),
          ...extraArgs(p), ...readArgs, "-S", output,
        ], s, [out(output)]);
      },
    },
  },
};

/* ---------- hisat2 ---------- */
const HT2 = ["build", "align"] as const;
const HT2_SUFFIXES = [1, 2, 3, 4, 5, 6, 7, 8].map((i) => `.${i}.ht2`);
export const hisat2: ToolDefinition = {
  id: "hisat2",
  description: "Spliced aligner for RNA-seq reads (hisat2-build to index, align to map).",
  version: "2.2.1",
  image: "quay.io/biocontainers/hisat2:2.2.1--h1b792b2_3",
  reads: GZIP_READS,
  localExecutables: ["hisat2", "hisat2-build"],
  fileParams: ["inputFile", "inputFile2", "reference"],
  inputSchema: z.strictObject({ ...commonParams("hisat2", HT2), noSpliced: bool().optional(), readGroupId: readGroupId() }),
  commands: {
    build: indexCommand("Build the HISAT2 index of a reference FASTA, using the reference path as index prefix.",
      (ctx) => program(ctx, ["hisat2-build"]), HT2_SUFFIXES, (p, ref) => [...flag("-p", optInt(p, "threads")), ...extraArgs(p), ref, ref],
      // hisat2-build reads plain FASTA only: a gzipped one fails ("Reference file does not seem to be a FASTA file").
      { threaded: true, resources: podResources("4", "8Gi", "16Gi", "20Gi"), reads: { inputFile: "plain" } }),
    align: {
      description: "Align single-end or paired-end RNA-seq reads (reference = the indexed FASTA); SAM to outputFile, alignment summary to outputFile2.",
      required: ["inputFile", "reference"],
      threaded: true,
      resources: podResources("4", "8Gi", "12Gi", "50Gi"),
      build(p, ctx) {
        const { s, r1, output, readArgs } = stageIndexedReads(p);
        const summary = outputPath(p, "outputFile2", `${stem(r1)}.hisat2-summary.txt`);
        return invocation(program(ctx, ["hisat2"]), [
          ...flag("-p", optInt(p, "threads")), ...(optBool(p, "noSpliced") ? ["--no-spliced-alignment"] : []),
          ...flag("--rg-id", optText(p, "readGroupId")), "--summary-file", summary,
          ...extraArgs(p), ...readArgs, "-S", output,
        ], s, [out(output), out(summary)]);
      },
    },
  },
};

/* ---------- minimap2 ---------- */
const MM2 = ["index", "align"] as const;
const MM2_PRESETS = ["map-ont", "map-pb", "map-hifi", "sr", "splice", "asm5", "asm10", "asm20"] as const;
export const minimap2: ToolDefinition = {
  id: "minimap2",
  description: "Versatile aligner for long reads, short reads and assemblies (SAM output).",
  version: "2.28",
  image: "quay.io/biocontainers/minimap2:2.28--he4a0461_0",
  reads: GZIP_READS,
  localExecutables: ["minimap2"],
  fileParams: ["inputFile", "inputFile2", "reference"],
  inputSchema: z.strictObject({ ...commonParams("minimap2", MM2), preset: oneOf(MM2_PRESETS).optional(), readGroup: readGroup() }),
  commands: {
    index: {
      description: "Pre-build a minimizer index (outputFile, default <reference>.mmi).",
      required: ["inputFile"],
      resources: podResources("1", "8Gi", "16Gi", "20Gi"),
      build(p, ctx) {
        const s = new Stager(p);
        const ref = s.file("inputFile");
        const output = outputPath(p, "outputFile", `${basename(ref)}.mmi`);
        return invocation(program(ctx, ["minimap2"]), [...flag("-x", optEnum(p, "preset", MM2_PRESETS)), ...extraArgs(p), "-d", output, ref], s, [out(output)]);
      },
    },
    align: {
      description: "Align reads (inputFile, optional mate inputFile2) to a reference FASTA or .mmi; SAM to outputFile.",
      required: ["inputFile", "reference"],
      threaded: true,
      resources: podResources("4", "10Gi", "16Gi", "50Gi"),
      build(p, ctx) {
        const { s, ref, r1, r2, output } = stageReads(p);
        return invocation(program(ctx, ["minimap2"]), [
          "-a", ...flag("-x", optEnum(p, "preset", MM2_PRESETS)), ...flag("-t", optInt(p, "threads")), ...flag("-R", optValue(p, "readGroup")),
          ...extraArgs(p), "-o", output, ref, r1, ...(r2 ? [r2] : []),
        ], s, [out(output)]);
      },
    },
  },
};
