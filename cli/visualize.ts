/**
 * `operon viewer FILE` (POST /v1/visualizations/viewer-url: a key-free, expiring link that
 * shows a workspace file in the browser) and `operon render TYPE FILE` (POST
 * /v1/visualizations/render, then GET /v1/visualizations/{job_id} until the job ends: the
 * image's and the data's workspace paths). See docs/api.md and docs/charts.md.
 */
import { Command } from "commander";
import type { Ctx } from "./program.js";
import { apiAction, apiPath, clientOf, query } from "./client.js";
import { humanSize, json, parseValues, positiveInt, repeatable, withCommon, type CommonOptions } from "./output.js";

/** How often `render` reads its job until it ends. */
const RENDER_POLL_MS = 250;

interface RenderJob {
  job_id: string; status: "queued" | "running" | "completed" | "failed"; type: string; output_path: string | null; data_path: string | null;
  preview_url: string | null; error: string | null; image: { width: number; height: number; bytes: number } | null;
}

export function viewerCli(ctx: Ctx): Command {
  const cmd = withCommon(new Command("viewer").description("Print a shareable link that shows a workspace file in the browser (no API key needed to open it, until it expires). The format comes from the file's extension unless --format says.")
    .summary("Print a browser link that shows a workspace file (VCF, BAM, FASTA, PDB, CSV…)")
    .argument("<FILE>", "the file's path in the workspace")
    .option("--format <format>", "vcf, bam, fasta, pdb or csv: instead of the extension's")
    .option("--reference <path>", "a FASTA in the workspace to show under variants or alignments (required for CRAM)")
    .option("--region <region>", "where to open, chr:start-end (1-based)")
    .option("--expires-in <seconds>", "how long the link works, 1 to 86400 seconds (default: 3600)", positiveInt(86_400))
    .addHelpText("after", "\nExample:\n  operon viewer results/sample.vcf.gz --region chr1:10000-20000"), { json: "print the API's answer as JSON: {viewer_url, format, expires_in, expires_at}" });
  return cmd.action(apiAction(cmd, ctx, async (file: string, opts: CommonOptions & { format?: string; reference?: string; region?: string; expiresIn?: number }) => {
    const link = await clientOf(ctx, opts).data<{ viewer_url: string; format: string; expires_in: number; expires_at: string }>("POST", "/v1/visualizations/viewer-url", {
      body: { workspace_id: opts.workspace, file_path: file, format: opts.format, reference: opts.reference, region: opts.region, expires_in: opts.expiresIn },
    });
    ctx.io.out(opts.json ? json(link) : link.viewer_url);
    return 0;
  }));
}

export function renderCli(ctx: Ctx): Command {
  const cmd = withCommon(new Command("render").description("Render a chart from a workspace file and wait for it: prints the workspace paths of the image and of the data drawn (a TSV). Types and their options: docs/charts.md.")
    .summary("Render a chart from a workspace file; print the image's path")
    .argument("<TYPE>", "volcano_plot, manhattan_plot, pca_plot, heatmap, coverage_track, structure_3d or pathway_map")
    .argument("<FILE>", "the data file's path in the workspace")
    .option("--option <name=value>", "an option of the chart type; repeat for each. A JSON value (2, true, [\"a\",\"b\"]) is sent as that, anything else as a string", repeatable)
    .option("--format <format>", "png or svg (default: png)")
    .option("--output-path <folder>", "the workspace folder for the image and its TSV (default: plots/)")
    .addHelpText("after", "\nExit codes: 0 rendered, 1 refused by the API (unknown type or option, missing file) or the render\nfailed, 2 usage error or server unreachable.\n\nExample:\n  operon render volcano_plot de/results.csv --option threshold_fc=1.5 \\\n    --option title=\"Treated vs control\""), { json: "print the finished job as JSON: {job_id, status, output_path, data_path, preview_url, error, …}" });
  return cmd.action(apiAction(cmd, ctx, async (type: string, file: string, opts: CommonOptions & { option?: string[]; format?: string; outputPath?: string }) => {
    const options = parseValues("--option", opts.option ?? []);
    const client = clientOf(ctx, opts);
    let job = await client.data<RenderJob>("POST", "/v1/visualizations/render", {
      body: { type, file_path: file, workspace_id: opts.workspace, options, output_format: opts.format, output_path: opts.outputPath },
    });
    while (job.status === "queued" || job.status === "running") {
      await new Promise((r) => setTimeout(r, RENDER_POLL_MS));
      job = await client.data<RenderJob>("GET", apiPath`/v1/visualizations/${job.job_id}` + query({ workspace_id: opts.workspace }));
    }
    if (opts.json) ctx.io.out(json(job));
    if (job.status !== "completed") {
      ctx.io.err(`operon render: the ${type} of ${file} failed: ${job.error ?? "no reason given"} (job ${job.job_id})`);
      return 1;
    }
    if (!opts.json) {
      ctx.io.out(`image: ${job.output_path ?? "-"}${job.image ? ` (${job.image.width}×${job.image.height}, ${humanSize(job.image.bytes)})` : ""}`);
      ctx.io.out(`data:  ${job.data_path ?? "-"}`);
      if (job.preview_url) ctx.io.out(`preview (an hour): ${job.preview_url}`);
    }
    return 0;
  }));
}
