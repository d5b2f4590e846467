/**
 * Volcano plot (plot type `volcano_plot`), the pure part: −log10 p against log2 fold change for
 * a differential-expression results table (DESeq2, edgeR, limma), rows streamed one at a time.
 * Genes up (log2FC ≥ threshold and p < threshold), down and not significant are coloured
 * (vermillion, blue, grey — Okabe–Ito, colour-blind safe; grey points small, translucent and
 * drawn first); dashed threshold lines; the most significant changed genes labelled without
 * overlap; a legend with the counts. The TSV holds one row per point drawn.
 */
import { scaleLinear } from "d3-scale";
import { ChartError, type Chart, type Frame, type TableSink } from "./chart.js";
import { findColumn, optionalColumn } from "./data/columns.js";
import { fastNumber, fmt } from "./data/numbers.js";
import { leftAxisWidth } from "./layout/axes.js";
import { placeLabels, type Box } from "./layout/labels.js";
import { fitText, SIZE, textWidth } from "./layout/text.js";
import { axis } from "./paint/axis.js";
import { GREY, PALETTE } from "./paint/colours.js";
import { drawLabels } from "./paint/labels.js";
import { legend } from "./paint/legend.js";
import { r2, svgDocument, text } from "./paint/svg.js";
import type { VolcanoOpts } from "./options.js";

export const VOLCANO_COLUMNS = {
  log2fc: ["log2FoldChange", "log2fc", "logFC", "log2FC", "log2_fold_change"],
  pvalue: ["padj", "adj.P.Val", "FDR", "qvalue", "pvalue", "P.Value", "PValue", "p_value"],
  gene: ["gene_name", "gene_id", "symbol", "gene", "Gene", "gene_symbol", "SYMBOL"],
} as const;

export const VOLCANO_COLORS = { up: PALETTE[3], down: PALETTE[0], ns: GREY } as const;
export type VolcanoCategory = "up" | "down" | "ns";
const CATEGORY_LABEL: Record<VolcanoCategory, string> = { up: "Up", down: "Down", ns: "Not significant" };

const PAD = 14;

/** Whether a p-value column holds adjusted p-values (padj, adj.P.Val, FDR, q-values). */
export const isAdjusted = (name: string) => /adj|fdr|q[._-]?val/i.test(name);

/** A growable Float64Array. */
class F64 {
  a = new Float64Array(1024);
  n = 0;
  push(v: number) {
    if (this.n === this.a.length) { const b = new Float64Array(this.a.length * 2); b.set(this.a); this.a = b; }
    this.a[this.n++] = v;
  }
}

