/**
 * The pipelines API (spec: Pipelines; docs/api.md#pipelines): validate, run (from a built-in id, a spec
 * file in the workspace or an inline spec), poll, list, cancel, step logs, save a finished
 * run as a spec, and the pipeline definitions. Scope `tools`; workspace restrictions apply.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import type { RunPosition } from "../../core/ports.js";
import { RUN_ID } from "../../core/ids.js";
import { positionOf } from "../../core/run-order.js";
import { badRequest } from "../../core/errors.js";
import { IssueSchema, PipelineSpecRef, dataOf, errorResponses, jsonResponse, listOf, untypedReply } from "../openapi.js";
import type { Engine } from "../../engine/engine.js";
import { PipelineService, runView } from "../../services/pipelines.js";
import { listEnvelope, requireAuth, workspaceId } from "./common.js";
import { RUN_STATUSES, STEP_STATUSES } from "../../core/status.js";


/** A run as the API shows it (runView). */
const RunSchema = z.object({
  id: z.string(),
  status: z.enum(RUN_STATUSES),
  progress_pct: z.number(),
  output_paths: z.array(z.string()).describe("Workspace-relative keys of the outputs so far."),
  pipeline_id: z.string(),
  name: z.string(),
  workspace_id: z.string(),
  created_at: z.string(),
  started_at: z.string().nullable(),
  completed_at: z.string().nullable(),
  error: z.string().nullable(),
  output_folder: z.string().describe("Workspace-relative folder of the run's outputs, logs and run.json."),
  manifest_path: z.string().describe("Workspace-relative key of the run's provenance manifest (run.json)."),
  steps: z.array(z.object({
    step_id: z.string(),
    tool: z.string(),
    status: z.enum(STEP_STATUSES),
    attempt: z.number().int(),
    started_at: z.string().nullable(),
    completed_at: z.string().nullable(),
    exit_code: z.number().int().nullable(),
    error: z.string().nullable(),
    waiting_reason: z.string().nullable(),
    queue_position: z.number().int().optional().describe("A waiting step's place in its organization's queue."),
  })),
}).meta({ id: "Run" });

/** A pipeline definition (definitionView): a built-in pipeline or a workspace's saved spec. */
const PipelineDefinitionSchema = z.object({
  id: z.string().nullable(),
  name: z.string().nullable(),
  description: z.string().nullable(),
  category: z.string().nullable(),
  tags: z.array(z.string()),
  estimated_duration: z.string().nullable(),
  origin: z.enum(["builtin", "workspace"]),
  inputs: z.array(z.object({
    name: z.string(),
    type: z.enum(["file", "string", "select"]),
    description: z.string().nullable(),
    default: z.string().nullable(),
    options: z.array(z.string()).nullable(),
    required: z.boolean(),
  })),
  steps: z.array(z.object({ step_id: z.string(), tool: z.string(), depends_on: z.array(z.string()), description: z.string().nullable() })),
  spec_file: z.string().optional().describe("For a workspace's saved spec: its workspace path."),
}).meta({ id: "PipelineDefinition" });

const ValidationResultSchema = z.object({ valid: z.boolean(), errors: z.array(IssueSchema), warnings: z.array(IssueSchema) });

export { runView };

/** Run list cursors: the position of a page's last run, opaque to clients (base64url JSON). */
export const encodeRunCursor = (p: RunPosition) => Buffer.from(JSON.stringify([p.createdAt, p.id])).toString("base64url");

