/**
 * heatmap: the most variable genes of a genes × samples count matrix, as log2(CPM + 1)
 * z-scored per gene, rows and columns ordered by hierarchical clustering (average linkage on
 * Euclidean distances between z-score profiles) with their dendrograms, a colour bar, gene
 * labels on the right and sample labels underneath sized so none overlap.
 *
 * Clustering is average linkage (UPGMA) computed with the nearest-neighbour chain over a
 * distance matrix held in one Float64Array: O(n²) time and memory, the same tree as the
 * textbook algorithm (ml-hclust's agnes, which the tests compare it with) but fast enough
 * for 2,000 genes (agnes takes ~12 s for 1,000).
 */
import { ChartError, type Chart, type Frame, type TableSink } from "./chart.js";
import { fmt } from "./data/numbers.js";
import { SIZE, textWidth } from "./layout/text.js";
import { colormap } from "./paint/colours.js";
import { r2, svgDocument, text } from "./paint/svg.js";
import type { HeatmapOpts } from "./options.js";
import { CountMatrixReader, log2Cpm, mostVariable, skippedComment, titleBlock, type CountMatrix } from "./pca.js";

// ---------------------------------------------------------------------------------------------
// Clustering

export interface Dendrogram {
  /** Leaves (0..n-1) in drawing order. */
  order: number[];
  /** Merge k creates node n + k from nodes `a` and `b` (leaves are 0..n-1) at `height`; `a` is drawn first. */
  merges: Array<{ a: number; b: number; height: number }>;
}

/**
 * Average-linkage hierarchical clustering of `n` items from their distance matrix (row-major
 * n × n, symmetric; it is overwritten). The child holding the item that comes first in the
 * input is drawn first, so ties and unclustered structure keep the input order.
 */
export function averageLinkage(dist: Float64Array, n: number): Dendrogram {
  if (n === 0) return { order: [], merges: [] };
  const D = dist;
  const active = new Uint8Array(n).fill(1);
  const size = new Float64Array(n).fill(1);
  const node = new Int32Array(n);
  for (let i = 0; i < n; i++) node[i] = i;
  const minLeaf = new Int32Array(2 * n - 1);
  for (let i = 0; i < n; i++) minLeaf[i] = i;
  const merges: Dendrogram["merges"] = [];
  const chain: number[] = [];
  let remaining = n;
  let firstActive = 0;
  while (remaining > 1) {
    if (chain.length === 0) {
      while (!active[firstActive]) firstActive++;
      chain.push(firstActive);
    }
    const a = chain[chain.length - 1]!;
    const prev = chain.length >= 2 ? chain[chain.length - 2]! : -1;
    let best = prev, bd = prev >= 0 ? D[a * n + prev]! : Infinity;
    const row = a * n;
    for (let k = 0; k < n; k++) {
      if (!active[k] || k === a) continue;
      const d = D[row + k]!;
      if (d < bd) { bd = d; best = k; }
    }
    if (best !== prev) { chain.push(best); continue; }
    chain.pop(); chain.pop();
    const i = Math.min(a, prev), j = Math.max(a, prev);
    const ni = size[i]!, nj = size[j]!, nk = ni + nj;
    for (let k = 0; k < n; k++) {
      if (!active[k] || k === i || k === j) continue;
      const d = (ni * D[i * n + k]! + nj * D[j * n + k]!) / nk;
      D[i * n + k] = d; D[k * n + i] = d;
    }
    const ai = node[i]!, bj = node[j]!;
    const [first, second] = minLeaf[ai]! <= minLeaf[bj]! ? [ai, bj] : [bj, ai];
    const id = n + merges.length;
    merges.push({ a: first, b: second, height: bd });
    minLeaf[id] = Math.min(minLeaf[ai]!, minLeaf[bj]!);
    node[i] = id; size[i] = nk; active[j] = 0; remaining--;
  }
  // Leaf order: depth first, `a` before `b` (iterative: chains of 2,000 merges are deep).
  const order: number[] = [];
  const stack = [n + merges.length - 1];
  if (n === 1) stack[0] = 0;
  while (stack.length) {
    const v = stack.pop()!;
    if (v < n) { order.push(v); continue; }
    const mg = merges[v - n]!;
    stack.push(mg.b, mg.a);
  }
  return { order, merges };
}

