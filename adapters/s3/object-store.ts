/**
 * The S3 adapter of the ObjectStore port (core/ports.ts): Operon's object storage in cluster
 * mode, on any S3-compatible store (AWS S3, MinIO, ...), through @aws-sdk/client-s3. It
 * exists so that the files API, saved specs, run manifests and step outputs run the same
 * code in cluster mode as on the local filesystem in embedded mode (docs/architecture.md#two-modes, docs/storage.md), and
 * so that presigned URLs are real S3 URLs that clients fetch from the store directly.
 *
 * How the port's promises are kept on S3:
 * - A streamed `put` goes to a temporary key `_system/tmp/uploads/<uuid>` (lib-storage
 *   multipart upload), hashing and counting bytes on the way; a server-side copy then
 *   creates the final key with the `sha256` metadata, so the final key only ever holds a
 *   complete object that carries its checksum. The temporary key is always deleted; a
 *   lifecycle rule expiring `_system/tmp/` after a day is still advisable for crashes.
 * - Conditional streamed puts (`ifNoneMatch` / `ifMatch`) are checked once before the
 *   upload (to fail fast) and enforced atomically by a multipart copy whose
 *   CompleteMultipartUpload carries If-None-Match / If-Match: CopyObject's own destination
 *   conditions are not honoured by every S3 implementation (MinIO ignores them).
 * - Objects over 5 GiB (CopyObject's limit) are copied with UploadPartCopy.
 * - Metadata keys are lower-cased (HTTP headers); values that are not plain printable ASCII
 *   are stored RFC 2047 encoded (`=?UTF-8?B?...?=`) and decoded on read. The key `sha256`
 *   is reserved for the content checksum.
 * - Multipart uploads (the MultipartUploads port) are S3's own: part URLs are presigned
 *   UploadPart requests with the part's Content-Length signed (S3 refuses another length);
 *   a Content-MD5 the client sends with a part is checked by S3 although it is not signed
 *   (BadDigest). The upload carries the content type and metadata given to `create` but no
 *   `sha256` (`describe` records it later). `complete` sends the parts' ETags quoted and answers
 *   the object as HEAD sees it; a complete that S3 did but whose answer was lost (a retried
 *   attempt then hears NoSuchUpload) is recognized by the object's multipart ETag. Part
 *   numbers given to `complete` must be 1..N without a gap (S3 itself would accept a gap).
 *   NoSuchUpload is StoreError NotFound; InvalidPart, InvalidPartOrder and EntityTooSmall
 *   are PreconditionFailed; BadDigest is BadDigest.
 * - Every call has deadlines, so that a dead or frozen store fails within seconds instead of
 *   holding requests: a connection timeout, a request timeout (until the response headers
 *   arrive; server-side copies get more time, in proportion to their size, and so does
 *   CompleteMultipartUpload, in proportion to its number of parts) and a bounded
 *   number of attempts. Outages (refused or reset connections, timeouts, 5xx answers such as
 *   503 SlowDown) are StoreError `Unavailable`, which the API answers with 503.
 */
import { createHash, randomUUID } from "node:crypto";
import { Readable } from "node:stream";
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
  UploadPartCopyCommand,
} from "@aws-sdk/client-s3";
import type { CompletedPart } from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";
import { guardKeys } from "../key-guard.js";
import { TEMP_UPLOADS_PREFIX, isSystemKey } from "../../core/layout.js";
import { StoreError } from "../../core/ports.js";
import type {
  ByteRange, ByteStream, GetResult, ListOptions, ListPage, MultipartUploads, ObjectInfo, ObjectStore, OpenUpload, PresignOptions, PutOptions,
  UploadedPart,
} from "../../core/ports.js";
import { MAX_PARTS, checkUploadShape, plainEtag } from "../../core/multipart.js";

