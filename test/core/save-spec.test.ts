import t from "tap";
import { createHash } from "node:crypto";
import { extractSpec, savedId } from "../../core/save-spec.js";
import type { ExtractOptions, ExtractResult } from "../../core/save-spec.js";
import { RunManifestSchema, type RunManifest } from "../../core/manifest.js";
import type { RUN_STATUSES, STEP_STATUSES } from "../../core/status.js";
import type { PipelineInput, PipelineSpec, PipelineStep } from "../../core/spec/schema.js";
import { validateSpec } from "../../core/spec/validate.js";
import { resolveInputs, resolveStepParameters, type OutputLookup } from "../../core/spec/resolve.js";
import type { Issue } from "../../core/issues.js";

/* ------------------------------------------------------------------ manifest builder */

const EXECUTION_ID = "run-01jd3m8q2x7k9v4n5p6r7s8t9w";
const OUTPUT_FOLDER = "pipelines/2026-11-21T22-40-05Z";
const WORKSPACE_PREFIX = "orgs/acme/workspaces/ws1/";
const NOW = "2026-11-22T09:15:00Z";

/** Workspace path of a file the run wrote. */
const inRun = (filename: string): string => `${OUTPUT_FOLDER}/${filename}`;
/** Full storage key of a file the run wrote. */
const runKey = (filename: string): string => `${WORKSPACE_PREFIX}${OUTPUT_FOLDER}/${filename}`;
/** A realistic lowercase hex SHA-256. */
const sha = (seed: string): string => createHash("sha256").update(seed).digest("hex");

type RunStatus = (typeof RUN_STATUSES)[number];
type StepStatus = (typeof STEP_STATUSES)[number];

/** One step of a run: the step as executed, and the files it wrote (filenames relative to the run folder). */
interface StepPlan {
  step: PipelineStep;
  outputs: string[];
  status?: StepStatus;
  error?: string;
}

interface ManifestOptions {
  plans?: StepPlan[];
  status?: RunStatus;
  inputs?: PipelineInput[];
  parameters?: Record<string, string>;
  pipelineId?: string;
  pipelineName?: string;
}

const TOOL_VERSIONS: Record<string, string> = { bwa: "0.7.18", samtools: "1.21", trimmomatic: "0.39", picard: "3.3.0" };

/** The bwa-align run with literal workspace paths (rule 1's run). */
function literalPlans(): StepPlan[] {
  return [
    { step: { stepId: "index", toolName: "bwa", parameters: { command: "index", inputFile: "refs/ref.fa" } }, outputs: ["ref.fa"] },
    {
      step: {
        stepId: "align", toolName: "bwa", dependsOn: ["index"],
        parameters: { command: "mem", inputFile: "data/s1_R1.fastq", inputFile2: "data/s1_R2.fastq", reference: "refs/ref.fa", threads: 8, outputFile: "s1.sam" },
      },
      outputs: ["s1.sam"],
    },
    {
      step: { stepId: "sort", toolName: "samtools", dependsOn: ["align"], parameters: { command: "sort", inputFile: inRun("s1.sam"), outputFile: "s1.sorted.bam" } },
      outputs: ["s1.sorted.bam"],
    },
    {
      step: { stepId: "flagstat", toolName: "samtools", dependsOn: ["sort"], parameters: { command: "flagstat", inputFile: inRun("s1.sorted.bam"), outputFile: "s1.flagstat.txt" } },
      outputs: ["s1.flagstat.txt"],
    },
  ];
}

