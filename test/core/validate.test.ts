import t from "tap";
import fc from "fast-check";
import { isDeepStrictEqual } from "node:util";
import { validateSpec } from "../../core/spec/validate.js";
import type { ValidationContext } from "../../core/spec/validate.js";
import { bwa } from "../../core/tools/aligners.js";
import { createCatalogue, defaultCatalogue } from "../../core/tools/index.js";
import type { ToolCatalogue } from "../../core/tools/index.js";
import { samtools } from "../../core/tools/samtools.js";
import type { Issue, ValidationResult } from "../../core/issues.js";

type Obj = Record<string, unknown>;
interface Spec { inputs: Obj[]; steps: Obj[]; [key: string]: unknown }

const ALL_TOOLS = [
  "annovar", "bcftools", "bedtools", "bowtie2", "bwa", "fastqc", "gatk", "hisat2", "minimap2", "picard", "samtools", "tabix", "trimmomatic",
];
const SAMTOOLS_COMMANDS = ["view", "sort", "index", "merge", "stats", "flagstat", "idxstats", "depth", "coverage", "tabix"];
const WARNING_CODES = new Set(["timeout_clamped", "execution_type_ignored", "output_matched_by_position", "duplicate_output"]);

/** bwa index → bwa mem → samtools sort; every producer declares outputFile, so no warnings. */
const BASE: Spec = {
  specVersion: "1.0",
  id: "bwa-align-sort",
  name: "Align and sort",
  description: "Index a reference, align reads to it, sort the alignments.",
  inputs: [
    { name: "reads", type: "file", description: "FASTQ reads" },
    { name: "reference", type: "file", description: "Reference FASTA" },
  ],
  steps: [
    { stepId: "index", toolName: "bwa", parameters: { command: "index", inputFile: "${reference}", outputFile: "ref.fa" } },
    { stepId: "align", toolName: "bwa", dependsOn: ["index"],
      parameters: { command: "mem", inputFile: "${reads}", reference: "${index.outputFile}", outputFile: "aligned.sam" } },
    { stepId: "sort", toolName: "samtools", dependsOn: ["align"],
      parameters: { samtoolsCommand: "sort", inputFile: "${align.outputFile}", outputFile: "aligned.sorted.bam" } },
  ],
};

const base = (): Spec => structuredClone(BASE);
const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);

function step(s: Spec, i: number): Obj {
  const x = s.steps[i];
  if (!x) throw new Error(`base has no step ${i}`);
  return x;
}
function params(s: Spec, i: number): Obj {
  const p = step(s, i).parameters;
  if (!isObj(p)) throw new Error(`step ${i} has no parameters`);
  return p;
}

/** Every distinct code, errors and warnings together, sorted. */
const codes = (r: ValidationResult): string[] => [...new Set([...r.errors, ...r.warnings].map((i) => i.code))].sort();
const all = (r: ValidationResult): Issue[] => [...r.errors, ...r.warnings];

/** Resolves a JSON pointer (RFC 6901) in `doc`. */
function resolves(doc: unknown, ptr: string): boolean {
  if (ptr === "") return true;
  let cur: unknown = doc;
  for (const raw of ptr.slice(1).split("/")) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (Array.isArray(cur) && /^\d+$/.test(key) && Number(key) < cur.length) cur = cur[Number(key)];
    else if (isObj(cur) && Object.hasOwn(cur, key)) cur = cur[key];
    else return false;
  }
  return true;
}
const parentOf = (ptr: string): string => ptr.slice(0, Math.max(0, ptr.lastIndexOf("/")));
const wellFormed = (ptr: string): boolean => ptr === "" || (ptr.startsWith("/") && !/~(?![01])/.test(ptr));

/** A chain of flagstat steps reading the sorted BAM, to grow the pipeline. */
const qcSteps = (n: number): Obj[] => Array.from({ length: n }, (_, i) => ({
  stepId: `qc${i}`, toolName: "samtools", dependsOn: ["sort"],
  parameters: { command: "flagstat", inputFile: "${sort.outputFile}", outputFile: `aligned.flagstat${i}.txt` },
}));

interface Case {
  code: string;
  name: string;
  /** Mutates a deep copy of the base. */
  mutate?: (s: Spec) => void;
  /** Replaces the whole spec instead. */
  spec?: unknown;
  ctx?: ValidationContext;
  kind: "hit" | "miss";
  /** hit: where the issue must be. */
  path?: string;
  message?: RegExp | string;
  valid_values?: string[];
  /** hit: other codes that are expected alongside (the code set is checked exactly). */
  also?: string[];
  /** miss: the result must also be free of every error and warning (default true). */
  clean?: boolean;
}

type Extra = Partial<Pick<Case, "message" | "valid_values" | "also" | "ctx" | "spec">>;
const hit = (code: string, name: string, mutate: ((s: Spec) => void) | undefined, path: string, extra: Extra = {}): Case =>
  ({ code, name, mutate, path, kind: "hit", ...extra });
const miss = (code: string, name: string, mutate: ((s: Spec) => void) | undefined, extra: Partial<Pick<Case, "clean" | "ctx" | "spec">> = {}): Case =>
  ({ code, name, mutate, kind: "miss", ...extra });

const throwingCatalogue: ToolCatalogue = { get: () => { throw new Error("catalogue offline"); }, ids: [] };