export interface S3ObjectStoreConfig {
  /** e.g. `http://127.0.0.1:9000` for MinIO; absent for AWS S3. */
  endpoint?: string;
  bucket: string;
  region: string;
  /** `https://host/bucket/key` instead of `https://bucket.host/key` (MinIO needs it). */
  forcePathStyle?: boolean;
  /** Absent: the SDK's default chain (environment, web identity, instance profile, ...). */
  credentials?: { accessKeyId: string; secretAccessKey: string };
  /** Tuning, for tests: copies of larger objects use UploadPartCopy (default 5 GiB, CopyObject's limit). */
  multipartCopyThreshold?: number;
  /** Tuning, for tests: part size of multipart copies (default 512 MiB; grown to stay within 10,000 parts). */
  copyPartSize?: number;
  /** Milliseconds to establish a connection before the attempt fails (default 3,000). */
  connectionTimeoutMs?: number;
  /**
   * Milliseconds from sending a request (its body included) until the response headers
   * arrive before the attempt fails (default 10,000). A response body is not limited by it.
   * Server-side copies get this plus one second per 20 MiB copied.
   */
  requestTimeoutMs?: number;
  /** Attempts per S3 call, the first included (default 2): bounds how long an outage holds a caller. */
  maxAttempts?: number;
}

export const S3_DEFAULT_CONNECTION_TIMEOUT_MS = 3_000;
export const S3_DEFAULT_REQUEST_TIMEOUT_MS = 10_000;
export const S3_DEFAULT_MAX_ATTEMPTS = 2;

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const SHA256_KEY = "sha256";
const UPLOAD_PART_SIZE = 8 * MiB;
const UPLOAD_QUEUE_SIZE = 4;
const COPY_CONCURRENCY = 4;
const HEAD_CONCURRENCY = 16;
const DEFAULT_CONTENT_TYPE = "application/octet-stream";
/** Server-side copies may take this long per byte on top of the request timeout (20 MiB/s). */
const COPY_MS_PER_BYTE = 1000 / (20 * MiB);
/** CompleteMultipartUpload may take this long on top of the request timeout (S3: "several minutes" for big uploads). */
const COMPLETE_BASE_MS = 30_000;
const COMPLETE_MS_PER_PART = 60;
const LIST_PAGE = 1000;
/** Failures to reach the store (Node's error codes), as opposed to answers from it. */
const NETWORK_ERROR_CODES = new Set([
  "ECONNREFUSED", "ECONNRESET", "ECONNABORTED", "ETIMEDOUT", "ESOCKETTIMEDOUT", "EHOSTUNREACH", "EHOSTDOWN",
  "ENETUNREACH", "ENETDOWN", "ENOTFOUND", "EAI_AGAIN", "EPIPE", "ERR_SOCKET_CONNECTION_TIMEOUT",
]);
/** S3 error names that mean the store is overloaded or failing, whatever the status says. */
const OUTAGE_ERROR_NAMES = new Set(["SlowDown", "ServiceUnavailable", "InternalError", "TimeoutError"]);

