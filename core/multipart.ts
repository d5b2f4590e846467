/**
 * The shape of a multipart upload (docs/storage.md#multipart-uploads), defined once: S3's
 * limits, which both stores keep so that embedded mode takes exactly the uploads cluster
 * mode takes, the number of parts and each part's size, and how an ETag is compared.
 */
const MiB = 1024 ** 2;
const GiB = 1024 ** 3;

/** At most this many parts, each 5 MiB to 5 GiB but the last, 5 TiB in all. */
export const MAX_PARTS = 10_000;
export const MIN_PART_BYTES = 5 * MiB;
export const MAX_PART_BYTES = 5 * GiB;
export const MAX_MULTIPART_BYTES = 5 * 1024 * GiB;

/** The number of parts of `size` bytes in parts of `partSize` (an empty upload has one, empty). */
export const partCountOf = (size: number, partSize: number) => Math.max(1, Math.ceil(size / partSize));

/** The size part `n` (1-based) must have: `partSize`, the last one the rest. */
export function partBytes(size: number, partSize: number, n: number): number {
  const count = partCountOf(size, partSize);
  return n < count ? partSize : size - (count - 1) * partSize;
}

/** Refuses (RangeError) an upload S3 would not complete; callers have validated their input already. */
export function checkUploadShape(size: number, partSize: number): void {
  if (!Number.isSafeInteger(size) || size < 0 || size > MAX_MULTIPART_BYTES) throw new RangeError(`multipart upload size ${size}: 0..${MAX_MULTIPART_BYTES} bytes`);
  if (!Number.isSafeInteger(partSize) || partSize < 1 || partSize > MAX_PART_BYTES) throw new RangeError(`multipart part size ${partSize}: at most ${MAX_PART_BYTES} bytes`);
  const count = partCountOf(size, partSize);
  if (count > MAX_PARTS) throw new RangeError(`multipart upload of ${size} bytes in parts of ${partSize}: ${count} parts, at most ${MAX_PARTS}`);
  if (count > 1 && partSize < MIN_PART_BYTES) throw new RangeError(`multipart part size ${partSize}: at least ${MIN_PART_BYTES} bytes when there are several parts`);
}

/** An ETag as compared: without W/, quotes and case. */
export const plainEtag = (etag: string) => etag.trim().replace(/^W\//, "").replace(/^"(.*)"$/, "$1").toLowerCase();
