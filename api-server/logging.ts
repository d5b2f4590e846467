/**
 * The request logger's options. They exist so that credentials never reach a log line: a
 * request's Authorization / X-API-Key header values and the signature and credential query
 * parameters of presigned URLs (embedded mode serves them itself: every download and
 * presigned upload is a request with its signature in the URL) are redacted wherever the
 * logger meets them — the request serializer, error objects, message strings, and any
 * `headers` object someone logs.
 */
import type { FastifyRequest } from "fastify";
import { REDACTED, redactSecrets, redactUrl } from "../core/redact.js";

/** Header paths pino censors in any logged object (`headers` at the top or one level down). */
const SECRET_HEADERS = ["authorization", "x-api-key", "cookie", "set-cookie", "proxy-authorization", "x-amz-security-token"];
export const REDACT_PATHS = SECRET_HEADERS.flatMap((h) => [`headers["${h}"]`, `*.headers["${h}"]`]);

type LogObject = Record<string, unknown>;

/** Fastify's request serializer, with the URL's secret query values redacted (headers are never logged). */
function serializeRequest(req: FastifyRequest): LogObject {
  return {
    method: req.method,
    url: redactUrl(req.url),
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  };
}

/** pino's error serializer, reduced, with credentials redacted from the message and stack. */
function serializeError(err: unknown): unknown {
  if (!(err instanceof Error)) return err;
  const e = err as Error & { code?: unknown; statusCode?: unknown; syscall?: unknown };
  return {
    type: e.constructor?.name ?? e.name,
    message: redactSecrets(e.message),
    ...(e.stack ? { stack: redactSecrets(e.stack) } : {}),
    ...(e.code !== undefined ? { code: e.code } : {}),
    ...(e.statusCode !== undefined ? { statusCode: e.statusCode } : {}),
    ...(e.syscall !== undefined ? { syscall: e.syscall } : {}),
  };
}

/** Top-level string fields and message strings of a log call, redacted (serializers handle `req` and `err`). */
function redactArgs(args: unknown[]): unknown[] {
  // `log.error(err)` takes its message from the error: made explicit, so it is redacted too.
  const [first, ...rest] = args;
  if (first instanceof Error) return redactArgs([{ err: first }, ...(rest.length > 0 ? rest : [first.message])]);
  return args.map((a) => {
    if (typeof a === "string") return redactSecrets(a);
    if (a && typeof a === "object" && Object.getPrototypeOf(a) === Object.prototype) {
      let copy: LogObject | undefined;
      for (const [k, v] of Object.entries(a as LogObject)) {
        if (typeof v !== "string") continue;
        const r = redactSecrets(v);
        if (r !== v) (copy ??= { ...(a as LogObject) })[k] = r;
      }
      return copy ?? a;
    }
    return a;
  });
}

/**
 * Fastify `logger` options from the app's `logger` dependency (false: no logging; true or
 * pino options: logging with the redaction above added to whatever the caller configured).
 */
export function loggerOptions(logger: boolean | object | undefined): false | LogObject {
  if (!logger) return false;
  const base = (logger === true ? {} : logger) as LogObject & { redact?: string[] | { paths: string[] }; serializers?: LogObject; hooks?: LogObject };
  const callerPaths = Array.isArray(base.redact) ? base.redact : base.redact?.paths ?? [];
  return {
    ...base,
    redact: { paths: [...callerPaths, ...REDACT_PATHS], censor: REDACTED },
    serializers: { ...base.serializers, req: serializeRequest, err: serializeError },
    hooks: {
      ...base.hooks,
      logMethod(this: unknown, args: unknown[], method: (...a: unknown[]) => void, level: number) {
        const own = base.hooks?.logMethod as ((this: unknown, a: unknown[], m: (...a: unknown[]) => void, l: number) => void) | undefined;
        if (own) own.call(this, redactArgs(args), method, level);
        else method.apply(this, redactArgs(args));
      },
    },
  };
}
