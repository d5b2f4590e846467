/**
 * Volcano and Manhattan plots on real tables (nf-core DESeq2 results, qqman's GWAS example)
 * and on generated ones (bench/charts-inputs.ts's 20,000-gene write.csv table; a seeded
 * million-SNP table made here). Every expectation is computed here from the input, never
 * taken from the renderer: counts past thresholds, NA rows, significant SNPs, chromosome
 * order; geometry is read back from the SVG (parsed as XML) through its own axis ticks.
 */
import t, { type Test } from "tap";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ChartError, toTsv, type Chart } from "../../plots/chart.js";
import { textWidth } from "../../plots/layout/text.js";
import { manhattanChart } from "../../plots/manhattan.js";
import { ManhattanOptions, VolcanoOptions } from "../../plots/options.js";
import { volcanoChart } from "../../plots/volcano.js";
import { renderTask } from "../../media/charts/render-worker.js";
import { writeDeseq2 } from "../../bench/charts-inputs.js";
import { allText, elements, parseXml, type XmlElement } from "../support/images.js";

const FIX = join(import.meta.dirname, "..", "fixtures", "charts");
const L1_L10 = join(FIX, "deseq2", "nfcore-L1_L10.deseq2.results.head.tsv");
const SRP = join(FIX, "deseq2", "nfcore-SRP254919.salmon.merged.deseq2.results.head.tsv");
const QQMAN = join(FIX, "gwas", "qqman-gwasResults.tsv");
const VOLCANO_FRAME = { width: 800, height: 640 };
const MANHATTAN_FRAME = { width: 1200, height: 520 };

const tmp = mkdtempSync(join(tmpdir(), "operon-volcano-manhattan-"));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));

// ---------- helpers (independent of the renderers) ----------

/** A plain TSV/CSV read: split lines and cells, strip one level of double quotes. */
function readTable(path: string, sep: string): { header: string[]; rows: string[][] } {
  const lines = readFileSync(path, "utf8").split(/\r?\n/).filter((l) => l !== "");
  const split = (l: string) => l.split(sep).map((c) => c.replace(/^"(.*)"$/, "$1"));
  return { header: split(lines[0]!), rows: lines.slice(1).map(split) };
}
const num = (s: string | undefined) => (s === undefined || s.trim() === "" || !Number.isFinite(Number(s)) ? undefined : Number(s));

interface Tsv { comments: string[]; header: string[]; rows: string[][] }
function parseTsv(s: string): Tsv {
  const lines = s.split("\n").filter((l) => l !== "");
  const comments = lines.filter((l) => l.startsWith("# ")).map((l) => l.slice(2));
  const body = lines.filter((l) => !l.startsWith("# "));
  return { comments, header: body[0]!.split("\t"), rows: body.slice(1).map((l) => l.split("\t")) };
}

async function render(type: "volcano_plot" | "manhattan_plot", path: string, options: Record<string, unknown> = {}): Promise<{ svg: XmlElement; raw: string; tsv: Tsv }> {
  const schema = type === "volcano_plot" ? VolcanoOptions : ManhattanOptions;
  // The job layer puts the title option into the frame (the renderers read it from there).
  const frame = { ...(type === "volcano_plot" ? VOLCANO_FRAME : MANHATTAN_FRAME), source: path.split("/").pop()!, ...(typeof options.title === "string" ? { title: options.title } : {}) };
  const r = await renderTask({ type, options: schema.parse(options), frame, format: "svg", inputs: { primary: path }, workDir: tmp });
  if (!r.ok) throw new Error(`render failed: ${r.error}`);
  const raw = Buffer.from(r.image).toString("utf8");
  return { svg: parseXml(raw), raw, tsv: parseTsv(r.tsv) };
}

const cls = (e: XmlElement, c: string) => [...elements(e)].filter((x) => x.name === "g" && (x.attrs.class ?? "").split(" ").includes(c));
const one = (e: XmlElement, c: string) => { const g = cls(e, c); if (g.length !== 1) throw new Error(`expected one <g class="${c}">, found ${g.length}`); return g[0]!; };
const texts = (e: XmlElement) => [...elements(e)].filter((x) => x.name === "text");
const unminus = (s: string) => s.replace(/\u2212/g, "-").replace(/,/g, "");

/** A linear axis read back from its tick labels: value → pixel. */
function axisScale(axisG: XmlElement, coord: "x" | "y"): (v: number) => number {
  const ticks = texts(axisG).filter((e) => e.attrs["font-size"] === "11" && Number.isFinite(Number(unminus(allText(e)))));
  if (ticks.length < 2) throw new Error("an axis with fewer than two numeric ticks");
  const a = ticks[0]!, b = ticks[ticks.length - 1]!;
  const va = Number(unminus(allText(a))), vb = Number(unminus(allText(b)));
  const pa = Number(a.attrs[coord]), pb = Number(b.attrs[coord]);
  return (v) => pa + ((v - va) * (pb - pa)) / (vb - va);
}

interface LabelBox { text: string; x: number; y: number; w: number; h: number }
/** Label boxes from their SVG text: width by DejaVu metrics, vertical centre at y (dominant-baseline central). */
function labelBoxes(svg: XmlElement): LabelBox[] {
  return texts(one(svg, "labels")).map((e) => {
    const s = allText(e), size = Number(e.attrs["font-size"]), w = textWidth(s, size);
    const x = Number(e.attrs.x), y = Number(e.attrs.y), anchor = e.attrs["text-anchor"] ?? "start";
    if (e.attrs["dominant-baseline"] !== "central") throw new Error(`label ${s} is not centred on its y: the boxes below would be wrong`);
    const left = anchor === "middle" ? x - w / 2 : anchor === "end" ? x - w : x;
    return { text: s, x: left, y: y - size * 0.55, w, h: size * 1.1 };
  });
}
const intersect = (a: LabelBox, b: { x: number; y: number; w: number; h: number }) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

function checkLabels(tt: Test, svg: XmlElement, W: number, H: number): LabelBox[] {
  const boxes = labelBoxes(svg);
  for (let i = 0; i < boxes.length; i++) {
    const a = boxes[i]!;
    tt.ok(a.x >= 0 && a.y >= 0 && a.x + a.w <= W && a.y + a.h <= H, `label ${a.text} lies inside the ${W}×${H} picture`);
    for (let j = i + 1; j < boxes.length; j++) tt.notOk(intersect(a, boxes[j]!), `labels ${a.text} and ${boxes[j]!.text} do not overlap`);
  }
  return boxes;
}

// ---------- volcano ----------

