/**
 * Serving an object's bytes over HTTP with single `Range` requests, suffix ranges included
 * (206, `Accept-Ranges`, `Content-Range`; 416 for a range outside the object): one definition for embedded mode's
 * presigned GETs and the viewer links. Bodies are sent as stored — never with a
 * `Content-Encoding`, so a `.gz` or a ranged BGZF block reaches the client byte for byte.
 */
import type { FastifyReply } from "fastify";
import { StoreError, type ObjectStore } from "../core/ports.js";
import { OperonError } from "../core/errors.js";

/** One range: `bytes=START-[END]`, or a suffix `bytes=-N` (the last N bytes, RFC 9110 §14.1.2). */
export type RangeRequest = { start: number; end?: number } | { suffix: number };

export function parseRange(header: string | undefined): RangeRequest | undefined | "invalid" {
  if (!header) return undefined;
  const suffix = /^bytes=-(\d+)$/.exec(header.trim());
  if (suffix) return { suffix: Number(suffix[1]) };
  const m = /^bytes=(\d+)-(\d*)$/.exec(header.trim());
  if (!m) return "invalid";
  const start = Number(m[1]);
  const end = m[2] ? Number(m[2]) : undefined;
  if (end !== undefined && end < start) return "invalid";
  return end === undefined ? { start } : { start, end };
}

/** A suffix range as start and end, once the object's size is known; undefined when none of it can be served. */
function suffixRange(suffix: number, size: number): { start: number; end: number } | undefined {
  if (suffix === 0 || size === 0) return undefined;
  return { start: Math.max(0, size - suffix), end: size - 1 };
}

/**
 * Types a browser may show in place from a presigned download: passive images, plain text and
 * PDF. Anything else (HTML, SVG, XML, JavaScript, an unknown type) is sent as an attachment.
 */
const SHOWN_IN_PLACE = new Set(["image/png", "image/jpeg", "image/gif", "image/webp", "text/plain", "application/pdf"]);

/**
 * The headers every answer that carries a user's stored bytes gets, so that nothing a user
 * uploaded runs on Operon's origin (docs/security.md#user-content): no type sniffing, a
 * sandboxing CSP (no script, no same-origin access, even for HTML or SVG), and
 * `Content-Disposition: attachment` unless the type is a passive one a browser may show.
 * The file name is the key's last segment, ASCII-only in `filename` and exact in `filename*`.
 */
function userContentHeaders(key: string, contentType: string | undefined): Record<string, string> {
  const name = key.slice(key.lastIndexOf("/") + 1);
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, "_");
  const type = (contentType ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
  const disposition = SHOWN_IN_PLACE.has(type) ? "inline" : "attachment";
  return {
    "x-content-type-options": "nosniff",
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox",
    "content-disposition": `${disposition}; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`,
  };
}

/**
 * Sends `key` (or the requested range of it); `headers` are added to a successful answer, and
 * with `userContent` the userContentHeaders of the type it is served as.
 */
export async function sendObject(reply: FastifyReply, store: ObjectStore, key: string, rangeHeader: string | undefined, opts: { contentType?: string; headers?: Record<string, string>; userContent?: boolean } = {}): Promise<FastifyReply> {
  const range = parseRange(rangeHeader);
  if (range === "invalid") throw new OperonError("range_not_satisfiable", "Range must be bytes=START-[END] or bytes=-LENGTH");
  try {
    let wanted: { start: number; end?: number } | undefined;
    if (range && "suffix" in range) {
      const info = await store.head(key);
      if (!info) throw new OperonError("not_found", "object not found");
      wanted = suffixRange(range.suffix, info.size);
      if (!wanted) throw new OperonError("range_not_satisfiable", `bytes=-${range.suffix} selects nothing of a ${info.size}-byte object`);
    } else wanted = range;
    const got = await store.get(key, wanted);
    const type = opts.contentType ?? got.info.contentType ?? "application/octet-stream";
    void reply.header("accept-ranges", "bytes").type(type);
    for (const [k, v] of Object.entries({ ...opts.headers, ...(opts.userContent ? userContentHeaders(key, type) : {}) })) void reply.header(k, v);
    if (got.info.sha256) void reply.header("etag", `"${got.info.sha256}"`);
    if (got.range) {
      void reply.status(206).header("content-range", `bytes ${got.range.start}-${got.range.end}/${got.range.total}`).header("content-length", got.range.end - got.range.start + 1);
    } else void reply.header("content-length", got.info.size);
    return reply.send(got.body);
  } catch (e) {
    if (e instanceof StoreError && e.code === "NotFound") throw new OperonError("not_found", "object not found");
    if (e instanceof StoreError && e.code === "RangeNotSatisfiable") throw new OperonError("range_not_satisfiable", e.message);
    throw e;
  }
}
