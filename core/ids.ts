/** Identifiers: run ids are `run-` + a lowercase ULID (time-ordered, 26 characters). */
const CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz";

/** A lowercase ULID from a time in ms and 10 random bytes supplied by the caller (core stays pure). */
export function ulid(timeMs: number, random: Uint8Array): string {
  let t = "";
  let ms = Math.floor(timeMs);
  for (let i = 0; i < 10; i++) { t = (CROCKFORD[ms % 32] as string) + t; ms = Math.floor(ms / 32); }
  let r = "";
  let bits = 0;
  let value = 0;
  for (const byte of random.subarray(0, 10)) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) { r += CROCKFORD[(value >> (bits - 5)) & 31]; bits -= 5; }
  }
  return t + r.slice(0, 16).padEnd(16, "0");
}

export const RUN_ID = /^run-[0-9a-z]{26}$/;

/** Organization, workspace, key and conversation ids: 1–63 letters, digits, `_` or `-`, starting with a letter or digit. */
export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/;

/** The run folder name: a UTC timestamp, `2026-11-21T22-40-05Z` (docs/storage.md#run-folders). */
export function runFolderName(timeMs: number): string {
  return new Date(timeMs).toISOString().replace(/\.\d{3}Z$/, "Z").replace(/:/g, "-");
}
