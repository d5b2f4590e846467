/**
 * A PCA plot's geometry: the legend's width (right of the plot), the plot box and its two
 * scales (the scores' range with 8 % either side), and the sample labels — the points
 * farthest from the centre first — with any whose leader line would cross others left out.
 */
import { scaleLinear } from "d3-scale";
import { ChartError, type Frame } from "../chart.js";
import { fmt } from "../data/numbers.js";
import type { PcaResult, SampleGroups } from "../data/pca.js";
import type { PcaOpts } from "../options.js";
import { BOTTOM_AXIS_HEIGHT, leftAxisWidth } from "./axes.js";
import { placeLabels, untangle, type Box, type LabelRequest, type PlacedLabel } from "./labels.js";
import { SIZE, textWidth } from "./text.js";

/** A point's radius. */
export const POINT_R = 5.5;

type Linear = ReturnType<typeof scaleLinear<number, number>>;
export interface PcaLayout { W: number; H: number; plot: Box; x: Linear; y: Linear; xLabel: string; yLabel: string; legendRow: number }

/** The plot box under a title block `titleHeight` high, the legend's room on the right, and the scales. */
export function pcaLayout(r: PcaResult, g: SampleGroups | undefined, opts: PcaOpts, frame: Frame, titleHeight: number): PcaLayout {
  const W = frame.width, H = frame.height;
  const top0 = titleHeight + 14;
  const legendRow = SIZE.legend + 7;
  const legendW = g ? 24 + Math.max(textWidth(g.title, SIZE.legend, true), ...g.names.map((n) => 20 + textWidth(n, SIZE.legend))) : 0;
  const [ca, cb] = opts.components;
  const pct = (c: number) => `${(100 * r.explained[c - 1]!).toFixed(1)}%`;
  const xLabel = `PC${ca} (${pct(ca)} variance)`, yLabel = `PC${cb} (${pct(cb)} variance)`;
  const pad = (lo: number, hi: number) => { const span = hi - lo || Math.abs(hi) || 1; return [lo - span * 0.08, hi + span * 0.08] as const; };
  const xDom = pad(Math.min(...r.xs), Math.max(...r.xs)), yDom = pad(Math.min(...r.ys), Math.max(...r.ys));
  const yScale0 = scaleLinear().domain(yDom).nice();
  const yTicks = yScale0.ticks(6).map((v) => fmt(v));
  const left = 10 + leftAxisWidth(yTicks);
  const notesRoom = 16;
  const plot: Box = { x: left, y: top0, w: W - left - (g ? legendW + 12 : 18), h: H - top0 - BOTTOM_AXIS_HEIGHT - 10 - notesRoom };
  if (plot.w < 120 || plot.h < 100) throw new ChartError(`the figure is too small (${W} × ${H} px) for a PCA plot with this legend; give a larger width or height`);
  const x = scaleLinear().domain(xDom).nice().range([plot.x, plot.x + plot.w]);
  const y = scaleLinear().domain(yDom).nice().range([plot.y + plot.h, plot.y]);
  return { W, H, plot, x, y, xLabel, yLabel, legendRow };
}

/** Sample labels: the points farthest from the centre first (they are the ones people ask about). */
export function sampleLabels(r: PcaResult, lay: PcaLayout): { kept: PlacedLabel[]; dropped: number } {
  const { x, y, plot } = lay;
  const cx = x(0), cy = y(0);
  const reqs: LabelRequest[] = r.samples.map((s, i) => ({ x: x(r.xs[i]!), y: y(r.ys[i]!), text: s }))
    .sort((a, b) => Math.hypot(b.x - cx, b.y - cy) - Math.hypot(a.x - cx, a.y - cy));
  const placed = placeLabels(reqs, { x: plot.x + 2, y: plot.y + 2, w: plot.w - 4, h: plot.h - 4 }, [], POINT_R);
  const kept = untangle(placed.placed);
  return { kept, dropped: placed.dropped + placed.placed.length - kept.length };
}
