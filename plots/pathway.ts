/**
 * pathway_map: a WikiPathways diagram (shipped subset, CC0) with the file's genes on it.
 * Input is a gene list or a DE / enrichment table (gene, optional log2 fold change and p);
 * the organism comes from the options or the identifiers; the pathway is the one named, or
 * the one most enriched for the file's significant genes (one-sided hypergeometric test).
 * The GPML layout is scaled into the frame: gene boxes filled by fold change on a symmetric
 * RdBu scale, metabolites and pathway links in their own styles, interactions with their
 * arrowheads, labels and compartments. The TSV lists every gene box drawn.
 */
import { ChartError, type Chart, type ChartData, type Frame, type TableSink } from "./chart.js";
import { findColumn } from "./data/columns.js";
import { fmt, numberOf } from "./data/numbers.js";
import { SIZE, textWidth } from "./layout/text.js";
import { colormap } from "./paint/colours.js";
import { colorbar } from "./paint/legend.js";
import { esc, r2, svgDocument, text } from "./paint/svg.js";
import type { PathwayOpts } from "./options.js";
import { GENE_TYPES, collectionUniverse, geneKeyOf, normalizeId, pathwayGenes, type IdMap, type Organism, type Pathway, type PathwayCollection, type PathwayEdge, type PathwayNode } from "./data/pathways.js";

// ---- statistics -------------------------------------------------------------------------

const logFact: number[] = [0];
function logFactorial(n: number): number {
  for (let i = logFact.length; i <= n; i++) logFact.push(logFact[i - 1]! + Math.log(i));
  return logFact[n]!;
}
const logChoose = (a: number, b: number) => logFactorial(a) - logFactorial(b) - logFactorial(a - b);

/**
 * P(X ≥ k) for X ~ Hypergeometric(population N, K successes in it, n draws): the chance of
 * drawing at least k pathway genes among n significant ones. Exact terms summed in log space.
 */
export function hypergeometricSf(k: number, N: number, K: number, n: number): number {
  if (![k, N, K, n].every((v) => Number.isInteger(v) && v >= 0) || K > N || n > N) throw new RangeError(`hypergeometricSf: need integers 0 ≤ K, n ≤ N (got k=${k}, N=${N}, K=${K}, n=${n})`);
  const lo = Math.max(0, n - (N - K)), hi = Math.min(K, n);
  if (k <= lo) return 1;
  if (k > hi) return 0;
  const base = logChoose(N, n);
  const terms: number[] = [];
  for (let i = k; i <= hi; i++) terms.push(logChoose(K, i) + logChoose(N - K, n - i) - base);
  const m = Math.max(...terms);
  let s = 0;
  for (const t of terms) s += Math.exp(t - m);
  return Math.min(1, Math.exp(m) * s);
}

export interface EnrichmentResult { id: string; title: string; k: number; K: number; n: number; N: number; p: number }

/** Every pathway of an organism tested for over-representation of `significant` in `universe`, best first. */
export function enrichment(collection: PathwayCollection, organism: Organism, significant: ReadonlySet<string>, universe: ReadonlySet<string>): EnrichmentResult[] {
  const sig = [...significant].filter((g) => universe.has(g));
  const N = universe.size, n = sig.length;
  const out: EnrichmentResult[] = [];
  for (const p of collection.pathways) {
    if (p.organism !== organism) continue;
    const genes = pathwayGenes(p);
    let K = 0, k = 0;
    for (const g of genes) if (universe.has(g)) K++;
    for (const g of sig) if (genes.has(g)) k++;
    out.push({ id: p.id, title: p.title, k, K, n, N, p: N > 0 ? hypergeometricSf(k, N, K, n) : 1 });
  }
  return out.sort((a, b) => a.p - b.p || b.k - a.k || a.id.localeCompare(b.id, "en", { numeric: true }));
}

// ---- reading the table ------------------------------------------------------------------

const GENE_COLUMNS = ["gene_name", "gene_id", "symbol", "gene", "Gene", "gene_symbol", "Symbol", "SYMBOL", "GeneID", "gene_ids", "ensembl_gene_id", "entrez_id", "EntrezID"];
const FC_COLUMNS = ["log2FoldChange", "log2fc", "logFC", "log2FC", "avg_log2FC", "log2_fold_change"];
const P_COLUMNS = ["padj", "pvalue", "P.Value", "adj.P.Val", "FDR", "p_val_adj", "PValue", "qvalue", "p_value"];

