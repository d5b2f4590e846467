/**
 * Building blocks shared by every tool: the common parameter names (docs/pipelines.md#step-parameters) as zod
 * schemas that also accept `${...}` references, path helpers, and the small functions
 * argv builders use to read validated parameters. Nothing here builds a shell string.
 */
import { z } from "zod";
import { hasReferences } from "../interpolate.js";
import { checkArgument, checkOutputName, isReferenceUri, normalizeFileValue, normalizeWorkspacePath, parseReferenceUri } from "../paths.js";
import { MAX_REFERENCES_PER_STEP, referenceMountPath, type ReferenceInput } from "../references.js";
import { BuildError, type BuildContext, type Invocation, type OutputFile, type Params, type StagedInput, type ToolResources } from "./types.js";

/** True when the string holds a real `${...}` reference (an escaped `$${` does not count). */
const isRef = (v: string): boolean => v.includes("${") && hasReferences(v);

/** A non-empty string (a path, a name); references allowed. */
export const str = () => z.string().min(1);

/**
 * A workspace file (`inputFile`, `reference`, an element of `inputFiles`, …), or a file on a
 * reference volume (`ref://<volume>/<path>`): a literal value must pass the workspace path
 * normalizer (or the reference parser); one holding a `${...}` reference is checked once
 * resolved (by the Stager, which every file parameter goes through).
 */
export const file = () => z.string().min(1).superRefine((v, ctx) => {
  if (isRef(v)) return;
  const n = normalizeFileValue(v);
  if (!n.ok) ctx.addIssue({ code: "custom", message: n.reason });
});

/** An output name (`outputFile`, `outputFile2`): see `checkOutputName`; checked again once resolved. */
export const outputName = () => z.string().min(1).superRefine((v, ctx) => {
  if (isRef(v)) return;
  const n = checkOutputName(v);
  if (!n.ok) ctx.addIssue({ code: "custom", message: n.reason });
});

/** One element of `args`: see `checkArgument`; checked again once resolved. */
export const argument = () => z.string().superRefine((v, ctx) => {
  if (isRef(v)) return;
  const why = checkArgument(v);
  if (why) ctx.addIssue({ code: "custom", message: why });
});

/**
 * A free-text value passed as one option's value (a region, a read-group field, a sample
 * name): no control characters, no path separators or `@file` forms, not an option itself.
 */
export const text = () => z.string().min(1).max(4096).superRefine((v, ctx) => {
  if (isRef(v)) return;
  const why = checkText(v);
  if (why) ctx.addIssue({ code: "custom", message: why });
});

/**
 * A value the tool reads as text only (a bcftools query format, a bwa read-group line with
 * its `\\t` escapes): anything printable, no control characters.
 */
export const value = () => z.string().min(1).max(4096).superRefine((v, ctx) => {
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0008\u000b-\u001f\u007f]/.test(v)) ctx.addIssue({ code: "custom", message: "contains a control character other than tab or newline" });
});

/** A filter expression (bcftools -i/-e): `INFO/DP>10` is fine, `ID=@file` (a file read) is not. */
export const expression = () => value().refine((v) => !v.includes("@"), "must not contain \"@\" (expressions may not read files)");

/** Why `v` is unfit as a free-text option value; undefined when fit. */
export function checkText(v: string): string | undefined {
  const why = checkArgument(v);
  if (why) return why;
  if (v.startsWith("-")) return "must not start with \"-\"";
  return undefined;
}

/** An integer within bounds, or a string that is digits or holds a `${...}` reference. */
export const int = (min: number, max: number) =>
  z.union([z.number().int().min(min).max(max), z.string().refine(
    (v) => isRef(v) || (/^\d+$/.test(v) && Number(v) >= min && Number(v) <= max),
    `expected an integer from ${min} to ${max} or a \${...} reference`)]);

