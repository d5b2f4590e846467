/**
 * Workspace files as a service (spec: Files): listing, uploading (streamed, or presigned and
 * confirmed), downloading, deleting, and reading a text file's head. The files routes and the
 * assistant tools both call these, so a path is normalized, a file found or refused, and a link
 * signed by one rule; the routes only read HTTP.
 */
import { createHash, randomBytes } from "node:crypto";
import { StoreError, type ByteStream, type Clock, type ObjectInfo, type ObjectStore } from "../core/ports.js";
import { PRESIGNED_PUT_CLAIMS_PREFIX, UPLOADS_PREFIX, USED_UPLOAD_SUFFIX, stagedUploadPrefix, workspaceRoot } from "../core/layout.js";
import { normalizeWorkspacePath } from "../core/paths.js";
import { OperonError, badRequest } from "../core/errors.js";
import { fileKey } from "./access.js";
import type { WorkspaceRecord } from "./store.js";

export const DOWNLOAD_URL_SECONDS = 3600;
export const UPLOAD_URL_SECONDS = 3600;
/** A single presigned PUT is limited to 5 GiB (S3's limit); larger files go by parts (services/uploads.ts). */
export const MAX_PRESIGNED_PUT_BYTES = 5 * 1024 ** 3;

export type FileView = ReturnType<typeof renderFileView>;
/** Views of unchanged (cached) ObjectInfo objects are rendered once. */
const views = new WeakMap<ObjectInfo, FileView>();

export function fileView(ws: WorkspaceRecord, i: ObjectInfo): FileView {
  let v = views.get(i);
  if (!v || v.key !== i.key.slice(workspaceRoot(ws.organization, ws.id).length)) { v = renderFileView(ws, i); views.set(i, v); }
  return v;
}

function renderFileView(ws: WorkspaceRecord, i: ObjectInfo) {
  const key = i.key.slice(workspaceRoot(ws.organization, ws.id).length);
  return {
    name: key.split("/").pop() ?? key,
    key,
    size: i.size,
    content_type: i.contentType ?? null,
    last_modified: i.lastModified.toISOString(),
    sha256: i.sha256 ?? null,
    ...(i.metadata?.description !== undefined ? { description: i.metadata.description } : {}),
  };
}

export const encodeFileCursor = (k: string) => Buffer.from(k).toString("base64url");

/** A listing's `prefix` and `cursor`, checked: the prefix normalized (a trailing `/` kept), the cursor of this listing. */
export function listingRange(ws: WorkspaceRecord, q: { prefix?: string | undefined; cursor?: string | undefined }): { prefix: string; cursor: string | undefined } {
  const root = workspaceRoot(ws.organization, ws.id);
  let prefix = "";
  if (q.prefix) {
    const trailing = q.prefix.endsWith("/");
    const n = normalizeWorkspacePath(q.prefix.replace(/\/+$/, ""));
    if (!n.ok) throw badRequest("prefix", n.reason);
    prefix = n.path + (trailing ? "/" : "");
  }
  let cursor: string | undefined;
  if (q.cursor) {
    cursor = Buffer.from(q.cursor, "base64url").toString("utf8");
    if (!cursor.startsWith(root + prefix)) throw badRequest("cursor", "not a cursor of this listing");
  }
  return { prefix, cursor };
}

/** One page of a workspace's files under `prefix`, in key order. */
export async function listFiles(store: ObjectStore, ws: WorkspaceRecord, range: { prefix: string; cursor: string | undefined }, limit: number) {
  const page = await store.list(workspaceRoot(ws.organization, ws.id) + range.prefix, { limit, withMetadata: true, ...(range.cursor ? { cursor: range.cursor } : {}) });
  return { items: page.items.map((i) => fileView(ws, i)), hasMore: page.nextCursor !== undefined, nextCursor: page.nextCursor ? encodeFileCursor(page.nextCursor) : null };
}

