/**
 * A Manhattan plot drawn: chromosomes in two alternating colours (points as zero-length round
 * strokes, one path per colour, so a million points stay a small SVG), the x axis as the
 * layout chose it (chromosome names, or position ticks per panel), the significance line solid
 * and the suggestive line dashed with their names in the margin, and the lead SNPs' labels.
 */
import type { SnpTable } from "../data/manhattan.js";
import { negLog10 } from "../data/pvalues.js";
import type { PlacedLabel } from "../layout/labels.js";
import { PAD, type GenomeOffsets, type ManhattanFrame, type MarginText, type Thinned, type XLayout } from "../layout/manhattan.js";
import { SIZE } from "../layout/text.js";
import { axis } from "./axis.js";
import { PALETTE } from "./colours.js";
import { drawLabels } from "./labels.js";
import { r2, text } from "./svg.js";

/** Alternating chromosome colours (Okabe–Ito blue and a mid grey). */
export const MANHATTAN_COLORS = [PALETTE[0], "#8c8c8c"] as const;
const SIGNIFICANCE_COLOR = PALETTE[3];
const POINT_R = 1.7;

/** The title. */
export function manhattanTitle(fr: ManhattanFrame): string {
  return text(fr.W / 2, PAD + SIZE.title / 2, fr.title, { size: SIZE.title, weight: "bold", anchor: "middle", baseline: "middle" });
}

/** The x axis: chromosome names under the genome (its line drawn across the plot), or one position axis per panel. */
export function manhattanXAxis(fr: ManhattanFrame, x: XLayout, genomeTicks: { centres: number[]; tickLabels: string[] }): string {
  const { left, right, bottom } = fr;
  if (x.mode === "genome") {
    const xAxis = axis(fr.xs, "bottom", bottom, "Chromosome", { tickValues: genomeTicks.centres, tickLabels: genomeTicks.tickLabels });
    return xAxis.svg.replace(/<line x1="[^"]+" y1="[^"]+" x2="[^"]+" y2="[^"]+" stroke="#333" stroke-width="1"\/>/, `<line x1="${r2(left)}" y1="${r2(bottom)}" x2="${r2(right)}" y2="${r2(bottom)}" stroke="#333" stroke-width="1"/>`);
  }
  // One position axis per panel (a single one for one chromosome), in Mb.
  return x.panels.map((p) => axis(p.scale, "bottom", bottom, p.title, { tickValues: p.ticks, tickLabels: p.tickLabels }).svg).join("");
}

/** Points, one path per colour: zero-length segments with round caps are dots. */
export function manhattanPoints(t: SnpTable, th: Thinned, genome: GenomeOffsets, fr: ManhattanFrame, floor: number): string {
  const C = t.chr.a, P = t.p.a;
  const paths: [string[], string[]] = [[], []];
  const r1 = (v: number) => Math.round(v * 10) / 10;
  for (let j = 0; j < th.drawn.length; j++) {
    const i = th.drawn[j]!, v = P[i]!;
    paths[genome.parity[C[i]!]! as 0 | 1].push(`M${r1(th.x[j]!)} ${r1(fr.ys(negLog10(v, floor)))}h0`);
  }
  const out: string[] = [];
  for (const q of [0, 1] as const) if (paths[q].length) out.push(`<path class="points-${q}" d="${paths[q].join("")}" stroke="${MANHATTAN_COLORS[q]}" stroke-width="${2 * POINT_R}" stroke-linecap="round" fill="none"/>`);
  return out.join("");
}

/** The suggestive (dashed) and significance (solid) lines, then their names in the right margin. */
export function manhattanThresholds(fr: ManhattanFrame, texts: readonly MarginText[]): string {
  const { left, right, ys } = fr;
  const parts: string[] = [];
  if (fr.sugY !== undefined) parts.push(`<line x1="${r2(left)}" y1="${r2(ys(fr.sugY))}" x2="${r2(right)}" y2="${r2(ys(fr.sugY))}" stroke="#666" stroke-width="1" stroke-dasharray="5 4"/>`);
  parts.push(`<line x1="${r2(left)}" y1="${r2(ys(fr.sigY))}" x2="${r2(right)}" y2="${r2(ys(fr.sigY))}" stroke="${SIGNIFICANCE_COLOR}" stroke-width="1.2"/>`);
  for (const m of texts) parts.push(text(right + 5, m.y, m.text, { size: SIZE.label, fill: m.sig ? SIGNIFICANCE_COLOR : "#444", baseline: "middle" }));
  return parts.join("");
}

/** The lead SNPs' labels. */
export const manhattanLabels = (placed: readonly PlacedLabel[]) => `<g class="labels">${drawLabels(placed)}</g>`;
