/**
 * Coverage track, the pure part: annotation parsing (GTF, GFF3, BED) and gene look-up,
 * binning, and the chart — valid SVG, one TSV row per bin drawn, the gene model drawn with
 * names that never overlap.
 */
import t from "tap";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Resvg } from "@resvg/resvg-js";
import { findGene, parseAnnotation, type Feature } from "../../plots/data/annotation.js";
import { ChartError, toTsv } from "../../plots/chart.js";
import { SIZE, textWidth } from "../../plots/layout/text.js";
import { coverageChart } from "../../plots/coverage.js";
import { binCount, binDepth, binSizeFor, type CoverageTrack } from "../../plots/data/coverage.js";
import { CoverageOptions } from "../../plots/options.js";

const F = join(import.meta.dirname, "../fixtures/charts/coverage");
const gtfText = readFileSync(join(F, "lambda.gtf"), "utf8");
const bedText = readFileSync(join(F, "lambda.bed"), "utf8");

/** The genes of the fixture GTF read independently: gene lines only. */
const gtfGenes = gtfText.split("\n").filter((l) => l.split("\t")[2] === "gene").map((l) => {
  const f = l.split("\t");
  return { name: /gene_name "([^"]+)"/.exec(f[8]!)![1]!, id: /gene_id "([^"]+)"/.exec(f[8]!)![1]!, start: Number(f[3]), end: Number(f[4]), strand: f[6]! };
});

t.test("GTF: one feature per gene line, named by gene_name, exons attached by gene_id", async (t) => {
  const genes = parseAnnotation(gtfText);
  t.equal(gtfGenes.length, 19);
  t.same(genes.map((g) => [g.name, g.id, g.start, g.end, g.strand]), gtfGenes.map((g) => [g.name, g.id, g.start, g.end, g.strand]));
  for (const g of genes) t.same(g.exons, [[g.start, g.end]], `${g.name}: its one exon`);
  t.same(parseAnnotation(gtfText, "gtf"), genes, "explicit kind = detected kind");
});

t.test("BED: one feature per line, 0-based starts made 1-based; BED12 blocks are exons", async (t) => {
  const bed = parseAnnotation(bedText);
  t.same(bed.map((g) => [g.name, g.chr, g.start, g.end, g.strand]), gtfGenes.map((g) => [g.name, "NC_001416.1", g.start, g.end, g.strand]));
  const bed12 = parseAnnotation("track name=x\nchr2\t999\t5000\tTX1\t0\t-\t1100\t4900\t0\t3\t101,200,300,\t0,1500,3701,\n", "bed");
  t.same(bed12, [{ name: "TX1", chr: "chr2", start: 1000, end: 5000, strand: "-", exons: [[1000, 1100], [2500, 2699], [4701, 5000]] }]);
});

t.test("GFF3: genes, exons through their transcripts (two merged), escapes, CDS when no exons", async (t) => {
  const gff = [
    "##gff-version 3",
    "chr7\tsrc\tgene\t100\t900\t.\t+\t.\tID=gene:G1;Name=ABC%3B1",
    "chr7\tsrc\tmRNA\t100\t900\t.\t+\t.\tID=tx1;Parent=gene:G1",
    "chr7\tsrc\tmRNA\t150\t900\t.\t+\t.\tID=tx2;Parent=gene:G1",
    "chr7\tsrc\texon\t100\t200\t.\t+\t.\tParent=tx1",
    "chr7\tsrc\texon\t150\t250\t.\t+\t.\tParent=tx2",
    "chr7\tsrc\texon\t500\t600\t.\t+\t.\tParent=tx1,tx2",
    "chr7\tsrc\texon\t800\t900\t.\t+\t.\tParent=tx1",
    "chr7\tsrc\tgene\t2000\t2300\t.\t-\t.\tID=gene2;locus_tag=x",
    "chr7\tsrc\tCDS\t2000\t2300\t.\t-\t0\tParent=gene2",
    "##FASTA",
    ">chr7",
    "ACGT",
  ].join("\n");
  const genes = parseAnnotation(gff);
  t.same(genes, [
    { name: "ABC;1", id: "gene:G1", chr: "chr7", start: 100, end: 900, strand: "+", exons: [[100, 250], [500, 600], [800, 900]] },
    { name: "gene2", id: "gene2", chr: "chr7", start: 2000, end: 2300, strand: "-", exons: [[2000, 2300]] },
  ]);
  t.equal(findGene(genes, "abc;1").id, "gene:G1");
});

