/**
 * The pipeline flow as assistant tools (spec: Pipelines, rule 4): list and inspect pipeline
 * definitions, validate a spec, start a run (returns at once), follow it with a bounded wait,
 * read a step's log, cancel, and save a finished run as a spec. Each handler calls
 * services/pipelines.ts, the functions behind the pipelines routes.
 */
import { z } from "zod";
import { isFinal } from "../core/status.js";
import type { RunRecord } from "../core/ports.js";
import { runView, type PipelineService } from "../services/pipelines.js";
import { OperonError } from "../core/errors.js";
import { CREATES, READ_ONLY, defineTool, type AssistantDeps, type AssistantTool, type ToolContext } from "./registry.js";

/** The longest a status call waits: well inside any client's request time-out. */
export const MAX_WAIT_SECONDS = 45;
const MAX_LOG_LINES = 2000;
/** A step log's tail is cut to this many characters, from its end. */
const MAX_LOG_CHARS = 64 * 1024;

const workspaceId = z.string().min(1).max(63).describe("The workspace (see service_list_workspaces).");
const runId = z.string().min(1).max(64).describe("A run id, `run-` + 26 characters, as service_run_pipeline returned it.");
const loose = z.looseObject({});

function pipelines(ctx: ToolContext): PipelineService {
  if (!ctx.deps.pipelines) throw new OperonError("unavailable", "pipelines are not available on this server");
  return ctx.deps.pipelines;
}
const hasPipelines = (d: AssistantDeps) => d.pipelines !== undefined;

/** A run for a model: the API's view, and what to do next. */
function runResult(run: RunRecord, extra: Record<string, unknown> = {}) {
  const v = runView(run);
  const next = isFinal(run.status)
    ? run.status === "completed" ? "Finished. Outputs are in output_paths (read them with service_read_file or service_list_files); save it as a reusable spec with service_save_pipeline." : `Ended ${run.status}; read the failed step's log with service_get_step_logs.`
    : "Still going; call service_get_run again with wait_seconds to wait for it.";
  return { run: v, finished: isFinal(run.status), next, ...extra };
}

/** Waits until `run` ends, `seconds` pass, or the caller goes away; returns the latest record. */
async function waitForRun(ctx: ToolContext, svc: PipelineService, run: RunRecord, seconds: number): Promise<RunRecord> {
  const engine = ctx.deps.engine;
  if (!engine || seconds <= 0 || isFinal(run.status)) return run;
  const deadline = Date.now() + seconds * 1000;
  let current = run;
  while (!isFinal(current.status) && Date.now() < deadline && !ctx.signal?.aborted) {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, Math.min(1000, Math.max(0, deadline - Date.now())));
      const unwatch = engine.runs.watch((changed) => { if (changed === run.id) done(); });
      ctx.signal?.addEventListener("abort", done, { once: true });
      function done() { clearTimeout(timer); unwatch(); ctx.signal?.removeEventListener("abort", done); resolve(); }
    });
    current = await svc.runOf(ctx.auth, run.id);
  }
  return current;
}

/**
 * A run tool's optional workspace_id: agents pass the workspace to every tool, so the run
 * tools take it too; it must name the run's own workspace (else a not_found naming the field).
 */
const runWorkspace = workspaceId.optional().describe("The run's workspace (optional; if given, it must be the workspace the run belongs to).");

