/**
 * Ports: the interfaces through which Operon's logic reaches the outside world. core/ only
 * declares them; adapters/ implement them (filesystem, S3, Kubernetes), so the engine and
 * every HTTP route are the same code in embedded and cluster mode (DESIGN §3).
 */

/** Bytes as a stream: a Node Readable satisfies it, and so does any async iterable of chunks. */
export type ByteStream = AsyncIterable<Uint8Array>;

export interface ObjectInfo {
  /** Full storage key, e.g. `orgs/acme/workspaces/ws1/reads/s1.fastq`. */
  key: string;
  size: number;
  lastModified: Date;
  etag?: string;
  contentType?: string;
  /** Lowercase hex SHA-256 of the content, when the store knows it (always for Operon's writes). */
  sha256?: string;
  /** User metadata (e.g. `description`). */
  metadata?: Record<string, string>;
}

export interface PutOptions {
  contentType?: string;
  metadata?: Record<string, string>;
  /** Refuse to overwrite: fail with PreconditionFailed when the key exists. */
  ifNoneMatch?: "*";
  /** Only replace the object whose etag is this (optimistic concurrency). */
  ifMatch?: string;
  /** Stop and fail with TooLarge once more than this many bytes arrive; nothing is stored. */
  maxBytes?: number;
}

export interface ByteRange { start: number; end?: number }

export interface GetResult {
  body: ByteStream & { destroy?(error?: Error): void };
  info: ObjectInfo;
  /** Set when a range was served: the inclusive byte range and the object's total size. */
  range?: { start: number; end: number; total: number };
}

export interface ListPage {
  items: ObjectInfo[];
  /** Opaque; pass back as `cursor` for the next page. Absent on the last page. */
  nextCursor?: string;
}

export interface ListOptions {
  cursor?: string;
  limit: number;
  /** Also fill contentType, sha256 and metadata (costs a HEAD per object on S3). */
  withMetadata?: boolean;
}

export interface PresignOptions {
  /** Seconds until the URL stops working. */
  expiresIn: number;
  contentType?: string;
  range?: ByteRange;
}

/** Object storage (DESIGN §3). Keys are full storage keys; callers have already validated them. */
export interface ObjectStore {
  /** Streams `body` into `key`. The object appears only once complete (never half written). */
  put(key: string, body: ByteStream | Uint8Array | string, options?: PutOptions): Promise<ObjectInfo>;
  /** Throws NotFound when absent; RangeNotSatisfiable for a bad range. */
  get(key: string, range?: ByteRange): Promise<GetResult>;
  head(key: string): Promise<ObjectInfo | undefined>;
  /** Lexicographic order by key, `limit` at most per page. */
  list(prefix: string, options: ListOptions): Promise<ListPage>;
  /** Deleting an absent key is not an error. */
  delete(key: string): Promise<void>;
  /** Records the sha256 (and metadata) of an object written directly (presigned PUT). */
  describe(key: string, info: { sha256: string; contentType?: string; metadata?: Record<string, string> }): Promise<ObjectInfo>;
  presignGet(key: string, options: PresignOptions): Promise<string>;
  presignPut(key: string, options: PresignOptions): Promise<string>;
  /** Liveness of the backing store, for /readyz. */
  ping(): Promise<void>;
  /**
   * Optional: a number that changes whenever this store writes or deletes anything, for
   * stores that own their data (the local one). Lets callers cache listings safely.
   */
  version?(): number;
}

/** Errors every ObjectStore adapter throws, so callers can map them to HTTP statuses. */
export class StoreError extends Error {
  constructor(readonly code: "NotFound" | "PreconditionFailed" | "TooLarge" | "RangeNotSatisfiable" | "Unavailable", message: string) {
    super(message);
    this.name = "StoreError";
  }
}

/** Time, injectable so that TTLs, expiry and timeouts are testable. */
export interface Clock {
  now(): number;
}