interface Gene { id: string; fc?: number; p?: number }
function genesOf(path: string, sep: string, fcName: string, pName: string, idCol = 0): Gene[] {
  const tab = readTable(path, sep);
  const fi = tab.header.indexOf(fcName), pi = tab.header.indexOf(pName);
  return tab.rows.map((r) => {
    const p = num(r[pi]);
    return { id: r[idCol]!, fc: num(r[fi]), p: p !== undefined && p >= 0 && p <= 1 ? p : undefined };
  });
}
function expectedCounts(genes: Gene[], fcT = 1, pT = 0.05) {
  const c = { up: 0, down: 0, ns: 0, skipped: 0, badFc: 0, badP: 0 };
  const cat = new Map<string, string>();
  for (const g of genes) {
    if (g.fc === undefined) c.badFc++;
    if (g.p === undefined) c.badP++;
    if (g.fc === undefined || g.p === undefined) { c.skipped++; continue; }
    const k = g.p < pT && g.fc >= fcT ? "up" : g.p < pT && g.fc <= -fcT ? "down" : "ns";
    c[k]++;
    cat.set(g.id, k);
  }
  return { ...c, cat };
}
function legendCounts(svg: XmlElement): Record<string, number> {
  const out: Record<string, number> = {};
  for (const e of texts(one(svg, "legend"))) {
    const m = /^(Up|Down|Not significant) \(([\d,]+)\)$/.exec(allText(e));
    if (m) out[m[1]!] = Number(unminus(m[2]!));
  }
  return out;
}

t.test("volcano on a real DESeq2 table: counts in legend and TSV, threshold lines, labels", async (t) => {
  const genes = genesOf(L1_L10, "\t", "log2FoldChange", "padj");
  const exp = expectedCounts(genes);
  t.ok(exp.up > 5 && exp.down > 5 && exp.ns > 100, `the fixture has up (${exp.up}), down (${exp.down}) and unchanged (${exp.ns}) genes`);
  const { svg, tsv } = await render("volcano_plot", L1_L10);

  t.same(legendCounts(svg), { Up: exp.up, Down: exp.down, "Not significant": exp.ns }, "legend counts");
  t.equal(tsv.rows.length, genes.length, "one TSV row per gene drawn");
  const gi = tsv.header.indexOf("gene"), ci = tsv.header.indexOf("category");
  const got = new Map(tsv.rows.map((r) => [r[gi]!, r[ci]!]));
  t.same(got, exp.cat, "every gene's category in the TSV matches thresholds applied here");
  t.ok(tsv.comments.some((c) => c.includes(`up ${exp.up}, down ${exp.down}, not significant ${exp.ns}`)), "counts in the TSV comments");
  t.equal(cls(svg, "points-up")[0]!.children.length, exp.up, "one mark per up gene");
  t.equal(cls(svg, "points-down")[0]!.children.length, exp.down, "one mark per down gene");

  // Threshold lines at x = ±1 and y = −log10 0.05, read through the axes' own ticks.
  const axes = cls(svg, "axis");
  const xs = axisScale(axes[0]!, "x"), ys = axisScale(axes[1]!, "y");
  const lines = [...elements(one(svg, "thresholds"))].filter((e) => e.name === "line");
  const vertical = lines.filter((l) => l.attrs.x1 === l.attrs.x2).map((l) => Number(l.attrs.x1)).sort((a, b) => a - b);
  const horizontal = lines.filter((l) => l.attrs.y1 === l.attrs.y2).map((l) => Number(l.attrs.y1));
  t.equal(vertical.length, 2, "two fold-change lines");
  t.ok(Math.abs(vertical[0]! - xs(-1)) < 0.6 && Math.abs(vertical[1]! - xs(1)) < 0.6, `fold-change lines at x(±1) (${vertical} vs ${xs(-1)}, ${xs(1)})`);
  t.equal(horizontal.length, 1, "one p-value line");
  t.ok(Math.abs(horizontal[0]! - ys(-Math.log10(0.05))) < 0.6, "p-value line at y(−log10 0.05)");
  // Every up gene right of the +1 line, above the p line; every down gene left of −1.
  for (const [c, side] of [["up", 1], ["down", -1]] as const) {
    for (const e of cls(svg, `points-${c}`)[0]!.children) {
      const cx = Number(e.attrs.cx), cy = Number(e.attrs.cy);
      t.ok(side * (cx - xs(side)) >= -0.01 && cy <= ys(-Math.log10(0.05)) + 0.01, `${c} point at (${cx}, ${cy}) is past both lines`);
    }
  }

  // Labels: the most significant changed genes, none overlapping, inside, not on other coloured points.
  const boxes = checkLabels(t, svg, VOLCANO_FRAME.width, VOLCANO_FRAME.height);
  const changed = genes.filter((g) => exp.cat.get(g.id) !== "ns").sort((a, b) => a.p! - b.p! || Math.abs(b.fc!) - Math.abs(a.fc!));
  t.ok(boxes.length >= 10, `most of the 15 top genes are labelled (${boxes.length})`);
  t.ok(boxes.every((b) => changed.slice(0, 15).some((g) => g.id === b.text)), "labels name only the 15 most significant changed genes");
  t.ok(boxes.some((b) => b.text === changed[0]!.id), `the most significant gene (${changed[0]!.id}) is labelled`);
  const dots = ["points-up", "points-down"].flatMap((c) => cls(svg, c)[0]!.children).map((e) => ({ x: Number(e.attrs.cx), y: Number(e.attrs.cy) }));
  for (const b of boxes) t.notOk(dots.some((d) => d.x > b.x + 1 && d.x < b.x + b.w - 1 && d.y > b.y + 1 && d.y < b.y + b.h - 1), `label ${b.text} does not sit on a coloured point`);
});

t.test("volcano thresholds from options move the lines and the counts", async (t) => {
  const genes = genesOf(L1_L10, "\t", "log2FoldChange", "padj");
  const exp = expectedCounts(genes, 2, 0.001);
  const { svg, tsv } = await render("volcano_plot", L1_L10, { threshold_fc: 2, threshold_pvalue: 0.001, title: "KO vs WT" });
  t.same(legendCounts(svg), { Up: exp.up, Down: exp.down, "Not significant": exp.ns });
  t.same(new Map(tsv.rows.map((r) => [r[0]!, r[4]!])), exp.cat);
  const axes = cls(svg, "axis");
  const xs = axisScale(axes[0]!, "x"), ys = axisScale(axes[1]!, "y");
  const lines = [...elements(one(svg, "thresholds"))].filter((e) => e.name === "line");
  const vertical = lines.filter((l) => l.attrs.x1 === l.attrs.x2).map((l) => Number(l.attrs.x1)).sort((a, b) => a - b);
  const horizontal = lines.filter((l) => l.attrs.y1 === l.attrs.y2).map((l) => Number(l.attrs.y1));
  t.ok(Math.abs(vertical[0]! - xs(-2)) < 0.6 && Math.abs(vertical[1]! - xs(2)) < 0.6, "fold-change lines at x(±2)");
  t.ok(Math.abs(horizontal[0]! - ys(3)) < 0.6, "p-value line at y(3)");
  const title = [...elements(svg)].find((e) => e.name === "title");
  t.equal(title && allText(title), "KO vs WT", "the title option");
  t.ok(texts(svg).some((e) => allText(e) === "KO vs WT" && e.attrs["font-weight"] === "bold"), "the title is drawn");
});

