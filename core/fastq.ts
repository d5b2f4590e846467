/**
 * FASTQ for the read browser: an incremental reader (the server streams a file's first reads
 * in chunks), Phred offset detection and the summary the viewer charts (lengths, quality by
 * position, GC and N content). Pure: the caller reads the bytes.
 */

export interface FastqRecord {
  /** The header line without its `@` (read name and any description). */
  name: string;
  seq: string;
  qual: string;
}

export type PhredOffset = 33 | 64;

export interface LengthBin {
  /** The length, or a bin's first length when lengths are binned. */
  length: number;
  /** A bin's last length (inclusive); only when lengths are binned. */
  lengthEnd?: number;
  count: number;
}

export interface FastqSummary {
  reads: number;
  bases: number;
  minLength: number;
  maxLength: number;
  /** One decimal. */
  meanLength: number;
  /** Sorted by length; one entry per length, or at most MAX_LENGTH_BINS bins when more lengths occur. */
  lengthHistogram: LengthBin[];
  /** Mean Phred score at each position (0-based) over the reads that reach it; one decimal. */
  meanQualityByPosition: number[];
  /** Mean Phred score over all bases; one decimal. */
  meanQuality: number;
  /** G and C as a percentage of the bases that are not N; one decimal. */
  gcPercent: number;
  /** N as a percentage of all bases; one decimal. */
  nPercent: number;
}

/** The most entries a length histogram has. */
export const MAX_LENGTH_BINS = 50;

const round1 = (x: number): number => Math.round(x * 10) / 10;

/** A line quoted for an error message, cut to a readable length. */
const show = (line: string): string => JSON.stringify(line.length > 40 ? `${line.slice(0, 40)}…` : line);

/**
 * Incremental four-line FASTQ reader. `push` returns the records completed so far, `end`
 * the last one (and throws when the input stops inside a record). CRLF and blank lines
 * between records are tolerated; anything else malformed throws an Error naming the record.
 */
export class FastqReader {
  private rest = "";
  private started = false;
  /** The current record's lines so far (header, sequence, plus). */
  private lines: string[] = [];
  /** 1-based number of the record being read. */
  private recordNo = 1;

  push(chunk: string): FastqRecord[] {
    if (!this.started && chunk.length > 0) {
      this.started = true;
      if (chunk.startsWith("\ufeff")) chunk = chunk.slice(1);
    }
    const out: FastqRecord[] = [];
    // A chunk without a line end only extends the open line (never re-split: a long line stays linear).
    if (!chunk.includes("\n")) { this.rest += chunk; return out; }
    const lines = (this.rest + chunk).split("\n");
    this.rest = lines.pop() as string;
    for (const line of lines) this.line(line.endsWith("\r") ? line.slice(0, -1) : line, out);
    return out;
  }

  end(): FastqRecord[] {
    const out: FastqRecord[] = [];
    const last = this.rest.endsWith("\r") ? this.rest.slice(0, -1) : this.rest;
    this.rest = "";
    if (last !== "") this.line(last, out);
    if (this.lines.length > 0) {
      const what = ["header", "sequence", "\"+\""][this.lines.length - 1];
      throw new Error(`FASTQ record ${this.recordNo}: truncated: the input ends after its ${what} line`);
    }
    return out;
  }

  private line(line: string, out: FastqRecord[]): void {
    const [header, seq] = this.lines;
    switch (this.lines.length) {
      case 0:
        if (line.trim() === "") return;
        if (!line.startsWith("@")) {
          throw new Error(`FASTQ record ${this.recordNo}: the header line must start with "@", got ${show(line)}`);
        }
        this.lines.push(line);
        return;
      case 1:
        this.lines.push(line);
        return;
      case 2:
        if (!line.startsWith("+")) {
          throw new Error(`FASTQ record ${this.recordNo} (${show((header ?? "").slice(1))}): expected the "+" line after the sequence, got ${show(line)}`);
        }
        this.lines.push(line);
        return;
      default: {
        const s = seq ?? "";
        if (line.length !== s.length) {
          throw new Error(`FASTQ record ${this.recordNo} (${show((header ?? "").slice(1))}): the quality line has ${line.length} characters but the sequence has ${s.length}`);
        }
        out.push({ name: (header ?? "").slice(1), seq: s, qual: line });
        this.lines = [];
        this.recordNo++;
      }
    }
  }
}

/** Phred scores of a quality string. */
export function qualityScores(qual: string, offset: PhredOffset): number[] {
  const scores = new Array<number>(qual.length);
  for (let i = 0; i < qual.length; i++) scores[i] = qual.charCodeAt(i) - offset;
  return scores;
}