export function createS3ObjectStore(config: S3ObjectStoreConfig): ObjectStore {
  const requestTimeout = config.requestTimeoutMs ?? S3_DEFAULT_REQUEST_TIMEOUT_MS;
  const client = new S3Client({
    region: config.region,
    ...(config.endpoint !== undefined ? { endpoint: config.endpoint } : {}),
    ...(config.credentials !== undefined ? { credentials: config.credentials } : {}),
    forcePathStyle: config.forcePathStyle ?? false,
    // Operon computes its own sha256; the SDK's default CRC32 checksums would also end up
    // in presigned PUT URLs (as a checksum of an empty body) and break them.
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
    // Deadlines: without them a frozen store (connections accepted, never answered) holds
    // every caller forever. throwOnRequestTimeout: the SDK otherwise only logs a warning.
    requestHandler: {
      connectionTimeout: config.connectionTimeoutMs ?? S3_DEFAULT_CONNECTION_TIMEOUT_MS,
      requestTimeout,
      throwOnRequestTimeout: true,
    },
    maxAttempts: config.maxAttempts ?? S3_DEFAULT_MAX_ATTEMPTS,
  });
  const Bucket = config.bucket;
  const multipartCopyThreshold = config.multipartCopyThreshold ?? 5 * GiB;
  const copyPartSize = config.copyPartSize ?? 512 * MiB;
  /** Per-call options of a server-side copy of `bytes`: the store answers only once it is done. */
  const copyDeadline = (bytes: number) => ({ requestTimeout: requestTimeout + Math.ceil(bytes * COPY_MS_PER_BYTE) });

  interface CopyOptions {
    metadata: Record<string, string>;
    contentType: string | undefined;
    ifNoneMatch?: "*" | undefined;
    ifMatch?: string | undefined;
    /** Fails with PreconditionFailed when the source changed meanwhile. */
    sourceEtag?: string | undefined;
  }

  /** Server-side copy of `source` (of `size` bytes) to `dest`, replacing its metadata. */
  async function copyObject(source: string, dest: string, size: number, o: CopyOptions): Promise<{ etag?: string; lastModified: Date }> {
    const conditional = o.ifNoneMatch !== undefined || o.ifMatch !== undefined;
    if (!conditional && size <= multipartCopyThreshold) {
      const out = await client.send(new CopyObjectCommand({
        Bucket, Key: dest, CopySource: copySource(Bucket, source), MetadataDirective: "REPLACE",
        Metadata: o.metadata, ContentType: o.contentType, CopySourceIfMatch: o.sourceEtag,
      }), copyDeadline(size));
      return { etag: out.CopyObjectResult?.ETag, lastModified: out.CopyObjectResult?.LastModified ?? new Date() };
    }
    const partSize = Math.max(copyPartSize, Math.ceil(size / MAX_PARTS));
    const ranges: Array<string | undefined> = [];
    if (size <= partSize) ranges.push(undefined); // one part: the whole object (also when empty)
    else for (let start = 0; start < size; start += partSize) ranges.push(`bytes=${start}-${Math.min(start + partSize, size) - 1}`);
    const created = await client.send(new CreateMultipartUploadCommand({
      Bucket, Key: dest, Metadata: o.metadata, ContentType: o.contentType,
    }));
    const UploadId = created.UploadId;
    if (!UploadId) throw new Error(`S3 CreateMultipartUpload for ${dest} returned no UploadId`);
    try {
      const parts = await mapLimit(ranges, COPY_CONCURRENCY, async (range, i): Promise<CompletedPart> => {
        const out = await client.send(new UploadPartCopyCommand({
          Bucket, Key: dest, UploadId, PartNumber: i + 1, CopySource: copySource(Bucket, source),
          CopySourceRange: range, CopySourceIfMatch: o.sourceEtag,
        }), copyDeadline(Math.min(partSize, size)));
        return { PartNumber: i + 1, ETag: out.CopyPartResult?.ETag };
      });
      const done = await client.send(new CompleteMultipartUploadCommand({
        Bucket, Key: dest, UploadId, MultipartUpload: { Parts: parts }, IfNoneMatch: o.ifNoneMatch, IfMatch: o.ifMatch,
      }), copyDeadline(size));
      return { etag: done.ETag, lastModified: new Date() };
    } catch (err) {
      await client.send(new AbortMultipartUploadCommand({ Bucket, Key: dest, UploadId })).catch(() => undefined);
      throw err;
    }
  }

  /** Fail fast (before streaming a large body) when a put's condition already does not hold. */
  async function checkPutConditions(key: string, options: PutOptions): Promise<void> {
    if (options.ifNoneMatch === undefined && options.ifMatch === undefined) return;
    const current = await store.head(key);
    if (options.ifNoneMatch === "*" && current) throw new StoreError("PreconditionFailed", `${key} already exists`);
    if (options.ifMatch !== undefined && (!current || !sameEtag(current.etag, options.ifMatch))) {
      throw new StoreError("PreconditionFailed", `${key} does not have etag ${options.ifMatch}`);
    }
  }

  async function putBytes(key: string, bytes: Uint8Array, options: PutOptions): Promise<ObjectInfo> {
    if (options.maxBytes !== undefined && bytes.byteLength > options.maxBytes) {
      throw new StoreError("TooLarge", `${key}: ${bytes.byteLength} bytes exceed the limit of ${options.maxBytes}`);
    }
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    const contentType = options.contentType ?? DEFAULT_CONTENT_TYPE;
    const out = await client.send(new PutObjectCommand({
      Bucket, Key: key, Body: bytes, ContentLength: bytes.byteLength, ContentType: contentType,
      Metadata: toS3Metadata(sha256, options.metadata), IfNoneMatch: options.ifNoneMatch, IfMatch: options.ifMatch,
    }));
    return {
      key, size: bytes.byteLength, lastModified: new Date(), etag: out.ETag, contentType, sha256,
      metadata: normalizeMetadata(options.metadata),
    };
  }

  async function putStream(key: string, body: ByteStream, options: PutOptions): Promise<ObjectInfo> {
    await checkPutConditions(key, options);
    const { maxBytes } = options;
    const hash = createHash("sha256");
    let size = 0;
    async function* counted(): AsyncGenerator<Uint8Array> {
      for await (const chunk of body) {
        const bytes: Uint8Array = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
        size += bytes.byteLength;
        if (maxBytes !== undefined && size > maxBytes) {
          throw new StoreError("TooLarge", `${key}: more than ${maxBytes} bytes`);
        }
        hash.update(bytes);
        yield bytes;
      }
    }
    const source = Readable.from(counted());
    const tempKey = `${TEMP_UPLOADS_PREFIX}${randomUUID()}`;
    let outage = false;
    try {
      const upload = new Upload({
        client,
        params: { Bucket, Key: tempKey, Body: source },
        partSize: UPLOAD_PART_SIZE,
        queueSize: UPLOAD_QUEUE_SIZE,
        leavePartsOnError: false,
      });
      await upload.done();
      const sha256 = hash.digest("hex");
      const contentType = options.contentType ?? DEFAULT_CONTENT_TYPE;
      const copied = await copyObject(tempKey, key, size, {
        metadata: toS3Metadata(sha256, options.metadata), contentType,
        ifNoneMatch: options.ifNoneMatch, ifMatch: options.ifMatch,
      });
      return {
        key, size, lastModified: copied.lastModified, etag: copied.etag, contentType, sha256,
        metadata: normalizeMetadata(options.metadata),
      };
    } catch (err) {
      outage = isOutage(err);
      throw err;
    } finally {
      source.destroy();
      const removed = client.send(new DeleteObjectCommand({ Bucket, Key: tempKey })).catch(() => undefined);
      // In an outage the caller hears of it at once; the removal is still tried meanwhile.
      if (!outage) await removed;
    }
  }

  const store: ObjectStore = {
    // A presigned PUT URL writes its key as often as it is used until it expires: upload URLs
    // therefore write staging keys that only upload-confirm turns into files.
    reusablePresignedPuts: true,

    async put(key, body, options = {}) {
      try {
        if (typeof body === "string") return await putBytes(key, Buffer.from(body, "utf8"), options);
        if (body instanceof Uint8Array) return await putBytes(key, body, options);
        return await putStream(key, body, options);
      } catch (err) {
        // If-Match on an absent key: S3 answers 404, the port's contract is PreconditionFailed.
        if (options.ifMatch !== undefined && isNotFound(err)) {
          throw new StoreError("PreconditionFailed", `${key} does not exist (ifMatch ${options.ifMatch})`);
        }
        throw mapError(err, key);
      }
    },

    async get(key, range) {
      let rangeHeader: string | undefined;
      if (range) {
        checkRange(key, range);
        rangeHeader = `bytes=${range.start}-${range.end ?? ""}`;
      }
      try {
        const out = await client.send(new GetObjectCommand({ Bucket, Key: key, Range: rangeHeader }));
        const length = out.ContentLength ?? 0;
        let size = length;
        let served: GetResult["range"];
        if (range) {
          const parsed = parseContentRange(out.ContentRange);
          if (parsed) {
            served = parsed;
            size = parsed.total;
          } else {
            served = { start: 0, end: length - 1, total: length }; // the store sent the whole object
          }
        }
        const body = (out.Body as unknown as Readable | undefined) ?? Readable.from([]);
        const { sha256, metadata } = fromS3Metadata(out.Metadata);
        const info: ObjectInfo = {
          key, size, lastModified: out.LastModified ?? new Date(0), etag: out.ETag, contentType: out.ContentType, sha256, metadata,
        };
        return served ? { body, info, range: served } : { body, info };
      } catch (err) {
        throw mapError(err, key);
      }
    },

    async head(key) {
      try {
        const out = await client.send(new HeadObjectCommand({ Bucket, Key: key }));
        const { sha256, metadata } = fromS3Metadata(out.Metadata);
        return {
          key, size: out.ContentLength ?? 0, lastModified: out.LastModified ?? new Date(0), etag: out.ETag,
          contentType: out.ContentType, sha256, metadata,
        };
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw mapError(err, key);
      }
    },

    async list(prefix, options: ListOptions): Promise<ListPage> {
      const hideSystem = !isSystemKey(prefix);
      const limit = Math.max(1, Math.floor(options.limit));
      // The cursor is a key (the last one of the previous page), as in the local store: sent as
      // StartAfter, so a page resumes right after it whatever produced it. S3's continuation
      // tokens are never handed out: they are opaque, and only valid with the same request.
      let startAfter = options.cursor;
      let truncated: boolean | undefined;
      let items: ObjectInfo[] = [];
      try {
        // Pages holding only hidden `_system/` keys are skipped, so that a page is never
        // empty while more keys follow.
        do {
          const out = await client.send(new ListObjectsV2Command({
            Bucket, Prefix: prefix === "" ? undefined : prefix, MaxKeys: limit, StartAfter: startAfter,
          }));
          for (const o of out.Contents ?? []) {
            if (o.Key === undefined) continue;
            startAfter = o.Key;
            if (hideSystem && isSystemKey(o.Key)) continue;
            items.push({ key: o.Key, size: o.Size ?? 0, lastModified: o.LastModified ?? new Date(0), etag: o.ETag });
          }
          truncated = out.IsTruncated === true && (out.Contents?.length ?? 0) > 0;
        } while (items.length === 0 && truncated);
      } catch (err) {
        throw mapError(err, prefix);
      }
      if (options.withMetadata) {
        items = await mapLimit(items, HEAD_CONCURRENCY, async (item) => (await store.head(item.key)) ?? item);
      }
      const last = items[items.length - 1];
      return truncated && last ? { items, nextCursor: last.key } : { items };
    },

    async delete(key) {
      try {
        await client.send(new DeleteObjectCommand({ Bucket, Key: key }));
      } catch (err) {
        if (isNotFound(err)) return;
        throw mapError(err, key);
      }
    },

    async describe(key, info) {
      if (!/^[0-9a-fA-F]{64}$/.test(info.sha256)) throw new TypeError(`describe(${key}): sha256 must be 64 hex digits`);
      const sha256 = info.sha256.toLowerCase();
      const current = await store.head(key);
      if (!current) throw new StoreError("NotFound", `${key} does not exist`);
      const contentType = info.contentType ?? current.contentType;
      const metadata = normalizeMetadata(info.metadata ?? current.metadata);
      try {
        const copied = await copyObject(key, key, current.size, {
          metadata: toS3Metadata(sha256, metadata), contentType, sourceEtag: current.etag,
        });
        return { ...current, lastModified: copied.lastModified, etag: copied.etag, contentType, sha256, metadata };
      } catch (err) {
        throw mapError(err, key);
      }
    },

    // A range is not signed: the client sends its own Range header with the presigned GET.
    async presignGet(key, options: PresignOptions) {
      return getSignedUrl(client, new GetObjectCommand({ Bucket, Key: key }), { expiresIn: options.expiresIn });
    },

    // With a contentType, the uploader must send exactly that Content-Type, and with a size
    // exactly that Content-Length: both are signed, so S3 refuses anything else.
    async presignPut(key, options: PresignOptions) {
      const command = new PutObjectCommand({ Bucket, Key: key, ContentType: options.contentType, ...(options.size !== undefined ? { ContentLength: options.size } : {}) });
      const signed = [...(options.contentType !== undefined ? ["content-type"] : []), ...(options.size !== undefined ? ["content-length"] : [])];
      return getSignedUrl(client, command, {
        expiresIn: options.expiresIn,
        ...(signed.length > 0 ? { signableHeaders: new Set(signed) } : {}),
      });
    },

    multipart: s3Multipart({ client, Bucket, requestTimeout, head: (key) => store.head(key) }),

    async ping() {
      try {
        await client.send(new HeadBucketCommand({ Bucket }));
      } catch (err) {
        const e = new StoreError("Unavailable", `S3 bucket ${Bucket} is not reachable: ${describeError(err)}`);
        e.cause = err;
        throw e;
      }
    },
  };
  return guardKeys(store);
}