t.test("volcano: NA, empty and non-numeric cells are skipped and counted", async (t) => {
  // Real NAs: DESeq2's independent filtering (padj NA) and outliers (pvalue NA).
  for (const pName of ["padj", "pvalue"]) {
    const genes = genesOf(SRP, "\t", "log2FoldChange", pName);
    const exp = expectedCounts(genes);
    t.ok(exp.badP > 10, `the fixture has NA in ${pName} (${exp.badP})`);
    const { svg, tsv } = await render("volcano_plot", SRP, pName === "padj" ? {} : { pvalue_col: pName });
    t.equal(tsv.rows.length, genes.length - exp.skipped, `${pName}: rows without a number are not drawn`);
    t.ok(tsv.comments.some((c) => c.startsWith(`skipped ${exp.skipped} of ${genes.length} rows`) && c.includes(`${exp.badFc} with a missing`) && c.includes(`${exp.badP} with a missing or non-numeric ${pName}`)), `${pName}: skipped rows counted in the comments: ${tsv.comments.find((c) => c.startsWith("skipped"))}`);
    t.same(legendCounts(svg), { Up: exp.up, Down: exp.down, "Not significant": exp.ns }, `${pName}: legend counts`);
  }
  // Empty cells, text and NaN in a CSV.
  const csv = join(tmp, "holes.csv");
  const src = readTable(L1_L10, "\t");
  const damaged = src.rows.slice(0, 60).map((r, i) => {
    const row = [...r];
    if (i % 7 === 0) row[2] = "";
    if (i % 11 === 0) row[5] = "NA";
    if (i % 13 === 0) row[5] = "n/a";
    if (i % 17 === 0) row[2] = "NaN";
    return row;
  });
  writeFileSync(csv, [src.header, ...damaged].map((r) => r.join(",")).join("\n") + "\n");
  const exp = expectedCounts(genesOf(csv, ",", "log2FoldChange", "padj"));
  t.ok(exp.badFc > 5 && exp.badP > 5);
  const { tsv } = await render("volcano_plot", csv);
  t.equal(tsv.rows.length, 60 - exp.skipped);
  t.ok(tsv.comments.some((c) => c.startsWith(`skipped ${exp.skipped} of 60 rows: ${exp.badFc} with a missing or non-numeric log2FoldChange`) && c.includes(`${exp.badP} with a missing or non-numeric padj`)), tsv.comments.join(" | "));
});

t.test("volcano: the same table as TSV, as R write.csv (quoted, empty first header) and as write.table", async (t) => {
  const src = readTable(L1_L10, "\t");
  const q = (s: string) => `"${s}"`;
  const writeCsv = join(tmp, "write.csv.csv");
  writeFileSync(writeCsv, [['""', ...src.header.slice(1).map(q)].join(","), ...src.rows.map((r) => [q(r[0]!), ...r.slice(1)].join(","))].join("\r\n") + "\r\n");
  const writeTable = join(tmp, "write.table.txt");
  writeFileSync(writeTable, [src.header.slice(1).join("\t"), ...src.rows.map((r) => r.join("\t"))].join("\n") + "\n");
  const base = await render("volcano_plot", L1_L10);
  const strip = (x: Tsv) => x.rows.map((r) => r.join("\t"));
  for (const f of [writeCsv, writeTable]) {
    const other = await render("volcano_plot", f);
    t.same(strip(other.tsv), strip(base.tsv), `${f.split("/").pop()}: the same points as the TSV`);
    t.same(legendCounts(other.svg), legendCounts(base.svg));
    t.same(labelBoxes(other.svg).map((b) => b.text), labelBoxes(base.svg).map((b) => b.text), "genes named from the row names");
  }
});

t.test("volcano: 20,000 genes written like R's write.csv (bench/charts-inputs.ts)", async (t) => {
  const path = join(tmp, "deseq2-20000.csv");
  await writeDeseq2(path, 20_000);
  const genes = genesOf(path, ",", "log2FoldChange", "padj");
  const exp = expectedCounts(genes);
  const { svg, tsv, raw } = await render("volcano_plot", path);
  t.same(legendCounts(svg), { Up: exp.up, Down: exp.down, "Not significant": exp.ns });
  t.equal(tsv.rows.length, genes.length - exp.skipped);
  t.ok(tsv.comments.some((c) => c.startsWith(`skipped ${exp.skipped} of 20000 rows`)));
  t.same(new Map(tsv.rows.map((r) => [r[0]!, r[4]!])), exp.cat);
  const boxes = checkLabels(t, svg, VOLCANO_FRAME.width, VOLCANO_FRAME.height);
  t.ok(boxes.length >= 10, `labels placed: ${boxes.length}`);
  t.ok(raw.length < 3_000_000, `the SVG stays reasonable (${raw.length} bytes)`);
});

