/**
 * Save-spec extraction (spec: "Saving a finished run as a spec"): turns a finished run's
 * manifest into a reusable pipeline spec.
 *  1. Workspace files the run read become declared `file` inputs (no default); the values
 *     used go to `provenance.previousValues`.
 *  2. Files produced by an earlier step are wired as `${stepId.outputFile}` (or 2).
 *  3. A prefix shared by the output file names becomes the input `sampleName`.
 *  4. File inputs never keep a default.
 *  5. What needs review comes back as warnings: file lists left as literals, a failed run.
 * Pure: the caller supplies the time and the ids of the built-in pipelines.
 */
import { OUTPUT_NAMES, escapeLiteral, findReferences, hasReferences, parseTemplate, type OutputName } from "./interpolate.js";
import { pointer, type Issue } from "./issues.js";
import { isReferenceUri } from "./paths.js";
import type { RunManifest } from "./manifest.js";
import { SPEC_VERSION, type PipelineInput, type PipelineSpec, type PipelineStep } from "./spec/schema.js";
import { validateSpec } from "./spec/validate.js";
import { defaultCatalogue, type ToolCatalogue } from "./tools/index.js";

export interface ExtractOptions {
  /** Display name of the saved spec; defaults to the source pipeline's name. */
  name?: string;
  /** Ids of built-in pipelines, which a saved id must never equal. */
  builtinIds: readonly string[];
  /** ISO time of extraction (`provenance.extractedAt`). */
  now: string;
  tools?: ToolCatalogue;
}

export type ExtractResult =
  | { ok: true; spec: PipelineSpec; warnings: Issue[] }
  | { ok: false; errors: Issue[] };


export function extractSpec(manifest: RunManifest, options: ExtractOptions): ExtractResult {
  const tools = options.tools ?? defaultCatalogue;
  if (manifest.status !== "completed" && manifest.status !== "failed") {
    return { ok: false, errors: [{ code: "run_not_finished", path: "/status", message: `run ${manifest.executionId} is ${manifest.status}; only completed or failed runs can be saved` }] };
  }
  const def = manifest.pipelineDefinition;
  if ((def.executionMode as string | undefined) === "agent-workflow") {
    return { ok: false, errors: [{ code: "agent_workflow_unsupported", path: "/pipelineDefinition/executionMode", message: "agent-workflow runs cannot be saved as a spec" }] };
  }
  const warnings: Issue[] = [];
  if (manifest.status === "failed") {
    warnings.push({ code: "source_run_failed", path: "/provenance/sourceRunStatus", message: `run ${manifest.executionId} failed; review the saved spec before running it` });
  }

  // Produced files: workspace path and storage key → (step, output position).
  const produced = new Map<string, { stepId: string; position: number }>();
  for (const st of manifest.steps) {
    st.outputFiles.forEach((f, position) => {
      produced.set(`${manifest.outputFolder}/${f.filename}`, { stepId: st.stepId, position });
      produced.set(f.s3Key, { stepId: st.stepId, position });
    });
  }

  const declared = new Map((def.inputs ?? []).map((i) => [i.name, i]));
  const used = new Map<string, PipelineInput>();       // inputs of the saved spec, by name
  const previousValues: Record<string, string> = {};
  const fileInputByValue = new Map<string, string>();  // literal path → input name
  const stepIds = new Set(def.steps.map((s) => s.stepId));

  const keepInput = (name: string): void => {
    const d = declared.get(name);
    if (!d || used.has(name)) return;
    const { default: dflt, ...rest } = d;
    const v = manifest.parameters[name] ?? dflt;
    // A file input's value is the run's own data, except a file on a reference volume (shared: kept as the default).
    const keep = d.type === "file" ? (v !== undefined && isReferenceUri(v) ? v : undefined) : dflt;
    used.set(name, { ...rest, ...(keep !== undefined ? { default: keep } : {}) });
    if (v !== undefined) previousValues[name] = v;
  };

  const fileInputFor = (value: string, suggested: string): string => {
    const existing = fileInputByValue.get(value);
    if (existing) return existing;
    const base = suggested.replace(/[^A-Za-z0-9_]/g, "_").replace(/^([^A-Za-z_])/, "_$1");
    let name = base;
    for (let n = 2; used.has(name) || declared.has(name) || stepIds.has(name); n++) name = `${base}_${n}`;
    used.set(name, { name, type: "file", description: `File read by the source run (${value})` });
    previousValues[name] = value;
    fileInputByValue.set(value, name);
    return name;
  };

  const steps: PipelineStep[] = def.steps.map((step, i) => {
    const tool = tools.get(step.toolName);
    const fileParams = new Set(tool?.fileParams ?? ["inputFile", "inputFile2", "reference"]);
    const deps = new Set(step.dependsOn ?? []);
    const params: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(step.parameters ?? {})) {
      params[key] = rewrite(key, value);
    }
    function rewrite(key: string, value: unknown): unknown {
      // Keep references to declared inputs (and the inputs with them), wherever they sit.
      for (const { segment } of findReferences(value)) if (segment.kind === "ref" && segment.ref.kind === "input") keepInput(segment.ref.name);
      if (typeof value === "string") {
        if (hasReferences(value)) return value;
        const wired = wireProduced(key, value);
        if (wired !== undefined) return wired;
        // A file on a reference volume is shared lab data, not the run's own input: it stays as written.
        if (fileParams.has(key) && !isReferenceUri(value)) return `\${${fileInputFor(value, `${step.stepId}_${key}`)}}`;
        return value;
      }
      if (Array.isArray(value)) {
        let literalFiles = false;
        const list = value.map((v) => {
          if (typeof v !== "string" || hasReferences(v)) return v;
          const wired = wireProduced(key, v);
          if (wired !== undefined) return wired;
          if (fileParams.has(key) && !isReferenceUri(v)) literalFiles = true;
          return v;
        });
        if (literalFiles) {
          warnings.push({ code: "file_list_literal", path: pointer("steps", i, "parameters", key), message: `${key} lists workspace files literally; they stay as written and are not inputs — review before re-running` });
        }
        return list;
      }
      return value;
    }
    /** A file an earlier step produced, as `${stepId.outputFile}`; undefined when it is not one. */
    function wireProduced(key: string, value: string): string | undefined {
      const p = produced.get(value);
      if (!p || p.stepId === step.stepId) return undefined;
      if (p.position >= OUTPUT_NAMES.length) {
        warnings.push({ code: "literal_output_reference", path: pointer("steps", i, "parameters", key), message: `${key} reads output ${p.position + 1} of step "${p.stepId}", which has no \${...} name; it stays a literal path of the source run — review before re-running` });
        return value;
      }
      deps.add(p.stepId);
      return `\${${p.stepId}.${OUTPUT_NAMES[p.position] as OutputName}}`;
    }
    const out: PipelineStep = { ...step, parameters: params };
    if (deps.size) out.dependsOn = [...deps];
    return out;
  });

  abstractSampleName(steps, used, previousValues);

  const name = options.name ?? def.name ?? def.id ?? "pipeline";
  const spec: PipelineSpec = {
    specVersion: SPEC_VERSION,
    id: savedId(name, manifest.executionId, options.builtinIds),
    name,
    ...(def.description !== undefined ? { description: def.description } : {}),
    ...(def.category !== undefined ? { category: def.category } : {}),
    ...(def.tags !== undefined ? { tags: def.tags } : {}),
    ...(def.estimatedDuration !== undefined ? { estimatedDuration: def.estimatedDuration } : {}),
    executionMode: "process-manager",
    inputs: [...used.values()],
    steps,
    provenance: {
      sourceExecutionId: manifest.executionId,
      sourcePipelineId: manifest.pipelineId,
      sourceRunStatus: manifest.status,
      extractedAt: options.now,
      previousValues,
    },
  };
  const check = validateSpec(spec, { tools });
  if (!check.valid) return { ok: false, errors: check.errors };
  return { ok: true, spec, warnings: [...warnings, ...check.warnings] };
}

