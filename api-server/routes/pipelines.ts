/**
 * The pipelines API (spec: Pipelines; DESIGN §6): validate, run (from a built-in id, a spec
 * file in the workspace or an inline spec), poll, list, cancel, step logs, save a finished
 * run as a spec, and the pipeline definitions. Scope `tools`; workspace restrictions apply.
 */
import { Readable } from "node:stream";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { MAX_SPEC_BYTES, type PipelineSpec } from "../../core/spec/schema.js";
import { extractSpec } from "../../core/save-spec.js";
import { RunManifestSchema, buildManifest } from "../../core/manifest.js";
import { validateSpec } from "../../core/spec/validate.js";
import { StoreError, type RunPosition, type RunRecord } from "../../core/ports.js";
import { RUN_ID } from "../../core/ids.js";
import { positionOf } from "../../core/run-order.js";
import { tailObject, lastLines } from "../log-tail.js";
import { ApiError, badRequest } from "../errors.js";
import { IssueSchema, PipelineSpecRef, dataOf, errorResponses, jsonResponse, listOf, untypedReply } from "../openapi.js";
import type { Engine } from "../../engine/engine.js";
import type { WorkspaceRecord } from "../../engine/service-store.js";
import { fileKey, listEnvelope, requireAuth, workspaceId, workspaceRoot } from "./common.js";
import { manifestPath, stepLogKey } from "../../core/layout.js";
import { RUN_STATUSES, STEP_STATUSES, isFinalStep } from "../../core/status.js";


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

