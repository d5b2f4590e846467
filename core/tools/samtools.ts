/** samtools: SAM/BAM/CRAM manipulation. Commands are exactly the spec's list. */
import { z } from "zod";
import type { BuildContext, CommandDefinition, Params, ToolDefinition } from "./types.js";
import { tabix as tabixTool } from "./tabix.js";
import { Stager, positional, bool, commonParams, extraArgs, flag, int, invocation, optBool, optEnum, optInt, optStr, out, outputPath, podResources, program, stem, oneOf, file, text, optText } from "./params.js";

const COMMANDS = ["view", "sort", "index", "merge", "stats", "flagstat", "idxstats", "depth", "coverage", "tabix"] as const;

const schema = z.strictObject({
  ...commonParams("samtools", COMMANDS),
  inputFiles: z.array(file()).min(1).max(1000).optional(),
  region: text().optional(),
  outputFormat: oneOf(["sam", "bam", "cram"]).optional(),
  minMapQ: int(0, 255).optional(),
  includeFlags: int(0, 65535).optional(),
  excludeFlags: int(0, 65535).optional(),
  byName: bool().optional(),
  csi: bool().optional(),
  allPositions: bool().optional(),
  preset: oneOf(["gff", "bed", "sam", "vcf"]).optional(),
});

const sam = ["samtools"] as const;
const tabixIndex = tabixTool.commands.index as CommandDefinition;

/** Commands that read an index or count flags: little CPU and memory. */
const LIGHT = podResources("250m", "256Mi", "1Gi");

/** `samtools CMD <options> -o OUT IN`: one staged input, one output named after it. */
function toFile(cmd: string, description: string, suffix: string, options: (p: Params) => string[], pod: Pick<CommandDefinition, "threaded" | "resources"> = {}): CommandDefinition {
  return {
    description,
    required: ["inputFile"],
    ...pod,
    build(p: Params, ctx: BuildContext) {
      const s = new Stager(p);
      const input = s.file("inputFile");
      const output = outputPath(p, "outputFile", `${stem(input)}${suffix}`);
      return invocation(program(ctx, sam), [cmd, ...options(p), ...extraArgs(p), "-o", output, input], s, [out(output)]);
    },
  };
}
const threadsOpt = (p: Record<string, unknown>) => flag("-@", optInt(p, "threads"));

