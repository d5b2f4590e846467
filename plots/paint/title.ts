/**
 * The title block of the PCA and the heatmap drawn, centred at the top (layout/title.ts
 * measured it).
 */
import type { TitleLines } from "../layout/title.js";
import { r2, text } from "./svg.js";

export function paintTitle(lines: TitleLines, W: number): string {
  const t = lines.title;
  const parts = [text(W / 2, 14 + t.size / 2, t.text, { size: r2(t.size), anchor: "middle", weight: "bold", baseline: "middle" })];
  const st = lines.subtitle;
  if (st) parts.push(text(W / 2, 14 + t.size + 5 + st.size / 2, st.text, { size: r2(st.size), anchor: "middle", fill: "#444", baseline: "middle" }));
  return `<g class="title">${parts.join("")}</g>`;
}
