/**
 * The error envelope of DESIGN §6: `{error, message, details, request_id}` with a fixed
 * status per code. Routes throw ApiError; the app's error handler renders everything,
 * including Fastify's own errors, in this shape and never leaks a stack trace.
 */
export const STATUS = {
  invalid_request: 400,
  unauthorized: 401,
  insufficient_scope: 403,
  workspace_access_denied: 403,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  range_not_satisfiable: 416,
  validation_failed: 422,
  rate_limited: 429,
  internal_error: 500,
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof STATUS;

export class ApiError extends Error {
  constructor(readonly code: ErrorCode, message: string, readonly details?: Record<string, unknown>) {
    super(message);
    this.name = "ApiError";
  }
  get status(): number { return STATUS[this.code]; }
}

export const badRequest = (field: string, message: string) => new ApiError("invalid_request", `${field}: ${message}`, { field });
