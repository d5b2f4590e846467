/**
 * Reference data (genomes, their indexes, annotation databases) lives on read-only reference
 * volumes, not in workspaces: a step names a file on one as `ref://<volume>/<path>` (parsed by
 * core/paths.ts `parseReferenceUri`) and its tool reads it in place at `/ref/<volume>/<path>`,
 * in both modes — nothing is staged or copied. This module holds the pure decisions around
 * that: the configured volume names a reference must name, where the tool sees it, how many a
 * step may name, and the report the cluster's stage-in helper hands the operator (the
 * checksums run.json records, within Kubernetes' 4 KiB termination message). Reading the
 * files and hashing them is the executors' (adapters/references.ts).
 */
import { parseReferenceUri } from "./paths.js";

/** Where reference volumes are mounted for the tool (the sandbox's bind, the pod's volumeMount). */
export const REFERENCE_ROOT = "/ref";
/**
 * A step names at most this many references, so that the stage-in helper's report of their
 * checksums always fits in a termination message (see `referencesReport`).
 */
export const MAX_REFERENCES_PER_STEP = 32;
/** The volume ANNOVAR's bare database names (`database: humandb`) live on: `/ref/annovar/humandb`. */
export const ANNOVAR_VOLUME = "annovar";

/** A reference a step's invocation names: where the tool sees it. */
export interface ReferenceInput {
  /** The parameter it came from (`reference`, `inputFiles/2`, `database`). */
  param: string;
  /** The normalized `ref://<volume>/<path>`. */
  uri: string;
  /** Where the tool reads it: `/ref/<volume>/<path>`. */
  path: string;
}

/**
 * A reference as run.json records it. `sha256` and `size` are known once the executor read it
 * (before the tool ran); for a directory (`kind: "directory"`, e.g. an ANNOVAR database)
 * `size` is the total of its files and `sha256` the digest of its listing (see `listingText`),
 * not of the files' contents.
 */
export interface StepReference {
  uri: string;
  sha256?: string;
  size?: number;
  kind?: "directory";
}

/** A checksum an executor computed; the cluster's may come without its URI (matched by position). */
export interface ReferenceChecksum {
  uri?: string;
  sha256: string;
  size: number;
  kind?: "directory";
}

/** `/ref/<volume>/<path>` for a parsed reference. */
export const referenceMountPath = (volume: string, path: string): string => `${REFERENCE_ROOT}/${volume}/${path}`;

/** The volumes the configuration names, in words, for error messages. */
function configured(volumes: readonly string[]): string {
  return volumes.length
    ? `configured volumes: ${[...volumes].sort().join(", ")}`
    : "no reference volumes are configured (OPERON_REF_VOLUMES in embedded mode, the chart's steps.referenceVolumes in cluster mode)";
}

/**
 * Why `value` is unfit as a reference given the configured volume names; undefined when fit.
 * `volumes` undefined: not known here (an offline check), so only the form is checked.
 */
export function checkReference(value: string, volumes: readonly string[] | undefined): string | undefined {
  const r = parseReferenceUri(value);
  if (!r.ok) return `${JSON.stringify(value.slice(0, 200))}: ${r.reason}`;
  if (volumes !== undefined && !volumes.includes(r.volume)) return `${r.uri}: reference volume "${r.volume}" is not configured; ${configured(volumes)}`;
  return undefined;
}

/** Kubernetes keeps at most this many bytes of a container's termination message. */
export const TERMINATION_MESSAGE_MAX = 4096;

/**
 * The stage-in helper's termination message on success: each reference's checksum in the
 * plan's order, `{"references":[{uri,sha256,size,kind?}]}`, or without the URIs when that
 * would not fit (the operator matches them by position with what it started). With at most
 * MAX_REFERENCES_PER_STEP references the short form always fits.
 */
export function referencesReport(refs: readonly ReferenceChecksum[]): string {
  const entry = (r: ReferenceChecksum, uri: boolean) => ({ ...(uri && r.uri !== undefined ? { uri: r.uri } : {}), sha256: r.sha256, size: r.size, ...(r.kind ? { kind: r.kind } : {}) });
  const full = JSON.stringify({ references: refs.map((r) => entry(r, true)) });
  if (Buffer.byteLength(full) <= TERMINATION_MESSAGE_MAX) return full;
  const short = JSON.stringify({ references: refs.map((r) => entry(r, false)) });
  return Buffer.byteLength(short) <= TERMINATION_MESSAGE_MAX ? short : JSON.stringify({ references: null, truncated: true });
}

const SHA256 = /^[0-9a-f]{64}$/;

/** The checksums in a stage-in termination message; undefined when it holds none (or is not one). */
export function parseReferencesReport(message: string | undefined): ReferenceChecksum[] | undefined {
  if (!message || !message.startsWith("{")) return undefined;
  let j: unknown;
  try { j = JSON.parse(message); } catch { return undefined; }
  const list = (j as { references?: unknown }).references;
  if (!Array.isArray(list)) return undefined;
  const out: ReferenceChecksum[] = [];
  for (const x of list as unknown[]) {
    const e = x as Partial<ReferenceChecksum> | null;
    if (!e || typeof e.sha256 !== "string" || !SHA256.test(e.sha256) || typeof e.size !== "number" || !Number.isSafeInteger(e.size) || e.size < 0) return undefined;
    const uri = typeof e.uri === "string" && parseReferenceUri(e.uri).ok ? e.uri : undefined;
    out.push({ ...(uri ? { uri } : {}), sha256: e.sha256, size: e.size, ...(e.kind === "directory" ? { kind: "directory" as const } : {}) });
  }
  return out;
}

/**
 * A step's references for its record: the URIs it was started with (`planned`, in the
 * invocation's order), each with the checksum an executor reported for it — by URI, else by
 * position (the cluster's short report). Without a plan (a record from before), what was
 * reported stands where it names its URI.
 */
export function mergeReferences(planned: readonly string[] | undefined, reported: readonly ReferenceChecksum[] | undefined): StepReference[] | undefined {
  if (planned === undefined) {
    const named = (reported ?? []).filter((r): r is ReferenceChecksum & { uri: string } => r.uri !== undefined);
    return named.length ? named.map((r) => ({ ...r })) : undefined;
  }
  if (planned.length === 0) return undefined;
  return planned.map((uri, i) => {
    const hit = reported?.find((r) => r.uri === uri) ?? (reported?.[i] && reported[i].uri === undefined ? reported[i] : undefined);
    return hit ? { uri, sha256: hit.sha256, size: hit.size, ...(hit.kind ? { kind: hit.kind } : {}) } : { uri };
  });
}

/** One regular file of a directory reference, relative to it. */
export interface ListingEntry { path: string; size: number }

/**
 * The text a directory reference's digest is taken over: one `<relative path>\t<size>\n` line
 * per regular file, sorted by path (UTF-16 code units, as JavaScript sorts). Names and sizes
 * only: hashing every byte of an annotation database (often hundreds of GB) for each step
 * would cost more than the annotation.
 */
export function listingText(entries: readonly ListingEntry[]): string {
  return [...entries].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)).map((e) => `${e.path}\t${e.size}\n`).join("");
}
