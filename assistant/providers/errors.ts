/**
 * Any failure of a provider call as one UpstreamError whose message is the provider's own
 * (its HTTP status and error message), a time-out or a connection failure in words: never a
 * stack trace or an SDK internal. Both SDKs' errors have the same shape (status, error body).
 */
import { UpstreamError, type SendOptions } from "./types.js";

function providerMessage(e: { message?: unknown; error?: unknown }): string {
  const body = e.error as { message?: unknown; error?: { message?: unknown } } | undefined;
  const nested = body?.error?.message ?? body?.message;
  if (typeof nested === "string" && nested !== "") return nested;
  const m = typeof e.message === "string" ? e.message.replace(/^\d{3}\s+/, "") : "";
  return m || "no message";
}

export function upstreamError(provider: string, e: unknown, o: Pick<SendOptions, "signal" | "timeoutMs">): UpstreamError {
  if (e instanceof UpstreamError) return e;
  const err = (e ?? {}) as { name?: unknown; status?: unknown; message?: unknown; error?: unknown };
  const who = `the LLM provider (${provider})`;
  if (o.signal.aborted) {
    const reason = o.signal.reason as { name?: string } | undefined;
    return new UpstreamError(reason?.name === "TimeoutError" ? `${who} did not answer before the turn's deadline` : `${who} request was stopped`);
  }
  if (err.name === "APIConnectionTimeoutError") return new UpstreamError(`${who} did not answer within ${Math.round(o.timeoutMs / 1000)} s`);
  if (typeof err.status === "number") return new UpstreamError(`${who} answered ${err.status}: ${providerMessage(err)}`);
  if (err.name === "APIConnectionError") {
    const cause = (e as { cause?: { message?: unknown } }).cause?.message;
    return new UpstreamError(`${who} could not be reached${typeof cause === "string" && cause ? ` (${cause})` : ""}`);
  }
  // A body the SDK could not parse (a compatible server answering garbage), or anything else.
  if (e instanceof SyntaxError) return new UpstreamError(`${who} answered with malformed JSON: ${e.message}`);
  return new UpstreamError(`${who} failed: ${typeof err.message === "string" && err.message ? err.message : String(e)}`);
}