/** The file a caller names by `key` in `ws`, which must exist. */
export async function existingFile(store: ObjectStore, ws: WorkspaceRecord, key: string, field = "key") {
  const f = fileKey(ws, field, key);
  const info = await store.head(f.storageKey);
  if (!info) throw new OperonError("not_found", `file ${JSON.stringify(f.key)} not found`);
  return { ...f, info };
}

/** Deletes an existing file. */
export async function deleteFile(store: ObjectStore, ws: WorkspaceRecord, key: string) {
  const f = await existingFile(store, ws, key);
  await store.delete(f.storageKey);
  return { key: f.key, deleted: true };
}

/** A presigned download link (about an hour) for an existing file. */
export async function downloadLink(store: ObjectStore, ws: WorkspaceRecord, key: string) {
  const f = await existingFile(store, ws, key);
  const downloadUrl = await store.presignGet(f.storageKey, { expiresIn: DOWNLOAD_URL_SECONDS });
  return { downloadUrl, key: f.key, expiresIn: DOWNLOAD_URL_SECONDS };
}

/** A folder given as `path` (optional), normalized: "" or "a/b/". */
export function folder(field: string, path: string | undefined): string {
  if (path === undefined || path === "" || path === "/") return "";
  const n = normalizeWorkspacePath(path.replace(/\/+$/, ""));
  if (!n.ok) throw badRequest(field, n.reason);
  return n.path + "/";
}

/**
 * A file name from a client (the multipart `filename`, upload-url's `filename`): one plain
 * segment, taken as given or refused — never reduced to a basename, so `../x`, `a/b`,
 * `/etc/passwd` and `..\x` are 400s, as are `.`, `..` and anything the path normalizer
 * refuses in a segment (control characters, look-alikes, over 255 bytes of UTF-8).
 */
export function fileName(field: string, name: string | undefined): string {
  if (name === undefined || name === "") throw badRequest(field, "a file name is required");
  if (/[/\\]/.test(name)) throw badRequest(field, "must be a plain file name, without \"/\" or \"\\\"; give the folder as `path`");
  if (name === "." || name === "..") throw badRequest(field, `${JSON.stringify(name)} is not a file name`);
  const n = normalizeWorkspacePath(name);
  if (!n.ok) throw badRequest(field, n.reason);
  if (n.path !== name) throw badRequest(field, "must be a plain file name");
  return n.path;
}

/**
 * A file uploaded through the API (the multipart form's `file` part, named by its `filename`,
 * into the folder `path`): streamed to storage, never held in memory, with its content type
 * and description. A body of more than `maxBytes` fails with the store's `TooLarge` (the store
 * discards a partial object: a body that fails, e.g. a client that went away, leaves nothing).
 */
export async function uploadFile(store: ObjectStore, ws: WorkspaceRecord, u: { filename: string | undefined; path?: string | undefined; description?: string | undefined; contentType?: string | undefined; maxBytes: number }, body: ByteStream): Promise<FileView> {
  const name = fileName("file", u.filename);
  const { storageKey } = fileKey(ws, "path", folder("path", u.path) + name);
  const info = await store.put(storageKey, body, {
    maxBytes: u.maxBytes,
    contentType: u.contentType || "application/octet-stream",
    ...(u.description !== undefined ? { metadata: { description: u.description } } : {}),
  });
  return fileView(ws, info);
}

/**
 * Step 1 of the large-file flow: a presigned PUT URL for `path/filename` in `ws`. A store
 * whose URLs could write again until they expire (S3) gets a URL to a staging key of its own
 * (core/layout.ts stagedUploadPrefix), which only confirmUpload turns into the file; the
 * local store's URL names the file itself (the api-server lets it write once).
 */