const commands: Record<(typeof COMMANDS)[number], CommandDefinition> = {
  view: {
    description: "Convert, filter or subset alignments (optionally to a region).",
    required: ["inputFile"],
    threaded: true,
    build(p, ctx) {
      const s = new Stager(p);
      const input = s.file("inputFile");
      const ref = s.optFile("reference");
      const output = outputPath(p, "outputFile", `${stem(input)}.view.bam`);
      const fmt = optEnum(p, "outputFormat", ["sam", "bam", "cram"]) ?? (/\.cram$/i.test(output) ? "cram" : /\.sam$/i.test(output) ? "sam" : "bam");
      const fmtFlags = fmt === "bam" ? ["-b"] : fmt === "cram" ? ["-C"] : ["-h"];
      const region = positional(p, "region");
      return invocation(program(ctx, sam), [
        "view", ...threadsOpt(p), ...fmtFlags,
        ...flag("-q", optInt(p, "minMapQ")), ...flag("-f", optInt(p, "includeFlags")), ...flag("-F", optInt(p, "excludeFlags")),
        ...flag("-T", ref), ...extraArgs(p), "-o", output, input, ...(region ? [region] : []),
      ], s, [out(output)]);
    },
  },
  // 768 MiB of reads per thread in memory, the rest spilled to temporary files beside the output.
  sort: toFile("sort", "Sort alignments by coordinate (or by read name with byName).", ".sorted.bam",
    (p) => [...threadsOpt(p), ...(optBool(p, "byName") ? ["-n"] : [])], { threaded: true, resources: podResources("2", "4Gi", "8Gi", "50Gi") }),
  index: {
    description: "Index a coordinate-sorted BAM/CRAM. The output is the indexed file with its index beside it, so `${step.outputFile}` brings both.",
    required: ["inputFile"],
    // A compressed SAM is indexed only when bgzip-compressed ("not BGZF compressed").
    reads: { inputFile: "bgzip" },
    threaded: true,
    resources: LIGHT,
    build(p, ctx) {
      const s = new Stager(p);
      const name = outputPath(p, "outputFile", stem(optStr(p, "inputFile") ?? "") + (/\.cram$/i.test(optStr(p, "inputFile") ?? "") ? ".cram" : ".bam"));
      const input = s.file("inputFile", name);
      const csi = optBool(p, "csi") === true;
      const index = input + (/\.cram$/i.test(input) ? ".crai" : csi ? ".csi" : ".bai");
      return invocation(program(ctx, sam), ["index", ...threadsOpt(p), ...(csi ? ["-c"] : []), ...extraArgs(p), input], s, [out(input, [index])]);
    },
  },
  merge: {
    description: "Merge sorted alignment files (inputFiles, or inputFile and inputFile2).",
    required: [],
    requiredAnyOf: [["inputFiles"], ["inputFile", "inputFile2"]],
    threaded: true,
    resources: podResources("2", "2Gi", "4Gi", "50Gi"),
    build(p, ctx) {
      const s = new Stager(p);
      const list = p["inputFiles"] as string[] | undefined;
      const inputs = list
        ? list.map((f, i) => s.add(`inputFiles/${i}`, f))
        : [s.file("inputFile"), s.file("inputFile2")];
      const output = outputPath(p, "outputFile", `${stem(inputs[0] ?? "merged")}.merged.bam`);
      return invocation(program(ctx, sam), ["merge", ...threadsOpt(p), "-f", ...extraArgs(p), "-o", output, ...inputs], s, [out(output)]);
    },
  },
  stats: statsLike("stats", "Comprehensive alignment statistics.", ".stats.txt"),
  flagstat: { ...statsLike("flagstat", "Counts of reads by SAM flag.", ".flagstat.txt"), resources: LIGHT },
  idxstats: { ...statsLike("idxstats", "Per-reference read counts from the index.", ".idxstats.txt"), resources: LIGHT },
  depth: toFile("depth", "Per-position read depth (optionally a region; allPositions includes zero depth).", ".depth.tsv",
    (p) => [...(optBool(p, "allPositions") ? ["-a"] : []), ...flag("-Q", optInt(p, "minMapQ")), ...flag("-r", optText(p, "region"))]),
  coverage: toFile("coverage", "Per-reference coverage summary (optionally a region).", ".coverage.tsv",
    (p) => [...flag("-q", optInt(p, "minMapQ")), ...flag("-r", optText(p, "region"))]),
  // htslib's tabix ships with samtools: the same command as the tabix tool's `index`.
  tabix: {
    ...tabixIndex,
    reads: { inputFile: "bgzip" },
    resources: LIGHT,
    description: "Index a bgzip-compressed tab-delimited file (htslib's tabix, shipped with samtools). The output is the indexed file with its .tbi beside it.",
  },
};

function statsLike(cmd: "stats" | "flagstat" | "idxstats", description: string, suffix: string): CommandDefinition {
  return {
    description: `${description} Written to outputFile.`,
    required: ["inputFile"],
    ...(cmd === "idxstats" ? {} : { threaded: true }),
    build(p, ctx) {
      const s = new Stager(p);
      const input = s.file("inputFile");
      const output = outputPath(p, "outputFile", `${stem(input)}${suffix}`);
      return invocation(program(ctx, sam), [cmd, ...(cmd === "idxstats" ? [] : threadsOpt(p)), ...extraArgs(p), input], s, [out(output)], { stdout: output });
    },
  };
}

export const samtools: ToolDefinition = {
  id: "samtools",
  description: "Reading, writing, sorting, indexing and summarising SAM/BAM/CRAM alignments.",
  version: "1.21",
  image: "quay.io/biocontainers/samtools:1.21--h50ea8bc_0",
  resources: podResources("1", "1Gi", "4Gi"),
  // htslib reads SAM, BAM, CRAM and text through gzip or bgzip; a reference (view -T) is read
  // at random through its .fai, so uncompressed or bgzip only.
  reads: { inputFile: "gzip", inputFile2: "gzip", inputFiles: "gzip", reference: "bgzip" },
  localExecutables: ["samtools", "tabix"],
  commands,
  fileParams: ["inputFile", "inputFile2", "inputFiles", "reference"],
  inputSchema: schema,
};