// ---- multipart uploads --------------------------------------------------------------------

interface MultipartDeps {
  client: S3Client;
  Bucket: string;
  requestTimeout: number;
  head(key: string): Promise<ObjectInfo | undefined>;
}


/** The ETag S3 gives an object made of parts with these (hex MD5) etags: the MD5 of their MD5s, then `-<count>`. */
function multipartEtag(etags: readonly string[]): string | undefined {
  if (!etags.every((e) => /^[0-9a-f]{32}$/.test(e))) return undefined;
  return `${createHash("md5").update(Buffer.concat(etags.map((e) => Buffer.from(e, "hex")))).digest("hex")}-${etags.length}`;
}

/** S3's multipart errors → StoreError (the port's codes), then the general mapping. */
function mapMultipartError(err: unknown, key: string, uploadId: string): unknown {
  const name = (err as SdkError | undefined)?.name;
  let mapped: StoreError | undefined;
  if (name === "NoSuchUpload") mapped = new StoreError("NotFound", `no such upload ${uploadId} of ${key} (completed or aborted)`);
  else if (name === "InvalidPart" || name === "InvalidPartOrder" || name === "EntityTooSmall") {
    mapped = new StoreError("PreconditionFailed", `${key}: ${describeError(err)}`);
  } else if (name === "BadDigest") mapped = new StoreError("BadDigest", `${key}: the Content-MD5 does not match the part's bytes`);
  if (!mapped) return mapError(err, key);
  mapped.cause = err;
  return mapped;
}

