/** bedtools: genome arithmetic on intervals (coverage, intersections, conversions). */
import { z } from "zod";
import type { CommandDefinition, Params, ToolDefinition } from "./types.js";
import { Stager, bool, commonParams, extraArgs, invocation, optBool, out, outputPath, podResources, program, stem } from "./params.js";

const COMMANDS = ["genomecov", "intersect", "coverage", "sort", "merge", "bamtobed", "getfasta"] as const;

const schema = z.strictObject({
  ...commonParams("bedtools", COMMANDS),
  bedGraph: bool().optional(),
  perBase: bool().optional(),
  splitSpliced: bool().optional(),
});

/** `bedtools CMD <opts>` with output on stdout. */
function stdoutCommand(cmd: string, description: string, required: string[], suffix: string,
  argv: (s: Stager, p: Params) => string[]): CommandDefinition {
  return {
    description,
    required,
    build(p, ctx) {
      const s = new Stager(p);
      const args = argv(s, p);
      const first = s.inputs[0]?.local ?? "output";
      const output = outputPath(p, "outputFile", `${stem(first)}${suffix}`);
      return invocation(program(ctx, ["bedtools"]), [cmd, ...args, ...extraArgs(p)], s, [out(output)], { stdout: output });
    },
  };
}

/** A command whose inputFile is a BAM: a gzipped one does not open ("Failed to open file"). */
const bamOnly = (c: CommandDefinition): CommandDefinition => ({ ...c, reads: { inputFile: "plain" } });

const commands: Record<(typeof COMMANDS)[number], CommandDefinition> = {
  genomecov: bamOnly(stdoutCommand("genomecov", "Genome-wide coverage of a BAM (bedGraph with bedGraph=true, per base with perBase=true).", ["inputFile"], ".genomecov.txt",
    (s, p) => ["-ibam", s.file("inputFile"), ...(optBool(p, "bedGraph") ? ["-bg"] : []), ...(optBool(p, "perBase") ? ["-d"] : []), ...(optBool(p, "splitSpliced") ? ["-split"] : [])])),
  intersect: stdoutCommand("intersect", "Overlaps between intervals of inputFile (A) and inputFile2 (B).", ["inputFile", "inputFile2"], ".intersect.bed",
    (s) => ["-a", s.file("inputFile"), "-b", s.file("inputFile2")]),
  coverage: stdoutCommand("coverage", "Depth and breadth of coverage of inputFile2 (B) over the intervals of inputFile (A).", ["inputFile", "inputFile2"], ".coverage.bed",
    (s) => ["-a", s.file("inputFile"), "-b", s.file("inputFile2")]),
  sort: stdoutCommand("sort", "Sort intervals by chromosome and start.", ["inputFile"], ".sorted.bed", (s) => ["-i", s.file("inputFile")]),
  merge: stdoutCommand("merge", "Merge overlapping intervals (input must be sorted).", ["inputFile"], ".merged.bed", (s) => ["-i", s.file("inputFile")]),
  bamtobed: bamOnly(stdoutCommand("bamtobed", "Convert BAM alignments to BED intervals.", ["inputFile"], ".bed", (s) => ["-i", s.file("inputFile")])),
  getfasta: {
    description: "Extract the sequences of the intervals in inputFile from the reference FASTA.",
    required: ["inputFile", "reference"],
    build(p, ctx) {
      const s = new Stager(p);
      const ref = s.file("reference");
      const bed = s.file("inputFile");
      const output = outputPath(p, "outputFile", `${stem(bed)}.fa`);
      return invocation(program(ctx, ["bedtools"]), ["getfasta", "-fi", ref, "-bed", bed, ...extraArgs(p), "-fo", output], s, [out(output)]);
    },
  },
};

export const bedtools: ToolDefinition = {
  id: "bedtools",
  description: "Genome arithmetic: coverage, intersections, merging and conversion of genomic intervals.",
  version: "2.31.1",
  image: "quay.io/biocontainers/bedtools:2.31.1--hf5e1c6e_0",
  // genomecov and coverage keep per-chromosome arrays in memory.
  resources: podResources("1", "2Gi", "8Gi"),
  // Intervals through gzip or bgzip; the BAM of genomecov/bamtobed as BAM only; getfasta's
  // reference uncompressed only: bedtools 2.30 fails on a gzipped FASTA, and on a bgzip one
  // with a .fai beside it prints compressed bytes as sequence.
  reads: { inputFile: "gzip", inputFile2: "gzip", reference: "plain" },
  localExecutables: ["bedtools"],
  commands,
  fileParams: ["inputFile", "inputFile2", "reference"],
  inputSchema: schema,
};