export function volcanoChart(header: readonly string[], opts: VolcanoOpts, frame: Frame): TableSink {
  const fcCol = findColumn(header, opts.log2fc_col, VOLCANO_COLUMNS.log2fc, "log2fc_col", "log2 fold change");
  const pCol = findColumn(header, opts.pvalue_col, VOLCANO_COLUMNS.pvalue, "pvalue_col", "p-value");
  let geneCol: number | undefined;
  if (opts.gene_col !== undefined) geneCol = findColumn(header, opts.gene_col, [], "gene_col", "gene");
  else {
    geneCol = optionalColumn(header, VOLCANO_COLUMNS.gene);
    // R's write.csv writes the row names (gene ids) under an empty first header cell.
    if (geneCol === undefined && header[0] === "" && fcCol !== 0 && pCol !== 0) geneCol = 0;
  }
  const fcName = header[fcCol]!, pName = header[pCol]!;
  const adjusted = isAdjusted(pName);
  const pWord = adjusted ? "adjusted p" : "p";

  const fc = new F64(), p = new F64();
  const genes: string[] = [];
  let rows = 0, badFc = 0, badP = 0, skipped = 0;
  /** write.table with row names writes one header cell fewer than each row holds: the row name comes first. */
  let shift: number | undefined;

  return {
    row(cells) {
      if (shift === undefined) shift = cells.length === header.length + 1 && header[0] !== "" ? 1 : 0;
      rows++;
      const f = fastNumber(cells[fcCol + shift]);
      let pv = fastNumber(cells[pCol + shift]);
      if (pv !== undefined && (pv < 0 || pv > 1)) pv = undefined;
      if (f === undefined) badFc++;
      if (pv === undefined) badP++;
      if (f === undefined || pv === undefined) { skipped++; return; }
      fc.push(f);
      p.push(pv);
      const g = geneCol !== undefined ? cells[geneCol + shift] : shift === 1 ? cells[0] : undefined;
      genes.push(g === undefined || g.trim() === "" ? `row ${rows}` : g.trim());
    },
    finish(): Chart {
      const n = fc.n;
      if (n === 0) throw new ChartError(`no row has both a numeric ${fcName} and a numeric ${pName} (${rows} data rows read; ${badFc} without a numeric ${fcName}, ${badP} without a ${pName} between 0 and 1)`);
      return draw();
    },
  };

  function draw(): Chart {
    const n = fc.n;
    const F = fc.a, P = p.a;
    let minPos = Infinity, zeros = 0;
    for (let i = 0; i < n; i++) { const v = P[i]!; if (v === 0) zeros++; else if (v < minPos) minPos = v; }
    const floor = Number.isFinite(minPos) ? minPos : 1e-300;
    const y = new Float64Array(n);
    const cat: VolcanoCategory[] = new Array(n);
    const counts = { up: 0, down: 0, ns: 0 };
    let ymax = -Math.log10(opts.threshold_pvalue), xmax = opts.threshold_fc * 1.25;
    for (let i = 0; i < n; i++) {
      const v = P[i]!, f = F[i]!;
      y[i] = -Math.log10(v === 0 ? floor : v) + 0; // + 0 turns −0 (p = 1) into 0
      const sig = v < opts.threshold_pvalue;
      const c: VolcanoCategory = sig && f >= opts.threshold_fc ? "up" : sig && f <= -opts.threshold_fc ? "down" : "ns";
      cat[i] = c;
      counts[c]++;
      if (y[i]! > ymax) ymax = y[i]!;
      if (Math.abs(f) > xmax) xmax = Math.abs(f);
    }

    const W = frame.width, H = frame.height;
    const title = fitText(frame.title ?? `Volcano plot — ${frame.source}`, SIZE.title, W - 2 * PAD, true);

    // Legend (right of the plot): counts per category, then what the dashed lines mark.
    const items = (["up", "down", "ns"] as const).map((c) => ({ label: `${CATEGORY_LABEL[c]} (${counts[c].toLocaleString("en-US")})`, color: VOLCANO_COLORS[c] }));
    const notes = ["Dashed lines:", `|log₂ FC| = ${fmt(opts.threshold_fc)}`, `${pName} = ${fmt(opts.threshold_pvalue)}`];
    const capNote = zeros > 0 ? `${pName} = 0, drawn at the cap` : undefined;
    const legendW = Math.max(17 + Math.max(...items.map((i) => textWidth(i.label, SIZE.legend))), ...notes.map((s) => textWidth(s, SIZE.legend)), capNote ? 17 + textWidth(capNote, SIZE.legend) : 0);
    const legendX = W - PAD - legendW;

    const top = PAD + SIZE.title + 16;
    const bottomAxis = 7 + SIZE.tick + 10 + SIZE.axis + 2;
    const bottom = H - PAD - bottomAxis;
    const ys = scaleLinear().domain([0, ymax * 1.04]).range([bottom, top]).nice();
    const yTicks = ys.ticks(6);
    const left = PAD + leftAxisWidth(yTicks.map((v) => fmt(v)));
    const right = legendX - 18;
    if (right - left < 120 || bottom - top < 80) throw new ChartError(`the picture is too small for a volcano plot (${W}×${H} px); make it wider or taller`);
    const xs = scaleLinear().domain([-xmax * 1.04, xmax * 1.04]).range([left, right]).nice();

    const parts: string[] = [];
    parts.push(text(W / 2, PAD + SIZE.title / 2, title, { size: SIZE.title, weight: "bold", anchor: "middle", baseline: "middle" }));
    parts.push(axis(xs, "bottom", bottom, "log₂ fold change").svg);
    parts.push(axis(ys, "left", left, `−log₁₀ ${pWord} (${pName})`).svg);

    // Threshold lines, under the points.
    const [x0, x1] = xs.domain() as [number, number];
    const dash = `stroke="#555" stroke-width="0.9" stroke-dasharray="5 4"`;
    const lines: string[] = [];
    for (const t of [-opts.threshold_fc, opts.threshold_fc]) if (t > x0 && t < x1) lines.push(`<line x1="${r2(xs(t))}" y1="${r2(top)}" x2="${r2(xs(t))}" y2="${r2(bottom)}" ${dash}/>`);
    const yt = -Math.log10(opts.threshold_pvalue);
    if (yt > 0) lines.push(`<line x1="${r2(left)}" y1="${r2(ys(yt))}" x2="${r2(right)}" y2="${r2(ys(yt))}" ${dash}/>`);
    parts.push(`<g class="thresholds">${lines.join("")}</g>`);

    // Points: not significant first (small, translucent), then down, then up.
    const style: Record<VolcanoCategory, { r: number; attrs: string }> = {
      ns: { r: 1.8, attrs: `fill="${VOLCANO_COLORS.ns}" fill-opacity="0.45"` },
      down: { r: 2.6, attrs: `fill="${VOLCANO_COLORS.down}" fill-opacity="0.8"` },
      up: { r: 2.6, attrs: `fill="${VOLCANO_COLORS.up}" fill-opacity="0.8"` },
    };
    for (const c of ["ns", "down", "up"] as const) {
      const pts: string[] = [];
      for (let i = 0; i < n; i++) {
        if (cat[i] !== c) continue;
        const cx = xs(F[i]!), cy = ys(y[i]!);
        // A p of 0 is drawn at the cap as an upward triangle: its true height is off the scale.
        pts.push(P[i] === 0 ? `<path d="M${r2(cx)} ${r2(cy - 4)}l3.6 6.2h-7.2z"/>` : `<circle cx="${r2(cx)}" cy="${r2(cy)}" r="${style[c].r}"/>`);
      }
      parts.push(`<g class="points-${c}" ${style[c].attrs}>${pts.join("")}</g>`);
    }

    // Labels: the most significant changed genes (smallest p, then largest |log2FC|).
    const changed: number[] = [];
    for (let i = 0; i < n; i++) if (cat[i] !== "ns") changed.push(i);
    changed.sort((a, b) => P[a]! - P[b]! || Math.abs(F[b]!) - Math.abs(F[a]!) || a - b);
    const wanted = changed.slice(0, opts.top_labels);
    // A label must not hide another coloured point: those near a labelled point are obstacles
    // (only near ones, so a table with many changed genes stays fast).
    const near: Box[] = [];
    const reach = { x: 60 + Math.max(0, ...wanted.map((i) => textWidth(genes[i]!, SIZE.label))), y: 60 + SIZE.label * 1.15 };
    const wantedSet = new Set(wanted);
    for (const i of changed) {
      if (wantedSet.has(i)) continue;
      const px = xs(F[i]!), py = ys(y[i]!);
      if (wanted.some((j) => Math.abs(xs(F[j]!) - px) < reach.x && Math.abs(ys(y[j]!) - py) < reach.y)) near.push({ x: px - 2.6, y: py - 2.6, w: 5.2, h: 5.2 });
    }
    const { placed, dropped } = placeLabels(wanted.map((i) => ({ x: xs(F[i]!), y: ys(y[i]!), text: genes[i]! })), { x: left + 1, y: top - 6, w: right - left - 1, h: bottom - top + 5 }, near, 3);
    parts.push(`<g class="labels">${drawLabels(placed)}</g>`);

    const lg = legend(items, legendX, top);
    parts.push(lg.svg);
    let ny = lg.box.y + lg.box.h + 12;
    parts.push(`<line x1="${r2(legendX)}" y1="${r2(ny + SIZE.legend / 2)}" x2="${r2(legendX + 14)}" y2="${r2(ny + SIZE.legend / 2)}" ${dash}/>`);
    parts.push(text(legendX + 17, ny + SIZE.legend / 2, notes[0]!, { size: SIZE.legend, baseline: "middle" }));
    for (const s of notes.slice(1)) { ny += SIZE.legend + 5; parts.push(text(legendX + 17, ny + SIZE.legend / 2, s, { size: SIZE.legend, baseline: "middle", fill: "#444" })); }
    if (capNote) {
      ny += SIZE.legend + 14;
      parts.push(`<path d="M${r2(legendX + 7)} ${r2(ny + SIZE.legend / 2 - 4)}l3.6 6.2h-7.2z" fill="#555"/>`);
      parts.push(text(legendX + 17, ny + SIZE.legend / 2, capNote, { size: SIZE.legend, baseline: "middle" }));
    }

    const svg = svgDocument(W, H, parts.join(""), title);

    const comments = [
      `volcano plot of ${frame.source}`,
      `columns used: log2 fold change "${fcName}", ${adjusted ? "adjusted p-value" : "p-value"} "${pName}", gene ${geneCol !== undefined ? (header[geneCol] === "" ? "the first column (row names, no header)" : `"${header[geneCol]}"`) : shift === 1 ? "the row names (first cell of each row)" : "(none found: rows are named by their row number)"}`,
      `thresholds: up = ${fcName} >= ${opts.threshold_fc} and ${pName} < ${opts.threshold_pvalue}; down = ${fcName} <= -${opts.threshold_fc} and ${pName} < ${opts.threshold_pvalue}`,
      `counts: up ${counts.up}, down ${counts.down}, not significant ${counts.ns}; points drawn ${n}`,
      `skipped ${skipped} of ${rows} rows: ${badFc} with a missing or non-numeric ${fcName} (NA, empty or text), ${badP} with a missing or non-numeric ${pName} (NA, empty, text or outside 0..1)`,
    ];
    if (zeros > 0) comments.push(`${zeros} genes have ${pName} = 0 (below floating-point range); they are drawn at the smallest positive ${pName} in the file, ${Number.isFinite(minPos) ? minPos : "1e-300 (none is positive)"} (neg_log10_p ${+(-Math.log10(floor)).toPrecision(6)})`);
    comments.push(`labelled: the ${wanted.length} most significant changed genes${dropped ? ` (${dropped} of them could not be placed without overlap and are not labelled)` : ""}`);

    const data = {
      header: ["gene", "log2FoldChange", pName, "neg_log10_p", "category"],
      rows: Array.from({ length: n }, (_, i) => [genes[i]!, F[i]!, P[i]!, +y[i]!.toPrecision(8), cat[i]!] as Array<string | number>),
      comments,
    };
    return { svg, width: W, height: H, data };
  }
}
