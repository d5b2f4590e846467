/**
 * Viewer-link tokens: a ViewerGrant (core/viewers.ts) as base64url JSON, signed with
 * HMAC-SHA256 under a key derived from the signing secret for this purpose only (a token can
 * never pass as a presigned storage URL, nor the reverse). Verification is constant-time and
 * checks the signature before it reads the payload; expiry is checked after, so a tampered
 * link is 403 and only a genuine, expired one is 410. Render previews (issue 15) reuse it.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { isViewerGrant, type ViewerGrant } from "../core/viewers.js";
import { OperonError } from "../core/errors.js";

const keys = new Map<string, Buffer>();
function linkKey(secret: string): Buffer {
  let k = keys.get(secret);
  if (!k) { k = createHmac("sha256", secret).update("operon viewer link v1").digest(); keys.set(secret, k); }
  return k;
}

const mac = (secret: string, payload: string) => createHmac("sha256", linkKey(secret)).update(payload).digest();

export function signGrant(secret: string, grant: ViewerGrant): string {
  const payload = Buffer.from(JSON.stringify(grant)).toString("base64url");
  return `${payload}.${mac(secret, payload).toString("base64url")}`;
}

/** A token's grant, or why not: `forbidden` (altered, cut short, not a grant) or `gone` (expired). */
export type GrantCheck = { ok: true; grant: ViewerGrant } | { ok: false; error: OperonError };

/** Longest token accepted (a grant with two 1024-character keys fits well within it). */
export const MAX_TOKEN_CHARS = 4096;

export function verifyGrant(secret: string, token: string, nowMs: number): GrantCheck {
  const tampered = { ok: false as const, error: new OperonError("forbidden", "this viewer link is not valid (it may have been altered or cut short)") };
  if (typeof token !== "string" || token.length > MAX_TOKEN_CHARS) return tampered;
  const m = /^([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]{43})$/.exec(token);
  if (!m) return tampered;
  const given = Buffer.from(m[2] as string, "base64url");
  const expected = mac(secret, m[1] as string);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return tampered;
  let grant: unknown;
  try { grant = JSON.parse(Buffer.from(m[1] as string, "base64url").toString("utf8")); } catch { return tampered; }
  if (!isViewerGrant(grant)) return tampered;
  if (grant.exp * 1000 <= nowMs) return { ok: false, error: new OperonError("gone", `this viewer link expired at ${new Date(grant.exp * 1000).toISOString()}; ask for a new one`) };
  return { ok: true, grant };
}
