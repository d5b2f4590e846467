/**
 * Placed labels drawn (layout/labels.ts placed them): leader lines under the text, the text
 * with a white halo so it reads over points and grid lines.
 */
import type { PlacedLabel } from "../layout/labels.js";
import { SIZE } from "../layout/text.js";
import { esc, r2 } from "./svg.js";

/** SVG for placed labels (leader lines under the text, text with a white halo). */
export function drawLabels(labels: readonly PlacedLabel[], size: number = SIZE.label): string {
  return labels.map((l) => (l.leader ? `<line x1="${r2(l.leader.x1)}" y1="${r2(l.leader.y1)}" x2="${r2(l.leader.x2)}" y2="${r2(l.leader.y2)}" stroke="#555" stroke-width="0.7"/>` : "")
    + `<text x="${r2(l.x)}" y="${r2(l.y)}" font-size="${size}" text-anchor="${l.anchor}" dominant-baseline="central" stroke="#fff" stroke-width="3" stroke-linejoin="round" paint-order="stroke">${esc(l.text)}</text>`).join("");
}
