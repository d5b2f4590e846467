/**
 * Sanity checks of the binary coverage inputs before the @gmod readers parse them. Those
 * readers trust the file: a bigWig chromosome tree whose node points at itself sends
 * @gmod/bbi into an endless (and growing) traversal, a BAI with 2^31 chunks in a bin keeps
 * @gmod/bam looping, an offset past the end makes them allocate what it says. Here every count
 * is checked against the bytes that could hold it, every offset against the file's size, and
 * the trees are walked with a visited set and depth and node limits, so a crafted file ends in
 * a `ChartError` that says what is wrong. All reads go through a `BoundedFile`
 * (bounded-read.ts). docs/security.md ("Bounds on chart inputs") lists the limits.
 */
import { ChartError } from "../../plots/chart.js";
import { boundedChunks, BoundedFile } from "./bounded-read.js";
import { messageOf } from "../../core/errors.js";

/** Contigs of a BAM or bigWig (a draft assembly has up to a few million). */
export const MAX_CONTIGS = 10_000_000;
/** A BAM header (its text plus the contig list), decompressed. */
export const BAM_HEADER_MAX_BYTES = 256 * 1024 * 1024;
/** A BAI or CSI index (a CSI decompressed); a human whole-genome BAM's is about 10 MB. */
export const BAM_INDEX_MAX_BYTES = 256 * 1024 * 1024;
/** Nodes of a bigWig chromosome B+ tree, and of the part of an R-tree index one region visits. */
export const BIGWIG_MAX_TREE_NODES = 1_000_000;
/** Depth of a bigWig B+ tree or R-tree (a real one is a handful of levels deep). */
export const BIGWIG_MAX_TREE_DEPTH = 64;
/** A bigWig's largest decompressed data block (its header's uncompressBufSize; UCSC writes 32 KB). */
export const BIGWIG_MAX_BLOCK_BYTES = 64 * 1024 * 1024;
/** Where a bigWig header's totalSummary and autoSql may start (the reader fetches the header up to there). */
const BIGWIG_MAX_HEADER_BYTES = 1024 * 1024;

const BIGWIG_MAGIC = 0x888ffc26;
const CHROM_TREE_MAGIC = 0x78ca8c91;
const RTREE_MAGIC = 0x2468ace0;
const BAI_MAGIC = 0x01494142; // "BAI\1"
const CSI_MAGIC = 0x01495343; // "CSI\1"
const BAM_MAGIC = 0x014d4142; // "BAM\1"

const n = (v: number | bigint) => Number(v).toLocaleString("en-US");