/** A number within bounds, or a numeric string / reference. */
export const num = (min: number, max: number) =>
  z.union([z.number().min(min).max(max), z.string().refine(
    (v) => isRef(v) || (/^-?\d+(\.\d+)?$/.test(v) && Number(v) >= min && Number(v) <= max),
    `expected a number from ${min} to ${max} or a \${...} reference`)]);

/** A boolean, or the strings "true"/"false", or a reference. */
export const bool = () => z.union([z.boolean(), z.string().refine((v) => v === "true" || v === "false" || isRef(v), "expected true, false or a ${...} reference")]);

/** An enumerated string, or a reference resolved at run time and checked then. */
export const oneOf = <T extends string>(values: readonly [T, ...T[]]) =>
  z.union([z.enum(values), z.string().refine(isRef, `expected one of ${values.join(", ")}`)]);

/** The parameters every tool accepts (docs/pipelines.md#step-parameters): command, files, outputs, args, threads. */
export function commonParams(toolId: string, commands: readonly [string, ...string[]]) {
  return {
    command: z.enum(commands).optional(),
    [`${toolId}Command`]: z.enum(commands).optional(),
    inputFile: file().optional(),
    inputFile2: file().optional(),
    reference: file().optional(),
    outputFile: outputName().optional(),
    outputFile2: outputName().optional(),
    args: z.array(argument()).max(256).optional(),
    threads: int(1, 256).optional(),
  } as const;
}

/** The path's last segment. */
export function basename(p: string): string {
  const parts = p.split("/");
  return parts[parts.length - 1] || p;
}

const FORMAT_EXT = /\.(bam|sam|cram|fastq|fq|fasta|fa|fna|vcf|bcf|bed|bedgraph|gff|gtf|txt|tsv|csv|sai|mmi|avinput)$/i;

/** The basename without compression and format extensions: `data/s1.R1.fastq.gz` → `s1.R1`. */
export function stem(p: string): string {
  return basename(p).replace(/\.(gz|bgz|bz2)$/i, "").replace(FORMAT_EXT, "") || "output";
}

/** A file name safe to place locally: never starting with `-` or `.` (the source is already normalized). */
function safeName(name: string): string {
  return name.startsWith("-") || name.startsWith(".") ? `_${name}` : name;
}

/** A value placed as a positional argument: refused when it would read as an option. */
export function positional(p: Params, name: string): string | undefined {
  return optText(p, name);
}

/** A free-text parameter passed to the tool (see `text`), checked once resolved. */
export function optText(p: Params, name: string): string | undefined {
  const v = optStr(p, name);
  const why = v === undefined ? undefined : checkText(v);
  if (why) throw new BuildError(name, `${name}: ${JSON.stringify(v)} ${why}`);
  return v;
}

/** A string parameter that passed its schema (`value`, `expression`); checked here against control characters again. */
export function optValue(p: Params, name: string): string | undefined {
  const v = optStr(p, name);
  // eslint-disable-next-line no-control-regex
  if (v !== undefined && /[\u0000-\u0008\u000b-\u001f\u007f]/.test(v)) throw new BuildError(name, `${name}: contains a control character other than tab or newline`);
  if (v !== undefined && v.startsWith("-")) throw new BuildError(name, `${name}: ${JSON.stringify(v.slice(0, 200))} must not start with "-"`);
  return v;
}

/** Reads a string parameter; undefined when absent. */
export function optStr(p: Params, name: string): string | undefined {
  const v = p[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw new BuildError(name, `${name}: expected a string`);
  return v;
}

export function reqStr(p: Params, name: string): string {
  const v = optStr(p, name);
  if (v === undefined || v === "") throw new BuildError(name, `${name} is required`);
  return v;
}

/** Reads an integer parameter given as a number or a string of digits. */
export function optInt(p: Params, name: string): number | undefined {
  const v = p[name];
  if (v === undefined || v === null) return undefined;
  const n = typeof v === "number" ? v : typeof v === "string" && /^\d+$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n)) throw new BuildError(name, `${name}: expected an integer, got ${JSON.stringify(v)}`);
  return n;
}