const cases: Case[] = [
  // --- the spec itself ---
  hit("invalid_type", "null", undefined, "", { spec: null, message: /must be a JSON object/ }),
  hit("invalid_type", "array", undefined, "", { spec: [BASE] }),
  hit("invalid_type", "string", undefined, "", { spec: JSON.stringify(BASE) }),
  hit("invalid_type", "number", undefined, "", { spec: 42 }),
  miss("invalid_type", "empty object is an object (missing steps instead)", undefined, { spec: {}, clean: false }),
  miss("invalid_type", "the base spec", () => {}),

  hit("missing_steps", "steps deleted", (s) => { delete (s as Partial<Spec>).steps; }, "/steps", { message: /steps is required/ }),
  miss("missing_steps", "steps: null is the wrong type, not missing", (s) => { s.steps = null as never; }, { clean: false }),
  miss("missing_steps", "steps present", () => {}),

  hit("empty_steps", "steps: []", (s) => { s.steps = []; }, "/steps", { message: /empty/ }),
  miss("empty_steps", "a single step", (s) => { s.steps = s.steps.slice(0, 1); }),

  hit("too_many_steps", "13 steps", (s) => { s.steps.push(...qcSteps(10)); }, "/steps", { message: /13 steps: a pipeline has at most 12 steps/ }),
  miss("too_many_steps", "exactly 12 steps", (s) => { s.steps.push(...qcSteps(9)); }),

  hit("invalid_field", "steps is a string", (s) => { s.steps = "index" as never; }, "/steps"),
  hit("invalid_field", "name is a number", (s) => { s.name = 5; }, "/name"),
  hit("invalid_field", "tags is not an array", (s) => { s.tags = "dna"; }, "/tags"),
  hit("invalid_field", "id longer than 128", (s) => { s.id = "x".repeat(129); }, "/id"),
  miss("invalid_field", "metadata fields of the right type", (s) => {
    s.tags = ["dna", "alignment"]; s.category = "alignment"; s.estimatedDuration = "10m"; s.id = "x".repeat(128);
  }),

  // --- tools ---
  hit("unknown_tool", "misspelled samtools", (s) => { step(s, 2).toolName = "samtool"; }, "/steps/2/toolName", {
    valid_values: ALL_TOOLS, message: `unknown tool "samtool" (did you mean "samtools"?); valid tools: ${ALL_TOOLS.join(", ")}`,
  }),
  hit("unknown_tool", "tool names are case-sensitive", (s) => { step(s, 0).toolName = "BWA"; }, "/steps/0/toolName", { valid_values: ALL_TOOLS }),
  hit("unknown_tool", "a prototype property is not a tool", (s) => { step(s, 0).toolName = "constructor"; }, "/steps/0/toolName", { valid_values: ALL_TOOLS }),
  hit("unknown_tool", "valid_values follow the context's catalogue", undefined, "/steps/0/toolName", {
    spec: BASE, ctx: { tools: createCatalogue([samtools]) }, valid_values: ["samtools"], message: /valid tools: samtools$/,
  }),
  ...ALL_TOOLS.map((id) => miss("unknown_tool", `"${id}" is a registered tool`, (s) => { s.steps = [{ stepId: "only", toolName: id, parameters: {} }]; }, { clean: false })),
  miss("unknown_tool", "a custom catalogue holding the base's tools", () => {}, { ctx: { tools: createCatalogue([bwa, samtools]) } }),

  hit("invalid_tool_name", "empty toolName", (s) => { step(s, 2).toolName = ""; }, "/steps/2/toolName"),
  hit("invalid_tool_name", "toolName is a number", (s) => { step(s, 2).toolName = 7; }, "/steps/2/toolName"),
  hit("invalid_tool_name", "toolName missing", (s) => { delete step(s, 2).toolName; }, "/steps/2/toolName"),
  miss("invalid_tool_name", "an unknown but well-formed name is unknown_tool instead", (s) => { step(s, 2).toolName = "samtool"; }, { clean: false }),

  // --- references ---
  hit("unresolved_reference", "misspelled input", (s) => { params(s, 1).inputFile = "${read}"; }, "/steps/1/parameters/inputFile",
    { message: /\$\{read\} names no declared input \(did you mean "reads"\?\)/ }),
  hit("unresolved_reference", "unknown step", (s) => { params(s, 2).inputFile = "${nostep.outputFile}"; }, "/steps/2/parameters/inputFile",
    { message: /names no step/ }),
  hit("unresolved_reference", "self reference", (s) => { params(s, 2).inputFile = "${sort.outputFile}"; }, "/steps/2/parameters/inputFile",
    { message: /cannot read its own output/ }),
  hit("unresolved_reference", "a step id used as an input", (s) => { params(s, 2).inputFile = "${align}"; }, "/steps/2/parameters/inputFile",
    { message: /\$\{align\.outputFile\}/ }),
  hit("unresolved_reference", "inside an args array", (s) => { params(s, 2).args = ["-m", "${memory}"]; }, "/steps/2/parameters/args/1"),
  hit("unresolved_reference", "inside a longer string", (s) => { params(s, 2).outputFile = "${sample}.sorted.bam"; }, "/steps/2/parameters/outputFile"),
  miss("unresolved_reference", "a declared string input inside a longer string", (s) => {
    s.inputs.push({ name: "sample", type: "string", default: "NA12878" });
    params(s, 2).outputFile = "${sample}.sorted.bam";
  }),
  miss("unresolved_reference", "an input declared after its use in declaration order", (s) => {
    s.inputs.unshift({ name: "memory", type: "string", default: "2G" });
    params(s, 2).args = ["-m", "${memory}"];
  }),

  hit("invalid_reference", "unknown property ${a.b}", (s) => { params(s, 2).inputFile = "${a.b}"; }, "/steps/2/parameters/inputFile",
    { message: /unknown step property "b"/ }),
  hit("invalid_reference", "unterminated ${x", (s) => { params(s, 2).args = ["${x"]; }, "/steps/2/parameters/args/0", { message: /unterminated/ }),
  hit("invalid_reference", "empty ${}", (s) => { params(s, 2).args = ["${}"]; }, "/steps/2/parameters/args/0", { message: /empty/ }),
  hit("invalid_reference", "malformed ${a b}", (s) => { params(s, 2).args = ["${a b}"]; }, "/steps/2/parameters/args/0", { message: /malformed/ }),
  miss("invalid_reference", "escaped literal $${x}", (s) => { params(s, 2).args = ["$${x}", "-T", "$${HOME}tmp"]; }),
  miss("invalid_reference", "escaped unterminated $${x", (s) => { params(s, 2).args = ["$${x"]; }),
  miss("invalid_reference", "a lone $", (s) => { params(s, 2).args = ["$", "cost $5"]; }),

  // --- the step graph ---
  hit("dependency_cycle", "2-cycle", (s) => { step(s, 0).dependsOn = ["align"]; }, "/steps/0/dependsOn",
    { message: "dependsOn forms a cycle: index → align → index" }),
  hit("dependency_cycle", "3-cycle", (s) => { step(s, 0).dependsOn = ["sort"]; }, "/steps/0/dependsOn",
    { message: "dependsOn forms a cycle: index → sort → align → index" }),
  hit("dependency_cycle", "self-dependency", (s) => { step(s, 2).dependsOn = ["align", "sort"]; }, "/steps/2/dependsOn",
    { message: "dependsOn forms a cycle: sort → sort" }),
  miss("dependency_cycle", "a redundant edge is not a cycle", (s) => { step(s, 2).dependsOn = ["align", "index"]; }),
  miss("dependency_cycle", "the same dependency twice", (s) => { step(s, 2).dependsOn = ["align", "align"]; }),

  hit("unknown_dependency", "misspelled step", (s) => { step(s, 2).dependsOn = ["align", "algin"]; }, "/steps/2/dependsOn/1",
    { message: /"algin", which is not a step \(did you mean "align"\?\)/ }),
  hit("unknown_dependency", "index counts non-string entries", (s) => { step(s, 2).dependsOn = ["align", 5, "ghost"]; }, "/steps/2/dependsOn/2",
    { also: ["invalid_dependency"] }),
  miss("unknown_dependency", "a step declared later in the array", (s) => { s.steps.reverse(); }),

  hit("invalid_dependency", "dependsOn is a string", (s) => { step(s, 2).dependsOn = "align"; }, "/steps/2/dependsOn",
    { also: ["reference_not_in_depends_on"] }),
  hit("invalid_dependency", "non-string entry", (s) => { step(s, 2).dependsOn = ["align", 5]; }, "/steps/2/dependsOn/1"),
  miss("invalid_dependency", "empty dependsOn on a step that reads nothing", (s) => { step(s, 0).dependsOn = []; }),

  hit("reference_not_in_depends_on", "no dependsOn at all", (s) => { delete step(s, 2).dependsOn; }, "/steps/2/parameters/inputFile",
    { message: /reads step "align", which is not in this step's dependsOn/ }),
  hit("reference_not_in_depends_on", "depends on a different step", (s) => { step(s, 2).dependsOn = ["index"]; }, "/steps/2/parameters/inputFile"),
  hit("reference_not_in_depends_on", "reading a dependent (downstream) step", (s) => { params(s, 1).args = ["${sort.outputFile}"]; },
    "/steps/1/parameters/args/0"),
  miss("reference_not_in_depends_on", "transitive dependency", (s) => { params(s, 2).reference = "${index.outputFile}"; }),

  // --- inputs ---
  hit("invalid_input_name", "dash", (s) => { s.inputs.push({ name: "my-input", type: "string" }); }, "/inputs/2/name"),
  hit("invalid_input_name", "leading digit", (s) => { s.inputs.push({ name: "1sample", type: "string" }); }, "/inputs/2/name"),
  hit("invalid_input_name", "empty", (s) => { s.inputs.push({ name: "", type: "string" }); }, "/inputs/2/name"),
  miss("invalid_input_name", "underscore, letters and digits", (s) => { s.inputs.push({ name: "_sample_9", type: "string" }); }),

  hit("duplicate_input", "same name twice", (s) => { s.inputs.push({ name: "reads", type: "file" }); }, "/inputs/2/name",
    { message: /already declared by input 0/ }),
  miss("duplicate_input", "names differing in case", (s) => { s.inputs.push({ name: "Reads", type: "file" }); }),

  hit("input_name_conflict", "input named like a step", (s) => { s.inputs.push({ name: "align", type: "string" }); }, "/inputs/2/name"),
  miss("input_name_conflict", "a name that only starts like a step", (s) => { s.inputs.push({ name: "aligner", type: "string" }); }),

  hit("select_without_options", "no options", (s) => { s.inputs.push({ name: "mode", type: "select" }); }, "/inputs/2/options"),
  hit("select_without_options", "empty options", (s) => { s.inputs.push({ name: "mode", type: "select", options: [] }); }, "/inputs/2/options"),
  miss("select_without_options", "select with options", (s) => { s.inputs.push({ name: "mode", type: "select", options: ["fast"], default: "fast" }); }),
  miss("select_without_options", "a string input needs no options", (s) => { s.inputs.push({ name: "mode", type: "string" }); }),

  hit("invalid_default", "select default outside its options", (s) => {
    s.inputs.push({ name: "mode", type: "select", options: ["fast", "slow"], default: "medium" });
  }, "/inputs/2/default"),
  miss("invalid_default", "select default among its options", (s) => { s.inputs.push({ name: "mode", type: "select", options: ["fast", "slow"], default: "slow" }); }),

  hit("unsupported_input_type", "file[]", (s) => { (s.inputs[0] as Obj).type = "file[]"; }, "/inputs/0/type", { message: /reserved for batch runs/ }),
  miss("unsupported_input_type", "file", () => {}),
  miss("unsupported_input_type", "files is merely invalid", (s) => { (s.inputs[0] as Obj).type = "files"; }, { clean: false }),

  hit("invalid_input_type", "unknown type", (s) => { (s.inputs[0] as Obj).type = "integer"; }, "/inputs/0/type", { message: /file, string, select/ }),
  hit("invalid_input_type", "type missing", (s) => { delete (s.inputs[0] as Obj).type; }, "/inputs/0/type"),
  miss("invalid_input_type", "string", (s) => { s.inputs.push({ name: "sample", type: "string" }); }),
  miss("invalid_input_type", "file[] is unsupported, not invalid", (s) => { (s.inputs[0] as Obj).type = "file[]"; }, { clean: false }),

  // --- commands ---
  hit("unknown_command", "command spelling", (s) => { delete params(s, 2).samtoolsCommand; params(s, 2).command = "sorted"; },
    "/steps/2/parameters/command", { valid_values: SAMTOOLS_COMMANDS, message: `known: ${SAMTOOLS_COMMANDS.join(", ")}` }),
  hit("unknown_command", "samtoolsCommand spelling", (s) => { params(s, 2).samtoolsCommand = "sorted"; },
    "/steps/2/parameters/samtoolsCommand", { valid_values: SAMTOOLS_COMMANDS }),
  hit("unknown_command", "a prototype property is not a command", (s) => { params(s, 2).samtoolsCommand = "toString"; },
    "/steps/2/parameters/samtoolsCommand", { valid_values: SAMTOOLS_COMMANDS }),
  hit("unknown_command", "bwa lists its own commands", (s) => { params(s, 1).command = "align"; }, "/steps/1/parameters/command",
    { valid_values: ["index", "mem"] }),
  ...SAMTOOLS_COMMANDS.map((cmd) => miss("unknown_command", `samtools ${cmd}`, (s) => {
    params(s, 2).samtoolsCommand = cmd;
    if (cmd === "merge") params(s, 2).inputFile2 = "other.sorted.bam";
  })),
  miss("unknown_command", "bwaCommand spelling", (s) => { delete params(s, 1).command; params(s, 1).bwaCommand = "mem"; }),

  hit("missing_command", "bwa without a command", (s) => { delete params(s, 1).command; }, "/steps/1/parameters",
    { valid_values: ["index", "mem"], message: /"command" or "bwaCommand"/ }),
  hit("missing_command", "no parameters at all", (s) => { delete step(s, 2).parameters; }, "/steps/2/parameters", { valid_values: SAMTOOLS_COMMANDS }),
  miss("missing_command", "fastqc has a default command", (s) => {
    s.steps[2] = { stepId: "qc", toolName: "fastqc", dependsOn: ["align"], parameters: { inputFile: "${align.outputFile}" } };
  }),

  hit("conflicting_command", "command and samtoolsCommand disagree", (s) => { params(s, 2).command = "view"; }, "/steps/2/parameters/samtoolsCommand",
    { message: /disagree \("view" vs "sort"\)/ }),
  miss("conflicting_command", "both spellings agree", (s) => { params(s, 2).command = "sort"; }),

  hit("missing_parameter", "bwa mem without reference", (s) => { delete params(s, 1).reference; }, "/steps/1/parameters/reference",
    { message: 'bwa mem needs parameter "reference"' }),
  hit("missing_parameter", "samtools sort without inputFile", (s) => { delete params(s, 2).inputFile; }, "/steps/2/parameters/inputFile"),
  miss("missing_parameter", "required parameter given as an input reference", (s) => { params(s, 1).reference = "${reference}"; }),

  hit("invalid_parameter", 'threads: "abc"', (s) => { params(s, 2).threads = "abc"; }, "/steps/2/parameters/threads"),
  hit("invalid_parameter", "threads: 0", (s) => { params(s, 2).threads = 0; }, "/steps/2/parameters/threads"),
  hit("invalid_parameter", "threads: 257", (s) => { params(s, 2).threads = 257; }, "/steps/2/parameters/threads"),
  hit("invalid_parameter", 'byName: "yes"', (s) => { params(s, 2).byName = "yes"; }, "/steps/2/parameters/byName"),
  hit("invalid_parameter", "args holds a number", (s) => { params(s, 2).args = ["-m", 2]; }, "/steps/2/parameters/args/1"),
  hit("invalid_parameter", "empty inputFile", (s) => { params(s, 2).inputFile = ""; }, "/steps/2/parameters/inputFile"),
  miss("invalid_parameter", 'threads: "${threads}" with a declared input', (s) => {
    s.inputs.push({ name: "threads", type: "string", default: "4" });
    params(s, 2).threads = "${threads}";
  }),
  miss("invalid_parameter", 'threads: 4 and "8"', (s) => { params(s, 2).threads = 4; params(s, 1).threads = "8"; }),
  miss("invalid_parameter", 'booleans: true and "false"', (s) => { params(s, 2).byName = true; params(s, 1).markShorterSplits = "false"; }),

  // --- fields ---
  hit("unknown_field", "parameter typo outputFiel", (s) => { params(s, 1).outputFiel = "x.sam"; }, "/steps/1/parameters/outputFiel",
    { message: 'unknown field "outputFiel"' }),
  hit("unknown_field", "step-level typo dependson", (s) => { step(s, 2).dependson = step(s, 2).dependsOn; delete step(s, 2).dependsOn; },
    "/steps/2/dependson", { also: ["reference_not_in_depends_on"] }),
  hit("unknown_field", "top-level typo", (s) => { s.descripton = "x"; }, "/descripton"),
  hit("unknown_field", "input-level typo", (s) => { (s.inputs[0] as Obj).desc = "x"; }, "/inputs/0/desc"),
  hit("unknown_field", "fastqc takes no outputFile", (s) => {
    s.steps[2] = { stepId: "qc", toolName: "fastqc", dependsOn: ["align"], parameters: { inputFile: "${align.outputFile}", outputFile: "qc.html" } };
  }, "/steps/2/parameters/outputFile"),
  miss("unknown_field", "every documented field", (s) => {
    s.category = "alignment"; s.tags = ["dna"]; s.estimatedDuration = "5m"; s.executionMode = "process-manager";
    s.provenance = { sourceExecutionId: "e1", sourcePipelineId: "p1", sourceRunStatus: "completed", extractedAt: "2024-01-01T00:00:00Z",
      previousValues: { reads: "r.fq" }, futureField: 1 };
    Object.assign(step(s, 2), { description: "sort", timeout: 60_000, executionType: "ecs" });
  }),

  // --- step ids ---
  hit("invalid_step_id", "space", (s) => { step(s, 2).stepId = "so rt"; }, "/steps/2/stepId"),
  hit("invalid_step_id", "dot", (s) => { step(s, 2).stepId = "sort.bam"; }, "/steps/2/stepId"),
  hit("invalid_step_id", "empty", (s) => { step(s, 2).stepId = ""; }, "/steps/2/stepId"),
  miss("invalid_step_id", "letters, digits, _ and -", (s) => { step(s, 2).stepId = "Sort_2-b"; }),

  hit("duplicate_step_id", "a fourth step reusing index", (s) => {
    s.steps.push({ stepId: "index", toolName: "samtools", parameters: { command: "flagstat", inputFile: "${reads}", outputFile: "reads.flagstat.txt" } });
  }, "/steps/3/stepId", { message: 'stepId "index" is already used by step 0' }),
  miss("duplicate_step_id", "ids differing in case", (s) => {
    s.steps.push({ stepId: "Index", toolName: "samtools", parameters: { command: "flagstat", inputFile: "${reads}", outputFile: "reads.flagstat.txt" } });
  }),

  // --- top level ---
  hit("agent_workflow_unsupported", "agent-workflow", (s) => { s.executionMode = "agent-workflow"; }, "/executionMode"),
  miss("agent_workflow_unsupported", "process-manager", (s) => { s.executionMode = "process-manager"; }),
  miss("agent_workflow_unsupported", "absent", (s) => { delete s.executionMode; }),

  hit("invalid_execution_mode", "ecs", (s) => { s.executionMode = "ecs"; }, "/executionMode", { message: /"process-manager"/ }),
  hit("invalid_execution_mode", "wrong case", (s) => { s.executionMode = "Process-Manager"; }, "/executionMode"),
  hit("invalid_execution_mode", "number", (s) => { s.executionMode = 1; }, "/executionMode"),
  miss("invalid_execution_mode", "agent-workflow has its own code", (s) => { s.executionMode = "agent-workflow"; }, { clean: false }),
  miss("invalid_execution_mode", "process-manager", (s) => { s.executionMode = "process-manager"; }),

  hit("unsupported_spec_version", "2.0", (s) => { s.specVersion = "2.0"; }, "/specVersion", { message: /supported: 1\.0/ }),
  hit("unsupported_spec_version", "1", (s) => { s.specVersion = "1"; }, "/specVersion"),
  hit("unsupported_spec_version", "a number", (s) => { s.specVersion = 1.0; }, "/specVersion", { also: ["invalid_field"] }),
  miss("unsupported_spec_version", "absent", (s) => { delete s.specVersion; }),
  miss("unsupported_spec_version", "1.0", (s) => { s.specVersion = "1.0"; }),

  hit("invalid_timeout", "zero", (s) => { step(s, 2).timeout = 0; }, "/steps/2/timeout"),
  hit("invalid_timeout", "fraction", (s) => { step(s, 2).timeout = 1.5; }, "/steps/2/timeout"),
  hit("invalid_timeout", "string", (s) => { step(s, 2).timeout = "60000"; }, "/steps/2/timeout"),
  miss("invalid_timeout", "1 ms", (s) => { step(s, 2).timeout = 1; }),

  hit("internal_error", "a catalogue that throws is caught", undefined, "", { spec: BASE, ctx: { tools: throwingCatalogue }, message: /catalogue offline/ }),
  miss("internal_error", "a working custom catalogue", () => {}, { ctx: { tools: createCatalogue([samtools, bwa]) } }),

  // --- warnings ---
  hit("timeout_clamped", "7,200,001 ms", (s) => { step(s, 2).timeout = 7_200_001; }, "/steps/2/timeout", { message: /clamped to 7200000/ }),
  miss("timeout_clamped", "7,200,000 ms", (s) => { step(s, 2).timeout = 7_200_000; }),

  hit("execution_type_ignored", "batch", (s) => { step(s, 2).executionType = "batch"; }, "/steps/2/executionType"),
  hit("execution_type_ignored", "external-api", (s) => { step(s, 0).executionType = "external-api"; }, "/steps/0/executionType"),
  hit("execution_type_ignored", "foo", (s) => { step(s, 1).executionType = "foo"; }, "/steps/1/executionType", { message: /"foo" is ignored/ }),
  miss("execution_type_ignored", "ecs", (s) => { step(s, 2).executionType = "ecs"; }),

  hit("output_matched_by_position", "producer declares no outputFile", (s) => { delete params(s, 0).outputFile; }, "/steps/1/parameters/reference",
    { message: /step "index" \(step 0\) declares no outputFile; .* first output/ }),
  hit("output_matched_by_position", "outputFile2 when the producer declares only outputFile", (s) => { params(s, 2).inputFile = "${align.outputFile2}"; },
    "/steps/2/parameters/inputFile", { message: /declares no outputFile2; .* second output/ }),
  miss("output_matched_by_position", "producer declares outputFile2", (s) => {
    params(s, 1).outputFile2 = "unpaired.sam";
    params(s, 2).inputFile = "${align.outputFile2}";
  }),
  miss("output_matched_by_position", "producer declares outputFile (the base)", () => {}),

  hit("duplicate_output", "two steps write ref.fa", (s) => { params(s, 1).outputFile = "ref.fa"; }, "/steps/1/parameters/outputFile",
    { message: /"ref\.fa" is also written by step "index"/ }),
  hit("duplicate_output", "outputFile2 equal to another step's outputFile", (s) => { params(s, 2).outputFile2 = "aligned.sam"; },
    "/steps/2/parameters/outputFile2"),
  miss("duplicate_output", "names differing in case", (s) => { params(s, 1).outputFile = "Ref.fa"; }),
];

t.test("the base spec is valid with no errors and no warnings", async (t) => {
  t.same(validateSpec(base()), { valid: true, errors: [], warnings: [] });
});

t.test("the default catalogue holds exactly the 13 tools, sorted", async (t) => {
  t.same(defaultCatalogue.ids, ALL_TOOLS);
  t.same(Object.keys(samtools.commands), SAMTOOLS_COMMANDS);
});

t.test("every code in the table has a triggering case and a near miss", async (t) => {
  const byCode = new Map<string, Set<string>>();
  for (const c of cases) byCode.set(c.code, (byCode.get(c.code) ?? new Set()).add(c.kind));
  for (const [code, kinds] of byCode) t.same([...kinds].sort(), ["hit", "miss"], code);
});

for (const c of cases) {
  t.test(`${c.code} ${c.kind === "hit" ? "triggered" : "near miss"}: ${c.name}`, async (t) => {
    let doc: unknown;
    if (c.mutate) {
      const s = base();
      c.mutate(s);
      doc = s;
    } else doc = structuredClone(c.spec);
    const r = validateSpec(doc, c.ctx);
    t.equal(r.valid, r.errors.length === 0, "valid iff no errors");
    for (const i of all(r)) {
      t.ok(wellFormed(i.path), `well-formed pointer ${i.path}`);
      if (isObj(doc)) t.ok(resolves(doc, parentOf(i.path)), `the parent of ${i.path} exists in the spec`);
    }

    if (c.kind === "miss") {
      t.notOk(codes(r).includes(c.code), `no ${c.code}`, { issues: all(r) });
      if (c.clean ?? true) t.same(r, { valid: true, errors: [], warnings: [] }, "no errors and no warnings");
      return;
    }

    const warning = WARNING_CODES.has(c.code);
    const issue = (warning ? r.warnings : r.errors).find((i) => i.code === c.code && i.path === c.path);
    t.ok(issue, `${warning ? "warning" : "error"} ${c.code} at ${c.path}`, { issues: all(r) });
    t.same(codes(r), [...new Set([c.code, ...(c.also ?? [])])].sort(), "exactly the expected codes");
    if (!issue) return;
    t.type(issue.message, "string");
    t.ok(issue.message.length > 0, "has a message");
    if (c.message !== undefined) t.match(issue.message, c.message);
    if (c.valid_values) t.same(issue.valid_values, c.valid_values, "valid_values");
    if (warning && !(c.also ?? []).some((x) => !WARNING_CODES.has(x))) {
      t.equal(r.valid, true, "warnings alone leave the spec valid");
      t.same(r.errors, []);
    } else t.equal(r.valid, false);
  });
}

t.test("a spec with warnings only is valid", async (t) => {
  const s = base();
  step(s, 0).executionType = "batch";
  step(s, 1).timeout = 9_000_000;
  delete params(s, 0).outputFile;
  params(s, 2).outputFile2 = "aligned.sam";
  const r = validateSpec(s);
  t.equal(r.valid, true);
  t.same(r.errors, []);
  t.same(codes(r), ["duplicate_output", "execution_type_ignored", "output_matched_by_position", "timeout_clamped"]);
});

t.test("many problems are reported at once, each at its own pointer", async (t) => {
  const spec = {
    specVersion: "9",
    executionMode: "agent-workflow",
    colour: "blue",
    inputs: [
      { name: "1reads", type: "file" },
      { name: "reads", type: "file[]" },
      { name: "reads", type: "file" },
      { name: "mode", type: "select" },
      { name: "b", type: "string" },
    ],
    steps: [
      { stepId: "a", toolName: "samtool", parameters: {} },
      { stepId: "b", toolName: "samtools", dependsOn: ["c", "ghost"], timeout: 9_000_000, executionType: "batch",
        parameters: { command: "sorty", inputFile: "${nope}" } },
      { stepId: "c", toolName: "bwa", dependsOn: ["b"], parameters: { command: "mem", inputFile: "${reads}", threads: "many", outputFiel: "x" } },
      { stepId: "c", toolName: "bwa", parameters: { command: "index", inputFile: "${a.b}" } },
      { stepId: "d e", toolName: "samtools", parameters: { command: "sort", samtoolsCommand: "view", inputFile: "${c.outputFile}" } },
    ],
  };
  const r = validateSpec(spec);
  t.equal(r.valid, false);
  const expected: Array<[string, string]> = [
    ["unsupported_spec_version", "/specVersion"],
    ["agent_workflow_unsupported", "/executionMode"],
    ["unknown_field", "/colour"],
    ["invalid_input_name", "/inputs/0/name"],
    ["unsupported_input_type", "/inputs/1/type"],
    ["duplicate_input", "/inputs/2/name"],
    ["select_without_options", "/inputs/3/options"],
    ["input_name_conflict", "/inputs/4/name"],
    ["invalid_step_id", "/steps/4/stepId"],
    ["duplicate_step_id", "/steps/3/stepId"],
    ["unknown_tool", "/steps/0/toolName"],
    ["unknown_dependency", "/steps/1/dependsOn/1"],
    ["dependency_cycle", "/steps/1/dependsOn"],
    ["unknown_command", "/steps/1/parameters/command"],
    ["unresolved_reference", "/steps/1/parameters/inputFile"],
    ["invalid_parameter", "/steps/2/parameters/threads"],
    ["unknown_field", "/steps/2/parameters/outputFiel"],
    ["missing_parameter", "/steps/2/parameters/reference"],
    ["invalid_reference", "/steps/3/parameters/inputFile"],
    ["conflicting_command", "/steps/4/parameters/samtoolsCommand"],
    ["reference_not_in_depends_on", "/steps/4/parameters/inputFile"],
  ];
  for (const [code, path] of expected) {
    t.ok(r.errors.some((e) => e.code === code && e.path === path), `${code} at ${path}`, { errors: r.errors });
  }
  t.ok(r.warnings.some((w) => w.code === "timeout_clamped" && w.path === "/steps/1/timeout"));
  t.ok(r.warnings.some((w) => w.code === "execution_type_ignored" && w.path === "/steps/1/executionType"));
  t.ok(codes(r).length >= 5, `${codes(r).length} distinct codes`);
  t.ok(new Set(r.errors.map((e) => e.code)).size >= 15);
});

t.test("JSON pointers escape / as ~1 and ~ as ~0", async (t) => {
  const s = base();
  params(s, 2)["a/b~c"] = "${nope}";
  params(s, 2).args = [{ "x/y": ["${also~missing}"] }];
  step(s, 1)["odd/key"] = 1;
  s["~top"] = 1;
  s.inputs.push({ name: "a/b", type: "string" });
  const r = validateSpec(s);
  const at = (code: string, path: string) => t.ok(r.errors.some((e) => e.code === code && e.path === path), `${code} at ${path}`, { errors: r.errors });
  at("unknown_field", "/steps/2/parameters/a~1b~0c");
  at("unresolved_reference", "/steps/2/parameters/a~1b~0c");
  at("invalid_reference", "/steps/2/parameters/args/0/x~1y/0");
  at("unknown_field", "/steps/1/odd~1key");
  at("unknown_field", "/~0top");
  at("invalid_input_name", "/inputs/2/name");
  for (const e of r.errors) t.ok(resolves(s, parentOf(e.path)), `the parent of ${e.path} exists`);
});

// ---------- validator bugs ----------
// Regressions: each of these failed before the fix that came with these tests.


t.test("bug: a repeated unknown dependency is reported at every index", async (t) => {
  const s = base();
  step(s, 2).dependsOn = ["align", "nope", "nope"];
  const paths = validateSpec(s).errors.filter((e) => e.code === "unknown_dependency").map((e) => e.path);
  t.ok(paths.includes("/steps/2/dependsOn/1"), "the first nope is reported");
  t.same(paths, ["/steps/2/dependsOn/1", "/steps/2/dependsOn/2"], "both entries are reported");
});

t.test("bug: an escaped literal $${x} is not a reference, so typed parameters reject it", async (t) => {
  const s = base();
  Object.assign(params(s, 2), { threads: "$${x}", byName: "$${y}", outputFormat: "$${z}" });
  const r = validateSpec(s);
  t.equal(r.valid, false, "the spec is invalid");
  for (const k of ["threads", "byName", "outputFormat"]) {
    t.ok(r.errors.some((e) => e.code === "invalid_parameter" && e.path === `/steps/2/parameters/${k}`), `invalid_parameter at ${k}`);
  }
});

t.test("bug: a step with a duplicate stepId still has its dependsOn and references checked", async (t) => {
  const s = base();
  s.steps.push({ stepId: "sort", toolName: "samtools", dependsOn: ["align", "zzz"],
    parameters: { command: "flagstat", inputFile: "${align.outputFile}", outputFile: "aligned.flagstat.txt" } });
  const r = validateSpec(s);
  t.ok(r.errors.some((e) => e.code === "duplicate_step_id" && e.path === "/steps/3/stepId"), "duplicate_step_id");
  t.ok(r.errors.some((e) => e.code === "unknown_dependency" && e.path === "/steps/3/dependsOn/1"), "zzz is reported");
  t.notOk(r.errors.some((e) => e.code === "reference_not_in_depends_on"), "align is in its dependsOn, so no reference_not_in_depends_on");
});

// ---------- properties ----------

const STEP_IDS = ["index", "align", "sort", "a", "b", "__proto__", "constructor", "toString", "", "a/b", "x~y"];
const stepIdArb = fc.constantFrom(...STEP_IDS);
const refArb = fc.tuple(
  fc.constantFrom("", "$", "x ", "$$"),
  fc.oneof(stepIdArb, fc.string({ maxLength: 6 })),
  fc.constantFrom("", ".outputFile", ".outputFile2", ".b", "."),
  fc.constantFrom("}", "", "}}", "} ${reads}"),
).map(([pre, id, prop, end]) => `${pre}\${${id}${prop}${end}`);
const keyArb = fc.oneof(
  fc.constantFrom("command", "samtoolsCommand", "bwaCommand", "inputFile", "inputFile2", "reference", "outputFile", "outputFile2",
    "threads", "args", "byName", "__proto__", "constructor", "a/b", "x~y"),
  fc.string({ maxLength: 6 }),
);
const { value: valueArb } = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof({ depthSize: "small" },
    fc.jsonValue({ maxDepth: 1 }), refArb,
    fc.array(tie("value"), { maxLength: 3 }),
    fc.dictionary(keyArb, tie("value"), { maxKeys: 4 })),
}));
const stepArb = fc.record({
  stepId: fc.oneof(stepIdArb, valueArb),
  toolName: fc.oneof(fc.constantFrom(...ALL_TOOLS, "samtool", "constructor", ""), valueArb),
  parameters: fc.oneof(fc.dictionary(keyArb, fc.oneof(refArb, valueArb), { maxKeys: 6 }), valueArb),
  dependsOn: fc.oneof(fc.array(fc.oneof(stepIdArb, valueArb), { maxLength: 4 }), valueArb),
  timeout: fc.oneof(fc.integer({ min: -1, max: 10_000_000 }), valueArb),
  executionType: fc.oneof(fc.constantFrom("ecs", "batch", "external-api", "foo"), valueArb),
  description: valueArb,
  extra: valueArb,
}, { requiredKeys: [] });
const inputArb = fc.record({
  name: fc.oneof(stepIdArb, fc.constantFrom("reads", "reference", "1x", "_y"), valueArb),
  type: fc.oneof(fc.constantFrom("file", "string", "select", "file[]", "files"), valueArb),
  options: fc.oneof(fc.array(fc.string({ maxLength: 4 }), { maxLength: 3 }), valueArb),
  default: valueArb,
}, { requiredKeys: [] });
const looseSpecArb = fc.record({
  specVersion: fc.oneof(fc.constantFrom("1.0", "2.0"), valueArb),
  executionMode: fc.oneof(fc.constantFrom("process-manager", "agent-workflow"), valueArb),
  inputs: fc.oneof(fc.array(inputArb, { maxLength: 4 }), valueArb),
  steps: fc.oneof(fc.array(stepArb, { maxLength: 14 }), valueArb),
  name: valueArb,
  provenance: valueArb,
}, { requiredKeys: [] });

