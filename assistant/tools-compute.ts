/**
 * Compute tools, viewer links and charts as assistant tools: the tool catalogue (summarised;
 * one tool's full parameter schema on request), a synchronous tool run, a viewer link for a
 * workspace file, and chart rendering (submit, then status). Each handler calls the
 * functions behind the tools, viewer-url and render routes.
 */
import { z } from "zod";
import { VIEWER_DEFAULT_SECONDS, VIEWER_FORMATS, VIEWER_MAX_SECONDS } from "../core/viewers.js";
import { PLOT_TYPES } from "../plots/options.js";
import { runTool, toolViews } from "../services/tools.js";
import { createViewerLink } from "../services/viewer-links.js";
import { getRenderJob, renderJobView, submitRender, type RenderDeps } from "../services/renders.js";
import { OperonError } from "../core/errors.js";
import { READ_ONLY, defineTool, type AssistantTool, type ToolContext } from "./registry.js";

/** Tool output shown to a model: the end of stderr and the start of stdout, each capped. */
const MAX_TEXT = 16 * 1024;
const workspaceId = z.string().min(1).max(63).describe("The workspace (see service_list_workspaces).");

function renderDeps(ctx: ToolContext): RenderDeps {
  const { store, access, clock, renders, publicUrl, signingSecret } = ctx.deps;
  if (!renders) throw new OperonError("unavailable", "chart rendering is not available on this server");
  return { store, access, clock, jobs: renders, publicUrl, signingSecret };
}

export const computeTools: AssistantTool[] = [
  defineTool({
    name: "service_list_tools",
    title: "List compute tools",
    description: "The compute tools (samtools, bcftools, bwa, …) with their subcommands and whether they can run here. Give tool_id to get that tool's full parameter JSON Schema (the `input` of service_run_tool and a pipeline step's parameters).",
    input: z.object({ tool_id: z.string().min(1).max(64).optional() }).strict(),
    output: z.looseObject({ tools: z.array(z.looseObject({ id: z.string() })) }),
    annotations: READ_ONLY,
    scope: "tools",
    handler: async (a, ctx) => {
      const all = toolViews(ctx.deps.storage);
      if (a.tool_id === undefined) return { tools: all.map((t) => ({ id: t.id, description: t.description, available: t.available, commands: t.commands.map((c) => c.name) })) };
      const one = all.find((t) => t.id === a.tool_id);
      if (!one) throw new OperonError("not_found", `tool_id: unknown tool ${JSON.stringify(a.tool_id)}; tools: ${all.map((t) => t.id).join(", ")}`, { field: "tool_id", valid_values: all.map((t) => t.id) });
      return { tools: [one] };
    },
  }),
  defineTool({
    name: "service_run_tool",
    title: "Run a compute tool",
    description: "Runs one compute tool synchronously (e.g. samtools flagstat, bcftools stats) and returns its exit code, stdout, the end of its log and the files it wrote. `input` follows the tool's parameter schema (service_list_tools with tool_id): the subcommand in `command`, files as workspace paths in inputFile/inputFile2/reference, outputs in outputFile. workspace_id is needed for a tool that reads files. For multi-step work use a pipeline instead.",
    input: z.object({ tool_id: z.string().min(1).max(64), input: z.record(z.string(), z.unknown()), workspace_id: workspaceId.optional() }).strict(),
    output: z.looseObject({ exit_code: z.number().nullable(), status: z.string() }),
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    scope: "tools",
    available: (d) => d.engine !== undefined,
    handler: async (a, ctx) => {
      const { engine, store, access, clock } = ctx.deps;
      if (!engine) throw new OperonError("unavailable", "tool runs are not available on this server");
      const r = await runTool({ engine, store, access, clock }, ctx.auth, a.tool_id, a);
      return { ...r, stdout: r.stdout.slice(0, MAX_TEXT), stderr: r.stderr.slice(-MAX_TEXT), truncated: r.stdout.length > MAX_TEXT || r.stderr.length > MAX_TEXT };
    },
  }),
  defineTool({
    name: "service_create_viewer_link",
    title: "Create a viewer link",
    description: `A shareable link that opens an interactive viewer for a workspace file, needing no API key: variants (.vcf .bcf), alignments (.bam .sam .cram), sequences (.fa .fasta .fastq .fq), 3D structures (.pdb .cif) or tables (.csv .tsv .txt). Valid expires_in seconds (default ${VIEWER_DEFAULT_SECONDS}, at most ${VIEWER_MAX_SECONDS}). Give it to the user to open in a browser.`,
    input: z.object({
      workspace_id: workspaceId,
      file_path: z.string().min(1).max(1024).describe("Workspace-relative path of the file."),
      format: z.enum(VIEWER_FORMATS).optional().describe("Overrides detection from the extension."),
      expires_in: z.number().int().min(1).max(VIEWER_MAX_SECONDS).default(VIEWER_DEFAULT_SECONDS),
      reference: z.string().min(1).max(1024).optional().describe("A FASTA in the workspace shown under variants or alignments (required for CRAM)."),
      region: z.string().min(1).max(300).optional().describe("Where to open, chr:start-end."),
    }).strict(),
    output: z.looseObject({ viewer_url: z.string(), format: z.string(), expires_in: z.number() }),
    annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    scope: "files",
    handler: async (a, ctx) => {
      const { store, access, clock, publicUrl, signingSecret } = ctx.deps;
      return { ...(await createViewerLink({ store, access, clock, publicUrl, signingSecret }, ctx.auth, a)).link };
    },
  }),
  defineTool({
    name: "service_render_chart",
    title: "Render a chart (submit or check)",
    description: `Renders a chart from a workspace file as PNG or SVG, in the background. To submit, give type (${PLOT_TYPES.join(", ")}), file_path and workspace_id, with type-specific options; it answers with a job_id at once. To check, give job_id (and workspace_id): when status is completed the answer has output_path and a preview_url to show the user.`,
    input: z.object({
      job_id: z.string().min(1).max(64).optional().describe("Check this job instead of submitting one."),
      workspace_id: workspaceId,
      type: z.enum(PLOT_TYPES).optional(),
      file_path: z.string().min(1).max(1024).optional(),
      options: z.record(z.string(), z.unknown()).optional().describe("Per type, e.g. volcano_plot: log2fc_col, pvalue_col, gene_col, threshold_fc, threshold_pvalue, title."),
      output_format: z.enum(["png", "svg"]).optional(),
      output_path: z.string().max(1024).optional().describe("Workspace folder for the image (default plots/)."),
    }).strict(),
    output: z.looseObject({ job_id: z.string(), status: z.string() }),
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    scope: "files",
    available: (d) => d.renders !== undefined,
    handler: async (a, ctx) => {
      const deps = renderDeps(ctx);
      if (a.job_id !== undefined) {
        if (a.type !== undefined || a.file_path !== undefined) throw new OperonError("invalid_request", "job_id: give either job_id (to check a job) or type and file_path (to submit one)", { field: "job_id" });
        return renderJobView(deps, await getRenderJob(deps, ctx.auth, a.job_id, a.workspace_id));
      }
      if (a.type === undefined) throw new OperonError("invalid_request", "type: is required to submit a chart (or give job_id to check one)", { field: "type" });
      if (a.file_path === undefined) throw new OperonError("invalid_request", "file_path: is required to submit a chart", { field: "file_path" });
      return renderJobView(deps, await submitRender(deps, ctx.auth, { ...a, type: a.type }));
    },
  }),
];