export function decodeRunCursor(cursor: string): RunPosition {
  let v: unknown;
  try { v = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")); } catch { v = undefined; }
  if (!Array.isArray(v) || v.length !== 2 || typeof v[0] !== "string" || v[0].length > 64 || typeof v[1] !== "string" || !RUN_ID.test(v[1])) {
    throw badRequest("cursor", "not a cursor of this listing (pass back next_cursor as it was given)");
  }
  return { createdAt: v[0], id: v[1] };
}

/** `tail` of step logs: at most this many lines. */
export const MAX_LOG_TAIL_LINES = 10_000;

export async function pipelineRoutes(app: FastifyInstance, opts: { engine: Engine }): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { engine } = opts;
  const { store } = app.operon.deps;
  const config = { scope: "tools" as const };

  const service = new PipelineService({ engine, store, access: app.operon.auth.access, clock: app.operon.deps.clock });
  const runOf = (req: Pick<FastifyRequest, "auth">, id: string, workspace?: string) => service.runOf(requireAuth(req), id, workspace);

  r.post("/v1/pipelines/validate", {
    config,
    schema: {
      tags: ["pipelines"], summary: "Validate a spec (same checks as a run)", operationId: "validatePipeline",
      description: "Exactly one of `spec_file` (a workspace path, at most 1 MB) or `spec` (inline). An invalid spec is a 200 with `valid: false` and every issue.",
      body: z.object({ workspace_id: workspaceId, spec_file: z.string().min(1).max(1024).optional(), spec: PipelineSpecRef.optional() }),
      response: { 200: jsonResponse(dataOf(ValidationResultSchema), "The validation result: errors, and warnings that leave the spec valid."), ...errorResponses(400, 401, 403, 404, 413, 415, 429, 500, 503) },
    },
  }, async (req) => {
    return { data: await service.validate(requireAuth(req), req.body) };
  });

  r.post("/v1/pipelines", {
    config,
    schema: {
      tags: ["pipelines"], summary: "Start a run from a built-in pipeline, a spec file or an inline spec", operationId: "createPipelineRun",
      description: "Exactly one of `pipeline_id` (a built-in pipeline; `tool_id` is an alias), `spec_file` (a workspace path, at most 1 MB) or `spec` (inline). An invalid spec, bad inputs or a missing input file are a 422 with `details.errors`, and nothing starts.",
      body: z.object({
        workspace_id: workspaceId,
        pipeline_id: z.string().min(1).max(128).optional(),
        tool_id: z.string().min(1).max(128).optional(),
        spec_file: z.string().min(1).max(1024).optional(),
        spec: PipelineSpecRef.optional(),
        input: z.record(z.string(), z.unknown()).default({}),
      }),
      response: { 201: jsonResponse(dataOf(RunSchema), "The run, created (`queued`)."), ...errorResponses(400, 401, 403, 404, 413, 415, 422, 429, 500, 503) },
    },
  }, async (req, reply) => {
    return reply.status(201).send({ data: runView(await service.start(requireAuth(req), req.body)) });
  });

  r.get("/v1/pipelines", {
    config,
    schema: {
      tags: ["pipelines"], summary: "List runs, newest first (cursor-paginated)", operationId: "listPipelineRuns",
      querystring: z.object({
        workspace_id: workspaceId,
        limit: z.coerce.number().int().min(1).max(1000).default(100),
        cursor: z.string().min(1).max(512).optional(),
        status: z.enum(RUN_STATUSES).optional(),
      }),
      response: { 200: jsonResponse(listOf(RunSchema), "A page of runs; pass next_cursor back as `cursor` for the next."), ...errorResponses(400, 401, 403, 404, 429, 500, 503) },
    },
  }, async (req) => {
    const auth = requireAuth(req);
    const ws = await app.operon.auth.workspace(auth, req.query.workspace_id);
    const { limit, status, cursor } = req.query;
    // Keyset pagination: the page after the last run of the previous one, so runs created
    // meanwhile (newer, so before the cursor) never shift a page; one more run tells has_more.
    const runs = await engine.runs.list({
      organization: auth.organization, workspace: ws.id, limit: limit + 1,
      ...(status ? { status } : {}), ...(cursor ? { after: decodeRunCursor(cursor) } : {}),
    });
    const page = runs.slice(0, limit);
    const last = page[page.length - 1];
    const more = runs.length > limit && last !== undefined;
    return listEnvelope((await engine.withQueuePositions(page)).map(runView), more, more ? encodeRunCursor(positionOf(last)) : null);
  });

  // Pipeline definitions live at /v1/pipeline-definitions: under /v1/pipelines/ a definition
  // path would overlap the run paths (`/v1/pipelines/definitions/save-spec` matches both
  // `/v1/pipelines/definitions/{pipeline_id}` and `/v1/pipelines/{id}/save-spec`). The old
  // paths keep answering for clients written against them, outside the document
  // (docs/api.md#pipeline-definitions).
  for (const [base, hide] of [["/v1/pipeline-definitions", false], ["/v1/pipelines/definitions", true]] as const) {
    r.get(base, {
      config,
      schema: {
        hide, tags: ["pipelines"], summary: "Built-in pipelines and the workspace's saved specs", operationId: "listPipelineDefinitions",
        querystring: z.object({ workspace_id: workspaceId.optional() }),
        // The handler builds its items as plain records: the schema documents them.
        response: { 200: jsonResponse(untypedReply(listOf(PipelineDefinitionSchema)), "The built-in pipelines, then the workspace's saved specs when workspace_id is given (one page)."), ...errorResponses(400, 401, 403, 404, 429, 500, 503) },
      },
    }, async (req) => {
      return listEnvelope(await service.listDefinitions(requireAuth(req), req.query.workspace_id), false, null);
    });

    r.get(`${base}/:pipeline_id`, {
      config,
      schema: {
        hide, tags: ["pipelines"], summary: "One pipeline definition with its inputs and steps", operationId: "getPipelineDefinition",
        params: z.object({ pipeline_id: z.string().min(1).max(128) }),
        response: { 200: jsonResponse(dataOf(PipelineDefinitionSchema.extend({ spec: PipelineSpecRef })), "The built-in pipeline, with its spec."), ...errorResponses(400, 401, 403, 404, 429, 500, 503) },
      },
    }, async (req) => {
      return { data: service.builtinDefinition(req.params.pipeline_id) };
    });
  }

  r.get("/v1/pipelines/:id", {
    config,
    schema: {
      tags: ["pipelines"], summary: "Poll a run", operationId: "getPipelineRun",
      params: z.object({ id: z.string() }), querystring: z.object({ workspace_id: workspaceId.optional() }),
      response: { 200: jsonResponse(dataOf(RunSchema), "The run."), ...errorResponses(400, 401, 403, 404, 429, 500, 503) },
    },
  }, async (req) => ({ data: runView(await runOf(req, req.params.id, req.query.workspace_id)) }));

  r.delete("/v1/pipelines/:id", {
    config,
    schema: {
      tags: ["pipelines"], summary: "Cancel a run", operationId: "cancelPipelineRun",
      description: "Asks the run to stop; a run that already ended is returned as it is.",
      params: z.object({ id: z.string() }), querystring: z.object({ workspace_id: workspaceId.optional() }),
      response: { 200: jsonResponse(dataOf(RunSchema), "The run, with cancellation requested."), ...errorResponses(400, 401, 403, 404, 429, 500, 503) },
    },
  }, async (req) => ({ data: runView(await service.cancel(requireAuth(req), req.params.id, req.query.workspace_id)) }));

  r.get("/v1/pipelines/:id/steps/:stepId/logs", {
    config,
    schema: {
      tags: ["pipelines"], summary: "A step's log (streamed; `tail` for its last lines only)", operationId: "getStepLog",
      params: z.object({ id: z.string(), stepId: z.string() }),
      querystring: z.object({ workspace_id: workspaceId.optional(), tail: z.coerce.number().int().min(1).max(MAX_LOG_TAIL_LINES).optional() }),
      // The handler streams text: the schema documents it.
      response: {
        200: { description: "The step's log as plain text (empty while it has none).", content: { "text/plain": { schema: untypedReply(z.string()) } } },
        ...errorResponses(400, 401, 403, 404, 429, 500, 503),
      },
    },
  }, async (req, reply) => {
    const run = await runOf(req, req.params.id, req.query.workspace_id);
    const log = await service.stepLog(run, req.params.stepId, req.query.tail);
    reply.type("text/plain; charset=utf-8");
    if (log.kind === "stream") return reply.header("content-length", log.size).send(log.body);
    return reply.send(log.text);
  });

  r.post("/v1/pipelines/:id/save-spec", {
    config,
    schema: {
      tags: ["pipelines"], summary: "Save a finished run as a spec", operationId: "saveRunAsSpec",
      description: "Writes `pipelines/specs/<name>.pipeline.json` in the workspace from a completed or failed run: 409 when the run has not finished, or when the name is taken and `overwrite` is not true.",
      params: z.object({ id: z.string() }),
      body: z.object({ workspace_id: workspaceId, name: z.string().min(1).max(100).optional(), overwrite: z.boolean().default(false) }),
      response: {
        201: jsonResponse(dataOf(z.object({ path: z.string().describe("Workspace path of the saved spec."), spec: PipelineSpecRef, warnings: z.array(IssueSchema) })), "The spec, saved."),
        ...errorResponses(400, 401, 403, 404, 409, 413, 415, 422, 429, 500, 503),
      },
    },
  }, async (req, reply) => {
    return reply.status(201).send({ data: await service.saveSpec(requireAuth(req), req.params.id, req.body) });
  });
}