/** Builds a run manifest and checks it against the manifest schema, so it stays realistic. */
function buildManifest(opts: ManifestOptions = {}): RunManifest {
  const plans = opts.plans ?? literalPlans();
  const status = opts.status ?? "completed";
  const finished = status === "completed" || status === "failed" || status === "cancelled";
  const start = Date.parse("2026-11-21T22:40:05Z");
  const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
  const steps = plans.map((plan, i) => {
    const stepStatus: StepStatus = plan.status ?? (status === "completed" ? "completed" : status === "queued" ? "pending" : "completed");
    const ran = stepStatus === "completed" || stepStatus === "failed";
    const s0 = start + i * 90_000;
    return {
      stepId: plan.step.stepId,
      stepNumber: i + 1,
      toolName: plan.step.toolName,
      toolVersion: TOOL_VERSIONS[plan.step.toolName] ?? null,
      imageDigest: `sha256:${sha(`image:${plan.step.toolName}`)}`,
      taskDefinitionArn: `${EXECUTION_ID}-${plan.step.stepId}`,
      status: stepStatus,
      dependsOn: plan.step.dependsOn ?? [],
      startedAt: ran ? iso(s0) : null,
      completedAt: ran ? iso(s0 + 85_000) : null,
      durationMs: ran ? 85_000 : null,
      outputFiles: stepStatus === "completed"
        ? plan.outputs.map((filename, k) => ({ filename, s3Key: runKey(filename), size: 1_000_000 + 37 * k, checksum: sha(`out:${filename}`) }))
        : [],
      ...(plan.error !== undefined ? { error: plan.error } : {}),
      command: String(plan.step.parameters?.["command"] ?? ""),
    };
  });
  const fileInputs = (opts.inputs ?? []).filter((i) => i.type === "file");
  const parameters = opts.parameters ?? {};
  const pipelineDefinition: PipelineSpec = {
    specVersion: "1.0",
    id: opts.pipelineId ?? "bwa-align",
    name: opts.pipelineName ?? "BWA Align",
    description: "Index a reference, align paired-end reads with bwa mem, sort and summarise.",
    category: "alignment",
    tags: ["bwa", "samtools"],
    estimatedDuration: "10-30 minutes",
    executionMode: "process-manager",
    ...(opts.inputs ? { inputs: opts.inputs } : {}),
    steps: plans.map((p) => p.step),
  };
  const manifest = {
    schemaVersion: 1,
    executionId: EXECUTION_ID,
    pipelineId: pipelineDefinition.id,
    pipelineName: pipelineDefinition.name,
    status,
    workspaceId: "ws1",
    organizationId: "acme",
    outputFolder: OUTPUT_FOLDER,
    startedAt: iso(start),
    completedAt: finished ? iso(start + plans.length * 90_000) : null,
    durationMs: finished ? plans.length * 90_000 : null,
    stepsTotal: steps.length,
    stepsCompleted: steps.filter((s) => s.status === "completed").length,
    stepsFailed: steps.filter((s) => s.status === "failed").length,
    parameters,
    inputChecksums: Object.fromEntries(fileInputs.flatMap((i) => {
      const v = parameters[i.name] ?? i.default;
      return v === undefined ? [] : [[i.name, { s3Key: WORKSPACE_PREFIX + v, checksum: sha(`in:${v}`), size: 52_428_800 }]];
    })),
    pipelineDefinition,
    steps,
  };
  return RunManifestSchema.parse(manifest);
}

/* ------------------------------------------------------------------ helpers */

/** The type of a subtest's `t`. */
type Tap = Parameters<Parameters<typeof t.test>[0]>[0];

const OPTIONS: ExtractOptions = { builtinIds: ["bwa-align", "rnaseq-hisat2", "variant-calling"], now: NOW };

function extract(t: Tap, manifest: RunManifest, options: ExtractOptions = OPTIONS): { spec: PipelineSpec; warnings: Issue[] } {
  const r: ExtractResult = extractSpec(manifest, options);
  if (!r.ok) {
    t.fail(`extractSpec failed: ${JSON.stringify(r.errors)}`);
    throw new Error("extractSpec failed");
  }
  return r;
}

const stepOf = (spec: PipelineSpec, id: string): PipelineStep => {
  const s = spec.steps.find((x) => x.stepId === id);
  if (!s) throw new Error(`no step ${id}`);
  return s;
};
const param = (spec: PipelineSpec, id: string, key: string): unknown => stepOf(spec, id).parameters?.[key];
const inputNamed = (spec: PipelineSpec, name: string): PipelineInput | undefined => spec.inputs?.find((i) => i.name === name);
/** The name of the input whose previous value is `value` (exactly one must exist). */
function inputFor(t: Tap, spec: PipelineSpec, value: string): string {
  const names = Object.entries(spec.provenance?.previousValues ?? {}).filter(([, v]) => v === value).map(([k]) => k);
  t.equal(names.length, 1, `exactly one input has previous value ${value}`);
  return names[0] ?? "<none>";
}
const codes = (issues: Issue[]): string[] => issues.map((i) => i.code);

