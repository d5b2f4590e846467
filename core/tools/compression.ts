/**
 * Compressed files (docs/pipelines.md#compressed-inputs), the pure part: what a file's name
 * says of its compression, what its first bytes say (gzip, or bgzip — gzip whose every block
 * carries the `BC` extra field, so tools can read it at random through an index), and whether
 * a file parameter that reads `plain`, `bgzip` or `gzip` (types.ts `Reads`, declared beside
 * each tool) can read it. core/spec/compression.ts applies this to a run's steps.
 */
import type { Reads, ToolDefinition } from "./types.js";

/**
 * A file's compression: `none`; `gzip` (plain gzip, one stream) or `bgzip`, known from its
 * bytes; `gz` when only its name is known (`.gz`, `.bgz`): gzip or bgzip, not known which.
 */
export type Compression = "none" | "gzip" | "bgzip" | "gz";

/** Bytes of a file's start that `compressionFromBytes` needs (the gzip header up to the first extra subfield). */
export const COMPRESSION_PROBE_BYTES = 18;

/**
 * From the name alone: a `.gz` or `.bgz` file is compressed (which gzip, unknown). Formats
 * that are BGZF inside (BAM, BCF, CRAM's own codecs) are not "compressed files" here: the
 * tools that read them read them as such.
 */
export function compressionFromName(path: string): Compression {
  return /\.b?gz$/i.test(path) ? "gz" : "none";
}

/** From the first bytes (at least COMPRESSION_PROBE_BYTES of them, or the whole file when shorter). */
export function compressionFromBytes(head: Uint8Array): "none" | "gzip" | "bgzip" {
  if (head.length < 3 || head[0] !== 0x1f || head[1] !== 0x8b || head[2] !== 8) return "none";
  // RFC 1952: FLG.FEXTRA, then XLEN; BGZF's first subfield is SI1 'B', SI2 'C', SLEN 2.
  const fextra = ((head[3] ?? 0) & 4) !== 0;
  const bgzf = fextra && head[12] === 0x42 && head[13] === 0x43 && head[14] === 2 && head[15] === 0;
  return bgzf ? "bgzip" : "gzip";
}

/**
 * Why a parameter that reads `reads` cannot read a file of compression `c`: `compressed` (it
 * reads uncompressed files only), `gzip` (it needs bgzip, the file is plain gzip); undefined
 * when it can, or when that is not known yet (`gz` where bgzip would do: its bytes decide).
 */
export function unreadable(reads: Reads, c: Compression): "compressed" | "gzip" | undefined {
  if (c === "none") return undefined;
  if (reads === "plain") return "compressed";
  if (reads === "bgzip" && c === "gzip") return "gzip";
  return undefined;
}

/** What a command's file parameter reads (`inputFiles/3` is `inputFiles`): the command's own declaration, else the tool's; undefined when neither names it. */
export function readsOf(tool: ToolDefinition, command: string, param: string): Reads | undefined {
  const top = param.split("/")[0] as string;
  const own = tool.commands[command]?.reads;
  return own && Object.hasOwn(own, top) ? own[top] : tool.reads && Object.hasOwn(tool.reads, top) ? tool.reads[top] : undefined;
}

/** What to do about a file a parameter cannot read, in a user's words. */
export function advice(why: "compressed" | "gzip"): string {
  return why === "compressed"
    ? "decompress it (gunzip) and give the uncompressed file"
    : "recompress it with bgzip (decompress it, then bgzip the uncompressed file: the tabix tool's bgzip command does that step), or give the uncompressed file";
}

/** The forms a `Reads` accepts, in words. */
export function readsInWords(reads: Reads): string {
  return reads === "plain" ? "uncompressed only" : reads === "bgzip" ? "uncompressed or bgzip-compressed only (it reads at random through an index)" : "uncompressed, gzip or bgzip";
}
