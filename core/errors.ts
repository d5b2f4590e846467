/**
 * Operon's errors, one taxonomy (docs/errors.md): an `OperonError` carries a `code` from
 * `ERROR_CODES`, a `message` for a person and optional structured `details`. The services the
 * HTTP routes and the assistant tools share throw it, and so do the engine's submission, the
 * service store and the viewer and render preparations when the fault is the caller's.
 *
 * Nothing here knows HTTP: the code → HTTP mapping lives in `api-server/errors.ts` alone; the
 * assistant shows the model the same code and message as a tool error. The codes are the wire's
 * `error` strings and never change meaning.
 *
 * Errors of a lower layer stay that layer's when they drive its own control flow
 * (`StoreError` of the object store port, `KubeError` of the Kubernetes client, `ReaderError`
 * of the bounded readers); the ones that reach a caller as such are turned into an
 * `OperonError` by `knownError` or where they are caught.
 */
import { StoreError } from "./ports.js";

/** Every error code, as the API's `error` field spells it. */
export const ERROR_CODES = [
  /** A malformed body, query or path value; the message starts with the field (`details.field`). */
  "invalid_request",
  /** No key, a malformed, unknown or revoked key. */
  "unauthorized",
  /** The key lacks the scope the action needs (`details.required_scope`). */
  "insufficient_scope",
  /** The key is limited to workspaces and names another one. */
  "workspace_access_denied",
  /** A signed link or presigned URL that was altered or does not match. */
  "forbidden",
  /** No such thing, or one the caller may not know of. */
  "not_found",
  /** The thing is in a state that refuses the action (a name taken, a run not finished). */
  "conflict",
  /** It existed and no longer does (an expired viewer link). */
  "gone",
  /** A body or upload over its limit. */
  "payload_too_large",
  /** A content type the action does not take. */
  "unsupported_media_type",
  /** A byte range outside the object. */
  "range_not_satisfiable",
  /** Well-formed but invalid: a pipeline spec, a run's inputs, a file a viewer cannot read (`details.errors`). */
  "validation_failed",
  /** Over a rate limit. */
  "rate_limited",
  /** A bug: the message a caller sees is generic. */
  "internal_error",
  /** A service the request depends on (the agent's LLM provider) failed or timed out. */
  "upstream_error",
  /** Temporarily unable: object storage unreachable, no LLM provider, no compute slot in time. */
  "unavailable",
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export class OperonError extends Error {
  constructor(readonly code: ErrorCode, message: string, readonly details?: Record<string, unknown>, options?: ErrorOptions) {
    super(message, options);
    this.name = "OperonError";
  }
}

/** A malformed value of one field: `invalid_request`, the message starting with the field. */
export const badRequest = (field: string, message: string) => new OperonError("invalid_request", `${field}: ${message}`, { field });

/** What an unknown thrown value says: an Error's message, anything else as a string. */
export function messageOf(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}

/** The message of the object store's outage, as callers see it (what failed is for the log). */
export const STORE_UNAVAILABLE_MESSAGE = "object storage is temporarily unavailable; retry later";

/**
 * A thrown value as the taxonomy's error when it is one a caller may see: an `OperonError`,
 * or the object store refusing a key (`invalid_request`) or being out (`unavailable`).
 * Anything else is undefined: an internal error, whose message stays in the log.
 */
export function knownError(e: unknown): OperonError | undefined {
  if (e instanceof OperonError) return e;
  if (e instanceof StoreError && e.code === "InvalidKey") return new OperonError("invalid_request", e.message, undefined, { cause: e });
  if (e instanceof StoreError && e.code === "Unavailable") return new OperonError("unavailable", STORE_UNAVAILABLE_MESSAGE, undefined, { cause: e });
  return undefined;
}
