/**
 * The trust boundary for names. Every user-supplied value that becomes a storage key, a file
 * path or an argv element passes one of these checks, and the object stores refuse any key
 * that escaped them anyway (`checkStoreKey`):
 * - `normalizeWorkspacePath`: a file key, a `file` input, a file parameter, a spec file.
 *   Absolute paths, `..`, empty segments, backslashes, NUL and control characters,
 *   percent-encoded separators, Unicode look-alikes of `/`, `\` and `.` (checked on the NFKC
 *   form too), segments over 250 bytes and `_system/` are refused.
 * - `checkOutputName`: a step's output name: a relative path inside the run folder, never a
 *   name the run folder reserves (`run.json`, `logs/`), no segment starting with `-` or `.`.
 * - `checkArgument`: an element of a step's `args`: nothing that can name a file outside the
 *   step's own working directory or a URL (no `/`, `\`, `..`, `@file`, `~`).
 * - `parseReferenceUri`: a file on a read-only reference volume, `ref://<volume>/<path>` (any
 *   file parameter, a file input's value): the path by the workspace path's rules; the executors
 *   refuse one whose real path (symlinks followed) leaves the volume anyway.
 */
import { LOGS_FOLDER, MANIFEST_NAME } from "./layout.js";

export type PathResult = { ok: true; path: string } | { ok: false; reason: string };

/**
 * A path segment's limit in UTF-8 bytes: Linux's NAME_MAX (255) less the 5 bytes the local
 * store's sidecar (`<name>.json`) adds, so every accepted name can be stored as it is.
 */
export const MAX_SEGMENT_BYTES = 250;
/** A workspace path's limit in characters. */
export const MAX_PATH_CHARS = 1024;
/** Names the run folder keeps for itself: the manifest and the step logs' folder. */
export const RESERVED_RUN_NAMES: readonly string[] = [MANIFEST_NAME, LOGS_FOLDER];

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]/;

/** Printable ASCII: no control character, and its own NFKC form (the common case, checked fast). */
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

/** Why a string is unfit to be any part of a path, whatever its position; undefined when fit. */
function hostileCharacters(input: string): string | undefined {
  if (PRINTABLE_ASCII.test(input)) return input.includes("\\") ? "contains a backslash" : undefined;
  if (CONTROL.test(input)) return "contains a control or invisible formatting character";
  if (input.includes("\\")) return "contains a backslash";
  // Look-alikes (fullwidth solidus, one-dot leader, …) that a later NFKC step would turn
  // into separators or dots: refused, so no other system can read a different path.
  const folded = input.normalize("NFKC");
  if (folded !== input && (folded.includes("\\") || folded.split("/").length !== input.split("/").length
    || folded.split("/").some((s) => s === "." || s === "..") || CONTROL.test(folded))) {
    return "contains a Unicode look-alike of a separator or dot";
  }
  return undefined;
}

/** Whether a segment is longer than MAX_SEGMENT_BYTES in UTF-8 (a short one cannot be: ≤ 3 bytes a UTF-16 unit). */
const overSegmentLimit = (s: string): boolean => {
  if (s.length * 3 <= MAX_SEGMENT_BYTES) return false;
  let n = 0;
  for (const ch of s) { const c = ch.codePointAt(0) as number; n += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }
  return n > MAX_SEGMENT_BYTES;
};

/**
 * Normalizes a workspace-relative path (`./a/b` → `a/b`); refuses anything unsafe. A path
 * under `orgs/` is refused too: `orgs/…` always means a full storage key, which the fields
 * that take one accept only for the caller's own workspace (services/access.ts `fileKey`, which
 * strips it first), so no folder inside a workspace can be named like one and one string
 * never names two files (docs/security.md#one-meaning-of-a-workspace-path).
 */
export function normalizeWorkspacePath(input: string): PathResult {
  const n = normalizeRelativePath(input);
  if (n.ok && n.path.split("/", 1)[0] === "_system") return { ok: false, reason: "_system/ is reserved" };
  if (n.ok && n.path.startsWith("orgs/")) return { ok: false, reason: "orgs/ names full storage keys: give the path inside the workspace, or this workspace's own full key where a file is named" };
  return n;
}

