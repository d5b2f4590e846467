/**
 * Gene annotations for coverage tracks, the pure part: GTF, GFF3 and BED turned into genes
 * (one feature per gene with its exons, merged across transcripts into a collapsed gene
 * model), and finding a gene by name or identifier. Lines are fed one at a time so a large
 * annotation file can be streamed; `parseAnnotation` does it for a whole text.
 */
import { ChartError } from "../chart.js";

/** A gene (or BED record): 1-based inclusive coordinates; exons sorted and non-overlapping. */
export interface Feature {
  name: string;
  id?: string;
  chr: string;
  start: number;
  end: number;
  strand: "+" | "-" | ".";
  exons: Array<[number, number]>;
}

export type AnnotationKind = "gtf" | "gff3" | "bed";

/** The annotation kind a file name says (through `.gz`), or undefined. */
export function annotationKindOf(path: string): AnnotationKind | undefined {
  const name = path.toLowerCase().replace(/\.(gz|bgz)$/, "");
  if (name.endsWith(".gtf")) return "gtf";
  if (name.endsWith(".gff3") || name.endsWith(".gff")) return "gff3";
  if (name.endsWith(".bed")) return "bed";
  return undefined;
}

/** The kind a few lines of content look like. */
export function detectAnnotationKind(lines: readonly string[]): AnnotationKind {
  for (const line of lines) {
    if (/^##gff-version\s+3/.test(line)) return "gff3";
    if (!line || line.startsWith("#") || /^(track|browser)\b/.test(line)) continue;
    const f = line.split("\t");
    if (f.length >= 9 && /^\d+$/.test(f[3] ?? "") && /^\d+$/.test(f[4] ?? "")) {
      const attrs = f[8] ?? "";
      return /^\s*[A-Za-z_][\w.]*\s+"/.test(attrs) ? "gtf" : "gff3";
    }
    if (f.length >= 3 && /^\d+$/.test(f[1] ?? "") && /^\d+$/.test(f[2] ?? "")) return "bed";
  }
  throw new ChartError("the annotation file is not GTF, GFF3 or BED (no line has GTF/GFF columns or BED chrom/start/end)");
}

const strandOf = (s: string | undefined): "+" | "-" | "." => (s === "+" || s === "-" ? s : ".");

function gtfAttrs(s: string): Map<string, string> {
  const m = new Map<string, string>();
  for (const part of s.split(";")) {
    const kv = /^\s*([^\s"]+)\s+"?([^"]*)"?\s*$/.exec(part);
    if (kv && !m.has(kv[1]!)) m.set(kv[1]!, kv[2]!);
  }
  return m;
}

const unescape = (s: string) => { try { return decodeURIComponent(s); } catch { return s; } };
function gffAttrs(s: string): Map<string, string> {
  const m = new Map<string, string>();
  for (const part of s.split(";")) {
    const i = part.indexOf("=");
    if (i > 0) m.set(part.slice(0, i).trim(), unescape(part.slice(i + 1).trim()));
  }
  return m;
}

/** Union of intervals, sorted. */
export function mergeIntervals(iv: ReadonlyArray<readonly [number, number]>): Array<[number, number]> {
  const s = [...iv].map(([a, b]) => [a, b] as [number, number]).sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  const out: Array<[number, number]> = [];
  for (const [a, b] of s) {
    const last = out[out.length - 1];
    if (last && a <= last[1] + 1) last[1] = Math.max(last[1], b);
    else out.push([a, b]);
  }
  return out;
}

interface GeneDraft { name?: string; id: string; chr: string; start: number; end: number; strand: "+" | "-" | "."; exons: Array<[number, number]>; cds: Array<[number, number]>; declared: boolean }

const GFF_GENE = /^(gene|pseudogene|ncRNA_gene|protein_coding_gene|transposable_element_gene)$/i;
const EXON = /^exon$/i;
const CDS = /^CDS$/i;

/**
 * An incremental annotation parser: `line()` for each line, `finish()` for the genes in file
 * order. GTF: `gene` lines (or, without them, genes made from their exons by gene_id), exons
 * attached by gene_id. GFF3: gene-type features, exons attached through Parent (directly or
 * through a transcript); CDS stand in for exons where a gene has none (bacterial GFF3).
 * BED: one feature per line, BED12 blocks as exons.
 */
export class AnnotationParser {
  private genes = new Map<string, GeneDraft>();
  private order: string[] = [];
  /** GFF3: child (transcript) id → gene id. */
  private parentOf = new Map<string, string>();
  /** GFF3: exon/CDS parts whose parent is not yet known as a gene or a transcript. */
  private pending: Array<{ parents: string[]; type: "exon" | "cds"; iv: [number, number] }> = [];
  private bed: Feature[] = [];
  private done = false;
  lines = 0;
  constructor(public kind: AnnotationKind) {}

  private gene(id: string, chr: string, start: number, end: number, strand: "+" | "-" | ".", name: string | undefined, declared: boolean): GeneDraft {
    let g = this.genes.get(id);
    if (!g) {
      g = { id, chr, start, end, strand, exons: [], cds: [], declared, ...(name ? { name } : {}) };
      this.genes.set(id, g);
      this.order.push(id);
    } else {
      if (declared && !g.declared) { g.declared = true; g.start = start; g.end = end; g.chr = chr; g.strand = strand; }
      else if (!g.declared) { g.start = Math.min(g.start, start); g.end = Math.max(g.end, end); }
      if (name && (!g.name || declared)) g.name = name;
    }
    return g;
  }

  line(raw: string): void {
    if (this.done) return;
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (this.kind === "gff3" && line.startsWith("##FASTA")) { this.done = true; return; }
    if (!line || line.startsWith("#")) return;
    this.lines++;
    const f = line.split("\t");
    if (this.kind === "bed") {
      if (/^(track|browser)\b/.test(line)) return;
      if (f.length < 3) return;
      const chr = f[0]!, s0 = Number(f[1]), e = Number(f[2]);
      if (!Number.isInteger(s0) || !Number.isInteger(e) || e <= s0) return;
      const name = f[3] && f[3] !== "." ? f[3] : `${chr}:${s0 + 1}-${e}`;
      let exons: Array<[number, number]> = [[s0 + 1, e]];
      const count = Number(f[9]);
      if (Number.isInteger(count) && count > 0 && f[10] && f[11]) {
        const sizes = f[10].split(",").filter(Boolean).map(Number), starts = f[11].split(",").filter(Boolean).map(Number);
        if (sizes.length >= count && starts.length >= count && sizes.every(Number.isFinite) && starts.every(Number.isFinite)) {
          exons = mergeIntervals(starts.slice(0, count).map((b, i) => [s0 + b + 1, Math.min(e, s0 + b + sizes[i]!)] as [number, number]));
        }
      }
      this.bed.push({ name, chr, start: s0 + 1, end: e, strand: strandOf(f[5]), exons });
      return;
    }
    if (f.length < 9) return;
    const [chr, , type, a, b, , st] = f as [string, string, string, string, string, string, string];
    const start = Number(a), end = Number(b);
    if (!Number.isInteger(start) || !Number.isInteger(end) || end < start) return;
    const strand = strandOf(st);
    if (this.kind === "gtf") {
      const at = gtfAttrs(f[8]!);
      const id = at.get("gene_id");
      if (!id) return;
      const name = at.get("gene_name") ?? at.get("gene") ?? at.get("Name");
      if (type === "gene") { this.gene(id, chr, start, end, strand, name, true); return; }
      const isExon = EXON.test(type), isCds = CDS.test(type);
      if (!isExon && !isCds && type !== "transcript") return;
      const g = this.gene(id, chr, start, end, strand, name, false);
      if (isExon) g.exons.push([start, end]);
      else if (isCds) g.cds.push([start, end]);
      return;
    }
    // GFF3
    const at = gffAttrs(f[8]!);
    const id = at.get("ID");
    const parents = (at.get("Parent") ?? "").split(",").filter(Boolean);
    if (GFF_GENE.test(type)) {
      const gid = id ?? `${chr}:${start}-${end}`;
      this.gene(gid, chr, start, end, strand, at.get("Name") ?? at.get("gene_name") ?? at.get("gene"), true);
      return;
    }
    const isExon = EXON.test(type), isCds = CDS.test(type);
    if (isExon || isCds) {
      this.pending.push({ parents, type: isExon ? "exon" : "cds", iv: [start, end] });
      return;
    }
    if (id && parents.length) this.parentOf.set(id, parents[0]!);
  }

  finish(): Feature[] {
    if (this.kind === "bed") return this.bed;
    for (const p of this.pending) {
      for (const parent of p.parents) {
        // Up the Parent chain (exon → transcript → gene; a few levels at most).
        let id: string | undefined = parent;
        for (let depth = 0; id !== undefined && !this.genes.has(id) && depth < 4; depth++) id = this.parentOf.get(id);
        const g = id === undefined ? undefined : this.genes.get(id);
        if (g) (p.type === "exon" ? g.exons : g.cds).push(p.iv);
      }
    }
    this.pending = [];
    const out: Feature[] = [];
    for (const id of this.order) {
      const g = this.genes.get(id)!;
      const parts = g.exons.length ? g.exons : g.cds.length ? g.cds : [[g.start, g.end] as [number, number]];
      const exons = mergeIntervals(parts).map(([a, b]) => [Math.max(a, g.start), Math.min(b, g.end)] as [number, number]).filter(([a, b]) => b >= a);
      out.push({ name: g.name ?? id, id, chr: g.chr, start: g.start, end: g.end, strand: g.strand, exons: exons.length ? exons : [[g.start, g.end]] });
    }
    return out;
  }
}

/** Genes of a whole annotation text (kind detected from the content when not given). */
export function parseAnnotation(text: string, kind?: AnnotationKind): Feature[] {
  const lines = text.split("\n");
  const p = new AnnotationParser(kind ?? detectAnnotationKind(lines.slice(0, 200)));
  for (const l of lines) p.line(l);
  return p.finish();
}

const stripVersion = (s: string) => s.replace(/\.\d+$/, "");

/**
 * A gene by name (gene_name / Name / BED name) or identifier (gene_id / ID; a version suffix
 * like `.12` may be left off), case-insensitive; the first in file order when several match.
 */
export function findGene(features: readonly Feature[], gene: string): Feature {
  const q = gene.trim().toLowerCase();
  const hit = features.find((f) => f.name.toLowerCase() === q)
    ?? features.find((f) => f.id !== undefined && f.id.toLowerCase() === q)
    ?? features.find((f) => f.id !== undefined && stripVersion(f.id.toLowerCase()) === q);
  if (hit) return hit;
  if (features.length === 0) throw new ChartError(`gene ${gene} is not in the annotation file: it holds no genes (GTF/GFF3 gene features or BED lines); check the file, or give region instead`);
  const similar = features.filter((f) => f.name.toLowerCase().includes(q) || q.includes(f.name.toLowerCase()) && f.name.length >= 2).slice(0, 5).map((f) => f.name);
  const examples = features.slice(0, 5).map((f) => f.name);
  throw new ChartError(`gene ${gene} is not in the annotation file (${features.length} genes); `
    + (similar.length ? `similar names: ${similar.join(", ")}; ` : `its genes include ${examples.join(", ")}; `)
    + "names and identifiers are matched case-insensitively (gene_name, Name, gene_id, ID, BED name), or give region instead");
}