export function optNum(p: Params, name: string): number | undefined {
  const v = p[name];
  if (v === undefined || v === null) return undefined;
  const n = typeof v === "number" ? v : typeof v === "string" && /^-?\d+(\.\d+)?$/.test(v) ? Number(v) : NaN;
  if (!Number.isFinite(n)) throw new BuildError(name, `${name}: expected a number, got ${JSON.stringify(v)}`);
  return n;
}

export function optBool(p: Params, name: string): boolean | undefined {
  const v = p[name];
  if (v === undefined || v === null) return undefined;
  if (v === true || v === "true") return true;
  if (v === false || v === "false") return false;
  throw new BuildError(name, `${name}: expected true or false, got ${JSON.stringify(v)}`);
}

export function optEnum<T extends string>(p: Params, name: string, values: readonly T[]): T | undefined {
  const v = optStr(p, name);
  if (v === undefined) return undefined;
  if (!(values as readonly string[]).includes(v)) throw new BuildError(name, `${name}: expected one of ${values.join(", ")}, got ${JSON.stringify(v)}`);
  return v as T;
}

/** Extra arguments, each its own argv element, each checked by `checkArgument`. */
export function extraArgs(p: Params): string[] {
  const v = p["args"];
  if (v === undefined) return [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== "string")) throw new BuildError("args", "args: expected an array of strings");
  v.forEach((a: string, i) => {
    const why = checkArgument(a);
    if (why) throw new BuildError(`args/${i}`, `args/${i}: ${JSON.stringify(a.slice(0, 200))} ${why}`);
  });
  return v as string[];
}

/**
 * The output name chosen by the user (`checkOutputName`: inside the run folder, not
 * reserved), or the command's default name derived from its input.
 */
export function outputPath(p: Params, name: string, fallback: string): string {
  const given = optStr(p, name);
  const v = given ?? fallback;
  const n = checkOutputName(v);
  if (!n.ok) throw new BuildError(name, `${name}: ${JSON.stringify(v.slice(0, 200))} ${n.reason}`);
  return v;
}

function checkRelative(name: string, v: string): void {
  const n = checkOutputName(v);
  if (!n.ok) throw new BuildError(name, `${name}: ${JSON.stringify(v.slice(0, 200))}: ${n.reason}`);
}

/**
 * Collects staged inputs while a command builds its argv. Each input file is placed at
 * `in/<n>/<basename>` (n counts inputs, so equal basenames never collide) unless the
 * command asks for a specific local name. A file on a reference volume (`ref://…`) is not
 * staged: the tool reads it in place at `/ref/<volume>/<path>` (read-only, its index files
 * beside it on the volume), and it is listed in `references`.
 */
export class Stager {
  readonly inputs: StagedInput[] = [];
  readonly references: ReferenceInput[] = [];

  constructor(private readonly p: Params) {}

  /** Stages a required file parameter and returns its local path. */
  file(name: string, as?: string): string {
    const source = reqStr(this.p, name);
    return this.add(name, source, as);
  }

  /** Stages an optional file parameter; undefined when absent. */
  optFile(name: string, as?: string): string | undefined {
    const source = optStr(this.p, name);
    return source === undefined ? undefined : this.add(name, source, as);
  }

  /**
   * Stages `inputFile` for an index command, which writes its index beside the file: under
   * the name `outputFile` gives, else the input's own basename, so the indexed file is the
   * step's output and `${step.outputFile}` brings the index with it.
   */
  indexed(fallback: string): string {
    return this.file("inputFile", outputPath(this.p, "outputFile", basename(optStr(this.p, "inputFile") ?? fallback)));
  }

