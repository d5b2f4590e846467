/**
 * Compressed inputs at submission (docs/pipelines.md#compressed-inputs): every step is built
 * with the run's inputs, and each file it stages is checked against what its parameter reads
 * (core/tools/compression.ts; `reads` beside each tool). A file an index step passes through
 * (`bwa index`'s output is its input, renamed `reference.fa`) keeps the compression it came
 * with, so a gzipped reference is caught where `bcftools mpileup` reads it two steps later.
 * Each refusal names the run's input (`/input/reference`) when the file is one, else the
 * step's parameter (`/steps/3/parameters/reference`), and says what to do.
 *
 * From names alone a `.gz` file may be gzip or bgzip: a parameter that needs bgzip is then
 * checked only once the caller has read the file's first bytes (`compressionProbes` lists
 * which workspace files; engine/compression.ts reads them and passes `known`).
 */
import { buildDag } from "../dag.js";
import { interpolate, type Reference } from "../interpolate.js";
import { pointer, type Issue } from "../issues.js";
import { isReferenceUri } from "../paths.js";
import { advice, compressionFromName, readsInWords, readsOf, unreadable, type Compression } from "../tools/compression.js";
import { buildInvocation, type Invocation, type ToolCatalogue, type ToolDefinition } from "../tools/index.js";
import type { PipelineSpec, PipelineStep } from "./schema.js";

export interface CompressionContext {
  tools: ToolCatalogue;
  referenceVolumes?: readonly string[];
  /** Compression read from the bytes of workspace files (workspace-relative paths). */
  known?: ReadonlyMap<string, Compression>;
}

/** Where a staged file came from: a run input (its name), a literal path, or an earlier step (`produced`: not in the workspace yet). */
interface Origin { input?: string; path: string; compression: Compression; produced?: true }

interface Walk { issues: Issue[]; probes: Set<string> }

type Spec = Pick<PipelineSpec, "steps" | "inputs">;

/** The refusals of a run: files given to parameters that cannot read their compression. */
export function compressionIssues(spec: Spec, inputs: Readonly<Record<string, string>>, ctx: CompressionContext): Issue[] {
  const seen = new Set<string>();
  return walk(spec, inputs, ctx).issues.filter((i) => {
    const k = `${i.path}\n${i.message}`;
    return seen.has(k) ? false : (seen.add(k), true);
  });
}

/** Workspace files named `.gz` that reach a parameter needing bgzip: their first bytes decide (COMPRESSION_PROBE_BYTES). */
export function compressionProbes(spec: Spec, inputs: Readonly<Record<string, string>>, ctx: CompressionContext): string[] {
  return [...walk(spec, inputs, ctx).probes];
}

/** Steps in dependency order, each built with its producers' outputs standing in by their real names. */
function walk(spec: Spec, inputs: Readonly<Record<string, string>>, ctx: CompressionContext): Walk {
  const result: Walk = { issues: [], probes: new Set() };
  const order = buildDag(spec.steps).topologicalOrder();
  if (!order) return result;
  const fileInputs = new Map<string, string>();
  for (const decl of spec.inputs ?? []) {
    const v = inputs[decl.name];
    if (decl.type === "file" && v !== undefined && !fileInputs.has(v)) fileInputs.set(v, decl.name);
  }
  const origins = new Map<string, Origin>();
  const produced = new Map<string, string[]>();
  const lookup = (ref: Reference): string | undefined =>
    ref.kind === "input" ? (Object.hasOwn(inputs, ref.name) ? inputs[ref.name] : undefined)
      : produced.get(ref.stepId)?.[ref.output === "outputFile" ? 0 : 1] ?? `pipelines/run/${ref.stepId}.${ref.output}`;
  const originOf = (source: string): Origin => origins.get(source) ?? {
    path: source,
    compression: ctx.known?.get(source) ?? compressionFromName(source),
    ...(fileInputs.has(source) ? { input: fileInputs.get(source) as string } : {}),
  };
  for (const stepId of order) {
    const index = spec.steps.findIndex((s) => s.stepId === stepId);
    const step = spec.steps[index];
    const tool = step ? ctx.tools.get(step.toolName) : undefined;
    if (!step || !tool) continue;
    const { value, unresolved } = interpolate(step.parameters ?? {}, lookup);
    if (unresolved.length) continue;
    const built = buildInvocation(tool, value, { runtime: "local", ...(ctx.referenceVolumes ? { referenceVolumes: ctx.referenceVolumes } : {}) });
    if (!built.ok) continue;
    const local = checkStep({ index, step, tool, command: built.command }, built.invocation, originOf, result);
    // Each output stands in under its own name; one that is a staged input (an index step's) keeps its origin.
    produced.set(stepId, built.invocation.outputs.map((o) => {
      const standIn = `pipelines/run/${stepId}/${o.path}`;
      origins.set(standIn, local.get(o.path) ?? { path: standIn, compression: compressionFromName(o.path), produced: true });
      return standIn;
    }));
  }
  return result;
}

interface StepAt { index: number; step: PipelineStep; tool: ToolDefinition; command: string }

/** Checks the files one built step stages (and reads in place); returns their origins by local path. */
function checkStep(at: StepAt, inv: Invocation, originOf: (source: string) => Origin, result: Walk): Map<string, Origin> {
  const local = new Map<string, Origin>();
  const files = [...inv.inputs.map((f) => ({ param: f.param, source: f.source, local: f.local as string | undefined })),
    ...(inv.references ?? []).map((r) => ({ param: r.param, source: r.uri, local: undefined }))];
  for (const f of files) {
    const origin = originOf(f.source);
    if (f.local !== undefined) local.set(f.local, origin);
    const reads = readsOf(at.tool, at.command, f.param);
    if (!reads) continue;
    if (reads === "bgzip" && origin.compression === "gz" && !origin.produced && !isReferenceUri(origin.path)) result.probes.add(origin.path);
    const why = unreadable(reads, origin.compression);
    if (!why) continue;
    const param = f.param.split("/")[0] as string;
    const subject = origin.input !== undefined ? `input "${origin.input}" (${origin.path})` : `${f.param} (${origin.path})`;
    const form = why === "gzip" ? "is compressed with plain gzip, not bgzip" : "is gzip-compressed";
    result.issues.push({
      code: "unsupported_compression",
      path: origin.input !== undefined ? pointer("input", origin.input) : pointer("steps", at.index, "parameters", ...f.param.split("/")),
      message: `${subject} ${form}, and step "${at.step.stepId}" (${at.tool.id} ${at.command}) reads its ${param} ${readsInWords(reads)}: ${advice(why)}`,
    });
  }
  return local;
}
