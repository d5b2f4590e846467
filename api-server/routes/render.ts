/**
 * Chart rendering over HTTP (spec: Visualizations; DESIGN §11): `POST /v1/visualizations/render`
 * checks everything it can before answering 202 (the type, the options against the type's
 * schema, the file and any file an option names, the output folder), then the job runs in
 * the background (engine/render-jobs.ts). `GET /v1/visualizations/:job_id` reads a job and,
 * once completed, signs a short-lived key-free preview link for its image;
 * `GET /v1/visualizations` lists a workspace's jobs, newest first.
 */
import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { FILE_OPTIONS, parsePlotOptions, PLOT_TYPES, type PlotType } from "../../core/charts/options.js";
import { OUTPUT_FORMATS, RENDER_ID, RENDER_STATUSES, type OutputFormat, type RenderJobRecord } from "../../core/charts/render-job.js";
import { normalizeWorkspacePath } from "../../core/paths.js";
import { VIEWER_DEFAULT_SECONDS, type ViewerGrant } from "../../core/viewers.js";
import type { RenderJobs } from "../../engine/render-jobs.js";
import type { WorkspaceRecord } from "../../engine/service-store.js";
import { ApiError, badRequest } from "../errors.js";
import { dataOf, errorResponses, jsonResponse } from "../openapi.js";
import { signGrant } from "../viewer-token.js";
import { fileKey, listEnvelope, requireAuth, workspaceId } from "./common.js";

/** Which files each type reads (by extension, also gzipped); anything else is a 400 naming file_path. */
const INPUTS: Readonly<Record<PlotType, { ext: RegExp; what: string }>> = {
  volcano_plot: { ext: /\.(csv|tsv|txt|tab)(\.gz)?$/i, what: "a differential-expression results table (.csv, .tsv, .txt)" },
  manhattan_plot: { ext: /\.(csv|tsv|txt|tab|assoc|linear|logistic|glm\.\w+|ma|sumstats)(\.gz)?$/i, what: "a GWAS summary-statistics table (.csv, .tsv, .txt)" },
  pca_plot: { ext: /\.(csv|tsv|txt|tab)(\.gz)?$/i, what: "a count matrix (.csv, .tsv, .txt)" },
  heatmap: { ext: /\.(csv|tsv|txt|tab)(\.gz)?$/i, what: "a count matrix (.csv, .tsv, .txt)" },
  coverage_track: { ext: /\.(bam|bw|bigwig)$/i, what: "a BAM or bigWig file (.bam, .bw, .bigwig)" },
  structure_3d: { ext: /\.(pdb|ent|cif|mmcif)(\.gz)?$/i, what: "a PDB or mmCIF structure (.pdb, .cif, .mmcif)" },
  pathway_map: { ext: /\.(csv|tsv|txt|tab)(\.gz)?$/i, what: "a gene list or enrichment/DE table (.csv, .tsv, .txt)" },
};

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

export async function renderRoutes(app: FastifyInstance, opts: { jobs: RenderJobs }): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { store, config, clock, service } = app.operon.deps;
  const jobs = opts.jobs;

  const view = (j: RenderJobRecord) => {
    let preview: string | null = null;
    if (j.status === "completed" && j.output_path) {
      const grant: ViewerGrant = { v: 1, o: j.organization, w: j.workspace_id, k: j.output_path, f: "image", exp: Math.floor(clock.now() / 1000) + VIEWER_DEFAULT_SECONDS };
      preview = `${config.publicUrl}/view/${signGrant(config.signingSecret, grant)}`;
    }
    return {
      job_id: j.job_id, status: j.status, type: j.type, workspace_id: j.workspace_id, file_path: j.file_path, options: j.options,
      output_format: j.output_format, output_path: j.output_path, data_path: j.data_path, preview_url: preview, error: j.error,
      image: j.image ?? null, created_at: j.created_at, started_at: j.started_at, completed_at: j.completed_at,
    };
  };

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
    const b = req.body;
    const auth = requireAuth(req);
    if (!(PLOT_TYPES as readonly string[]).includes(b.type)) throw new ApiError("invalid_request", `type: unknown plot type ${JSON.stringify(b.type)}; valid types: ${PLOT_TYPES.join(", ")}`, { field: "type", valid_values: [...PLOT_TYPES] });
    const type = b.type as PlotType;
    const format = (b.output_format ?? "png").toLowerCase();
    if (!(OUTPUT_FORMATS as readonly string[]).includes(format)) throw new ApiError("invalid_request", `output_format: must be png or svg`, { field: "output_format", valid_values: [...OUTPUT_FORMATS] });
    const given = b.file_path ?? b.file_key;
    const field = b.file_path !== undefined ? "file_path" : "file_key";
    if (!given) throw badRequest("file_path", "is required");
    const parsed = parsePlotOptions(type, b.options);
    if (!parsed.ok) {
      const first = parsed.errors[0]!;
      throw new ApiError("invalid_request", parsed.errors.map((e) => `${e.path}: ${e.message}`).join("; "), { field: first.path, errors: parsed.errors });
    }
    const ws = await app.operon.auth.workspace(auth, b.workspace_id);
    const { key, storageKey } = fileKey(ws, field, given);
    const input = INPUTS[type];
    if (!input.ext.test(key)) throw badRequest(field, `${type} reads ${input.what}; ${JSON.stringify(key.split("/").pop())} is not one`);
    const options = { ...parsed.options };
    for (const opt of FILE_OPTIONS[type]) {
      const v = options[opt];
      if (typeof v !== "string") continue;
      const f = fileKey(ws, `options.${opt}`, v);
      if (!(await store.head(f.storageKey))) throw new ApiError("not_found", `options.${opt}: ${JSON.stringify(f.key)} not found in workspace ${ws.id}`, { field: `options.${opt}` });
      options[opt] = f.key;
    }
    const folder = outputFolder(b.output_path);
    if (!(await store.head(storageKey))) throw new ApiError("not_found", `file ${JSON.stringify(key)} not found in workspace ${ws.id}`, { field });
    const job = await jobs.submit({ organization: ws.organization, workspace: ws.id, keyId: auth.keyId, type, filePath: key, options, format: format as OutputFormat, outputFolder: folder });
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
    const auth = requireAuth(req);
    const id = req.params.job_id;
    const notFound = () => new ApiError("not_found", `render job ${JSON.stringify(id)} not found`);
    if (!RENDER_ID.test(id)) throw notFound();
    let candidates: WorkspaceRecord[];
    if (req.query.workspace_id) candidates = [await app.operon.auth.workspace(auth, req.query.workspace_id)];
    else {
      const all = await service.listWorkspaces(auth.organization);
      candidates = all.filter((w) => !auth.workspaces || auth.workspaces.has(w.id));
    }
    for (const ws of candidates) {
      const job = await jobs.get(ws.organization, ws.id, id);
      if (job) return { data: view(job) };
    }
    throw notFound();
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

/** The output folder as a workspace prefix (`plots/`), through the same normalizer as every path. */
function outputFolder(input: string | undefined): string {
  if (input === undefined) return "plots/";
  const trimmed = input.replace(/\/+$/, "");
  if (trimmed === "" || trimmed === ".") return "";
  const n = normalizeWorkspacePath(trimmed);
  if (!n.ok) throw badRequest("output_path", n.reason);
  return `${n.path}/`;
}
