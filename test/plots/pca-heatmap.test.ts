/**
 * pca_plot and heatmap, the pure part, on nf-core's SRP254919 salmon gene counts (6 mouse
 * retina samples, mCherry vs hND6): every number drawn is checked against a computation made
 * here from the fixture text (log2 CPM + 1, variances, an SVD by ml-matrix, a clustering by
 * ml-hclust), and the SVG is read as XML to see what was drawn.
 */
import t, { type Test } from "tap";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { agnes, type Cluster } from "ml-hclust";
import { Matrix, SVD } from "ml-matrix";
import { ChartError, type Chart, type Frame } from "../../plots/chart.js";
import { textWidth } from "../../plots/layout/text.js";
import { heatmapChart } from "../../plots/heatmap.js";
import { HeatmapOptions, PcaOptions, type HeatmapOpts, type PcaOpts } from "../../plots/options.js";
import { pcaChart } from "../../plots/pca.js";
import { allText, elements, parseXml, type XmlElement } from "../support/images.js";

const F = join(import.meta.dirname, "../fixtures/charts/counts");
const MATRIX = "SRP254919.salmon.merged.gene_counts.top1000cov.tsv";
const countsText = readFileSync(join(F, MATRIX), "utf8");
const sheetText = readFileSync(join(F, "SRP254919.samplesheet.csv"), "utf8");

// ---- The fixture, read here without the chart code ----
const lines = countsText.trim().split("\n").map((l) => l.split("\t"));
const header = lines[0]!;
const body = lines.slice(1);
const samples = header.slice(2);
const names = body.map((r) => r[1]!);
const counts = body.map((r) => r.slice(2).map(Number));
const ns = samples.length, ng0 = body.length;
const lib = samples.map((_, j) => counts.reduce((s, r) => s + r[j]!, 0));
const lcpm = counts.map((r) => r.map((c, j) => Math.log2((c / lib[j]!) * 1e6 + 1)));
const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
const sampleVar = (v: number[]) => { const m = mean(v); return v.reduce((a, b) => a + (b - m) ** 2, 0) / (v.length - 1); };
const variances = lcpm.map(sampleVar);
/** Gene indices by decreasing variance (ties: file order). */
const byVariance = variances.map((v, i) => ({ v, i })).filter((x) => x.v > 1e-12).sort((a, b) => b.v - a.v || a.i - b.i).map((x) => x.i);

const sheetLines = sheetText.trim().split("\n").map((l) => l.split(","));
const sheet = { header: sheetLines[0]!, rows: sheetLines.slice(1) };
const treatment = new Map(sheet.rows.map((r) => [r[0]!, r[sheet.header.indexOf("treatment")]!]));

const frame = (o: { width?: number; height?: number; title?: string }, w = 760, h = 600): Frame => ({ width: o.width ?? w, height: o.height ?? h, source: MATRIX, ...(o.title ? { title: o.title } : {}) });

function pca(opts: Record<string, unknown> = {}, rows: string[][] = lines, sh?: { header: string[]; rows: string[][] }): Chart {
  const o = PcaOptions.parse(opts) as PcaOpts;
  const sink = pcaChart(rows[0]!, o, frame(o), sh);
  for (const r of rows.slice(1)) sink.row(r);
  return sink.finish();
}
function heatmap(opts: Record<string, unknown> = {}, rows: string[][] = lines): Chart {
  const o = HeatmapOptions.parse(opts) as HeatmapOpts;
  const sink = heatmapChart(rows[0]!, o, frame(o, 820, 900));
  for (const r of rows.slice(1)) sink.row(r);
  return sink.finish();
}

const svgOf = (c: Chart) => parseXml(c.svg);
const byClass = (root: XmlElement, cls: string) => [...elements(root)].find((e) => e.attrs.class === cls);
const texts = (e: XmlElement | undefined) => (e ? [...elements(e)].filter((x) => x.name === "text") : []);

// ---- PCA, computed here ----
/** Scores (samples × components) and explained-variance fractions of the top-n genes, centred, by ml-matrix's SVD. */
function independentPca(n = 500) {
  const genes = byVariance.slice(0, n);
  const X = new Matrix(samples.map((_, s) => genes.map((g) => lcpm[g]![s]!)));
  for (let c = 0; c < X.columns; c++) {
    const m = mean(X.getColumn(c));
    for (let r = 0; r < X.rows; r++) X.set(r, c, X.get(r, c) - m);
  }
  const svd = new SVD(X, { autoTranspose: true });
  const scores = svd.leftSingularVectors.mmul(Matrix.diag(svd.diagonal));
  const ss = svd.diagonal.reduce((a, d) => a + d * d, 0);
  return { scores, explained: svd.diagonal.map((d) => (d * d) / ss), genes };
}
const ref = independentPca();

