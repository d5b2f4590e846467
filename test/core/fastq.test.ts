import t from "tap";
import { detectPhredOffset, FastqReader, FastqStats, MAX_LENGTH_BINS, qualityScores, summarize, type FastqRecord } from "../../core/fastq.js";

/** Reads a text pushed in the given pieces. */
function readChunks(chunks: readonly string[]): FastqRecord[] {
  const r = new FastqReader();
  const out: FastqRecord[] = [];
  for (const c of chunks) out.push(...r.push(c));
  out.push(...r.end());
  return out;
}

const THREE = "@r1\nACGTN\n+\nIIIII\n@r2 desc\nGGCC\n+r2 desc\n!!5A\n@r3\nAT\n+\n#+\n";
const THREE_RECORDS: FastqRecord[] = [
  { name: "r1", seq: "ACGTN", qual: "IIIII" },
  { name: "r2 desc", seq: "GGCC", qual: "!!5A" },
  { name: "r3", seq: "AT", qual: "#+" },
];

t.test("FastqReader: records, whole and in every two-chunk split, LF and CRLF", async (t) => {
  for (const [name, text] of [
    ["LF", THREE],
    ["CRLF", THREE.replaceAll("\n", "\r\n")],
    ["no final newline", THREE.slice(0, -1)],
    ["BOM and blank lines between records", `\ufeff${THREE.replace("\n@r2", "\n\n@r2")}\n\n`],
  ] as const) {
    t.same(readChunks([text]), THREE_RECORDS, `${name}: whole`);
    let bad = -1;
    for (let i = 0; i <= text.length && bad < 0; i++) {
      if (JSON.stringify(readChunks([text.slice(0, i), text.slice(i)])) !== JSON.stringify(THREE_RECORDS)) bad = i;
    }
    t.equal(bad, -1, `${name}: every split point gives the same records`);
  }
  const r = new FastqReader();
  t.same(r.push("@r1\nAC"), [], "nothing complete yet");
  t.same(r.push("GT\n+\nII"), [], "a record is complete only at its quality line's end");
  t.same(r.push("II\r\n@r2\n"), [{ name: "r1", seq: "ACGT", qual: "IIII" }], "the record split across three chunks");
  t.same(r.push("A\n+\nI"), [], "the next one waits");
  t.same(r.end(), [{ name: "r2", seq: "A", qual: "I" }], "end flushes a quality line without a newline");
});

t.test("FastqReader: malformed input throws an error naming the record and the fault", async (t) => {
  for (const [text, message] of [
    ["r1\nACGT\n+\nIIII\n", /^FASTQ record 1: the header line must start with "@", got "r1"/],
    ["@r1\nACGT\n+\nIIII\n>r2\nAC\n+\nII\n", /^FASTQ record 2: the header line must start with "@", got ">r2"/],
    ["@r1\nACGT\n-\nIIII\n", /^FASTQ record 1 \("r1"\): expected the "\+" line after the sequence, got "-"/],
    ["@r1\nAC\n+\nII\n@r2\nACGT\n+\nIII\n", /^FASTQ record 2 \("r2"\): the quality line has 3 characters but the sequence has 4/],
    ["@r1\nACGT\n+\nIIIII\n", /^FASTQ record 1 \("r1"\): the quality line has 5 characters but the sequence has 4/],
    ["@r1\nACGT\n", /^FASTQ record 1: truncated: the input ends after its sequence line/],
    ["@r1\nAC\n+\nII\n@r2\n", /^FASTQ record 2: truncated: the input ends after its header line/],
    ["@r1\nACGT\n+", /^FASTQ record 1: truncated: the input ends after its "\+" line/],
  ] as const) t.throws(() => readChunks([text]), { message }, JSON.stringify(text));
});

