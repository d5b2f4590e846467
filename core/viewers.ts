/**
 * Viewer links (spec: Visualizations; docs/viewers.md), the pure part: which viewer a file opens
 * in (by extension, through `.gz`), the `format` names the API speaks, region syntax, and
 * the capability a link carries. One definition, used by the route that issues links, the
 * routes that serve them and the tests.
 */

/** The `format` values of the API, one per viewer. */
export const VIEWER_FORMATS = ["vcf", "bam", "fasta", "pdb", "csv"] as const;
export type ViewerFormat = (typeof VIEWER_FORMATS)[number];

/** The page each format opens. */
export const VIEWER_KIND: Record<ViewerFormat, "variant" | "alignment" | "sequence" | "structure" | "table"> = {
  vcf: "variant", bam: "alignment", fasta: "sequence", pdb: "structure", csv: "table",
};
export type ViewerKind = (typeof VIEWER_KIND)[ViewerFormat];

/** The file's own type within its format: what the server must do before a viewer can read it. */
export type FileSubtype = "vcf" | "bcf" | "bam" | "sam" | "cram" | "fasta" | "fastq" | "pdb" | "mmcif" | "csv" | "tsv" | "txt";

/** Extensions (spec's table) → format and subtype. */
const EXTENSIONS: ReadonlyArray<[string, ViewerFormat, FileSubtype]> = [
  ["vcf", "vcf", "vcf"], ["bcf", "vcf", "bcf"],
  ["bam", "bam", "bam"], ["sam", "bam", "sam"], ["cram", "bam", "cram"],
  ["fa", "fasta", "fasta"], ["fasta", "fasta", "fasta"], ["fna", "fasta", "fasta"], ["fastq", "fasta", "fastq"], ["fq", "fasta", "fastq"],
  ["pdb", "pdb", "pdb"], ["ent", "pdb", "pdb"], ["cif", "pdb", "mmcif"], ["mmcif", "pdb", "mmcif"],
  ["csv", "csv", "csv"], ["tsv", "csv", "tsv"], ["txt", "csv", "txt"], ["tab", "csv", "tsv"],
];

/** Extensions a `format` override may meet, for the subtype: e.g. `format: "csv"` on `counts.out`. */
const DEFAULT_SUBTYPE: Record<ViewerFormat, FileSubtype> = { vcf: "vcf", bam: "bam", fasta: "fasta", pdb: "pdb", csv: "csv" };

export interface Detected { format: ViewerFormat; subtype: FileSubtype; gzipped: boolean }

/**
 * The viewer of a workspace path, from its extension (`.vcf.gz`, `.fa.gz`, `.fastq.gz` too);
 * `override` (the request's `format`) wins over the extension's format, keeping a subtype
 * the extension names when it belongs to that format (`reads.fq` with `fasta` stays FASTQ).
 * Undefined when neither places it.
 */
export function detectViewer(path: string, override?: ViewerFormat): Detected | undefined {
  const name = (path.split("/").pop() ?? path).toLowerCase();
  const gzipped = /\.(gz|bgz)$/.test(name);
  const base = gzipped ? name.replace(/\.(gz|bgz)$/, "") : name;
  const ext = base.includes(".") ? base.slice(base.lastIndexOf(".") + 1) : "";
  const hit = EXTENSIONS.find(([e]) => e === ext);
  if (override) {
    const subtype = hit && hit[1] === override ? hit[2] : DEFAULT_SUBTYPE[override];
    return { format: override, subtype, gzipped };
  }
  return hit ? { format: hit[1], subtype: hit[2], gzipped } : undefined;
}

/** The extensions detection knows, for the invalid_request error that lists them. */
export const KNOWN_EXTENSIONS: readonly string[] = EXTENSIONS.map(([e]) => `.${e}`);

export interface Region { chr: string; start: number; end: number }

/**
 * A region as users write it (`chr1:1,000-2,000`, `MT192765.1:100-500`), 1-based inclusive.
 * Contig names may hold `:` themselves (HLA alleles), so the coordinates are the last part.
 */
export function parseRegion(input: string): Region | { error: string } {
  const s = input.trim().replace(/,/g, "");
  const m = /^(.+):(\d+)-(\d+)$/.exec(s);
  if (!m) return { error: "must be chr:start-end (e.g. chr1:10000-20000)" };
  const [chr, a, b] = [m[1] as string, Number(m[2]), Number(m[3])];
  if (!/^[!-~]{1,255}$/.test(chr)) return { error: "the contig name must be printable ASCII without spaces" };
  if (a < 1 || b < a) return { error: "start must be at least 1 and end at least start" };
  if (b - a > 1_000_000_000) return { error: "the region is longer than 1 Gb" };
  return { chr, start: a, end: b };
}

export const formatRegion = (r: Region) => `${r.chr}:${r.start}-${r.end}`;

/**
 * What a viewer link grants: one file of one workspace (and, optionally, one reference FASTA
 * of the same workspace), read-only, until `exp`. Keys are workspace-relative and were
 * normalized when the link was issued; the serving side re-checks them anyway.
 */
export interface ViewerGrant {
  v: 1;
  /** Organization and workspace. */
  o: string;
  w: string;
  /** The file (workspace-relative key). */
  k: string;
  /** The viewer; `image` is a rendered chart's preview (a PNG or SVG), never issued by viewer-url. */
  f: GrantFormat;
  /** A reference FASTA (workspace-relative key). */
  r?: string;
  /** Region to open on. */
  g?: string;
  /** Expiry, Unix seconds. */
  exp: number;
}

/** A grant for a file viewer (not a chart preview). */
export type FileGrant = ViewerGrant & { f: ViewerFormat };
export const isFileGrant = (g: ViewerGrant): g is FileGrant => g.f !== "image";

/** What a grant can open: the viewer formats, and a chart preview. */
export type GrantFormat = ViewerFormat | "image";
const GRANT_FORMATS: readonly string[] = [...VIEWER_FORMATS, "image"];

/** Whether a decoded payload has the grant's shape (a valid signature over junk is still junk). */
export function isViewerGrant(x: unknown): x is ViewerGrant {
  if (!x || typeof x !== "object") return false;
  const g = x as Record<string, unknown>;
  const str = (v: unknown) => typeof v === "string" && v.length > 0 && v.length <= 1024;
  return g.v === 1 && str(g.o) && str(g.w) && str(g.k) && GRANT_FORMATS.includes(g.f as string)
    && (g.r === undefined || str(g.r)) && (g.g === undefined || str(g.g)) && Number.isSafeInteger(g.exp);
}

/** Link lifetime (spec): default one hour, at most a day. */
export const VIEWER_DEFAULT_SECONDS = 3600;
export const VIEWER_MAX_SECONDS = 86_400;