/** The parts given to complete, in part order, numbered 1..N without a gap or a repeat (else PreconditionFailed). */
function orderedParts(key: string, parts: ReadonlyArray<{ partNumber: number; etag: string }>): CompletedPart[] {
  if (parts.length === 0) throw new StoreError("PreconditionFailed", `${key}: no parts given`);
  const sorted = [...parts].sort((a, b) => a.partNumber - b.partNumber);
  sorted.forEach((p, i) => {
    if (p.partNumber !== i + 1) {
      throw new StoreError("PreconditionFailed", p.partNumber === i ? `${key}: part ${i} is given twice` : `${key}: part ${i + 1} is missing from the parts given`);
    }
  });
  return sorted.map((p) => ({ PartNumber: p.partNumber, ETag: `"${plainEtag(p.etag)}"` }));
}

/** The S3 store's MultipartUploads (S3's own multipart uploads; the module comment says how the port's promises are kept). */
function s3Multipart({ client, Bucket, requestTimeout, head }: MultipartDeps): MultipartUploads {
  async function listParts(key: string, uploadId: string): Promise<UploadedPart[]> {
    const parts: UploadedPart[] = [];
    let marker: string | undefined;
    try {
      for (let page = 0; page <= MAX_PARTS / LIST_PAGE; page++) {
        const out = await client.send(new ListPartsCommand({ Bucket, Key: key, UploadId: uploadId, MaxParts: LIST_PAGE, PartNumberMarker: marker }));
        for (const p of out.Parts ?? []) {
          if (p.PartNumber !== undefined) parts.push({ partNumber: p.PartNumber, size: p.Size ?? 0, etag: plainEtag(p.ETag ?? "") });
        }
        if (out.IsTruncated !== true || out.NextPartNumberMarker === undefined) break;
        marker = out.NextPartNumberMarker;
      }
    } catch (err) {
      throw mapMultipartError(err, key, uploadId);
    }
    return parts.sort((a, b) => a.partNumber - b.partNumber);
  }

  async function complete(key: string, uploadId: string, given: ReadonlyArray<{ partNumber: number; etag: string }>): Promise<ObjectInfo> {
    const Parts = orderedParts(key, given);
    try {
      await client.send(new CompleteMultipartUploadCommand({ Bucket, Key: key, UploadId: uploadId, MultipartUpload: { Parts } }),
        { requestTimeout: requestTimeout + COMPLETE_BASE_MS + COMPLETE_MS_PER_PART * Parts.length });
    } catch (err) {
      // An attempt that S3 carried out but whose answer was lost: the retry hears NoSuchUpload,
      // and the object at the key is the one these parts make.
      const expected = multipartEtag(Parts.map((p) => plainEtag(p.ETag ?? "")));
      const done = (err as SdkError | undefined)?.name === "NoSuchUpload" && expected !== undefined ? await head(key).catch(() => undefined) : undefined;
      if (!done || done.etag === undefined || plainEtag(done.etag) !== expected) throw mapMultipartError(err, key, uploadId);
    }
    const info = await head(key);
    if (!info) throw new StoreError("NotFound", `${key} vanished right after its upload completed`);
    return info;
  }

  async function listOpen(before: Date, limit: number): Promise<OpenUpload[]> {
    const open: OpenUpload[] = [];
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    try {
      while (open.length < limit) {
        const out = await client.send(new ListMultipartUploadsCommand({ Bucket, MaxUploads: LIST_PAGE, KeyMarker: keyMarker, UploadIdMarker: uploadIdMarker }));
        for (const u of out.Uploads ?? []) {
          if (u.Key === undefined || u.UploadId === undefined || u.Initiated === undefined) continue;
          if (u.Initiated.getTime() < before.getTime() && open.length < limit) open.push({ key: u.Key, uploadId: u.UploadId, initiated: u.Initiated });
        }
        if (out.IsTruncated !== true || (out.NextKeyMarker === undefined && out.NextUploadIdMarker === undefined)) break;
        keyMarker = out.NextKeyMarker;
        uploadIdMarker = out.NextUploadIdMarker;
      }
    } catch (err) {
      throw mapError(err, "");
    }
    return open;
  }

  return {
    async create(key, o) {
      checkUploadShape(o.size, o.partSize);
      try {
        const out = await client.send(new CreateMultipartUploadCommand({
          Bucket, Key: key, ContentType: o.contentType ?? DEFAULT_CONTENT_TYPE, Metadata: toS3UserMetadata(o.metadata),
        }));
        if (!out.UploadId) throw new Error(`S3 CreateMultipartUpload for ${key} returned no UploadId`);
        return out.UploadId;
      } catch (err) {
        throw mapError(err, key);
      }
    },

    // Content-Length is signed: S3 refuses a body of another length (403). A Content-MD5 the
    // client adds is not signed, and S3 still checks it against the bytes (400 BadDigest).
    async presignPart(key, uploadId, partNumber, o) {
      if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > MAX_PARTS) throw new RangeError(`part number ${partNumber}: 1..${MAX_PARTS}`);
      if (!Number.isSafeInteger(o.size) || o.size < 0) throw new RangeError(`part size ${o.size}`);
      const command = new UploadPartCommand({ Bucket, Key: key, UploadId: uploadId, PartNumber: partNumber, ContentLength: o.size });
      return getSignedUrl(client, command, { expiresIn: o.expiresIn, signableHeaders: new Set(["content-length"]) });
    },

    listParts,
    complete,

    async abort(key, uploadId) {
      try {
        await client.send(new AbortMultipartUploadCommand({ Bucket, Key: key, UploadId: uploadId }));
      } catch (err) {
        if ((err as SdkError | undefined)?.name === "NoSuchUpload" || isNotFound(err)) return;
        throw mapMultipartError(err, key, uploadId);
      }
    },

    listOpen,
  };
}

