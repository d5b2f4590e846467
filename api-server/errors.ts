/**
 * The error envelope (docs/api.md#errors, docs/errors.md): `{error, message, details,
 * request_id}` with a fixed status per code. The taxonomy (codes, `OperonError`) is
 * `core/errors.ts`; the code → HTTP status table is here and nowhere else. Routes and services
 * throw `OperonError`; the app's error handler renders everything, including Fastify's own
 * errors, through `errorReply` in this shape and never leaks a stack trace, a server
 * filesystem path or a credential (`clientMessage`, `clientDetails`).
 */
import { z } from "zod";
import type { FastifyError } from "fastify";
import { hasZodFastifySchemaValidationErrors } from "fastify-type-provider-zod";
import { sanitizeMessage } from "../core/redact.js";
import { StoreError } from "../core/ports.js";
import { ERROR_CODES, knownError, type ErrorCode } from "../core/errors.js";

/** Each code's one HTTP status. */
export const HTTP_STATUS = {
  invalid_request: 400,
  unauthorized: 401,
  insufficient_scope: 403,
  workspace_access_denied: 403,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  gone: 410,
  payload_too_large: 413,
  unsupported_media_type: 415,
  range_not_satisfiable: 416,
  validation_failed: 422,
  rate_limited: 429,
  internal_error: 500,
  upstream_error: 502,
  unavailable: 503,
} as const satisfies Record<ErrorCode, number>;

/** What the error handler sends for a thrown value, before sanitizing: a status and the envelope's fields. */
export interface ErrorReply {
  status: number;
  body: { error: ErrorCode; message: string; details?: Record<string, unknown> };
}

interface ErrorLog { warn(obj: object, msg: string): void; error(obj: object, msg: string): void }

/**
 * Any thrown value as an error reply: the taxonomy's errors with their code's status, Fastify's
 * own (request validation, rate limit, body size, content type, a bad request) as the code
 * that says the same, anything else a 500 `internal_error` whose message ("internal error")
 * tells nothing of it (it goes to `log`).
 */
export function errorReply(err: unknown, log: ErrorLog): ErrorReply {
  const known = knownError(err);
  if (known) {
    // An outage of the object store: the client may retry; what failed is for the log only.
    if (err instanceof StoreError && known.code === "unavailable") log.warn({ err }, "object store unavailable");
    return { status: HTTP_STATUS[known.code], body: { error: known.code, message: known.message, ...(known.details ? { details: known.details } : {}) } };
  }
  if (hasZodFastifySchemaValidationErrors(err)) {
    const issues = err.validation.map((v) => {
      const field = [v.instancePath.replace(/^\//, "").replace(/\//g, "."), (v.params as { issue?: { path?: unknown[] } }).issue?.path?.join(".")].find((x) => x) ?? "";
      return { field: field || (v.params as { issue?: { keys?: string[] } }).issue?.keys?.join(",") || "body", message: v.message ?? "invalid" };
    });
    const where = (err as FastifyError).validationContext ?? "request";
    return { status: 400, body: { error: "invalid_request", message: issues.map((i) => `${where === "body" ? "" : `${where}.`}${i.field}: ${i.message}`).join("; "), details: { issues } } };
  }
  const fe = (err ?? {}) as Partial<FastifyError>;
  const code = fe.statusCode ?? 500;
  const message = fe.message ?? "";
  if (code === 429) return { status: 429, body: { error: "rate_limited", message: message || "too many requests" } };
  if (code === 413 || fe.code === "FST_REQ_FILE_TOO_LARGE") return { status: 413, body: { error: "payload_too_large", message } };
  if (code === 415) return { status: 415, body: { error: "unsupported_media_type", message } };
  if (code >= 400 && code < 500) return code === 404 ? { status: 404, body: { error: "not_found", message } } : { status: 400, body: { error: "invalid_request", message } };
  log.error({ err }, "unhandled error");
  return { status: 500, body: { error: "internal_error", message: "internal error" } };
}

/**
 * The envelope as the error handler (app.ts) and the 404 handler send it, for the OpenAPI
 * document (component `Error`). Documentation only: nothing validates or reshapes a reply with it.
 */
export const ErrorEnvelopeSchema = z.object({
  error: z.enum(ERROR_CODES).describe("Machine-readable error code; each code has one HTTP status."),
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