function checkShape(r: ValidationResult): boolean {
  if (!Array.isArray(r.errors) || !Array.isArray(r.warnings)) return false;
  if (r.valid !== (r.errors.length === 0)) return false;
  for (const i of all(r)) {
    if (typeof i.code !== "string" || typeof i.message !== "string" || typeof i.path !== "string") return false;
    if (!wellFormed(i.path) || i.code === "internal_error") return false;
    if (i.valid_values !== undefined && !(Array.isArray(i.valid_values) && i.valid_values.every((v) => typeof v === "string"))) return false;
  }
  return true;
}

t.test("property: never throws, returns arrays and well-formed issues for arbitrary JSON", async (t) => {
  fc.assert(fc.property(fc.jsonValue(), (v) => checkShape(validateSpec(v))), { numRuns: 1000 });
  t.pass();
});

t.test("property: never throws, returns arrays and well-formed issues for loosely spec-shaped objects", async (t) => {
  fc.assert(fc.property(looseSpecArb, (v) => checkShape(validateSpec(v))), { numRuns: 1000 });
  t.pass();
});

t.test("property: deterministic, and the input is left unchanged", async (t) => {
  fc.assert(fc.property(fc.oneof(looseSpecArb, fc.jsonValue()), (v) => {
    // Compared as JSON text, not as a structured clone: fc.jsonValue() can produce null-prototype
    // objects, which neither a clone nor a JSON round trip keeps exactly.
    const snapshot = JSON.stringify(v);
    const same = isDeepStrictEqual(validateSpec(v), validateSpec(v));
    const parsedTwice = isDeepStrictEqual(validateSpec(JSON.parse(snapshot)), validateSpec(JSON.parse(snapshot)));
    return same && parsedTwice && JSON.stringify(v) === snapshot;
  }), { numRuns: 500 });
  t.pass();
});

t.test("property: mutating one base step parameter never throws and keeps valid iff no errors", async (t) => {
  fc.assert(fc.property(fc.integer({ min: 0, max: 2 }), keyArb, fc.oneof(refArb, valueArb), (i, k, v) => {
    const s = base();
    params(s, i)[k] = v;
    return checkShape(validateSpec(s));
  }), { numRuns: 500 });
  t.pass();
});