function copySource(bucket: string, key: string): string {
  return `${bucket}/${key.split("/").map(encodeURIComponent).join("/")}`;
}

function checkRange(key: string, range: ByteRange): void {
  const { start, end } = range;
  if (!Number.isSafeInteger(start) || start < 0 || (end !== undefined && (!Number.isSafeInteger(end) || end < start))) {
    throw new StoreError("RangeNotSatisfiable", `${key}: invalid range ${start}-${end ?? ""}`);
  }
}

/** `bytes 10-19/100` → { start: 10, end: 19, total: 100 }. */
function parseContentRange(header: string | undefined): { start: number; end: number; total: number } | undefined {
  const m = header ? /^bytes (\d+)-(\d+)\/(\d+)$/.exec(header.trim()) : null;
  if (!m) return undefined;
  return { start: Number(m[1]), end: Number(m[2]), total: Number(m[3]) };
}

function sameEtag(a: string | undefined, b: string): boolean {
  const strip = (s: string) => s.replace(/^W\//, "").replace(/^"(.*)"$/, "$1");
  return a !== undefined && strip(a) === strip(b);
}

// ---- metadata -----------------------------------------------------------------------------

const RFC2047 = /^=\?UTF-8\?B\?([A-Za-z0-9+/]*={0,2})\?=$/i;

function encodeMetadataValue(value: string): string {
  if (/^[\x20-\x7e]*$/.test(value) && value.trim() === value && !RFC2047.test(value)) return value;
  return `=?UTF-8?B?${Buffer.from(value, "utf8").toString("base64")}?=`;
}

function decodeMetadataValue(value: string): string {
  const m = RFC2047.exec(value);
  return m ? Buffer.from(m[1] ?? "", "base64").toString("utf8") : value;
}

/** User metadata as the store returns it: lower-case keys, without the reserved `sha256`. */
function normalizeMetadata(metadata: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(metadata ?? {})) {
    const key = k.toLowerCase();
    if (key !== SHA256_KEY) out[key] = v;
  }
  return out;
}

