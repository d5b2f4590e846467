/**
 * What the viewers read out of a user's file, off the API's event loop: a worker thread (one
 * per organization, see pool.ts) with its own heap cap parses the table viewer's rows, the
 * FASTQ browser's sample, a small VCF's contigs and a FASTA index, from bytes the api-server
 * pulls out of the store one chunk at a time. Every read goes through boundedText (bytes
 * after decompression, longest line); a table is held for sorting only while it fits the cell
 * budget, and the tables and samples kept for the next page share one budget per worker.
 */
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { columnTypes, DelimitedParser, detectDelimiter, filterRows, parseTable, sortRows, type ColumnType, type Delimiter } from "../../core/delimited.js";
import { detectPhredOffset, FastqReader, summarize, type FastqRecord } from "../../core/fastq.js";
import { boundSize } from "../../core/sizes.js";
import { boundedText, ReaderError } from "./bounded.js";
import { messageOf } from "../../core/errors.js";

/** The bounds of every read, by reader: docs/security.md lists them. */
export const READER_BOUNDS = {
  /** A table is parsed into memory (sortable, filterable) up to this many bytes after decompression… */
  tableMemoryBytes: 64 * 1024 * 1024,
  /** …and this many cells; larger tables are paged in file order. */
  tableMemoryCells: 4_000_000,
  /** A page in file order reads at most this far into the decompressed file. */
  tableStreamBytes: 16 * 1024 * 1024 * 1024,
  /** Longest line of a table, a FASTQ, a VCF. */
  lineBytes: 8 * 1024 * 1024,
  /** Reads sampled for the read browser and its summary… */
  fastqReads: 2000,
  /** …and the most sequence and quality text they may hold together. */
  fastqSampleChars: 64 * 1024 * 1024,
  /** Bytes the FASTQ sampler reads, decompressed, to find its reads. */
  fastqBytes: 256 * 1024 * 1024,
  /** A plain VCF shown without an index (and scanned for its contigs) is at most this large. */
  vcfInlineBytes: 10 * 1024 * 1024,
  /** A FASTA index (`.fai`) read for its sequence names. */
  faiBytes: 64 * 1024 * 1024,
  /** Sequences of a FASTA listed for the viewer (all are counted). */
  faiListed: 10_000,
  /** Cells of tables plus characters/32 of FASTQ samples one organization's worker keeps for later pages. */
  cacheCells: 6_000_000,
} as const;

export interface TablePageQuery { offset: number; limit: number; sort?: number; dir?: "asc" | "desc"; filter?: string }
export interface TableShape { header: string[]; headerDetected: boolean; types: ColumnType[]; rows: number | null }
export type TablePage = { rows: string[][]; total: number | null; filtered: number | null };

export type ReaderOp =
  | { kind: "table-load"; cacheKey: string; gz: boolean; delimiter?: Delimiter }
  | { kind: "table-page"; cacheKey: string; gz: boolean; delimiter?: Delimiter; q: TablePageQuery }
  | { kind: "stream-page"; gz: boolean; delimiter: Delimiter; headerDetected: boolean; offset: number; limit: number }
  | { kind: "fastq-summary"; cacheKey: string; gz: boolean }
  | { kind: "fastq-reads"; cacheKey: string; gz: boolean; offset: number; limit: number }
  | { kind: "vcf-scan" }
  | { kind: "fai" };

export interface ReaderResults {
  "table-load": TableShape & { delimiter: Delimiter; tooLarge?: string };
  "table-page": TablePage | { tooLarge: string };
  "stream-page": TablePage;
  "fastq-summary": { sampled: number; complete: boolean; phredOffset: 33 | 64; summary: ReturnType<typeof summarize> };
  "fastq-reads": { reads: FastqRecord[]; total: number };
  "vcf-scan": { contigs: Array<[string, number]>; maxPos: Array<[string, number]>; first: [string, number] | null; records: number };
  "fai": { sequences: Array<{ name: string; length: number }>; count: number; bases: number };
}

/** Messages between the pool and a worker. */
export type ToWorker = { type: "op"; id: number; op: ReaderOp } | { type: "chunk"; id: number; data: Uint8Array } | { type: "end"; id: number } | { type: "source-error"; id: number; message: string };
export type FromWorker = { type: "pull"; id: number } | { type: "done"; id: number; value: unknown } | { type: "failed"; id: number; message: string; bounded: boolean };

