/**
 * Multipart uploads as a service (docs/api.md#files-over-5-gib, docs/storage.md#multipart-uploads):
 * a file of up to 5 TiB sent as numbered parts straight to storage, in any order and in
 * parallel, resumable (the parts received so far can be listed), and made the file by a
 * confirm that checks every part and answers in seconds, since the store joins the parts
 * itself. The file's SHA-256 is computed afterwards (services/checksums.ts).
 *
 * An upload is a record in storage (core/layout.ts multipartRecordKey) in its workspace's
 * service data: a caller names it by an id that means nothing outside that workspace, so
 * another organization's upload id is simply not found.
 */
import { randomBytes } from "node:crypto";
import { MULTIPART_RECORDS_PREFIX, multipartRecordKey } from "../core/layout.js";
import { OperonError, badRequest } from "../core/errors.js";
import { MAX_MULTIPART_BYTES, MAX_PARTS, MAX_PART_BYTES, MIN_PART_BYTES, partBytes, partCountOf, plainEtag } from "../core/multipart.js";
import { StoreError, type MultipartUploads, type ObjectInfo, type ObjectStore, type UploadedPart } from "../core/ports.js";
import { readJson, updateJson } from "../adapters/json-store.js";
import { fileKey } from "./access.js";
import { fileName, fileView, folder, type FileView } from "./files.js";
import type { WorkspaceRecord } from "./store.js";

const MiB = 1024 ** 2;
export const DEFAULT_PART_BYTES = 64 * MiB;
/** Part URLs handed out at once (more through upload-parts). */
export const PART_URLS_PER_ANSWER = 1000;
/** How long a part URL works: long enough for a slow link to send its first 1,000 parts. */
export const PART_URL_SECONDS = 6 * 3600;
/** An upload not confirmed within this time is aborted by the sweep. */
export const MULTIPART_MAX_AGE_MS = 7 * 24 * 3600_000;

interface MultipartRecord {
  id: string;
  organization: string;
  workspace: string;
  /** The workspace-relative key of the file it becomes, and its storage key. */
  key: string;
  storageKey: string;
  /** The store's own id of the upload: never shown. */
  storeUploadId: string;
  size: number;
  partSize: number;
  partCount: number;
  contentType?: string;
  createdAt: string;
  /** Set while a confirm joins the parts, so that a second confirm waits its turn (409). */
  confirming?: string;
}

const UPLOAD_ID = /^mpu-[0-9a-f]{32}$/;

function multipartOf(store: ObjectStore): MultipartUploads {
  if (!store.multipart) throw new OperonError("invalid_request", "this server's storage has no multipart uploads");
  return store.multipart;
}

/** The part size for `size` bytes: the one asked for (within S3's limits), else 64 MiB, grown to stay within 10,000 parts. */
function partSizeFor(size: number, asked: number | undefined): number {
  const least = Math.max(MIN_PART_BYTES, Math.ceil(size / MAX_PARTS / MiB) * MiB);
  if (asked !== undefined) {
    if (asked < MIN_PART_BYTES || asked > MAX_PART_BYTES) throw badRequest("part_size", `must be between ${MIN_PART_BYTES} (5 MiB) and ${MAX_PART_BYTES} (5 GiB) bytes`);
    if (asked < least) throw badRequest("part_size", `${size} bytes in parts of ${asked} would take more than ${MAX_PARTS} parts; use at least ${least}`);
    return asked;
  }
  return Math.max(DEFAULT_PART_BYTES, least);
}

/** The size part `n` (1-based) of an upload must have. */
const partOf = (r: Pick<MultipartRecord, "size" | "partSize">, n: number) => partBytes(r.size, r.partSize, n);

async function partUrls(store: ObjectStore, r: MultipartRecord, numbers: readonly number[]) {
  const mp = multipartOf(store);
  return Promise.all(numbers.map(async (partNumber) => ({ partNumber, uploadUrl: await mp.presignPart(r.storageKey, r.storeUploadId, partNumber, { expiresIn: PART_URL_SECONDS, size: partOf(r, partNumber) }) })));
}

