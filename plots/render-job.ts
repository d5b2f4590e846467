/**
 * Render jobs (spec: Visualizations; docs/charts.md), the pure part: the record kept under
 * `_system/` (so any api-server replica can answer for it), what its status is when read
 * (a job whose worker stopped heartbeating is `failed`, computed on read — never stuck
 * `running`), the names its image and data take in the workspace, and its API view.
 */
import type { PlotType } from "./options.js";

export const RENDER_STATUSES = ["queued", "running", "completed", "failed"] as const;
export type RenderStatus = (typeof RENDER_STATUSES)[number];
export const OUTPUT_FORMATS = ["png", "svg"] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** A worker renews its job's heartbeat this often… */
export const HEARTBEAT_MS = 10_000;
/** …and a job not renewed for this long has lost its worker (its server stopped). */
export const HEARTBEAT_TIMEOUT_MS = 45_000;

export interface RenderJobRecord {
  job_id: string;
  organization: string;
  workspace_id: string;
  key_id: string;
  type: PlotType;
  /** Workspace-relative input (normalized at submission). */
  file_path: string;
  /** Validated options, defaults applied. */
  options: Record<string, unknown>;
  output_format: OutputFormat;
  /** Workspace folder the image goes to (normalized, ends with `/`). */
  output_folder: string;
  status: RenderStatus;
  output_path: string | null;
  data_path: string | null;
  error: string | null;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  /** The api-server instance that holds the job, and when it last said so. */
  owner: { instance: string; heartbeat_at: string } | null;
  /** Image size in pixels once completed (PNG: scaled). */
  image?: { width: number; height: number; bytes: number } | null;
}

/** The record as readers should see it at `now`: a queued or running job whose owner went quiet has failed. */
export function effectiveJob(job: RenderJobRecord, now: number): RenderJobRecord {
  if (job.status === "completed" || job.status === "failed") return job;
  const beat = job.owner ? Date.parse(job.owner.heartbeat_at) : Date.parse(job.created_at);
  if (now - beat <= HEARTBEAT_TIMEOUT_MS) return job;
  return {
    ...job, status: "failed", completed_at: new Date(beat + HEARTBEAT_TIMEOUT_MS).toISOString(),
    error: job.status === "running"
      ? "the server rendering this job stopped before it finished (its worker was lost); submit the render again"
      : "the server holding this job stopped before it could start; submit the render again",
  };
}

/** `deseq2-results.csv` + volcano_plot → `deseq2-results_volcano`; safe in any workspace path segment. */
export function outputStem(filePath: string, type: PlotType): string {
  const name = filePath.split("/").pop() ?? "data";
  const base = name.replace(/\.(gz|bgz)$/i, "").replace(/\.[A-Za-z0-9]{1,6}$/, "") || "data";
  const safe = base.replace(/[^A-Za-z0-9._-]+/g, "_").replace(/^[._-]+/, "").slice(0, 120) || "data";
  return `${safe}_${type.replace(/_plot$/, "").replace(/_/g, "-")}`;
}

/** Candidate names for the n-th attempt at a free name: `stem`, `stem-2`, `stem-3`, … */
export const candidateStem = (stem: string, n: number) => (n <= 1 ? stem : `${stem}-${n}`);

/** Newest first: job ids are `render-` + a ULID, so id order is submission order. */
export const newestFirst = (a: string, b: string) => (a < b ? 1 : a > b ? -1 : 0);

export const RENDER_ID = /^render-[0-9a-hjkmnp-tv-z]{26}$/;