/** Component values equal the reference up to one sign for the whole component. */
function sameUpToSign(t: Test, got: number[], want: number[], what: string) {
  const sign = Math.sign(got[0]!) === Math.sign(want[0]!) ? 1 : -1;
  const worst = Math.max(...got.map((g, i) => Math.abs(g - sign * want[i]!)));
  t.ok(worst < 1e-6 * Math.max(1, ...want.map(Math.abs)), `${what}: equal to the independent SVD (one sign), largest difference ${worst}`);
}

t.test("fixture: 1000 genes × 6 samples, the two treatments of the sample sheet", async (t) => {
  t.equal(ng0, 1000);
  t.same(samples, ["SRX8042381", "SRX8042382", "SRX8042383", "SRX8042384", "SRX8042385", "SRX8042386"]);
  t.same(samples.map((s) => treatment.get(s)), ["mCherry", "mCherry", "mCherry", "hND6", "hND6", "hND6"]);
});

t.test("PCA: explained variance and sample coordinates equal an independent SVD of the top-500 centred log2(CPM+1)", async (t) => {
  const c = pca();
  t.same(c.data.header, ["sample", "group", "PC1", "PC2"]);
  t.same(c.data.rows.map((r) => r[0]), samples, "one TSV row per sample, in the file's order");
  sameUpToSign(t, c.data.rows.map((r) => r[2] as number), ref.scores.getColumn(0), "PC1");
  sameUpToSign(t, c.data.rows.map((r) => r[3] as number), ref.scores.getColumn(1), "PC2");
  // Axis titles and the TSV comment give the explained variance.
  const root = svgOf(c);
  const axisTitles = [...elements(root)].filter((e) => e.attrs.class === "axis").map((a) => allText(texts(a).at(-1)!));
  t.same(axisTitles, [`PC1 (${(100 * ref.explained[0]!).toFixed(1)}% variance)`, `PC2 (${(100 * ref.explained[1]!).toFixed(1)}% variance)`]);
  const comment = c.data.comments.find((x) => x.startsWith("explained variance"))!;
  const pcts = [...comment.matchAll(/PC(\d+) ([\d.]+)%/g)].map((m) => Number(m[2]));
  t.equal(pcts.length, ns - 1, "one per component the 6 samples give");
  pcts.forEach((p, i) => t.ok(Math.abs(p - 100 * ref.explained[i]!) < 0.006, `PC${i + 1}: ${p}% ≈ ${(100 * ref.explained[i]!).toFixed(3)}%`));
  t.match(c.data.comments.join("\n"), new RegExp(`the ${ref.genes.length} most variable genes .* of ${byVariance.length} that vary`));
  // Points drawn: one per TSV row.
  t.equal(texts(byClass(root, "points")).length, 0);
  t.equal(byClass(root, "points")!.children.length, c.data.rows.length, "TSV rows = points drawn");
});

t.test("PCA: top_n changes the genes used", async (t) => {
  const r50 = independentPca(50);
  const c = pca({ top_n: 50 });
  sameUpToSign(t, c.data.rows.map((r) => r[2] as number), r50.scores.getColumn(0), "PC1 of the top 50");
  t.notOk(Math.abs(r50.explained[0]! - ref.explained[0]!) < 1e-3, "a different gene set gives a different PC1 share");
});