/**
 * Begins a multipart upload of `size` bytes to `path/filename` in `ws`: the record, the
 * store's upload, and URLs for the first 1,000 parts. The caller has checked the workspace
 * (403 before 413).
 */
export async function createMultipartUpload(store: ObjectStore, ws: WorkspaceRecord, b: { filename: string; path?: string | undefined; contentType?: string | undefined; description?: string | undefined; size: number | undefined; partSize?: number | undefined }, nowMs: number) {
  const { key, storageKey } = fileKey(ws, "filename", folder("path", b.path) + fileName("filename", b.filename));
  if (b.size === undefined) throw badRequest("size", "is required for a multipart upload (the file's exact size in bytes)");
  if (b.size > MAX_MULTIPART_BYTES) throw new OperonError("payload_too_large", `size: a file takes at most ${MAX_MULTIPART_BYTES} bytes (5 TiB)`, { field: "size" });
  const partSize = partSizeFor(b.size, b.partSize);
  const partCount = partCountOf(b.size, partSize);
  const mp = multipartOf(store);
  const storeUploadId = await mp.create(storageKey, { size: b.size, partSize, ...(b.contentType ? { contentType: b.contentType } : {}), ...(b.description !== undefined ? { metadata: { description: b.description } } : {}) });
  const record: MultipartRecord = {
    id: `mpu-${randomBytes(16).toString("hex")}`, organization: ws.organization, workspace: ws.id, key, storageKey, storeUploadId,
    size: b.size, partSize, partCount, ...(b.contentType ? { contentType: b.contentType } : {}), createdAt: new Date(nowMs).toISOString(),
  };
  try {
    await store.put(multipartRecordKey(ws.organization, ws.id, record.id), JSON.stringify(record), { contentType: "application/json", ifNoneMatch: "*" });
  } catch (e) {
    await mp.abort(storageKey, storeUploadId).catch(() => undefined);
    throw e;
  }
  const first = Array.from({ length: Math.min(partCount, PART_URLS_PER_ANSWER) }, (_, i) => i + 1);
  return { uploadId: record.id, fileKey: key, partSize, partCount, expiresIn: PART_URL_SECONDS, parts: await partUrls(store, record, first) };
}

/** The upload `id` of `ws`, which must exist (404 naming upload_id otherwise). */
async function uploadOf(store: ObjectStore, ws: WorkspaceRecord, id: string): Promise<MultipartRecord> {
  if (!UPLOAD_ID.test(id)) throw badRequest("upload_id", "is not an upload id (mpu-…, from POST /v1/files/upload-url)");
  const r = await readJson<MultipartRecord>(store, multipartRecordKey(ws.organization, ws.id, id));
  if (!r) throw new OperonError("not_found", `upload_id: no upload ${id} in workspace ${ws.id} (confirmed, aborted, expired, or never begun here)`, { field: "upload_id" });
  return r;
}

/** The store's parts of an upload whose record exists; an upload the store no longer has is 404. */
async function storedParts(store: ObjectStore, r: MultipartRecord): Promise<UploadedPart[]> {
  try {
    return await multipartOf(store).listParts(r.storageKey, r.storeUploadId);
  } catch (e) {
    if (e instanceof StoreError && e.code === "NotFound") throw new OperonError("not_found", `upload_id: upload ${r.id} is no longer open`, { field: "upload_id" });
    throw e;
  }
}

/** Fresh URLs for some parts of an upload (parts past the first 1,000, or URLs that expired). */
export async function uploadPartUrls(store: ObjectStore, ws: WorkspaceRecord, id: string, numbers: readonly number[]) {
  const r = await uploadOf(store, ws, id);
  const bad = numbers.find((n) => !Number.isInteger(n) || n < 1 || n > r.partCount);
  if (bad !== undefined) throw badRequest("part_numbers", `part ${bad} is not a part of this upload (1 to ${r.partCount})`);
  return { uploadId: r.id, parts: await partUrls(store, r, [...new Set(numbers)]) };
}

