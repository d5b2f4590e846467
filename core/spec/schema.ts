/**
 * The pipeline spec (spec: "Pipeline spec"): one zod schema holding every field and rule of
 * the spec's tables. It types specs across Operon and is exported as JSON Schema (for the
 * OpenAPI document and the PipelineRun CRD). `validateSpec` adds the cross-field checks.
 */
import { z } from "zod";
import { QUANTITY, QUANTITY_MESSAGE, quantityValue } from "../quantity.js";

export const MAX_STEPS = 12;
export const MAX_STEP_TIMEOUT_MS = 7_200_000;
/** Spec files larger than this are not read (1 MB, counted as 1 MiB). */
export const MAX_SPEC_BYTES = 1_048_576;
export const SPEC_VERSION = "1.0";
export const SUPPORTED_SPEC_VERSIONS = ["1.0"] as const;
export const EXECUTION_MODE = "process-manager";
export const EXECUTION_TYPES = ["ecs", "external-api", "batch"] as const;
export const INPUT_TYPES = ["file", "string", "select"] as const;

export const INPUT_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
export const STEP_ID = /^[A-Za-z0-9_-]+$/;

export const InputSchema = z.strictObject({
  name: z.string().regex(INPUT_NAME, "must start with a letter or underscore and hold only letters, digits and underscores"),
  type: z.enum(INPUT_TYPES),
  description: z.string().optional(),
  default: z.string().optional(),
  options: z.array(z.string()).optional(),
}).superRefine((input, ctx) => {
  if (input.type === "select" && (!input.options || input.options.length === 0)) {
    ctx.addIssue({ code: "custom", path: ["options"], message: "a select input needs a non-empty options list", params: { code: "select_without_options" } });
  }
  if (input.type === "select" && input.default !== undefined && input.options && !input.options.includes(input.default)) {
    ctx.addIssue({ code: "custom", path: ["default"], message: "the default of a select input must be one of its options", params: { code: "invalid_default" } });
  }
});

const isPlainObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * Step parameters: an object whose fields the step's tool schema checks (validateSpec does).
 * A plain object check here, not z.record: the tool schema walks the fields anyway, and a
 * record copy of every parameter doubled the cost of validation.
 */
export const StepParametersSchema = z.custom<Record<string, unknown>>(isPlainObject, { message: "parameters must be an object" });

/** A Kubernetes quantity of at least `min` (a memory of "16" is 16 bytes: almost surely a missing "Gi"). */
const quantity = (min: number, tooSmall: string) => z.string().regex(QUANTITY, QUANTITY_MESSAGE)
  .refine((v) => (quantityValue(v) ?? min) >= min, tooSmall);

/**
 * What a step's pod asks for in cluster mode (docs/kubernetes.md "Step pods"): CPU as a
 * request, memory and ephemeral storage as request and limit alike. Embedded mode reads only
 * `cpu`, for the thread count of tools that take one.
 */
export const StepResourcesSchema = z.strictObject({
  cpu: quantity(0.001, "must be at least 1m (a thousandth of a CPU)").optional(),
  memory: quantity(2 ** 20, "must be at least 1Mi: give a unit, such as \"16Gi\"").optional(),
  ephemeralStorage: quantity(2 ** 20, "must be at least 1Mi: give a unit, such as \"50Gi\"").optional(),
});
export const STEP_RESOURCE_KEYS = ["cpu", "memory", "ephemeralStorage"] as const;
export type StepResources = z.infer<typeof StepResourcesSchema>;

export const StepSchema = z.strictObject({
  stepId: z.string().regex(STEP_ID, "may hold only letters, digits, _ and -"),
  toolName: z.string().min(1),
  parameters: StepParametersSchema.optional(),
  dependsOn: z.array(z.string()).optional(),
  description: z.string().optional(),
  timeout: z.number().int().positive().optional(),
  executionType: z.string().optional(),
  resources: StepResourcesSchema.optional(),
});

export const ProvenanceSchema = z.object({
  sourceExecutionId: z.string().optional(),
  sourcePipelineId: z.string().optional(),
  sourceRunStatus: z.string().optional(),
  extractedAt: z.string().optional(),
  previousValues: z.record(z.string(), z.string()).optional(),
}).catchall(z.unknown());

export const PipelineSpecSchema = z.strictObject({
  specVersion: z.string().optional(),
  id: z.string().min(1).max(128).optional(),
  name: z.string().optional(),
  description: z.string().optional(),
  category: z.string().optional(),
  tags: z.array(z.string()).optional(),
  estimatedDuration: z.string().optional(),
  executionMode: z.literal(EXECUTION_MODE).optional(),
  inputs: z.array(InputSchema).optional(),
  steps: z.array(StepSchema).min(1, "a pipeline needs at least one step").max(MAX_STEPS, `at most ${MAX_STEPS} steps`),
  provenance: ProvenanceSchema.optional(),
});

export type PipelineInput = z.infer<typeof InputSchema>;
export type PipelineStep = z.infer<typeof StepSchema>;
export type PipelineSpec = z.infer<typeof PipelineSpecSchema>;

/** The spec schema as JSON Schema (draft 2020-12), for OpenAPI and the CRD. */
export function pipelineSpecJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(PipelineSpecSchema, {
    unrepresentable: "any",
    override: (ctx) => {
      if (ctx.zodSchema === StepParametersSchema) Object.assign(ctx.jsonSchema, { type: "object", additionalProperties: {} });
    },
  }) as Record<string, unknown>;
}
