/**
 * Run and step statuses, defined once: the API's schemas, the PipelineRun CRD, run.json, the
 * planner and every "has it finished?" test import them from here.
 */
export const RUN_STATUSES = ["queued", "running", "completed", "failed", "cancelled"] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

export const STEP_STATUSES = ["pending", "waiting", "running", "completed", "failed", "cancelled", "skipped"] as const;
export type StepStatus = (typeof STEP_STATUSES)[number];

/** The statuses a run ends in. */
export const FINAL_RUN_STATUSES = ["completed", "failed", "cancelled"] as const;
export type FinalRunStatus = (typeof FINAL_RUN_STATUSES)[number];
const FINAL = new Set<string>(FINAL_RUN_STATUSES);
/** Whether a run (or a PipelineRun phase) has finished. */
export const isFinal = (status: string | undefined): status is FinalRunStatus => status !== undefined && FINAL.has(status);

/** The statuses a step ends in (a skipped step never runs). */
export const FINAL_STEP_STATUSES = ["completed", "failed", "cancelled", "skipped"] as const;
const STEP_FINAL = new Set<string>(FINAL_STEP_STATUSES);
export const isFinalStep = (status: string | undefined): boolean => status !== undefined && STEP_FINAL.has(status);