/** What a client needs to resume: the upload's shape and the parts received so far. */
export async function receivedParts(store: ObjectStore, ws: WorkspaceRecord, id: string) {
  const r = await uploadOf(store, ws, id);
  const parts = await storedParts(store, r);
  return { uploadId: r.id, fileKey: r.key, size: r.size, partSize: r.partSize, partCount: r.partCount, parts: parts.map((p) => ({ partNumber: p.partNumber, size: p.size, etag: p.etag })) };
}

const conflict = (message: string, details: Record<string, unknown>) => new OperonError("conflict", message, details);

/** Every reason the client's account of its parts differs from the store's: the first one, as a 409 naming the part. */
function checkParts(r: MultipartRecord, given: ReadonlyArray<{ partNumber: number; etag: string }>, stored: UploadedPart[]): void {
  const byNumber = new Map<number, string>();
  for (const p of given) {
    if (!Number.isInteger(p.partNumber) || p.partNumber < 1 || p.partNumber > r.partCount) throw badRequest("parts", `part ${p.partNumber} is not a part of this upload (1 to ${r.partCount})`);
    if (byNumber.has(p.partNumber)) throw badRequest("parts", `part ${p.partNumber} is listed twice`);
    byNumber.set(p.partNumber, plainEtag(p.etag));
  }
  const have = new Map(stored.map((p) => [p.partNumber, p]));
  for (let n = 1; n <= r.partCount; n++) {
    const etag = byNumber.get(n);
    if (etag === undefined) throw conflict(`parts: part ${n} of ${r.partCount} is not listed; list every part with the ETag its PUT answered`, { field: "parts", part_number: n });
    const s = have.get(n);
    if (!s) throw conflict(`parts: part ${n} was not received; PUT it (GET /v1/files/upload-parts lists the parts received)`, { field: "parts", part_number: n });
    if (plainEtag(s.etag) !== etag) throw conflict(`parts: part ${n}'s etag is ${JSON.stringify(etag)}, but the part received has ${JSON.stringify(plainEtag(s.etag))}; send the part again`, { field: "parts", part_number: n });
    if (s.size !== partOf(r, n)) throw conflict(`parts: part ${n} has ${s.size} bytes, not ${partOf(r, n)}`, { field: "parts", part_number: n });
  }
}

/**
 * Makes an upload the file, once every part is there as the client lists it: 409 naming the
 * part (or the size, or the key) otherwise, and nothing becomes visible. The store joins the
 * parts itself. The file's checksum is computed afterwards: `checksum.mark` records that it is
 * wanted before the file appears (so a crash right after leaves the mark for another
 * api-server), `checksum.start` begins it once the file is there.
 */