/**
 * Euclidean distances between the rows of `m` (each of length `len`), over the coordinates
 * both have (NaN = missing), scaled up by len / shared so rows with gaps stay comparable;
 * pairs with nothing in common get the largest distance seen.
 */
export function euclideanDistances(m: readonly Float64Array[], len: number): Float64Array {
  const n = m.length;
  const D = new Float64Array(n * n);
  // One contiguous copy: the inner loop runs n²/2 × len times.
  const flat = new Float64Array(n * len);
  let complete = true;
  for (let i = 0; i < n; i++) {
    const a = m[i]!;
    for (let k = 0; k < len; k++) { const x = a[k]!; flat[i * len + k] = x; if (x !== x) complete = false; }
  }
  if (complete) {
    for (let i = 0; i < n; i++) {
      const oi = i * len;
      for (let j = i + 1; j < n; j++) {
        const oj = j * len;
        let s = 0;
        for (let k = 0; k < len; k++) { const d = flat[oi + k]! - flat[oj + k]!; s += d * d; }
        const d = Math.sqrt(s);
        D[i * n + j] = d; D[j * n + i] = d;
      }
    }
    return D;
  }
  let max = 0;
  const gaps: number[] = [];
  for (let i = 0; i < n; i++) {
    const a = m[i]!;
    for (let j = i + 1; j < n; j++) {
      const b = m[j]!;
      let s = 0, shared = 0;
      for (let k = 0; k < len; k++) {
        const d = a[k]! - b[k]!;
        if (d === d) { s += d * d; shared++; }
      }
      if (shared === 0) { gaps.push(i * n + j); continue; }
      const d = Math.sqrt(shared === len ? s : s * len / shared);
      D[i * n + j] = d; D[j * n + i] = d;
      if (d > max) max = d;
    }
  }
  for (const p of gaps) { const i = Math.floor(p / n), j = p % n; D[p] = max; D[j * n + i] = max; }
  return D;
}

// ---------------------------------------------------------------------------------------------
// The chart

export function heatmapChart(header: readonly string[], opts: HeatmapOpts, frame: Frame): TableSink {
  const reader = new CountMatrixReader(header, opts.gene_col);
  return {
    row: (cells) => reader.row(cells),
    finish: () => renderHeatmap(reader.finish(), opts, frame),
  };
}

const CB_TITLE = "z-score (log2 CPM+1)";
const NA_FILL = "#d4d4d4";
/** Colours saturate at ±this z-score (a few outlying cells would otherwise wash the rest out). */
const Z_CAP = 3;
/** Colour levels of the cells. */
const LEVELS = 256;
/** The smallest font a label is drawn with; rows or columns too thin for it go unlabelled. */
const MIN_FONT = 6;