/** A cursor over a buffer that refuses to read past its end. */
class Cursor {
  pos = 0;
  private readonly view: DataView;
  constructor(private readonly buf: Uint8Array, private readonly fail: (msg: string) => ChartError) {
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  get left(): number { return this.buf.byteLength - this.pos; }
  need(bytes: number, what: string): void {
    if (!(bytes >= 0) || bytes > this.left) throw this.fail(`${what} needs ${n(bytes)} bytes at byte ${n(this.pos)}, but only ${n(Math.max(0, this.left))} are left`);
  }
  u32(what: string): number { this.need(4, what); const v = this.view.getUint32(this.pos, true); this.pos += 4; return v; }
  i32(what: string): number { this.need(4, what); const v = this.view.getInt32(this.pos, true); this.pos += 4; return v; }
  u64(what: string): number { this.need(8, what); const v = Number(this.view.getBigUint64(this.pos, true)); this.pos += 8; return v; }
  skip(bytes: number, what: string): void { this.need(bytes, what); this.pos += bytes; }
}

/** A count read from the file, checked: not negative, at most `max`, and `each` bytes apiece fit in what is left. */
function count(c: Cursor, v: number, max: number, each: number, what: string, fail: (m: string) => ChartError): number {
  if (v < 0 || v > max) throw fail(`${what} is ${n(v)}${v > max ? `, more than the ${n(max)} a chart accepts` : ""}`);
  if (v * each > c.left) throw fail(`${what} is ${n(v)}, which needs ${n(v * each)} bytes; only ${n(c.left)} are left`);
  return v;
}

// ---------- BAM ----------

/**
 * The BAM header (magic, text length, contig list) read from the start of the file, through
 * gunzip with a byte cap: text and contig counts are checked before anything is allocated for them.
 */
export async function checkBamHeader(path: string): Promise<{ nRef: number }> {
  const fail = (m: string) => new ChartError(`the file could not be read as a BAM file: ${m}`);
  // The BAM is BGZF, concatenated gzip members: read through gunzip, never past the header.
  const src = boundedChunks(path, { gzip: true, maxBytes: Number.MAX_SAFE_INTEGER, maxLine: Number.MAX_SAFE_INTEGER, what: "the BAM file" });
  let buf: Buffer = Buffer.alloc(0);
  let read = 0;
  const need = async (k: number, what: string) => {
    while (buf.length < k) {
      if (read > BAM_HEADER_MAX_BYTES) throw fail(`its header is more than ${n(BAM_HEADER_MAX_BYTES)} bytes (${what}), the most a chart reads`);
      const r = await src.next();
      if (r.done) throw fail(`it ends inside its header (${what})`);
      const c = r.value as Buffer;
      read += c.length;
      buf = buf.length ? Buffer.concat([buf, c]) : c;
    }
  };
  const skip = async (k: number, what: string) => {
    while (k > buf.length) {
      k -= buf.length;
      buf = Buffer.alloc(0);
      await need(1, what);
    }
    buf = buf.subarray(k);
  };
  try {
    await need(8, "magic");
    if (buf.readUInt32LE(0) !== BAM_MAGIC) throw fail("it does not start with the BAM magic number (is it a SAM or CRAM file, or not decompressed by BGZF?)");
    const lText = buf.readInt32LE(4);
    if (lText < 0 || lText > BAM_HEADER_MAX_BYTES) throw fail(`its header text length is ${n(lText)} bytes; a chart reads at most ${n(BAM_HEADER_MAX_BYTES)}`);
    buf = buf.subarray(8);
    await skip(lText, "header text");
    await need(4, "contig count");
    const nRef = buf.readInt32LE(0);
    buf = buf.subarray(4);
    if (nRef < 0 || nRef > MAX_CONTIGS) throw fail(`it says it has ${n(nRef)} contigs; a chart accepts at most ${n(MAX_CONTIGS)}`);
    for (let i = 0; i < nRef; i++) {
      await need(4, `contig ${i + 1} of ${n(nRef)}`);
      const lName = buf.readInt32LE(0);
      if (lName < 1 || lName > 1 << 20) throw fail(`contig ${i + 1}'s name length is ${n(lName)} bytes`);
      await need(4 + lName + 4, `contig ${i + 1} of ${n(nRef)}`);
      buf = buf.subarray(8 + lName);
    }
    return { nRef };
  } catch (e) {
    if (e instanceof ChartError) throw e;
    throw fail(`${messageOf(e)}`);
  } finally {
    await src.return(undefined);
  }
}

/** Highest bin number of a binning index with this depth (BAI: depth 5, 37449), plus one for the pseudo-bin. */
const maxBin = (depth: number) => ((1 << (3 * (depth + 1))) - 1) / 7;

/**
 * A BAI or CSI index, parsed through with every count checked against the bytes left and the
 * BAM's size (chunk offsets past the end of the BAM are refused), before @gmod/bam reads it.
 */
export async function checkBamIndex(indexPath: string, bamSize: number, nRef: number): Promise<void> {
  const csi = /\.csi$/i.test(indexPath);
  const name = csi ? "the BAM index (.csi)" : "the BAM index (.bai)";
  const fail = (m: string) => new ChartError(`${name} is corrupt or does not belong to this BAM file: ${m}; delete it to have the index rebuilt, or index the BAM again with samtools index`);
  let bytes: Uint8Array;
  if (csi) {
    const out: Buffer[] = [];
    try {
      for await (const c of boundedChunks(indexPath, { gzip: true, maxBytes: BAM_INDEX_MAX_BYTES, maxLine: Number.MAX_SAFE_INTEGER, what: name })) out.push(c);
    } catch (e) {
      if (e instanceof ChartError && /once decompressed/.test(e.message)) throw e;
      throw fail(`it could not be decompressed (${messageOf(e)})`);
    }
    bytes = Buffer.concat(out);
  } else {
    const f = new BoundedFile(indexPath, name, { maxRead: BAM_INDEX_MAX_BYTES, maxTotal: BAM_INDEX_MAX_BYTES, maxReads: 4 });
    if ((await f.size()) > BAM_INDEX_MAX_BYTES) throw new ChartError(`${name} is ${n(await f.size())} bytes; a chart reads at most ${n(BAM_INDEX_MAX_BYTES)}`);
    bytes = await f.readFile();
  }
  const c = new Cursor(bytes, fail);
  if (c.u32("the magic number") !== (csi ? CSI_MAGIC : BAI_MAGIC)) throw fail("it does not start with the index's magic number");
  let depth = 5;
  if (csi) {
    const minShift = c.i32("min_shift");
    depth = c.i32("depth");
    if (minShift < 0 || minShift > 30 || depth < 0 || depth > 10 || minShift + 3 * depth > 63) throw fail(`its min_shift ${minShift} and depth ${depth} are not a binning scheme`);
    const lAux = c.i32("l_aux");
    count(c, lAux, BAM_INDEX_MAX_BYTES, 1, "its aux length", fail);
    c.skip(lAux, "aux data");
  }
  const top = maxBin(depth);
  const refs = c.i32("the contig count");
  count(c, refs, MAX_CONTIGS, csi ? 4 : 8, "its contig count", fail);
  if (refs !== nRef) throw fail(`it lists ${n(refs)} contigs, the BAM header ${n(nRef)}`);
  const voff = (v: number, what: string) => {
    const block = Math.floor(v / 65536);
    if (block > bamSize) throw fail(`${what} points at byte ${n(block)} of the BAM, which has ${n(bamSize)}`);
  };
  for (let r = 0; r < refs; r++) {
    const bins = c.i32(`contig ${r}'s bin count`);
    count(c, bins, top + 2, csi ? 16 : 8, `contig ${r}'s bin count`, fail);
    for (let b = 0; b < bins; b++) {
      const bin = c.u32("a bin number");
      if (bin > top + 1) throw fail(`contig ${r} has bin ${n(bin)}; the largest there can be is ${n(top + 1)}`);
      if (csi) voff(c.u64("a bin's loffset"), `contig ${r}'s bin ${bin}`);
      const chunks = c.i32("a chunk count");
      count(c, chunks, Number.MAX_SAFE_INTEGER, 16, `contig ${r}'s bin ${bin} chunk count`, fail);
      if (bin === top + 1 && chunks !== 2) throw fail(`contig ${r}'s pseudo-bin has ${n(chunks)} chunks instead of 2`);
      for (let k = 0; k < chunks; k++) {
        const a = c.u64("a chunk start"), z = c.u64("a chunk end");
        if (bin !== top + 1) { voff(a, `a chunk of contig ${r}`); voff(z, `a chunk of contig ${r}`); }
      }
    }
    if (!csi) {
      const intervals = c.i32(`contig ${r}'s linear index size`);
      count(c, intervals, Number.MAX_SAFE_INTEGER, 8, `contig ${r}'s linear index size`, fail);
      for (let k = 0; k < intervals; k++) voff(c.u64("a linear index entry"), `contig ${r}'s linear index`);
    }
  }
}

// ---------- bigWig ----------

export interface BigWigLayout { contigs: Map<string, { id: number; length: number }>; indexes: number[] }

/**
 * The bigWig's header and chromosome B+ tree, walked with a visited set: offsets inside the
 * file, counts that fit the bytes that hold them, no node reached twice, bounded depth and node
 * count. Returns the contigs and the R-tree offsets (unzoomed, then each zoom level).
 */
export async function checkBigWigHeader(f: BoundedFile): Promise<BigWigLayout> {
  const fail = (m: string) => new ChartError(`the file could not be read as a bigWig file: ${m}`);
  const size = await f.size();
  const head = await f.read(64, 0);
  const c = new Cursor(head, fail);
  if (c.u32("the magic number") !== BIGWIG_MAGIC) throw fail("it does not start with the bigWig magic number");
  c.skip(2, "version");
  const view = new DataView(head.buffer, head.byteOffset, head.byteLength);
  const zooms = view.getUint16(6, true);
  c.pos = 8;
  const chromTree = c.u64("the chromosome tree offset"), _data = c.u64("the data offset"), index = c.u64("the index offset");
  void _data;
  c.skip(4, "field counts");
  const asOffset = c.u64("the autoSql offset"), summary = c.u64("the summary offset");
  const bufSize = c.u32("uncompressBufSize");
  const inside = (o: number, len: number, what: string) => {
    if (!(o >= 0) || o + len > size) throw fail(`${what} is at byte ${n(o)}, past the end of the file (${n(size)} bytes)`);
  };
  if (zooms > 32) throw fail(`it says it has ${n(zooms)} zoom levels; a bigWig has at most a dozen`);
  inside(chromTree, 32, "the chromosome tree");
  inside(index, 48, "the data index");
  if (asOffset > BIGWIG_MAX_HEADER_BYTES || summary > BIGWIG_MAX_HEADER_BYTES) throw fail(`its autoSql or summary starts past byte ${n(BIGWIG_MAX_HEADER_BYTES)} (at ${n(Math.max(asOffset, summary))}); a bigWig header is a few hundred bytes`);
  if (summary === 0) throw fail("it has no summary section");
  inside(summary, 40, "the summary");
  if (bufSize > BIGWIG_MAX_BLOCK_BYTES) throw fail(`its data blocks decompress to up to ${n(bufSize)} bytes each; a chart accepts at most ${n(BIGWIG_MAX_BLOCK_BYTES)}`);
  const indexes = [index];
  if (zooms) {
    const zb = await f.read(zooms * 24, 64);
    const z = new Cursor(zb, fail);
    for (let i = 0; i < zooms; i++) {
      z.skip(8, "a zoom level");
      const d = z.u64("a zoom level's data offset"), ix = z.u64("a zoom level's index offset");
      inside(d, 0, `zoom level ${i + 1}'s data`);
      inside(ix, 48, `zoom level ${i + 1}'s index`);
      indexes.push(ix);
    }
  }

  // The chromosome B+ tree.
  const th = new Cursor(await f.read(32, chromTree), fail);
  if (th.u32("the chromosome tree's magic number") !== CHROM_TREE_MAGIC) throw fail("its chromosome tree does not start with the B+ tree magic number");
  const blockSize = th.u32("the chromosome tree's block size"), keySize = th.u32("its key size"), valSize = th.u32("its value size"), items = th.u64("its item count");
  if (blockSize < 1 || keySize < 1 || keySize > 1024 || valSize !== 8) throw fail(`its chromosome tree has block size ${n(blockSize)}, key size ${n(keySize)} and value size ${n(valSize)}, which no bigWig writer makes`);
  if (items > MAX_CONTIGS || items * (keySize + 8) > size) throw fail(`its chromosome tree says it holds ${n(items)} contigs, ${items > MAX_CONTIGS ? `more than the ${n(MAX_CONTIGS)} a chart accepts` : "more than the file has room for"}`);
  const contigs = new Map<string, { id: number; length: number }>();
  const visited = new Set<number>();
  const stack: Array<{ at: number; depth: number }> = [{ at: chromTree + 32, depth: 1 }];
  let leaves = 0;
  const dec = new TextDecoder();
  while (stack.length) {
    const { at, depth } = stack.pop()!;
    if (visited.has(at)) throw fail(`its chromosome tree reaches the node at byte ${n(at)} twice (a loop)`);
    visited.add(at);
    if (visited.size > BIGWIG_MAX_TREE_NODES) throw fail(`its chromosome tree has more than ${n(BIGWIG_MAX_TREE_NODES)} nodes`);
    if (depth > BIGWIG_MAX_TREE_DEPTH) throw fail(`its chromosome tree is more than ${BIGWIG_MAX_TREE_DEPTH} levels deep`);
    inside(at, 4, "a chromosome tree node");
    const nh = await f.read(4, at);
    const leaf = nh[0] === 1, cnt = nh[2]! | (nh[3]! << 8);
    if (nh[0]! > 1) throw fail(`the chromosome tree node at byte ${n(at)} is neither a leaf nor an inner node`);
    if (cnt > blockSize) throw fail(`the chromosome tree node at byte ${n(at)} has ${n(cnt)} entries; the tree's block size is ${n(blockSize)}`);
    inside(at + 4, cnt * (keySize + 8), `the chromosome tree node at byte ${n(at)}`);
    const body = await f.read(cnt * (keySize + 8), at + 4);
    const b = new DataView(body.buffer, body.byteOffset, body.byteLength);
    for (let i = 0, p = 0; i < cnt; i++, p += keySize + 8) {
      if (leaf) {
        if (++leaves > items) throw fail(`its chromosome tree holds more contigs than the ${n(items)} it declares`);
        const key = body.subarray(p, p + keySize);
        const end = key.indexOf(0);
        contigs.set(dec.decode(end < 0 ? key : key.subarray(0, end)), { id: b.getUint32(p + keySize, true), length: b.getUint32(p + keySize + 4, true) });
      } else {
        const child = Number(b.getBigUint64(p + keySize, true));
        inside(child, 4, `a child of the chromosome tree node at byte ${n(at)}`);
        stack.push({ at: child, depth: depth + 1 });
      }
    }
  }
  return { contigs, indexes };
}

/**
 * The part of an R-tree index (at `offset`) that a query of contig `chrId`, bases
 * [start, end) visits — the nodes @gmod/bbi will visit — walked with a visited set, depth and
 * node limits; data blocks must lie inside the file.
 */
export async function checkBigWigIndex(f: BoundedFile, offset: number, chrId: number, start: number, end: number): Promise<void> {
  const fail = (m: string) => new ChartError(`the bigWig file is corrupt: its data index at byte ${n(offset)} ${m}`);
  const size = await f.size();
  const h = new Cursor(await f.read(48, offset), fail);
  if (h.u32("magic") !== RTREE_MAGIC) throw fail("does not start with the R-tree magic number");
  const blockSize = h.u32("block size");
  if (blockSize < 1 || blockSize > 65_536) throw fail(`has block size ${n(blockSize)}`);
  const hits = (sc: number, sb: number, ec: number, eb: number) => (sc < chrId || (sc === chrId && sb <= end)) && (ec > chrId || (ec === chrId && eb >= start));
  const visited = new Set<number>();
  const stack: Array<{ at: number; depth: number }> = [{ at: offset + 48, depth: 1 }];
  while (stack.length) {
    const { at, depth } = stack.pop()!;
    if (visited.has(at)) throw fail(`reaches the node at byte ${n(at)} twice (a loop)`);
    visited.add(at);
    if (visited.size > BIGWIG_MAX_TREE_NODES) throw fail(`has more than ${n(BIGWIG_MAX_TREE_NODES)} nodes over the region`);
    if (depth > BIGWIG_MAX_TREE_DEPTH) throw fail(`is more than ${BIGWIG_MAX_TREE_DEPTH} levels deep`);
    if (!(at >= 0) || at + 4 > size) throw fail(`points at a node at byte ${n(at)}, past the end of the file (${n(size)} bytes)`);
    const nh = await f.read(4, at);
    const leaf = nh[0] === 1, cnt = nh[2]! | (nh[3]! << 8);
    if (nh[0]! > 1) throw fail(`has a node at byte ${n(at)} that is neither a leaf nor an inner node`);
    if (cnt > blockSize) throw fail(`has a node at byte ${n(at)} with ${n(cnt)} entries; its block size is ${n(blockSize)}`);
    const each = leaf ? 32 : 24;
    if (at + 4 + cnt * each > size) throw fail(`has a node at byte ${n(at)} that runs past the end of the file`);
    const body = await f.read(cnt * each, at + 4);
    const b = new DataView(body.buffer, body.byteOffset, body.byteLength);
    for (let i = 0, p = 0; i < cnt; i++, p += each) {
      if (!hits(b.getUint32(p, true), b.getUint32(p + 4, true), b.getUint32(p + 8, true), b.getUint32(p + 12, true))) continue;
      const o = Number(b.getBigUint64(p + 16, true));
      if (leaf) {
        const len = Number(b.getBigUint64(p + 24, true));
        if (o + len > size) throw fail(`lists a data block at bytes ${n(o)}+${n(len)}, past the end of the file (${n(size)} bytes)`);
      } else {
        stack.push({ at: o, depth: depth + 1 });
      }
    }
  }
}