export async function createUploadUrl(store: ObjectStore, ws: WorkspaceRecord, b: { filename: string; path?: string | undefined; contentType?: string | undefined; size?: number | undefined }, nowMs = Date.now()) {
  if (b.size !== undefined && b.size > MAX_PRESIGNED_PUT_BYTES) {
    throw new OperonError("payload_too_large", `size: one presigned PUT takes at most ${MAX_PRESIGNED_PUT_BYTES} bytes (5 GiB); send larger files by parts (multipart: true)`, { field: "size" });
  }
  const { key, storageKey } = fileKey(ws, "filename", folder("path", b.path) + fileName("filename", b.filename));
  const target = store.reusablePresignedPuts ? stagingPrefix(ws, storageKey) + uploadId(Math.floor(nowMs / 1000) + UPLOAD_URL_SECONDS) : storageKey;
  const uploadUrl = await store.presignPut(target, { expiresIn: UPLOAD_URL_SECONDS, ...(b.contentType ? { contentType: b.contentType } : {}), ...(b.size !== undefined ? { size: b.size } : {}) });
  return { uploadUrl, fileKey: key, expiresIn: UPLOAD_URL_SECONDS, ...(b.contentType ? { contentType: b.contentType } : {}) };
}

/**
 * How long after its URL expired a staged upload (or the mark that it was used) is kept: the
 * time to confirm an upload that finished late. The sweep deletes it afterwards.
 */
export const STAGED_UPLOAD_GRACE_SECONDS = 24 * 3600;

/** Where the upload URLs of one file write (stores with reusablePresignedPuts). */
const stagingPrefix = (ws: WorkspaceRecord, storageKey: string) => stagedUploadPrefix(ws.organization, ws.id, createHash("sha256").update(storageKey).digest("hex"));
/** A staged upload's id: its URL's expiry (Unix seconds, 12 digits, so ids sort by it) and a random part. */
const uploadId = (expiresAt: number) => `${String(expiresAt).padStart(12, "0")}-${randomBytes(8).toString("hex")}`;
const uploadIdExpiry = (id: string) => { const m = /^(\d{12})-[0-9a-f]{16}$/.exec(id); return m ? Number(m[1]) : undefined; };

/** The uploads staged under `prefix` by id: the object the URL wrote (if any), and whether it was used. */
async function stagedUploads(store: ObjectStore, prefix: string): Promise<Map<string, { info?: ObjectInfo; used: boolean }>> {
  const byId = new Map<string, { info?: ObjectInfo; used: boolean }>();
  let cursor: string | undefined;
  do {
    const page = await store.list(prefix, { limit: 1000, ...(cursor ? { cursor } : {}) });
    for (const i of page.items) {
      const name = i.key.slice(prefix.length);
      const used = name.endsWith(USED_UPLOAD_SUFFIX);
      const id = used ? name.slice(0, -USED_UPLOAD_SUFFIX.length) : name;
      if (uploadIdExpiry(id) === undefined) continue;
      const entry = byId.get(id) ?? { used: false };
      if (used) entry.used = true;
      else entry.info = i;
      byId.set(id, entry);
    }
    cursor = page.nextCursor;
  } while (cursor);
  return byId;
}

const sizeMismatch = (expected: number, actual: number) =>
  new OperonError("conflict", `uploaded object has ${actual} bytes, not the ${expected} announced`, { expected_size: expected, actual_size: actual });

/**
 * Step 3 of the large-file flow: the file `given` once its bytes were PUT, with its sha256.
 * On a store with reusablePresignedPuts, the newest upload staged for the file that was not
 * used yet is marked used (`<id>.used`, created only if absent, so two confirms cannot both
 * take it), copied to the file's key (hashed on the way) and deleted; older staged uploads of
 * the file are marked used and deleted too. What a used URL writes afterwards stays in staging
 * until the sweep, and is never confirmed: a URL sets a file at most once. Without a staged
 * upload (the local store, whose URL writes the file itself), the file must exist: its sha256
 * is recorded when the store does not know it yet. 409 when there is nothing to confirm or
 * the size differs from `size`.
 */