type Source = AsyncIterable<Uint8Array>;

/* ------------------------------------------------------------ kept for the next page */

interface Table { delimiter: Delimiter; header: string[]; headerDetected: boolean; types: ColumnType[]; rows: string[][]; cells: number }
interface Sample { records: FastqRecord[]; complete: boolean; chars: number }

/** Least recently used first out, within one weight budget. */
class Kept<V> {
  private readonly items = new Map<string, { value: V; weight: number }>();
  private total = 0;
  constructor(private readonly budget: () => number, private readonly others: () => number) {}
  get(k: string): V | undefined {
    const e = this.items.get(k);
    if (!e) return undefined;
    this.items.delete(k);
    this.items.set(k, e);
    return e.value;
  }
  set(k: string, value: V, weight: number): void {
    this.delete(k);
    this.items.set(k, { value, weight });
    this.total += weight;
    while (this.total + this.others() > this.budget() && this.items.size > 1) this.delete(this.items.keys().next().value as string);
  }
  delete(k: string): void {
    const e = this.items.get(k);
    if (e) { this.total -= e.weight; this.items.delete(k); }
  }
  get weight(): number { return this.total; }
}

const tables: Kept<Table> = new Kept(() => READER_BOUNDS.cacheCells, () => samples.weight);
const samples: Kept<Sample> = new Kept(() => READER_BOUNDS.cacheCells, () => tables.weight);

/* ------------------------------------------------------------ the readers */

const TABLE = "the table viewer";

/** Cells of a delimited text, counted from above (a quoted delimiter counts too). */
function cellsAtMost(text: string, delimiter: Delimiter): number {
  const d = delimiter.charCodeAt(0);
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === d || c === 10) n++;
  }
  return n + 1;
}

/** The start of a table, for its delimiter, header and column types when the whole is not held. */
const TABLE_SAMPLE_CHARS = 256 * 1024;

async function loadTable(source: Source, op: { cacheKey: string; gz: boolean; delimiter?: Delimiter }): Promise<Table | { tooLarge: string; sample: string }> {
  const kept = tables.get(op.cacheKey);
  if (kept) return kept;
  const parts: string[] = [];
  try {
    for await (const s of boundedText(source, { gz: op.gz, maxBytes: READER_BOUNDS.tableMemoryBytes, maxLineBytes: READER_BOUNDS.lineBytes, reader: TABLE })) parts.push(s);
  } catch (e) {
    if (!(e instanceof ReaderError && e.bound === "bytes")) throw e;
    const head = parts.join("").slice(0, TABLE_SAMPLE_CHARS);
    return { tooLarge: `the file is larger than ${boundSize(READER_BOUNDS.tableMemoryBytes)}${op.gz ? " once decompressed" : ""}; sorting and filtering take at most that much`, sample: head.slice(0, head.lastIndexOf("\n") + 1) };
  }
  const text = parts.join("");
  parts.length = 0;
  const delimiter = op.delimiter ?? detectDelimiter(text.slice(0, 64 * 1024));
  const cells = cellsAtMost(text, delimiter);
  if (cells > READER_BOUNDS.tableMemoryCells) {
    const head = text.slice(0, TABLE_SAMPLE_CHARS);
    return { tooLarge: `the table has more than ${READER_BOUNDS.tableMemoryCells.toLocaleString("en-US")} cells; sorting and filtering take at most that many`, sample: head.slice(0, head.lastIndexOf("\n") + 1) };
  }
  const t = parseTable(text, { delimiter });
  const table: Table = { delimiter, header: t.header, headerDetected: t.headerDetected, types: columnTypes(t.rows, t.header.length), rows: t.rows, cells };
  tables.set(op.cacheKey, table, cells);
  return table;
}

async function tablePage(source: Source, op: Extract<ReaderOp, { kind: "table-page" }>): Promise<ReaderResults["table-page"]> {
  const t = await loadTable(source, op);
  if ("tooLarge" in t) return { tooLarge: t.tooLarge };
  const q = op.q;
  let rows = t.rows;
  if (q.filter) rows = filterRows(rows, q.filter, t.header);
  if (q.sort !== undefined && q.sort >= 0 && q.sort < t.header.length) rows = sortRows(rows, q.sort, t.types[q.sort] ?? "text", q.dir ?? "asc");
  return { rows: rows.slice(q.offset, q.offset + q.limit), total: t.rows.length, filtered: rows.length };
}

