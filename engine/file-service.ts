/**
 * Workspace files as a service (spec: Files): listing, presigned download and upload links,
 * and reading a text file's head. The files routes and the assistant tools both call these,
 * so a path is normalized, a file found or refused, and a link signed by one rule.
 */
import type { ObjectInfo, ObjectStore } from "../core/ports.js";
import { normalizeWorkspacePath } from "../core/paths.js";
import { ApiError, badRequest } from "./service-error.js";
import { fileKey, workspaceRoot } from "./access.js";
import type { WorkspaceRecord } from "./service-store.js";

export const DOWNLOAD_URL_SECONDS = 3600;
export const UPLOAD_URL_SECONDS = 3600;
/** A single presigned PUT is limited to 5 GiB (S3's limit); there is no multipart upload, so no upload can be larger. */
export const MAX_PRESIGNED_PUT_BYTES = 5 * 1024 ** 3;

export type FileView = ReturnType<typeof renderFileView>;
/** Views of unchanged (cached) ObjectInfo objects are rendered once. */
const views = new WeakMap<ObjectInfo, FileView>();

export function fileView(ws: WorkspaceRecord, i: ObjectInfo): FileView {
  let v = views.get(i);
  if (!v || v.key !== i.key.slice(workspaceRoot(ws).length)) { v = renderFileView(ws, i); views.set(i, v); }
  return v;
}

function renderFileView(ws: WorkspaceRecord, i: ObjectInfo) {
  const key = i.key.slice(workspaceRoot(ws).length);
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
  const root = workspaceRoot(ws);
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
  const page = await store.list(workspaceRoot(ws) + range.prefix, { limit, withMetadata: true, ...(range.cursor ? { cursor: range.cursor } : {}) });
  return { items: page.items.map((i) => fileView(ws, i)), hasMore: page.nextCursor !== undefined, nextCursor: page.nextCursor ? encodeFileCursor(page.nextCursor) : null };
}

/** The file a caller names by `key` in `ws`, which must exist. */
export async function existingFile(store: ObjectStore, ws: WorkspaceRecord, key: string, field = "key") {
  const f = fileKey(ws, field, key);
  const info = await store.head(f.storageKey);
  if (!info) throw new ApiError("not_found", `file ${JSON.stringify(f.key)} not found`);
  return { ...f, info };
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

/** Step 1 of the large-file flow: a presigned PUT URL for `path/filename` in `ws`. */
export async function createUploadUrl(store: ObjectStore, ws: WorkspaceRecord, b: { filename: string; path?: string | undefined; contentType?: string | undefined; size?: number | undefined }) {
  if (b.size !== undefined && b.size > MAX_PRESIGNED_PUT_BYTES) {
    throw new ApiError("payload_too_large", `size: a file takes at most ${MAX_PRESIGNED_PUT_BYTES} bytes (5 GiB, the limit of one presigned PUT); larger uploads are not supported`, { field: "size" });
  }
  const { key, storageKey } = fileKey(ws, "filename", folder("path", b.path) + fileName("filename", b.filename));
  const uploadUrl = await store.presignPut(storageKey, { expiresIn: UPLOAD_URL_SECONDS, ...(b.contentType ? { contentType: b.contentType } : {}), ...(b.size !== undefined ? { size: b.size } : {}) });
  return { uploadUrl, fileKey: key, expiresIn: UPLOAD_URL_SECONDS, ...(b.contentType ? { contentType: b.contentType } : {}) };
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
  if (head.includes(0)) throw new ApiError("invalid_request", `key: ${f.key} is not a text file (gzipped or binary); use its download link`, { field: "key" });
  const truncated = size > head.length;
  // Never end inside a multi-byte character.
  if (truncated) { let end = head.length; while (end > 0 && ((head[end - 1] as number) & 0xc0) === 0x80) end--; if (end > 0 && (head[end - 1] as number) >= 0xc0) head = head.subarray(0, end - 1); }
  return {
    key: f.key, size, truncated, bytes_returned: head.length, text: head.toString("utf8"),
    ...(truncated ? { download_url: await store.presignGet(f.storageKey, { expiresIn: DOWNLOAD_URL_SECONDS }) } : {}),
  };
}
