/**
 * Broad Institute Java tools: Picard and GATK. Both take `-I`/`-O`/`-R` style arguments.
 * Picard runs as Debian's `PicardCommandLine <Tool>` locally and `picard <Tool>` in its
 * image; GATK has no Debian package and runs from the Broad image only.
 */
import { z } from "zod";
import type { CommandDefinition, ToolDefinition } from "./types.js";
import { Stager, bool, commonParams, extraArgs, flag, invocation, oneOf, optBool, optEnum, optInt, optStr, out, outputPath, podResources, program, stem, text, optText, file } from "./params.js";

/* ---------- picard ---------- */
const PICARD = ["SortSam", "MarkDuplicates", "CreateSequenceDictionary", "CollectAlignmentSummaryMetrics", "AddOrReplaceReadGroups", "BuildBamIndex", "CollectInsertSizeMetrics"] as const;

/** Sorting and duplicate marking hold many reads in the JVM's heap and spill to scratch space. */
const PICARD_HEAVY = podResources("2", "8Gi", "12Gi", "50Gi");

function picardCommand(tool: (typeof PICARD)[number], description: string, required: string[],
  build: (s: Stager, p: Record<string, unknown>) => { args: string[]; outputs: ReturnType<typeof out>[] }, resources?: CommandDefinition["resources"]): CommandDefinition {
  return {
    description,
    required,
    ...(resources ? { resources } : {}),
    build(p, ctx) {
      const s = new Stager(p);
      const { args, outputs } = build(s, p);
      return invocation(program(ctx, ["PicardCommandLine", tool], ["picard", tool]), [...args, ...extraArgs(p)], s, outputs);
    },
  };
}

export const picard: ToolDefinition = {
  id: "picard",
  description: "Picard: manipulating high-throughput sequencing data (sorting, duplicate marking, metrics, dictionaries).",
  version: "3.3.0",
  image: "quay.io/biocontainers/picard:3.3.0--hdfd78af_0",
  // A JVM: the heap defaults to a quarter of the container's memory limit.
  resources: podResources("1", "4Gi", "8Gi"),
  // htsjdk reads SAM through gzip too, and a reference FASTA through gzip or bgzip (checked
  // with Debian's Picard); BuildBamIndex takes a BAM only.
  reads: { inputFile: "gzip", inputFile2: "gzip", reference: "gzip" },
  localExecutables: ["PicardCommandLine"],
  fileParams: ["inputFile", "inputFile2", "reference"],
  inputSchema: z.strictObject({
    ...commonParams("picard", PICARD),
    sortOrder: oneOf(["coordinate", "queryname", "unsorted"]).optional(),
    removeDuplicates: bool().optional(),
    readGroupId: text().optional(),
    readGroupSample: text().optional(),
    readGroupLibrary: text().optional(),
    readGroupPlatform: text().optional(),
  }),
  commands: {
    SortSam: picardCommand("SortSam", "Sort a SAM/BAM (coordinate by default).", ["inputFile"], (s, p) => {
      const i = s.file("inputFile");
      const o = outputPath(p, "outputFile", `${stem(i)}.sorted.bam`);
      return { args: ["-I", i, "-O", o, "--SORT_ORDER", optEnum(p, "sortOrder", ["coordinate", "queryname", "unsorted"]) ?? "coordinate"], outputs: [out(o)] };
    }, PICARD_HEAVY),
    MarkDuplicates: picardCommand("MarkDuplicates", "Mark (or remove) duplicate reads. Outputs: BAM (outputFile), metrics (outputFile2).", ["inputFile"], (s, p) => {
      const i = s.file("inputFile");
      const o = outputPath(p, "outputFile", `${stem(i)}.markdup.bam`);
      const m = outputPath(p, "outputFile2", `${stem(i)}.markdup-metrics.txt`);
      return { args: ["-I", i, "-O", o, "-M", m, ...(optBool(p, "removeDuplicates") ? ["--REMOVE_DUPLICATES", "true"] : [])], outputs: [out(o), out(m)] };
    }, PICARD_HEAVY),
    CreateSequenceDictionary: picardCommand("CreateSequenceDictionary", "Create the .dict of a reference FASTA. The output is the reference with its .dict beside it.", ["inputFile"], (s) => {
      const r = s.indexed("reference.fa");
      const dict = r.replace(/\.(fa|fasta|fna)(\.gz)?$/i, "") + ".dict";
      return { args: ["-R", r, "-O", dict], outputs: [out(r, [dict])] };
    }),
    CollectAlignmentSummaryMetrics: picardCommand("CollectAlignmentSummaryMetrics", "Alignment summary metrics of a BAM.", ["inputFile"], (s, p) => {
      const i = s.file("inputFile");
      const r = s.optFile("reference");
      const o = outputPath(p, "outputFile", `${stem(i)}.alignment-metrics.txt`);
      return { args: ["-I", i, "-O", o, ...flag("-R", r)], outputs: [out(o)] };
    }),
    CollectInsertSizeMetrics: picardCommand("CollectInsertSizeMetrics", "Insert size metrics (outputFile) and histogram PDF (outputFile2) of a paired-end BAM.", ["inputFile"], (s, p) => {
      const i = s.file("inputFile");
      const o = outputPath(p, "outputFile", `${stem(i)}.insert-size.txt`);
      const h = outputPath(p, "outputFile2", `${stem(i)}.insert-size.pdf`);
      return { args: ["-I", i, "-O", o, "-H", h], outputs: [out(o), out(h)] };
    }),
    AddOrReplaceReadGroups: picardCommand("AddOrReplaceReadGroups", "Set the read group of every read.", ["inputFile", "readGroupSample"], (s, p) => {
      const i = s.file("inputFile");
      const o = outputPath(p, "outputFile", `${stem(i)}.rg.bam`);
      const sample = optText(p, "readGroupSample") as string;
      return {
        args: ["-I", i, "-O", o, "--RGID", optText(p, "readGroupId") ?? sample, "--RGSM", sample, "--RGLB", optText(p, "readGroupLibrary") ?? "lib1",
          "--RGPL", optText(p, "readGroupPlatform") ?? "ILLUMINA", "--RGPU", "unit1"],
        outputs: [out(o)],
      };
    }),
    BuildBamIndex: { ...picardCommand("BuildBamIndex", "Index a BAM (<name>.bai). The output is the BAM with its index beside it.", ["inputFile"], (s) => {
      const i = s.indexed("input.bam");
      const bai = i.replace(/\.bam$/i, "") + ".bai";
      return { args: ["-I", i, "-O", bai], outputs: [out(i, [bai])] };
    }), reads: { inputFile: "plain" } },
  },
};

