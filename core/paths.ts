/**
 * Workspace paths. Every user-supplied path (a file key, a `file` input, a spec file) is
 * normalized here, and anything that could escape its workspace is refused: absolute
 * paths, `..`, empty segments, backslashes, NUL and control characters, and `_system/`.
 */

export type PathResult = { ok: true; path: string } | { ok: false; reason: string };

/** Normalizes a workspace-relative path (`./a/b` → `a/b`); refuses anything unsafe. */
export function normalizeWorkspacePath(input: string): PathResult {
  if (typeof input !== "string" || input.length === 0) return { ok: false, reason: "path is empty" };
  if (input.length > 1024) return { ok: false, reason: "path is longer than 1024 characters" };
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f]/.test(input)) return { ok: false, reason: "path contains a control character" };
  if (input.includes("\\")) return { ok: false, reason: "path contains a backslash" };
  if (input.startsWith("/")) return { ok: false, reason: "path must be relative to the workspace" };
  const segs = input.split("/");
  const out: string[] = [];
  for (const [i, s] of segs.entries()) {
    if (s === "." && i === 0) continue;
    if (s === "" ) return { ok: false, reason: "path has an empty segment" };
    if (s === "." || s === "..") return { ok: false, reason: `path may not contain "${s}" segments` };
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
  if (out[0] === "_system") return { ok: false, reason: "_system/ is reserved" };
  return { ok: true, path: out.join("/") };
}
