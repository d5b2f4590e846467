/**
 * A volcano plot's geometry: the title, the legend's texts and width (right of the plot),
 * the plot box and its two scales, and where the labels of the most significant changed
 * genes go without hiding one another or other coloured points.
 */
import { scaleLinear } from "d3-scale";
import { ChartError, type Frame } from "../chart.js";
import { fmt } from "../data/numbers.js";
import type { VolcanoColumns, VolcanoPoints } from "../data/volcano.js";
import type { VolcanoOpts } from "../options.js";
import { BOTTOM_AXIS_HEIGHT, leftAxisWidth } from "./axes.js";
import { placeLabels, type Box, type PlacedLabel } from "./labels.js";
import { fitText, SIZE, textWidth } from "./text.js";

export const PAD = 14;
const CATEGORY_LABEL = { up: "Up", down: "Down", ns: "Not significant" } as const;
export const CATEGORIES = ["up", "down", "ns"] as const;

export interface VolcanoLayout {
  W: number;
  H: number;
  title: string;
  /** One legend label per category (CATEGORIES order), with its count. */
  legendLabels: string[];
  /** What the dashed lines mark, first line "Dashed lines:". */
  notes: string[];
  /** Said under the notes when some p is 0 (drawn at the cap). */
  capNote: string | undefined;
  legendX: number;
  top: number;
  bottom: number;
  left: number;
  right: number;
  xs: ReturnType<typeof scaleLinear<number, number>>;
  ys: ReturnType<typeof scaleLinear<number, number>>;
}

/** The title, the legend right of the plot, the plot box and scales; too small a frame is the user's mistake. */
export function volcanoLayout(pts: VolcanoPoints, cols: VolcanoColumns, opts: VolcanoOpts, frame: Frame): VolcanoLayout {
  const W = frame.width, H = frame.height;
  const title = fitText(frame.title ?? `Volcano plot — ${frame.source}`, SIZE.title, W - 2 * PAD, true);
  // Legend (right of the plot): counts per category, then what the dashed lines mark.
  const legendLabels = CATEGORIES.map((c) => `${CATEGORY_LABEL[c]} (${pts.counts[c].toLocaleString("en-US")})`);
  const notes = ["Dashed lines:", `|log₂ FC| = ${fmt(opts.threshold_fc)}`, `${cols.pName} = ${fmt(opts.threshold_pvalue)}`];
  const capNote = pts.floor.zeros > 0 ? `${cols.pName} = 0, drawn at the cap` : undefined;
  const legendW = Math.max(17 + Math.max(...legendLabels.map((l) => textWidth(l, SIZE.legend))), ...notes.map((s) => textWidth(s, SIZE.legend)), capNote ? 17 + textWidth(capNote, SIZE.legend) : 0);
  const legendX = W - PAD - legendW;

  const top = PAD + SIZE.title + 16;
  const bottom = H - PAD - BOTTOM_AXIS_HEIGHT;
  const ys = scaleLinear().domain([0, pts.ymax * 1.04]).range([bottom, top]).nice();
  const yTicks = ys.ticks(6);
  const left = PAD + leftAxisWidth(yTicks.map((v) => fmt(v)));
  const right = legendX - 18;
  if (right - left < 120 || bottom - top < 80) throw new ChartError(`the picture is too small for a volcano plot (${W}×${H} px); make it wider or taller`);
  const xs = scaleLinear().domain([-pts.xmax * 1.04, pts.xmax * 1.04]).range([left, right]).nice();
  return { W, H, title, legendLabels, notes, capNote, legendX, top, bottom, left, right, xs, ys };
}

/**
 * Labels for the genes `wanted` (most significant first). A label must not hide another
 * coloured point: those near a labelled point are obstacles (only near ones, so a table with
 * many changed genes stays fast).
 */
export function volcanoLabels(pts: VolcanoPoints, genes: readonly string[], changed: readonly number[], wanted: readonly number[], lay: VolcanoLayout): { placed: PlacedLabel[]; dropped: number } {
  const { F, y } = pts;
  const { xs, ys, left, right, top, bottom } = lay;
  const near: Box[] = [];
  const reach = { x: 60 + Math.max(0, ...wanted.map((i) => textWidth(genes[i]!, SIZE.label))), y: 60 + SIZE.label * 1.15 };
  const wantedSet = new Set(wanted);
  for (const i of changed) {
    if (wantedSet.has(i)) continue;
    const px = xs(F[i]!), py = ys(y[i]!);
    if (wanted.some((j) => Math.abs(xs(F[j]!) - px) < reach.x && Math.abs(ys(y[j]!) - py) < reach.y)) near.push({ x: px - 2.6, y: py - 2.6, w: 5.2, h: 5.2 });
  }
  return placeLabels(wanted.map((i) => ({ x: xs(F[i]!), y: ys(y[i]!), text: genes[i]! })), { x: left + 1, y: top - 6, w: right - left - 1, h: bottom - top + 5 }, near, 3);
}