/** User metadata as sent to S3, without a checksum (a multipart upload's: its sha256 comes later). */
function toS3UserMetadata(metadata: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(normalizeMetadata(metadata))) out[k] = encodeMetadataValue(v);
  return out;
}

function toS3Metadata(sha256: string, metadata: Record<string, string> | undefined): Record<string, string> {
  return { ...toS3UserMetadata(metadata), [SHA256_KEY]: sha256 };
}

function fromS3Metadata(raw: Record<string, string> | undefined): { sha256?: string; metadata: Record<string, string> } {
  const metadata: Record<string, string> = {};
  let sha256: string | undefined;
  for (const [k, v] of Object.entries(raw ?? {})) {
    const key = k.toLowerCase();
    if (key === SHA256_KEY) sha256 = v.toLowerCase();
    else metadata[key] = decodeMetadataValue(v);
  }
  return sha256 !== undefined ? { sha256, metadata } : { metadata };
}

// ---- errors -------------------------------------------------------------------------------

interface SdkError {
  name?: string;
  code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number };
}

function statusOf(err: unknown): number | undefined {
  return (err as SdkError | undefined)?.$metadata?.httpStatusCode;
}

function isNotFound(err: unknown): boolean {
  const name = (err as SdkError | undefined)?.name;
  if (name === "NoSuchBucket") return false;
  return name === "NoSuchKey" || name === "NotFound" || statusOf(err) === 404;
}

