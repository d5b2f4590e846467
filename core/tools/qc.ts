/** Read quality control and trimming: FastQC and Trimmomatic. */
import { z } from "zod";
import type { BuildContext, Params, ToolDefinition } from "./types.js";
import { BuildError } from "./types.js";
import { Stager, basename, commonParams, extraArgs, flag, invocation, oneOf, optEnum, optInt, out, outputPath, podResources, program, stem, file } from "./params.js";

/** FastQC names its reports after the input, stripping these suffixes in this order, case-sensitively. */
function fastqcName(file: string): string {
  let name = basename(file);
  for (const ext of [".gz", ".bz2", ".txt", ".fastq", ".fq", ".csfastq", ".sam", ".bam"]) {
    if (name.endsWith(ext)) name = name.slice(0, -ext.length);
  }
  return name;
}

const FASTQC = ["fastqc"] as const;
const { outputFile: _o1, outputFile2: _o2, ...fastqcCommon } = commonParams("fastqc", FASTQC);
export const fastqc: ToolDefinition = {
  id: "fastqc",
  description: "Quality-control report for high-throughput sequencing reads (HTML report and zip of the data).",
  version: "0.12.1",
  image: "quay.io/biocontainers/fastqc:0.12.1--hdfd78af_0",
  // FastQC reads FASTQ through gzip or bgzip (and names its report without the .gz).
  reads: { inputFile: "gzip", inputFile2: "gzip" },
  localExecutables: ["fastqc"],
  defaultCommand: "fastqc",
  fileParams: ["inputFile", "inputFile2", "reference"],
  // FastQC names its own outputs (<name>_fastqc.html, <name>_fastqc.zip), so outputFile is not accepted.
  inputSchema: z.strictObject({ ...fastqcCommon }),
  commands: {
    fastqc: {
      description: "QC report of inputFile (and inputFile2). Outputs, by position: report HTML, data zip (of inputFile, then inputFile2).",
      required: ["inputFile"],
      // One thread per file; 250 MB of heap per thread.
      threaded: true,
      resources: podResources("1", "1Gi", "2Gi"),
      build(p, ctx) {
        const s = new Stager(p);
        const files = [s.file("inputFile"), s.optFile("inputFile2")].filter((f): f is string => f !== undefined);
        const outputs = files.flatMap((f) => [out(`qc/${fastqcName(f)}_fastqc.html`), out(`qc/${fastqcName(f)}_fastqc.zip`)]);
        return invocation(program(ctx, ["fastqc"]), ["--outdir", "qc", ...flag("--threads", optInt(p, "threads")), ...extraArgs(p), ...files], s, outputs, { mkdirs: ["qc"] });
      },
    },
  },
};

const TRIM = ["PE", "SE"] as const;
const DEFAULT_STEPS = ["LEADING:3", "TRAILING:3", "SLIDINGWINDOW:4:15", "MINLEN:36"];
/** A trimming step; ILLUMINACLIP (which names a file) comes only from `adapters`, a staged workspace file. */
const STEP = /^(SLIDINGWINDOW|MAXINFO|LEADING|TRAILING|CROP|HEADCROP|MINLEN|AVGQUAL|TOPHRED33|TOPHRED64)(:[A-Za-z0-9_.:-]*)?$|\$\{/;

function trimSteps(p: Params, adapters: string | undefined): string[] {
  const steps = (p["trimSteps"] as string[] | undefined) ?? DEFAULT_STEPS;
  steps.forEach((st, i) => { if (!STEP.test(st)) throw new BuildError(`trimSteps/${i}`, `trimSteps/${i}: ${JSON.stringify(st)} is not a Trimmomatic step`); });
  return [...(adapters ? [`ILLUMINACLIP:${adapters}:2:30:10`] : []), ...steps];
}

const trimProgram = (ctx: BuildContext, mode: "PE" | "SE") => program(ctx, [`Trimmomatic${mode}`], ["trimmomatic", mode]);

export const trimmomatic: ToolDefinition = {
  id: "trimmomatic",
  description: "Adapter and quality trimming of Illumina reads, paired-end (PE) or single-end (SE).",
  version: "0.39",
  image: "quay.io/biocontainers/trimmomatic:0.39--hdfd78af_2",
  resources: podResources("4", "2Gi", "4Gi", "50Gi"),
  // Reads through gzip or bgzip (by the .gz extension; trimmed reads are gzipped likewise);
  // an adapters FASTA uncompressed only: a gzipped one is read as no sequences at all.
  reads: { inputFile: "gzip", inputFile2: "gzip", adapters: "plain" },
  localExecutables: ["TrimmomaticPE", "TrimmomaticSE"],
  fileParams: ["inputFile", "inputFile2", "reference", "adapters"],
  inputSchema: z.strictObject({
    ...commonParams("trimmomatic", TRIM),
    adapters: file().optional(),
    trimSteps: z.array(z.string().regex(STEP, "expected a Trimmomatic step such as SLIDINGWINDOW:4:15 or MINLEN:36")).min(1).max(32).optional(),
    phred: oneOf(["33", "64"]).optional(),
  }),
  commands: {
    PE: {
      description: "Paired-end trimming. Outputs, by position: R1 paired (outputFile), R2 paired (outputFile2), R1 unpaired, R2 unpaired.",
      required: ["inputFile", "inputFile2"],
      threaded: true,
      build(p, ctx) {
        const s = new Stager(p);
        const r1 = s.file("inputFile");
        const r2 = s.file("inputFile2");
        const adapters = s.optFile("adapters");
        const o1 = outputPath(p, "outputFile", `${stem(r1)}.paired.fastq.gz`);
        const o2 = outputPath(p, "outputFile2", `${stem(r2)}.paired.fastq.gz`);
        const unpaired = (o: string) => (o.includes(".paired.") ? o.replace(".paired.", ".unpaired.") : `${stem(o)}.unpaired.fastq.gz`);
        const u1 = unpaired(o1);
        const u2 = unpaired(o2);
        return invocation(trimProgram(ctx, "PE"), [
          ...flag("-threads", optInt(p, "threads")), `-phred${optEnum(p, "phred", ["33", "64"]) ?? "33"}`, ...extraArgs(p),
          r1, r2, o1, u1, o2, u2, ...trimSteps(p, adapters),
        ], s, [out(o1), out(o2), out(u1), out(u2)]);
      },
    },
    SE: {
      description: "Single-end trimming; trimmed reads to outputFile.",
      required: ["inputFile"],
      threaded: true,
      build(p, ctx) {
        const s = new Stager(p);
        const r1 = s.file("inputFile");
        const adapters = s.optFile("adapters");
        const o1 = outputPath(p, "outputFile", `${stem(r1)}.trimmed.fastq.gz`);
        return invocation(trimProgram(ctx, "SE"), [
          ...flag("-threads", optInt(p, "threads")), `-phred${optEnum(p, "phred", ["33", "64"]) ?? "33"}`, ...extraArgs(p),
          r1, o1, ...trimSteps(p, adapters),
        ], s, [out(o1)]);
      },
    },
  },
};