function renderHeatmap(m: CountMatrix, opts: HeatmapOpts, frame: Frame): Chart {
  const lc = log2Cpm(m);
  const samples = lc.kept.map((j) => m.samples[j]!);
  const ns = samples.length;
  if (ns < 2) throw new ChartError(`a heatmap of z-scores needs at least 2 samples with counts; this matrix has ${ns}${lc.empty.length ? ` (and ${lc.empty.length} whose counts sum to 0: ${lc.empty.join(", ")})` : ""}`);
  const top = mostVariable(lc.rows, opts.top_n);
  if (top.variable < 2) throw new ChartError(`a heatmap needs at least 2 genes whose expression varies between samples; this matrix has ${top.variable} of ${m.values.length}`);
  // The chosen genes, most variable first: the order drawn when rows are not clustered.
  const genes = top.index;
  const ng = genes.length;

  // z-scores per gene over the samples it has values for (sample sd, n − 1).
  let naCells = 0;
  const z = genes.map((gi) => {
    const v = lc.rows[gi]!;
    let n = 0, sum = 0;
    for (const x of v) if (x === x) { n++; sum += x; }
    const mean = sum / n;
    let ss = 0;
    for (const x of v) if (x === x) ss += (x - mean) ** 2;
    const sd = Math.sqrt(ss / (n - 1));
    const out = new Float64Array(ns);
    for (let s = 0; s < ns; s++) { const x = v[s]!; out[s] = (x - mean) / sd; if (x !== x) naCells++; }
    return out;
  });

  // Orders.
  let rowTree: Dendrogram | undefined, colTree: Dendrogram | undefined;
  if (opts.cluster_rows && ng > 1) rowTree = averageLinkage(euclideanDistances(z, ns), ng);
  if (opts.cluster_cols && ns > 1) {
    const cols = Array.from({ length: ns }, (_, s) => Float64Array.from(z, (r) => r[s]!));
    colTree = averageLinkage(euclideanDistances(cols, ng), ns);
  }
  const rowOrder = rowTree ? rowTree.order : genes.map((_, i) => i);
  const colOrder = colTree ? colTree.order : samples.map((_, i) => i);

  // z range: symmetric, so every map is centred on 0.
  let zmax = 0;
  for (const r of z) for (const x of r) if (x === x && Math.abs(x) > zmax) zmax = Math.abs(x);
  const lim = Math.max(1, Math.min(Z_CAP, Math.ceil(zmax * 2) / 2));
  const cmap = colormap(opts.colormap);
  // Colours in LEVELS steps (finer than the eye tells apart), each level's colour taken at its middle; −1 = missing.
  const lut = Array.from({ length: LEVELS }, (_, k) => cmap((k + 0.5) / LEVELS));
  const level = (v: number) => (v === v ? Math.min(LEVELS - 1, Math.floor(((Math.max(-lim, Math.min(lim, v)) + lim) / (2 * lim)) * LEVELS)) : -1);

  // ---- Layout (every text measured) ----
  const userW = opts.width !== undefined, userH = opts.height !== undefined;
  const title = frame.title ?? `Heatmap \u2014 ${frame.source}`;
  const subtitle = frame.title === undefined ? `Top ${ng} most variable genes; per-gene z-scores of log2(CPM + 1)` : undefined;
  let W = frame.width;
  const padL = 12, padR = 12, padB = 10;
  // Room for the title at its largest: W may still grow or shrink below.
  const titleH = titleBlock(title, subtitle, Infinity).height + 14;
  const colDendroH = colTree ? 56 : 0;
  const rowDendroW = rowTree ? 72 : 0;
  const cbW = 14;
  const ticks: number[] = [];
  for (let t = -Math.floor(lim); t <= Math.floor(lim); t++) ticks.push(t);
  const tickW = Math.max(...ticks.map((t) => textWidth(fmt(t), SIZE.tick)));
  const cbBlockW = Math.max(textWidth(CB_TITLE, SIZE.legend), cbW + 5 + tickW, naCells ? 18 + textWidth("NA (missing)", SIZE.legend) : 0);
  const cbTitleRoom = SIZE.legend + 10;
  const y0 = titleH + Math.max(colDendroH ? colDendroH + 4 : 0, cbTitleRoom);

  // Row height: the user's height decides it; otherwise labelled rows for up to 150 genes, thin rows beyond.
  const notes: string[] = [];
  // Up to 250 genes the rows stay tall enough for 6 px labels (at most 1,800 px of rows); beyond, thin unlabelled rows.
  const rowHFor = (n: number) => (n <= 60 ? 15 : n <= 150 ? 12 : n <= 250 ? 7.2 : Math.max(1.5, Math.min(5, 1800 / n)));
  // Column width and sample-label font (depend on W only).
  const geneFontFor = (rowH: number) => Math.min(SIZE.tick, rowH * 0.85);
  const labels = rowOrder.map((r) => m.labels[genes[r]!]!);
  const widestGene = Math.max(...labels.map((l) => textWidth(l, 1)));
  let rowH = userH ? 0 : rowHFor(ng);
  // The bottom depends on sample-label font, which depends on W; the right on gene-label font, which depends on rowH.
  const layoutX = (geneFont: number) => {
    const geneW = geneFont >= MIN_FONT ? widestGene * geneFont + 6 : 0;
    const x0 = padL + (rowDendroW ? rowDendroW + 4 : 0);
    const x1 = W - padR - cbBlockW - 18 - geneW;
    return { geneW, x0, x1, colW: (x1 - x0) / ns };
  };
  let lx = layoutX(userH ? SIZE.tick : geneFontFor(rowH));
  if (!userW && lx.colW > 56) { W = Math.max(320, W - (lx.colW - 56) * ns); lx = layoutX(userH ? SIZE.tick : geneFontFor(rowH)); }
  if (!userW && lx.colW < 9 && ns > 0) { W = Math.min(4000, W + (9 - lx.colW) * ns); lx = layoutX(userH ? SIZE.tick : geneFontFor(rowH)); }
  if (lx.colW < 1) throw new ChartError(`${ns} samples do not fit in ${W} px; give a larger width`);
  const sampleFont = Math.min(SIZE.tick, lx.colW * 0.85);
  const sampleLabels = sampleFont >= MIN_FONT;
  const bottomLabelsH = sampleLabels ? 6 + Math.max(...samples.map((s) => textWidth(s, sampleFont))) : 0;
  const noteH = 15;
  const bottomFor = (nNotes: number) => bottomLabelsH + 8 + nNotes * noteH + padB;
  let H: number;
  if (userH) {
    H = frame.height;
    // Rows share what is left; a note line is kept for each label set left out.
    let nNotes = sampleLabels ? 0 : 1;
    rowH = (H - y0 - bottomFor(nNotes)) / ng;
    if (geneFontFor(rowH) < MIN_FONT) { nNotes++; rowH = (H - y0 - bottomFor(nNotes)) / ng; }
    lx = layoutX(geneFontFor(rowH));
    if (rowH < 0.5) throw new ChartError(`${ng} genes do not fit in ${H} px; give a larger height or a smaller top_n`);
  } else {
    H = 0;
  }
  const geneFont = geneFontFor(rowH);
  const geneLabels = geneFont >= MIN_FONT;
  if (!geneLabels) lx = layoutX(0);
  if (!geneLabels) notes.push(`gene labels left out: ${ng} rows of ${fmt(rowH, 2)} px are too thin to label (the TSV lists the genes in drawn order)`);
  if (!sampleLabels) notes.push(`sample labels left out: ${ns} columns of ${fmt(lx.colW, 2)} px are too narrow (the TSV lists them in drawn order)`);
  const { x0, x1, colW } = lx;
  const hmH = rowH * ng;
  const y1 = y0 + hmH;
  const cbH = Math.max(60, Math.min(180, hmH));
  const cbX = x1 + 4 + lx.geneW + 14;
  const naY = y0 + cbH + 26;
  const contentBottom = Math.max(y1 + bottomFor(notes.length), naCells ? naY + 20 : y0 + cbH + 24);
  if (!userH) H = Math.ceil(contentBottom);

  // ---- Drawing ----
  const parts: string[] = [];
  parts.push(titleBlock(title, subtitle, W).svg);
  // Cells: one path per colour level (runs of equal colour in a row merged), each cell drawn a
  // little over its neighbours so anti-aliasing leaves no seams. A few paths instead of one
  // rect per cell keep a 1,000 × 50 heatmap quick to rasterise.
  const byLevel = new Map<number, string[]>();
  const ow = 0.4;
  const hFull = `v${r2(rowH + 0.4)}h`, hLast = `v${r2(rowH)}h`;
  // Every row spans the same columns: the x and width text of a run from column c to e is made once.
  const runText = new Map<number, [string, string, string]>();
  const run = (c: number, e: number): [string, string, string] => {
    let t = runText.get(c * (ns + 1) + e);
    if (!t) {
      const xa = r2(x0 + c * colW), w = r2(x0 + e * colW + (e === ns ? 0 : ow) - xa);
      runText.set(c * (ns + 1) + e, t = [`M${xa} `, `h${w}`, String(-w)]);
    }
    return t;
  };
  const lev = new Int16Array(ns);
  for (let r = 0; r < ng; r++) {
    const zr = z[rowOrder[r]!]!;
    const yy = String(r2(y0 + r * rowH));
    const hv = r === ng - 1 ? hLast : hFull;
    for (let c = 0; c < ns; c++) lev[c] = level(zr[colOrder[c]!]!);
    for (let c = 0; c < ns;) {
      const k = lev[c]!;
      let e = c + 1;
      while (e < ns && lev[e] === k) e++;
      const [mx, hw, back] = run(c, e);
      let list = byLevel.get(k);
      if (!list) byLevel.set(k, list = []);
      list.push(mx + yy + hw + hv + back + "z");
      c = e;
    }
  }
  const cellPaths = [...byLevel.entries()].sort((a, b) => a[0] - b[0]).map(([k, d]) => `<path fill="${k < 0 ? NA_FILL : lut[k]}" d="${d.join("")}"/>`);
  parts.push(`<g class="cells">${cellPaths.join("")}</g>`);
  parts.push(`<rect x="${r2(x0)}" y="${r2(y0)}" width="${r2(x1 - x0)}" height="${r2(hmH)}" fill="none" stroke="#444" stroke-width="0.6"/>`);

  // Dendrograms: leaves at the heatmap's edge, the root farthest out.
  const dendro = (tree: Dendrogram, n: number, pos: (leafIndex: number) => number, depth: (h: number) => number, vertical: boolean) => {
    const at = new Float64Array(n + tree.merges.length);
    const ht = new Float64Array(n + tree.merges.length);
    tree.order.forEach((leaf, i) => { at[leaf] = pos(i); });
    const segs: string[] = [];
    tree.merges.forEach((mg, k) => {
      const id = n + k;
      at[id] = (at[mg.a]! + at[mg.b]!) / 2;
      ht[id] = mg.height;
      const pa = at[mg.a]!, pb = at[mg.b]!, ha = depth(ht[mg.a]!), hb = depth(ht[mg.b]!), h = depth(mg.height);
      segs.push(vertical
        ? `M${r2(pa)} ${r2(ha)}V${r2(h)}H${r2(pb)}V${r2(hb)}`
        : `M${r2(ha)} ${r2(pa)}H${r2(h)}V${r2(pb)}H${r2(hb)}`);
    });
    return `<path d="${segs.join("")}" fill="none" stroke="#444" stroke-width="0.8"/>`;
  };
  if (rowTree) {
    const maxH = Math.max(...rowTree.merges.map((x) => x.height), 1e-12);
    const right = x0 - 3, left = padL;
    parts.push(`<g class="row-dendrogram">${dendro(rowTree, ng, (i) => y0 + (i + 0.5) * rowH, (h) => right - (h / maxH) * (right - left), false)}</g>`);
  }
  if (colTree) {
    const maxH = Math.max(...colTree.merges.map((x) => x.height), 1e-12);
    const bottom = y0 - 3, topY = y0 - 3 - colDendroH;
    parts.push(`<g class="col-dendrogram">${dendro(colTree, ns, (i) => x0 + (i + 0.5) * colW, (h) => bottom - (h / maxH) * (bottom - topY), true)}</g>`);
  }

  // Gene labels, right of the rows.
  if (geneLabels) {
    const t = labels.map((l, r) => text(x1 + 4, y0 + (r + 0.5) * rowH, l, { size: r2(geneFont), baseline: "middle" }));
    parts.push(`<g class="gene-labels">${t.join("")}</g>`);
  }
  // Sample labels, under the columns, reading upwards.
  if (sampleLabels) {
    const t = colOrder.map((s, c) => text(x0 + (c + 0.5) * colW, y1 + 6, samples[s]!, { size: r2(sampleFont), anchor: "end", baseline: "middle", rotate: -90 }));
    parts.push(`<g class="sample-labels">${t.join("")}</g>`);
  }

  // Colour bar with integer ticks.
  const cb: string[] = [];
  const steps = 64;
  for (let i = 0; i < steps; i++) {
    const t0 = i / steps;
    cb.push(`<rect x="${r2(cbX)}" y="${r2(y0 + cbH - (i + 1) * cbH / steps)}" width="${cbW}" height="${r2(cbH / steps + 0.4)}" fill="${cmap(t0 + 0.5 / steps)}"/>`);
  }
  cb.push(`<rect x="${r2(cbX)}" y="${r2(y0)}" width="${cbW}" height="${r2(cbH)}" fill="none" stroke="#444" stroke-width="0.5"/>`);
  for (const t of ticks) {
    const yy = y0 + cbH - ((t + lim) / (2 * lim)) * cbH;
    cb.push(`<line x1="${r2(cbX + cbW)}" y1="${r2(yy)}" x2="${r2(cbX + cbW + 3)}" y2="${r2(yy)}" stroke="#444" stroke-width="0.8"/>`);
    cb.push(text(cbX + cbW + 5, yy, fmt(t), { baseline: "middle" }));
  }
  cb.push(text(cbX, y0 - 9, CB_TITLE, { size: SIZE.legend }));
  if (naCells) {
    cb.push(`<rect x="${r2(cbX)}" y="${r2(naY - 6)}" width="12" height="12" fill="${NA_FILL}" stroke="#444" stroke-width="0.5"/>`);
    cb.push(text(cbX + 18, naY, "NA (missing)", { size: SIZE.legend, baseline: "middle" }));
  }
  parts.push(`<g class="colorbar">${cb.join("")}</g>`);

  notes.forEach((n, i) => parts.push(text(padL, H - padB - (notes.length - 1 - i) * noteH - 3, n, { size: SIZE.label, fill: "#555" })));

  // ---- The TSV: the matrix as drawn ----
  const rows = rowOrder.map((r, i) => [labels[i]!, ...colOrder.map((c) => { const v = z[r]![c]!; return v === v ? v : "NA"; })] as Array<string | number>);
  const method = (what: string, n: number) => `${what} ordered by hierarchical clustering: average linkage (UPGMA) on Euclidean distances between the ${n} z-scores of each ${what === "rows" ? "gene" : "sample"}`;
  const comments = [
    `source: ${frame.source}`,
    `rows: the ${ng} most variable genes (variance of log2(CPM + 1) across samples; CPM over each sample's column sum in this file) of ${top.variable} that vary; values: per-gene z-scores of log2(CPM + 1) (mean 0, sample standard deviation 1)`,
    rowTree ? method("rows", ns) : "rows by decreasing variance (cluster_rows is off)",
    colTree ? method("columns", ng) : "columns in the file's order (cluster_cols is off)",
    `colours: ${opts.colormap}, centred on 0, saturating at ±${fmt(lim)}${zmax > lim ? ` (the largest |z| is ${fmt(zmax)})` : ""}`,
    `gene labels from column "${m.labelColumn}"`,
  ];
  if (naCells) comments.push(`cells without a value (drawn grey, NA here): ${naCells}; distances use the samples both genes have`);
  comments.push(...skippedComment(m));
  if (lc.empty.length) comments.push(`samples left out, their counts sum to 0: ${lc.empty.join(", ")}`);
  if (m.annotationColumns.length) comments.push(`annotation columns (not samples): ${m.annotationColumns.join(", ")}`);
  comments.push(...notes);
  return {
    svg: svgDocument(W, H, parts.join(""), title),
    width: Math.round(W), height: Math.round(H),
    data: { header: ["gene", ...colOrder.map((c) => samples[c]!)], rows, comments },
  };
}