/** The rules of `normalizeWorkspacePath` without the workspace's own reservation (`_system/`). */
function normalizeRelativePath(input: string): PathResult {
  if (typeof input !== "string" || input.length === 0) return { ok: false, reason: "path is empty" };
  if (input.length > MAX_PATH_CHARS) return { ok: false, reason: `path is longer than ${MAX_PATH_CHARS} characters` };
  const hostile = hostileCharacters(input);
  if (hostile) return { ok: false, reason: `path ${hostile}` };
  if (input.startsWith("/")) return { ok: false, reason: "path must be relative to the workspace" };
  const segs = input.split("/");
  const out: string[] = [];
  for (const [i, s] of segs.entries()) {
    if (s === "." && i === 0) continue;
    if (s === "") return { ok: false, reason: "path has an empty segment" };
    if (s === "." || s === "..") return { ok: false, reason: `path may not contain "${s}" segments` };
    if (overSegmentLimit(s)) return { ok: false, reason: `path has a segment longer than ${MAX_SEGMENT_BYTES} bytes` };
    // Percent-encoded separators and dot segments are refused too, so that no later
    // decoding (by a proxy, a shell, another tool) can turn them into a way out.
    if (/%(2e|2f|5c|00)/i.test(s)) {
      let decoded = s;
      try { decoded = decodeURIComponent(s); } catch { /* not valid percent-encoding: literal */ }
      if (decoded === "." || decoded === ".." || /[/\\\0]/.test(decoded)) return { ok: false, reason: "path may not contain percent-encoded separators or dot segments" };
    }
    out.push(s);
  }
  if (out.length === 0) return { ok: false, reason: "path is empty" };
  return { ok: true, path: out.join("/") };
}

/** How a step names a file on a read-only reference volume: `ref://<volume>/<path>`. */
export const REFERENCE_SCHEME = "ref://";
/** A reference volume's name: a DNS label, as the pod volume `ref-<name>` and the mount `/ref/<name>` need. */
export const REFERENCE_VOLUME_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

export type ReferenceResult =
  | { ok: true; /** The normalized URI. */ uri: string; volume: string; /** Relative to the volume's root. */ path: string }
  | { ok: false; reason: string };

/** Whether a value is written as a reference (`ref://…`); `parseReferenceUri` says whether it is a valid one. */
export const isReferenceUri = (v: unknown): boolean => typeof v === "string" && v.startsWith(REFERENCE_SCHEME);

/**
 * A reference URI, `ref://<volume>/<path>` (a file, or for ANNOVAR a database directory, on a
 * read-only reference volume): the volume a DNS label, the path normalized by the same rules
 * as a workspace path (relative, no `.`/`..` or empty segments, no control characters or
 * look-alikes, length limits), so that `/ref/<volume>/<path>` never leaves the volume's mount.
 * A workspace path can never be mistaken for one: `ref:` followed by an empty segment is refused there.
 */
export function parseReferenceUri(input: string): ReferenceResult {
  if (!isReferenceUri(input)) return { ok: false, reason: `a reference is written ${REFERENCE_SCHEME}<volume>/<path>` };
  const rest = input.slice(REFERENCE_SCHEME.length);
  const cut = rest.indexOf("/");
  const volume = cut < 0 ? rest : rest.slice(0, cut);
  if (!REFERENCE_VOLUME_NAME.test(volume)) {
    return { ok: false, reason: `reference volume ${JSON.stringify(volume.slice(0, 80))} is not a valid volume name (a DNS label: lowercase letters, digits and "-", at most 63)` };
  }
  if (cut < 0 || cut === rest.length - 1) return { ok: false, reason: `${REFERENCE_SCHEME}${volume} names no file: write ${REFERENCE_SCHEME}${volume}/<path>` };
  const tail = rest.slice(cut + 1);
  if (tail.startsWith("/")) return { ok: false, reason: `reference path must be relative to its volume (ref://${volume}/<path>, without another "/")` };
  const n = normalizeRelativePath(tail);
  if (!n.ok) return { ok: false, reason: `reference ${n.reason}` };
  return { ok: true, uri: `${REFERENCE_SCHEME}${volume}/${n.path}`, volume, path: n.path };
}