function optionalColumn(header: readonly string[], requested: string | undefined, candidates: readonly string[], option: string, what: string): number | undefined {
  if (requested !== undefined) return findColumn(header, requested, candidates, option, what);
  try { return findColumn(header, undefined, candidates, option, what); } catch { return undefined; }
}

interface GeneRow { raw: string; fc: number | undefined; p: number | undefined }

const looksMouseSymbol = (v: string) => /^[A-Z][a-z0-9][A-Za-z0-9.-]*$/.test(v) && /[a-z]/.test(v);
const looksHumanSymbol = (v: string) => /^[A-Z0-9][A-Z0-9.-]*$/.test(v) && /[A-Z]/.test(v) && !/^ENS/.test(v);

/** Organism from the identifiers: Ensembl prefixes, then which map matches more (symbols by their case). */
function detectOrganism(values: readonly string[], ids: { human: IdMap; mouse: IdMap }): { organism: Organism; why: string } {
  let ensH = 0, ensM = 0, h = 0, m = 0;
  for (const v of values) {
    const n = normalizeId(v);
    if (/^ENSMUSG\d/.test(n)) ensM++; else if (/^ENSG\d/.test(n)) ensH++;
    const inH = geneKeyOf(ids.human, v) !== undefined, inM = geneKeyOf(ids.mouse, v) !== undefined;
    if (inH && !looksMouseSymbol(v.trim())) h++;
    if (inM && !looksHumanSymbol(v.trim())) m++;
  }
  if (ensH + ensM > 0 && ensH + ensM >= values.length / 2) return ensM > ensH ? { organism: "mouse", why: `${ensM} ENSMUSG identifiers` } : { organism: "human", why: `${ensH} ENSG identifiers` };
  // RIKEN clone (1500015O10Rik) and Gm12345 gene names exist only in mouse, in any case
  const mouseNames = values.filter((v) => /^([0-9A-Z]{4,}RIK|GM\d{2,})$/i.test(v.trim())).length;
  const humanOnly = values.filter((v) => geneKeyOf(ids.human, v) !== undefined && geneKeyOf(ids.mouse, v) === undefined).length;
  if (mouseNames >= 2 && mouseNames > humanOnly) return { organism: "mouse", why: `${mouseNames} RIKEN/Gm mouse gene names such as ${values.find((v) => /RIK$|^GM\d/i.test(v.trim()))!.trim()}` };
  if (m > h) return { organism: "mouse", why: `${m} identifiers match mouse pathway genes (${h} human)` };
  if (h > 0) return { organism: "human", why: `${h} identifiers match human pathway genes (${m} mouse)` };
  const mouseCase = values.filter((v) => looksMouseSymbol(v.trim())).length;
  return mouseCase > values.length / 2 ? { organism: "mouse", why: "symbols are capitalized as mouse symbols are" } : { organism: "human", why: "no identifier matched either organism's pathways; human assumed" };
}

// ---- drawing helpers --------------------------------------------------------------------

const NEUTRAL = "#f6e3a1";
/** Gene boxes whose gene is not in the file: light grey, so that they never pass for a fold change near 0 (white on RdBu). */
const MISSING = "#e4e4e4";
const MISSING_STROKE = "#8c8c8c";
const MISSING_TEXT = "#4d4d4d";
const rgbOf = (c: string): [number, number, number] => {
  const m = /rgb\((\d+),\s*(\d+),\s*(\d+)\)/.exec(c);
  if (m) return [+m[1]!, +m[2]!, +m[3]!];
  const h = /^#?([0-9a-f]{6})$/i.exec(c);
  if (h) { const v = parseInt(h[1]!, 16); return [v >> 16, (v >> 8) & 255, v & 255]; }
  return [255, 255, 255];
};
/** A GPML text colour darkened until it reads on white (luminance ≤ 110 of 255), hue kept. */
function readable(hex: string): string {
  let [r, g, b] = rgbOf(hex);
  const lum = () => 0.2126 * r + 0.7152 * g + 0.0722 * b;
  for (let i = 0; i < 20 && lum() > 110; i++) { r *= 0.85; g *= 0.85; b *= 0.85; }
  return `#${[r, g, b].map((v) => Math.round(v).toString(16).padStart(2, "0")).join("")}`;
}
const darkFill = (c: string) => { const [r, g, b] = rgbOf(c); return 0.2126 * r + 0.7152 * g + 0.0722 * b < 120; };