t.test("volcano column detection: each common name, and a missing column", async (t) => {
  const src = readTable(L1_L10, "\t");
  const rows = src.rows.slice(0, 80);
  const fc = rows.map((r) => r[2]!), p = rows.map((r) => r[5]!), pv = rows.map((r) => r[4]!), id = rows.map((r) => r[0]!);
  const run = (header: string[], cols: string[][], opts: Record<string, unknown> = {}): Chart => {
    const sink = volcanoChart(header, VolcanoOptions.parse(opts), { ...VOLCANO_FRAME, source: "t.tsv" });
    for (let i = 0; i < rows.length; i++) sink.row(cols.map((c) => c[i]!));
    return sink.finish();
  };
  for (const fcName of ["log2FoldChange", "log2fc", "logFC"]) {
    for (const [pName, pCol] of [["padj", p], ["pvalue", pv], ["P.Value", pv]] as const) {
      for (const gName of ["gene_name", "gene_id", "symbol"]) {
        const c = run(["baseMean", gName, fcName, pName], [rows.map((r) => r[1]!), id, fc, [...pCol]]);
        const used = c.data.comments.find((s) => s.startsWith("columns used"))!;
        t.ok(used.includes(`"${fcName}"`) && used.includes(`"${pName}"`) && used.includes(`gene "${gName}"`), `${fcName} / ${pName} / ${gName}: ${used}`);
        t.same(c.data.rows.map((r) => r[0]), id, "genes named from the gene column");
        t.same(c.data.rows.map((r) => r[2]), pCol.map(Number), "p from the detected column");
      }
    }
  }
  // padj wins over pvalue, gene_name over gene_id, when both are there.
  const both = run(["gene_id", "gene_name", "log2FoldChange", "pvalue", "padj"], [id, id.map((s) => `sym-${s}`), fc, pv, p]);
  t.same(both.data.rows.map((r) => r[2]), p.map(Number), "padj preferred");
  t.ok(both.data.rows.every((r) => String(r[0]).startsWith("sym-")), "gene_name preferred");
  // Explicit options, matched case-insensitively.
  const named = run(["a", "b", "c"], [id, fc, pv], { gene_col: "A", log2fc_col: "b", pvalue_col: "c" });
  t.same(named.data.rows.map((r) => r[1]), fc.map(Number));
  // Missing columns: the error names what is missing and lists the file's columns.
  for (const [header, opts, words] of [
    [["gene", "baseMean", "padj"], {}, ["log2fc_col", "log2FoldChange", '"gene", "baseMean", "padj"']],
    [["gene", "log2FoldChange", "stat"], {}, ["pvalue_col", "padj", '"gene", "log2FoldChange", "stat"']],
    [["gene", "log2FoldChange", "padj"], { log2fc_col: "lfc_shrunk" }, ['"lfc_shrunk"', "log2fc_col", '"gene", "log2FoldChange", "padj"']],
    [["gene", "log2FoldChange", "padj"], { gene_col: "symbol" }, ['"symbol"', "gene_col"]],
  ] as Array<[string[], Record<string, unknown>, string[]]>) {
    try {
      volcanoChart(header, VolcanoOptions.parse(opts), { ...VOLCANO_FRAME, source: "t" });
      t.fail(`no error for ${header}`);
    } catch (e) {
      t.ok(e instanceof ChartError, "a ChartError");
      for (const w of words) t.match((e as Error).message, w, `message names ${w}`);
    }
  }
  // Through the worker: the error is a data error with the same words.
  const bad = join(tmp, "nofc.tsv");
  writeFileSync(bad, "gene\tbaseMean\tpadj\nA\t1\t0.5\n");
  const r = await renderTask({ type: "volcano_plot", options: VolcanoOptions.parse({}), frame: { ...VOLCANO_FRAME, source: "nofc.tsv" }, format: "svg", inputs: { primary: bad }, workDir: tmp });
  t.ok(!r.ok && r.data && r.error.includes("log2fc_col") && r.error.includes('"baseMean"'), !r.ok ? r.error : "rendered");
});

// ---------- Manhattan ----------

/** mulberry32, seeded: the same table on every run. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), a | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

function points(svg: XmlElement): Array<{ x: number; y: number; cls: string }> {
  const out: Array<{ x: number; y: number; cls: string }> = [];
  for (const e of [...elements(svg)].filter((x) => x.name === "path" && /^points-/.test(x.attrs.class ?? ""))) {
    for (const m of (e.attrs.d ?? "").matchAll(/M(-?[\d.]+) (-?[\d.]+)h0/g)) out.push({ x: Number(m[1]), y: Number(m[2]), cls: e.attrs.class! });
  }
  return out;
}

/** The names of the threshold lines sit on no point and inside the picture. */
function lineNamesClear(tt: Test, svg: XmlElement): void {
  const pts = points(svg);
  const names = texts(svg).filter((x) => /genome-wide|suggestive|p = /.test(allText(x)));
  tt.ok(names.length >= 2, "the threshold lines are named");
  for (const e of names) {
    const s = allText(e), w = textWidth(s, Number(e.attrs["font-size"])), anchor = e.attrs["text-anchor"] ?? "start";
    const x = anchor === "end" ? Number(e.attrs.x) - w : anchor === "middle" ? Number(e.attrs.x) - w / 2 : Number(e.attrs.x);
    const y = Number(e.attrs.y) - (e.attrs["dominant-baseline"] === "central" ? 0 : 4);
    tt.notOk(pts.some((p) => p.x > x - 2 && p.x < x + w + 2 && Math.abs(p.y - y) < 8), `"${s}" is off the points`);
    tt.ok(x >= 0 && x + w <= MANHATTAN_FRAME.width, `"${s}" inside the picture`);
  }
}

t.test("manhattan on qqman's example: every significant SNP drawn, lines, the top hit labelled", async (t) => {
  const tab = readTable(QQMAN, "\t");
  const P = tab.header.indexOf("P"), S = tab.header.indexOf("SNP");
  const sig = tab.rows.filter((r) => Number(r[P]) < 5e-8).map((r) => r[S]!);
  const suggestive = tab.rows.filter((r) => Number(r[P]) < 1e-5).map((r) => r[S]!);
  t.ok(sig.length >= 3, `the fixture has genome-wide significant SNPs (${sig.length})`);
  const { svg, tsv } = await render("manhattan_plot", QQMAN);
  const drawn = new Set(tsv.rows.map((r) => r[0]!));
  t.same(sig.filter((s) => !drawn.has(s)), [], "every SNP with p < 5e-8 is in the TSV");
  t.same(suggestive.filter((s) => !drawn.has(s)), [], "and every SNP past the suggestive line");
  t.equal(points(svg).length, tsv.rows.length, "the TSV lists exactly the points drawn");
  t.ok(tsv.rows.length < tab.rows.length, "points under the lines are thinned");
  const byId = new Map(tab.rows.map((r) => [r[S]!, Number(r[P])]));
  t.ok(tsv.rows.every((r) => Math.abs(byId.get(r[0]!)! / Number(r[3]) - 1) < 1e-7), "each row's p is the file's p for that SNP (8 significant digits)");

  const axes = cls(svg, "axis");
  const ys = axisScale(axes[1]!, "y");
  const hl = [...elements(svg)].filter((e) => e.name === "line" && e.attrs.y1 === e.attrs.y2 && Number(e.attrs.x2) - Number(e.attrs.x1) > 500);
  const at = (v: number) => hl.filter((l) => Math.abs(Number(l.attrs.y1) - ys(v)) < 0.6);
  t.equal(at(-Math.log10(5e-8)).length, 1, "a genome-wide line at y(−log10 5e-8)");
  t.notOk(at(-Math.log10(5e-8))[0]!.attrs["stroke-dasharray"], "solid");
  t.equal(at(5).length, 1, "a suggestive line at y(5)");
  t.ok(at(5)[0]!.attrs["stroke-dasharray"], "dashed");

  const best = tab.rows.reduce((a, b) => (Number(b[P]) < Number(a[P]) ? b : a));
  const boxes = checkLabels(t, svg, MANHATTAN_FRAME.width, MANHATTAN_FRAME.height);
  t.same(boxes.map((b) => b.text), [best[S]], "one locus, labelled with its best SNP");
  lineNamesClear(t, svg);

  const none = await render("manhattan_plot", QQMAN, { suggestive_line: false, significance_line: 1e-6 });
  const drawn2 = new Set(none.tsv.rows.map((r) => r[0]!));
  t.same(tab.rows.filter((r) => Number(r[P]) < 1e-6).map((r) => r[S]!).filter((s) => !drawn2.has(s)), [], "with no suggestive line, every SNP below significance_line is kept");
});

