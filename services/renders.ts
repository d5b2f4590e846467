/**
 * Chart rendering as a service (spec: Visualizations; docs/charts.md): everything a render
 * submission checks before its job is queued (the type, the options against the type's
 * schema, the file and any file an option names, the output folder), reading a job, and a
 * job as its caller sees it (with a short-lived key-free preview link once completed). The
 * render routes and the assistant's render tool both call these; the jobs themselves run in
 * media/render-jobs.ts.
 */
import { FILE_OPTIONS, parsePlotOptions, PLOT_TYPES, type PlotType } from "../plots/options.js";
import { OUTPUT_FORMATS, RENDER_ID, type OutputFormat, type RenderJobRecord } from "../plots/render-job.js";
import { normalizeWorkspacePath } from "../core/paths.js";
import { VIEWER_DEFAULT_SECONDS, type ViewerGrant } from "../core/viewers.js";
import type { Clock, ObjectStore } from "../core/ports.js";
import type { WorkspaceRecord } from "./store.js";
import { OperonError, badRequest } from "../core/errors.js";
import { fileKey, type AuthContext, type WorkspaceAccess } from "./access.js";
import { signGrant } from "./viewer-token.js";

/** Where render jobs are queued and read: the port the render jobs (media/render-jobs.ts) implement. */
export interface RenderQueue {
  submit(s: { organization: string; workspace: string; keyId: string; type: PlotType; filePath: string; options: Record<string, unknown>; format: OutputFormat; outputFolder: string }): Promise<RenderJobRecord>;
  get(organization: string, workspace: string, id: string): Promise<RenderJobRecord | undefined>;
  list(organization: string, workspace: string, limit: number, cursor?: string): Promise<{ items: RenderJobRecord[]; nextCursor: string | null }>;
}

export interface RenderDeps { store: ObjectStore; access: WorkspaceAccess; clock: Clock; jobs: RenderQueue; publicUrl: string; signingSecret: string }

export interface RenderInput {
  type: string;
  workspace_id: string;
  file_path?: string | undefined;
  file_key?: string | undefined;
  options?: Record<string, unknown> | undefined;
  output_format?: string | undefined;
  output_path?: string | undefined;
}

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

/** A job as the API shows it; a completed job's preview link is signed now, for an hour. */
export function renderJobView(deps: Pick<RenderDeps, "clock" | "publicUrl" | "signingSecret">, j: RenderJobRecord) {
  let preview: string | null = null;
  if (j.status === "completed" && j.output_path) {
    const grant: ViewerGrant = { v: 1, o: j.organization, w: j.workspace_id, k: j.output_path, f: "image", exp: Math.floor(deps.clock.now() / 1000) + VIEWER_DEFAULT_SECONDS };
    preview = `${deps.publicUrl}/view/${signGrant(deps.signingSecret, grant)}`;
  }
  return {
    job_id: j.job_id, status: j.status, type: j.type, workspace_id: j.workspace_id, file_path: j.file_path, options: j.options,
    output_format: j.output_format, output_path: j.output_path, data_path: j.data_path, preview_url: preview, error: j.error,
    image: j.image ?? null, created_at: j.created_at, started_at: j.started_at, completed_at: j.completed_at,
  };
}

/** Checks a render request and queues its job. */
export async function submitRender(deps: RenderDeps, auth: AuthContext, b: RenderInput): Promise<RenderJobRecord> {
  const { store, jobs } = deps;
  if (!(PLOT_TYPES as readonly string[]).includes(b.type)) throw new OperonError("invalid_request", `type: unknown plot type ${JSON.stringify(b.type)}; valid types: ${PLOT_TYPES.join(", ")}`, { field: "type", valid_values: [...PLOT_TYPES] });
  const type = b.type as PlotType;
  const format = (b.output_format ?? "png").toLowerCase();
  if (!(OUTPUT_FORMATS as readonly string[]).includes(format)) throw new OperonError("invalid_request", `output_format: must be png or svg`, { field: "output_format", valid_values: [...OUTPUT_FORMATS] });
  const given = b.file_path ?? b.file_key;
  const field = b.file_path !== undefined ? "file_path" : "file_key";
  if (!given) throw badRequest("file_path", "is required");
  const parsed = parsePlotOptions(type, b.options);
  if (!parsed.ok) {
    const first = parsed.errors[0]!;
    throw new OperonError("invalid_request", parsed.errors.map((e) => `${e.path}: ${e.message}`).join("; "), { field: first.path, errors: parsed.errors });
  }
  const ws = await deps.access.workspace(auth, b.workspace_id);
  const { key, storageKey } = fileKey(ws, field, given);
  const input = INPUTS[type];
  if (!input.ext.test(key)) throw badRequest(field, `${type} reads ${input.what}; ${JSON.stringify(key.split("/").pop())} is not one`);
  const options = { ...parsed.options };
  for (const opt of FILE_OPTIONS[type]) {
    const v = options[opt];
    if (typeof v !== "string") continue;
    const f = fileKey(ws, `options.${opt}`, v);
    if (!(await store.head(f.storageKey))) throw new OperonError("not_found", `options.${opt}: ${JSON.stringify(f.key)} not found in workspace ${ws.id}`, { field: `options.${opt}` });
    options[opt] = f.key;
  }
  const folder = outputFolder(b.output_path);
  if (!(await store.head(storageKey))) throw new OperonError("not_found", `file ${JSON.stringify(key)} not found in workspace ${ws.id}`, { field });
  const job = await jobs.submit({ organization: ws.organization, workspace: ws.id, keyId: auth.keyId, type, filePath: key, options, format: format as OutputFormat, outputFolder: folder });
  return job;
}

/** A render job of a workspace the key may use (`workspace_id` finds it at once; without it the key's workspaces are searched). */
export async function getRenderJob(deps: RenderDeps, auth: AuthContext, id: string, workspaceId?: string): Promise<RenderJobRecord> {
  const { jobs } = deps;
  const notFound = () => new OperonError("not_found", `render job ${JSON.stringify(id)} not found`);
  if (!RENDER_ID.test(id)) throw notFound();
  let candidates: WorkspaceRecord[];
  if (workspaceId) candidates = [await deps.access.workspace(auth, workspaceId)];
  else candidates = await deps.access.visibleWorkspaces(auth);
  for (const ws of candidates) {
    const job = await jobs.get(ws.organization, ws.id, id);
    if (job) return job;
  }
  throw notFound();
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