/* ---------- gatk ---------- */
const GATK = ["HaplotypeCaller", "Mutect2", "BaseRecalibrator", "ApplyBQSR", "CreateSequenceDictionary", "IndexFeatureFile"] as const;

export const gatk: ToolDefinition = {
  id: "gatk",
  description: "GATK 4: germline (HaplotypeCaller) and somatic (Mutect2) variant discovery and base quality recalibration.",
  version: "4.6.1.0",
  image: "broadinstitute/gatk:4.6.1.0",
  imageNote: "Not packaged by Debian: available in cluster mode (the Broad image), or locally when a `gatk` launcher is on PATH.",
  resources: podResources("1", "4Gi", "8Gi", "20Gi"),
  // Not installed here, so from GATK's documentation rather than a run: alignments are
  // BAM/CRAM read through their index; a reference is uncompressed or bgzip (with .fai, .gzi
  // and .dict beside it); knownSites and IndexFeatureFile's input are indexed, so bgzip;
  // CreateSequenceDictionary reads a FASTA from start to end, through gzip too.
  reads: { inputFile: "plain", inputFile2: "plain", reference: "bgzip", knownSites: "bgzip" },
  localExecutables: ["gatk"],
  fileParams: ["inputFile", "inputFile2", "reference", "knownSites"],
  inputSchema: z.strictObject({
    ...commonParams("gatk", GATK),
    knownSites: file().optional(),
    region: text().optional(),
    emitRefConfidence: oneOf(["NONE", "GVCF", "BP_RESOLUTION"]).optional(),
    tumorSample: text().optional(),
    javaOptions: z.string().regex(/^(-X[a-zA-Z0-9]+|-D[A-Za-z0-9_.]+=[A-Za-z0-9_.:-]*)(\s+(-X[a-zA-Z0-9]+|-D[A-Za-z0-9_.]+=[A-Za-z0-9_.:-]*))*$/,
      "expected JVM options such as -Xmx4g").optional(),
  }),
  commands: Object.fromEntries(GATK.map((tool): [string, CommandDefinition] => [tool, {
    description: {
      HaplotypeCaller: "Germline SNVs and indels (VCF, or GVCF with emitRefConfidence=GVCF) from a BAM and reference.",
      Mutect2: "Somatic SNVs and indels from a tumour BAM (tumorSample) and reference.",
      BaseRecalibrator: "Recalibration table (outputFile) from a BAM, reference and knownSites.",
      ApplyBQSR: "Apply a recalibration table (inputFile2) to a BAM.",
      CreateSequenceDictionary: "Create the .dict of a reference FASTA. The output is the reference with its .dict beside it.",
      IndexFeatureFile: "Index a VCF/BED feature file. The output is the file with its index beside it.",
    }[tool],
    // HaplotypeCaller's pair-HMM takes a thread count (--native-pair-hmm-threads); the callers hold a region's reads in the heap.
    ...(tool === "HaplotypeCaller" ? { threaded: true } : {}),
    ...(tool === "HaplotypeCaller" || tool === "Mutect2" ? { resources: podResources("2", "8Gi", "8Gi", "50Gi") }
      : tool === "BaseRecalibrator" || tool === "ApplyBQSR" ? { resources: podResources("1", "4Gi", "8Gi", "50Gi") } : {}),
    ...(tool === "CreateSequenceDictionary" ? { reads: { inputFile: "gzip" } } : tool === "IndexFeatureFile" ? { reads: { inputFile: "bgzip" } } : {}),
    required: tool === "CreateSequenceDictionary" || tool === "IndexFeatureFile" ? ["inputFile"]
      : tool === "BaseRecalibrator" ? ["inputFile", "reference", "knownSites"]
        : tool === "ApplyBQSR" ? ["inputFile", "inputFile2", "reference"] : ["inputFile", "reference"],
    build(p, ctx) {
      const s = new Stager(p);
      const java = optStr(p, "javaOptions");
      const prog = program(ctx, ["gatk"]);
      const pre = [...(java ? ["--java-options", java] : []), tool];
      if (tool === "CreateSequenceDictionary" || tool === "IndexFeatureFile") {
        const f = s.indexed("input");
        const idx = tool === "CreateSequenceDictionary" ? f.replace(/\.(fa|fasta|fna)(\.gz)?$/i, "") + ".dict" : f + (/\.gz$/i.test(f) ? ".tbi" : ".idx");
        const args = tool === "CreateSequenceDictionary" ? ["-R", f, "-O", idx] : ["-I", f];
        return invocation(prog, [...pre, ...args, ...extraArgs(p)], s, [out(f, [idx])]);
      }
      const i = s.file("inputFile");
      const ref = s.file("reference");
      const region = flag("-L", optText(p, "region"));
      const threads = optInt(p, "threads");
      if (tool === "BaseRecalibrator") {
        const known = s.file("knownSites");
        const o = outputPath(p, "outputFile", `${stem(i)}.recal.table`);
        return invocation(prog, [...pre, "-I", i, "-R", ref, "--known-sites", known, ...region, "-O", o, ...extraArgs(p)], s, [out(o)]);
      }
      if (tool === "ApplyBQSR") {
        const table = s.file("inputFile2");
        const o = outputPath(p, "outputFile", `${stem(i)}.recal.bam`);
        return invocation(prog, [...pre, "-I", i, "-R", ref, "--bqsr-recal-file", table, ...region, "-O", o, ...extraArgs(p)], s, [out(o)]);
      }
      const gvcf = optEnum(p, "emitRefConfidence", ["NONE", "GVCF", "BP_RESOLUTION"]);
      const o = outputPath(p, "outputFile", `${stem(i)}${gvcf && gvcf !== "NONE" ? ".g" : ""}.vcf.gz`);
      const extra = tool === "Mutect2" ? flag("-tumor", optText(p, "tumorSample"))
        : [...flag("-ERC", gvcf), ...flag("--native-pair-hmm-threads", threads)];
      return invocation(prog, [...pre, "-I", i, "-R", ref, ...region, ...extra, "-O", o, ...extraArgs(p)], s, [out(o, [o + ".tbi"])]);
    },
  }])),
};