  /**
   * Stages an explicit value (e.g. one element of a file list) under a parameter name. The
   * source goes through the workspace path normalizer here, once its references are
   * resolved: every file parameter of every tool passes this point.
   */
  add(param: string, source: string, as?: string): string {
    if (isReferenceUri(source)) return this.reference(param, source, as);
    const n = normalizeWorkspacePath(source);
    if (!n.ok) throw new BuildError(param, `${param}: ${n.reason}`);
    const local = as ?? `in/${this.inputs.length + 1}/${safeName(basename(n.path))}`;
    checkRelative(param, local);
    this.inputs.push({ param, source: n.path, local });
    return local;
  }

  /**
   * A file (or directory) on a reference volume, read in place: its path as the tool sees
   * it. Refused where the command would place the input under a name of its own (an index
   * command writes beside its input, and a reference volume is read-only).
   */
  reference(param: string, uri: string, as?: string): string {
    const r = parseReferenceUri(uri);
    if (!r.ok) throw new BuildError(param, `${param}: ${r.reason}`, "invalid_reference");
    if (as !== undefined) {
      throw new BuildError(param, `${param}: ${r.uri} is on a read-only reference volume, and this command writes its output beside its input: give it a workspace file (index reference data when preparing the volume)`, "invalid_reference");
    }
    if (this.references.length >= MAX_REFERENCES_PER_STEP) throw new BuildError(param, `${param}: a step reads at most ${MAX_REFERENCES_PER_STEP} reference files`, "invalid_reference");
    const path = referenceMountPath(r.volume, r.path);
    this.references.push({ param, uri: r.uri, path });
    return path;
  }
}

/** Assembles an invocation; `program` is the executable prefix for the runtime. */
export function invocation(
  program: readonly string[],
  argv: readonly string[],
  stager: Stager,
  outputs: OutputFile[],
  extra: { stdout?: string; mkdirs?: string[] } = {},
): Invocation {
  // Whatever a command derived its output names from, none may leave the run folder or
  // replace what the run folder reserves (run.json, logs/).
  outputs.forEach((o, i) => { for (const path of [o.path, ...o.secondary]) checkRelative(i === 0 ? "outputFile" : i === 1 ? "outputFile2" : "outputs", path); });
  if (extra.stdout !== undefined) checkRelative("outputFile", extra.stdout);
  // The folders outputs are written into exist before the tool runs.
  const mkdirs = new Set(extra.mkdirs ?? []);
  for (const path of [...outputs.flatMap((o) => [o.path, ...o.secondary]), ...(extra.stdout === undefined ? [] : [extra.stdout])]) {
    const cut = path.lastIndexOf("/");
    if (cut > 0) mkdirs.add(path.slice(0, cut));
  }
  const inv: Invocation = { argv: [...program, ...argv], inputs: stager.inputs, outputs, mkdirs: [...mkdirs] };
  if (stager.references.length) inv.references = stager.references;
  if (extra.stdout !== undefined) inv.stdout = extra.stdout;
  return inv;
}

/** The executable prefix for a runtime. */
export function program(ctx: BuildContext, local: readonly string[], container: readonly string[] = local): readonly string[] {
  return ctx.runtime === "local" ? local : container;
}

/** `["-@", n]`-style option only when the parameter is set. */
export function flag(name: string, value: string | number | undefined): string[] {
  return value === undefined ? [] : [name, String(value)];
}

export const out = (path: string, secondary: string[] = []): OutputFile => ({ path, secondary });

/**
 * Pod resources of a command in cluster mode (types.ts ToolResources): the CPU and memory it
 * asks for, the memory it may grow to, and, for commands that stage or write large files,
 * the scratch space (ephemeral storage) of its working directory.
 */
export function podResources(cpu: string, memory: string, memoryLimit: string, scratch?: string): ToolResources {
  return { requests: { cpu, memory, ...(scratch ? { "ephemeral-storage": scratch } : {}) }, limits: { memory: memoryLimit } };
}
