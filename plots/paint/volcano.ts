/**
 * A volcano plot drawn: genes up, down and not significant in vermillion, blue and grey
 * (Okabe–Ito, colour-blind safe; grey points small, translucent and drawn first), the dashed
 * threshold lines under them, a p of 0 as a triangle at the cap, the labels, and the legend
 * with the counts and what the dashed lines mark.
 */
import type { VolcanoCategory, VolcanoPoints } from "../data/volcano.js";
import type { PlacedLabel } from "../layout/labels.js";
import { SIZE } from "../layout/text.js";
import { CATEGORIES, PAD, type VolcanoLayout } from "../layout/volcano.js";
import type { VolcanoOpts } from "../options.js";
import { axis } from "./axis.js";
import { GREY, PALETTE } from "./colours.js";
import { drawLabels } from "./labels.js";
import { legend } from "./legend.js";
import { r2, text } from "./svg.js";

export const VOLCANO_COLORS = { up: PALETTE[3], down: PALETTE[0], ns: GREY } as const;

const DASH = `stroke="#555" stroke-width="0.9" stroke-dasharray="5 4"`;

/** The picture's body: title, axes, threshold lines, points, labels and legend. */
export function paintVolcano(pts: VolcanoPoints, lay: VolcanoLayout, placed: readonly PlacedLabel[], opts: VolcanoOpts, yTitle: string): string {
  const parts: string[] = [];
  parts.push(text(lay.W / 2, PAD + SIZE.title / 2, lay.title, { size: SIZE.title, weight: "bold", anchor: "middle", baseline: "middle" }));
  parts.push(axis(lay.xs, "bottom", lay.bottom, "log₂ fold change").svg);
  parts.push(axis(lay.ys, "left", lay.left, yTitle).svg);
  parts.push(thresholds(lay, opts));
  parts.push(...points(pts, lay));
  parts.push(`<g class="labels">${drawLabels(placed)}</g>`);
  parts.push(...legendParts(lay));
  return parts.join("");
}

/** Threshold lines, under the points. */
function thresholds(lay: VolcanoLayout, opts: VolcanoOpts): string {
  const { xs, ys, top, bottom, left, right } = lay;
  const [x0, x1] = xs.domain() as [number, number];
  const lines: string[] = [];
  for (const t of [-opts.threshold_fc, opts.threshold_fc]) if (t > x0 && t < x1) lines.push(`<line x1="${r2(xs(t))}" y1="${r2(top)}" x2="${r2(xs(t))}" y2="${r2(bottom)}" ${DASH}/>`);
  const yt = -Math.log10(opts.threshold_pvalue);
  if (yt > 0) lines.push(`<line x1="${r2(left)}" y1="${r2(ys(yt))}" x2="${r2(right)}" y2="${r2(ys(yt))}" ${DASH}/>`);
  return `<g class="thresholds">${lines.join("")}</g>`;
}

/** Points: not significant first (small, translucent), then down, then up; one group each. */
function points(pts: VolcanoPoints, lay: VolcanoLayout): string[] {
  const { n, cat, F, P, y } = pts;
  const style: Record<VolcanoCategory, { r: number; attrs: string }> = {
    ns: { r: 1.8, attrs: `fill="${VOLCANO_COLORS.ns}" fill-opacity="0.45"` },
    down: { r: 2.6, attrs: `fill="${VOLCANO_COLORS.down}" fill-opacity="0.8"` },
    up: { r: 2.6, attrs: `fill="${VOLCANO_COLORS.up}" fill-opacity="0.8"` },
  };
  const groups: string[] = [];
  for (const c of ["ns", "down", "up"] as const) {
    const dots: string[] = [];
    for (let i = 0; i < n; i++) {
      if (cat[i] !== c) continue;
      const cx = lay.xs(F[i]!), cy = lay.ys(y[i]!);
      // A p of 0 is drawn at the cap as an upward triangle: its true height is off the scale.
      dots.push(P[i] === 0 ? `<path d="M${r2(cx)} ${r2(cy - 4)}l3.6 6.2h-7.2z"/>` : `<circle cx="${r2(cx)}" cy="${r2(cy)}" r="${style[c].r}"/>`);
    }
    groups.push(`<g class="points-${c}" ${style[c].attrs}>${dots.join("")}</g>`);
  }
  return groups;
}

/** The legend, then the dashed-line notes under it, then the cap note. */
function legendParts(lay: VolcanoLayout): string[] {
  const { legendX, notes, capNote } = lay;
  const parts: string[] = [];
  const lg = legend(CATEGORIES.map((c, i) => ({ label: lay.legendLabels[i]!, color: VOLCANO_COLORS[c] })), legendX, lay.top);
  parts.push(lg.svg);
  let ny = lg.box.y + lg.box.h + 12;
  parts.push(`<line x1="${r2(legendX)}" y1="${r2(ny + SIZE.legend / 2)}" x2="${r2(legendX + 14)}" y2="${r2(ny + SIZE.legend / 2)}" ${DASH}/>`);
  parts.push(text(legendX + 17, ny + SIZE.legend / 2, notes[0]!, { size: SIZE.legend, baseline: "middle" }));
  for (const s of notes.slice(1)) { ny += SIZE.legend + 5; parts.push(text(legendX + 17, ny + SIZE.legend / 2, s, { size: SIZE.legend, baseline: "middle", fill: "#444" })); }
  if (capNote) {
    ny += SIZE.legend + 14;
    parts.push(`<path d="M${r2(legendX + 7)} ${r2(ny + SIZE.legend / 2 - 4)}l3.6 6.2h-7.2z" fill="#555"/>`);
    parts.push(text(legendX + 17, ny + SIZE.legend / 2, capNote, { size: SIZE.legend, baseline: "middle" }));
  }
  return parts;
}