t.test("GTF without gene lines: genes made from their exons", async (t) => {
  const gtf = [
    'chr1\tHAVANA\texon\t1000\t1100\t.\t-\t.\tgene_id "ENSG00000001.5"; transcript_id "T1"; gene_name "FOO";',
    'chr1\tHAVANA\texon\t1500\t1700\t.\t-\t.\tgene_id "ENSG00000001.5"; transcript_id "T1"; gene_name "FOO";',
  ].join("\n");
  const [g] = parseAnnotation(gtf);
  t.same(g, { name: "FOO", id: "ENSG00000001.5", chr: "chr1", start: 1000, end: 1700, strand: "-", exons: [[1000, 1100], [1500, 1700]] });
});

t.test("findGene: by name or id, any case, version optional; a missing gene is a ChartError that helps", async (t) => {
  const genes = parseAnnotation(gtfText);
  t.equal(findGene(genes, "INT").start, 27812);
  t.equal(findGene(genes, "lambdap33").name, "int");
  t.equal(findGene(parseAnnotation(bedText), "ea59").end, 26973);
  t.equal(findGene([{ name: "X", id: "ENSG00000141510.18", chr: "17", start: 1, end: 2, strand: "+", exons: [] }], "ensg00000141510").name, "X");
  t.throws(() => findGene(genes, "TP53"), { name: "ChartError", message: /^gene TP53 is not in the annotation file \(19 genes\); .*give region instead/ });
  t.throws(() => findGene(genes, "ea4"), { message: /similar names: ea47/ });
  t.throws(() => findGene([], "x"), ChartError);
  t.throws(() => parseAnnotation("hello\nworld\n"), ChartError);
});

t.test("binning: sizes, counts, means and maxima of each bin", async (t) => {
  t.equal(binSizeFor(200, 880), 1, "a region smaller than the bins: 1-bp bins");
  t.equal(binSizeFor(48502, 880), 56);
  t.equal(binCount(48502, 56), 867);
  const depth = Array.from({ length: 1003 }, (_, i) => (i * 7919) % 53);
  const { values, max } = binDepth(depth, 10);
  t.equal(values.length, 101);
  for (let b = 0; b < values.length; b++) {
    const s = depth.slice(b * 10, b * 10 + 10);
    t.ok(Math.abs(values[b]! - s.reduce((a, c) => a + c, 0) / s.length) < 1e-12 && max[b] === Math.max(...s), `bin ${b}`);
  }
});

function track(over: Partial<CoverageTrack> = {}): CoverageTrack {
  const start = 10_001, end = 30_000, binSize = 25;
  const n = binCount(end - start + 1, binSize);
  const values = new Float64Array(n), max = new Float64Array(n);
  for (let i = 0; i < n; i++) { values[i] = 20 + 10 * Math.sin(i / 40); max[i] = values[i]! + 3; }
  return { chr: "chr9", start, end, binSize, values, max, source: "bam", features: [], ...over };
}
const opts = CoverageOptions.parse({ region: "chr9:10001-30000" });

/** resvg parses the SVG as strict XML (it throws on malformed markup) and rasterises it. */
function parses(svg: string): boolean {
  const png = new Resvg(svg, { font: { loadSystemFonts: false } }).render().asPng();
  return png.length > 1000;
}

