/**
 * Resolving a spec for one run: the concrete input values (defaults applied, selects and
 * file paths checked) and each step's parameters with every `${...}` replaced.
 */
import { interpolate, type OutputName, type Reference } from "../interpolate.js";
import { pointer, type Issue } from "../issues.js";
import { isReferenceUri, normalizeFileValue } from "../paths.js";
import { checkReference } from "../references.js";
import { buildInvocation, defaultCatalogue, type ToolCatalogue } from "../tools/index.js";
import { compressionIssues } from "./compression.js";
import type { PipelineSpec, PipelineStep } from "./schema.js";

export type InputResolution = { ok: true; values: Record<string, string> } | { ok: false; errors: Issue[] };

/**
 * Applies defaults and checks supplied values against the declared inputs. A file input may
 * name a workspace file or a file on a reference volume (`ref://<volume>/<path>`), which must
 * be one of `referenceVolumes` when they are given.
 */
export function resolveInputs(spec: Pick<PipelineSpec, "inputs">, supplied: Readonly<Record<string, unknown>> = {}, referenceVolumes?: readonly string[]): InputResolution {
  const errors: Issue[] = [];
  const declared = new Map((spec.inputs ?? []).map((i) => [i.name, i]));
  const values: Record<string, string> = {};
  for (const name of Object.keys(supplied)) {
    if (!declared.has(name)) {
      errors.push({ code: "unknown_input", path: pointer("input", name), message: `"${name}" is not a declared input${declared.size ? ` (declared: ${[...declared.keys()].join(", ")})` : ""}`, valid_values: [...declared.keys()] });
    }
  }
  for (const [name, decl] of declared) {
    const raw = Object.hasOwn(supplied, name) ? supplied[name] : undefined;
    if (raw !== undefined && typeof raw !== "string") {
      errors.push({ code: "invalid_input_value", path: pointer("input", name), message: `input "${name}" must be a string` });
      continue;
    }
    const value = raw ?? decl.default;
    if (value === undefined) {
      errors.push({ code: "missing_input", path: pointer("input", name), message: `input "${name}" is required (it has no default)` });
      continue;
    }
    if (decl.type === "select" && !(decl.options ?? []).includes(value)) {
      errors.push({ code: "invalid_input_value", path: pointer("input", name), message: `input "${name}" must be one of ${(decl.options ?? []).join(", ")}`, valid_values: [...(decl.options ?? [])] });
      continue;
    }
    if (decl.type === "file") {
      const norm = normalizeFileValue(value);
      if (!norm.ok) {
        errors.push({ code: "invalid_input_value", path: pointer("input", name), message: `input "${name}": ${norm.reason}` });
        continue;
      }
      const why = isReferenceUri(norm.path) ? checkReference(norm.path, referenceVolumes) : undefined;
      if (why) {
        errors.push({ code: "unknown_reference_volume", path: pointer("input", name), message: `input "${name}": ${why}` });
        continue;
      }
      values[name] = norm.path;
    } else values[name] = value;
  }
  return errors.length ? { ok: false, errors } : { ok: true, values };
}

/** Looks up the workspace path of an earlier step's output (undefined when it has none). */
export type OutputLookup = (stepId: string, output: OutputName) => string | undefined;

export type StepResolution = { ok: true; parameters: Record<string, unknown> } | { ok: false; errors: Issue[] };

/** A step's parameters with inputs and earlier outputs substituted. */
export function resolveStepParameters(step: Pick<PipelineStep, "parameters">, inputs: Readonly<Record<string, string>>, outputs: OutputLookup): StepResolution {
  const resolver = (ref: Reference): string | undefined =>
    ref.kind === "input" ? (Object.hasOwn(inputs, ref.name) ? inputs[ref.name] : undefined) : outputs(ref.stepId, ref.output);
  const { value, unresolved } = interpolate(step.parameters ?? {}, resolver);
  if (unresolved.length) {
    return { ok: false, errors: unresolved.map((raw) => ({ code: "unresolved_reference", path: pointer("parameters"), message: `${raw} could not be resolved` })) };
  }
  return { ok: true, parameters: value };
}

/**
 * Builds every step's argv once before anything runs, with the run's input values and a
 * stand-in path for each earlier step's output: parameter values that are only known to be
 * wrong once interpolated (an output named `${sampleName}.bam` with sampleName `-rf`, an
 * input that climbs out of the workspace, an index step whose file is named `run.json`)
 * become issues at their JSON pointer, so a run is refused before it starts. Steps whose
 * tool is unknown or whose references do not resolve are left to `validateSpec`. Then the
 * files each step would read are checked against the compressed forms its tool reads, by
 * their names (./compression.ts): a gzipped FASTA given to `hisat2 build` is refused here.
 */
export function dryBuildSteps(spec: Pick<PipelineSpec, "steps" | "inputs">, inputs: Readonly<Record<string, string>>, tools: ToolCatalogue = defaultCatalogue, referenceVolumes?: readonly string[]): Issue[] {
  const issues: Issue[] = [];
  const standIn: OutputLookup = (stepId, output) => `pipelines/run/${stepId}.${output === "outputFile" ? "out" : "out2"}`;
  spec.steps.forEach((step, i) => {
    const tool = tools.get(step.toolName);
    if (!tool) return;
    const params = resolveStepParameters(step, inputs, standIn);
    if (!params.ok) return;
    const built = buildInvocation(tool, params.parameters, { runtime: "local", ...(referenceVolumes ? { referenceVolumes } : {}) });
    if (built.ok) return;
    for (const e of built.errors) issues.push({ ...e, path: pointer("steps", i, "parameters") + e.path });
  });
  return [...issues, ...compressionIssues(spec, inputs, { tools, ...(referenceVolumes ? { referenceVolumes } : {}) })];
}
