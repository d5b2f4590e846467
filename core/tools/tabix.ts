/** tabix and bgzip (htslib): compress and index tab-delimited genomic files. */
import { z } from "zod";
import type { CommandDefinition, ToolDefinition } from "./types.js";
import { Stager, positional, basename, bool, commonParams, extraArgs, flag, invocation, oneOf, optBool, optEnum, optInt, out, outputPath, program, stem, text } from "./params.js";

const COMMANDS = ["index", "bgzip", "query"] as const;
const PRESETS = ["gff", "bed", "sam", "vcf"] as const;

const schema = z.strictObject({
  ...commonParams("tabix", COMMANDS),
  preset: oneOf(PRESETS).optional(),
  csi: bool().optional(),
  region: text().optional(),
});

const commands: Record<(typeof COMMANDS)[number], CommandDefinition> = {
  index: {
    description: "Index a bgzip-compressed file (preset from the extension unless given). The output is the indexed file with its index beside it.",
    required: ["inputFile"],
    reads: { inputFile: "bgzip" },
    build(p, ctx) {
      const s = new Stager(p);
      const input = s.indexed("input.gz");
      const preset = optEnum(p, "preset", PRESETS) ?? (/\.vcf\.gz$/i.test(input) ? "vcf" : /\.bed\.gz$/i.test(input) ? "bed" : /\.gff3?\.gz$/i.test(input) ? "gff" : /\.sam\.gz$/i.test(input) ? "sam" : undefined);
      const csi = optBool(p, "csi") === true;
      return invocation(program(ctx, ["tabix"]), ["-f", ...flag("-p", preset), ...(csi ? ["-C"] : []), ...extraArgs(p), input], s,
        [out(input, [input + (csi ? ".csi" : ".tbi")])]);
    },
  },
  bgzip: {
    description: "Compress a file with bgzip (block gzip, indexable).",
    required: ["inputFile"],
    // An input already compressed would be compressed twice.
    reads: { inputFile: "plain" },
    threaded: true,
    build(p, ctx) {
      const s = new Stager(p);
      const input = s.file("inputFile");
      const output = outputPath(p, "outputFile", `${basename(input).replace(/\.gz$/i, "")}.gz`);
      return invocation(program(ctx, ["bgzip"]), ["-c", ...flag("-@", optInt(p, "threads")), ...extraArgs(p), input], s, [out(output)], { stdout: output });
    },
  },
  query: {
    description: "Extract the records of a region from an indexed file.",
    required: ["inputFile", "region"],
    reads: { inputFile: "bgzip" },
    build(p, ctx) {
      const s = new Stager(p);
      const input = s.file("inputFile");
      const output = outputPath(p, "outputFile", `${stem(input)}.region.txt`);
      return invocation(program(ctx, ["tabix"]), ["-h", ...extraArgs(p), input, positional(p, "region") as string], s, [out(output)], { stdout: output });
    },
  },
};

export const tabix: ToolDefinition = {
  id: "tabix",
  description: "Generic indexer for bgzip-compressed TAB-delimited genome files (VCF, BED, GFF), and bgzip.",
  version: "1.21",
  image: "quay.io/biocontainers/htslib:1.21--h566b1c6_1",
  localExecutables: ["tabix", "bgzip"],
  commands,
  fileParams: ["inputFile", "inputFile2", "reference"],
  inputSchema: schema,
};