t.test("manhattan: chromosomes in natural order whatever their spelling, alternating colours, cumulative positions", async (t) => {
  const names = ["chr10", "2", "chrX", "MT", "1", "chr22", "Y", "chr3", "X", "chr2", "chrM", "11", "chr1", "9"];
  const canon = (c: string) => { const s = c.replace(/^chr/, ""); return s === "M" ? "MT" : s; };
  const expectedOrder = ["1", "2", "3", "9", "10", "11", "22", "X", "Y", "MT"];
  const rand = prng(11);
  const lines = ["SNP\tchrom\tpos\tpval"];
  const rows: Array<{ id: string; chr: string; pos: number; p: number }> = [];
  for (let i = 0; i < 1400; i++) {
    const chr = names[i % names.length]!, pos = 1 + Math.floor(rand() * 5e7), p = i % 97 === 0 ? 1e-9 * rand() : rand();
    rows.push({ id: `rs${i}`, chr: canon(chr), pos, p });
    lines.push(`rs${i}\t${chr}\t${pos}\t${p}`);
  }
  const path = join(tmp, "mixed-chr.tsv");
  writeFileSync(path, lines.join("\n") + "\n");
  const { svg, tsv } = await render("manhattan_plot", path, { suggestive_line: false });

  const axes = cls(svg, "axis");
  const tickLabels = texts(axes[0]!).filter((e) => e.attrs["font-size"] === "11").map(allText).filter((s) => s !== "");
  t.same(tickLabels, expectedOrder, "x-axis ticks in natural order, prefixes and M/MT merged");
  t.ok(tsv.comments.some((c) => c.includes(`chromosomes in plot order: ${expectedOrder.join(", ")}`)));
  const chrI = tsv.header.indexOf("chr"), posI = tsv.header.indexOf("pos");
  const rank = (c: string) => expectedOrder.indexOf(c);
  t.ok(tsv.rows.every((r) => rank(r[chrI]!) >= 0), "every chromosome name normalised");
  const pts = points(svg);
  t.equal(pts.length, tsv.rows.length);
  // TSV rows are in drawing order along the genome; the points of each colour follow them in order.
  const byClass: Record<string, Array<{ x: number; y: number }>> = {};
  for (const p of pts) (byClass[p.cls] ??= []).push(p);
  const cursor: Record<string, number> = {};
  const xOfRow: number[] = [];
  for (const r of tsv.rows) {
    const k = `points-${rank(r[chrI]!) % 2}`;
    const i = cursor[k] ?? 0;
    cursor[k] = i + 1;
    xOfRow.push(byClass[k]![i]!.x);
  }
  t.same(Object.fromEntries(Object.entries(cursor)), Object.fromEntries(Object.entries(byClass).map(([k, v]) => [k, v.length])), "colours alternate by chromosome: each colour holds exactly the rows of every other chromosome");
  let ok = true;
  for (let i = 1; i < tsv.rows.length; i++) {
    const a = tsv.rows[i - 1]!, b = tsv.rows[i]!;
    const ra = rank(a[chrI]!), rb = rank(b[chrI]!);
    if (rb < ra || (ra === rb && Number(b[posI]) < Number(a[posI]))) ok = false;
    if (xOfRow[i]! < xOfRow[i - 1]! - 0.01) ok = false;
    if (rb > ra && xOfRow[i]! <= xOfRow[i - 1]!) ok = false;
  }
  t.ok(ok, "positions cumulative: chromosome blocks left to right in order, positions increasing within each");
  const sigIds = rows.filter((r) => r.p < 5e-8).map((r) => r.id);
  const drawn = new Set(tsv.rows.map((r) => r[0]!));
  t.same(sigIds.filter((s) => !drawn.has(s)), [], "every significant SNP drawn");
  t.ok(tsv.comments.some((c) => c.includes('chromosome "chrom", position "pos", p-value "pval", SNP "SNP"')), "columns chrom/pos/pval/SNP detected");
});

