/**
 * The files API (spec: Files): list, multipart upload streamed to storage (never held in
 * memory), presigned download, delete, and the three-step large-file flow (upload-url →
 * PUT → upload-confirm). Every key is resolved inside the caller's workspace or refused.
 */
import multipart from "@fastify/multipart";
import fastJson from "fast-json-stringify";
import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { StoreError } from "../../core/ports.js";
import { MAX_PRESIGNED_PUT_BYTES, confirmUpload, createUploadUrl, deleteFile, downloadLink, listFiles, listingRange, uploadFile, uploadSweeper, type FileView } from "../../services/files.js";
import { PART_URLS_PER_ANSWER, abortMultipartUpload, confirmMultipartUpload, createMultipartUpload, receivedParts, sweepMultipartUploads, uploadPartUrls } from "../../services/uploads.js";
import { Checksums } from "../../services/checksums.js";
import { OperonError, badRequest, messageOf } from "../../core/errors.js";
import { dataOf, errorResponses, jsonResponse, listOf, untypedReply } from "../openapi.js";
import { workspaceRoot } from "../../core/layout.js";
import { listEnvelope, requireAuth, workspaceId } from "./common.js";

export { DOWNLOAD_URL_SECONDS, UPLOAD_URL_SECONDS, MAX_PRESIGNED_PUT_BYTES } from "../../services/files.js";

/** A file as the API shows it (fileView below). */
const FileSchema = z.object({
  name: z.string().describe("The file name (last segment of key)."),
  key: z.string().describe("Workspace-relative key: names the file in download, delete and as a file input of tools and pipelines."),
  size: z.number().int().describe("Size in bytes."),
  content_type: z.string().nullable(),
  last_modified: z.string().describe("ISO 8601 time."),
  sha256: z.string().nullable().describe("Hex SHA-256 of the content; null until known (a presigned upload not yet confirmed)."),
  description: z.string().optional(),
}).meta({ id: "File" });

/** One part's presigned URL in a multipart upload. */
const PartUrlSchema = z.object({ partNumber: z.number().int(), uploadUrl: z.string().describe("Presigned PUT URL of this part: send exactly the part's bytes, with Content-MD5.") });

/** The multipart/form-data body of POST /v1/files/upload: read as a stream, so documented, not validated by Fastify. */
const UploadFormSchema = z.object({
  workspace_id: workspaceId.optional().describe("Required, here (before the file part) or in the query."),
  path: z.string().max(1024).optional().describe("Folder in the workspace (e.g. `reads/`); the file keeps its own name."),
  description: z.string().max(4096).optional().describe("Stored with the file and shown in listings."),
  file: z.file().describe("The file, one part, sent after the fields; its filename must be a plain file name (no `/` or `\\`)."),
});

/** The file list is the hottest response: serialized by a compiled serializer, not JSON.stringify. */
const fileListJson = fastJson({
  type: "object",
  properties: {
    data: {
      type: "array",
      items: {
        type: "object",
        properties: {
          name: { type: "string" }, key: { type: "string" }, size: { type: "integer" },
          content_type: { type: ["string", "null"] }, last_modified: { type: "string" }, sha256: { type: ["string", "null"] },
          description: { type: "string" },
        },
        required: ["name", "key", "size", "content_type", "last_modified", "sha256"],
      },
    },
    has_more: { type: "boolean" },
    next_cursor: { type: ["string", "null"] },
  },
  required: ["data", "has_more", "next_cursor"],
} as Parameters<typeof fastJson>[0]);

