/**
 * Manhattan plot (plot type `manhattan_plot`): −log10 p of every SNP of a GWAS
 * summary-statistics file along the genome, rows streamed one at a time into typed arrays.
 * Chromosomes run in natural order (1…22, X, Y, MT, then other contigs sorted), in two
 * alternating colours, placed end to end with a small gap and labelled by name — or, for one
 * chromosome or a few, on position axes in Mb; the genome-wide significance line is solid, the
 * suggestive line dashed; the best SNP of each genome-wide significant locus is labelled.
 * Points not past the suggestive line are thinned to one per plot cell; the TSV lists exactly
 * the points drawn. This module composes data/manhattan.ts → layout/manhattan.ts →
 * paint/manhattan.ts.
 */
import type { Chart, Frame, TableSink } from "./chart.js";
import { chromosomes, LOCUS_BP, lociOf, snpColumns, SnpTable, type Chromosomes } from "./data/manhattan.js";
import { floorText, pFloor, type PFloor } from "./data/pvalues.js";
import { genomeOffsets, genomeTicks, lociLabels, manhattanFrame, thin, THIN_BAND_PX, thresholdTexts, xLayout, type Thinned, type XLayout } from "./layout/manhattan.js";
import type { ManhattanOpts } from "./options.js";
import { axis } from "./paint/axis.js";
import { manhattanLabels, manhattanPoints, manhattanThresholds, manhattanTitle, manhattanXAxis } from "./paint/manhattan.js";
import { svgDocument } from "./paint/svg.js";

export function manhattanChart(header: readonly string[], opts: ManhattanOpts, frame: Frame): TableSink {
  const table = new SnpTable(snpColumns(header, opts));
  return {
    row: (cells) => table.row(cells),
    finish: () => { table.finish(); return drawManhattan(table, opts, frame); },
  };
}

function drawManhattan(t: SnpTable, opts: ManhattanOpts, frame: Frame): Chart {
  const floor = pFloor(t.p.a, t.p.n);
  const ch = chromosomes(t);
  const genome = genomeOffsets(ch);
  const fr = manhattanFrame(t, floor.floor, genome.total, opts, frame);
  const x = xLayout({ order: ch.order, names: t.chromNames, lo: ch.lo, hi: ch.hi, left: fr.left, right: fr.right, W: fr.W }, genome, fr.xs);
  const th = thin(t, floor.floor, x, fr, opts);
  const ids = t.idsOf(th.drawn);
  const label = (i: number) => { const s = ids.get(i)?.trim(); return s ? s : `${t.chromNames[t.chr.a[i]!]}:${t.pos.a[i]}`; };
  const loci = lociOf(t, th.drawn, opts.significance_line);
  const wanted = loci.leads.slice(0, opts.top_labels);
  const { placed, dropped } = lociLabels(t, wanted, label, x, fr, floor.floor);

  const parts = [
    manhattanTitle(fr),
    manhattanXAxis(fr, x, x.mode === "genome" ? genomeTicks(t.chromNames, ch, genome, fr.xs) : { centres: [], tickLabels: [] }),
    axis(fr.ys, "left", fr.left, "−log₁₀ p", { tickValues: fr.yTicks }).svg,
    manhattanPoints(t, th, genome, fr, floor.floor),
    manhattanThresholds(fr, thresholdTexts(fr)),
    manhattanLabels(placed),
  ];
  const svg = svgDocument(fr.W, fr.H, parts.join(""), fr.title);
  const comments = manhattanComments(t, ch, x, th, floor, opts, frame);
  comments.push(`genome-wide significant: ${loci.sig.length} SNPs in ${loci.leads.length} loci (best SNP per chromosome within ${LOCUS_BP / 1000} kb); labelled ${placed.length}${loci.leads.length > wanted.length ? ` (top_labels = ${opts.top_labels})` : ""}${dropped ? `; ${dropped} could not be placed without overlap` : ""}`);
  return { svg, width: fr.W, height: fr.H, data: { header: ["snp", "chr", "pos", "p", "neg_log10_p"], rows: manhattanRows(t, th, label, floor.floor), comments } };
}

/** One TSV row per point drawn, in drawing (x) order. */
function manhattanRows(t: SnpTable, th: Thinned, label: (i: number) => string, floor: number): Array<Array<string | number>> {
  const C = t.chr.a, POS = t.pos.a, P = t.p.a;
  const m = th.drawn.length;
  const rowsOut: Array<Array<string | number>> = new Array(m);
  for (let j = 0; j < m; j++) {
    const i = th.drawn[j]!, v = P[i]!;
    rowsOut[j] = [label(i), t.chromNames[C[i]!]!, POS[i]!, v, +(-Math.log10(v === 0 ? floor : v) + 0).toPrecision(8)];
  }
  return rowsOut;
}

/** The TSV's comments: columns, chromosome order, the x axis, lines, thinning, rows skipped, p-values of 0. */
function manhattanComments(t: SnpTable, ch: Chromosomes, x: XLayout, th: Thinned, floor: PFloor, opts: ManhattanOpts, frame: Frame): string[] {
  const { names } = t.cols;
  const n = t.p.n, m = th.drawn.length, keepP = th.keepP;
  const comments = [
    `manhattan plot of ${frame.source}`,
    `columns used: chromosome "${names.chr}", position "${names.pos}", p-value "${names.p}", SNP ${names.snp !== undefined ? `"${names.snp}"` : "(none found: SNPs are named chr:pos)"}`,
    `chromosomes in plot order: ${ch.order.map((c) => t.chromNames[c]).join(", ")} (names normalised: a chr prefix dropped, M written MT)`,
    x.comment,
    `lines: genome-wide significance p = ${opts.significance_line} (solid)${opts.suggestive_line === false ? "; no suggestive line" : `; suggestive p = ${opts.suggestive_line} (dashed)`}`,
    `points: ${n} SNPs read, ${m} drawn, ${n - m} thinned away; thinning rule: a SNP with p >= ${keepP} is drawn only if it has the smallest p among the SNPs falling in the same plot cell (1 px column x ${THIN_BAND_PX} px row band); no SNP with p < ${keepP} is thinned`,
    `skipped ${t.skipped} of ${t.rows} rows: ${t.badChr} with no chromosome, ${t.badPos} with a missing or non-numeric position, ${t.badP} with a missing or non-numeric p-value (NA, empty, text or outside 0..1)`,
  ];
  if (floor.zeros > 0) comments.push(`${floor.zeros} SNPs have p = 0 (below floating-point range); they are drawn at the smallest positive p in the file, ${floorText(floor)}`);
  return comments;
}
