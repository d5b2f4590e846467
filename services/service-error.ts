/**
 * The service's errors, one code each (docs/api.md#errors): thrown by the service functions that the
 * HTTP routes and the assistant tools share (engine/*-service.ts), rendered by the api-server
 * as the `{error, message, details}` envelope with the code's status and by the assistant as
 * a tool error. Here, below both, so that neither owns the other's rules.
 */
export const STATUS = {
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
  /** A service the request depends on (the agent's LLM provider) failed or timed out. */
  upstream_error: 502,
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
