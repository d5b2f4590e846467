/** Helpers shared by the route plugins: workspace keys, list envelopes, stream reading. */
import type { FastifyRequest } from "fastify";
import { z } from "zod";
import { workspaceRoot as workspaceRootKey } from "../../core/layout.js";
import { normalizeWorkspacePath } from "../../core/paths.js";
import { ApiError, badRequest } from "../errors.js";
import type { AuthContext } from "../auth.js";
import type { WorkspaceRecord } from "../../engine/service-store.js";

/** A workspace record's storage key prefix (core/layout.ts). */
export const workspaceRoot = (ws: Pick<WorkspaceRecord, "organization" | "id">) => workspaceRootKey(ws.organization, ws.id);

/**
 * A user-given file key (workspace-relative, or the full storage key of the same workspace)
 * as `{key, storageKey}`; anything that could leave the workspace is a 400 naming the field.
 */
export function fileKey(ws: WorkspaceRecord, field: string, input: string): { key: string; storageKey: string } {
  const root = workspaceRoot(ws);
  let rel = input;
  if (rel.startsWith(root)) rel = rel.slice(root.length);
  else if (rel.startsWith("orgs/")) throw badRequest(field, "a full storage key must be of this workspace");
  const n = normalizeWorkspacePath(rel);
  if (!n.ok) throw badRequest(field, n.reason);
  return { key: n.path, storageKey: root + n.path };
}

export function requireAuth(req: Pick<FastifyRequest, "auth">): AuthContext {
  if (!req.auth) throw new ApiError("unauthorized", "an API key is required");
  return req.auth;
}

export const workspaceId = z.string().min(1, "is required").max(63);

export const listEnvelope = <T>(data: T[], hasMore: boolean, nextCursor: string | null) => ({ data, has_more: hasMore, next_cursor: nextCursor });
