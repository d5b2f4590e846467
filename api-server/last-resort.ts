/**
 * The process's last-resort handlers. Without them one forgotten `await` or a throw in a
 * timer callback (an unhandled rejection, an uncaught exception) stops the whole server,
 * and every in-flight request and run with it; Node's default report also prints the stack,
 * whose messages may carry server paths and values. Here such an error is logged as one
 * line — its type and its message with paths scrubbed and credentials redacted, no stack —
 * counted in `operon_uncaught_errors_total`, and the process keeps serving.
 */
import { sanitizeMessage } from "../core/redact.js";

export type UncaughtKind = "unhandled_rejection" | "uncaught_exception";

/** The counter the handlers increment (prom-client's Counter fits). */
export interface UncaughtCounter { inc(labels: { kind: UncaughtKind }): void }

/** One line describing what was thrown or rejected with: type and sanitized message, never a stack. */
export function describeUncaught(reason: unknown): string {
  let text: string;
  if (reason instanceof Error) text = `${reason.name}: ${reason.message}`;
  else if (typeof reason === "string") text = reason;
  else {
    try { text = JSON.stringify(reason) ?? String(reason); } catch { text = Object.prototype.toString.call(reason); }
  }
  const line = sanitizeMessage(text).replace(/\s*[\r\n]+\s*/g, " ").trim();
  return line.length > 500 ? `${line.slice(0, 500)}…` : line;
}

/**
 * Installs `process.on("unhandledRejection")` and `process.on("uncaughtException")`
 * handlers that log one line and count the error instead of letting the process exit.
 * Returns a function that removes them again.
 */
export function installLastResortHandlers(log: (line: string) => void, counter: UncaughtCounter): () => void {
  const handle = (kind: UncaughtKind, reason: unknown) => {
    try {
      counter.inc({ kind });
      log(`${kind === "unhandled_rejection" ? "unhandled promise rejection" : "uncaught exception"} (process kept running): ${describeUncaught(reason)}`);
    } catch { /* a last-resort handler must never throw itself */ }
  };
  const onRejection = (reason: unknown) => handle("unhandled_rejection", reason);
  const onException = (err: unknown) => handle("uncaught_exception", err);
  process.on("unhandledRejection", onRejection);
  process.on("uncaughtException", onException);
  return () => {
    process.off("unhandledRejection", onRejection);
    process.off("uncaughtException", onException);
  };
}