export async function confirmUpload(store: ObjectStore, ws: WorkspaceRecord, given: string, size?: number): Promise<FileView> {
  const { key, storageKey } = fileKey(ws, "file_key", given);
  if (store.reusablePresignedPuts) {
    const prefix = stagingPrefix(ws, storageKey);
    const staged = await stagedUploads(store, prefix);
    const pending = [...staged].filter(([, e]) => e.info && !e.used)
      .map(([id, e]) => ({ id, info: e.info as ObjectInfo }))
      .sort((a, b) => b.info.lastModified.getTime() - a.info.lastModified.getTime() || (a.id < b.id ? 1 : -1));
    const [latest, ...older] = pending;
    if (latest) {
      if (size !== undefined && latest.info.size !== size) throw sizeMismatch(size, latest.info.size);
      const claim = `${prefix}${latest.id}${USED_UPLOAD_SUFFIX}`;
      try {
        await store.put(claim, "", { ifNoneMatch: "*" });
      } catch (e) {
        if (e instanceof StoreError && e.code === "PreconditionFailed") throw new OperonError("conflict", `the upload to ${JSON.stringify(key)} is being confirmed by another request`, { field: "file_key" });
        throw e;
      }
      let info: ObjectInfo;
      try {
        const got = await store.get(latest.info.key);
        if (size !== undefined && got.info.size !== size) { got.body.destroy?.(); throw sizeMismatch(size, got.info.size); }
        info = await store.put(storageKey, got.body, got.info.contentType ? { contentType: got.info.contentType } : {});
      } catch (e) {
        await store.delete(claim).catch(() => undefined); // given back: the client may confirm again
        throw e;
      }
      // Older uploads of the file are spent too (marked first), so no later confirm goes back to one.
      const spent = await Promise.all(older.map(async (o) => store.put(`${prefix}${o.id}${USED_UPLOAD_SUFFIX}`, "", { ifNoneMatch: "*" }).then(() => o.info.key, () => undefined)));
      await Promise.all([latest.info.key, ...spent].map(async (k) => k === undefined ? undefined : store.delete(k).catch(() => undefined)));
      return fileView(ws, info);
    }
    if ([...staged.values()].some((e) => e.info && e.used)) {
      throw new OperonError("conflict", `file_key: the upload URL of ${JSON.stringify(key)} was used again after its upload was confirmed (or replaced): an upload URL sets a file once; ask POST /v1/files/upload-url for a new one`, { field: "file_key" });
    }
  }
  let info = await store.head(storageKey);
  if (!info) throw new OperonError("conflict", `file_key: nothing was uploaded to ${JSON.stringify(key)}; PUT the bytes to the uploadUrl first`, { field: "file_key" });
  if (size !== undefined && info.size !== size) throw sizeMismatch(size, info.size);
  if (!info.sha256) {
    // Objects PUT directly to storage carry no checksum yet: compute it once, here.
    const { body } = await store.get(storageKey);
    const h = createHash("sha256");
    for await (const c of body) h.update(c);
    info = await store.describe(storageKey, { sha256: h.digest("hex"), ...(info.contentType ? { contentType: info.contentType } : {}), ...(info.metadata ? { metadata: info.metadata } : {}) });
  }
  return fileView(ws, info);
}

/**
 * Deletes what spent upload URLs leave behind, once they expired more than
 * STAGED_UPLOAD_GRACE_SECONDS ago (`nowMs`: the time now): staged uploads, then the marks
 * that they were used (in that order, so an upload never outlives its mark), and the local
 * store's claims of used URLs (`_system/presigned-put-used/`, by age: a claim is made after
 * its URL was issued, and upload URLs live UPLOAD_URL_SECONDS). At most `maxPages` pages of
 * 1,000 keys per prefix; returns how many objects it deleted.
 */