async function streamPage(source: Source, op: Extract<ReaderOp, { kind: "stream-page" }>): Promise<TablePage> {
  const parser = new DelimitedParser(op.delimiter);
  const out: string[][] = [];
  let seen = 0;
  let skipHeader = op.headerDetected;
  const take = (records: string[][]) => {
    for (const r of records) {
      if (skipHeader) { skipHeader = false; continue; }
      if (r.length === 1 && r[0]?.startsWith("#")) continue;
      if (seen++ >= op.offset) out.push(r);
      if (out.length >= op.limit) return true;
    }
    return false;
  };
  for await (const s of boundedText(source, { gz: op.gz, maxBytes: READER_BOUNDS.tableStreamBytes, maxLineBytes: READER_BOUNDS.lineBytes, reader: TABLE })) {
    if (take(parser.push(s))) return { rows: out, total: null, filtered: null };
    // A quote left open makes one record of many lines: it is bounded like a line.
    if (parser.pendingChars > READER_BOUNDS.lineBytes) throw new ReaderError(`a record of the file is longer than ${boundSize(READER_BOUNDS.lineBytes)} (is a quote left open?); ${TABLE} reads records up to that length`, "line");
  }
  take(parser.end());
  return { rows: out.slice(0, op.limit), total: seen, filtered: seen };
}

async function fastqSample(source: Source, op: { cacheKey: string; gz: boolean }): Promise<Sample> {
  const kept = samples.get(op.cacheKey);
  if (kept) return kept;
  const reader = new FastqReader();
  const records: FastqRecord[] = [];
  let chars = 0;
  let complete = true;
  const add = (rs: FastqRecord[]) => {
    for (const r of rs) {
      if (records.length >= READER_BOUNDS.fastqReads || chars + r.seq.length + r.qual.length > READER_BOUNDS.fastqSampleChars) { complete = false; return true; }
      records.push(r);
      chars += r.name.length + r.seq.length + r.qual.length;
    }
    return false;
  };
  try {
    let stopped = false;
    for await (const s of boundedText(source, { gz: op.gz, maxBytes: READER_BOUNDS.fastqBytes, maxLineBytes: READER_BOUNDS.lineBytes, reader: "the read browser" })) {
      if (add(reader.push(s))) { stopped = true; break; }
    }
    if (!stopped) add(reader.end());
  } catch (e) {
    // Past the byte bound with reads in hand: the sample is what was read.
    if (!(e instanceof ReaderError && e.bound === "bytes" && records.length > 0)) throw e instanceof ReaderError ? e : new ReaderError(messageOf(e));
    complete = false;
  }
  const sample = { records, complete, chars };
  samples.set(op.cacheKey, sample, Math.ceil(chars / 32));
  return sample;
}

async function vcfScan(source: Source): Promise<ReaderResults["vcf-scan"]> {
  const contigs = new Map<string, number>();
  const maxPos = new Map<string, number>();
  let first: [string, number] | null = null;
  let records = 0;
  let rest = "";
  let started = false;
  const line = (l: string) => {
    if (!started) {
      started = true;
      if (!l.startsWith("##fileformat=VCF")) throw new ReaderError("this is not a VCF file (it does not start with ##fileformat=VCF)");
    }
    if (l.startsWith("#")) {
      const m = /^##contig=<ID=([^,>]+)(?:,[^>]*?length=(\d+))?/.exec(l);
      if (m) contigs.set(m[1] as string, Number(m[2] ?? 0));
      return;
    }
    if (!l) return;
    const t1 = l.indexOf("\t");
    const t2 = l.indexOf("\t", t1 + 1);
    const chr = l.slice(0, t1);
    const pos = Number(l.slice(t1 + 1, t2));
    if (t1 <= 0 || t2 < 0 || !Number.isFinite(pos)) throw new ReaderError(`line ${records + 1} of the records is not a VCF record`);
    records++;
    first ??= [chr, pos];
    if (pos > (maxPos.get(chr) ?? 0)) maxPos.set(chr, pos);
  };
  for await (const s of boundedText(source, { gz: false, maxBytes: READER_BOUNDS.vcfInlineBytes, maxLineBytes: READER_BOUNDS.lineBytes, reader: "the variant viewer without an index" })) {
    if (!s.includes("\n")) { rest += s; continue; }
    const lines = (rest + s).split("\n");
    rest = lines.pop() as string;
    for (const l of lines) line(l.endsWith("\r") ? l.slice(0, -1) : l);
  }
  if (rest) line(rest);
  if (!started) throw new ReaderError("this is not a VCF file (it is empty)");
  return { contigs: [...contigs], maxPos: [...maxPos], first, records };
}