t.test("PCA: components [2, 3] puts PC2 on x and PC3 on y", async (t) => {
  const c = pca({ components: [2, 3] });
  t.same(c.data.header, ["sample", "group", "PC2", "PC3"]);
  sameUpToSign(t, c.data.rows.map((r) => r[2] as number), ref.scores.getColumn(1), "x = PC2");
  sameUpToSign(t, c.data.rows.map((r) => r[3] as number), ref.scores.getColumn(2), "y = PC3");
  const root = svgOf(c);
  const [xAxis, yAxis] = [...elements(root)].filter((e) => e.attrs.class === "axis");
  t.match(allText(texts(xAxis!).at(-1)!), /^PC2 \(/);
  t.match(allText(texts(yAxis!).at(-1)!), /^PC3 \(/);
  // Point x positions rank like PC2, y positions (downwards) like −PC3.
  const pts = byClass(root, "points")!.children;
  const rank = (v: number[]) => v.map((_, i) => i).sort((a, b) => v[a]! - v[b]!);
  const cx = pts.map((p) => Number(p.attrs.cx)), cy = pts.map((p) => Number(p.attrs.cy));
  t.same(rank(cx), rank(c.data.rows.map((r) => r[2] as number)), "x order = PC2 order");
  t.same(rank(cy), rank(c.data.rows.map((r) => -(r[3] as number))), "y order = PC3 order (SVG y grows downwards)");
  t.throws(() => pca({ components: [1, 7] }), ChartError, "6 samples give 5 components");
});

/** Each point's fill, matched to its sample through the x order (the x scale is increasing). */
function fillsBySample(c: Chart): Map<string, string> {
  const pts = byClass(svgOf(c), "points")!.children;
  const xs = pts.map((p) => Number(p.attrs.cx ?? p.attrs.x));
  const pcx = c.data.rows.map((r) => r[2] as number);
  const pOrder = xs.map((_, i) => i).sort((a, b) => xs[a]! - xs[b]!);
  const sOrder = pcx.map((_, i) => i).sort((a, b) => pcx[a]! - pcx[b]!);
  const m = new Map<string, string>();
  sOrder.forEach((s, k) => m.set(c.data.rows[s]![0] as string, pts[pOrder[k]!]!.attrs.fill!));
  return m;
}
/** Legend entries: label → the fill of the marker drawn before it. */
function legendOf(c: Chart): { title: string; items: Map<string, string> } {
  const g = byClass(svgOf(c), "legend")!;
  const [title, ...rest] = g.children;
  const items = new Map<string, string>();
  for (let i = 0; i < rest.length; i += 2) items.set(allText(rest[i + 1]!), rest[i]!.attrs.fill!);
  return { title: allText(title!), items };
}

t.test("PCA: color_by object colours points by group, the legend names each group with its colour", async (t) => {
  const groups = { SRX8042381: "ctrl", SRX8042382: "ctrl", SRX8042383: "ctrl", SRX8042384: "KO", SRX8042385: "KO" } as Record<string, string>;
  const c = pca({ color_by: groups });
  t.same(c.data.rows.map((r) => r[1]), samples.map((s) => groups[s] ?? "unassigned"), "TSV group column");
  const lg = legendOf(c);
  t.equal(lg.title, "group");
  t.same([...lg.items.keys()], ["ctrl", "KO", "unassigned"]);
  t.equal(new Set(lg.items.values()).size, 3, "three different colours");
  for (const [s, fill] of fillsBySample(c)) t.equal(fill, lg.items.get(groups[s] ?? "unassigned"), `${s} drawn in its group's colour`);
  t.notOk(byClass(svgOf(pca()), "legend"), "no legend without color_by");
});

t.test("PCA: color_by a sample-sheet column (treatment)", async (t) => {
  const c = pca({ color_by: "treatment", sample_sheet: "meta/SRP254919.samplesheet.csv" }, lines, sheet);
  const lg = legendOf(c);
  t.equal(lg.title, "treatment");
  t.same([...lg.items.keys()].sort(), ["hND6", "mCherry"]);
  t.not(lg.items.get("hND6"), lg.items.get("mCherry"));
  for (const [s, fill] of fillsBySample(c)) t.equal(fill, lg.items.get(treatment.get(s)!), `${s} (${treatment.get(s)})`);
  t.same(c.data.rows.map((r) => r[1]), samples.map((s) => treatment.get(s)));
  t.match(c.data.comments.join("\n"), /column "treatment" of the sample sheet/);
});

t.test("PCA: an unknown sample-sheet column is a ChartError naming it and listing the sheet's columns", async (t) => {
  const err = t.throws(() => pca({ color_by: "genotype", sample_sheet: "s.csv" }, lines, sheet)) as Error;
  t.type(err, ChartError);
  t.match(err.message, /"genotype"/);
  for (const h of sheet.header) t.ok(err.message.includes(JSON.stringify(h)), `lists ${h}`);
  t.throws(() => pca({ color_by: "treatment" }), ChartError, "a column name without a sample sheet");
});

t.test("PCA: title defaults to the file's name; a given title replaces it", async (t) => {
  const title = (c: Chart) => allText(texts(byClass(svgOf(c), "title"))[0]!);
  t.equal(title(pca()), `PCA — ${MATRIX}`);
  t.equal(title(pca({ title: "Retina, ND6 vs mCherry" })), "Retina, ND6 vs mCherry");
  t.equal(texts(byClass(svgOf(pca({ title: "X" })), "title")).length, 1, "no subtitle under a given title");
});

// ---- Heatmap ----
/** Per-gene z-scores of log2(CPM+1) (sample sd), by gene index. */
const zOf = (g: number) => { const v = lcpm[g]!, m = mean(v), sd = Math.sqrt(sampleVar(v)); return v.map((x) => (x - m) / sd); };

t.test("heatmap: the TSV rows are the top_n most variable genes, as z-scores with mean 0 and sd 1", async (t) => {
  const c = heatmap();
  const top = byVariance.slice(0, 50);
  t.equal(new Set(top.map((g) => names[g])).size, 50, "the top 50 names are unique (so rows can be matched by name)");
  t.same(c.data.rows.map((r) => r[0]).sort(), top.map((g) => names[g]).sort(), "same genes");
  const idx = new Map(top.map((g) => [names[g]!, g]));
  const cols = c.data.header.slice(1);
  t.same([...cols].sort(), [...samples].sort(), "every sample is a column");
  let worst = 0;
  for (const r of c.data.rows) {
    const vals = r.slice(1) as number[];
    t.ok(Math.abs(mean(vals)) < 1e-9 && Math.abs(Math.sqrt(sampleVar(vals)) - 1) < 1e-9, `${r[0]}: mean 0, sd 1`);
    const want = zOf(idx.get(r[0] as string)!);
    cols.forEach((s, k) => { worst = Math.max(worst, Math.abs(vals[k]! - want[samples.indexOf(s)]!)); });
  }
  t.ok(worst < 1e-9, `z-scores equal the independent ones (largest difference ${worst})`);
  t.same(heatmap({ top_n: 120 }).data.rows.map((r) => r[0]).sort(), byVariance.slice(0, 120).map((g) => names[g]).sort(), "top_n 120");
});

/** Every cluster of the tree is a contiguous block of `order` (positions of its leaves form a run). */
function isLeafOrderOf(tree: Cluster, order: number[]): boolean {
  const pos = new Map(order.map((leaf, i) => [leaf, i]));
  let ok = true;
  tree.traverse((cl) => {
    if (cl.isLeaf) return;
    const p = cl.indices().map((i) => pos.get(i)!);
    if (Math.max(...p) - Math.min(...p) + 1 !== p.length) ok = false;
  });
  return ok;
}

t.test("heatmap: rows and columns are in a leaf order of average-linkage clustering (ml-hclust agnes); dendrograms drawn", async (t) => {
  const c = heatmap();
  const top = byVariance.slice(0, 50);
  const rowLabels = c.data.rows.map((r) => r[0] as string);
  t.notSame(rowLabels, top.map((g) => names[g]), "clustering changed the variance order");
  const zs = top.map(zOf);
  const rowTree = agnes(zs, { method: "average" });
  const order = rowLabels.map((l) => top.findIndex((g) => names[g] === l));
  t.ok(isLeafOrderOf(rowTree, order), "every row cluster of the reference tree is a contiguous block");
  const colTree = agnes(samples.map((_, s) => zs.map((z) => z[s]!)), { method: "average" });
  const colOrder = c.data.header.slice(1).map((s) => samples.indexOf(s));
  t.ok(isLeafOrderOf(colTree, colOrder), "every column cluster is contiguous");
  const root = svgOf(c);
  const merges = (cls: string) => (byClass(root, cls)!.children[0]!.attrs.d!.match(/M/g) ?? []).length;
  t.equal(merges("row-dendrogram"), 49, "row dendrogram: n − 1 merges");
  t.equal(merges("col-dendrogram"), ns - 1, "column dendrogram: n − 1 merges");
});

t.test("heatmap: a wrong leaf order is caught by the check", async (t) => {
  const top = byVariance.slice(0, 50);
  const tree = agnes(top.map(zOf), { method: "average" });
  const good = tree.indices();
  t.ok(isLeafOrderOf(tree, good));
  const bad = good.slice();
  [bad[0], bad[25]] = [bad[25]!, bad[0]!];
  t.notOk(isLeafOrderOf(tree, bad));
});

t.test("heatmap: cluster_rows / cluster_cols false keep the variance order and the file's sample order", async (t) => {
  const c = heatmap({ cluster_rows: false, cluster_cols: false });
  t.same(c.data.rows.map((r) => r[0]), byVariance.slice(0, 50).map((g) => names[g]));
  t.same(c.data.header.slice(1), samples);
  const root = svgOf(c);
  t.notOk(byClass(root, "row-dendrogram"));
  t.notOk(byClass(root, "col-dendrogram"));
  t.match(c.data.comments.join("\n"), /rows by decreasing variance/);
});

/** The heatmap's cells as rectangles with their fills (paths of `M x y h w v h h -w z`). */
function cellRects(root: XmlElement) {
  const out: Array<{ x: number; y: number; w: number; h: number; fill: string }> = [];
  for (const p of byClass(root, "cells")!.children) {
    for (const m of p.attrs.d!.matchAll(/M([\d.]+) ([\d.]+)h([\d.]+)v([\d.]+)h-[\d.]+z/g)) {
      out.push({ x: Number(m[1]), y: Number(m[2]), w: Number(m[3]), h: Number(m[4]), fill: p.attrs.fill! });
    }
  }
  return out;
}
const rgb = (hex: string) => { const m = /^#?([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(hex) ?? /rgb\((\d+), ?(\d+), ?(\d+)\)/.exec(hex)!; return m[0].startsWith("rgb") ? [1, 2, 3].map((i) => Number(m[i])) : [1, 2, 3].map((i) => parseInt(m[i]!, 16)); };

t.test("heatmap: cells cover the grid; RdBu puts the highest z in red and the lowest in blue; each colormap differs", async (t) => {
  const fills: string[] = [];
  for (const cm of ["viridis", "magma", "RdBu", "coolwarm"]) {
    const c = heatmap({ colormap: cm });
    const root = svgOf(c);
    const rects = cellRects(root);
    const outline = [...elements(root)].find((e) => e.name === "rect" && e.attrs.fill === "none" && e.attrs["stroke-width"] === "0.6")!;
    const [x0, y0, W, H] = ["x", "y", "width", "height"].map((k) => Number(outline.attrs[k]));
    const rowH = H! / c.data.rows.length, colW = W! / (c.data.header.length - 1);
    const area = rects.reduce((a, r) => a + r.w * r.h, 0);
    t.ok(area >= W! * H! * 0.999, `${cm}: cells cover the heatmap`);
    const fillAt = (r: number, k: number) => {
      const px = x0! + (k + 0.5) * colW, py = y0! + (r + 0.5) * rowH;
      // The last drawn rectangle over the centre is what shows; rows are drawn top-down, so the one with the largest y.
      const hits = rects.filter((b) => px >= b.x && px <= b.x + b.w && py >= b.y && py <= b.y + b.h);
      return hits.sort((a, b) => a.y - b.y || a.x - b.x).at(-1)!.fill;
    };
    let hi = { r: 0, k: 0, v: -Infinity }, lo = { r: 0, k: 0, v: Infinity };
    c.data.rows.forEach((row, r) => (row.slice(1) as number[]).forEach((v, k) => { if (v > hi.v) hi = { r, k, v }; if (v < lo.v) lo = { r, k, v }; }));
    const [hr, , hb] = rgb(fillAt(hi.r, hi.k)), [lr, , lb] = rgb(fillAt(lo.r, lo.k));
    if (cm === "RdBu" || cm === "coolwarm") {
      t.ok(hr! > hb! + 80, `${cm}: highest z (${hi.v.toFixed(2)}) is red: ${fillAt(hi.r, hi.k)}`);
      t.ok(lb! > lr! + 80, `${cm}: lowest z (${lo.v.toFixed(2)}) is blue: ${fillAt(lo.r, lo.k)}`);
    } else {
      const lum = (c: number[]) => c[0]! * 0.3 + c[1]! * 0.59 + c[2]! * 0.11;
      t.ok(lum(rgb(fillAt(hi.r, hi.k))) > lum(rgb(fillAt(lo.r, lo.k))) + 100, `${cm}: highest z is light, lowest dark`);
    }
    const distinct = [...new Set(rects.map((r) => r.fill))].sort();
    t.ok(distinct.length > 20, `${cm}: ${distinct.length} colours`);
    fills.push(distinct.join(","));
  }
  t.equal(new Set(fills).size, 4, "four colormaps, four different sets of fills");
});

t.test("heatmap: non-numeric, NA and negative cells are skipped and counted in the TSV comments", async (t) => {
  const rows = lines.map((r) => r.slice());
  const put = (i: number, j: number, v: string) => { rows[i]![j] = v; };
  put(5, 2, "NA"); put(9, 3, ""); put(12, 4, "abc"); put(40, 5, "n/a?"); put(41, 6, "1.2.3"); put(70, 7, "-4");
  const expect = { missing: 2, nonNumeric: 3, negative: 1 };
  for (const [what, c] of [["heatmap", heatmap({}, rows)], ["pca", pca({}, rows)]] as const) {
    const line = c.data.comments.find((x) => x.startsWith("skipped cells"));
    t.ok(line, `${what}: a comment about skipped cells`);
    t.match(line!, `${expect.missing} NA or empty`);
    t.match(line!, `${expect.nonNumeric} non-numeric`);
    t.match(line!, `${expect.negative} negative`);
  }
  t.notOk(heatmap().data.comments.some((x) => x.startsWith("skipped cells")), "none for the clean file");
  t.match(pca({}, rows).data.comments.join("\n"), /genes left out for a missing value .*: 6/, "PCA leaves out the 6 genes with a gap");
});

t.test("heatmap: gene labels come from gene_name (then symbol); gene_col names the id column", async (t) => {
  const c = heatmap();
  const labels = texts(byClass(svgOf(c), "gene-labels")).map(allText);
  t.same(labels, c.data.rows.map((r) => r[0]), "labels drawn in TSV order");
  t.ok(labels.every((l) => names.includes(l)), "gene_name values, not Ensembl ids");
  const sym = lines.map((r, i) => (i === 0 ? ["gene_id", "symbol", ...r.slice(2)] : r));
  t.same(heatmap({}, sym).data.rows.map((r) => r[0]).sort(), c.data.rows.map((r) => r[0]).sort(), "a symbol column is found too");
  const ids = lines.map((r) => [r[0]!, ...r.slice(2)]);
  t.ok(heatmap({}, ids).data.rows.every((r) => /^ENSMUSG/.test(r[0] as string)), "ids when there is no name column");
});

t.test("heatmap: labels readable and never overlapping; many rows shrink then drop labels with a note", async (t) => {
  for (const n of [50, 200, 250]) {
    const c = heatmap({ top_n: n });
    const labs = texts(byClass(svgOf(c), "gene-labels"));
    t.equal(labs.length, n, `${n} rows: every gene labelled`);
    const size = Number(labs[0]!.attrs["font-size"]);
    t.ok(size >= 6, `${n} rows: font ${size} px ≥ 6`);
    const ys = labs.map((l) => Number(l.attrs.y));
    const gap = Math.min(...ys.slice(1).map((y, i) => y - ys[i]!));
    t.ok(gap >= size, `${n} rows: labels ${gap.toFixed(2)} px apart, font ${size}`);
    const W = c.width;
    t.ok(labs.every((l) => Number(l.attrs.x) + textWidth(allText(l), size) <= W), "inside the figure");
  }
  const c = heatmap({ top_n: 400 });
  t.notOk(byClass(svgOf(c), "gene-labels"), "400 rows: no gene labels");
  t.match(c.data.comments.join("\n"), /gene labels left out: 400 rows/);
  t.equal(c.data.rows.length, 400, "every gene in the TSV");
});

t.test("heatmap: long sample names rotate and fit; the title defaults to the file's name and top_n", async (t) => {
  const long = samples.map((s, i) => `${s}_retina_${i % 2 ? "hND6" : "mCherry"}_biological_replicate_${i + 1}`);
  const rows = lines.map((r, i) => (i === 0 ? [r[0]!, r[1]!, ...long] : r));
  const c = heatmap({}, rows);
  const root = svgOf(c);
  const labs = texts(byClass(root, "sample-labels"));
  t.same(labs.map(allText).sort(), [...long].sort());
  for (const l of labs) {
    const size = Number(l.attrs["font-size"]), x = Number(l.attrs.x), y = Number(l.attrs.y);
    t.match(l.attrs.transform!, /^rotate\(-90 /);
    // Rotated −90° with text-anchor end: the text runs from y downwards.
    t.ok(y + textWidth(allText(l), size) <= c.height, `${allText(l)}: bottom ${Math.round(y + textWidth(allText(l), size))} ≤ ${c.height}`);
    t.ok(x - size / 2 >= 0 && x + size / 2 <= c.width);
  }
  const title = texts(byClass(root, "title")).map(allText);
  t.equal(title[0], `Heatmap — ${MATRIX}`);
  t.match(title[1]!, /Top 50 most variable genes/);
});
