/**
 * Embedded mode's presigned URLs, served by the api-server: PUT streams the body into the
 * local store, GET streams it back (with Range), and PUT to the part path stores one part of
 * a multipart upload. The URL's HMAC signature, method, expiry and content type are checked
 * before any byte is read or written (403 otherwise). What GET sends carries
 * userContentHeaders: a user's file never runs as a page on Operon's origin.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Transform, pipeline } from "node:stream";
import { isSystemKey, presignedPutClaimKey } from "../../core/layout.js";
import { StoreError, type ByteStream } from "../../core/ports.js";
import { PRESIGNED_PART_PATH, PRESIGNED_PATH, verifyPresigned, verifyPresignedPart } from "../../adapters/local/presign.js";
import { OperonError } from "../../core/errors.js";
import { sendObject } from "../byte-range.js";
import { MAX_PRESIGNED_PUT_BYTES } from "./files.js";

/** A body whose length is not the size the URL was issued for. */
const wrongLength = (size: number, got: number) =>
  new OperonError("invalid_request", `this upload URL takes exactly ${size} bytes (the size given to upload-url); the body has ${got > size ? "more" : got}`, { field: "size" });

/** A part body whose length is not the part's. */
const wrongPartLength = (size: number, got: number) =>
  new OperonError("invalid_request", `this part URL takes exactly ${size} bytes (the part's size); the body has ${got > size ? "more" : got}`, { field: "size" });

/** `body` counted on its way: fails with `wrong(size, received)` at the first byte too many, or at its end when short. */
function exactly(body: NodeJS.ReadableStream, size: number, wrong: (size: number, got: number) => OperonError): Transform {
  let received = 0;
  const counted = new Transform({
    transform(chunk: Buffer, _enc, done) {
      received += chunk.length;
      done(received > size ? wrong(size, received) : null, chunk);
    },
    flush(done) { done(received !== size ? wrong(size, received) : null); },
  });
  // pipeline, not pipe: a client that goes away mid-body fails the upload (premature close).
  pipeline(body, counted, () => undefined);
  return counted;
}

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
    const body: ByteStream = r.size !== undefined ? exactly(req.raw, r.size, wrongLength) : req.raw;
    try {
      const info = await store.put(r.key, body, { maxBytes: r.size ?? MAX_PRESIGNED_PUT_BYTES, ...(ctype ? { contentType: ctype } : {}) });
      app.operon.metrics.uploadedBytes.inc({ via: "presigned" }, info.size);
      void reply.header("etag", `"${info.etag ?? ""}"`);
      return reply.status(200).send();
    } catch (e) {
      await store.delete(claim).catch(() => undefined);
      if (e instanceof StoreError && e.code === "TooLarge") throw r.size !== undefined ? wrongLength(r.size, r.size + 1) : new OperonError("payload_too_large", `a presigned PUT takes at most ${MAX_PRESIGNED_PUT_BYTES} bytes`);
      throw e;
    }
  });

  app.put(PRESIGNED_PART_PATH, { config: { scope: "public" }, schema: { hide: true } }, async (req, reply) => putPart(app, req, reply));

  app.get(PRESIGNED_PATH, { config: { scope: "public" }, schema: { hide: true } }, async (req, reply) => {
    const r = check("GET", req.query);
    // The stored type is the uploader's word: it is served, but never as something that runs here.
    return sendObject(reply, store, r.key, req.headers.range, { userContent: true });
  });
}

/**
 * A part of a multipart upload (the local store's part URLs, reusable until they expire: a
 * part may be sent again before complete). Checked before a byte is read: the signature and
 * expiry (403), a file key, the Content-MD5's form and the declared length; the store then
 * checks the bytes against the Content-MD5. Answers the part's ETag, its MD5 hex, quoted.
 */
async function putPart(app: FastifyInstance, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const { store, config, clock } = app.operon.deps;
  const r = verifyPresignedPart(config.signingSecret, req.method, (req.query ?? {}) as Record<string, unknown>, clock.now());
  if (!r.ok) throw new OperonError("forbidden", r.reason);
  if (isSystemKey(r.key)) throw new OperonError("forbidden", "not a file key");
  const putPartOf = store.multipart?.putPart?.bind(store.multipart);
  if (!putPartOf) throw new OperonError("not_found", "this store takes no parts here");
  const md5Header = req.headers["content-md5"];
  let md5: string | undefined;
  if (md5Header !== undefined) {
    md5 = Array.isArray(md5Header) ? md5Header.join(",") : md5Header.trim();
    const digest = Buffer.from(md5, "base64");
    if (digest.length !== 16 || digest.toString("base64") !== md5) throw new OperonError("invalid_request", "Content-MD5: not the base64 of a 16-byte MD5 digest", { field: "Content-MD5" });
  }
  const declared = req.headers["content-length"] === undefined ? undefined : Number(req.headers["content-length"]);
  if (declared !== undefined && declared !== r.size) throw wrongPartLength(r.size, declared);
  const body = exactly(req.raw, r.size, wrongPartLength);
  try {
    const part = await putPartOf(r.key, r.uploadId, r.partNumber, body, { size: r.size, ...(md5 !== undefined ? { md5 } : {}) });
    app.operon.metrics.uploadedBytes.inc({ via: "parts" }, part.size);
    void reply.header("etag", `"${part.etag}"`);
    return reply.status(200).send();
  } catch (e) {
    // The body is piped, so Node does not discard what is left of it: without this, the
    // client's upload stalls and it never reads the answer.
    body.resume();
    throw partError(e);
  }
}

/** What the store says of a part, as the client hears it. */
function partError(e: unknown): unknown {
  if (!(e instanceof StoreError)) return e;
  const as = (code: "invalid_request" | "not_found", message: string, field?: string) => new OperonError(code, message, field ? { field } : undefined, { cause: e });
  switch (e.code) {
    case "BadDigest": return as("invalid_request", "Content-MD5: does not match the part's bytes (BadDigest); nothing was stored", "Content-MD5");
    case "NotFound": return as("not_found", "no such upload (completed or aborted)");
    case "TooLarge": return as("invalid_request", e.message, "size");
    case "PreconditionFailed": return as("invalid_request", e.message, "part_number");
    default: return e;
  }
}