export async function confirmMultipartUpload(store: ObjectStore, ws: WorkspaceRecord, b: { fileKey: string; filename?: string | undefined; size?: number | undefined; uploadId: string; parts: ReadonlyArray<{ partNumber: number; etag: string }> }, nowMs: number, checksum: { mark(info: { key: string; size: number }): Promise<void>; start(info: ObjectInfo): void }): Promise<FileView> {
  const r = await uploadOf(store, ws, b.uploadId);
  const { key } = fileKey(ws, "file_key", b.fileKey);
  if (key !== r.key) throw conflict(`file_key: upload ${r.id} is for ${JSON.stringify(r.key)}, not ${JSON.stringify(key)}`, { field: "file_key" });
  if (b.filename !== undefined && b.filename !== key.split("/").pop()) throw conflict(`filename: upload ${r.id} is for a file named ${JSON.stringify(key.split("/").pop())}`, { field: "filename" });
  if (b.size !== undefined && b.size !== r.size) throw conflict(`size: upload ${r.id} was begun for ${r.size} bytes, not ${b.size}`, { field: "size", expected_size: r.size, actual_size: b.size });
  checkParts(r, b.parts, await storedParts(store, r));
  const recordKey = multipartRecordKey(ws.organization, ws.id, r.id);
  const since = new Date(nowMs).toISOString();
  let taken = false;
  await updateJson<MultipartRecord>(store, recordKey, (cur) => {
    // A confirm that died midway leaves its mark: taken over after ten minutes.
    if (cur.confirming && nowMs - Date.parse(cur.confirming) < 600_000) return undefined;
    taken = true;
    return { ...cur, confirming: since };
  });
  if (!taken) throw conflict(`upload_id: upload ${r.id} is being confirmed by another request`, { field: "upload_id" });
  let info: ObjectInfo;
  try {
    await checksum.mark({ key: r.storageKey, size: r.size });
    info = await multipartOf(store).complete(r.storageKey, r.storeUploadId, b.parts.map((p) => ({ partNumber: p.partNumber, etag: plainEtag(p.etag) })).sort((x, y) => x.partNumber - y.partNumber));
  } catch (e) {
    await updateJson<MultipartRecord>(store, recordKey, (cur) => ({ ...cur, confirming: undefined } as MultipartRecord)).catch(() => undefined);
    if (e instanceof StoreError && e.code === "PreconditionFailed") throw conflict(`parts: the store refused the parts (${e.message}); GET /v1/files/upload-parts and send what is missing`, { field: "parts" });
    if (e instanceof StoreError && e.code === "NotFound") throw new OperonError("not_found", `upload_id: upload ${r.id} is no longer open`, { field: "upload_id" });
    throw e;
  }
  await store.delete(recordKey);
  checksum.start(info);
  return fileView(ws, info);
}

/** Aborts an upload: its parts are discarded and its id forgotten. */
export async function abortMultipartUpload(store: ObjectStore, ws: WorkspaceRecord, id: string) {
  const r = await uploadOf(store, ws, id);
  await multipartOf(store).abort(r.storageKey, r.storeUploadId);
  await store.delete(multipartRecordKey(ws.organization, ws.id, r.id));
  return { uploadId: r.id, aborted: true };
}

/**
 * Aborts uploads begun more than MULTIPART_MAX_AGE_MS before `nowMs` and never confirmed: the
 * recorded ones, then any the store still holds without a record (a crash between the two
 * writes) — never one whose record is still young. At most `maxPages` pages of 1,000
 * records (the unrecorded ones only once every record was read); returns how many uploads
 * it aborted.
 */
export async function sweepMultipartUploads(store: ObjectStore, nowMs: number, maxPages = 20): Promise<number> {
  const mp = store.multipart;
  if (!mp) return 0;
  const cutoff = nowMs - MULTIPART_MAX_AGE_MS;
  const live = new Set<string>();
  let aborted = 0;
  let cursor: string | undefined;
  for (let page = 0; page < maxPages; page++) {
    const got = await store.list(MULTIPART_RECORDS_PREFIX, { limit: 1000, ...(cursor ? { cursor } : {}) });
    for (const item of got.items) {
      const r = await readJson<MultipartRecord>(store, item.key).catch(() => undefined);
      if (!r) continue;
      if (Date.parse(r.createdAt) >= cutoff) { live.add(r.storeUploadId); continue; }
      await mp.abort(r.storageKey, r.storeUploadId);
      await store.delete(item.key);
      aborted++;
    }
    cursor = got.nextCursor;
    if (!cursor) break;
  }
  if (cursor) return aborted;
  for (const open of await mp.listOpen(new Date(cutoff), 1000)) {
    if (live.has(open.uploadId)) continue;
    await mp.abort(open.key, open.uploadId);
    aborted++;
  }
  return aborted;
}