/** Largest size ≤ `max` (down to `min`) at which `s` fits `width`; truncated with … if it never does. */
function fitText(s: string, width: number, max: number, min: number, bold = false): { text: string; size: number } {
  let size = max;
  while (size > min && textWidth(s, size, bold) > width) size = Math.max(min, size - 0.25);
  if (textWidth(s, size, bold) <= width) return { text: s, size };
  let t = s;
  while (t.length > 1 && textWidth(t + "…", size, bold) > width) t = t.slice(0, -1);
  return { text: t.length >= 1 && width > textWidth("…", size, bold) ? t + "…" : "", size };
}

function arrowHead(kind: string, x: number, y: number, dx: number, dy: number, a: number, color: string): string {
  const len = Math.hypot(dx, dy) || 1;
  const ux = dx / len, uy = dy / len, px = -uy, py = ux;
  const k = kind.toLowerCase();
  if (k === "line" || k === "") return "";
  if (k === "tbar" || k === "mim-inhibition") {
    const w = a * 0.8;
    return `<line x1="${r2(x + px * w)}" y1="${r2(y + py * w)}" x2="${r2(x - px * w)}" y2="${r2(y - py * w)}" stroke="${color}" stroke-width="1.6"/>`;
  }
  if (k === "mim-catalysis") return `<circle cx="${r2(x - ux * a * 0.45)}" cy="${r2(y - uy * a * 0.45)}" r="${r2(a * 0.45)}" fill="#fff" stroke="${color}" stroke-width="1"/>`;
  const bx = x - ux * a, by = y - uy * a, w = a * 0.45;
  const open = k === "mim-stimulation" || k === "mim-necessary-stimulation";
  return `<path d="M${r2(x)},${r2(y)}L${r2(bx + px * w)},${r2(by + py * w)}L${r2(bx - px * w)},${r2(by - py * w)}Z" fill="${open ? "#fff" : color}" stroke="${color}" stroke-width="${open ? 1 : 0.5}"/>`
    + (k === "mim-necessary-stimulation" ? `<line x1="${r2(bx - ux * 2 + px * w)}" y1="${r2(by - uy * 2 + py * w)}" x2="${r2(bx - ux * 2 - px * w)}" y2="${r2(by - uy * 2 - py * w)}" stroke="${color}" stroke-width="1"/>` : "");
}

const COMPARTMENTS = new Set(["mitochondria", "cell", "nucleus", "organelle", "endoplasmicreticulum", "endoplasmic reticulum", "golgiapparatus", "golgi apparatus", "sarcoplasmicreticulum", "extracellular region", "cytosol", "membrane", "cellularcomponent"]);

// ---- the chart --------------------------------------------------------------------------

