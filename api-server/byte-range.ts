/**
 * Serving an object's bytes over HTTP with single `Range` requests (206, `Accept-Ranges`,
 * `Content-Range`; 416 for a range outside the object): one definition for embedded mode's
 * presigned GETs and the viewer links. Bodies are sent as stored — never with a
 * `Content-Encoding`, so a `.gz` or a ranged BGZF block reaches the client byte for byte.
 */
import type { FastifyReply } from "fastify";
import { StoreError, type ObjectStore } from "../core/ports.js";
import { ApiError } from "./errors.js";

export function parseRange(header: string | undefined): { start: number; end?: number } | undefined | "invalid" {
  if (!header) return undefined;
  const m = /^bytes=(\d+)-(\d*)$/.exec(header.trim());
  if (!m) return "invalid";
  const start = Number(m[1]);
  const end = m[2] ? Number(m[2]) : undefined;
  if (end !== undefined && end < start) return "invalid";
  return end === undefined ? { start } : { start, end };
}

/** Sends `key` (or the requested range of it); `headers` are added to a successful answer. */
export async function sendObject(reply: FastifyReply, store: ObjectStore, key: string, rangeHeader: string | undefined, opts: { contentType?: string; headers?: Record<string, string> } = {}): Promise<FastifyReply> {
  const range = parseRange(rangeHeader);
  if (range === "invalid") throw new ApiError("range_not_satisfiable", "Range must be bytes=START-[END]");
  try {
    const got = await store.get(key, range);
    void reply.header("accept-ranges", "bytes").type(opts.contentType ?? got.info.contentType ?? "application/octet-stream");
    for (const [k, v] of Object.entries(opts.headers ?? {})) void reply.header(k, v);
    if (got.info.sha256) void reply.header("etag", `"${got.info.sha256}"`);
    if (got.range) {
      void reply.status(206).header("content-range", `bytes ${got.range.start}-${got.range.end}/${got.range.total}`).header("content-length", got.range.end - got.range.start + 1);
    } else void reply.header("content-length", got.info.size);
    return reply.send(got.body);
  } catch (e) {
    if (e instanceof StoreError && e.code === "NotFound") throw new ApiError("not_found", "object not found");
    if (e instanceof StoreError && e.code === "RangeNotSatisfiable") throw new ApiError("range_not_satisfiable", e.message);
    throw e;
  }
}
