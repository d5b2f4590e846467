/**
 * The tool catalogue: every registered compute tool, command resolution (`command` or
 * `<toolName>Command`), and `buildInvocation`, the single pure path from a step's resolved
 * parameters to an argv array. Used by validation, both executors and `GET /v1/tools`.
 */
import { z } from "zod";
import { pointer, type Issue } from "../issues.js";
import { annovar } from "./annovar.js";
import { bcftools } from "./bcftools.js";
import { bedtools } from "./bedtools.js";
import { bowtie2, bwa, hisat2, minimap2 } from "./aligners.js";
import { gatk, picard } from "./java.js";
import { fastqc, trimmomatic } from "./qc.js";
import { samtools } from "./samtools.js";
import { tabix } from "./tabix.js";
import { BuildError, type BuildContext, type Invocation, type ToolDefinition } from "./types.js";
import { checkReference } from "../references.js";
import { messageOf } from "../errors.js";

export type { BuildContext, Invocation, OutputFile, StagedInput, ToolDefinition, CommandDefinition, Runtime, ToolResources, ResourceQuantities } from "./types.js";
export { secondaryCandidates } from "./secondary.js";

export interface ToolCatalogue {
  get(id: string): ToolDefinition | undefined;
  /** Registered tool ids, sorted. */
  readonly ids: readonly string[];
}

export function createCatalogue(tools: readonly ToolDefinition[]): ToolCatalogue {
  const map = new Map(tools.map((t) => [t.id, t]));
  const ids = [...map.keys()].sort();
  return { get: (id) => map.get(id), ids };
}

export const BUILTIN_TOOLS: readonly ToolDefinition[] = [
  samtools, bcftools, tabix, bwa, bowtie2, hisat2, minimap2, bedtools, fastqc, trimmomatic, picard, gatk, annovar,
];

export const defaultCatalogue: ToolCatalogue = createCatalogue(BUILTIN_TOOLS);

/** Where the subcommand was found, and its value. */
export type CommandChoice =
  | { ok: true; command: string; key: string | undefined }
  | { ok: false; issue: Omit<Issue, "path">; key: string | undefined };

/** Finds the subcommand of a step: `command` or `<toolName>Command`, or the tool's default. */
export function resolveCommand(tool: ToolDefinition, params: Readonly<Record<string, unknown>>): CommandChoice {
  const toolKey = `${tool.id}Command`;
  const keys: string[] = [];
  if (params["command"] !== undefined) keys.push("command");
  if (params[toolKey] !== undefined) keys.push(toolKey);
  const known = () => Object.keys(tool.commands);
  if (keys.length === 2 && params[keys[0] as string] !== params[keys[1] as string]) {
    return { ok: false, key: keys[1], issue: { code: "conflicting_command", message: `command and ${tool.id}Command disagree (${JSON.stringify(params[keys[0] as string])} vs ${JSON.stringify(params[keys[1] as string])})` } };
  }
  const key = keys[0];
  if (key === undefined) {
    if (tool.defaultCommand) return { ok: true, command: tool.defaultCommand, key: undefined };
    return { ok: false, key, issue: { code: "missing_command", message: `${tool.id} needs a subcommand in "command" or "${tool.id}Command"`, valid_values: known() } };
  }
  const value = params[key];
  if (typeof value !== "string" || !Object.hasOwn(tool.commands, value)) {
    return { ok: false, key, issue: { code: "unknown_command", message: `${JSON.stringify(value)} is not a known ${tool.id} command; known: ${known().join(", ")}`, valid_values: known() } };
  }
  return { ok: true, command: value, key };
}

export type BuildResult = { ok: true; command: string; invocation: Invocation } | { ok: false; errors: Issue[] };

/**
 * From a step's parameters, with every `${...}` already resolved, to an invocation. Checks
 * the parameters against the tool's schema first; never throws.
 */
export function buildInvocation(tool: ToolDefinition, params: Readonly<Record<string, unknown>>, ctx: BuildContext): BuildResult {
  const errors: Issue[] = [];
  const choice = resolveCommand(tool, params);
  if (!choice.ok) return { ok: false, errors: [{ ...choice.issue, path: choice.key ? pointer(choice.key) : "" }] };
  const parsed = tool.inputSchema.safeParse(params);
  if (!parsed.success) errors.push(...zodIssues(parsed.error, []));
  const cmd = tool.commands[choice.command];
  if (!cmd) return { ok: false, errors: [{ code: "unknown_command", path: "", message: `unknown command ${choice.command}` }] };
  errors.push(...missingParameters(tool, choice.command, params, []));
  if (errors.length) return { ok: false, errors };
  try {
    const invocation = cmd.build(params, ctx);
    // Every reference names a volume configured where the step runs (when that is known).
    const refErrors = (invocation.references ?? []).flatMap((r) => {
      const why = checkReference(r.uri, ctx.referenceVolumes);
      return why ? [{ code: "unknown_reference_volume", path: pointer(...r.param.split("/")), message: `${r.param}: ${why}` }] : [];
    });
    if (refErrors.length) return { ok: false, errors: refErrors };
    return { ok: true, command: choice.command, invocation };
  } catch (e) {
    if (e instanceof BuildError) return { ok: false, errors: [{ code: e.code ?? "invalid_parameter", path: pointer(...e.param.split("/")), message: e.message }] };
    return { ok: false, errors: [{ code: "invalid_parameter", path: "", message: messageOf(e) }] };
  }
}

/** Required parameters of a command that `params` lacks, as issues with pointers below `base`. */
export function missingParameters(tool: ToolDefinition, command: string, params: Readonly<Record<string, unknown>>, base: ReadonlyArray<string | number>): Issue[] {
  const cmd = tool.commands[command];
  if (!cmd) return [];
  const issues: Issue[] = [];
  for (const r of cmd.required) {
    if (params[r] === undefined) issues.push({ code: "missing_parameter", path: pointer(...base, r), message: `${tool.id} ${command} needs parameter "${r}"` });
  }
  const groups = cmd.requiredAnyOf ?? [];
  if (groups.length && !groups.some((g) => g.every((r) => params[r] !== undefined))) {
    const first = groups[0]?.[0] as string;
    issues.push({ code: "missing_parameter", path: pointer(...base, first), message: `${tool.id} ${command} needs ${groups.map((g) => g.join(" and ")).join(", or ")}` });
  }
  return issues;
}

/** zod issues as Operon issues, with JSON pointers below `base`. */
export function zodIssues(error: z.ZodError, base: ReadonlyArray<string | number>): Issue[] {
  return error.issues.map((i) => {
    const path = [...base, ...i.path.map((s) => (typeof s === "symbol" ? String(s) : s))];
    const field = i.path.length ? String(i.path[i.path.length - 1]) : "value";
    if (i.code === "unrecognized_keys") {
      return { code: "unknown_field", path: pointer(...path, ...(i.keys.length === 1 ? [i.keys[0] as string] : [])), message: `unknown field${i.keys.length > 1 ? "s" : ""} ${i.keys.map((k) => JSON.stringify(k)).join(", ")}` };
    }
    return { code: "invalid_parameter", path: pointer(...path), message: `${field}: ${i.message}` };
  });
}

/** The JSON Schema of a tool's parameters (for `GET /v1/tools`). */
export function toolInputJsonSchema(tool: ToolDefinition): Record<string, unknown> {
  return z.toJSONSchema(tool.inputSchema, { unrepresentable: "any" }) as Record<string, unknown>;
}
