/** Helpers shared by the route plugins: workspace keys, list envelopes, stream reading. */
import type { FastifyRequest } from "fastify";
import { z } from "zod";
import { OperonError } from "../../core/errors.js";
import type { AuthContext } from "../auth.js";

export { fileKey } from "../../services/access.js";

export function requireAuth(req: Pick<FastifyRequest, "auth">): AuthContext {
  if (!req.auth) throw new OperonError("unauthorized", "an API key is required");
  return req.auth;
}

export const workspaceId = z.string().min(1, "is required").max(63);

export const listEnvelope = <T>(data: T[], hasMore: boolean, nextCursor: string | null) => ({ data, has_more: hasMore, next_cursor: nextCursor });