t.test("manhattan: a million SNPs are thinned to the picture, never the significant ones", async (t) => {
  const N = 1_000_000;
  const rand = prng(20240611);
  const chroms = Array.from({ length: 22 }, (_, i) => String(i + 1)).concat(["X"]);
  // Peaks: chromosome index, centre (bp), −log10 p at the top; one more just under the line.
  const peaks: Array<[number, number, number]> = [[1, 6e7, 12], [5, 3.2e7, 25], [9, 1.1e8, 9], [18, 4.5e7, 8], [22, 6.7e7, 7.0]];
  const ids: string[] = new Array(N), chr: number[] = new Array(N), pos = new Float64Array(N), p = new Float64Array(N);
  const perChr = Math.floor(N / chroms.length);
  for (let i = 0; i < N; i++) {
    const c = Math.min(chroms.length - 1, Math.floor(i / perChr));
    const x = 1 + Math.floor(rand() * 1.5e8);
    let v = rand();
    for (const [pc, at, top] of peaks) if (pc === c && Math.abs(x - at) < 3e5) v = Math.min(v, 10 ** -(top * Math.exp(-(((x - at) / 1e5) ** 2)) * (0.7 + 0.3 * rand())));
    ids[i] = `rs${i + 1}`; chr[i] = c; pos[i] = x; p[i] = v;
  }
  const sig = new Set<string>(), sugg = new Set<string>();
  let bestNonSug = 0;
  for (let i = 0; i < N; i++) { if (p[i]! < 5e-8) sig.add(ids[i]!); if (p[i]! < 1e-5) sugg.add(ids[i]!); else bestNonSug = Math.max(bestNonSug, -Math.log10(p[i]!)); }
  t.ok(sig.size > 20, `synthetic table has genome-wide significant SNPs (${sig.size})`);

  const header = ["SNP", "CHR", "BP", "P"];
  const t0 = performance.now();
  const sink = manhattanChart(header, ManhattanOptions.parse({}), { ...MANHATTAN_FRAME, source: "million.tsv" });
  for (let i = 0; i < N; i++) sink.row([ids[i]!, chroms[chr[i]!]!, String(pos[i]), String(p[i])]);
  const chart = sink.finish();
  const ms = performance.now() - t0;
  t.ok(ms < 10_000, `a million rows in ${ms.toFixed(0)} ms (budget ~5 s on an idle machine; 10 s here)`);

  const drawn = chart.data.rows;
  const cellBound = (MANHATTAN_FRAME.width + 2) * (Math.ceil(MANHATTAN_FRAME.height / 2) + 2);
  t.ok(drawn.length <= sugg.size + cellBound, `drawn ${drawn.length} ≤ significant ${sugg.size} + one per cell ${cellBound}`);
  t.ok(drawn.length < 60_000, `thinned from ${N} to ${drawn.length}`);
  const got = new Set(drawn.map((r) => String(r[0])));
  t.same([...sig].filter((s) => !got.has(s)), [], "every SNP with p < 5e-8 drawn");
  t.same([...sugg].filter((s) => !got.has(s)), [], "every SNP with p < 1e-5 drawn");
  t.ok(drawn.some((r) => Math.abs(Number(r[4]) - bestNonSug) < 1e-6), "the highest thinned-class SNP survives thinning (the smallest p per cell is kept)");
  const index = new Map(ids.map((id, i) => [id, i]));
  t.ok(drawn.every((r) => { const i = index.get(String(r[0]))!; return Number(r[3]) === p[i] && Number(r[2]) === pos[i] && r[1] === chroms[chr[i]!]; }), "each drawn row is the input's SNP, position and p");
  const svg = parseXml(chart.svg);
  t.equal(points(svg).length, drawn.length, "the TSV holds exactly the points drawn");
  t.ok(chart.svg.length < 1_500_000, `SVG ${chart.svg.length} bytes`);
  t.ok(chart.data.comments.some((c) => c.includes(`${N} SNPs read, ${drawn.length} drawn, ${N - drawn.length} thinned away`)));
  t.ok(toTsv(chart.data).split("\n").filter((l) => l && !l.startsWith("#")).length === drawn.length + 1, "TSV text: header and one line per point");

  lineNamesClear(t, svg);
  // Top hits: the best SNP of each significant peak, labelled, none overlapping.
  const boxes = checkLabels(t, svg, MANHATTAN_FRAME.width, MANHATTAN_FRAME.height);
  for (const [pc, at, top] of peaks) {
    if (top < 7.4) continue;
    let best = -1;
    for (let i = 0; i < N; i++) if (chr[i] === pc && Math.abs(pos[i]! - at) < 3e5 && (best < 0 || p[i]! < p[best]!)) best = i;
    if (p[best]! >= 5e-8) continue;
    t.ok(boxes.some((b) => b.text === ids[best]), `peak on chr${chroms[pc]} labelled with its best SNP ${ids[best]}`);
  }
  t.ok(boxes.every((b) => sig.has(b.text)), "only genome-wide significant SNPs are labelled");
});

t.test("manhattan: a missing column is a ChartError naming it and listing the columns", async (t) => {
  for (const [header, opts, words] of [
    [["SNP", "CHR", "P"], {}, ["pos_col", '"SNP", "CHR", "P"']],
    [["rsid", "chromosome_name", "BP", "P"], {}, ["chr_col", '"chromosome_name"']],
    [["SNP", "CHR", "BP", "beta"], {}, ["pvalue_col", '"beta"']],
    [["SNP", "CHR", "BP", "P"], { snp_col: "marker" }, ['"marker"', "snp_col", '"SNP", "CHR", "BP", "P"']],
  ] as Array<[string[], Record<string, unknown>, string[]]>) {
    try {
      manhattanChart(header, ManhattanOptions.parse(opts), { ...MANHATTAN_FRAME, source: "t" });
      t.fail(`no error for ${header}`);
    } catch (e) {
      t.ok(e instanceof ChartError);
      for (const w of words) t.match((e as Error).message, w);
    }
  }
  for (const [c, b, p, s] of [["chr", "pos", "p", "snp"], ["CHR", "BP", "P", "SNP"], ["chrom", "BP", "pval", "rsid"]]) {
    const sink = manhattanChart([s!, c!, b!, p!], ManhattanOptions.parse({}), { ...MANHATTAN_FRAME, source: "t" });
    sink.row(["rsA", "1", "100", "1e-9"]);
    sink.row(["rsB", "2", "200", "0.5"]);
    const chart = sink.finish();
    t.ok(chart.data.comments.some((x) => x.includes(`chromosome "${c}", position "${b}", p-value "${p}", SNP "${s}"`)), `detected ${c}/${b}/${p}/${s}`);
    t.same(chart.data.rows.map((r) => r[0]), ["rsA", "rsB"]);
  }
});

// ---------- Manhattan x axis: position in Mb for one or a few chromosomes ----------

interface Snp { id: string; chr: string; pos: number; p: number }
/**
 * A GWAS-like region: `n` SNPs evenly from `from` to `to` (bp) on `chr`, p uniform except
 * near `peak`, where −log10 p rises to about `top`; the SNP at the peak gets exactly
 * 10^−(top + 1), so the lead SNP is known and unique.
 */
