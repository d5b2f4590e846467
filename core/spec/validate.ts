/**
 * `validateSpec`: every check a run applies to a pipeline spec, collected rather than
 * stopped at the first — each error and warning with its JSON pointer (Tekton's
 * pipeline_validation is the model). The zod schema checks fields; this adds the checks
 * across fields: tools and their commands, the step graph, and `${...}` references.
 * It never throws, whatever JSON it is given.
 */
import type { z } from "zod";
import { buildDag } from "../dag.js";
import { OUTPUT_NAMES, findReferences, interpolate, type OutputName, type Reference } from "../interpolate.js";
import { IssueList, closest, pointer, type ValidationResult } from "../issues.js";
import { buildInvocation, defaultCatalogue, missingParameters, resolveCommand, zodIssues, type ToolCatalogue, type ToolDefinition } from "../tools/index.js";
import { isReferenceUri, normalizeFileValue } from "../paths.js";
import { EXECUTION_MODE, INPUT_TYPES, MAX_STEPS, MAX_STEP_TIMEOUT_MS, PipelineSpecSchema, STEP_RESOURCE_KEYS, SUPPORTED_SPEC_VERSIONS } from "./schema.js";
import { messageOf } from "../errors.js";

export interface ValidationContext {
  tools: ToolCatalogue;
  /**
   * The reference volumes configured here (`ref://<volume>/…` must name one); undefined when
   * not known (an offline check): then only a reference's form is checked.
   */
  referenceVolumes?: readonly string[];
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => v !== null && typeof v === "object" && !Array.isArray(v);
const asArray = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

export function validateSpec(spec: unknown, context: ValidationContext = { tools: defaultCatalogue }): ValidationResult {
  const issues = new IssueList();
  try {
    const readsInputs = new Map<number, Set<string>>();
    check(spec, context, issues, readsInputs);
    checkDefaults(spec, context, issues, readsInputs);
  } catch (e) {
    issues.error("internal_error", "", `validation stopped unexpectedly: ${messageOf(e)}`);
  }
  return dedupe(issues.result());
}

/** Per step index, the parameters (top-level names) whose values read an input with a default. */
type InputReaders = Map<number, Set<string>>;

function check(spec: unknown, { tools, referenceVolumes }: ValidationContext, issues: IssueList, readsInputs: InputReaders): void {
  if (!isObject(spec)) {
    issues.error("invalid_type", "", "a pipeline spec must be a JSON object");
    return;
  }
  schemaIssues(spec, issues);

  if (spec.specVersion !== undefined && !SUPPORTED_SPEC_VERSIONS.includes(spec.specVersion as never)) {
    issues.error("unsupported_spec_version", "/specVersion", `specVersion ${JSON.stringify(spec.specVersion)} is not supported (supported: ${SUPPORTED_SPEC_VERSIONS.join(", ")})`);
  }

  const steps = asArray(spec.steps);
  const inputs = asArray(spec.inputs);

  // Step ids: first occurrence wins, later duplicates are errors.
  const stepIndex = new Map<string, number>();
  steps.forEach((s, i) => {
    if (!isObject(s) || typeof s.stepId !== "string") return;
    if (stepIndex.has(s.stepId)) {
      issues.error("duplicate_step_id", pointer("steps", i, "stepId"), `stepId "${s.stepId}" is already used by step ${stepIndex.get(s.stepId)}`);
    } else stepIndex.set(s.stepId, i);
  });

  // Inputs whose default checkDefaults tries in the parameters that read them.
  const withDefault = new Set(inputs.flatMap((inp) => (isObject(inp) && typeof inp.name === "string" && typeof inp.default === "string" ? [inp.name] : [])));

  // Inputs: unique names, none equal to a stepId.
  const inputNames = new Map<string, number>();
  inputs.forEach((inp, i) => {
    if (!isObject(inp) || typeof inp.name !== "string") return;
    if (inputNames.has(inp.name)) {
      issues.error("duplicate_input", pointer("inputs", i, "name"), `input "${inp.name}" is already declared by input ${inputNames.get(inp.name)}`);
    } else inputNames.set(inp.name, i);
    if (stepIndex.has(inp.name)) {
      issues.error("input_name_conflict", pointer("inputs", i, "name"), `input "${inp.name}" has the same name as a stepId`);
    }
  });

  // The step graph.
  const nodes: Array<{ stepId: string; dependsOn: string[] }> = [];
  for (const s of steps) {
    if (!isObject(s) || typeof s.stepId !== "string") continue;
    const dependsOn: string[] = [];
    for (const d of asArray(s.dependsOn)) if (typeof d === "string") dependsOn.push(d);
    nodes.push({ stepId: s.stepId, dependsOn });
  }
  const dag = buildDag(nodes);
  // Checked on every step's own list, so duplicates and steps with a repeated stepId are covered too.
  steps.forEach((s, i) => {
    if (!isObject(s)) return;
    asArray(s.dependsOn).forEach((dep, j) => {
      if (typeof dep === "string" && !stepIndex.has(dep)) {
        issues.error("unknown_dependency", pointer("steps", i, "dependsOn", j), `dependsOn names "${dep}", which is not a step${hint(dep, stepIndex.keys())}`);
      }
    });
  });
  for (const cycle of dag.topologicalOrder() ? [] : dag.cycles()) {
    const first = cycle[0] as string;
    issues.error("dependency_cycle", pointer("steps", stepIndex.get(first) as number, "dependsOn"),
      `dependsOn forms a cycle: ${[...cycle, first].join(" → ")}`);
  }

  // Per step: tool, command, parameters, timeout, executionType, references.
  const positionalWarned = new Set<string>();
  const literalOutputs = new Map<string, string>();
  steps.forEach((s, i) => {
    if (!isObject(s)) return;
    const at = (...p: Array<string | number>) => pointer("steps", i, ...p);
    const params = isObject(s.parameters) ? s.parameters : {};

    if (typeof s.toolName === "string" && s.toolName !== "") {
      const tool = tools.get(s.toolName);
      if (!tool) {
        issues.error("unknown_tool", at("toolName"), `unknown tool "${s.toolName}"${hint(s.toolName, tools.ids)}; valid tools: ${tools.ids.join(", ")}`, { valid_values: [...tools.ids] });
      } else {
        const choice = resolveCommand(tool, params);
        if (!choice.ok) {
          issues.error(choice.issue.code, choice.key ? at("parameters", choice.key) : at("parameters"), choice.issue.message,
            choice.issue.valid_values ? { valid_values: choice.issue.valid_values } : undefined);
        }
        const parsed = tool.inputSchema.safeParse(params);
        if (!parsed.success) {
          for (const issue of zodIssues(parsed.error, ["steps", i, "parameters"])) {
            if (choice.key && issue.path === at("parameters", choice.key)) continue;
            if (issue.path === at("parameters", "command") || issue.path === at("parameters", `${tool.id}Command`)) continue;
            issues.error(issue.code, issue.path, issue.message);
          }
        }
        if (choice.ok) {
          for (const m of missingParameters(tool, choice.command, params, ["steps", i, "parameters"])) issues.error(m.code, m.path, m.message);
        }
        if (choice.ok && parsed.success) for (const e of referenceIssues(tool, params, referenceVolumes)) issues.error(e.code, at("parameters") + e.path, e.message);
      }
    }

    if (typeof s.timeout === "number" && s.timeout > MAX_STEP_TIMEOUT_MS) {
      issues.warn("timeout_clamped", at("timeout"), `timeout ${s.timeout} ms is above the ${MAX_STEP_TIMEOUT_MS} ms limit and is clamped to ${MAX_STEP_TIMEOUT_MS}`);
    }
    if (s.executionType !== undefined && s.executionType !== "ecs") {
      issues.warn("execution_type_ignored", at("executionType"), `executionType ${JSON.stringify(s.executionType)} is ignored: registered tools always run as "ecs"`);
    }

    for (const name of OUTPUT_NAMES) {
      const key = name;
      const v = params[key];
      if (typeof v !== "string") continue;
      const other = literalOutputs.get(v);
      if (other !== undefined && other === s.stepId) issues.warn("duplicate_output", at("parameters", name), `${name} ${JSON.stringify(v)} is the same file as this step's other output`);
      else if (other !== undefined) issues.warn("duplicate_output", at("parameters", name), `${name} ${JSON.stringify(v)} is also written by step "${other}"; the later step overwrites it`);
      else if (typeof s.stepId === "string") literalOutputs.set(v, s.stepId);
    }

    const self = typeof s.stepId === "string" ? s.stepId : undefined;
    // From this step's own dependsOn (not the graph node), so a step with a repeated stepId is checked too.
    const ownDeps = asArray(s.dependsOn).filter((d): d is string => typeof d === "string" && stepIndex.has(d));
    const dependsOnTransitively = (id: string) => ownDeps.some((d) => d === id || dag.ancestors(d).has(id));
    for (const { path, segment } of findReferences(params, ["steps", i, "parameters"])) {
      // Pointers are built only when there is something to report.
      const where = () => pointer(...path);
      if (segment.kind === "invalid") {
        issues.error("invalid_reference", where(), segment.reason);
        continue;
      }
      const ref = segment.ref;
      if (ref.kind === "input") {
        const param = path[3];
        if (typeof param === "string" && withDefault.has(ref.name)) { const set = readsInputs.get(i) ?? new Set<string>(); set.add(param); readsInputs.set(i, set); }
        if (!inputNames.has(ref.name)) {
          const stepHint = stepIndex.has(ref.name) ? ` (to use step "${ref.name}"'s output write \${${ref.name}.outputFile})` : hint(ref.name, inputNames.keys());
          issues.error("unresolved_reference", where(), `${ref.raw} names no declared input${stepHint}`);
        }
        continue;
      }
      const producerIndex = stepIndex.get(ref.stepId);
      if (producerIndex === undefined) {
        issues.error("unresolved_reference", where(), `${ref.raw} names no step${hint(ref.stepId, stepIndex.keys())}`);
      } else if (ref.stepId === self) {
        issues.error("unresolved_reference", where(), `${ref.raw}: a step cannot read its own output`);
      } else if (!dependsOnTransitively(ref.stepId)) {
        issues.error("reference_not_in_depends_on", where(), `${ref.raw} reads step "${ref.stepId}", which is not in this step's dependsOn (directly or transitively)`);
      } else {
        positionalWarning(steps[producerIndex], producerIndex, ref.stepId, ref.output, where, positionalWarned, issues);
      }
    }
  });
}

/**
 * The parameters that read an input with a default are checked again by the tool's schema
 * with the default in place (a file default that leaves the workspace, an output name made
 * of a default that starts with "-", an `args` element that names a host path): what only
 * interpolation reveals, as a run would refuse it at submission (which builds every step).
 * Only those parameters are interpolated, each parsed by its own field schema.
 */
function checkDefaults(spec: unknown, { tools }: ValidationContext, issues: IssueList, readsInputs: InputReaders): void {
  if (readsInputs.size === 0 || !isObject(spec) || !Array.isArray(spec.steps)) return;
  const defaults = new Map<string, string>();
  asArray(spec.inputs).forEach((inp, i) => {
    if (!isObject(inp) || typeof inp.name !== "string" || typeof inp.default !== "string") return;
    const name = inp.name as string;
    const dflt = inp.default as string;
    if (inp.type === "file") {
      const n = normalizeFileValue(dflt);
      if (!n.ok) { issues.error("invalid_default", pointer("inputs", i, "default"), `the default of file input "${name}": ${n.reason}`); return; }
      defaults.set(name, n.path);
    } else defaults.set(name, dflt);
  });
  if (defaults.size === 0) return;
  // An earlier step's output stands in as a plain workspace path: always a fit value.
  const resolver = (ref: Reference) => (ref.kind === "input" ? defaults.get(ref.name) : `pipelines/run/${ref.stepId}.out`);
  for (const [i, params] of readsInputs) {
    const st = spec.steps[i];
    const at = pointer("steps", i);
    if (!isObject(st) || !isObject(st.parameters) || typeof st.toolName !== "string") continue;
    const tool = tools.get(st.toolName);
    if (!tool || issues.errors.some((e) => e.path === at || e.path.startsWith(`${at}/`))) continue;
    const shape = (tool.inputSchema as unknown as { shape?: Record<string, z.ZodType> }).shape;
    for (const name of params) {
      const { value, unresolved } = interpolate(st.parameters[name], resolver);
      if (unresolved.length) continue;
      // The field's own schema when the tool's is an object (every catalogue tool's is).
      const parsed = shape?.[name] ? shape[name].safeParse(value) : tool.inputSchema.safeParse({ [name]: value });
      if (parsed.success) continue;
      for (const e of zodIssues(parsed.error, shape?.[name] ? ["steps", i, "parameters", name] : ["steps", i, "parameters"])) {
        issues.error(e.code, e.path, `${name}: ${e.message.replace(/^[^:]*: /, "")} (with the inputs' defaults)`);
      }
    }
  }
}

/** Codes of the reference problems a step's build reveals (core/tools/params.ts Stager.reference, buildInvocation). */
const REFERENCE_CODES = new Set(["unknown_reference_volume", "invalid_reference"]);

/** Whether a value holds a `ref://` string anywhere (arrays and objects included). */
function holdsReferenceUri(v: unknown, depth = 0): boolean {
  if (typeof v === "string") return isReferenceUri(v);
  if (depth > 8 || v === null || typeof v !== "object") return false;
  return Object.values(v).some((x) => holdsReferenceUri(x, depth + 1));
}

/**
 * The reference problems of a step's literal values: a volume that is not configured, a
 * reference given to a command that writes beside its input. Found by building the step with
 * a plain name standing in for each `${...}` (what those hold is built at submission, with the
 * run's inputs). Only steps that name reference data are built — a `ref://` value, or
 * ANNOVAR's `database` (a directory on a reference volume).
 */
function referenceIssues(tool: ToolDefinition, params: Json, referenceVolumes: readonly string[] | undefined) {
  if (!holdsReferenceUri(params) && params.database === undefined) return [];
  const literal = findReferences(params).length > 0 ? interpolate(params, () => "x").value : params;
  const built = buildInvocation(tool, literal, { runtime: "local", ...(referenceVolumes ? { referenceVolumes } : {}) });
  return built.ok ? [] : built.errors.filter((e) => REFERENCE_CODES.has(e.code));
}

function positionalWarning(producer: unknown, producerIndex: number, stepId: string, output: OutputName, at: () => string, warned: Set<string>, issues: IssueList): void {
  const params = isObject(producer) && isObject(producer.parameters) ? producer.parameters : {};
  if (params[output] !== undefined) return;
  const where = at();
  const key = `${where}|${stepId}.${output}`;
  if (warned.has(key)) return;
  warned.add(key);
  issues.warn("output_matched_by_position", where,
    `step "${stepId}" (step ${producerIndex}) declares no ${output}; \${${stepId}.${output}} is matched by position to its ${output === "outputFile" ? "first" : "second"} output`);
}

/** Field-level checks from the zod schema, with codes that say what went wrong. */
function schemaIssues(spec: Json, issues: IssueList): void {
  const parsed = PipelineSpecSchema.safeParse(spec);
  if (parsed.success) return;
  const steps = spec.steps;
  for (const zi of parsed.error.issues) {
    const [head, index, field] = zi.path as Array<string | number>;
    const at = pointer(...(zi.path as Array<string | number>));
    const code = classify(zi, spec);
    if (head === "steps" && zi.path.length === 1) {
      if (steps === undefined) issues.error("missing_steps", "/steps", "steps is required: a pipeline needs at least one step");
      else if (Array.isArray(steps) && steps.length === 0) issues.error("empty_steps", "/steps", "steps is empty: a pipeline needs at least one step");
      else if (Array.isArray(steps) && steps.length > MAX_STEPS) issues.error("too_many_steps", "/steps", `${steps.length} steps: a pipeline has at most ${MAX_STEPS} steps`);
      else issues.error("invalid_field", "/steps", "steps must be an array of step objects");
      continue;
    }
    if (head === "steps" && typeof index === "number" && field === "resources") {
      issues.error(code === "unknown_field" ? code : "invalid_resources", resourcesPointer(zi), resourcesMessage(zi, index));
      continue;
    }
    if (code === "unknown_field") {
      const [one] = zi.code === "unrecognized_keys" ? zi.keys : [];
      const keys = zi.code === "unrecognized_keys" ? zi.keys : [];
      issues.error(code, keys.length === 1 ? `${at}${pointer(one as string)}` : at, `unknown field${keys.length > 1 ? "s" : ""} ${keys.map((k) => JSON.stringify(k)).join(", ")}`);
      continue;
    }
    const name = field !== undefined ? String(field) : index !== undefined ? `${String(head)}[${String(index)}]` : String(head ?? "spec");
    issues.error(code, at, messageFor(code, zi, name));
  }
}

/** The pointer of a `steps[i].resources` issue: the unknown key itself when there is one. */
function resourcesPointer(zi: z.core.$ZodIssue): string {
  const path = zi.path as Array<string | number>;
  return zi.code === "unrecognized_keys" && zi.keys.length === 1 ? pointer(...path, zi.keys[0] as string) : pointer(...path);
}

/** A `steps[i].resources` issue in words that name the field as a user writes it: `steps[2].resources.memory: …`. */
function resourcesMessage(zi: z.core.$ZodIssue, index: number): string {
  const rest = (zi.path as Array<string | number>).slice(3).map(String);
  const where = `steps[${index}].resources${rest.map((k) => `.${k}`).join("")}`;
  if (zi.code === "unrecognized_keys") return `${where}: unknown field${zi.keys.length > 1 ? "s" : ""} ${zi.keys.map((k) => JSON.stringify(k)).join(", ")} (known: ${STEP_RESOURCE_KEYS.join(", ")})`;
  if (zi.code === "invalid_type") return `${where}: ${rest.length ? "must be a string holding a Kubernetes quantity, such as \"16Gi\"" : "must be an object with cpu, memory and/or ephemeralStorage"}`;
  return `${where}: ${zi.message}`;
}

function classify(zi: z.core.$ZodIssue, spec: Json): string {
  const custom = zi.code === "custom" ? (zi.params as { code?: string } | undefined)?.code : undefined;
  if (custom) return custom;
  if (zi.code === "unrecognized_keys") return "unknown_field";
  const p = zi.path;
  if (p[0] === "executionMode") return spec.executionMode === "agent-workflow" ? "agent_workflow_unsupported" : "invalid_execution_mode";
  if (p[0] === "inputs" && p.length === 3 && p[2] === "name") return "invalid_input_name";
  if (p[0] === "inputs" && p.length === 3 && p[2] === "type") {
    const raw = asArray(spec.inputs)[p[1] as number];
    return isObject(raw) && raw.type === "file[]" ? "unsupported_input_type" : "invalid_input_type";
  }
  if (p[0] === "steps" && p.length === 3 && p[2] === "stepId") return "invalid_step_id";
  if (p[0] === "steps" && p.length === 3 && p[2] === "toolName") return "invalid_tool_name";
  if (p[0] === "steps" && p.length === 3 && p[2] === "timeout") return "invalid_timeout";
  if (p[0] === "steps" && p.length >= 3 && p[2] === "dependsOn") return "invalid_dependency";
  return "invalid_field";
}

function messageFor(code: string, zi: z.core.$ZodIssue, name: string): string {
  switch (code) {
    case "agent_workflow_unsupported": return "executionMode \"agent-workflow\" cannot be saved or run as a spec; use \"process-manager\" or omit it";
    case "invalid_execution_mode": return `executionMode must be "${EXECUTION_MODE}" when present`;
    case "unsupported_input_type": return "input type \"file[]\" is reserved for batch runs and is not supported";
    case "invalid_input_type": return `input type must be one of ${INPUT_TYPES.join(", ")}`;
    case "invalid_input_name": return "input name must start with a letter or underscore and hold only letters, digits and underscores";
    case "invalid_step_id": return "stepId must be a non-empty string of letters, digits, _ and -";
    default: return `${name}: ${zi.message}`;
  }
}

function hint(word: string, candidates: Iterable<string>): string {
  const c = closest(word, candidates);
  return c ? ` (did you mean "${c}"?)` : "";
}

function dedupe(r: ValidationResult): ValidationResult {
  if (r.errors.length < 2) return r;
  const seen = new Set<string>();
  const errors = r.errors.filter((e) => {
    const k = `${e.code}|${e.path}|${e.message}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
  return { valid: errors.length === 0, errors, warnings: r.warnings };
}
