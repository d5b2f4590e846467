/**
 * The shape of a compute tool in Operon's catalogue. A tool is pure data plus pure
 * functions: which commands it knows, what parameters it takes (a zod schema, exported as
 * JSON Schema by `GET /v1/tools`), and how validated parameters become an argv array —
 * never a shell string. Executors (local processes, Kubernetes Jobs) only carry it out.
 */
import type { z } from "zod";
import type { ReferenceInput } from "../references.js";

/** Where the argv will run: `local` uses Debian's executables, `container` the pinned image's. */
export type Runtime = "local" | "container";

export interface BuildContext {
  runtime: Runtime;
  /**
   * The reference volumes configured where the step runs (`ref://<volume>/…` must name one);
   * undefined when not known (an offline check): then only a reference's form is checked.
   */
  referenceVolumes?: readonly string[];
}

/** A file to stage into the step's working directory before the tool runs. */
export interface StagedInput {
  /** The parameter it came from (e.g. `inputFile`, `reference`, `args[2]` is never staged). */
  param: string;
  /** The path as the step received it (workspace-relative, or an earlier step's output key). */
  source: string;
  /** Where it is placed, relative to the working directory. Secondary files land beside it. */
  local: string;
}

/** A file the step produces, relative to the working directory. */
export interface OutputFile {
  path: string;
  /** Files produced with it that travel with it (indexes), relative to the working directory. */
  secondary: string[];
}

export interface Invocation {
  argv: string[];
  /** When set, the tool's standard output is written to this file (no shell redirection). */
  stdout?: string;
  inputs: StagedInput[];
  /** Files on read-only reference volumes the tool reads in place (`ref://…`, never staged); absent: none. */
  references?: ReferenceInput[];
  /** In order: [0] is what `${step.outputFile}` names, [1] is `${step.outputFile2}`. */
  outputs: OutputFile[];
  /** Directories to create in the working directory before running. */
  mkdirs: string[];
}

/**
 * What a file parameter reads, as the tool really behaves: `plain` uncompressed only; `bgzip`
 * uncompressed or bgzip (BGZF) — the tool needs random access, through a `.fai`/`.gzi` or an
 * index; `gzip` uncompressed or any gzip (bgzip is gzip too), read from start to end.
 */
export type Reads = "plain" | "bgzip" | "gzip";
/** By top-level parameter name (`inputFiles` covers each of its elements). */
export type FileReads = Readonly<Record<string, Reads>>;

/** Parameters after interpolation and schema validation. */
export type Params = Readonly<Record<string, unknown>>;

/**
 * Kubernetes resources of a step pod's tool container (cluster mode), keyed as in a pod spec.
 * The catalogue's are defaults: the step-pod configuration and a step's own `resources`
 * override them (core/kubernetes/step-pods.ts).
 */
export interface ToolResources {
  requests?: ResourceQuantities;
  limits?: ResourceQuantities;
}
export interface ResourceQuantities { cpu?: string; memory?: string; "ephemeral-storage"?: string }

export interface CommandDefinition {
  description: string;
  /**
   * The command passes the `threads` parameter to the tool as its thread count. Cluster mode
   * then keeps threads and the pod's CPU request in step (core/kubernetes/step-pods.ts).
   */
  threaded?: boolean;
  /** This command's pod resources where they differ from the tool's (e.g. `bwa mem` against `bwa index`). */
  resources?: ToolResources;
  /** Parameter names this command cannot run without. */
  required: readonly string[];
  /** Alternatives: at least one of these groups must be fully present (e.g. inputFiles, or inputFile and inputFile2). */
  requiredAnyOf?: ReadonlyArray<readonly string[]>;
  /** What this command's file parameters read where it differs from the tool's `reads` (core/tools/compression.ts). */
  reads?: FileReads;
  /** Builds the invocation. May throw BuildError for values only known after interpolation. */
  build(p: Params, ctx: BuildContext): Invocation;
}

export interface ToolDefinition {
  id: string;
  description: string;
  /** Version of the tool in the pinned image. */
  version: string;
  /** Pinned container image reference used in cluster mode. */
  image: string;
  /** Anything an operator must know about the image (e.g. a user-supplied one). */
  imageNote?: string;
  /**
   * The image is the organization's own (its licence forbids a public one): `image` is a
   * placeholder, and cluster mode refuses the tool's steps until the step-pod configuration
   * names one (`tools.<id>.image`).
   */
  userSuppliedImage?: boolean;
  /** Pod resources of the tool's steps in cluster mode, unless its command has its own. */
  resources?: ToolResources;
  /** Executables that must be on PATH for embedded (local) runs. */
  localExecutables: readonly string[];
  commands: Readonly<Record<string, CommandDefinition>>;
  /** The command used when a step names none (single-command tools). */
  defaultCommand?: string;
  /** Parameter names holding input files (staged in, with their secondary files). */
  fileParams: readonly string[];
  /**
   * Which compressed forms each file parameter reads (core/tools/compression.ts), unless its
   * command says otherwise; a parameter named nowhere is not checked.
   */
  reads?: FileReads;
  /** zod schema of the `parameters` object, `${...}` references allowed in every string. */
  inputSchema: z.ZodType<Record<string, unknown>>;
}

/** A parameter value that is only found wrong once references are resolved. */
export class BuildError extends Error {
  /** `code`: the code (default `invalid_parameter`). */
  constructor(readonly param: string, message: string, readonly code?: string) {
    super(message);
    this.name = "BuildError";
  }
}
