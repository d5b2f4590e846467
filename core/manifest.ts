/**
 * The run manifest, `run.json` (spec: "Run manifest"): the provenance record written when
 * a run starts and updated when it ends. Enough to reproduce the run: the spec exactly as
 * executed, concrete parameters, input checksums, and per step the tool version, image
 * digest (or, in embedded mode, the executable's path and sha256), outputs with checksums,
 * and the files it read on reference volumes with theirs.
 * Checksums are lowercase hex SHA-256.
 */
import { z } from "zod";
import type { RunRecord } from "./ports.js";
import { PipelineSpecSchema } from "./spec/schema.js";

export const MANIFEST_SCHEMA_VERSION = 1;

const iso = z.iso.datetime({ offset: true });
const sha256 = z.string().regex(/^[0-9a-f]{64}$/, "lowercase hex SHA-256");

import { RUN_STATUSES, STEP_STATUSES } from "./status.js";

export const ManifestOutputFileSchema = z.object({
  /** Path relative to the run folder (`outputFolder`). */
  filename: z.string().min(1),
  s3Key: z.string().min(1),
  size: z.number().int().nonnegative(),
  checksum: sha256,
});

export const ManifestStepSchema = z.object({
  stepId: z.string(),
  stepNumber: z.number().int().positive(),
  toolName: z.string(),
  toolVersion: z.string().nullable(),
  /** Image digest in cluster mode; null in embedded mode (see `executable`). */
  imageDigest: z.string().nullable(),
  /** Kept for the spec's field list; Operon has no task definitions, so it holds the Job name or null. */
  taskDefinitionArn: z.string().nullable(),
  status: z.enum(STEP_STATUSES),
  /** Operon addition: which attempt of the step this is (1 first; 0 never started); a lost attempt is run again as the next. */
  attempt: z.number().int().min(0).optional(),
  dependsOn: z.array(z.string()),
  startedAt: iso.nullable(),
  completedAt: iso.nullable(),
  durationMs: z.number().nonnegative().nullable(),
  outputFiles: z.array(ManifestOutputFileSchema),
  error: z.string().optional(),
  /** Operon additions: the subcommand, the argv as run, and (embedded mode) the executable. */
  command: z.string().optional(),
  argv: z.array(z.string()).optional(),
  executable: z.object({ path: z.string(), sha256 }).optional(),
  /**
   * Operon addition: files on read-only reference volumes the step read (`ref://<volume>/<path>`),
   * with the SHA-256 and size the executor found before the tool ran (absent if it never got
   * that far). A directory (an ANNOVAR database) has `kind: "directory"`: its size is its
   * files' total and its checksum that of its listing (names and sizes), not of their bytes.
   */
  references: z.array(z.object({
    uri: z.string().startsWith("ref://"),
    sha256: sha256.optional(),
    size: z.number().int().nonnegative().optional(),
    kind: z.literal("directory").optional(),
  })).optional(),
});

export const RunManifestSchema = z.object({
  schemaVersion: z.literal(MANIFEST_SCHEMA_VERSION),
  executionId: z.string().min(1),
  pipelineId: z.string(),
  pipelineName: z.string(),
  status: z.enum(RUN_STATUSES),
  workspaceId: z.string().min(1),
  organizationId: z.string().min(1),
  /** Workspace-relative folder of the run, e.g. `pipelines/2026-11-21T22-40-05Z`. */
  outputFolder: z.string().min(1),
  startedAt: iso,
  completedAt: iso.nullable(),
  durationMs: z.number().nonnegative().nullable(),
  stepsTotal: z.number().int().nonnegative(),
  stepsCompleted: z.number().int().nonnegative(),
  stepsFailed: z.number().int().nonnegative(),
  parameters: z.record(z.string(), z.string()),
  inputChecksums: z.record(z.string(), z.object({ s3Key: z.string(), checksum: sha256, size: z.number().int().nonnegative() })),
  pipelineDefinition: PipelineSpecSchema,
  steps: z.array(ManifestStepSchema),
  /** Operon addition: the agent's conversation and model, when the agent started the run. */
  startedBy: z.object({ conversationId: z.string().min(1), model: z.string() }).optional(),
});

export type RunManifest = z.infer<typeof RunManifestSchema>;
export type ManifestStep = z.infer<typeof ManifestStepSchema>;
export type ManifestOutputFile = z.infer<typeof ManifestOutputFileSchema>;

/**
 * `run.json` for a run record (pure): the spec as executed, concrete parameters, input
 * checksums, and per step its status, timing, outputs and provenance of the tool.
 */
export function buildManifest(run: RunRecord, now: number): RunManifest {
  const ms = (iso: string | null) => (iso ? Date.parse(iso) : null);
  const started = ms(run.startedAt) ?? ms(run.createdAt) ?? now;
  const completed = ms(run.completedAt);
  return {
    schemaVersion: MANIFEST_SCHEMA_VERSION,
    executionId: run.id,
    pipelineId: run.pipelineId,
    pipelineName: run.name,
    status: run.status,
    workspaceId: run.workspace,
    organizationId: run.organization,
    outputFolder: run.outputFolder,
    startedAt: run.startedAt ?? run.createdAt,
    completedAt: run.completedAt,
    durationMs: (completed ?? now) - started,
    stepsTotal: run.steps.length,
    stepsCompleted: run.steps.filter((s) => s.status === "completed").length,
    stepsFailed: run.steps.filter((s) => s.status === "failed").length,
    parameters: run.parameters,
    inputChecksums: run.inputChecksums,
    pipelineDefinition: run.spec,
    steps: run.steps.map((s, i) => {
      const x = s;
      const spec = run.spec.steps.find((st) => st.stepId === s.stepId);
      const started = ms(s.startedAt);
      const done = ms(s.completedAt);
      return {
        stepId: s.stepId,
        stepNumber: i + 1,
        toolName: s.toolName,
        toolVersion: x.toolVersion ?? null,
        imageDigest: x.imageDigest ?? null,
        taskDefinitionArn: x.jobName ?? null,
        status: s.status,
        attempt: s.attempt,
        dependsOn: spec?.dependsOn ?? [],
        startedAt: s.startedAt,
        completedAt: s.completedAt,
        durationMs: started !== null && done !== null ? done - started : null,
        outputFiles: s.outputs.map((o) => ({ filename: o.filename, s3Key: o.key, size: o.size, checksum: o.sha256 })),
        ...(s.error ? { error: s.error } : {}),
        ...(x.command ? { command: x.command } : {}),
        ...(x.argv ? { argv: x.argv } : {}),
        ...(x.executable ? { executable: x.executable } : {}),
        ...(x.references?.length ? { references: x.references.map((r) => ({ ...r })) } : {}),
      };
    }),
    ...(run.startedBy ? { startedBy: run.startedBy } : {}),
  };
}
