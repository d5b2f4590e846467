/**
 * Redaction of text that leaves the process: error messages sent to clients, log lines,
 * configuration errors. It exists because messages are built from whatever a lower layer
 * said — Node's `ENOENT: … open '/srv/…/.operon/tmp/…'`, a request URL carrying a presigned
 * signature — and the server's file layout and credentials must never travel with them.
 * Pure string functions: no I/O, usable from core/, the api-server, the executors and the CLI.
 */

/** What a redacted credential is replaced with. */
export const REDACTED = "[REDACTED]";
/** What an absolute filesystem path is replaced with. */
export const PATH_PLACEHOLDER = "<path>";

/**
 * Whether an environment variable (or any named setting) holds a secret whose value must
 * never be echoed: its name contains SECRET, PASSWORD, TOKEN, KEY or CREDENTIAL
 * (OPERON_SIGNING_SECRET, AWS_SECRET_ACCESS_KEY, AWS_ACCESS_KEY_ID, OPERON_LLM_API_KEY, …).
 */
export function isSecretName(name: string): boolean {
  return /SECRET|PASSWORD|PASSWD|TOKEN|KEY|CREDENTIAL/i.test(name);
}

/**
 * Whether a URL query parameter carries a credential: embedded presigned URLs' `signature`,
 * S3's `X-Amz-Signature` / `X-Amz-Credential` / `X-Amz-Security-Token`, and the usual
 * `token`, `secret`, `password`, `api_key` forms. (`key`, an object key, is not one.)
 */
export function isSecretQueryParam(name: string): boolean {
  return /signature|credential|token|secret|password|passwd|api[-_]?key|^sig$/i.test(name);
}

const decodeName = (s: string) => {
  try { return decodeURIComponent(s.replace(/\+/g, " ")); } catch { return s; }
};

/** Query-string parameters (`?name=value` / `&name=value`) anywhere in a text. */
const QUERY_PARAM = /([?&;])([^=&#\s?;'"<>]+)=([^&#\s'"<>;]*)/g;
/** Embedded-mode API keys (docs/security.md#api-keys), wherever they appear. */
const API_KEY = /\bsk_live_[A-Za-z0-9]+/g;
/** `Authorization: Bearer …` / `Basic …` values. */
const AUTH_SCHEME = /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/gi;
/** Viewer-link tokens (`/view/<payload>.<signature>`): each one is a capability. */
const VIEW_TOKEN = /\/view\/[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])/g;
/** Credentials in a URL's user-info part (`https://user:pass@host`). */
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/@'"<>]+@/gi;

/**
 * A text with every credential replaced by `[REDACTED]`: secret query parameters of any URL
 * in it, `sk_live_…` keys, `Bearer …` values and URL user-info. Everything else is kept.
 */
export function redactSecrets(text: string): string {
  return text
    .replace(QUERY_PARAM, (m, sep: string, name: string) => (isSecretQueryParam(decodeName(name)) ? `${sep}${name}=${REDACTED}` : m))
    .replace(API_KEY, `sk_live_${REDACTED}`)
    .replace(AUTH_SCHEME, (_m, scheme: string) => `${scheme} ${REDACTED}`)
    .replace(URL_USERINFO, (_m, scheme: string) => `${scheme}${REDACTED}@`)
    .replace(VIEW_TOKEN, `/view/${REDACTED}`);
}

/** A request URL (path and query) for a log line: the path kept (less a viewer-link token), secret query values redacted. */
export function redactUrl(url: string): string {
  const q = url.indexOf("?");
  const path = (q < 0 ? url : url.slice(0, q)).replace(VIEW_TOKEN, `/view/${REDACTED}`);
  return q < 0 ? path : path + redactSecrets(url.slice(q));
}

/**
 * The API's own routes are URL paths, not server paths: messages such as "use POST
 * /v1/files/upload-url" keep them.
 */
const API_ROUTE = /^\/(?:v1(?:[/?#]|$)|(?:healthz|readyz|metrics)(?:[?#]|$))/;

/** An absolute path's start: `/x`, `~/`, `C:\` or `C:/`, `\\server`. */
const ABS_START = String.raw`(?:\/(?=[^\s/'"\x60])|~\/|[A-Za-z]:[\\/]|\\\\(?=[^\s\\]))`;
/** `file:` URLs. */
const FILE_URL = /\bfile:\/\/[^\s'"`<>)\]]*/gi;
/** A quoted string whose content is an absolute path (Node's `open '/…'`, `rename '/…' -> '/…'`). */
const QUOTED_PATH = new RegExp(String.raw`(['"\x60])(${ABS_START}[^'"\x60\n]*)\1`, "g");
/** An unquoted absolute path after a boundary (start, white space, an opening bracket, `=`, `,`, `;`). */
const BARE_PATH = new RegExp(String.raw`(^|[\s(\[{=,;])(${ABS_START}[^\s'"\x60)\]}<>,;]*)`, "g");

/**
 * A message with every absolute filesystem path (POSIX, `~/`, Windows, UNC, `file://`)
 * replaced by `<path>`: `ENOENT: no such file or directory, open '/srv/.operon/tmp/x'` →
 * `ENOENT: no such file or directory, open '<path>'`. Relative names (`reads/s1.fastq`,
 * `multipart/form-data`) and the API's own routes (`/v1/…`, `/healthz`) are kept.
 */
export function scrubPaths(message: string): string {
  return message
    .replace(FILE_URL, PATH_PLACEHOLDER)
    .replace(QUOTED_PATH, (m, q: string, p: string) => (API_ROUTE.test(p) ? m : `${q}${PATH_PLACEHOLDER}${q}`))
    .replace(BARE_PATH, (m, before: string, p: string) => {
      if (API_ROUTE.test(p)) return m;
      // A sentence's closing punctuation is not part of the path.
      const trail = /[.:!?]+$/.exec(p)?.[0] ?? "";
      return `${before}${PATH_PLACEHOLDER}${trail}`;
    });
}

/** A message safe for a client or a log line: paths scrubbed, credentials redacted. */
export function sanitizeMessage(message: string): string {
  return redactSecrets(scrubPaths(message));
}
