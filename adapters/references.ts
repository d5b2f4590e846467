/**
 * Reading reference data for the record, in one place for both modes: embedded mode's process
 * executor (volumes at the host directories OPERON_REF_VOLUMES names) and the cluster's stage-in
 * helper (volumes mounted at /ref/<name> in the step pod). For each `ref://<volume>/<path>` a
 * step names: where it is on this machine — refusing one that is malformed, whose path does not
 * match its URI, or whose real path (symbolic links followed) leaves its volume's directory —
 * and its SHA-256 and size, streamed (a genome is gigabytes), cached in this process per (real
 * path, size, mtime). A directory (an ANNOVAR database) gets the digest of its listing, names
 * and sizes (core/references.ts `listingText`), not of every byte. Messages name the URI, never
 * a host path.
 */
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { lstat, readdir, realpath, stat } from "node:fs/promises";
import { isAbsolute, join, relative, sep } from "node:path";
import { pipeline } from "node:stream/promises";
import { parseReferenceUri } from "../core/paths.js";
import { listingText, referenceMountPath, type ListingEntry, type ReferenceChecksum, type ReferenceInput } from "../core/references.js";

/** A directory reference holding more entries than this is refused (its listing is walked for each step). */
export const MAX_DIRECTORY_ENTRIES = 100_000;

/** Where a volume's files are on this machine; undefined: the volume is not configured (or mounted) here. */
export type VolumeRoots = (volume: string) => string | undefined;

export interface LocatedReference {
  uri: string;
  volume: string;
  /** The volume directory's real path (what the sandbox mounts at /ref/<volume>). */
  volumeDir: string;
  /** The reference's real path, inside `volumeDir`. */
  real: string;
}

/** Hashes by (real path, size, mtime): a reference read again (every run of a lab) is not read again. */
export class ChecksumCache {
  private readonly entries = new Map<string, Promise<string>>();
  constructor(private readonly max = 1024) {}

  sha256(real: string, size: number, mtimeMs: number): Promise<string> {
    const key = `${real}\0${size}\0${mtimeMs}`;
    let p = this.entries.get(key);
    if (!p) {
      p = hashFile(real);
      this.entries.set(key, p);
      p.catch(() => { if (this.entries.get(key) === p) this.entries.delete(key); });
      // Oldest first out (Map keeps insertion order).
      while (this.entries.size > this.max) this.entries.delete(this.entries.keys().next().value as string);
    }
    return p;
  }

  get size(): number { return this.entries.size; }
}

async function hashFile(path: string): Promise<string> {
  const h = createHash("sha256");
  await pipeline(createReadStream(path), h);
  return h.digest("hex");
}

const inside = (dir: string, path: string): boolean => {
  const rel = relative(dir, path);
  return rel === "" || (rel !== ".." && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
};

/**
 * Where a reference is, checked: its URI well formed, its path `/ref/<volume>/<path>` of that
 * URI, its volume there, and its real path inside the volume's real directory.
 */
export async function locateReference(ref: Pick<ReferenceInput, "uri" | "path">, roots: VolumeRoots): Promise<LocatedReference> {
  const r = parseReferenceUri(ref.uri);
  if (!r.ok) throw new Error(`reference ${JSON.stringify(ref.uri.slice(0, 200))}: ${r.reason}`);
  if (r.uri !== ref.uri || ref.path !== referenceMountPath(r.volume, r.path)) throw new Error(`reference ${r.uri}: its path ${JSON.stringify(ref.path.slice(0, 200))} is not ${referenceMountPath(r.volume, r.path)}`);
  const root = roots(r.volume);
  if (root === undefined) throw new Error(`reference ${r.uri}: reference volume "${r.volume}" is not configured here`);
  let volumeDir: string;
  try { volumeDir = await realpath(root); } catch (e) { throw new Error(`reference ${r.uri}: reference volume "${r.volume}" is not available (its directory cannot be read)`, { cause: e }); }
  let real: string;
  try {
    real = await realpath(join(volumeDir, r.path));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new Error(`reference ${r.uri}: ${code === "ENOENT" || code === "ENOTDIR" ? `not found on reference volume "${r.volume}"` : `cannot be read (${code ?? "error"})`}`, { cause: e });
  }
  if (!inside(volumeDir, real)) throw new Error(`reference ${r.uri} resolves outside reference volume "${r.volume}" (a symbolic link leading out of it): refused`);
  return { uri: r.uri, volume: r.volume, volumeDir, real };
}

/** The listing of a directory reference: every regular file below it, each checked to stay inside the volume. */
async function listDirectory(loc: LocatedReference): Promise<ListingEntry[]> {
  const entries: ListingEntry[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const d of await readdir(dir, { withFileTypes: true })) {
      const full = join(dir, d.name);
      let target = full;
      if (d.isSymbolicLink()) {
        target = await realpath(full).catch(() => "");
        if (target === "") continue; // dangling: nothing the tool could read
        if (!inside(loc.volumeDir, target)) throw new Error(`reference ${loc.uri}: ${relative(loc.real, full)} resolves outside reference volume "${loc.volume}" (a symbolic link leading out of it): refused`);
      }
      const st = d.isSymbolicLink() ? await stat(target) : await lstat(full);
      if (st.isDirectory()) { if (!d.isSymbolicLink()) await walk(full); continue; }
      if (!st.isFile()) continue;
      if (entries.length >= MAX_DIRECTORY_ENTRIES) throw new Error(`reference ${loc.uri}: the directory holds more than ${MAX_DIRECTORY_ENTRIES} files`);
      entries.push({ path: relative(loc.real, full).split(sep).join("/"), size: st.size });
    }
  };
  await walk(loc.real);
  return entries;
}

/** The checksum of one located reference: a file's SHA-256, or a directory's listing digest. */
export async function checksumReference(loc: LocatedReference, cache?: ChecksumCache): Promise<ReferenceChecksum> {
  const st = await stat(loc.real);
  if (st.isDirectory()) {
    const entries = await listDirectory(loc);
    const sha256 = createHash("sha256").update(listingText(entries)).digest("hex");
    return { uri: loc.uri, sha256, size: entries.reduce((n, e) => n + e.size, 0), kind: "directory" };
  }
  if (!st.isFile()) throw new Error(`reference ${loc.uri}: not a regular file or directory`);
  const sha256 = cache ? await cache.sha256(loc.real, st.size, st.mtimeMs) : await hashFile(loc.real);
  return { uri: loc.uri, sha256, size: st.size };
}

/**
 * Every reference of a step, located and checksummed, in order; and the volumes they use
 * (name → real directory), for the sandbox to mount. All are located before any is read.
 */
export async function checksumReferences(refs: ReadonlyArray<Pick<ReferenceInput, "uri" | "path">>, roots: VolumeRoots, cache?: ChecksumCache): Promise<{ checksums: ReferenceChecksum[]; volumes: Map<string, string> }> {
  const located = [];
  for (const ref of refs) located.push(await locateReference(ref, roots));
  const checksums: ReferenceChecksum[] = [];
  for (const loc of located) checksums.push(await checksumReference(loc, cache));
  return { checksums, volumes: new Map(located.map((l) => [l.volume, l.volumeDir])) };
}