t.test("the chart: valid SVG, axes and title, one TSV row per bin with its coordinates", async (t) => {
  const tr = track();
  const c = coverageChart(tr, opts, { width: 1000, height: 300, source: "sample.bam" });
  t.ok(parses(c.svg));
  t.equal(c.width, 1000);
  t.equal(c.height, 300, "no gene model: the frame's height");
  t.match(c.svg, /Coverage — sample\.bam chr9:10,001-30,000/);
  t.match(c.svg, /Position on chr9 \(bp\)/);
  t.match(c.svg, /Depth \(reads\)/);
  t.match(c.svg, />20,000</, "genomic tick labels");
  t.same(c.data.header, ["chr", "start", "end", "mean_depth", "max_depth"]);
  t.equal(c.data.rows.length, tr.values.length);
  t.same(c.data.rows[0], ["chr9", 10_001, 10_025, Math.round(tr.values[0]! * 1000) / 1000, Math.round(tr.max[0]! * 1000) / 1000]);
  t.same(c.data.rows.at(-1)!.slice(0, 3), ["chr9", 29_976, 30_000]);
  // The stated mean is the mean over all bases (all bins are 25 bp here).
  const mean = tr.values.reduce((a, v) => a + v, 0) / tr.values.length;
  t.match(c.svg, new RegExp(`Mean depth ${mean.toPrecision(3)}`));
  t.match(toTsv(c.data), /^# coverage_track of sample\.bam: BAM, region chr9:10,001-30,000 \(20,000 bp\), 800 bins of 25 bp/);
  const mb = coverageChart(track({ start: 1_000_001, end: 4_000_000, binSize: 3750 }), opts, { width: 1000, height: 300, source: "x.bw" });
  t.match(mb.svg, /Position on chr9 \(Mb\)/);
  t.match(mb.svg, />2\.0</);
});

t.test("the gene model: exons, strand chevrons, names that do not overlap", async (t) => {
  const features: Feature[] = [];
  for (let i = 0; i < 30; i++) {
    const s = 10_000 + i * 650;
    features.push({ name: `GENE${i}-LONGNAME`, chr: "chr9", start: s, end: s + 1800, strand: i % 2 ? "-" : "+", exons: [[s, s + 300], [s + 900, s + 1100], [s + 1600, s + 1800]] });
  }
  const c = coverageChart(track({ features }), CoverageOptions.parse({ gene: "GENE3-longname", annotation: "a.gtf" }), { width: 900, height: 300, source: "s.bam" });
  t.ok(parses(c.svg));
  t.ok(c.height > 300, "the gene rows add to the height");
  const genes = [...c.svg.matchAll(/<g class="gene">(.*?)<\/g>/g)].map((m) => m[1]!);
  t.ok(genes.length >= 20, `${genes.length} genes drawn`);
  t.equal((genes[0]!.match(/<rect /g) ?? []).length, 3, "three exon boxes");
  t.match(genes[0]!, /<polyline /, "strand chevrons");
  t.match(c.svg, /font-weight="bold"[^>]*>GENE3-LONGNAME</, "the asked-for gene's name in bold");
  const boxes = genes.map((g) => {
    const m = /<text x="([\d.]+)" y="([\d.]+)" font-size="(\d+)" text-anchor="middle"[^>]*>([^<]+)<\/text>/.exec(g)!;
    const w = textWidth(m[4]!, Number(m[3]), /bold/.test(g.split("<text")[1]!));
    return { x: Number(m[1]) - w / 2, y: Number(m[2]), w, h: SIZE.label };
  });
  let overlaps = 0;
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i]!, b = boxes[j]!;
    if (a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h) overlaps++;
  }
  t.equal(overlaps, 0, "no two gene names overlap");
  t.ok(boxes.every((b) => b.x >= 0 && b.x + b.w <= 900), "names inside the figure");
  const dropped = features.length - genes.length;
  if (dropped) t.match(toTsv(c.data), new RegExp(`genes not drawn \\(no room in 8 rows\\): ${dropped}`));
  t.match(toTsv(c.data), /# genes drawn \(\d+\): GENE0-LONGNAME chr9:10000-11800 \+/);
});