export function pathwayChart(header: readonly string[], opts: PathwayOpts, frame: Frame, collection: PathwayCollection): TableSink {
  let geneCols: number[];
  const lowerHeader = header.map((h) => h.toLowerCase());
  if (opts.gene_col !== undefined) geneCols = [findColumn(header, opts.gene_col, GENE_COLUMNS, "gene_col", "gene")];
  else {
    geneCols = [];
    for (const c of GENE_COLUMNS) { const i = lowerHeader.indexOf(c.toLowerCase()); if (i >= 0 && !geneCols.includes(i)) geneCols.push(i); }
    if (!geneCols.length) geneCols = [0];
  }
  const fcCol = optionalColumn(header, opts.log2fc_col, FC_COLUMNS, "log2fc_col", "log2 fold change");
  const pCol = optionalColumn(header, opts.pvalue_col, P_COLUMNS, "pvalue_col", "p-value");
  if (geneCols.some((g) => g === fcCol || g === pCol)) throw new ChartError(`the gene column "${header[geneCols[0]!]}" is also the fold-change or p-value column; name the gene column with option gene_col`);

  const rows: Array<{ genes: string[]; fc: number | undefined; p: number | undefined }> = [];
  let emptyGene = 0;
  // A one-column gene list without a header: its first line is a gene, not a column name.
  const known = [...GENE_COLUMNS, ...FC_COLUMNS, ...P_COLUMNS].map((c) => c.toLowerCase());
  const headerIsGene = header.length === 1 && opts.gene_col === undefined && !known.includes(lowerHeader[0] ?? "") && (geneKeyOf(collection.ids.human, header[0]) !== undefined || geneKeyOf(collection.ids.mouse, header[0]) !== undefined);
  const take = (cells: readonly string[]) => {
    const genes = geneCols.map((i) => (cells[i] ?? "").trim()).filter((g) => g !== "" && g.toUpperCase() !== "NA");
    if (!genes.length) { emptyGene++; return; }
    rows.push({ genes, fc: fcCol === undefined ? undefined : numberOf(cells[fcCol]), p: pCol === undefined ? undefined : numberOf(cells[pCol]) });
  };
  if (headerIsGene) take(header);

  return {
    row: take,
    finish(): Chart {
      if (!rows.length) throw new ChartError("the file holds no gene identifiers (the gene column is empty)");
      // organism
      const firstIds = rows.map((r) => r.genes[0]!);
      const det = opts.organism ? { organism: opts.organism, why: "given" } : detectOrganism(firstIds, collection.ids);
      const organism = det.organism;
      const ids = collection.ids[organism];
      const shipped = collection.pathways.filter((p) => p.organism === organism);
      if (!shipped.length) throw new ChartError(`no ${organism} pathways are shipped`);

      // the file's genes, one record per gene key (the row with the smallest p wins)
      const byKey = new Map<string, GeneRow>();
      let unmatched = 0, naFc = 0, naP = 0;
      for (const r of rows) {
        let key: string | undefined, raw = "";
        for (const g of r.genes) { key = geneKeyOf(ids, g); if (key) { raw = g; break; } }
        if (!key) { unmatched++; continue; }
        if (fcCol !== undefined && r.fc === undefined) naFc++;
        if (pCol !== undefined && r.p === undefined) naP++;
        const prev = byKey.get(key);
        if (!prev || (r.p !== undefined && (prev.p === undefined || r.p < prev.p))) byKey.set(key, { raw, fc: r.fc, p: r.p });
      }

      if (byKey.size === 0) {
        const examples = [...new Set(firstIds)].slice(0, 3).join(", ");
        throw new ChartError(`none of the file's ${rows.length} gene identifiers (column ${geneCols.map((i) => JSON.stringify(header[i] ?? "")).join(" or ")}, e.g. ${examples}) is a gene on the shipped ${organism} pathways (${shipped.map((p) => `${p.id} ${p.title}`).join(", ")}); genes are matched by symbol, Entrez id or Ensembl id`
          + (det.why === "given" || /ENS/.test(det.why) ? "" : `; the organism ${organism} was detected from the identifiers (${det.why}): set organism if that is wrong`));
      }

      // enrichment
      const manyGenes = pCol !== undefined && rows.length >= 200;
      const universe = manyGenes ? new Set(byKey.keys()) : collectionUniverse(collection, organism);
      const significant = new Set<string>();
      for (const [k, g] of byKey) if (pCol === undefined || (g.p !== undefined && g.p < opts.threshold_pvalue)) significant.add(k);
      const results = enrichment(collection, organism, significant, universe);
      let pathway: Pathway;
      if (opts.pathway_id) {
        const found = shipped.find((p) => p.id === opts.pathway_id);
        if (!found) {
          const other = collection.pathways.find((p) => p.id === opts.pathway_id);
          throw new ChartError(`pathway ${opts.pathway_id} is not among the shipped ${organism} pathways${other ? ` (it is a ${other.organism} pathway: set organism to ${other.organism})` : ""}; the ${organism} pathways are: ${shipped.map((p) => `${p.id} (${p.title})`).join(", ")}`);
        }
        pathway = found;
      } else {
        const best = results[0];
        if (!best || best.k === 0) {
          throw new ChartError(significant.size === 0
            ? `no gene in the file is significant (p < ${opts.threshold_pvalue} in column "${header[pCol ?? 0]}") and on a shipped ${organism} pathway, so no pathway can be chosen; name one with pathway_id (${shipped.map((p) => p.id).join(", ")})`
            : `none of the file's significant genes is on a shipped ${organism} pathway; name one with pathway_id (${shipped.map((p) => p.id).join(", ")})`);
        }
        pathway = shipped.find((p) => p.id === best.id)!;
      }
      return draw(pathway, organism);

      function draw(p: Pathway, org: Organism): Chart {
        const W = frame.width, H = frame.height, M = 12;
        const colorFc = opts.color_by_fc && fcCol !== undefined;
        const highlightKeys = new Set<string>();
        const highlightMissing: string[] = [];
        const pGenes = pathwayGenes(p);
        for (const h of opts.highlight_genes) {
          const k = geneKeyOf(ids, h) ?? normalizeId(h);
          if (pGenes.has(k)) highlightKeys.add(k); else highlightMissing.push(h);
        }
        // fold-change scale: symmetric around 0
        const geneNodes = p.nodes.filter((n) => GENE_TYPES.has(n.type) && n.genes.length);
        let maxAbs = 0;
        if (colorFc) for (const n of geneNodes) { const g = byKey.get(n.genes[0]!); if (g?.fc !== undefined) maxAbs = Math.max(maxAbs, Math.abs(g.fc)); }
        const lim = maxAbs > 0 ? niceCeil(maxAbs) : 1;
        const rdbu = colormap("RdBu");
        const fcColor = (fc: number) => rdbu(Math.max(0, Math.min(1, (fc + lim) / (2 * lim))));

        // title and subtitle
        const titleText = frame.title ?? `${p.id} ${p.title} (${org})`;
        const tFit = fitText(titleText, W - 2 * M, SIZE.title, 11, true);
        const matchedNodes = geneNodes.filter((n) => byKey.has(n.genes[0]!));
        const matchedGenes = [...pGenes].filter((g) => byKey.has(g));
        const sub = `WikiPathways ${p.revision ?? p.id} · ${matchedGenes.length} of ${pGenes.size} genes on the pathway are in the file`;
        const sFit = fitText(sub, W - 2 * M, SIZE.tick, 8);
        const top = M + tFit.size + 6 + sFit.size + 8;

        // legend items (laid out before the map so the map gets the rest)
        const hasMetab = p.nodes.some((n) => n.type === "Metabolite");
        const hasNeutral = matchedNodes.some((n) => !colorFc || byKey.get(n.genes[0]!)?.fc === undefined);
        const items: Array<{ kind: "box" | "bar"; label: string; fill?: string; stroke?: string; sw?: number; tc?: string; w: number }> = [];
        const boxItem = (label: string, fill: string, stroke = "#333", sw = 0.8, tc = "#222") => items.push({ kind: "box", label, fill, stroke, sw, tc, w: 26 + 6 + textWidth(label, SIZE.legend) });
        boxItem("not in the file", MISSING, MISSING_STROKE, 0.8, "#222");
        if (hasNeutral) boxItem(colorFc ? "in the file, no fold change" : "in the file", NEUTRAL);
        if (highlightKeys.size) boxItem("highlighted", "#ffffff", "#000", 2.6);
        if (hasMetab) boxItem("metabolite", "#eef4fb", "#5b8ac7", 0.8, "#1f4e8c");
        const anyFc = colorFc && matchedNodes.some((n) => byKey.get(n.genes[0]!)?.fc !== undefined);
        if (anyFc) items.push({ kind: "bar", label: "log2 fold change", w: Math.max(150, textWidth("log2 fold change", SIZE.legend) + 20) });
        const legendLines: Array<typeof items> = [[]];
        let lineW = 0;
        for (const it of items) {
          if (lineW > 0 && lineW + 18 + it.w > W - 2 * M) { legendLines.push([]); lineW = 0; }
          legendLines[legendLines.length - 1]!.push(it);
          lineW += (lineW > 0 ? 18 : 0) + it.w;
        }
        const lineH = (l: typeof items) => (l.some((i) => i.kind === "bar") ? 44 : 20);
        const legendH = legendLines.reduce((s, l) => s + lineH(l), 0) + 6;

        // the map area and the board's extent
        const area = { x: M, y: top, w: W - 2 * M, h: H - top - legendH - M };
        if (area.h < 60) throw new ChartError(`the image is too small for this pathway; give a height of at least ${Math.ceil(top + legendH + M + 60)}`);
        let bx0 = Infinity, by0 = Infinity, bx1 = -Infinity, by1 = -Infinity;
        const ext = (x0: number, y0: number, x1: number, y1: number) => { bx0 = Math.min(bx0, x0); by0 = Math.min(by0, y0); bx1 = Math.max(bx1, x1); by1 = Math.max(by1, y1); };
        for (const n of p.nodes) if (n.w > 0 && n.h > 0 && (n.type !== "Label" || n.label)) ext(n.x - n.w / 2, n.y - n.h / 2, n.x + n.w / 2, n.y + n.h / 2);
        for (const s of p.shapes ?? []) if (s.w > 0 && s.h > 0) ext(s.x - s.w / 2, s.y - s.h / 2, s.x + s.w / 2, s.y + s.h / 2);
        for (const e of p.edges) for (const [x, y] of e.points) ext(x, y, x, y);
        if (!Number.isFinite(bx0)) { bx0 = 0; by0 = 0; bx1 = p.width; by1 = p.height; }
        bx0 -= 4; by0 -= 4; bx1 += 4; by1 += 4;
        const s = Math.min(area.w / (bx1 - bx0), area.h / (by1 - by0));
        const ox = area.x + (area.w - (bx1 - bx0) * s) / 2, oy = area.y + (area.h - (by1 - by0) * s) / 2;
        const X = (x: number) => ox + (x - bx0) * s, Y = (y: number) => oy + (y - by0) * s;

        const parts: string[] = [];
        // compartments, boxes and complexes
        for (const sh of p.shapes ?? []) {
          const x = X(sh.x - sh.w / 2), y = Y(sh.y - sh.h / 2), w = sh.w * s, h = sh.h * s;
          const st = sh.shape.toLowerCase();
          const stroke = sh.color ? `#${sh.color}` : "#9a9a9a";
          if (st === "complex") parts.push(`<rect x="${r2(x)}" y="${r2(y)}" width="${r2(w)}" height="${r2(h)}" rx="${r2(Math.min(6, h / 4))}" fill="#f1f1f1" stroke="#c4c4c4" stroke-width="0.8"/>`);
          else if (st === "oval" || st === "circle") parts.push(`<ellipse cx="${r2(x + w / 2)}" cy="${r2(y + h / 2)}" rx="${r2(w / 2)}" ry="${r2(h / 2)}" fill="none" stroke="${stroke}" stroke-width="0.8"/>`);
          else if (COMPARTMENTS.has(st)) parts.push(`<rect x="${r2(x)}" y="${r2(y)}" width="${r2(w)}" height="${r2(h)}" rx="${r2(Math.min(w, h) * 0.25)}" fill="#fbfbf7" stroke="${sh.color ? stroke : "#c0c0c0"}" stroke-width="${sh.thick ? 2.5 : 1.2}"/>`);
          else if (st === "rectangle" || st === "roundedrectangle" || st === "roundrectangle") parts.push(`<rect x="${r2(x)}" y="${r2(y)}" width="${r2(w)}" height="${r2(h)}"${st === "rectangle" ? "" : ` rx="${r2(Math.min(8, h / 4))}"`} fill="none" stroke="${stroke}" stroke-width="0.8"/>`);
          else continue;
          if (sh.label) { const f = fitText(sh.label, w - 4, Math.min(11, Math.max(7, 10 * s)), 6, true); if (f.text) parts.push(text(x + w / 2, y + h / 2, f.text, { size: f.size, anchor: "middle", baseline: "middle", weight: "bold", fill: "#555" })); }
        }
        // interactions
        const edgeColor = "#4a4a4a";
        const a = Math.max(5, Math.min(9, 8 * s));
        const edgeSvg = (e: PathwayEdge) => {
          const pts = e.points.map(([x, y]) => [X(x), Y(y)] as [number, number]);
          if (pts.length < 2) return "";
          const out: string[] = [];
          const end = pts[pts.length - 1]!, prev = pts[pts.length - 2]!;
          const start = pts[0]!, next = pts[1]!;
          const d = pts.map(([x, y], i) => `${i ? "L" : "M"}${r2(x)},${r2(y)}`).join("");
          out.push(`<path d="${d}" fill="none" stroke="${edgeColor}" stroke-width="${r2(Math.max(0.8, Math.min(1.3, s)))}"${e.dashed ? ` stroke-dasharray="4 3"` : ""}/>`);
          out.push(arrowHead(e.arrow, end[0], end[1], end[0] - prev[0], end[1] - prev[1], a, edgeColor));
          if (e.arrowStart) out.push(arrowHead(e.arrowStart, start[0], start[1], start[0] - next[0], start[1] - next[1], a, edgeColor));
          return out.join("");
        };
        parts.push(`<g class="edges">${p.edges.map(edgeSvg).join("")}</g>`);

        // nodes
        const rowsOut: Array<Array<string | number>> = [];
        const nodeSvg: string[] = [];
        const labelSvg: string[] = [];
        for (const n of p.nodes) {
          if (!(n.w > 0 && n.h > 0)) continue;
          const x = X(n.x - n.w / 2), y = Y(n.y - n.h / 2), w = n.w * s, h = n.h * s;
          const cx = x + w / 2, cy = y + h / 2;
          const maxFont = Math.min(12, Math.max(6, h * 0.62));
          if (n.type === "Label") {
            if (!n.label) continue;
            const lines = n.label.split(/\n/).map((l) => l.trim()).filter(Boolean);
            const size0 = Math.min(13, Math.max(7, (n.fontSize ?? 10) * s * 1.05));
            const fits = lines.map((l) => fitText(l, Math.max(w * 1.3, 30), size0, 6, !!n.bold));
            const size = Math.min(...fits.map((f) => f.size));
            const lh = size * 1.15;
            fits.forEach((f, i) => labelSvg.push(text(cx, cy + (i - (fits.length - 1) / 2) * lh, f.text, { size, anchor: "middle", baseline: "middle", weight: n.bold ? "bold" : "normal", fill: n.color ? readable(n.color) : "#333" })));
            continue;
          }
          if (n.type === "Metabolite") {
            nodeSvg.push(`<rect x="${r2(x)}" y="${r2(y)}" width="${r2(w)}" height="${r2(h)}" rx="${r2(Math.min(4, h / 3))}" fill="#eef4fb" stroke="#5b8ac7" stroke-width="0.8"/>`);
            const f = fitText(n.label, w - 3, maxFont, 6);
            if (f.text) nodeSvg.push(text(cx, cy, f.text, { size: f.size, anchor: "middle", baseline: "middle", fill: "#1f4e8c" }));
            continue;
          }
          if (n.type === "Pathway") {
            nodeSvg.push(`<rect x="${r2(x)}" y="${r2(y)}" width="${r2(w)}" height="${r2(h)}" rx="${r2(Math.min(6, h / 3))}" fill="#ffffff" stroke="#2e7d32" stroke-width="0.8" stroke-dasharray="3 2"/>`);
            const f = fitText(n.label, w - 4, maxFont, 6, true);
            if (f.text) nodeSvg.push(text(cx, cy, f.text, { size: f.size, anchor: "middle", baseline: "middle", weight: "bold", fill: "#2e7d32" }));
            continue;
          }
          // a gene product
          const key = n.genes[0];
          const g = key ? byKey.get(key) : undefined;
          const fill = !g ? MISSING : colorFc && g.fc !== undefined ? fcColor(g.fc) : NEUTRAL;
          const hl = key !== undefined && highlightKeys.has(key);
          const tip = g ? `${n.label}: ${g.raw}${g.fc !== undefined ? `, log2FC ${fmt(g.fc)}` : ""}${g.p !== undefined ? `, p ${fmt(g.p)}` : ""}` : n.label;
          nodeSvg.push(`<g><title>${esc(tip)}</title><rect x="${r2(x)}" y="${r2(y)}" width="${r2(w)}" height="${r2(h)}" rx="${r2(Math.min(2.5, h / 5))}" fill="${fill}" stroke="${hl ? "#000" : g ? "#333" : MISSING_STROKE}" stroke-width="${hl ? 2.6 : 0.8}"/>`);
          const f = fitText(n.label, w - 3, maxFont, 6, hl);
          if (f.text) nodeSvg.push(text(cx, cy, f.text, { size: f.size, anchor: "middle", baseline: "middle", fill: darkFill(fill) ? "#ffffff" : g || hl ? "#111" : MISSING_TEXT, weight: hl ? "bold" : "normal" }));
          nodeSvg.push(`</g>`);
          if (key) rowsOut.push([n.label, n.type, n.xref ? `${n.xref.db}:${n.xref.id}` : "", g?.raw ?? "", g?.fc ?? "", g?.p ?? "", hl ? "yes" : "no", r2(cx), r2(cy)]);
        }
        parts.push(`<g class="nodes">${nodeSvg.join("")}</g>`, `<g class="labels">${labelSvg.join("")}</g>`);

        // title, subtitle
        parts.push(text(W / 2, M + tFit.size / 2 + 2, tFit.text, { size: tFit.size, anchor: "middle", baseline: "middle", weight: "bold" }));
        parts.push(text(W / 2, M + tFit.size + 6 + sFit.size / 2 + 2, sFit.text, { size: sFit.size, anchor: "middle", baseline: "middle", fill: "#555" }));

        // legend
        let ly = H - M - legendH + 6;
        for (const line of legendLines) {
          const total = line.reduce((s2, it, i) => s2 + it.w + (i ? 18 : 0), 0);
          let lx = (W - total) / 2;
          const hLine = lineH(line);
          for (const it of line) {
            if (it.kind === "box") {
              const cy = ly + (hLine === 44 ? 21 : 10);
              parts.push(`<rect x="${r2(lx)}" y="${r2(cy - 7)}" width="26" height="14" rx="2" fill="${it.fill}" stroke="${it.stroke}" stroke-width="${it.sw}"/>`);
              parts.push(text(lx + 32, cy, it.label, { size: SIZE.legend, baseline: "middle", fill: it.tc ?? "#222" }));
            } else {
              parts.push(colorbar(rdbu, lx, ly + 16, it.w, 10, -lim, lim, it.label));
              parts.push(text(lx + it.w / 2, ly + 30, "0", { anchor: "middle", baseline: "hanging" }));
            }
            lx += it.w + 18;
          }
          ly += hLine;
        }

        // the data drawn
        const enr = results.find((r) => r.id === p.id);
        const enrText = (r: EnrichmentResult) => `${r.id} ${r.title}: p = ${fmt(r.p, 3)} (${r.k} of ${r.K} pathway genes significant)`;
        const comments = [
          `WikiPathways (${collection.licence}); ${collection.release}`,
          `pathway: ${p.id} "${p.title}" (${org}), revision ${p.revision ?? "unknown"}${p.commit ? `, GPML at wikipathways-database commit ${p.commit}` : ""}`,
          `organism: ${org} (${det.why})`,
          `columns: genes ${geneCols.map((i) => JSON.stringify(header[i] ?? "")).join(" or ")}${fcCol !== undefined ? `; log2 fold change ${JSON.stringify(header[fcCol])}` : "; no log2 fold change column"}${pCol !== undefined ? `; p-value ${JSON.stringify(header[pCol])}` : "; no p-value column"}`,
          `matched: ${matchedNodes.length} of ${geneNodes.length} gene boxes (${matchedGenes.length} of ${pGenes.size} distinct genes on the pathway) are in the file`,
          pCol !== undefined ? `significant genes: ${significant.size} with ${header[pCol]} < ${opts.threshold_pvalue} (of ${byKey.size} file genes on shipped ${org} pathways)` : `significant genes: all ${significant.size} file genes on shipped ${org} pathways (no p-value column)`,
          `enrichment: one-sided hypergeometric test; universe: ${manyGenes ? `the file's genes that are on shipped ${org} pathways` : `all genes on the shipped ${org} pathways`} (N = ${universe.size}), significant in it n = ${[...significant].filter((k) => universe.has(k)).length}`,
          opts.pathway_id ? `pathway named by pathway_id; its enrichment: ${enr ? enrText(enr) : "n/a"}` : `best-enriched pathway: ${enrText(results[0]!)}`,
          ...(opts.pathway_id ? [] : [`next: ${results.slice(1, 3).map(enrText).join("; ") || "none"}`]),
        ];
        if (colorFc && anyFc) comments.push(`fill: log2 fold change on a symmetric RdBu scale from −${fmt(lim)} (blue) to +${fmt(lim)} (red); genes without a fold change are pale yellow`);
        else if (fcCol !== undefined && !opts.color_by_fc) comments.push("fill: color_by_fc is false; genes in the file are pale yellow");
        if (emptyGene) comments.push(`skipped: ${emptyGene} rows without a gene identifier`);
        if (unmatched) comments.push(`not on any shipped ${org} pathway: ${unmatched} rows`);
        if (naFc) comments.push(`NA/empty/non-numeric log2 fold change: ${naFc} rows of matched genes`);
        if (naP) comments.push(`NA/empty/non-numeric p-value: ${naP} rows of matched genes`);
        if (highlightMissing.length) comments.push(`highlight_genes not on this pathway: ${highlightMissing.join(", ")}`);
        const data: ChartData = { header: ["node_label", "node_type", "xref", "file_gene", "log2FoldChange", "pvalue", "highlighted", "x", "y"], rows: rowsOut, comments };
        return { svg: svgDocument(W, H, parts.join(""), titleText), width: W, height: H, data };
      }
    },
  };
}

/** 1, 1.5, 2, 3, 4, 5, 6, 8, 10 × 10^k at or above v. */
function niceCeil(v: number): number {
  const e = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 1.5, 2, 3, 4, 5, 6, 8, 10]) if (m * e >= v - 1e-12) return m * e;
  return 10 * e;
}

export type { PathwayNode };