t.test("detectPhredOffset: 64 only when every character is ≥ ';' and some is above 'J'", async (t) => {
  const rec = (...quals: string[]) => quals.map((qual, i) => ({ name: `r${i}`, seq: "A".repeat(qual.length), qual }));
  for (const [quals, expected, why] of [
    [["IIIJ", "#+5"], 33, "Sanger/Illumina 1.8 qualities"],
    [["hhhh", "BBBB"], 64, "Illumina 1.3 qualities"],
    [[";;KK"], 64, "';' (59) and 'K' (75): Phred+64"],
    [[":KK"], 33, "':' (58) is below ';'"],
    [[";;JJ"], 33, "nothing above 'J'"],
    [[], 33, "no reads"],
  ] as const) t.equal(detectPhredOffset(rec(...quals)), expected, why);
  const stats = new FastqStats();
  for (const r of rec("hhhh", "BBBB")) stats.add(r);
  t.equal(stats.phredOffset, 64, "FastqStats detects the same way");
  t.equal(new FastqStats().phredOffset, 33, "an empty FastqStats says 33");
});

t.test("qualityScores", async (t) => {
  t.same(qualityScores("!+5?IJ", 33), [0, 10, 20, 30, 40, 41]);
  t.same(qualityScores("@Jh", 64), [0, 10, 40]);
  t.same(qualityScores("", 33), []);
});

t.test("summarize: numbers checked by hand", async (t) => {
  // r1 ACGTN IIIII: 40 40 40 40 40 | r2 GGCC !!5A: 0 0 20 32 | r3 AT #+: 2 10
  t.same(summarize(THREE_RECORDS, 33), {
    reads: 3,
    bases: 11,
    minLength: 2,
    maxLength: 5,
    meanLength: 3.7, // 11 / 3
    lengthHistogram: [{ length: 2, count: 1 }, { length: 4, count: 1 }, { length: 5, count: 1 }],
    meanQualityByPosition: [14, 16.7, 30, 36, 40], // (40+0+2)/3, (40+0+10)/3, (40+20)/2, (40+32)/2, 40
    meanQuality: 24, // 264 / 11
    gcPercent: 60, // 6 G/C of the 10 bases that are not N
    nPercent: 9.1, // 1 / 11
  });
  const lower = summarize([{ name: "x", seq: "gcna", qual: "hhhh" }], 64);
  t.same([lower.gcPercent, lower.nPercent, lower.meanQuality, lower.meanQualityByPosition], [66.7, 25, 40, [40, 40, 40, 40]], "lower case bases, Phred+64");
  t.same(summarize([], 33), {
    reads: 0, bases: 0, minLength: 0, maxLength: 0, meanLength: 0, lengthHistogram: [],
    meanQualityByPosition: [], meanQuality: 0, gcPercent: 0, nPercent: 0,
  }, "no reads");
});

t.test("summarize: the length histogram is binned when more than 50 lengths occur", async (t) => {
  const reads = (lengths: number[]) => lengths.map((n, i) => ({ name: `r${i}`, seq: "A".repeat(n), qual: "I".repeat(n) }));
  const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, i) => a + i);

  const binned = summarize(reads([...range(1, 50), 50, 1000]), 33).lengthHistogram;
  t.equal(binned.length, 50, "51 distinct lengths from 1 to 1000… ");
  t.ok(binned.every((b) => b.lengthEnd !== undefined), "…are binned");

  const fifty = summarize(reads([...range(1, 49), 49, 1000]), 33).lengthHistogram;
  t.equal(fifty.length, 50, "50 distinct lengths are listed one by one");
  t.same(fifty.slice(-2), [{ length: 49, count: 2 }, { length: 1000, count: 1 }], "sorted by length, counted");

  const hundred = summarize(reads(range(1, 100)), 33).lengthHistogram;
  t.equal(hundred.length, MAX_LENGTH_BINS, "100 lengths in 50 bins");
  t.same([hundred[0], hundred.at(-1)], [{ length: 1, lengthEnd: 2, count: 2 }, { length: 99, lengthEnd: 100, count: 2 }], "bins of width 2");

  const odd = summarize(reads([...range(10, 60), 60, 60]), 33).lengthHistogram;
  t.equal(odd.length, 26, "51 lengths from 10 to 60: 26 bins of width 2");
  t.same(odd.at(-1), { length: 60, lengthEnd: 60, count: 3 }, "the last bin ends at the longest read");
  t.equal(odd.reduce((n, b) => n + b.count, 0), 53, "every read counted once");
});
