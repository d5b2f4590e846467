/**
 * What a viewer link needs before a browser can show its file, worked out once per file
 * version and kept: igv.js reads only indexed or small files, so a BCF, a SAM, a large or
 * unindexed VCF, a BAM without its `.bai` or a gzipped FASTA is converted or indexed here
 * (samtools, bcftools, tabix through a ToolRunner), into the workspace's derived area
 * `_system/orgs/<org>/workspaces/<ws>/derived/<fingerprint>/` — never listed by the files
 * API, reused by every later link to the same file version, by any api-server replica. The
 * result (`PreparedView`) is written last, so a preparation cut short is simply redone.
 * Also: the FASTQ browser's sample and summary, and the table viewer's rows (parsed on the
 * server, sorted and filtered there, sent a page at a time).
 */
import { createHash } from "node:crypto";
import { createReadStream, createWriteStream, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import type { ObjectInfo, ObjectStore } from "../core/ports.js";
import { workspaceRoot } from "../core/layout.js";
import { formatRegion, VIEWER_KIND, detectViewer, type FileSubtype, type FileGrant, type ViewerKind } from "../core/viewers.js";
import { columnTypes, DelimitedParser, detectDelimiter, filterRows, parseTable, sortRows, type Delimiter } from "../core/delimited.js";
import { detectPhredOffset, FastqReader, summarize, type FastqRecord } from "../core/fastq.js";
import type { ToolRunner } from "../adapters/local/tool-runner.js";

/** Plain VCFs up to this size go to igv.js whole; larger ones are bgzipped and indexed first. */
export const VCF_INLINE_MAX_BYTES = 10 * 1024 * 1024;
/** Tables up to this size are parsed into memory (sortable, filterable); larger ones page in file order. */
export const TABLE_MEMORY_MAX_BYTES = 64 * 1024 * 1024;
/** Reads of a FASTQ sampled for the read browser and its summary. */
export const FASTQ_SAMPLE_READS = 2000;
/** Longest a conversion may take. */
const TOOL_TIMEOUT_MS = 15 * 60_000;

/** The files a link may serve, by the fixed names its URLs use: nothing else is reachable. */
export const DATA_NAMES = ["primary", "primary-index", "reference", "reference-index"] as const;
export type DataName = (typeof DATA_NAMES)[number];

export interface PreparedView {
  kind: ViewerKind;
  subtype: FileSubtype;
  name: string;
  size: number;
  lastModified: string;
  /** Storage keys behind each data name. */
  files: Partial<Record<DataName, string>>;
  /** igv.js: the track's format, whether the primary is indexed, the genome (sizes only, or a FASTA). */
  track?: { format: "vcf" | "bam" | "cram"; indexed: boolean };
  genome?: { kind: "sizes" } | { kind: "fasta"; name: string };
  /** Contig names and lengths (the VCF/BAM's own, or the FASTA's `.fai`). */
  sequences?: Array<{ name: string; length: number }>;
  chromSizes?: string;
  locus?: string;
  /** Counts the server knows (variants in the VCF, mapped reads…). */
  stats?: Record<string, number>;
  fastq?: { sampled: number; complete: boolean; phredOffset: number; summary: ReturnType<typeof summarize> };
  table?: { delimiter: Delimiter; header: string[]; headerDetected: boolean; types: Array<"number" | "text">; rows: number | null; sortable: boolean };
  structure?: { format: "pdb" | "cif" };
  /** What the server did, for the page's footer ("indexed with samtools index"). */
  notes: string[];
}

/** A problem with the file itself: the page shows `message`. */
export class ViewerDataError extends Error {
  constructor(readonly code: "not_found" | "unreadable", message: string) { super(message); this.name = "ViewerDataError"; }
}

/** A tool's last words for the page: its own names for the working files (`in/input.bam`) read as "the file". */
const toolSays = (stderr: string) => stderr.split("\n").filter((l) => l.trim()).slice(-2).join(" ").replace(/"?\bin\/[\w.-]+"?/g, "the file");

const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const version = (i: ObjectInfo) => `${i.key}\n${i.size}\n${i.sha256 ?? i.etag ?? i.lastModified.toISOString()}`;

/** Preparations (indexing, conversion) running at once on one api-server; more wait their turn. */
export const MAX_CONCURRENT_PREPARATIONS = 2;

export class ViewerData {
  private prepared = new Map<string, Promise<PreparedView>>();
  private running = 0;
  private waiting: Array<() => void> = [];
  private tables = new Map<string, Promise<{ header: string[]; types: Array<"number" | "text">; rows: string[][] }>>();

  constructor(private readonly deps: { store: ObjectStore; runner: ToolRunner }) {}

  /** The storage key of a grant's file (or reference), re-checked: a grant names keys of its own workspace only. */
  key(grant: FileGrant, rel: string): string {
    if (rel.startsWith("/") || rel.split("/").some((s) => s === "" || s === "." || s === "..") || rel.startsWith("_system/")) throw new ViewerDataError("not_found", "not a file of this workspace");
    return workspaceRoot(grant.o, grant.w) + rel;
  }

  private async source(grant: FileGrant) {
    const key = this.key(grant, grant.k);
    const info = await this.deps.store.head(key);
    if (!info) throw new ViewerDataError("not_found", `the file ${grant.k} no longer exists`);
    const ref = grant.r ? await this.deps.store.head(this.key(grant, grant.r)) : undefined;
    if (grant.r && !ref) throw new ViewerDataError("not_found", `the reference ${grant.r} no longer exists`);
    return { key, info, ref };
  }

  /** Everything the page needs, prepared once per file version (and reused from the derived area). */
  async prepare(grant: FileGrant): Promise<PreparedView> {
    const { key, info, ref } = await this.source(grant);
    const fp = sha(`${grant.f}\n${version(info)}\n${ref ? version(ref) : ""}\n${grant.g ?? ""}`).slice(0, 40);
    let p = this.prepared.get(fp);
    if (!p) {
      p = this.load(grant, key, info, ref, fp);
      this.prepared.set(fp, p);
      p.catch(() => this.prepared.delete(fp));
      if (this.prepared.size > 500) this.prepared.delete(this.prepared.keys().next().value as string);
    }
    return p;
  }

  private async load(grant: FileGrant, key: string, info: ObjectInfo, ref: ObjectInfo | undefined, fp: string): Promise<PreparedView> {
    const derived = `_system/orgs/${grant.o}/workspaces/${grant.w}/derived/${fp}/`;
    const done = await this.readJson<PreparedView>(derived + "view.json");
    if (done) return done;
    while (this.running >= MAX_CONCURRENT_PREPARATIONS) await new Promise<void>((r) => this.waiting.push(r));
    this.running++;
    try {
      return await this.build(grant, key, info, ref, derived);
    } finally {
      this.running--;
      this.waiting.shift()?.();
    }
  }

  private async build(grant: FileGrant, key: string, info: ObjectInfo, ref: ObjectInfo | undefined, derived: string): Promise<PreparedView> {
    const detected = detectViewer(grant.k, grant.f);
    if (!detected) throw new ViewerDataError("unreadable", "no viewer for this file");
    const view: PreparedView = {
      kind: VIEWER_KIND[grant.f], subtype: detected.subtype, name: grant.k.split("/").pop() ?? grant.k,
      size: info.size, lastModified: info.lastModified.toISOString(), files: { primary: key }, notes: [],
    };
    const dir = this.deps.runner.workDir();
    try {
      const ctx = { grant, key, info, derived, dir, gz: detected.gzipped, view };
      switch (view.kind) {
        case "variant": await this.variant(ctx); break;
        case "alignment": await this.alignment(ctx); break;
        case "sequence": if (detected.subtype === "fastq") await this.fastq(ctx); else await this.fasta(ctx); break;
        case "structure": view.structure = { format: detected.subtype === "mmcif" ? "cif" : "pdb" }; break;
        case "table": await this.tableMeta(ctx); break;
      }
      if (ref && (view.kind === "variant" || view.kind === "alignment")) await this.reference(ctx, ref);
      if (grant.g) view.locus = grant.g;
      if (!view.locus && view.sequences?.[0]) {
        const s = view.sequences[0];
        view.locus = formatRegion({ chr: s.name, start: 1, end: Math.min(s.length, 50_000) });
      }
    } finally {
      this.deps.runner.dispose(dir);
    }
    await this.deps.store.put(derived + "view.json", JSON.stringify(view), { contentType: "application/json" });
    return view;
  }

  /* ------------------------------------------------------------ helpers */

  private async readJson<T>(key: string): Promise<T | undefined> {
    try {
      const { body } = await this.deps.store.get(key);
      const chunks: Buffer[] = [];
      for await (const c of body) chunks.push(Buffer.from(c));
      return JSON.parse(Buffer.concat(chunks).toString("utf8")) as T;
    } catch { return undefined; }
  }

  /** Text of an object, whole (small files only), gunzipped when `gz`. */
  private async text(key: string, gz: boolean, maxBytes = Infinity): Promise<string> {
    let n = 0;
    const chunks: Buffer[] = [];
    for await (const c of this.textStream(key, gz)) {
      chunks.push(c);
      n += c.length;
      if (n > maxBytes) break;
    }
    return Buffer.concat(chunks).toString("utf8");
  }

  private async *textStream(key: string, gz: boolean): AsyncGenerator<Buffer> {
    const { body } = await this.deps.store.get(key);
    const src = Readable.from(body as AsyncIterable<Uint8Array>);
    const stream = gz ? src.pipe(createGunzip()) : src;
    try {
      for await (const c of stream) yield c as Buffer;
    } finally {
      src.destroy();
      if (gz) stream.destroy();
    }
  }

  /** A host path for an object: the local store's own file, else a download into `dir`. */
  private async local(dir: string, key: string, name: string): Promise<string> {
    const p = this.deps.store.localPath?.(key);
    if (p) return p;
    const dest = join(dir, "work", `dl-${name}`);
    const { body } = await this.deps.store.get(key);
    await pipeline(Readable.from(body as AsyncIterable<Uint8Array>), createWriteStream(dest));
    return dest;
  }

  private async sibling(key: string, candidates: string[]): Promise<string | undefined> {
    for (const c of candidates) if (await this.deps.store.head(c)) return c;
    return undefined;
  }

  private async upload(dir: string, file: string, key: string, contentType = "application/octet-stream"): Promise<string> {
    const path = join(dir, "work", file);
    statSync(path);
    await this.deps.store.put(key, createReadStream(path), { contentType });
    return key;
  }

  private async tool(dir: string, argv: string[], inputs: Array<{ host: string; name: string }>, what: string, extra: { stopAfterLines?: number; keepTail?: boolean; maxStdout?: number } = {}) {
    const r = await this.deps.runner.run(dir, { argv, inputs, timeoutMs: TOOL_TIMEOUT_MS, ...extra });
    if (r.code !== 0 && !r.stopped) throw new ViewerDataError("unreadable", `${what} failed: ${toolSays(r.stderr) || `exit ${r.code}`}`);
    return r.stdout;
  }

  /* ------------------------------------------------------------ variants */

  private async variant(c: Ctx): Promise<void> {
    const { view } = c;
    view.track = { format: "vcf", indexed: false };
    if (view.subtype === "vcf" && !c.gz && c.info.size <= VCF_INLINE_MAX_BYTES) {
      const text = await this.text(c.key, false);
      const contigs = new Map<string, number>();
      for (const m of text.matchAll(/^##contig=<ID=([^,>]+)(?:,[^>]*?length=(\d+))?/gm)) contigs.set(m[1] as string, Number(m[2] ?? 0));
      const maxPos = new Map<string, number>();
      let first: [string, number] | undefined;
      let records = 0;
      for (const line of text.split("\n")) {
        if (!line || line.startsWith("#")) continue;
        const t1 = line.indexOf("\t");
        const t2 = line.indexOf("\t", t1 + 1);
        const chr = line.slice(0, t1);
        const pos = Number(line.slice(t1 + 1, t2));
        if (!chr || !Number.isFinite(pos)) throw new ViewerDataError("unreadable", `line ${records + 1} of the records is not a VCF record`);
        records++;
        first ??= [chr, pos];
        maxPos.set(chr, Math.max(maxPos.get(chr) ?? 0, pos));
      }
      if (!text.startsWith("##fileformat=VCF")) throw new ViewerDataError("unreadable", "this is not a VCF file (it does not start with ##fileformat=VCF)");
      this.contigs(view, contigs, maxPos);
      view.stats = { variants: records };
      if (first) view.locus = this.variantLocus(view, first);
      return;
    }
    // Indexed already (a bgzipped VCF with its .tbi/.csi beside it), or converted here.
    let vcf = c.key;
    let index = c.gz && view.subtype === "vcf" ? await this.sibling(c.key, [`${c.key}.tbi`, `${c.key}.csi`]) : undefined;
    let localVcf: string;
    let localIndex: string;
    if (index) {
      localVcf = await this.local(c.dir, vcf, "variants.vcf.gz");
      localIndex = await this.local(c.dir, index, index.endsWith(".csi") ? "variants.vcf.gz.csi" : "variants.vcf.gz.tbi");
    } else {
      const input = await this.local(c.dir, c.key, `input.${view.subtype}${c.gz ? ".gz" : ""}`);
      const inName = `input.${view.subtype}${c.gz ? ".gz" : ""}`;
      await this.tool(c.dir, ["bcftools", "view", "--no-version", "-Oz", "-o", "variants.vcf.gz", `in/${inName}`], [{ host: input, name: inName }], "converting to bgzipped VCF (bcftools view)");
      const r = await this.deps.runner.run(c.dir, { argv: ["tabix", "-f", "-p", "vcf", "variants.vcf.gz"], timeoutMs: TOOL_TIMEOUT_MS });
      if (r.code !== 0) {
        // Unsorted records: sort, then index.
        await this.tool(c.dir, ["bcftools", "sort", "-Oz", "-o", "variants.vcf.gz", `in/${inName}`], [{ host: input, name: inName }], "sorting the VCF (bcftools sort)");
        await this.tool(c.dir, ["tabix", "-f", "-p", "vcf", "variants.vcf.gz"], [], "indexing the VCF (tabix)");
        view.notes.push("records sorted with bcftools sort");
      }
      vcf = await this.upload(c.dir, "variants.vcf.gz", c.derived + "variants.vcf.gz");
      index = await this.upload(c.dir, "variants.vcf.gz.tbi", c.derived + "variants.vcf.gz.tbi");
      localVcf = join(c.dir, "work", "variants.vcf.gz");
      localIndex = join(c.dir, "work", "variants.vcf.gz.tbi");
      view.notes.push(view.subtype === "bcf" ? "converted from BCF to bgzipped VCF and indexed (bcftools view, tabix)" : "bgzipped and indexed for the viewer (bcftools view, tabix)");
    }
    view.files.primary = vcf;
    view.files["primary-index"] = index;
    view.track.indexed = true;
    const idxName = localIndex.endsWith(".csi") ? "v.vcf.gz.csi" : "v.vcf.gz.tbi";
    const inputs = [{ host: localVcf, name: "v.vcf.gz" }, { host: localIndex, name: idxName }];
    // Contigs and record counts from the index; lengths from the header, else the last record.
    const stats = await this.tool(c.dir, ["bcftools", "index", "-s", "in/v.vcf.gz"], inputs, "reading the VCF index (bcftools index -s)");
    const contigs = new Map<string, number>();
    const maxPos = new Map<string, number>();
    let records = 0;
    for (const line of stats.split("\n")) {
      const [chr, len, n] = line.split("\t");
      if (!chr || n === undefined) continue;
      records += Number(n);
      contigs.set(chr, len === "." ? 0 : Number(len));
      if (len === ".") {
        const last = await this.tool(c.dir, ["bcftools", "query", "-f", "%POS\\n", "-r", chr, "in/v.vcf.gz"], inputs, "reading the VCF (bcftools query)", { keepTail: true, maxStdout: 64 });
        maxPos.set(chr, Number(last.trim().split("\n").pop()));
      }
    }
    this.contigs(view, contigs, maxPos);
    view.stats = { variants: records };
    const firstLine = await this.tool(c.dir, ["bcftools", "view", "-H", "in/v.vcf.gz"], inputs, "reading the VCF (bcftools view)", { stopAfterLines: 1, maxStdout: 1 << 20 });
    const [chr, pos] = firstLine.split("\t");
    if (chr && pos) view.locus = this.variantLocus(view, [chr, Number(pos)]);
  }

  /** Contig lengths: the header's, else the last position seen (plus a margin). */
  private contigs(view: PreparedView, header: Map<string, number>, maxPos: Map<string, number>) {
    const names = new Set([...header.keys(), ...maxPos.keys()]);
    view.sequences = [...names].map((name) => ({ name, length: header.get(name) || (maxPos.get(name) ?? 0) + 1000 })).filter((s) => s.length > 0);
    if (!view.genome) view.genome = { kind: "sizes" };
    view.chromSizes = view.sequences.map((s) => `${s.name}\t${s.length}`).join("\n") + "\n";
  }

  private variantLocus(view: PreparedView, [chr, pos]: [string, number]): string {
    const len = view.sequences?.find((s) => s.name === chr)?.length ?? pos + 10_000;
    if (len <= 100_000) return formatRegion({ chr, start: 1, end: len });
    return formatRegion({ chr, start: Math.max(1, pos - 5000), end: Math.min(len, pos + 5000) });
  }

  /* ------------------------------------------------------------ alignments */

  private async alignment(c: Ctx): Promise<void> {
    const { view } = c;
    const cram = view.subtype === "cram";
    view.track = { format: cram ? "cram" : "bam", indexed: true };
    if (cram && !c.grant.r) throw new ViewerDataError("unreadable", "a CRAM file can only be shown with its reference FASTA: ask for the link with `reference`");
    const ext = view.subtype;
    const inName = `input.${ext}`;
    const input = await this.local(c.dir, c.key, inName);
    let primaryLocal = input;
    let primaryName = inName;
    let index = view.subtype === "sam" ? undefined : await this.sibling(c.key, cram ? [`${c.key}.crai`] : [`${c.key}.bai`, c.key.replace(/\.bam$/i, ".bai"), `${c.key}.csi`]);
    let indexLocal: string | undefined;
    if (index) indexLocal = await this.local(c.dir, index, `${inName}.${index.split(".").pop()}`);
    else if (view.subtype === "sam") {
      await this.tool(c.dir, ["samtools", "sort", "-o", "alignments.bam", `in/${inName}`], [{ host: input, name: inName }], "converting SAM to sorted BAM (samtools sort)");
      await this.tool(c.dir, ["samtools", "index", "alignments.bam"], [], "indexing the BAM (samtools index)");
      view.files.primary = await this.upload(c.dir, "alignments.bam", c.derived + "alignments.bam");
      index = await this.upload(c.dir, "alignments.bam.bai", c.derived + "alignments.bam.bai");
      [primaryLocal, primaryName, indexLocal] = [join(c.dir, "work", "alignments.bam"), "alignments.bam", join(c.dir, "work", "alignments.bam.bai")];
      view.track.format = "bam";
      view.notes.push("converted from SAM to sorted, indexed BAM (samtools sort, samtools index)");
    } else {
      const idxFile = cram ? "alignments.crai" : "alignments.bai";
      const r = await this.deps.runner.run(c.dir, { argv: ["samtools", "index", "-o", idxFile, `in/${inName}`], inputs: [{ host: input, name: inName }], timeoutMs: TOOL_TIMEOUT_MS });
      if (r.code === 0) {
        index = await this.upload(c.dir, idxFile, c.derived + idxFile);
        indexLocal = join(c.dir, "work", idxFile);
        view.notes.push(`index built with samtools index`);
      } else if (!cram && /sort|unsorted|NO_COOR|out of order/i.test(r.stderr)) {
        await this.tool(c.dir, ["samtools", "sort", "-o", "alignments.bam", `in/${inName}`], [{ host: input, name: inName }], "sorting the BAM (samtools sort)");
        await this.tool(c.dir, ["samtools", "index", "alignments.bam"], [], "indexing the BAM (samtools index)");
        view.files.primary = await this.upload(c.dir, "alignments.bam", c.derived + "alignments.bam");
        index = await this.upload(c.dir, "alignments.bam.bai", c.derived + "alignments.bam.bai");
        [primaryLocal, primaryName, indexLocal] = [join(c.dir, "work", "alignments.bam"), "alignments.bam", join(c.dir, "work", "alignments.bam.bai")];
        view.notes.push("sorted and indexed for the viewer (samtools sort, samtools index)");
      } else throw new ViewerDataError("unreadable", `this ${ext.toUpperCase()} file could not be indexed: ${toolSays(r.stderr)}`);
    }
    view.files["primary-index"] = index;
    const idxName = `a.${(indexLocal as string).split(".").pop()}`;
    const inputs = [{ host: primaryLocal, name: `a.${primaryName.split(".").pop()}` }, { host: indexLocal as string, name: idxName }];
    const spec = `in/a.${primaryName.split(".").pop()}##idx##in/${idxName}`;
    const header = await this.tool(c.dir, ["samtools", "view", "-H", "--no-PG", spec], inputs, "reading the header (samtools view -H)");
    const lengths = new Map<string, number>();
    for (const m of header.matchAll(/^@SQ\t(?:.*\t)?SN:([^\t\n]+)(?:\t.*?)?\tLN:(\d+)/gm)) lengths.set(m[1] as string, Number(m[2]));
    for (const m of header.matchAll(/^@SQ\t(?:.*\t)?LN:(\d+)(?:\t.*?)?\tSN:([^\t\n]+)/gm)) lengths.set(m[2] as string, Number(m[1]));
    view.sequences = [...lengths].map(([name, length]) => ({ name, length }));
    view.genome = { kind: "sizes" };
    view.chromSizes = view.sequences.map((s) => `${s.name}\t${s.length}`).join("\n") + "\n";
    const idx = await this.tool(c.dir, ["samtools", "idxstats", spec], inputs, "reading the index (samtools idxstats)");
    let mapped = 0;
    let firstCovered: string | undefined;
    for (const line of idx.split("\n")) {
      const [chr, , m] = line.split("\t");
      if (!chr || chr === "*") continue;
      mapped += Number(m);
      if (!firstCovered && Number(m) > 0) firstCovered = chr;
    }
    view.stats = { mappedReads: mapped };
    if (firstCovered && !cram) {
      const rec = await this.tool(c.dir, ["samtools", "view", spec, firstCovered], inputs, "reading the first alignment (samtools view)", { stopAfterLines: 1, maxStdout: 1 << 20 });
      const pos = Number(rec.split("\t")[3]);
      const len = lengths.get(firstCovered) ?? pos + 2000;
      if (pos > 0) view.locus = formatRegion({ chr: firstCovered, start: Math.max(1, pos - 100), end: Math.min(len, pos + 1900) });
    } else if (firstCovered) view.locus = formatRegion({ chr: firstCovered, start: 1, end: Math.min(lengths.get(firstCovered) ?? 2000, 2000) });
  }

  /* ------------------------------------------------------------ sequences */

  /** A FASTA (or a link's reference): the plain file and its `.fai`, derived when missing. */
  private async fastaFiles(c: Ctx, key: string, gz: boolean, prefix: "" | "reference-"): Promise<{ fasta: string; fai: string; sequences: Array<{ name: string; length: number }> }> {
    let fasta = key;
    let fai = gz ? undefined : await this.sibling(key, [`${key}.fai`]);
    let faiText: string;
    if (gz) {
      const plain = `${prefix}sequence.fa`;
      await pipeline(Readable.from(this.textStream(key, true)), createWriteStream(join(c.dir, "work", plain)));
      await this.tool(c.dir, ["samtools", "faidx", plain], [], "indexing the FASTA (samtools faidx)");
      fasta = await this.upload(c.dir, plain, c.derived + plain, "text/plain");
      fai = await this.upload(c.dir, `${plain}.fai`, c.derived + `${plain}.fai`, "text/plain");
      faiText = readFileSync(join(c.dir, "work", `${plain}.fai`), "utf8");
      c.view.notes.push(`${prefix ? "reference " : ""}decompressed and indexed (samtools faidx)`);
    } else if (fai) {
      faiText = await this.text(fai, false);
    } else {
      const input = await this.local(c.dir, key, `${prefix}input.fa`);
      const out = `${prefix}sequence.fa.fai`;
      await this.tool(c.dir, ["samtools", "faidx", "--fai-idx", out, `in/${prefix}input.fa`], [{ host: input, name: `${prefix}input.fa` }], "indexing the FASTA (samtools faidx)");
      fai = await this.upload(c.dir, out, c.derived + out, "text/plain");
      faiText = readFileSync(join(c.dir, "work", out), "utf8");
      c.view.notes.push(`${prefix ? "reference " : ""}index built with samtools faidx`);
    }
    const sequences = faiText.split("\n").filter(Boolean).map((l) => { const [name, len] = l.split("\t"); return { name: name as string, length: Number(len) }; });
    return { fasta, fai, sequences };
  }

  private async fasta(c: Ctx): Promise<void> {
    const f = await this.fastaFiles(c, c.key, c.gz, "");
    c.view.files.primary = f.fasta;
    c.view.files["primary-index"] = f.fai;
    c.view.genome = { kind: "fasta", name: c.view.name };
    c.view.sequences = f.sequences.slice(0, 10_000);
    c.view.stats = { sequences: f.sequences.length, bases: f.sequences.reduce((a, s) => a + s.length, 0) };
    const s = f.sequences[0];
    if (s) c.view.locus = formatRegion({ chr: s.name, start: 1, end: Math.min(s.length, 10_000) });
  }

  private async reference(c: Ctx, ref: ObjectInfo): Promise<void> {
    const gz = /\.(gz|bgz)$/i.test(ref.key);
    const f = await this.fastaFiles(c, ref.key, gz, "reference-");
    c.view.files.reference = f.fasta;
    c.view.files["reference-index"] = f.fai;
    c.view.genome = { kind: "fasta", name: ref.key.split("/").pop() ?? "reference" };
    if (!c.view.sequences?.length) c.view.sequences = f.sequences.slice(0, 10_000);
  }

  private async fastq(c: Ctx): Promise<void> {
    const { records, complete } = await this.fastqSample(c.key, c.gz);
    if (!records.length) throw new ViewerDataError("unreadable", "this FASTQ file holds no reads");
    const phredOffset = detectPhredOffset(records);
    c.view.fastq = { sampled: records.length, complete, phredOffset, summary: summarize(records, phredOffset) };
  }

  private async fastqSample(key: string, gz: boolean): Promise<{ records: FastqRecord[]; complete: boolean }> {
    const reader = new FastqReader();
    const records: FastqRecord[] = [];
    let complete = true;
    try {
      for await (const chunk of this.textStream(key, gz)) {
        records.push(...reader.push(chunk.toString("utf8")));
        if (records.length >= FASTQ_SAMPLE_READS) { complete = false; break; }
      }
      if (complete) records.push(...reader.end());
    } catch (e) {
      throw new ViewerDataError("unreadable", e instanceof Error ? e.message : String(e));
    }
    return { records: records.slice(0, FASTQ_SAMPLE_READS), complete: complete && records.length <= FASTQ_SAMPLE_READS };
  }

  /** A page of the FASTQ sample. */
  async reads(grant: FileGrant, offset: number, limit: number): Promise<{ reads: FastqRecord[]; total: number }> {
    const { key } = await this.source(grant);
    const { records } = await this.fastqSample(key, detectViewer(grant.k, grant.f)?.gzipped ?? false);
    return { reads: records.slice(offset, offset + limit), total: records.length };
  }

  /* ------------------------------------------------------------ tables */

  private async tableMeta(c: Ctx): Promise<void> {
    const sample = await this.text(c.key, c.gz, 256 * 1024);
    const delimiter: Delimiter = c.view.subtype === "tsv" ? "\t" : detectDelimiter(sample);
    const cut = sample.length >= 256 * 1024 ? sample.slice(0, sample.lastIndexOf("\n") + 1) : sample;
    const t = parseTable(cut, { delimiter });
    if (t.header.length === 0) throw new ViewerDataError("unreadable", "this file holds no rows");
    const sortable = c.info.size <= TABLE_MEMORY_MAX_BYTES;
    c.view.table = { delimiter, header: t.header, headerDetected: t.headerDetected, types: columnTypes(t.rows, t.header.length), rows: null, sortable };
    if (sortable) {
      const full = await this.loadTable(c.key, c.gz, c.view);
      c.view.table.rows = full.rows.length;
      c.view.table.types = full.types;
    }
  }

  private loadTable(key: string, gz: boolean, view: Pick<PreparedView, "table" | "size" | "lastModified">) {
    const cacheKey = `${key}\n${view.size}\n${view.lastModified}`;
    let p = this.tables.get(cacheKey);
    if (!p) {
      p = (async () => {
        const text = await this.text(key, gz);
        const t = parseTable(text, { delimiter: view.table?.delimiter ?? detectDelimiter(text.slice(0, 65536)) });
        return { header: t.header, types: columnTypes(t.rows, t.header.length), rows: t.rows };
      })();
      this.tables.set(cacheKey, p);
      p.catch(() => this.tables.delete(cacheKey));
      if (this.tables.size > 4) this.tables.delete(this.tables.keys().next().value as string);
    }
    return p;
  }

  /** A page of a table: sorted and filtered over the whole file when it fits in memory, else in file order. */
  async rows(grant: FileGrant, q: { offset: number; limit: number; sort?: number; dir?: "asc" | "desc"; filter?: string }): Promise<{ rows: string[][]; total: number | null; filtered: number | null }> {
    const view = await this.prepare(grant);
    const key = view.files.primary as string;
    const gz = detectViewer(grant.k, grant.f)?.gzipped ?? false;
    if (view.table?.sortable) {
      const t = await this.loadTable(key, gz, view);
      let rows = t.rows;
      if (q.filter) rows = filterRows(rows, q.filter, t.header);
      if (q.sort !== undefined && q.sort >= 0 && q.sort < t.header.length) rows = sortRows(rows, q.sort, t.types[q.sort] ?? "text", q.dir ?? "asc");
      return { rows: rows.slice(q.offset, q.offset + q.limit), total: t.rows.length, filtered: rows.length };
    }
    // Too large to hold: stream to the page, in file order.
    const parser = new DelimitedParser(view.table?.delimiter ?? ",");
    const out: string[][] = [];
    let seen = 0;
    let skipHeader = view.table?.headerDetected ?? false;
    for await (const chunk of this.textStream(key, gz)) {
      for (const r of parser.push(chunk.toString("utf8"))) {
        if (skipHeader) { skipHeader = false; continue; }
        if (r.length === 1 && r[0]?.startsWith("#")) continue;
        if (seen++ >= q.offset) out.push(r);
        if (out.length >= q.limit) return { rows: out, total: null, filtered: null };
      }
    }
    return { rows: out, total: seen, filtered: seen };
  }
}

interface Ctx { grant: FileGrant; key: string; info: ObjectInfo; derived: string; dir: string; gz: boolean; view: PreparedView }
