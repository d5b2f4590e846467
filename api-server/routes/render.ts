/**
 * Chart rendering over HTTP (spec: Visualizations; docs/charts.md): `POST /v1/visualizations/render`
 * checks everything it can before answering 202 (the type, the options against the type's
 * schema, the file and any file an option names, the output folder), then the job runs in
 * the background (media/render-jobs.ts). `GET /v1/visualizations/:job_id` reads a job and,
 * once completed, signs a short-lived key-free preview link for its image;
 * `GET /v1/visualizations` lists a workspace's jobs, newest first.
 */
import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { PLOT_TYPES } from "../../plots/options.js";
import { OUTPUT_FORMATS, RENDER_ID, RENDER_STATUSES, type RenderJobRecord } from "../../plots/render-job.js";
import type { RenderQueue } from "../../services/renders.js";
import { getRenderJob, renderJobView, submitRender } from "../../services/renders.js";
import { badRequest } from "../../core/errors.js";
import { dataOf, errorResponses, jsonResponse } from "../openapi.js";
import { listEnvelope, requireAuth, workspaceId } from "./common.js";

const JobSchema = z.object({
  job_id: z.string(),
  status: z.enum(RENDER_STATUSES),
  type: z.enum(PLOT_TYPES),
  workspace_id: z.string(),
  file_path: z.string(),
  options: z.record(z.string(), z.unknown()).describe("The options used, defaults applied."),
  output_format: z.enum(OUTPUT_FORMATS),
  output_path: z.string().nullable().describe("Workspace path of the image, once completed."),
  data_path: z.string().nullable().describe("Workspace path of the TSV of exactly the data drawn, once completed."),
  preview_url: z.string().nullable().describe("A key-free link that shows the image, valid for an hour from this read."),
  error: z.string().nullable(),
  image: z.object({ width: z.number().int(), height: z.number().int(), bytes: z.number().int() }).nullable().describe("Pixel size (PNG: scaled) and bytes, once completed."),
  created_at: z.string(), started_at: z.string().nullable(), completed_at: z.string().nullable(),
}).meta({ id: "RenderJob" });

export async function renderRoutes(app: FastifyInstance, opts: { jobs: RenderQueue }): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { store, config, clock } = app.operon.deps;
  const jobs = opts.jobs;

  const deps = { store, clock, jobs, access: app.operon.auth.access, publicUrl: config.publicUrl, signingSecret: config.signingSecret };
  const view = (j: RenderJobRecord) => renderJobView(deps, j);

  r.post("/v1/visualizations/render", {
    config: { scope: "files" },
    schema: {
      tags: ["visualizations"], summary: "Render a chart from a workspace file (asynchronous)", operationId: "renderChart",
      description: `Answers 202 with a queued job at once; poll GET /v1/visualizations/{job_id}. Types: ${PLOT_TYPES.join(", ")}; each type's options are checked now (an unknown option or a wrong type is a 400 naming \`options.<name>\`). The image (\`png\`, default, or \`svg\`) and a TSV of the data drawn are written to \`output_path\` (a workspace folder, default \`plots/\`) under a name no existing file has.`,
      body: z.object({
        type: z.string().min(1).max(64).describe(`One of ${PLOT_TYPES.join(", ")}.`),
        file_path: z.string().min(1).max(1024).optional().describe("Workspace-relative path of the data file."),
        file_key: z.string().min(1).max(1024).optional().describe("Alias of file_path."),
        workspace_id: workspaceId,
        options: z.record(z.string(), z.unknown()).optional().describe("Per type; see docs/charts.md."),
        output_format: z.string().max(16).optional().describe("png (default) or svg."),
        output_path: z.string().max(1024).optional().describe("Workspace folder for the image and its TSV (default plots/)."),
      }),
      response: { 202: jsonResponse(dataOf(JobSchema), "The job, queued."), ...errorResponses(400, 401, 403, 404, 429, 500, 503) },
    },
  }, async (req, reply) => {
    const job = await submitRender(deps, requireAuth(req), req.body);
    return reply.status(202).send({ data: view(job) });
  });

  r.get("/v1/visualizations/:job_id", {
    config: { scope: "files" },
    schema: {
      tags: ["visualizations"], summary: "A render job's status", operationId: "getRenderJob",
      description: "`queued` → `running` → `completed` (with `output_path`, `data_path` and `preview_url`) or `failed` (with `error`). A job whose server stopped is `failed`, never stuck `running`. `workspace_id` finds the job at once; without it the key's workspaces are searched.",
      params: z.object({ job_id: z.string().max(64) }),
      querystring: z.object({ workspace_id: z.string().min(1).max(63).optional() }),
      response: { 200: jsonResponse(dataOf(JobSchema), "The job."), ...errorResponses(400, 401, 403, 404, 429, 500, 503) },
    },
  }, async (req) => {
    return { data: view(await getRenderJob(deps, requireAuth(req), req.params.job_id, req.query.workspace_id)) };
  });

  r.get("/v1/visualizations", {
    config: { scope: "files" },
    schema: {
      tags: ["visualizations"], summary: "A workspace's render jobs, newest first", operationId: "listRenderJobs",
      querystring: z.object({
        workspace_id: workspaceId,
        limit: z.coerce.number().int().min(1).max(100).default(20),
        cursor: z.string().max(64).optional().describe("next_cursor of the previous page."),
      }),
      response: { 200: jsonResponse(z.object({ data: z.array(JobSchema), has_more: z.boolean(), next_cursor: z.string().nullable() }), "One page of jobs."), ...errorResponses(400, 401, 403, 429, 500, 503) },
    },
  }, async (req) => {
    const auth = requireAuth(req);
    const ws = await app.operon.auth.workspace(auth, req.query.workspace_id);
    if (req.query.cursor !== undefined && !RENDER_ID.test(req.query.cursor)) throw badRequest("cursor", "is not a cursor this endpoint gave");
    const page = await jobs.list(ws.organization, ws.id, req.query.limit, req.query.cursor);
    return listEnvelope(page.items.map(view), page.nextCursor !== null, page.nextCursor);
  });
}