/**
 * A file input's or file parameter's value: a workspace path (`normalizeWorkspacePath`) or a
 * reference URI (`parseReferenceUri`), normalized; for a reference `path` is the whole URI.
 */
export function normalizeFileValue(input: string): PathResult {
  if (!isReferenceUri(input)) return normalizeWorkspacePath(input);
  const r = parseReferenceUri(input);
  return r.ok ? { ok: true, path: r.uri } : r;
}

/**
 * A step's output name (the user's `outputFile`, or a name a command derives): a normalized
 * relative path inside the run folder (sub-folders are created for it), no segment starting
 * with `-` (an option) or `.` (hidden), and never one of the run folder's reserved names
 * (`run.json`, `logs/`) at its top.
 */
export function checkOutputName(input: string): PathResult {
  const n = normalizeWorkspacePath(input);
  if (!n.ok) return { ok: false, reason: n.reason.replace(/^path/, "name") };
  if (n.path !== input) return { ok: false, reason: "name is not normalized (write it without \"./\")" };
  const segs = input.split("/");
  if (segs.some((s) => s.startsWith("-"))) return { ok: false, reason: "must not start with \"-\" (in any segment)" };
  if (segs.some((s) => s.startsWith("."))) return { ok: false, reason: "must not start with \".\" (in any segment)" };
  if (RESERVED_RUN_NAMES.includes(segs[0] as string)) return { ok: false, reason: `${JSON.stringify(segs[0])} is reserved by the run folder` };
  return { ok: true, path: input };
}

/**
 * One element of a step's `args` (docs/pipelines.md#step-parameters: extra arguments, each its own argv element).
 * Options are free, but nothing may name a file outside the step's working directory or a
 * URL: no `/` at all (so no absolute path, no sub-path, no `scheme://`), no `\`, no `..`,
 * no `~` (home), no `@` in front (response files, bcftools `@file` lists), no control
 * characters. A relative name such as `-U unpaired.sam` stays inside the step's own working
 * directory, which the sandbox (embedded) or the pod (cluster) confines.
 */
export function checkArgument(input: string): string | undefined {
  if (typeof input !== "string") return "must be a string";
  if (input.length > 4096) return "is longer than 4096 characters";
  const hostile = hostileCharacters(input);
  if (hostile) return hostile;
  if (input.includes("/")) return "must not contain \"/\": arguments may not name paths or URLs (pass files as file parameters)";
  if (/(^|[=:,])\.\.($|[=:,])/.test(input) || input === ".") return "must not name \"..\" or \".\"";
  if (/(^|[=:,])~/.test(input)) return "must not name a home directory (\"~\")";
  if (/(^|[=:,])@/.test(input)) return "must not name a response file (\"@…\")";
  return undefined;
}

/**
 * The layer below: an object store refuses any key that is not already normalized (no empty,
 * `.` or `..` segment, nothing absolute, no backslash or control character, no over-long
 * segment), whatever route or step produced it.
 */
export function checkStoreKey(key: string): string | undefined {
  if (typeof key !== "string" || key.length === 0) return "empty key";
  if (key.startsWith("/")) return "absolute key";
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\\]/.test(key)) return "key holds a control character or backslash";
  const segs = key.split("/");
  for (const [i, s] of segs.entries()) {
    if (s === "" && i === segs.length - 1) continue; // a prefix ending in "/"
    if (s === "" || s === "." || s === "..") return "key has an empty, \".\" or \"..\" segment";
    if (overSegmentLimit(s)) return `key has a segment longer than ${MAX_SEGMENT_BYTES} bytes`;
  }
  return undefined;
}