/**
 * The Node error code of a failure to reach the store: on the error itself, its cause, or
 * the attempts of an AggregateError (a host name with several addresses, all refused).
 */
function networkCode(err: unknown, depth = 0): string | undefined {
  if (!err || typeof err !== "object" || depth > 3) return undefined;
  const e = err as { code?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === "string" && NETWORK_ERROR_CODES.has(e.code)) return e.code;
  const nested = [e.cause, ...(Array.isArray(e.errors) ? e.errors : [])];
  for (const n of nested) {
    const code = networkCode(n, depth + 1);
    if (code !== undefined) return code;
  }
  return undefined;
}

/**
 * Whether `err` says the store is out of reach or failing (so a later retry may succeed):
 * a network failure or timeout, or a 5xx answer other than 501/505 (not implemented, which
 * no retry mends).
 */
function isOutage(err: unknown): boolean {
  if (err instanceof StoreError) return err.code === "Unavailable";
  const e = err as SdkError | undefined;
  const status = statusOf(err);
  return (status !== undefined && status >= 500 && status !== 501 && status !== 505) ||
    (e?.name !== undefined && OUTAGE_ERROR_NAMES.has(e.name)) || networkCode(err) !== undefined;
}

function describeError(err: unknown): string {
  const e = err as SdkError | undefined;
  const status = statusOf(err);
  const code = e?.code ?? networkCode(err);
  return [e?.name, code, status !== undefined ? `HTTP ${status}` : undefined, e?.message]
    .filter((s) => s !== undefined && s !== "").join(": ") || String(err);
}

/** S3 errors → StoreError where the port names the case; anything else is rethrown as is. */
function mapError(err: unknown, key: string): unknown {
  if (err instanceof StoreError) return err;
  const e = err as SdkError | undefined;
  const status = statusOf(err);
  let mapped: StoreError | undefined;
  if (e?.name === "NoSuchBucket") mapped = new StoreError("Unavailable", `bucket missing: ${describeError(err)}`);
  else if (isNotFound(err)) mapped = new StoreError("NotFound", `${key} does not exist`);
  else if (status === 412 || e?.name === "PreconditionFailed" || e?.name === "ConditionalRequestConflict") {
    mapped = new StoreError("PreconditionFailed", `${key}: precondition failed`);
  } else if (status === 416 || e?.name === "InvalidRange") {
    mapped = new StoreError("RangeNotSatisfiable", `${key}: range not satisfiable`);
  } else if (isOutage(err)) {
    mapped = new StoreError("Unavailable", `object store unavailable: ${describeError(err)}`);
  }
  if (!mapped) return err;
  mapped.cause = err;
  return mapped;
}

/** Runs `fn` over `items` with at most `limit` in flight; stops starting new ones after a failure. */
async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let failed = false;
  async function worker(): Promise<void> {
    while (!failed && next < items.length) {
      const i = next++;
      try {
        results[i] = await fn(items[i] as T, i);
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
