/**
 * What a viewer link needs before a browser can show its file, worked out once per file
 * version and kept: igv.js reads only indexed or small files, so a BCF, a SAM, a large or
 * unindexed VCF, a BAM without its `.bai` or a plain-gzip FASTA is converted or indexed here
 * (a bgzip FASTA is served as it is, with its `.fai` and `.gzi`, built here when not beside it)
 * (samtools, bcftools, tabix through a ToolRunner), into the workspace's derived area
 * `_system/orgs/<org>/workspaces/<ws>/derived/<fingerprint>/` — never listed by the files
 * API, reused by every later link to the same file version, by any api-server replica. The
 * result (`PreparedView`) is written last, so a preparation cut short is simply redone.
 * Also: the FASTQ browser's sample and summary, and the table viewer's rows (parsed on the
 * server, sorted and filtered there, sent a page at a time).
 *
 * A user's file decides nothing here: what parses its text runs in the organization's reader
 * worker (readers/pool.ts) within the bounds of readers/worker.ts; a gzipped FASTA is
 * decompressed up to a size and a deadline; every tool writes files up to a size; and a
 * preparation is a compute task of its organization — it takes a slot of the organization's
 * limit, and at most half the server's preparation places — so one organization's files
 * cannot hold what another's links need.
 */
import { createHash } from "node:crypto";
import { createReadStream, createWriteStream, statSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { StoreError, type ObjectInfo, type ObjectStore, type SlotGate } from "../core/ports.js";
import { derivedPrefix, isSystemKey, workspaceRoot } from "../core/layout.js";
import { boundSize } from "../core/sizes.js";
import { formatRegion, VIEWER_KIND, detectViewer, type FileSubtype, type FileGrant, type ViewerKind } from "../core/viewers.js";
import { COMPRESSION_PROBE_BYTES, compressionFromBytes } from "../core/tools/compression.js";
import type { Delimiter } from "../core/delimited.js";
import type { summarize, FastqRecord } from "../core/fastq.js";
import type { ToolRunner } from "../adapters/local/tool-runner.js";
import { OperonError } from "../core/errors.js";
import { ReaderError } from "./readers/bounded.js";
import type { ReaderPool } from "./readers/pool.js";
import { READER_BOUNDS, type ReaderOp, type ReaderResults } from "./readers/worker.js";

/** Plain VCFs up to this size go to igv.js whole; larger ones are bgzipped and indexed first. */
export const VCF_INLINE_MAX_BYTES = READER_BOUNDS.vcfInlineBytes;
/** Tables up to this size (after decompression) are parsed into memory (sortable, filterable); larger ones page in file order. */
export const TABLE_MEMORY_MAX_BYTES = READER_BOUNDS.tableMemoryBytes;
/** Reads of a FASTQ sampled for the read browser and its summary. */
export const FASTQ_SAMPLE_READS = READER_BOUNDS.fastqReads;
/** Longest a conversion (or a decompression) may take. */
export const TOOL_TIMEOUT_MS = 15 * 60_000;
/** Largest file a preparation writes: a decompressed FASTA, a sorted BAM, a bgzipped VCF. */
export const PREPARED_FILE_MAX_BYTES = 8 * 1024 * 1024 * 1024;
/** Address space of a preparation's tool (samtools sort takes 768 MB per thread by default). */
export const PREPARED_TOOL_MEMORY_BYTES = 4 * 1024 * 1024 * 1024;

/** The files a link may serve, by the fixed names its URLs use: nothing else is reachable. */
export const DATA_NAMES = ["primary", "primary-index", "primary-gzi", "reference", "reference-index", "reference-gzi"] as const;
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

/**
 * A problem with the file itself, the page shows `message`: `not_found` (it, or its reference,
 * is gone) or `validation_failed` (it cannot be read as its viewer needs, e.g. past a reader's
 * bound). The API answers it like any taxonomy error (core/errors.ts).
 */
export class ViewerDataError extends OperonError {
  constructor(code: "not_found" | "validation_failed", message: string) { super(code, message); this.name = "ViewerDataError"; }
}

/** A tool's last words for the page: its own names for the working files (`in/input.bam`) read as "the file". */
const toolSays = (stderr: string) => stderr.split("\n").filter((l) => l.trim()).slice(-2).join(" ").replace(/"?\bin\/[\w.-]+"?/g, "the file");

const duration = (ms: number) => (ms % 60_000 === 0 ? `${ms / 60_000} minutes` : `${Math.round(ms / 1000)} s`);
const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const version = (i: ObjectInfo) => `${i.key}\n${i.size}\n${i.sha256 ?? i.etag ?? i.lastModified.toISOString()}`;

/** Preparations (indexing, conversion) running at once on one api-server; more wait their turn. */
export const MAX_CONCURRENT_PREPARATIONS = Math.max(2, availableParallelism());

/**
 * Places for preparations on this server: at most `total` at once and at most half of them
 * for one organization; a freed place goes to the longest-waiting organization that may take it.
 */
export class PreparationGate {
  private readonly held = new Map<string, number>();
  private total = 0;
  private readonly waiting: Array<{ org: string; go: () => void }> = [];
  readonly perOrganization: number;

  constructor(readonly places: number) { this.perOrganization = Math.max(1, Math.floor(places / 2)); }

  private fits(org: string) { return this.total < this.places && (this.held.get(org) ?? 0) < this.perOrganization; }
  private take(org: string): () => void {
    this.total++;
    this.held.set(org, (this.held.get(org) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total--;
      const n = (this.held.get(org) ?? 1) - 1;
      if (n === 0) this.held.delete(org); else this.held.set(org, n);
      const i = this.waiting.findIndex((w) => this.fits(w.org));
      if (i >= 0) this.waiting.splice(i, 1)[0]?.go();
    };
  }

  acquire(org: string): Promise<() => void> {
    if (this.fits(org)) return Promise.resolve(this.take(org));
    return new Promise((resolve) => this.waiting.push({ org, go: () => resolve(this.take(org)) }));
  }
}

export interface ViewerDataDeps {
  store: ObjectStore;
  runner: ToolRunner;
  /** Where the file's text is parsed: each organization's own worker. */
  readers: ReaderPool;
  /** A slot of the organization's compute limit (the engine's), when there is an engine. */
  slots?: SlotGate;
  /** Preparation places on this server (default MAX_CONCURRENT_PREPARATIONS). */
  places?: number;
  /** Bounds of a preparation (defaults TOOL_TIMEOUT_MS, PREPARED_FILE_MAX_BYTES). */
  limits?: { toolTimeoutMs?: number; preparedFileBytes?: number; toolMemoryBytes?: number };
}

export class ViewerData {
  private prepared = new Map<string, Promise<PreparedView>>();
  private readonly gate: PreparationGate;
  private readonly timeoutMs: number;
  private readonly fileBytes: number;
  private readonly memoryBytes: number;

  constructor(private readonly deps: ViewerDataDeps) {
    this.gate = new PreparationGate(deps.places ?? MAX_CONCURRENT_PREPARATIONS);
    this.timeoutMs = deps.limits?.toolTimeoutMs ?? TOOL_TIMEOUT_MS;
    this.fileBytes = deps.limits?.preparedFileBytes ?? PREPARED_FILE_MAX_BYTES;
    this.memoryBytes = deps.limits?.toolMemoryBytes ?? PREPARED_TOOL_MEMORY_BYTES;
  }

  /** One read of the organization's, in its reader worker, over the object at `key`. */
  private read<K extends ReaderOp["kind"]>(org: string, key: string, op: Extract<ReaderOp, { kind: K }>): Promise<ReaderResults[K]> {
    return this.deps.readers.run(org, op, async () => (await this.deps.store.get(key)).body).catch((e: unknown) => {
      throw e instanceof ReaderError ? new ViewerDataError("validation_failed", e.message) : e;
    });
  }

  /** The storage key of a grant's file (or reference), re-checked: a grant names keys of its own workspace only. */
  key(grant: FileGrant, rel: string): string {
    if (rel.startsWith("/") || rel.split("/").some((s) => s === "" || s === "." || s === "..") || isSystemKey(rel)) throw new ViewerDataError("not_found", "not a file of this workspace");
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
    const derived = derivedPrefix(grant.o, grant.w, fp);
    const done = await this.readJson<PreparedView>(derived + "view.json");
    if (done) return done;
    const abort = new AbortController();
    const slot = this.deps.slots ? await this.deps.slots(grant.o, `viewer-${fp}`, abort.signal, "preparation") : () => undefined;
    try {
      const place = await this.gate.acquire(grant.o);
      try {
        return await this.build(grant, key, info, ref, derived);
      } catch (e) {
        // A preparation that failed leaves nothing behind in the derived area.
        await this.clear(derived).catch(() => undefined);
        throw e;
      } finally {
        place();
      }
    } finally {
      slot();
    }
  }

  private async clear(prefix: string): Promise<void> {
    const page = await this.deps.store.list(prefix, { limit: 1000 });
    await Promise.all(page.items.map((i) => this.deps.store.delete(i.key)));
  }

  private async build(grant: FileGrant, key: string, info: ObjectInfo, ref: ObjectInfo | undefined, derived: string): Promise<PreparedView> {
    const detected = detectViewer(grant.k, grant.f);
    if (!detected) throw new ViewerDataError("validation_failed", "no viewer for this file");
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

  /** An object gunzipped into a working file, up to the largest prepared file and the tool deadline. */
  private async gunzipTo(key: string, dest: string): Promise<void> {
    let n = 0;
    const max = this.fileBytes;
    const cap = new Transform({
      transform(c: Buffer, _e, done) {
        n += c.length;
        done(n > max ? new ReaderError(`the file is larger than ${boundSize(max)} once decompressed; the viewer decompresses at most that much`) : null, c);
      },
    });
    const { body } = await this.deps.store.get(key);
    try {
      await pipeline(Readable.from(body as AsyncIterable<Uint8Array>), createGunzip(), cap, createWriteStream(dest), { signal: AbortSignal.timeout(this.timeoutMs) });
    } catch (e) {
      const err = e as { name?: string; code?: string; message?: string };
      if (e instanceof ReaderError) throw new ViewerDataError("validation_failed", e.message);
      if (err.name === "AbortError") throw new ViewerDataError("validation_failed", `decompressing the file took longer than ${duration(this.timeoutMs)}, the most a preparation may take`);
      if (err.code?.startsWith("Z_")) throw new ViewerDataError("validation_failed", `the file is not valid gzip (${err.message ?? ""})`);
      throw e;
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
    const r = await this.deps.runner.run(dir, { argv, inputs, ...this.toolBounds(), ...extra });
    if (r.code !== 0 && !r.stopped) throw new ViewerDataError("validation_failed", `${what} failed: ${this.bound(r) ?? (toolSays(r.stderr) || `exit ${r.code}`)}`);
    return r.stdout;
  }

  private toolBounds() {
    return { timeoutMs: this.timeoutMs, maxFileBytes: this.fileBytes, maxMemoryBytes: this.memoryBytes };
  }

  /** The bound that ended a tool, in words: its deadline, the largest file it may write, its memory. */
  private bound(r: { code: number | null; signal?: NodeJS.Signals | null; stopped: boolean; stderr: string }): string | undefined {
    if (r.signal === "SIGKILL" && !r.stopped) return `it took longer than ${duration(this.timeoutMs)}, the most a preparation may take`;
    // In the sandbox, bubblewrap exits 128 + the signal that ended the tool.
    if (r.signal === "SIGXFSZ" || r.code === 128 + 25) return `it would write a file larger than ${boundSize(this.fileBytes)}, the most a preparation may write`;
    if (/out of memory|cannot allocate|failed to allocate|memory exhausted|std::bad_alloc/i.test(r.stderr)) return `it needed more than ${boundSize(this.memoryBytes)} of memory, the most a preparation's tool may use`;
    return undefined;
  }

  /* ------------------------------------------------------------ variants */

  private async variant(c: Ctx): Promise<void> {
    const { view } = c;
    view.track = { format: "vcf", indexed: false };
    if (view.subtype === "vcf" && !c.gz && c.info.size <= VCF_INLINE_MAX_BYTES) {
      const scan = await this.read(c.grant.o, c.key, { kind: "vcf-scan" });
      const contigs = new Map(scan.contigs);
      const maxPos = new Map(scan.maxPos);
      const { first, records } = scan;
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
      const r = await this.deps.runner.run(c.dir, { argv: ["tabix", "-f", "-p", "vcf", "variants.vcf.gz"], ...this.toolBounds() });
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
    if (cram && !c.grant.r) throw new ViewerDataError("validation_failed", "a CRAM file can only be shown with its reference FASTA: ask for the link with `reference`");
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
      const r = await this.deps.runner.run(c.dir, { argv: ["samtools", "index", "-o", idxFile, `in/${inName}`], inputs: [{ host: input, name: inName }], ...this.toolBounds() });
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
      } else throw new ViewerDataError("validation_failed", `this ${ext.toUpperCase()} file could not be indexed: ${this.bound(r) ?? toolSays(r.stderr)}`);
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

  /**
   * A FASTA (or a link's reference) as igv.js reads it: the plain file and its `.fai`, derived
   * when missing; a bgzip one as it is, with its `.fai` and `.gzi` (those beside it, else
   * built); a plain-gzip one decompressed (it cannot be read at random).
   */
  private async fastaFiles(c: Ctx, key: string, gz: boolean, prefix: "" | "reference-"): Promise<{ fasta: string; fai: string; gzi?: string } & ReaderResults["fai"]> {
    if (gz && await this.isBgzip(key)) return this.bgzipFasta(c, key, prefix);
    let fasta = key;
    let fai = gz ? undefined : await this.sibling(key, [`${key}.fai`]);
    let index: ReaderResults["fai"];
    if (gz) {
      const plain = `${prefix}sequence.fa`;
      await this.gunzipTo(key, join(c.dir, "work", plain));
      await this.tool(c.dir, ["samtools", "faidx", plain], [], "indexing the FASTA (samtools faidx)");
      fasta = await this.upload(c.dir, plain, c.derived + plain, "text/plain");
      fai = await this.upload(c.dir, `${plain}.fai`, c.derived + `${plain}.fai`, "text/plain");
      index = await this.read(c.grant.o, fai, { kind: "fai" });
      c.view.notes.push(`${prefix ? "reference " : ""}decompressed and indexed (samtools faidx)`);
    } else if (fai) {
      index = await this.read(c.grant.o, fai, { kind: "fai" });
    } else {
      const input = await this.local(c.dir, key, `${prefix}input.fa`);
      const out = `${prefix}sequence.fa.fai`;
      await this.tool(c.dir, ["samtools", "faidx", "--fai-idx", out, `in/${prefix}input.fa`], [{ host: input, name: `${prefix}input.fa` }], "indexing the FASTA (samtools faidx)");
      fai = await this.upload(c.dir, out, c.derived + out, "text/plain");
      index = await this.read(c.grant.o, fai, { kind: "fai" });
      c.view.notes.push(`${prefix ? "reference " : ""}index built with samtools faidx`);
    }
    return { fasta, fai, ...index };
  }

  /** Whether an object is bgzip-compressed (BGZF), from its first bytes. */
  private async isBgzip(key: string): Promise<boolean> {
    const chunks: Buffer[] = [];
    try {
      const { body } = await this.deps.store.get(key, { start: 0, end: COMPRESSION_PROBE_BYTES - 1 });
      for await (const chunk of body as AsyncIterable<Uint8Array>) chunks.push(Buffer.from(chunk));
    } catch (e) {
      // An empty file has no range to read: not bgzip (decompressing it says what is wrong).
      if (e instanceof StoreError && e.code === "RangeNotSatisfiable") return false;
      throw e;
    }
    return compressionFromBytes(Buffer.concat(chunks)) === "bgzip";
  }

  /** A bgzip FASTA, served compressed: its `.fai` and `.gzi` from beside it, else from `samtools faidx` (both, into the derived area). */
  private async bgzipFasta(c: Ctx, key: string, prefix: "" | "reference-"): Promise<{ fasta: string; fai: string; gzi: string } & ReaderResults["fai"]> {
    let fai = await this.sibling(key, [`${key}.fai`]);
    let gzi = fai ? await this.sibling(key, [`${key}.gzi`]) : undefined;
    if (!fai || !gzi) {
      const name = `${prefix}input.fa.gz`;
      const input = await this.local(c.dir, key, name);
      const [faiName, gziName] = [`${prefix}sequence.fa.gz.fai`, `${prefix}sequence.fa.gz.gzi`];
      await this.tool(c.dir, ["samtools", "faidx", "--fai-idx", faiName, "--gzi-idx", gziName, `in/${name}`], [{ host: input, name }], "indexing the bgzip FASTA (samtools faidx)");
      fai = await this.upload(c.dir, faiName, c.derived + faiName, "text/plain");
      gzi = await this.upload(c.dir, gziName, c.derived + gziName);
      c.view.notes.push(`${prefix ? "reference " : ""}bgzip-compressed: .fai and .gzi built with samtools faidx`);
    }
    return { fasta: key, fai, gzi, ...await this.read(c.grant.o, fai, { kind: "fai" }) };
  }

  private async fasta(c: Ctx): Promise<void> {
    const f = await this.fastaFiles(c, c.key, c.gz, "");
    c.view.files.primary = f.fasta;
    c.view.files["primary-index"] = f.fai;
    if (f.gzi) c.view.files["primary-gzi"] = f.gzi;
    c.view.genome = { kind: "fasta", name: c.view.name };
    c.view.sequences = f.sequences;
    c.view.stats = { sequences: f.count, bases: f.bases };
    const s = f.sequences[0];
    if (s) c.view.locus = formatRegion({ chr: s.name, start: 1, end: Math.min(s.length, 10_000) });
  }

  private async reference(c: Ctx, ref: ObjectInfo): Promise<void> {
    const gz = /\.(gz|bgz)$/i.test(ref.key);
    const f = await this.fastaFiles(c, ref.key, gz, "reference-");
    c.view.files.reference = f.fasta;
    c.view.files["reference-index"] = f.fai;
    if (f.gzi) c.view.files["reference-gzi"] = f.gzi;
    c.view.genome = { kind: "fasta", name: ref.key.split("/").pop() ?? "reference" };
    if (!c.view.sequences?.length) c.view.sequences = f.sequences;
  }

  private async fastq(c: Ctx): Promise<void> {
    c.view.fastq = await this.read(c.grant.o, c.key, { kind: "fastq-summary", cacheKey: sha(version(c.info)), gz: c.gz });
  }

  /** A page of the FASTQ sample. */
  async reads(grant: FileGrant, offset: number, limit: number): Promise<{ reads: FastqRecord[]; total: number }> {
    const { key, info } = await this.source(grant);
    return this.read(grant.o, key, { kind: "fastq-reads", cacheKey: sha(version(info)), gz: detectViewer(grant.k, grant.f)?.gzipped ?? false, offset, limit });
  }

  /* ------------------------------------------------------------ tables */

  private async tableMeta(c: Ctx): Promise<void> {
    const t = await this.read(c.grant.o, c.key, { kind: "table-load", cacheKey: sha(version(c.info)), gz: c.gz, ...(c.view.subtype === "tsv" ? { delimiter: "\t" as const } : {}) });
    if (t.header.length === 0) throw new ViewerDataError("validation_failed", "this file holds no rows");
    c.view.table = { delimiter: t.delimiter, header: t.header, headerDetected: t.headerDetected, types: t.types, rows: t.rows, sortable: !t.tooLarge };
    if (t.tooLarge) c.view.notes.push(`shown in file order: ${t.tooLarge}`);
  }

  /** A page of a table: sorted and filtered over the whole file when it fits in memory, else in file order. */
  async rows(grant: FileGrant, q: { offset: number; limit: number; sort?: number; dir?: "asc" | "desc"; filter?: string }): Promise<{ rows: string[][]; total: number | null; filtered: number | null }> {
    const view = await this.prepare(grant);
    const { key, info } = await this.source(grant);
    const gz = detectViewer(grant.k, grant.f)?.gzipped ?? false;
    const delimiter = view.table?.delimiter ?? ",";
    if (view.table?.sortable) {
      const page = await this.read(grant.o, key, { kind: "table-page", cacheKey: sha(version(info)), gz, delimiter, q });
      if (!("tooLarge" in page)) return page;
    }
    return this.read(grant.o, key, { kind: "stream-page", gz, delimiter, headerDetected: view.table?.headerDetected ?? false, offset: q.offset, limit: q.limit });
  }
}

interface Ctx { grant: FileGrant; key: string; info: ObjectInfo; derived: string; dir: string; gz: boolean; view: PreparedView }