/**
 * Rule 3: when two or more literal output file names share a prefix ending at a separator
 * (`s1.sorted.bam`, `s1.flagstat.txt` → `s1`), that prefix becomes the input `sampleName`.
 */
function abstractSampleName(steps: PipelineStep[], used: Map<string, PipelineInput>, previousValues: Record<string, string>): void {
  if (used.has("sampleName")) return;
  const names: Array<{ params: Record<string, unknown>; key: string; value: string }> = [];
  for (const s of steps) {
    const params = (s.parameters ?? {}) as Record<string, unknown>;
    for (const key of OUTPUT_NAMES) {
      const v = params[key];
      if (typeof v === "string" && parseTemplate(v).every((seg) => seg.kind === "text") && !v.includes("/")) names.push({ params, key, value: v });
    }
  }
  if (names.length < 2) return;
  let prefix = names.reduce((acc, n) => commonPrefix(acc, n.value), names[0]?.value ?? "");
  const cut = Math.max(prefix.lastIndexOf("."), prefix.lastIndexOf("_"), prefix.lastIndexOf("-"));
  const full = names.every((n) => n.value.length > prefix.length && /[._-]/.test(n.value[prefix.length] ?? ""));
  if (!full) prefix = cut > 0 ? prefix.slice(0, cut) : "";
  if (!/^[A-Za-z0-9]/.test(prefix) || prefix.length < 1) return;
  for (const n of names) n.params[n.key] = "${sampleName}" + escapeLiteral(n.value.slice(prefix.length));
  used.set("sampleName", { name: "sampleName", type: "string", description: "Prefix of the output file names", default: prefix });
  previousValues["sampleName"] = prefix;
}

function commonPrefix(a: string, b: string): string {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return a.slice(0, i);
}

/** `<slug of name>-<6 chars of the run id>`, never equal to a built-in pipeline id. */
export function savedId(name: string, executionId: string, builtinIds: readonly string[]): string {
  const slug = name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 48) || "pipeline";
  const tail = executionId.toLowerCase().replace(/[^a-z0-9]/g, "");
  for (let n = 6; n <= tail.length; n++) {
    const id = `${slug}-${tail.slice(-n)}`;
    if (!builtinIds.includes(id)) return id;
  }
  let id = `${slug}-saved`;
  while (builtinIds.includes(id)) id += "-x";
  return id;
}