export async function fileRoutes(app: FastifyInstance, opts: { maxUploadBytes: number }): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { store, clock } = app.operon.deps;
  const config = { scope: "files" as const };
  // What spent upload URLs leave behind is swept lazily, by upload-url requests (services/files.ts uploadSweeper).
  // SHA-256 of files confirmed without reading them (multipart uploads), computed in the background.
  const checksums = new Checksums(store, clock, (e: unknown, key: string) => { app.log.warn({ err: e, key }, "computing a file's SHA-256 failed; it stays pending"); });
  app.operon.checksums = checksums;
  const sweeper = uploadSweeper(store, clock, (e: unknown) => { app.log.warn({ err: e }, "sweeping spent upload URLs failed"); }, [
    async (now) => sweepMultipartUploads(store, now),
    async () => checksums.resume(),
  ]);
  app.addHook("onReady", async () => { void checksums.resume().catch((e: unknown) => { app.log.warn({ err: e }, "resuming pending checksums failed"); }); });
  app.addHook("onClose", async () => { await Promise.all([sweeper.settled(), checksums.close()]); });
  const tooLarge = () => new OperonError("payload_too_large", `uploads through this endpoint are limited to ${opts.maxUploadBytes} bytes; use POST /v1/files/upload-url for larger files`);

  await app.register(multipart, {
    limits: { fileSize: opts.maxUploadBytes + 1, files: 1, fields: 10, fieldSize: 64 * 1024, parts: 12 },
    throwFileSizeLimit: true,
    // The file name exactly as the client sent it (busboy would cut it to its basename), so
    // that `fileName` can refuse a path instead of silently storing something else.
    preservePath: true,
  });

  /**
   * Serialized list pages, for stores that report a version (the local store): reused while
   * the store's version is unchanged, and for at most a second (the local store's own
   * re-check interval for changes made behind its back).
   */
  const pages = new Map<string, { body: string; version: number; at: number }>();
  const PAGE_TTL_MS = 1000;

  r.get("/v1/files", {
    config,
    schema: {
      tags: ["files"], summary: "List files (metadata only)", operationId: "listFiles",
      description: "Files under `prefix` in key order, `limit` per page; pass next_cursor back as `cursor` for the next page.",
      querystring: z.object({
        workspace_id: workspaceId,
        prefix: z.string().max(1024).optional(),
        limit: z.coerce.number().int().min(1).max(1000).default(100),
        cursor: z.string().max(2048).optional(),
      }),
      // The handler sends JSON it serialized itself: the schema documents it.
      response: { 200: jsonResponse(untypedReply(listOf(FileSchema)), "A page of files."), ...errorResponses(400, 401, 403, 404, 429, 500, 503) },
    },
  }, async (req, reply) => {
    const ws = await app.operon.auth.workspace(requireAuth(req), req.query.workspace_id);
    const root = workspaceRoot(ws.organization, ws.id);
    const range = listingRange(ws, req.query);
    const { prefix, cursor } = range;
    const cacheKey = `${root}${prefix}\u0000${cursor ?? ""}\u0000${req.query.limit}`;
    const version = store.version?.();
    const now = app.operon.deps.clock.now();
    const hit = version === undefined ? undefined : pages.get(cacheKey);
    let json: string;
    if (hit && hit.version === version && now - hit.at < PAGE_TTL_MS) json = hit.body;
    else {
      const page = await listFiles(store, ws, range, req.query.limit);
      json = fileListJson(listEnvelope(page.items, page.hasMore, page.nextCursor));
      if (version !== undefined && version === store.version?.()) {
        pages.set(cacheKey, { body: json, version, at: now });
        if (pages.size > 1000) pages.delete(pages.keys().next().value as string);
      }
    }
    return reply.type("application/json; charset=utf-8").send(json);
  });

  r.post("/v1/files/upload", {
    config,
    schema: {
      tags: ["files"], summary: "Upload a file (multipart/form-data, at most 500 MB)", operationId: "uploadFile",
      description: "A multipart/form-data body: the fields `workspace_id`, `path` and `description` (each may be given in the query instead), then one `file` part, streamed to storage. Larger files use the presigned flow (POST /v1/files/upload-url).",
      querystring: z.object({ workspace_id: workspaceId.optional(), path: z.string().max(1024).optional(), description: z.string().max(4096).optional() }),
      documentedBody: { "multipart/form-data": UploadFormSchema },
      response: { 201: jsonResponse(dataOf(FileSchema), "The file, stored."), ...errorResponses(400, 401, 403, 404, 413, 415, 429, 500, 503) },
    },
  }, async (req, reply) => {
    if (!req.isMultipart()) throw new OperonError("unsupported_media_type", "use multipart/form-data with a `file` part");
    const auth = requireAuth(req);
    const fields: Record<string, string | undefined> = { ...req.query };
    let stored: FileView | undefined;
    // A client that goes away mid-upload fails the stream, so the store discards the partial object.
    let current: { destroy(e?: Error): void } | undefined;
    const onClose = () => { if (!req.raw.complete) current?.destroy(new Error("client disconnected")); };
    req.raw.once("close", onClose);
    try {
      for await (const part of req.parts()) {
        if (part.type === "field") {
          if (typeof part.value === "string" && ["workspace_id", "path", "description"].includes(part.fieldname)) fields[part.fieldname] = part.value;
          continue;
        }
        if (part.fieldname !== "file") throw badRequest(part.fieldname, "unexpected file part (send the file as `file`)");
        if (stored) throw badRequest("file", "one file per upload");
        if (!fields.workspace_id) throw badRequest("workspace_id", "is required (send it before the file part, or in the query)");
        const ws = await app.operon.auth.workspace(auth, fields.workspace_id);
        current = part.file;
        try {
          stored = await uploadFile(store, ws, { filename: part.filename, path: fields.path, description: fields.description, contentType: part.mimetype, maxBytes: opts.maxUploadBytes }, part.file);
          app.operon.metrics.uploadedBytes.inc({ via: "multipart" }, stored.size);
        } catch (e) {
          if ((e instanceof StoreError && e.code === "TooLarge") || (e as { code?: string }).code === "FST_REQ_FILE_TOO_LARGE") throw tooLarge();
          throw e;
        }
      }
    } catch (e) {
      if ((e as { code?: string }).code === "FST_REQ_FILE_TOO_LARGE") throw tooLarge();
      // The store's own failures (a file system error) are the server's, not a malformed body.
      if (e instanceof OperonError || e instanceof StoreError || typeof (e as NodeJS.ErrnoException).syscall === "string") throw e;
      // Anything else raised while reading the parts is a malformed multipart body.
      throw new OperonError("invalid_request", `malformed multipart/form-data body: ${messageOf(e)}`);
    } finally {
      req.raw.off("close", onClose);
    }
    if (!stored) throw badRequest("file", "is required");
    return reply.status(201).send({ data: stored });
  });

  r.get("/v1/files/download", {
    config,
    schema: {
      tags: ["files"], summary: "Presigned download URL (about 1 hour)", operationId: "getDownloadUrl",
      description: "The caller fetches downloadUrl directly for the bytes (Range requests supported).",
      querystring: z.object({ workspace_id: workspaceId, key: z.string().min(1).max(1024) }),
      response: {
        200: jsonResponse(dataOf(z.object({ downloadUrl: z.string().describe("Presigned GET URL."), key: z.string(), expiresIn: z.number().int().describe("Seconds the URL stays valid.") })), "A presigned download URL."),
        ...errorResponses(400, 401, 403, 404, 429, 500, 503),
      },
    },
  }, async (req) => {
    return { data: await downloadLink(store, await app.operon.auth.workspace(requireAuth(req), req.query.workspace_id), req.query.key) };
  });

  r.delete("/v1/files", {
    config,
    schema: {
      tags: ["files"], summary: "Delete a file", operationId: "deleteFile",
      querystring: z.object({ workspace_id: workspaceId, key: z.string().min(1).max(1024) }),
      response: { 200: jsonResponse(dataOf(z.object({ key: z.string(), deleted: z.boolean().describe("Always true.") })), "The file is deleted."), ...errorResponses(400, 401, 403, 404, 429, 500, 503) },
    },
  }, async (req) => {
    return { data: await deleteFile(store, await app.operon.auth.workspace(requireAuth(req), req.query.workspace_id), req.query.key) };
  });

  r.post("/v1/files/upload-url", {
    config,
    schema: {
      tags: ["files"], summary: "Step 1 of the presigned flow: a PUT URL, or part URLs for a multipart upload", operationId: "createUploadUrl",
      description: "Up to 5 GiB without `multipart`: one presigned PUT (uploadUrl), then POST /v1/files/upload-confirm. Over 5 GiB (up to 5 TiB), or with `multipart: true`: a multipart upload (uploadId, partSize, partCount, URLs for the first 1,000 parts); PUT each part to its uploadUrl with its Content-MD5, in any order, then confirm with every part's ETag (docs/api.md#files-over-5-gib).",
      body: z.object({
        // One plain name of at most 255 bytes (UTF-8): checked by fileName, which names the field.
        filename: z.string().min(1).max(1024),
        workspace_id: workspaceId,
        content_type: z.string().max(255).optional(),
        contentType: z.string().max(255).optional(),
        size: z.number().int().nonnegative().optional().describe("The file's exact size in bytes; required for a multipart upload."),
        path: z.string().max(1024).optional(),
        multipart: z.boolean().optional().describe("A multipart upload at any size (always over 5 GiB)."),
        description: z.string().max(4096).optional().describe("A multipart upload: stored with the file and shown in listings."),
        part_size: z.number().int().positive().optional().describe("Bytes per part, 5 MiB to 5 GiB (default 64 MiB, grown to stay within 10,000 parts)."),
        partSize: z.number().int().positive().optional(),
      }),
      response: {
        200: jsonResponse(dataOf(z.union([
          z.object({
            uploadUrl: z.string().describe("Presigned PUT URL."),
            fileKey: z.string().describe("The key the file will have: pass it to upload-confirm."),
            expiresIn: z.number().int().describe("Seconds the URL stays valid."),
            contentType: z.string().optional().describe("The Content-Type the PUT must carry, when one was given."),
          }),
          z.object({
            uploadId: z.string().describe("Names the upload in upload-parts, upload-confirm and upload-abort."),
            fileKey: z.string(),
            partSize: z.number().int().describe("Bytes in every part but the last, which takes the rest."),
            partCount: z.number().int(),
            expiresIn: z.number().int().describe("Seconds the part URLs stay valid."),
            parts: z.array(PartUrlSchema).describe(`URLs of the first ${PART_URLS_PER_ANSWER} parts at most.`),
          }),
        ])), "A presigned upload URL, or a multipart upload."),
        ...errorResponses(400, 401, 403, 404, 413, 415, 429, 500, 503),
      },
    },
  }, async (req) => {
    const b = req.body;
    const ws = await app.operon.auth.workspace(requireAuth(req), b.workspace_id);
    const contentType = b.content_type ?? b.contentType;
    sweeper.due();
    if (b.multipart === true || (b.size !== undefined && b.size > MAX_PRESIGNED_PUT_BYTES)) {
      return { data: await createMultipartUpload(store, ws, { filename: b.filename, path: b.path, contentType, description: b.description, size: b.size, partSize: b.part_size ?? b.partSize }, clock.now()) };
    }
    return { data: await createUploadUrl(store, ws, { filename: b.filename, path: b.path, contentType, size: b.size }, clock.now()) };
  });

  r.post("/v1/files/upload-parts", {
    config,
    schema: {
      tags: ["files"], summary: "Fresh URLs for parts of a multipart upload", operationId: "createUploadPartUrls",
      description: "For parts past the first 1,000, or when URLs expired (the store answers 403).",
      body: z.object({
        workspace_id: workspaceId,
        upload_id: z.string().max(64).optional(),
        uploadId: z.string().max(64).optional(),
        part_numbers: z.array(z.number().int()).min(1).max(PART_URLS_PER_ANSWER).optional(),
        partNumbers: z.array(z.number().int()).min(1).max(PART_URLS_PER_ANSWER).optional(),
      }),
      response: {
        200: jsonResponse(dataOf(z.object({ uploadId: z.string(), parts: z.array(PartUrlSchema) })), "The parts' URLs."),
        ...errorResponses(400, 401, 403, 404, 429, 500, 503),
      },
    },
  }, async (req) => {
    const b = req.body;
    const ws = await app.operon.auth.workspace(requireAuth(req), b.workspace_id);
    const id = b.upload_id ?? b.uploadId;
    const numbers = b.part_numbers ?? b.partNumbers;
    if (!id) throw badRequest("upload_id", "is required");
    if (!numbers) throw badRequest("part_numbers", "is required");
    return { data: await uploadPartUrls(store, ws, id, numbers) };
  });

  r.get("/v1/files/upload-parts", {
    config,
    schema: {
      tags: ["files"], summary: "The parts of a multipart upload received so far", operationId: "listUploadParts",
      description: "So that a client resumes after a crash: it sends only the parts missing here (or whose etag differs from its own MD5 of the part).",
      querystring: z.object({ workspace_id: workspaceId, upload_id: z.string().max(64) }),
      response: {
        200: jsonResponse(dataOf(z.object({
          uploadId: z.string(), fileKey: z.string(), size: z.number().int(), partSize: z.number().int(), partCount: z.number().int(),
          parts: z.array(z.object({ partNumber: z.number().int(), size: z.number().int(), etag: z.string().describe("Hex MD5 of the part's bytes.") })),
        })), "The upload and its parts received."),
        ...errorResponses(400, 401, 403, 404, 429, 500, 503),
      },
    },
  }, async (req) => {
    const ws = await app.operon.auth.workspace(requireAuth(req), req.query.workspace_id);
    return { data: await receivedParts(store, ws, req.query.upload_id) };
  });

  r.post("/v1/files/upload-abort", {
    config,
    schema: {
      tags: ["files"], summary: "Abort a multipart upload", operationId: "abortUpload",
      description: "Its parts are discarded. Uploads never confirmed are aborted after 7 days anyway.",
      body: z.object({ workspace_id: workspaceId, upload_id: z.string().max(64).optional(), uploadId: z.string().max(64).optional() }),
      response: { 200: jsonResponse(dataOf(z.object({ uploadId: z.string(), aborted: z.boolean().describe("Always true.") })), "The upload is aborted."), ...errorResponses(400, 401, 403, 404, 429, 500, 503) },
    },
  }, async (req) => {
    const b = req.body;
    const ws = await app.operon.auth.workspace(requireAuth(req), b.workspace_id);
    const id = b.upload_id ?? b.uploadId;
    if (!id) throw badRequest("upload_id", "is required");
    return { data: await abortMultipartUpload(store, ws, id) };
  });

  r.post("/v1/files/upload-confirm", {
    config,
    // A confirm lists up to 10,000 parts.
    bodyLimit: 2 * 1024 * 1024,
    schema: {
      tags: ["files"], summary: "The last step of the presigned flow: confirm the upload", operationId: "confirmUpload",
      description: "A single PUT: 409 when nothing was uploaded to the key, its size differs from `size`, or (S3) what is staged came from an upload URL whose upload was already confirmed: an upload URL sets its file once. A multipart upload (`upload_id` and `parts`): 409 naming the part when one is missing, its etag differs or its size is wrong, or when `size` differs; nothing becomes visible then. The file's sha256 is null until the server has read it (seconds to minutes after confirm); runs refuse it as an input until then.",
      body: z.object({
        file_key: z.string().min(1).max(1024).optional(),
        fileKey: z.string().min(1).max(1024).optional(),
        workspace_id: workspaceId,
        filename: z.string().max(255).optional(),
        size: z.number().int().nonnegative().optional(),
        upload_id: z.string().max(64).optional(),
        uploadId: z.string().max(64).optional(),
        parts: z.array(z.object({
          part_number: z.number().int().optional(), partNumber: z.number().int().optional(),
          etag: z.string().max(200).optional(), ETag: z.string().max(200).optional(),
        })).max(10_000).optional(),
      }),
      response: { 200: jsonResponse(dataOf(FileSchema), "The uploaded file, with its checksum when known."), ...errorResponses(400, 401, 403, 404, 409, 413, 415, 429, 500, 503) },
    },
  }, async (req) => {
    const b = req.body;
    const given = b.file_key ?? b.fileKey;
    if (!given) throw badRequest("file_key", "is required");
    const ws = await app.operon.auth.workspace(requireAuth(req), b.workspace_id);
    const uploadId = b.upload_id ?? b.uploadId;
    if (uploadId === undefined) {
      if (b.parts !== undefined) throw badRequest("upload_id", "is required with parts");
      return { data: await confirmUpload(store, ws, given, b.size) };
    }
    if (!b.parts) throw badRequest("parts", "is required: every part's part_number and the etag its PUT answered");
    const parts = b.parts.map((p, i) => {
      const partNumber = p.part_number ?? p.partNumber;
      const etag = p.etag ?? p.ETag;
      if (partNumber === undefined || etag === undefined) throw badRequest(`parts[${i}]`, "needs part_number and etag");
      return { partNumber, etag };
    });
    const stored = await confirmMultipartUpload(store, ws, { fileKey: given, filename: b.filename, size: b.size, uploadId, parts }, clock.now(), {
      mark: async (info) => checksums.mark(ws.organization, info),
      start: (info) => {
        // Parts sent to the api-server (the local store) were counted as they came.
        if (!store.multipart?.putPart) app.operon.metrics.uploadedBytes.inc({ via: "parts" }, info.size);
        checksums.start(ws.organization, info.key);
      },
    });
    return { data: stored };
  });
}
