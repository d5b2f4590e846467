/**
 * The error envelope (docs/api.md#errors): `{error, message, details, request_id}` with a fixed
 * status per code. Routes throw ApiError; the app's error handler renders everything,
 * including Fastify's own errors, in this shape and never leaks a stack trace, a server
 * filesystem path or a credential (`clientMessage`, `clientDetails`).
 */
import { z } from "zod";
import { sanitizeMessage } from "../core/redact.js";
import { STATUS, type ErrorCode } from "../services/service-error.js";
export { ApiError, STATUS, badRequest, type ErrorCode } from "../services/service-error.js";

/**
 * The envelope as the error handler (app.ts) and the 404 handler send it, for the OpenAPI
 * document (component `Error`). Documentation only: nothing validates or reshapes a reply with it.
 */
export const ErrorEnvelopeSchema = z.object({
  error: z.enum(Object.keys(STATUS) as [ErrorCode, ...ErrorCode[]]).describe("Machine-readable error code; each code has one HTTP status."),
  message: z.string().describe("What went wrong, for a person; never a server path or a credential."),
  details: z.record(z.string(), z.unknown()).optional().describe("Structured context when there is some: `field`, `issues` (request validation), `errors` (spec validation), `required_scope`, `valid_values`…"),
  request_id: z.string().describe("The request's id, also in the X-Request-Id response header."),
});

/**
 * A message as a client may see it: absolute filesystem paths replaced by `<path>` and
 * credentials redacted. Messages are often built from a lower layer's (`ENOENT: … open
 * '/srv/…/.operon/tmp/…'`), so every message leaving the error handler goes through this.
 */
export const clientMessage = (message: string): string => sanitizeMessage(message);

/**
 * `details` as a client may see them: every string sanitized like a message, except the
 * values of `path` keys, which by the API's convention are JSON pointers into a spec
 * (`/steps/2/toolName`) or workspace paths, never server paths.
 */
export function clientDetails(value: unknown, key?: string): unknown {
  if (typeof value === "string") return key === "path" ? value : sanitizeMessage(value);
  if (Array.isArray(value)) return value.map((v) => clientDetails(v));
  if (value && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, clientDetails(v, k)]));
  return value;
}
