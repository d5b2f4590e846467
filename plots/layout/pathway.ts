/**
 * A pathway map's geometry: the title and subtitle set as large as fits, the legend's entries
 * packed into centred lines at the bottom, and the GPML board (every node, shape and edge
 * point, with a small margin) scaled uniformly into the area left, centred. A node's box in
 * the picture follows from the board's scale.
 */
import { ChartError, type Frame } from "../chart.js";
import type { PathwayMatch } from "../data/pathway-match.js";
import type { Pathway, PathwayNode } from "../data/pathways.js";
import { shrinkText, SIZE, textWidth } from "./text.js";

/** The picture's margin. */
export const M = 12;

/** A legend entry: a box in one of the map's styles, or the fold-change colour bar. */
export interface LegendEntry { kind: "box" | "bar"; style?: "missing" | "neutral" | "highlight" | "metabolite"; label: string; w: number }

export interface PathwayLayout {
  W: number;
  H: number;
  title: { text: string; size: number };
  subtitle: { text: string; size: number };
  legendLines: LegendEntry[][];
  legendH: number;
  /** Board units → px: scale, and the position of a board point. */
  s: number;
  X: (x: number) => number;
  Y: (y: number) => number;
}

/** A legend line's height: taller when it holds the colour bar. */
export const legendLineHeight = (l: readonly LegendEntry[]) => (l.some((i) => i.kind === "bar") ? 44 : 20);

export function pathwayLayout(p: Pathway, m: PathwayMatch, titleText: string, frame: Frame): PathwayLayout {
  const W = frame.width, H = frame.height;
  const title = shrinkText(titleText, W - 2 * M, SIZE.title, 11, true);
  const sub = `WikiPathways ${p.revision ?? p.id} · ${m.matchedGenes.length} of ${m.pGenes.size} genes on the pathway are in the file`;
  const subtitle = shrinkText(sub, W - 2 * M, SIZE.tick, 8);
  const top = M + title.size + 6 + subtitle.size + 8;
  // legend items (laid out before the map so the map gets the rest)
  const legendLines = packLegend(legendEntries(m), W);
  const legendH = legendLines.reduce((s, l) => s + legendLineHeight(l), 0) + 6;
  // the map area and the board's extent
  const area = { x: M, y: top, w: W - 2 * M, h: H - top - legendH - M };
  if (area.h < 60) throw new ChartError(`the image is too small for this pathway; give a height of at least ${Math.ceil(top + legendH + M + 60)}`);
  const [bx0, by0, bx1, by1] = boardExtent(p);
  const s = Math.min(area.w / (bx1 - bx0), area.h / (by1 - by0));
  const ox = area.x + (area.w - (bx1 - bx0) * s) / 2, oy = area.y + (area.h - (by1 - by0) * s) / 2;
  const X = (x: number) => ox + (x - bx0) * s, Y = (y: number) => oy + (y - by0) * s;
  return { W, H, title, subtitle, legendLines, legendH, s, X, Y };
}

/** What the legend explains, in order: boxes not in the file, in it without a fold change, highlighted, metabolites; the colour bar. */
function legendEntries(m: PathwayMatch): LegendEntry[] {
  const items: LegendEntry[] = [];
  const box = (label: string, style: LegendEntry["style"]) => items.push({ kind: "box", style, label, w: 26 + 6 + textWidth(label, SIZE.legend) });
  box("not in the file", "missing");
  if (m.hasNeutral) box(m.colorFc ? "in the file, no fold change" : "in the file", "neutral");
  if (m.highlightKeys.size) box("highlighted", "highlight");
  if (m.hasMetab) box("metabolite", "metabolite");
  if (m.anyFc) items.push({ kind: "bar", label: "log2 fold change", w: Math.max(150, textWidth("log2 fold change", SIZE.legend) + 20) });
  return items;
}

/** Entries into lines no wider than the picture's margins allow, 18 px apart. */
function packLegend(items: readonly LegendEntry[], W: number): LegendEntry[][] {
  const lines: LegendEntry[][] = [[]];
  let lineW = 0;
  for (const it of items) {
    if (lineW > 0 && lineW + 18 + it.w > W - 2 * M) { lines.push([]); lineW = 0; }
    lines[lines.length - 1]!.push(it);
    lineW += (lineW > 0 ? 18 : 0) + it.w;
  }
  return lines;
}

/** The board's extent: every drawn node, shape and edge point, 4 units either side (the GPML size when empty). */
function boardExtent(p: Pathway): [number, number, number, number] {
  let bx0 = Infinity, by0 = Infinity, bx1 = -Infinity, by1 = -Infinity;
  const ext = (x0: number, y0: number, x1: number, y1: number) => { bx0 = Math.min(bx0, x0); by0 = Math.min(by0, y0); bx1 = Math.max(bx1, x1); by1 = Math.max(by1, y1); };
  for (const n of p.nodes) if (n.w > 0 && n.h > 0 && (n.type !== "Label" || n.label)) ext(n.x - n.w / 2, n.y - n.h / 2, n.x + n.w / 2, n.y + n.h / 2);
  for (const s of p.shapes ?? []) if (s.w > 0 && s.h > 0) ext(s.x - s.w / 2, s.y - s.h / 2, s.x + s.w / 2, s.y + s.h / 2);
  for (const e of p.edges) for (const [x, y] of e.points) ext(x, y, x, y);
  if (!Number.isFinite(bx0)) { bx0 = 0; by0 = 0; bx1 = p.width; by1 = p.height; }
  return [bx0 - 4, by0 - 4, bx1 + 4, by1 + 4];
}

/** A node's box in the picture, its centre, and the largest font its label may take. */
export function nodeBox(n: PathwayNode, lay: PathwayLayout): { x: number; y: number; w: number; h: number; cx: number; cy: number; maxFont: number } {
  const x = lay.X(n.x - n.w / 2), y = lay.Y(n.y - n.h / 2), w = n.w * lay.s, h = n.h * lay.s;
  return { x, y, w, h, cx: x + w / 2, cy: y + h / 2, maxFont: Math.min(12, Math.max(6, h * 0.62)) };
}