/**
 * Accumulates the summary over reads added one at a time, so a server can stream. Quality is
 * kept as raw character codes, so the offset can be chosen (or detected) at the end.
 */
export class FastqStats {
  private reads = 0;
  private bases = 0;
  private minLength = Infinity;
  private maxLength = 0;
  private readonly lengths = new Map<number, number>();
  /** Per position: the sum of quality character codes and how many reads reach it. */
  private readonly qualSum: number[] = [];
  private readonly qualCount: number[] = [];
  private qualTotal = 0;
  private minQual = Infinity;
  private maxQual = -Infinity;
  private gc = 0;
  private n = 0;

  add(record: FastqRecord): void {
    const { seq, qual } = record;
    const len = seq.length;
    this.reads++;
    this.bases += len;
    this.minLength = Math.min(this.minLength, len);
    this.maxLength = Math.max(this.maxLength, len);
    this.lengths.set(len, (this.lengths.get(len) ?? 0) + 1);
    for (let i = 0; i < len; i++) {
      const c = seq.charCodeAt(i) | 0x20; // lower case
      if (c === 0x67 || c === 0x63) this.gc++; // g, c
      else if (c === 0x6e) this.n++; // n
    }
    const sums = this.qualSum;
    const counts = this.qualCount;
    while (sums.length < qual.length) { sums.push(0); counts.push(0); }
    for (let i = 0; i < qual.length; i++) {
      const q = qual.charCodeAt(i);
      sums[i] = (sums[i] as number) + q;
      counts[i] = (counts[i] as number) + 1;
      this.qualTotal += q;
      if (q < this.minQual) this.minQual = q;
      if (q > this.maxQual) this.maxQual = q;
    }
  }

  /** 64 when every quality character is at least ';' (59) and some is above 'J' (74); else 33. */
  get phredOffset(): PhredOffset {
    return this.minQual >= 59 && this.maxQual > 74 && this.maxQual !== -Infinity ? 64 : 33;
  }

  summary(offset: PhredOffset = this.phredOffset): FastqSummary {
    const reads = this.reads;
    const qualBases = this.qualCount.reduce((a, b) => a + b, 0);
    const notN = this.bases - this.n;
    return {
      reads,
      bases: this.bases,
      minLength: reads > 0 ? this.minLength : 0,
      maxLength: this.maxLength,
      meanLength: reads > 0 ? round1(this.bases / reads) : 0,
      lengthHistogram: lengthHistogram(this.lengths, reads > 0 ? this.minLength : 0, this.maxLength),
      meanQualityByPosition: this.qualSum.map((sum, i) => round1(sum / (this.qualCount[i] ?? 1) - offset)),
      meanQuality: qualBases > 0 ? round1(this.qualTotal / qualBases - offset) : 0,
      gcPercent: notN > 0 ? round1((100 * this.gc) / notN) : 0,
      nPercent: this.bases > 0 ? round1((100 * this.n) / this.bases) : 0,
    };
  }
}

/** One entry per length when at most MAX_LENGTH_BINS lengths occur; else equal-width bins from min to max. */
function lengthHistogram(lengths: ReadonlyMap<number, number>, min: number, max: number): LengthBin[] {
  if (lengths.size <= MAX_LENGTH_BINS) {
    return [...lengths].sort((a, b) => a[0] - b[0]).map(([length, count]) => ({ length, count }));
  }
  const width = Math.ceil((max - min + 1) / MAX_LENGTH_BINS);
  const bins: LengthBin[] = [];
  for (let start = min; start <= max; start += width) {
    bins.push({ length: start, lengthEnd: Math.min(start + width - 1, max), count: 0 });
  }
  for (const [length, count] of lengths) (bins[Math.floor((length - min) / width)] as LengthBin).count += count;
  return bins;
}

/** 64 when every quality character is at least ';' (59) and some is above 'J' (74); else 33. */
export function detectPhredOffset(records: Iterable<FastqRecord>): PhredOffset {
  let min = Infinity;
  let max = -Infinity;
  for (const r of records) {
    for (let i = 0; i < r.qual.length; i++) {
      const q = r.qual.charCodeAt(i);
      if (q < min) min = q;
      if (q > max) max = q;
    }
  }
  return min >= 59 && max > 74 ? 64 : 33;
}

/** The viewer's summary of a set of reads. */
export function summarize(records: Iterable<FastqRecord>, offset: PhredOffset): FastqSummary {
  const stats = new FastqStats();
  for (const r of records) stats.add(r);
  return stats.summary(offset);
}