/* ------------------------------------------------------------------ the manifest helper itself */

t.test("the manifest helper builds schema-valid manifests", (t) => {
  const m = buildManifest();
  t.equal(m.schemaVersion, 1);
  t.match(m.executionId, /^run-[0-9a-z]{26}$/);
  t.same(m.steps.map((s) => s.stepId), ["index", "align", "sort", "flagstat"]);
  for (const s of m.steps) {
    for (const f of s.outputFiles) {
      t.equal(f.s3Key, `orgs/acme/workspaces/ws1/${m.outputFolder}/${f.filename}`);
      t.match(f.checksum, /^[0-9a-f]{64}$/);
    }
  }
  t.match(m.startedAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  t.end();
});

/* ------------------------------------------------------------------ rule 1: literal workspace files become file inputs */

t.test("rule 1: literal workspace paths become declared file inputs without default", (t) => {
  const { spec } = extract(t, buildManifest());
  const prev = spec.provenance?.previousValues ?? {};
  const ref = inputFor(t, spec, "refs/ref.fa");
  const r1 = inputFor(t, spec, "data/s1_R1.fastq");
  const r2 = inputFor(t, spec, "data/s1_R2.fastq");
  t.equal(new Set([ref, r1, r2]).size, 3, "three distinct file inputs");

  for (const name of [ref, r1, r2]) {
    const input = inputNamed(spec, name);
    t.ok(input, `${name} is declared`);
    t.equal(input?.type, "file", `${name} is a file input`);
    t.notOk(input && Object.hasOwn(input, "default"), `${name} has no default`);
  }
  t.equal(param(spec, "index", "inputFile"), `\${${ref}}`);
  t.equal(param(spec, "align", "inputFile"), `\${${r1}}`);
  t.equal(param(spec, "align", "inputFile2"), `\${${r2}}`);
  t.equal(param(spec, "align", "reference"), `\${${ref}}`, "the second use of refs/ref.fa reads the same input");

  const fileInputs = (spec.inputs ?? []).filter((i) => i.type === "file");
  t.equal(fileInputs.length, 3, "refs/ref.fa used twice is ONE input");
  t.equal(prev[ref], "refs/ref.fa");
  t.equal(prev[r1], "data/s1_R1.fastq");
  t.equal(prev[r2], "data/s1_R2.fastq");
  t.equal(param(spec, "align", "threads"), 8, "non-file parameters stay as they were");
  t.equal(param(spec, "index", "command"), "index");
  t.end();
});

t.test("rule 1: no literal workspace path is left in any step", (t) => {
  const { spec } = extract(t, buildManifest());
  const json = JSON.stringify(spec.steps);
  for (const literal of ["refs/ref.fa", "data/s1_R1.fastq", "data/s1_R2.fastq", OUTPUT_FOLDER]) {
    t.notOk(json.includes(literal), `${literal} no longer appears in the steps`);
  }
  t.end();
});

/* ------------------------------------------------------------------ rule 2: produced files are wired */

t.test("rule 2: a path equal to outputFolder/filename of an earlier step is wired as ${step.outputFile}", (t) => {
  const { spec } = extract(t, buildManifest());
  t.equal(param(spec, "sort", "inputFile"), "${align.outputFile}");
  t.equal(param(spec, "flagstat", "inputFile"), "${sort.outputFile}");
  t.ok(stepOf(spec, "sort").dependsOn?.includes("align"));
  t.ok(stepOf(spec, "flagstat").dependsOn?.includes("sort"));
  const prevValues = Object.values(spec.provenance?.previousValues ?? {});
  t.notOk(prevValues.some((v) => v.includes(OUTPUT_FOLDER)), "no produced file becomes an input");
  t.end();
});

t.test("rule 2: the full storage key is wired too, and the producer is added to dependsOn", (t) => {
  const plans = literalPlans();
  // flagstat names the sorted BAM by its full key and declares no dependsOn at all.
  const flagstat = plans[3] as StepPlan;
  flagstat.step = { stepId: "flagstat", toolName: "samtools", parameters: { command: "flagstat", inputFile: runKey("s1.sorted.bam"), outputFile: "s1.flagstat.txt" } };
  // sort depends on index only; its read of align's output must add align.
  (plans[2] as StepPlan).step.dependsOn = ["index"];
  const { spec } = extract(t, buildManifest({ plans }));
  t.equal(param(spec, "flagstat", "inputFile"), "${sort.outputFile}");
  t.same(stepOf(spec, "flagstat").dependsOn, ["sort"]);
  t.equal(param(spec, "sort", "inputFile"), "${align.outputFile}");
  t.same(stepOf(spec, "sort").dependsOn, ["index", "align"], "existing dependencies are kept, the producer appended");
  const prevValues = Object.values(spec.provenance?.previousValues ?? {});
  t.notOk(prevValues.some((v) => v.includes(OUTPUT_FOLDER)), "the storage key does not become an input");
  t.ok(validateSpec(spec).valid);
  t.end();
});

t.test("rule 2: the second output of a producer is wired as ${step.outputFile2}", (t) => {
  const [index, align, sort, flagstat] = literalPlans() as [StepPlan, StepPlan, StepPlan, StepPlan];
  const trim: StepPlan = {
    step: {
      stepId: "trim", toolName: "trimmomatic",
      parameters: { command: "PE", inputFile: "data/s1_R1.fastq.gz", inputFile2: "data/s1_R2.fastq.gz", outputFile: "s1_R1.paired.fastq.gz", outputFile2: "s1_R2.paired.fastq.gz" },
    },
    outputs: ["s1_R1.paired.fastq.gz", "s1_R2.paired.fastq.gz", "s1_R1.paired.unpaired.fastq.gz", "s1_R2.paired.unpaired.fastq.gz"],
  };
  align.step.parameters = { ...align.step.parameters, inputFile: inRun("s1_R1.paired.fastq.gz"), inputFile2: runKey("s1_R2.paired.fastq.gz") };
  align.step.dependsOn = ["index"];
  const { spec } = extract(t, buildManifest({ plans: [trim, index, align, sort, flagstat] }));
  t.equal(param(spec, "align", "inputFile"), "${trim.outputFile}", "position 0 → outputFile");
  t.equal(param(spec, "align", "inputFile2"), "${trim.outputFile2}", "position 1 → outputFile2");
  t.same(stepOf(spec, "align").dependsOn, ["index", "trim"]);
  const prevValues = Object.values(spec.provenance?.previousValues ?? {});
  t.notOk(prevValues.some((v) => v.includes("paired")), "trimmed reads are not inputs");
  t.ok(validateSpec(spec).valid);
  t.end();
});

/* ------------------------------------------------------------------ rule 3: sampleName */

t.test("rule 3: a shared output-name prefix becomes the input sampleName", (t) => {
  const { spec } = extract(t, buildManifest());
  const sample = inputNamed(spec, "sampleName");
  t.ok(sample, "sampleName is declared");
  t.equal(sample?.type, "string");
  t.equal(spec.provenance?.previousValues?.["sampleName"], "s1");
  t.equal(param(spec, "align", "outputFile"), "${sampleName}.sam");
  t.equal(param(spec, "sort", "outputFile"), "${sampleName}.sorted.bam");
  t.equal(param(spec, "flagstat", "outputFile"), "${sampleName}.flagstat.txt");
  t.end();
});

t.test("rule 3 near miss: output names without a shared prefix give no sampleName", (t) => {
  for (const [name, outs] of [
    ["unrelated names", ["aligned.sam", "sorted.bam", "stats.flagstat.txt"]],
    ["different samples", ["s1.sam", "s2.sorted.bam", "s3.flagstat.txt"]],
  ] as const) {
    const plans = literalPlans();
    const [, align, sort, flagstat] = plans as [StepPlan, StepPlan, StepPlan, StepPlan];
    align.step.parameters = { ...align.step.parameters, outputFile: outs[0] };
    align.outputs = [outs[0]];
    sort.step.parameters = { ...sort.step.parameters, inputFile: inRun(outs[0]), outputFile: outs[1] };
    sort.outputs = [outs[1]];
    flagstat.step.parameters = { ...flagstat.step.parameters, inputFile: inRun(outs[1]), outputFile: outs[2] };
    flagstat.outputs = [outs[2]];
    const { spec } = extract(t, buildManifest({ plans }));
    t.notOk(inputNamed(spec, "sampleName"), `${name}: no sampleName input`);
    t.notOk(Object.hasOwn(spec.provenance?.previousValues ?? {}, "sampleName"), `${name}: no sampleName previous value`);
    t.equal(param(spec, "align", "outputFile"), outs[0], `${name}: output names stay literal`);
    t.equal(param(spec, "sort", "outputFile"), outs[1]);
    t.equal(param(spec, "flagstat", "outputFile"), outs[2]);
    t.equal(param(spec, "sort", "inputFile"), "${align.outputFile}", `${name}: still wired`);
  }
  t.end();
});

/* ------------------------------------------------------------------ rule 4: an already templated run */

function templatedManifest(): RunManifest {
  const inputs: PipelineInput[] = [
    { name: "reads", type: "file", description: "Forward reads (FASTQ)", default: "data/s1_R1.fastq" },
    { name: "reference", type: "file", description: "Reference genome (FASTA)", default: "refs/ref.fa" },
    { name: "threads", type: "select", description: "Threads per step", options: ["2", "4", "8"], default: "4" },
  ];
  const plans: StepPlan[] = [
    { step: { stepId: "index", toolName: "bwa", parameters: { command: "index", inputFile: "${reference}" } }, outputs: ["ref.fa"] },
    {
      step: { stepId: "align", toolName: "bwa", dependsOn: ["index"], parameters: { command: "mem", inputFile: "${reads}", reference: "${index.outputFile}", threads: "${threads}", outputFile: "s7.sam" } },
      outputs: ["s7.sam"],
    },
    {
      step: { stepId: "sort", toolName: "samtools", dependsOn: ["align"], parameters: { command: "sort", inputFile: "${align.outputFile}", threads: "${threads}", outputFile: "s7.sorted.bam" } },
      outputs: ["s7.sorted.bam"],
    },
    {
      step: { stepId: "flagstat", toolName: "samtools", dependsOn: ["sort"], parameters: { command: "flagstat", inputFile: "${sort.outputFile}", outputFile: "s7.flagstat.txt" } },
      outputs: ["s7.flagstat.txt"],
    },
  ];
  return buildManifest({ plans, inputs, parameters: { reads: "data/s7_R1.fastq", reference: "refs/hg38.fa", threads: "8" } });
}

t.test("rule 4: a templated run keeps its inputs; file inputs lose their default, the select keeps it", (t) => {
  const { spec } = extract(t, templatedManifest());
  const reads = inputNamed(spec, "reads");
  const reference = inputNamed(spec, "reference");
  const threads = inputNamed(spec, "threads");
  t.match(reads, { name: "reads", type: "file", description: "Forward reads (FASTQ)" });
  t.match(reference, { name: "reference", type: "file" });
  t.notOk(reads && Object.hasOwn(reads, "default"), "reads loses its default");
  t.notOk(reference && Object.hasOwn(reference, "default"), "reference loses its default");
  t.same(threads, { name: "threads", type: "select", description: "Threads per step", options: ["2", "4", "8"], default: "4" }, "the select keeps its default and options");
  const fileInputs = (spec.inputs ?? []).filter((i) => i.type === "file").map((i) => i.name).sort();
  t.same(fileInputs, ["reads", "reference"], "no extra file inputs are invented");
  const prev = spec.provenance?.previousValues ?? {};
  t.equal(prev["reads"], "data/s7_R1.fastq", "previousValues hold the run's parameters, not the defaults");
  t.equal(prev["reference"], "refs/hg38.fa");
  t.equal(prev["threads"], "8");
  t.equal(param(spec, "align", "inputFile"), "${reads}");
  t.equal(param(spec, "index", "inputFile"), "${reference}");
  t.equal(param(spec, "align", "reference"), "${index.outputFile}");
  t.equal(param(spec, "sort", "threads"), "${threads}");
  t.ok(validateSpec(spec).valid);
  t.end();
});

/* ------------------------------------------------------------------ rule 5: warnings */

t.test("rule 5: a literal list of files stays as written with a file_list_literal warning", (t) => {
  const plans: StepPlan[] = [
    {
      step: { stepId: "merge", toolName: "samtools", parameters: { command: "merge", inputFiles: ["data/s1.sorted.bam", "data/s2.sorted.bam"], outputFile: "cohort.merged.bam" } },
      outputs: ["cohort.merged.bam"],
    },
    {
      step: { stepId: "flagstat", toolName: "samtools", dependsOn: ["merge"], parameters: { command: "flagstat", inputFile: inRun("cohort.merged.bam"), outputFile: "cohort.flagstat.txt" } },
      outputs: ["cohort.flagstat.txt"],
    },
  ];
  const { spec, warnings } = extract(t, buildManifest({ plans }));
  const w = warnings.filter((x) => x.code === "file_list_literal");
  t.equal(w.length, 1, "one file_list_literal warning");
  t.equal(w[0]?.path, "/steps/0/parameters/inputFiles");
  t.same(param(spec, "merge", "inputFiles"), ["data/s1.sorted.bam", "data/s2.sorted.bam"], "the list is kept as written");
  t.notOk((spec.inputs ?? []).some((i) => i.type === "file"), "list entries do not become inputs");
  t.equal(param(spec, "flagstat", "inputFile"), "${merge.outputFile}");
  t.end();
});

t.test("rule 5: a failed run is saved with a source_run_failed warning", (t) => {
  const plans = literalPlans();
  const flagstat = plans[3] as StepPlan;
  flagstat.status = "failed";
  flagstat.error = "samtools flagstat exited with code 1: [bam_flagstat] fail to read the header";
  const manifest = buildManifest({ plans, status: "failed" });
  t.equal(manifest.stepsFailed, 1);
  const { spec, warnings } = extract(t, manifest);
  t.ok(codes(warnings).includes("source_run_failed"), "source_run_failed warning");
  t.equal(spec.provenance?.sourceRunStatus, "failed");
  t.equal(spec.steps.length, 4, "every step is saved, the failed one included");
  t.ok(validateSpec(spec).valid);

  const ok = extract(t, buildManifest());
  t.notOk(codes(ok.warnings).includes("source_run_failed"), "a completed run gets no such warning");
  t.notOk(codes(ok.warnings).includes("file_list_literal"));
  t.end();
});

/* ------------------------------------------------------------------ unfinished runs, provenance, validity, ids */

t.test("runs that are not finished cannot be saved", (t) => {
  for (const status of ["running", "queued"] as const) {
    const r = extractSpec(buildManifest({ status }), OPTIONS);
    t.equal(r.ok, false, `${status}: refused`);
    if (!r.ok) t.same(codes(r.errors), ["run_not_finished"], `${status}: run_not_finished`);
  }
  t.end();
});

t.test("provenance, specVersion and validity of the saved spec", (t) => {
  const manifest = buildManifest();
  const { spec } = extract(t, manifest);
  t.equal(spec.specVersion, "1.0");
  t.equal(spec.executionMode, "process-manager");
  t.equal(spec.provenance?.sourceExecutionId, EXECUTION_ID);
  t.equal(spec.provenance?.sourcePipelineId, "bwa-align");
  t.equal(spec.provenance?.sourceRunStatus, "completed");
  t.equal(spec.provenance?.extractedAt, NOW, "extractedAt is options.now");
  t.type(spec.provenance?.previousValues, "object");
  t.equal(spec.name, "BWA Align", "name defaults to the source pipeline's name");
  const v = validateSpec(spec);
  t.ok(v.valid, "the saved spec validates");
  t.same(v.errors, []);
  t.not(manifest.pipelineDefinition, spec, "the manifest is not mutated in place");
  t.equal(manifest.pipelineDefinition.steps[2]?.parameters?.["inputFile"], inRun("s1.sam"), "the manifest's spec is left as executed");

  const named = extract(t, buildManifest(), { ...OPTIONS, name: "My Exome QC" });
  t.equal(named.spec.name, "My Exome QC");
  t.match(named.spec.id, /^my-exome-qc-/);
  t.end();
});

t.test("savedId: a suffix from the run id, never a built-in id", (t) => {
  const tail = "run01jd3m8q2x7k9v4n5p6r7s8t9w";
  const { spec } = extract(t, buildManifest(), { ...OPTIONS, builtinIds: ["bwa-align"] });
  t.equal(spec.id, `bwa-align-${tail.slice(-6)}`);
  t.not(spec.id, "bwa-align");

  // The first candidate collides: the saved id must still differ from every built-in.
  const first = `bwa-align-${tail.slice(-6)}`;
  const second = `bwa-align-${tail.slice(-7)}`;
  const r1 = extract(t, buildManifest(), { ...OPTIONS, builtinIds: ["bwa-align", first] });
  t.not(r1.spec.id, first);
  t.notOk(["bwa-align", first].includes(r1.spec.id ?? ""));
  t.ok(r1.spec.id?.startsWith("bwa-align-"));
  t.ok(tail.endsWith((r1.spec.id ?? "").slice("bwa-align-".length)), "the suffix comes from the run id");

  const r2 = extract(t, buildManifest(), { ...OPTIONS, builtinIds: ["bwa-align", first, second] });
  t.notOk(["bwa-align", first, second].includes(r2.spec.id ?? ""));

  // Direct: every candidate taken, including the fallback.
  const all = Array.from({ length: tail.length - 5 }, (_, i) => `p-${tail.slice(-(i + 6))}`);
  const id = savedId("p", EXECUTION_ID, [...all, "p-saved"]);
  t.notOk([...all, "p-saved"].includes(id));
  t.equal(savedId("!!!", EXECUTION_ID, []), `pipeline-${tail.slice(-6)}`, "an empty slug falls back to pipeline");
  t.end();
});

/* ------------------------------------------------------------------ round trip */

t.test("round trip: resolving the saved spec with previousValues reproduces the run's literal parameters", (t) => {
  const manifest = buildManifest();
  const { spec } = extract(t, manifest);
  const outputs: OutputLookup = (stepId, output) => {
    const st = manifest.steps.find((s) => s.stepId === stepId);
    const f = st?.outputFiles[output === "outputFile" ? 0 : 1];
    return f ? `${manifest.outputFolder}/${f.filename}` : undefined;
  };
  const inputs = resolveInputs(spec, spec.provenance?.previousValues ?? {});
  t.ok(inputs.ok, "previousValues are a complete, valid set of inputs");
  if (!inputs.ok) return t.end();
  for (const original of manifest.pipelineDefinition.steps) {
    const saved = stepOf(spec, original.stepId);
    const r = resolveStepParameters(saved, inputs.values, outputs);
    t.ok(r.ok, `${original.stepId} resolves`);
    if (r.ok) t.same(r.parameters, original.parameters, `${original.stepId}: same parameters as the run`);
  }
  t.end();
});

/* ------------------------------------------------------------------ found while testing */

t.test("rule 2 inside a file list: outputs of earlier steps listed in inputFiles are wired, not left literal", (t) => {
  // samtools merge of two per-lane sorted BAMs produced by this run. The spec's rule 2 says
  // produced files are wired as ${stepId.outputFile}; a saved spec that keeps the old run's
  // paths would read the source run's files on every re-run.
  const plans: StepPlan[] = [
    { step: { stepId: "sortA", toolName: "samtools", parameters: { command: "sort", inputFile: "data/s1_L001.bam", outputFile: "s1_L001.sorted.bam" } }, outputs: ["s1_L001.sorted.bam"] },
    { step: { stepId: "sortB", toolName: "samtools", parameters: { command: "sort", inputFile: "data/s1_L002.bam", outputFile: "s1_L002.sorted.bam" } }, outputs: ["s1_L002.sorted.bam"] },
    {
      step: { stepId: "merge", toolName: "samtools", dependsOn: ["sortA", "sortB"], parameters: { command: "merge", inputFiles: [inRun("s1_L001.sorted.bam"), inRun("s1_L002.sorted.bam")], outputFile: "s1.merged.bam" } },
      outputs: ["s1.merged.bam"],
    },
  ];
  const { spec, warnings } = extract(t, buildManifest({ plans }));
  t.same(param(spec, "merge", "inputFiles"), ["${sortA.outputFile}", "${sortB.outputFile}"], "produced files in the list are wired");
  t.notOk(codes(warnings).includes("file_list_literal"), "a list made only of produced files needs no review");
  t.end();
});

t.test("rule 4 inside arrays: declared inputs referenced only in args or inputFiles are kept", (t) => {
  // A templated run whose inputs appear only inside arrays: `args` (interpolated like any
  // string) and samtools merge `inputFiles`. Saving it must keep those declared inputs.
  const inputs: PipelineInput[] = [
    { name: "tumorBam", type: "file", description: "Tumour BAM", default: "data/tumour.sorted.bam" },
    { name: "normalBam", type: "file", description: "Normal BAM" },
    { name: "sortMemory", type: "string", description: "Memory per sort thread", default: "768M" },
  ];
  const plans: StepPlan[] = [
    {
      step: { stepId: "merge", toolName: "samtools", parameters: { command: "merge", inputFiles: ["${tumorBam}", "${normalBam}"], outputFile: "pair.merged.bam" } },
      outputs: ["pair.merged.bam"],
    },
    {
      step: { stepId: "sort", toolName: "samtools", dependsOn: ["merge"], parameters: { command: "sort", inputFile: "${merge.outputFile}", args: ["-m", "${sortMemory}"], outputFile: "pair.sorted.bam" } },
      outputs: ["pair.sorted.bam"],
    },
  ];
  const manifest = buildManifest({ plans, inputs, parameters: { tumorBam: "data/t7.sorted.bam", normalBam: "data/n7.sorted.bam", sortMemory: "2G" } });
  const r = extractSpec(manifest, OPTIONS);
  t.equal(r.ok, true, "the run can be saved");
  if (!r.ok) {
    t.comment(`errors: ${JSON.stringify(r.errors.map((e) => `${e.code} ${e.path}`))}`);
    return t.end();
  }
  // "pair.merged.bam" and "pair.sorted.bam" share the prefix "pair", which becomes sampleName (rule 3).
  t.same((r.spec.inputs ?? []).map((i) => i.name).sort(), ["normalBam", "sampleName", "sortMemory", "tumorBam"]);
  t.notOk(Object.hasOwn(inputNamed(r.spec, "tumorBam") ?? {}, "default"), "file input loses its default");
  t.equal(inputNamed(r.spec, "sortMemory")?.default, "768M");
  t.same(r.spec.provenance?.previousValues, { tumorBam: "data/t7.sorted.bam", normalBam: "data/n7.sorted.bam", sortMemory: "2G", sampleName: "pair" });
  t.end();
});

t.test("generated input names stay valid when step ids start with a digit and collide", (t) => {
  // Step ids "1_sort" and "1-sort" are both valid; their suggested input names collide
  // ("_1_sort_inputFile"), and the renamed one must still be a valid input name.
  const plans: StepPlan[] = [
    { step: { stepId: "1_sort", toolName: "samtools", parameters: { command: "sort", inputFile: "data/lane1.bam", outputFile: "lane1.sorted.bam" } }, outputs: ["lane1.sorted.bam"] },
    { step: { stepId: "1-sort", toolName: "samtools", parameters: { command: "sort", inputFile: "data/lane2.bam", outputFile: "lane2.sorted.bam" } }, outputs: ["lane2.sorted.bam"] },
  ];
  const r = extractSpec(buildManifest({ plans }), OPTIONS);
  t.equal(r.ok, true, "the run can be saved");
  if (!r.ok) {
    t.comment(`errors: ${JSON.stringify(r.errors.map((e) => `${e.code} ${e.path}`))}`);
    return t.end();
  }
  for (const i of r.spec.inputs ?? []) t.match(i.name, /^[A-Za-z_][A-Za-z0-9_]*$/);
  t.end();
});