export function runView(run: RunRecord) {
  const root = workspaceRoot({ organization: run.organization, id: run.workspace });
  return {
    id: run.id,
    status: run.status,
    progress_pct: run.progressPct,
    output_paths: run.steps.flatMap((s) => s.outputs.map((o) => o.key.slice(root.length))),
    pipeline_id: run.pipelineId,
    name: run.name,
    workspace_id: run.workspace,
    created_at: run.createdAt,
    started_at: run.startedAt,
    completed_at: run.completedAt,
    error: run.error,
    output_folder: run.outputFolder,
    manifest_path: manifestPath(run.outputFolder),
    steps: run.steps.map((s) => ({
      step_id: s.stepId, tool: s.toolName, status: s.status, attempt: s.attempt, started_at: s.startedAt, completed_at: s.completedAt,
      exit_code: s.exitCode, error: s.error, waiting_reason: s.waitingReason ?? null, ...(s.queuePosition !== undefined ? { queue_position: s.queuePosition } : {}),
    })),
  };
}

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

  async function readSpecFile(ws: WorkspaceRecord, path: string): Promise<{ spec: unknown; key: string }> {
    const { key, storageKey } = fileKey(ws, "spec_file", path);
    const info = await store.head(storageKey);
    if (!info) throw new ApiError("not_found", `spec_file: ${key} not found`, { field: "spec_file" });
    if (info.size > MAX_SPEC_BYTES) throw new ApiError("payload_too_large", `spec_file: ${key} is ${info.size} bytes; spec files larger than 1 MB are not read`, { field: "spec_file" });
    const { body } = await store.get(storageKey);
    const chunks: Buffer[] = [];
    for await (const c of body) chunks.push(Buffer.from(c));
    try { return { spec: JSON.parse(Buffer.concat(chunks).toString("utf8")), key }; } catch (e) {
      throw new ApiError("invalid_request", `spec_file: ${key} is not valid JSON (${e instanceof Error ? e.message : String(e)})`, { field: "spec_file" });
    }
  }

  async function runOf(req: Pick<FastifyRequest, "auth">, id: string, workspace?: string): Promise<RunRecord> {
    const auth = requireAuth(req);
    const run = RUN_ID.test(id) ? await engine.runs.get(id) : undefined;
    if (!run || run.organization !== auth.organization) throw new ApiError("not_found", `run ${JSON.stringify(id)} not found`);
    if (workspace !== undefined && run.workspace !== workspace) throw new ApiError("not_found", `run ${JSON.stringify(id)} not found in workspace ${JSON.stringify(workspace)}`);
    await app.operon.auth.workspace(auth, run.workspace);
    return (await engine.withQueuePositions([run]))[0] as RunRecord;
  }

  r.post("/v1/pipelines/validate", {
    config,
    schema: {
      tags: ["pipelines"], summary: "Validate a spec (same checks as a run)", operationId: "validatePipeline",
      description: "Exactly one of `spec_file` (a workspace path, at most 1 MB) or `spec` (inline). An invalid spec is a 200 with `valid: false` and every issue.",
      body: z.object({ workspace_id: workspaceId, spec_file: z.string().min(1).max(1024).optional(), spec: PipelineSpecRef.optional() }),
      response: { 200: jsonResponse(dataOf(ValidationResultSchema), "The validation result: errors, and warnings that leave the spec valid."), ...errorResponses(400, 401, 403, 404, 413, 415, 429, 500, 503) },
    },
  }, async (req) => {
    const ws = await app.operon.auth.workspace(requireAuth(req), req.body.workspace_id);
    if ((req.body.spec_file === undefined) === (req.body.spec === undefined)) throw badRequest("spec_file", "give exactly one of spec_file or spec");
    const spec = req.body.spec_file !== undefined ? (await readSpecFile(ws, req.body.spec_file)).spec : req.body.spec;
    return { data: validateSpec(spec) };
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
    const auth = requireAuth(req);
    const b = req.body;
    const builtinId = b.pipeline_id ?? b.tool_id;
    const sources = [builtinId !== undefined, b.spec_file !== undefined, b.spec !== undefined].filter(Boolean).length;
    if (sources !== 1) throw new ApiError("invalid_request", "give exactly one of pipeline_id, spec_file or spec", { field: "pipeline_id" });
    const ws = await app.operon.auth.workspace(auth, b.workspace_id);
    let spec: unknown;
    let source: RunRecord["source"];
    let name: string | undefined;
    if (builtinId !== undefined) {
      const found = engine.builtins.get(builtinId);
      if (!found) throw new ApiError("not_found", `pipeline_id: no built-in pipeline ${JSON.stringify(builtinId)} (built-in: ${[...engine.builtins.keys()].join(", ")})`, { field: "pipeline_id", valid_values: [...engine.builtins.keys()] });
      spec = found;
      source = { kind: "builtin", ref: builtinId };
    } else if (b.spec_file !== undefined) {
      const f = await readSpecFile(ws, b.spec_file);
      spec = f.spec;
      source = { kind: "spec_file", ref: f.key };
      name = (f.key.split("/").pop() ?? f.key).replace(/\.pipeline\.json$|\.json$/, "");
    } else {
      spec = b.spec;
      source = { kind: "inline" };
    }
    const res = await engine.submit({ organization: auth.organization, workspace: ws.id, keyId: auth.keyId, spec, source, input: b.input, ...(name ? { name } : {}) });
    if (!res.ok) throw new ApiError(res.status === 422 ? "validation_failed" : "invalid_request", res.message, { errors: res.errors });
    return reply.status(201).send({ data: runView(res.run) });
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

  r.get("/v1/pipelines/definitions", {
    config,
    schema: {
      tags: ["pipelines"], summary: "Built-in pipelines and the workspace's saved specs", operationId: "listPipelineDefinitions",
      querystring: z.object({ workspace_id: workspaceId.optional() }),
      // The handler builds its items as plain records: the schema documents them.
      response: { 200: jsonResponse(untypedReply(listOf(PipelineDefinitionSchema)), "The built-in pipelines, then the workspace's saved specs when workspace_id is given (one page)."), ...errorResponses(400, 401, 403, 404, 429, 500, 503) },
    },
  }, async (req) => {
    const auth = requireAuth(req);
    const out: Array<Record<string, unknown>> = [...engine.builtins.values()].map((s) => definitionView(s, "builtin"));
    if (req.query.workspace_id) {
      const ws = await app.operon.auth.workspace(auth, req.query.workspace_id);
      const root = workspaceRoot(ws);
      const page = await store.list(`${root}pipelines/specs/`, { limit: 1000 });
      for (const i of page.items.filter((x) => x.key.endsWith(".pipeline.json"))) {
        try {
          const { spec } = await readSpecFile(ws, i.key.slice(root.length));
          out.push({ ...definitionView(spec as PipelineSpec, "workspace"), spec_file: i.key.slice(root.length) });
        } catch { /* unreadable spec files are skipped in the listing */ }
      }
    }
    return listEnvelope(out, false, null);
  });

  r.get("/v1/pipelines/definitions/:pipeline_id", {
    config,
    schema: {
      tags: ["pipelines"], summary: "One pipeline definition with its inputs and steps", operationId: "getPipelineDefinition",
      params: z.object({ pipeline_id: z.string().min(1).max(128) }),
      response: { 200: jsonResponse(dataOf(PipelineDefinitionSchema.extend({ spec: PipelineSpecRef })), "The built-in pipeline, with its spec."), ...errorResponses(400, 401, 403, 404, 429, 500, 503) },
    },
  }, async (req) => {
    const found = engine.builtins.get(req.params.pipeline_id);
    if (!found) throw new ApiError("not_found", `no built-in pipeline ${JSON.stringify(req.params.pipeline_id)}`);
    return { data: { ...definitionView(found, "builtin"), spec: found } };
  });

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
  }, async (req) => ({ data: runView(await engine.cancel(await runOf(req, req.params.id, req.query.workspace_id))) }));

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
    const step = run.steps.find((s) => s.stepId === req.params.stepId);
    if (!step) throw new ApiError("not_found", `step ${JSON.stringify(req.params.stepId)} not in run ${run.id}`);
    const { tail } = req.query;
    const key = stepLogKey(run, step.stepId);
    reply.type("text/plain; charset=utf-8");
    /** The log copied to the run folder when the step ended: streamed, or only its end read. */
    const stored = async (): Promise<boolean> => {
      try {
        if (tail !== undefined) {
          const info = await store.head(key);
          if (!info) return false;
          reply.send(await tailObject(store, key, info.size, tail));
          return true;
        }
        const { body, info } = await store.get(key);
        reply.header("content-length", info.size);
        reply.send(typeof (body as Partial<Readable>).pipe === "function" ? body : Readable.from(body));
        return true;
      } catch (e) {
        if (e instanceof StoreError && e.code === "NotFound") return false;
        throw e;
      }
    };
    // An ended step's log is in storage; a running one's only with the executor (which may
    // also keep an earlier attempt's in storage, so it is asked first).
    const ended = isFinalStep(step.status);
    if (ended && (await stored())) return reply;
    const live = await engine.executor.logs(run.id, step.stepId);
    if (live !== undefined) return reply.send(tail !== undefined ? lastLines(Buffer.from(live), tail) : live);
    if (!ended && (await stored())) return reply;
    return reply.send("");
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
    const run = await runOf(req, req.params.id, req.body.workspace_id);
    if (run.status !== "completed" && run.status !== "failed") throw new ApiError("conflict", `run ${run.id} is ${run.status}; only completed or failed runs can be saved`);
    const name = req.body.name ?? run.name;
    const slug = name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "") || "pipeline";
    const manifest = RunManifestSchema.parse(buildManifest(run, app.operon.deps.clock.now()));
    const extracted = extractSpec(manifest, { name, builtinIds: [...engine.builtins.keys()], now: new Date(app.operon.deps.clock.now()).toISOString() });
    if (!extracted.ok) throw new ApiError("validation_failed", extracted.errors.map((e) => e.message).join("; "), { errors: extracted.errors });
    const ws = await app.operon.auth.workspace(requireAuth(req), run.workspace);
    const path = `pipelines/specs/${slug}.pipeline.json`;
    try {
      await store.put(`${workspaceRoot(ws)}${path}`, JSON.stringify(extracted.spec, null, 2) + "\n", { contentType: "application/json", ...(req.body.overwrite ? {} : { ifNoneMatch: "*" as const }) });
    } catch (e) {
      if (e instanceof StoreError && e.code === "PreconditionFailed") throw new ApiError("conflict", `${path} already exists; pass "overwrite": true to replace it`, { path });
      throw e;
    }
    return reply.status(201).send({ data: { path, spec: extracted.spec, warnings: extracted.warnings } });
  });
}

function definitionView(s: PipelineSpec, origin: "builtin" | "workspace") {
  return {
    id: s.id ?? null, name: s.name ?? null, description: s.description ?? null, category: s.category ?? null, tags: s.tags ?? [],
    estimated_duration: s.estimatedDuration ?? null, origin,
    inputs: (s.inputs ?? []).map((i) => ({ name: i.name, type: i.type, description: i.description ?? null, default: i.default ?? null, options: i.options ?? null, required: i.default === undefined })),
    steps: s.steps.map((st) => ({ step_id: st.stepId, tool: st.toolName, depends_on: st.dependsOn ?? [], description: st.description ?? null })),
  };
}