function gwasRegion(seed: number, chr: string, from: number, to: number, peak: number, top: number, n: number): Snp[] {
  const rand = prng(seed);
  const out: Snp[] = [];
  const step = (to - from) / (n - 1);
  const peakI = Math.round((peak - from) / step);
  for (let i = 0; i < n; i++) {
    const pos = Math.round(from + i * step), d = (pos - peak) / 6e4;
    const p = i === peakI ? 10 ** -(top + 1) : Math.max(10 ** -top, Math.min(rand(), 10 ** -(top * Math.exp(-d * d) * (0.6 + 0.3 * rand()))));
    out.push({ id: `rs${chr.replace(/^chr/, "")}_${i}`, chr, pos, p });
  }
  return out;
}
function writeGwas(name: string, snps: readonly Snp[]): string {
  const path = join(tmp, name);
  writeFileSync(path, ["SNP\tCHR\tBP\tP", ...snps.map((s) => `${s.id}\t${s.chr}\t${s.pos}\t${s.p}`)].join("\n") + "\n");
  return path;
}
interface XAxis { ticks: Array<{ v: number; x: number; label: string }>; title: string; x1: number; x2: number }
/** The x axes of a Manhattan plot (every axis but the last, which is −log10 p), read back from the SVG. */
function xAxes(svg: XmlElement): XAxis[] {
  const axes = cls(svg, "axis");
  return axes.slice(0, -1).map((g) => {
    const line = [...elements(g)].find((e) => e.name === "line")!;
    const ticks = texts(g).filter((e) => e.attrs["font-size"] === "11").map((e) => ({ v: Number(unminus(allText(e))), x: Number(e.attrs.x), label: allText(e) }));
    const title = texts(g).filter((e) => e.attrs["font-size"] === "13").map(allText).join(" ");
    return { ticks, title, x1: Math.min(Number(line.attrs.x1), Number(line.attrs.x2)), x2: Math.max(Number(line.attrs.x1), Number(line.attrs.x2)) };
  });
}
/** Mb → px through the two ticks around v (or the nearest two). */
function throughTicks(ax: XAxis, mb: number): number {
  const t = ax.ticks;
  let j = t.findIndex((k) => k.v >= mb);
  if (j <= 0) j = j === 0 ? 1 : t.length - 1;
  const a = t[j - 1]!, b = t[j]!;
  return a.x + ((mb - a.v) * (b.x - a.x)) / (b.v - a.v);
}
/** Tick labels of the x axes as boxes (centred on x). */
const tickBoxes = (axes: XAxis[]) => axes.flatMap((a) => a.ticks.map((k) => ({ label: k.label, l: k.x - textWidth(k.label, 11) / 2, r: k.x + textWidth(k.label, 11) / 2 })));

t.test("manhattan, one chromosome (a GWAS region): an x axis of position in Mb, points placed by position", async (t) => {
  const snps = gwasRegion(7, "chr2", 102.0e6, 103.5e6, 102.3e6, 13, 1500);
  const lead = snps.reduce((a, b) => (b.p < a.p ? b : a));
  t.ok(Math.abs(lead.pos - 102.3e6) < 2000, "the lead SNP sits at the peak, 102.3 Mb");
  const { svg, tsv } = await render("manhattan_plot", writeGwas("il1rl1.tsv", snps));

  const axes = xAxes(svg);
  t.equal(axes.length, 1, "one x axis");
  const ax = axes[0]!;
  t.match(ax.title, /chr2/, `the axis title names the chromosome: "${ax.title}"`);
  t.match(ax.title, /\(Mb\)/, "and the unit, Mb");
  t.notMatch(ax.title, /^Chromosome$/, "not the chromosome-label axis");
  t.ok(ax.ticks.length >= 4, `at least 4 ticks (${ax.ticks.map((k) => k.label).join(", ")})`);
  t.ok(ax.ticks.every((k) => Number.isFinite(k.v)), "every tick label is a number");
  t.ok(ax.ticks.every((k) => k.v >= 102.0 - 0.05 && k.v <= 103.5 + 0.05), "ticks lie within the data range (102.0–103.5 Mb)");
  t.ok(ax.ticks.every((k, i) => i === 0 || (k.v > ax.ticks[i - 1]!.v && k.x > ax.ticks[i - 1]!.x)), "tick values and positions increase left to right");
  const boxes = tickBoxes(axes);
  t.ok(boxes.every((b, i) => i === 0 || b.l > boxes[i - 1]!.r + 5), "tick labels do not touch");
  t.ok(boxes.every((b) => b.l >= 0 && b.r <= MANHATTAN_FRAME.width), "tick labels inside the picture");
  t.ok(ax.ticks.every((k) => k.x >= ax.x1 && k.x <= ax.x2), "ticks on the axis line");

  // The lead SNP is the highest point; it lies between the ticks around 102.3 Mb, where they put it.
  const pts = points(svg);
  const top = pts.reduce((a, b) => (b.y < a.y ? b : a));
  const mb = lead.pos / 1e6;
  const below = ax.ticks.filter((k) => k.v <= mb).pop()!, above = ax.ticks.find((k) => k.v > mb)!;
  t.ok(below && above, `ticks on both sides of ${mb} Mb`);
  t.ok(top.x > below.x && top.x < above.x, `the lead SNP's point (x ${top.x}) lies between the ticks ${below.label} (x ${below.x}) and ${above.label} (x ${above.x})`);
  t.ok(Math.abs(top.x - throughTicks(ax, mb)) < 0.6, `at the x the ticks give for ${mb} Mb (${throughTicks(ax, mb).toFixed(2)}; drawn ${top.x})`);

  // Every point: the TSV row drawn at that place, x from its position through the ticks.
  t.equal(pts.length, tsv.rows.length, "the TSV lists exactly the points drawn");
  const posI = tsv.header.indexOf("pos");
  const off = tsv.rows.map((r, i) => Math.abs(pts[i]!.x - throughTicks(ax, Number(r[posI]) / 1e6))).filter((d) => d >= 0.6);
  t.same(off, [], "every point's x is its TSV position through the axis ticks");
  t.ok(pts.every((p) => p.x >= ax.x1 && p.x <= ax.x2), "every point above the axis line");
  const drawn = new Set(tsv.rows.map((r) => r[0]!));
  t.same(snps.filter((s) => s.p < 1e-5 && !drawn.has(s.id)).map((s) => s.id), [], "no SNP past the suggestive line is thinned away");
  t.ok(tsv.comments.some((c) => c.includes("x axis: position on chr2 in Mb")), "the TSV says what x is");
  t.same(labelBoxes(svg).map((b) => b.text), [lead.id], "the lead SNP is labelled");

  // A single SNP still gets a scale around it.
  const single = await render("manhattan_plot", writeGwas("one-snp.tsv", [lead]));
  const [sax] = xAxes(single.svg) as [XAxis];
  const spt = points(single.svg);
  t.ok(sax.ticks.length >= 2 && sax.ticks[0]!.v <= mb && sax.ticks.at(-1)!.v >= mb, `one SNP: ticks around it (${sax.ticks.map((k) => k.label).join(", ")})`);
  t.ok(spt.length === 1 && Math.abs(spt[0]!.x - throughTicks(sax, mb)) < 0.6, "and the point where they put it");
});

