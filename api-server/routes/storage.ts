/**
 * Embedded mode's presigned URLs, served by the api-server: PUT streams the body into the
 * local store, GET streams it back (with Range). The URL's HMAC signature, method, expiry
 * and content type are checked before any byte is read or written (403 otherwise). What GET
 * sends carries userContentHeaders: a user's file never runs as a page on Operon's origin.
 */
import type { FastifyInstance } from "fastify";
import { Transform, pipeline } from "node:stream";
import { isSystemKey, presignedPutClaimKey } from "../../core/layout.js";
import { StoreError, type ByteStream } from "../../core/ports.js";
import { PRESIGNED_PATH, verifyPresigned } from "../../adapters/local/presign.js";
import { OperonError } from "../../core/errors.js";
import { sendObject } from "../byte-range.js";
import { MAX_PRESIGNED_PUT_BYTES } from "./files.js";

/** A body whose length is not the size the URL was issued for. */
const wrongLength = (size: number, got: number) =>
  new OperonError("invalid_request", `this upload URL takes exactly ${size} bytes (the size given to upload-url); the body has ${got > size ? "more" : got}`, { field: "size" });

export async function storageRoutes(app: FastifyInstance): Promise<void> {
  const { store, config, clock } = app.operon.deps;
  const check = (method: "GET" | "PUT", query: unknown) => {
    const r = verifyPresigned(config.signingSecret, method, (query ?? {}) as Record<string, unknown>, clock.now());
    if (!r.ok) throw new OperonError("forbidden", r.reason);
    if (isSystemKey(r.key)) throw new OperonError("forbidden", "not a file key");
    return r;
  };

  // Bodies are streamed as they arrive, whatever their content type.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", (_req, payload, done) => done(null, payload));

  // A presigned PUT is single-use and exact: the first request claims the URL (by its
  // signature) before reading the body, a body of another length than the URL's declared size
  // stores nothing, and a failed upload gives the claim back so the client may try again.
  app.put(PRESIGNED_PATH, { config: { scope: "public" }, schema: { hide: true } }, async (req, reply) => {
    const r = check("PUT", req.query);
    const ctype = req.headers["content-type"];
    if (r.contentType && ctype !== r.contentType) throw new OperonError("forbidden", `this URL is signed for Content-Type ${r.contentType}`);
    const declared = req.headers["content-length"] === undefined ? undefined : Number(req.headers["content-length"]);
    if (r.size !== undefined && declared !== undefined && declared !== r.size) throw wrongLength(r.size, declared);
    const claim = presignedPutClaimKey(r.signature);
    try {
      await store.put(claim, "", { ifNoneMatch: "*" });
    } catch (e) {
      if (e instanceof StoreError && e.code === "PreconditionFailed") throw new OperonError("conflict", "this upload URL has already been used: ask POST /v1/files/upload-url for a new one");
      throw e;
    }
    let received = 0;
    let body: ByteStream = req.raw;
    if (r.size !== undefined) {
      const size = r.size;
      const counted = new Transform({
        transform(chunk: Buffer, _enc, done) {
          received += chunk.length;
          done(received > size ? wrongLength(size, received) : null, chunk);
        },
        flush(done) { done(received !== size ? wrongLength(size, received) : null); },
      });
      // pipeline, not pipe: a client that goes away mid-body fails the upload (premature close).
      pipeline(req.raw, counted, () => undefined);
      body = counted;
    }
    try {
      const info = await store.put(r.key, body, { maxBytes: r.size ?? MAX_PRESIGNED_PUT_BYTES, ...(ctype ? { contentType: ctype } : {}) });
      app.operon.metrics.uploadedBytes.inc({ via: "presigned" }, info.size);
      void reply.header("etag", `"${info.etag ?? ""}"`);
      return reply.status(200).send();
    } catch (e) {
      await store.delete(claim).catch(() => undefined);
      if (e instanceof StoreError && e.code === "TooLarge") throw r.size !== undefined ? wrongLength(r.size, received) : new OperonError("payload_too_large", `a presigned PUT takes at most ${MAX_PRESIGNED_PUT_BYTES} bytes`);
      throw e;
    }
  });

  app.get(PRESIGNED_PATH, { config: { scope: "public" }, schema: { hide: true } }, async (req, reply) => {
    const r = check("GET", req.query);
    // The stored type is the uploader's word: it is served, but never as something that runs here.
    return sendObject(reply, store, r.key, req.headers.range, { userContent: true });
  });
}
