/**
 * The order of run listings, shared by both run stores and the pipelines API: newest first,
 * by creation time and then by id (both compared as strings, descending), so that a
 * position `{createdAt, id}` names a unique place in the list and keyset pagination ("the
 * runs after this one") neither repeats nor skips a run while others are being created.
 */
import type { RunListFilter, RunPosition, RunRecord } from "./ports.js";

/** Negative when `a` is listed before `b`. */
export function compareRunPositions(a: RunPosition, b: RunPosition): number {
  if (a.createdAt !== b.createdAt) return a.createdAt < b.createdAt ? 1 : -1;
  return a.id === b.id ? 0 : a.id < b.id ? 1 : -1;
}

export const positionOf = (run: Pick<RunRecord, "createdAt" | "id">): RunPosition => ({ createdAt: run.createdAt, id: run.id });

/** Whether a run (already narrowed to the filter's organization and workspace) belongs in the listing. */
export function matchesRunFilter(run: RunRecord, filter: RunListFilter): boolean {
  return (filter.organization === undefined || run.organization === filter.organization)
    && (filter.workspace === undefined || run.workspace === filter.workspace)
    && (filter.status === undefined || run.status === filter.status)
    && (filter.after === undefined || compareRunPositions(run, filter.after) > 0);
}