t.test("manhattan, three chromosomes: a panel each with its own Mb ticks, widths in proportion to the spans", async (t) => {
  const regions: Array<[string, number, number, number, number]> = [["chr2", 102.0e6, 103.5e6, 102.3e6, 12], ["chr5", 131.5e6, 132.2e6, 131.9e6, 9], ["chr17", 39.6e6, 40.2e6, 39.9e6, 10]];
  const snps = regions.flatMap(([c, a, b, peak, top], j) => gwasRegion(30 + j, c, a, b, peak, top, 500));
  const { svg, tsv } = await render("manhattan_plot", writeGwas("three-loci.tsv", snps));
  const axes = xAxes(svg);
  t.equal(axes.length, 3, "three x axes, one per chromosome");
  t.same(axes.map((a) => /chr\d+/.exec(a.title)?.[0]), ["chr2", "chr5", "chr17"], "in chromosome order, each titled with its chromosome");
  t.ok(axes.every((a) => a.title.includes("(Mb)")), "in Mb");
  t.ok(axes.every((a, i) => i === 0 || a.x1 > axes[i - 1]!.x2 + 10), "panels side by side, apart");
  regions.forEach(([c, a, b], j) => {
    const ax = axes[j]!;
    t.ok(ax.ticks.length >= 2, `${c}: ${ax.ticks.length} ticks (${ax.ticks.map((k) => k.label).join(", ")})`);
    t.ok(ax.ticks.every((k, i) => Number.isFinite(k.v) && k.v >= a / 1e6 - 0.05 && k.v <= b / 1e6 + 0.05 && (i === 0 || (k.v > ax.ticks[i - 1]!.v && k.x > ax.ticks[i - 1]!.x))), `${c}: ticks increasing, within ${a / 1e6}–${b / 1e6} Mb`);
  });
  const boxes = tickBoxes(axes);
  t.ok(boxes.every((bx, i) => i === 0 || bx.l > boxes[i - 1]!.r + 8), "no two tick labels touch, across panels too");
  // One scale for all: px per Mb is the same in every panel (each far wider than the minimum).
  const pxPerMb = axes.map((a) => (a.ticks.at(-1)!.x - a.ticks[0]!.x) / (a.ticks.at(-1)!.v - a.ticks[0]!.v));
  t.ok(pxPerMb.every((v) => Math.abs(v / pxPerMb[0]! - 1) < 0.01), `px per Mb alike: ${pxPerMb.map((v) => v.toFixed(1)).join(", ")}`);
  // Each point in its chromosome's panel, at its position through that panel's ticks.
  const chrI = tsv.header.indexOf("chr"), posI = tsv.header.indexOf("pos");
  const rank = (c: string) => ["2", "5", "17"].indexOf(c);
  const pts = points(svg);
  t.equal(pts.length, tsv.rows.length);
  const byClass: Record<string, Array<{ x: number }>> = {};
  for (const p of pts) (byClass[p.cls] ??= []).push(p);
  const cursor: Record<string, number> = {};
  let bad = 0;
  for (const r of tsv.rows) {
    const j = rank(r[chrI]!), k = `points-${j % 2}`, i = cursor[k] ?? 0;
    cursor[k] = i + 1;
    const x = byClass[k]![i]!.x, ax = axes[j]!;
    if (!(x >= ax.x1 && x <= ax.x2) || Math.abs(x - throughTicks(ax, Number(r[posI]) / 1e6)) >= 0.6) bad++;
  }
  t.equal(bad, 0, "every point inside its chromosome's panel, at its position through the panel's ticks");
  const leads = regions.map(([c]) => snps.filter((s) => s.chr === c).reduce((a, b) => (b.p < a.p ? b : a)).id);
  t.same(labelBoxes(svg).map((b) => b.text).sort(), [...leads].sort(), "the lead SNP of each locus is labelled");
  checkLabels(t, svg, MANHATTAN_FRAME.width, MANHATTAN_FRAME.height);
  t.ok(tsv.comments.some((c) => c.startsWith("x axis: one panel per chromosome (chr2, chr5, chr17)")), "the TSV says what x is");

  // A region far shorter than the others gets the minimum panel width (its own, larger scale).
  const tiny = [...gwasRegion(40, "chr2", 102.0e6, 103.5e6, 102.3e6, 12, 300), ...gwasRegion(41, "chr9", 22.10e6, 22.11e6, 22.105e6, 9, 50)];
  const small = await render("manhattan_plot", writeGwas("tiny-locus.tsv", tiny));
  const [wide, narrow] = xAxes(small.svg) as [XAxis, XAxis];
  t.ok(narrow.x2 - narrow.x1 >= 119, `the 10 kb panel is still ${Math.round(narrow.x2 - narrow.x1)} px wide`);
  t.ok(narrow.ticks.length >= 2 && narrow.ticks.every((k) => k.v >= 22.1 - 0.001 && k.v <= 22.11 + 0.001), `with ticks within its 10 kb (${narrow.ticks.map((k) => k.label).join(", ")})`);
  t.ok(wide.x1 < narrow.x1, "in chromosome order");
  t.ok(small.tsv.comments.some((c) => c.includes("except chr9")), "the TSV says which panel is on a larger scale");
});

t.test("manhattan, many chromosomes: chromosome labels; many short regions: panels", async (t) => {
  // Five whole-chromosome spans: more than four panels, not regions: the genome axis.
  const whole = Array.from({ length: 5 }, (_, c) => gwasRegion(50 + c, String(c + 1), 1e6, 1.2e8, 6e7, c === 2 ? 10 : 4, 400)).flat();
  const g = await render("manhattan_plot", writeGwas("five-chromosomes.tsv", whole));
  const gAxes = xAxes(g.svg);
  t.equal(gAxes.length, 1, "one x axis");
  t.equal(gAxes[0]!.title, "Chromosome");
  t.same(gAxes[0]!.ticks.map((k) => k.label), ["1", "2", "3", "4", "5"], "ticks name the chromosomes");
  // Six 1-Mb fine-mapping loci on six chromosomes: a panel each.
  const loci = Array.from({ length: 6 }, (_, c) => gwasRegion(60 + c, String(c + 1), 5e7, 5.1e7, 5.05e7, 9, 150)).flat();
  const l = await render("manhattan_plot", writeGwas("six-loci.tsv", loci));
  const lAxes = xAxes(l.svg);
  t.same(lAxes.map((a) => /chr\d+/.exec(a.title)?.[0]), ["chr1", "chr2", "chr3", "chr4", "chr5", "chr6"], "one panel per locus");
  t.ok(lAxes.every((a) => a.ticks.length >= 2), "each with position ticks");
  const boxes = tickBoxes(lAxes);
  t.ok(boxes.every((bx, i) => i === 0 || bx.l > boxes[i - 1]!.r + 8), "no two tick labels touch");
});