async function fai(source: Source): Promise<ReaderResults["fai"]> {
  const sequences: Array<{ name: string; length: number }> = [];
  let count = 0, bases = 0, rest = "";
  const line = (l: string) => {
    if (!l) return;
    const [name, len] = l.split("\t", 2);
    const n = Number(len);
    if (!name || !Number.isSafeInteger(n) || n < 0) throw new ReaderError(`line ${count + 1} of the FASTA index is not "name<TAB>length…"`);
    count++;
    bases += n;
    if (sequences.length < READER_BOUNDS.faiListed) sequences.push({ name, length: n });
  };
  for await (const s of boundedText(source, { gz: false, maxBytes: READER_BOUNDS.faiBytes, maxLineBytes: 1024 * 1024, reader: "the sequence viewer's index reader" })) {
    if (!s.includes("\n")) { rest += s; continue; }
    const lines = (rest + s).split("\n");
    rest = lines.pop() as string;
    for (const l of lines) line(l);
  }
  line(rest);
  return { sequences, count, bases };
}

async function run(op: ReaderOp, source: Source): Promise<unknown> {
  switch (op.kind) {
    case "table-load": {
      const t = await loadTable(source, op);
      if ("tooLarge" in t) {
        // Shown in file order: the shape comes from the start of the file.
        const delimiter = op.delimiter ?? detectDelimiter(t.sample.slice(0, 64 * 1024));
        const p = parseTable(t.sample, { delimiter });
        return { delimiter, header: p.header, headerDetected: p.headerDetected, types: columnTypes(p.rows, p.header.length), rows: null, tooLarge: t.tooLarge };
      }
      return { delimiter: t.delimiter, header: t.header, headerDetected: t.headerDetected, types: t.types, rows: t.rows.length };
    }
    case "table-page": return tablePage(source, op);
    case "stream-page": return streamPage(source, op);
    case "fastq-summary": {
      const s = await fastqSample(source, op);
      if (!s.records.length) throw new ReaderError("this FASTQ file holds no reads");
      const phredOffset = detectPhredOffset(s.records);
      return { sampled: s.records.length, complete: s.complete, phredOffset, summary: summarize(s.records, phredOffset) };
    }
    case "fastq-reads": {
      const s = await fastqSample(source, op);
      return { reads: s.records.slice(op.offset, op.offset + op.limit), total: s.records.length };
    }
    case "vcf-scan": return vcfScan(source);
    case "fai": return fai(source);
  }
}

/* ------------------------------------------------------------ the worker's side of the protocol */

if (!isMainThread && parentPort && (workerData as { operonReader?: boolean } | undefined)?.operonReader) {
  const port = parentPort;
  /** Chunks that arrived for the op being read, and who waits for the next one. */
  const inbox = new Map<number, { chunks: Array<Uint8Array | null | Error>; wake?: () => void }>();
  const post = (m: FromWorker) => port.postMessage(m);
  const source = (id: number): Source => ({
    async *[Symbol.asyncIterator]() {
      const box = inbox.get(id);
      if (!box) return;
      for (;;) {
        if (box.chunks.length === 0) {
          post({ type: "pull", id });
          await new Promise<void>((r) => { box.wake = r; });
        }
        const c = box.chunks.shift();
        if (c === null || c === undefined) return;
        if (c instanceof Error) throw c;
        yield c;
      }
    },
  });
  const deliver = (id: number, c: Uint8Array | null | Error) => {
    const box = inbox.get(id);
    if (!box) return;
    box.chunks.push(c);
    const w = box.wake;
    box.wake = undefined;
    w?.();
  };
  port.on("message", (m: ToWorker) => {
    switch (m.type) {
      case "op":
        inbox.set(m.id, { chunks: [] });
        void run(m.op, source(m.id)).then(
          (value) => post({ type: "done", id: m.id, value }),
          (e: unknown) => post({ type: "failed", id: m.id, message: messageOf(e), bounded: e instanceof ReaderError }),
        ).finally(() => inbox.delete(m.id));
        break;
      case "chunk": deliver(m.id, m.data); break;
      case "end": deliver(m.id, null); break;
      case "source-error": deliver(m.id, new Error(m.message)); break;
    }
  });
}
