/**
 * Presigned URLs for embedded mode: the api-server itself serves them, so they are
 * HMAC-SHA256 signatures over method, key, expiry, content type and (PUT) the exact size,
 * checked in constant time. A tampered or expired URL is refused (403); the secret never
 * leaves the server. Part URLs of a multipart upload (PUT only, reusable until they expire)
 * are signed over key, upload id, part number, exact size and expiry.
 */
import { createHmac, timingSafeEqual } from "node:crypto";

export const PRESIGNED_PATH = "/v1/storage/object";
/** Where the api-server takes the parts of the local store's multipart uploads (PUT). */
export const PRESIGNED_PART_PATH = "/v1/storage/part";

export interface PresignParams {
  method: "GET" | "PUT";
  key: string;
  /** Unix seconds. */
  expires: number;
  contentType?: string;
  /** PUT: the exact size of the body. */
  size?: number;
}

function signature(secret: string, p: PresignParams): string {
  return createHmac("sha256", secret).update(`${p.method}\n${p.key}\n${p.expires}\n${p.contentType ?? ""}\n${p.size ?? ""}`).digest("hex");
}

export function presignUrl(baseUrl: string, secret: string, p: PresignParams): string {
  const q = new URLSearchParams({ key: p.key, method: p.method, expires: String(p.expires) });
  if (p.contentType) q.set("content_type", p.contentType);
  if (p.size !== undefined) q.set("size", String(p.size));
  q.set("signature", signature(secret, p));
  return `${baseUrl.replace(/\/+$/, "")}${PRESIGNED_PATH}?${q.toString()}`;
}

export type PresignCheck = { ok: true; key: string; signature: string; contentType?: string; size?: number } | { ok: false; reason: string };

/** Checks a presigned request's query against the method it arrived with and the time now. */
export function verifyPresigned(secret: string, method: string, query: Record<string, unknown>, nowMs: number): PresignCheck {
  const key = query.key;
  const m = query.method;
  const expires = Number(query.expires);
  const sig = query.signature;
  const contentType = typeof query.content_type === "string" ? query.content_type : undefined;
  const size = query.size === undefined ? undefined : typeof query.size === "string" && /^\d{1,15}$/.test(query.size) ? Number(query.size) : NaN;
  if (typeof key !== "string" || typeof sig !== "string" || typeof m !== "string" || !Number.isSafeInteger(expires) || Number.isNaN(size)) return { ok: false, reason: "malformed presigned URL" };
  if (m !== method) return { ok: false, reason: `this URL is signed for ${m}, not ${method}` };
  const expected = Buffer.from(signature(secret, { method: m as "GET" | "PUT", key, expires, ...(contentType ? { contentType } : {}), ...(size !== undefined ? { size } : {}) }), "hex");
  const given = Buffer.from(/^[0-9a-f]{64}$/.test(sig) ? sig : "", "hex");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, reason: "signature does not match" };
  if (expires * 1000 < nowMs) return { ok: false, reason: "presigned URL has expired" };
  return { ok: true, key, signature: sig, ...(contentType ? { contentType } : {}), ...(size !== undefined ? { size } : {}) };
}

export interface PartPresignParams {
  key: string;
  uploadId: string;
  partNumber: number;
  /** The exact size of the part's body. */
  size: number;
  /** Unix seconds. */
  expires: number;
}

function partSignature(secret: string, p: PartPresignParams): string {
  return createHmac("sha256", secret).update(`PART\n${p.key}\n${p.uploadId}\n${p.partNumber}\n${p.size}\n${p.expires}`).digest("hex");
}

export function presignPartUrl(baseUrl: string, secret: string, p: PartPresignParams): string {
  const q = new URLSearchParams({
    key: p.key, upload_id: p.uploadId, part_number: String(p.partNumber), size: String(p.size), expires: String(p.expires),
  });
  q.set("signature", partSignature(secret, p));
  return `${baseUrl.replace(/\/+$/, "")}${PRESIGNED_PART_PATH}?${q.toString()}`;
}

export type PartPresignCheck = ({ ok: true } & Omit<PartPresignParams, "expires">) | { ok: false; reason: string };

/** Checks a part URL's query against the method it arrived with (PUT only) and the time now. */
export function verifyPresignedPart(secret: string, method: string, query: Record<string, unknown>, nowMs: number): PartPresignCheck {
  const { key, upload_id: uploadId, signature: sig } = query;
  const int = (v: unknown) => (typeof v === "string" && /^\d{1,15}$/.test(v) ? Number(v) : NaN);
  const partNumber = int(query.part_number);
  const size = int(query.size);
  const expires = int(query.expires);
  if (typeof key !== "string" || typeof uploadId !== "string" || typeof sig !== "string" || [partNumber, size, expires].some(Number.isNaN)) {
    return { ok: false, reason: "malformed presigned URL" };
  }
  if (method !== "PUT") return { ok: false, reason: `this URL is signed for PUT, not ${method}` };
  const expected = Buffer.from(partSignature(secret, { key, uploadId, partNumber, size, expires }), "hex");
  const given = Buffer.from(/^[0-9a-f]{64}$/.test(sig) ? sig : "", "hex");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, reason: "signature does not match" };
  if (expires * 1000 < nowMs) return { ok: false, reason: "presigned URL has expired" };
  return { ok: true, key, uploadId, partNumber, size };
}