export async function sweepUploads(store: ObjectStore, nowMs: number, maxPages = 20): Promise<number> {
  const cutoff = Math.floor(nowMs / 1000) - STAGED_UPLOAD_GRACE_SECONDS;
  let deleted = 0;
  const sweep = async (prefix: string, expired: (i: ObjectInfo) => boolean) => {
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await store.list(prefix, { limit: 1000, ...(cursor ? { cursor } : {}) });
      const gone = page.items.filter(expired).map((i) => i.key);
      // Staged bytes before marks: `<id>` sorts before `<id>.used`, and the marks wait for the bytes.
      const marks = gone.filter((k) => k.endsWith(USED_UPLOAD_SUFFIX));
      for (const batch of [gone.filter((k) => !k.endsWith(USED_UPLOAD_SUFFIX)), marks]) {
        for (let i = 0; i < batch.length; i += 16) await Promise.all(batch.slice(i, i + 16).map(async (k) => store.delete(k)));
      }
      deleted += gone.length;
      cursor = page.nextCursor;
    } while (cursor && ++pages < maxPages);
  };
  await sweep(UPLOADS_PREFIX, (i) => {
    const expiry = uploadIdExpiry((i.key.split("/").pop() ?? "").replace(/\.used$/, ""));
    return expiry !== undefined && expiry < cutoff;
  });
  await sweep(PRESIGNED_PUT_CLAIMS_PREFIX, (i) => i.lastModified.getTime() < (cutoff - UPLOAD_URL_SECONDS) * 1000);
  return deleted;
}

/** How often an api-server sweeps what spent upload URLs leave behind (uploadSweeper). */
export const UPLOAD_SWEEP_INTERVAL_MS = 3600_000;

/**
 * Sweeps what spent upload URLs leave behind lazily: `due()` (an upload-url request) starts a
 * sweepUploads, and the sweeps `also` given (abandoned multipart uploads, checksums nobody
 * computes), in the background at most once per UPLOAD_SWEEP_INTERVAL_MS; `settled()` waits
 * for the one running, if any (on close). A failed sweep is reported to `onError`.
 */
export function uploadSweeper(store: ObjectStore, clock: Clock, onError: (e: unknown) => void, also: ReadonlyArray<(nowMs: number) => Promise<unknown>> = []): { due(): void; settled(): Promise<void> } {
  let next = 0;
  let sweeping: Promise<unknown> = Promise.resolve();
  return {
    due() {
      const now = clock.now();
      if (now < next) return;
      next = now + UPLOAD_SWEEP_INTERVAL_MS;
      sweeping = Promise.all([sweepUploads(store, now), ...also.map(async (f) => f(now))]).catch(onError);
    },
    async settled() { await sweeping; },
  };
}

/**
 * The first `maxBytes` of a text file, with its size and, when there is more, a download
 * link for the rest; a file that is not text (a NUL byte in its head) is refused.
 */
export async function readTextHead(store: ObjectStore, ws: WorkspaceRecord, key: string, maxBytes: number) {
  const f = await existingFile(store, ws, key);
  const size = f.info.size;
  const chunks: Buffer[] = [];
  if (size > 0) {
    const { body } = await store.get(f.storageKey, { start: 0, end: Math.min(size, maxBytes) - 1 });
    for await (const c of body) chunks.push(Buffer.from(c));
  }
  let head = Buffer.concat(chunks).subarray(0, maxBytes);
  if (head.includes(0)) throw new OperonError("invalid_request", `key: ${f.key} is not a text file (gzipped or binary); use its download link`, { field: "key" });
  const truncated = size > head.length;
  // Never end inside a multi-byte character.
  if (truncated) { let end = head.length; while (end > 0 && ((head[end - 1] as number) & 0xc0) === 0x80) end--; if (end > 0 && (head[end - 1] as number) >= 0xc0) head = head.subarray(0, end - 1); }
  return {
    key: f.key, size, truncated, bytes_returned: head.length, text: head.toString("utf8"),
    ...(truncated ? { download_url: await store.presignGet(f.storageKey, { expiresIn: DOWNLOAD_URL_SECONDS }) } : {}),
  };
}