export const pipelineTools: AssistantTool[] = [
  defineTool({
    name: "service_list_pipelines",
    title: "List pipelines",
    description: "Lists the built-in pipelines, plus the workspace's saved pipeline specs (pipelines/specs/*.pipeline.json) when workspace_id is given. Each entry has its id (built-in) or spec_file (saved), its inputs and its steps. Use an entry's id as pipeline_id, or its spec_file, with service_run_pipeline.",
    input: z.object({ workspace_id: workspaceId.optional() }).strict(),
    output: z.looseObject({ pipelines: z.array(loose) }),
    annotations: READ_ONLY,
    scope: "tools",
    available: hasPipelines,
    handler: async (a, ctx) => ({ pipelines: await pipelines(ctx).listDefinitions(ctx.auth, a.workspace_id) }),
  }),
  defineTool({
    name: "service_get_pipeline",
    title: "Get a pipeline",
    description: "One pipeline with its inputs (name, type, default, whether required) and its steps, by exactly one of pipeline_id (a built-in pipeline) or spec_file (a workspace path of a saved spec; needs workspace_id). Read this before service_run_pipeline to know which inputs to give.",
    input: z.object({ pipeline_id: z.string().min(1).max(128).optional(), spec_file: z.string().min(1).max(1024).optional(), workspace_id: workspaceId.optional() }).strict(),
    output: z.looseObject({ pipeline: loose }),
    annotations: READ_ONLY,
    scope: "tools",
    available: hasPipelines,
    handler: async (a, ctx) => {
      if ((a.pipeline_id === undefined) === (a.spec_file === undefined)) throw new OperonError("invalid_request", "pipeline_id: give exactly one of pipeline_id or spec_file", { field: "pipeline_id" });
      if (a.pipeline_id !== undefined) return { pipeline: pipelines(ctx).builtinDefinition(a.pipeline_id) };
      if (a.workspace_id === undefined) throw new OperonError("invalid_request", "workspace_id: is required with spec_file", { field: "workspace_id" });
      return { pipeline: await pipelines(ctx).specFileDefinition(ctx.auth, a.workspace_id, a.spec_file as string) };
    },
  }),
  defineTool({
    name: "service_validate_pipeline",
    title: "Validate a pipeline spec",
    description: "Checks a pipeline spec the way a run would (tool names, subcommands, ${...} references, dependsOn, at most 12 steps) without running it: give exactly one of spec_file (a workspace path) or spec (the spec object). Returns valid, errors and warnings, each with a JSON pointer path into the spec.",
    input: z.object({ workspace_id: workspaceId, spec_file: z.string().min(1).max(1024).optional(), spec: z.record(z.string(), z.unknown()).optional().describe("An inline pipeline spec object.") }).strict(),
    output: z.looseObject({ valid: z.boolean(), errors: z.array(loose), warnings: z.array(loose) }),
    annotations: READ_ONLY,
    scope: "tools",
    available: hasPipelines,
    handler: async (a, ctx) => ({ ...(await pipelines(ctx).validate(ctx.auth, a)) }),
  }),
  defineTool({
    name: "service_run_pipeline",
    title: "Run a pipeline",
    description: "Starts a pipeline run in a workspace from exactly one of pipeline_id (a built-in pipeline) or spec_file (a saved spec's workspace path), with `input` mapping the pipeline's declared input names to values (file inputs are workspace-relative paths). Returns at once with the run id (status queued); follow it with service_get_run and wait_seconds. Invalid specs, unknown inputs or missing input files are refused and nothing starts.",
    input: z.object({
      workspace_id: workspaceId,
      pipeline_id: z.string().min(1).max(128).optional(),
      spec_file: z.string().min(1).max(1024).optional(),
      input: z.record(z.string(), z.string()).default({}).describe("Declared input name → value."),
    }).strict(),
    output: z.looseObject({ run: loose, finished: z.boolean() }),
    annotations: CREATES,
    scope: "tools",
    available: hasPipelines,
    handler: async (a, ctx) => {
      if ((a.pipeline_id === undefined) === (a.spec_file === undefined)) throw new OperonError("invalid_request", "pipeline_id: give exactly one of pipeline_id or spec_file", { field: "pipeline_id" });
      return runResult(await pipelines(ctx).start(ctx.auth, a, ctx.agent));
    },
  }),
  defineTool({
    name: "service_get_run",
    title: "Get a run's status (optionally wait)",
    description: `A pipeline run's status, progress, each step's state (with the reason a step is waiting, e.g. the organization's concurrency limit) and output_paths. With wait_seconds (at most ${MAX_WAIT_SECONDS}) it waits until the run ends or that time passes, whichever is first, and answers either way; call it again while finished is false.`,
    input: z.object({ run_id: runId, workspace_id: runWorkspace, wait_seconds: z.number().int().min(0).max(MAX_WAIT_SECONDS).default(0).describe(`Seconds to wait for the run to end (0–${MAX_WAIT_SECONDS}).`) }).strict(),
    output: z.looseObject({ run: loose, finished: z.boolean() }),
    annotations: READ_ONLY,
    scope: "tools",
    available: hasPipelines,
    handler: async (a, ctx) => {
      const svc = pipelines(ctx);
      const run = await waitForRun(ctx, svc, await svc.runOf(ctx.auth, a.run_id, a.workspace_id), a.wait_seconds);
      return runResult(run);
    },
  }),
  defineTool({
    name: "service_get_step_logs",
    title: "Read a step's log",
    description: `The last lines of one step's log (stdout and stderr of its tool), to see why a step failed or what it is doing. tail: lines from the end (default 100, at most ${MAX_LOG_LINES}); at most 64 KB is returned.`,
    input: z.object({ run_id: runId, workspace_id: runWorkspace, step_id: z.string().min(1).max(128), tail: z.number().int().min(1).max(MAX_LOG_LINES).default(100) }).strict(),
    output: z.looseObject({ log: z.string(), truncated: z.boolean() }),
    annotations: READ_ONLY,
    scope: "tools",
    available: hasPipelines,
    handler: async (a, ctx) => {
      const svc = pipelines(ctx);
      const run = await svc.runOf(ctx.auth, a.run_id, a.workspace_id);
      const log = await svc.stepLog(run, a.step_id, a.tail);
      const text = log.kind === "text" ? log.text.toString() : "";
      const step = run.steps.find((s) => s.stepId === a.step_id);
      return { run_id: run.id, step_id: a.step_id, step_status: step?.status ?? null, log: text.slice(-MAX_LOG_CHARS), truncated: text.length > MAX_LOG_CHARS };
    },
  }),
  defineTool({
    name: "service_cancel_run",
    title: "Cancel a run",
    description: "Stops a queued or running pipeline run (its running steps are killed; finished steps' outputs stay). A run that already ended is returned unchanged.",
    input: z.object({ run_id: runId, workspace_id: runWorkspace }).strict(),
    output: z.looseObject({ run: loose, finished: z.boolean() }),
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    scope: "tools",
    available: hasPipelines,
    handler: async (a, ctx) => runResult(await pipelines(ctx).cancel(ctx.auth, a.run_id, a.workspace_id)),
  }),
  defineTool({
    name: "service_save_pipeline",
    title: "Save a finished run as a pipeline spec",
    description: "Saves a completed (or failed, with a warning) run as a reusable spec at pipelines/specs/<name>.pipeline.json in its workspace: the workspace files it read become file inputs. name defaults to the run's name. A name already taken is a conflict unless overwrite is true. Run the saved spec later with service_run_pipeline and spec_file.",
    input: z.object({ run_id: runId, workspace_id: runWorkspace, name: z.string().min(1).max(100).optional(), overwrite: z.boolean().default(false) }).strict(),
    output: z.looseObject({ path: z.string(), spec: loose, warnings: z.array(loose) }),
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    scope: "tools",
    available: hasPipelines,
    handler: async (a, ctx) => ({ ...(await pipelines(ctx).saveSpec(ctx.auth, a.run_id, a)) }),
  }),
];
