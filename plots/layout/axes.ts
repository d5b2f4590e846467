/**
 * Axis geometry: how much room an axis takes (for margins) and which ticks an axis gets so
 * that their labels stay apart and inside the picture. Drawing an axis is paint/axis.ts.
 */
import { SIZE, textWidth } from "./text.js";

/** Room a left axis needs for these tick labels and its title. */
export const leftAxisWidth = (labels: readonly string[]) => 7 + Math.max(0, ...labels.map((l) => textWidth(l, SIZE.tick))) + 8 + SIZE.axis + 4;

/** Room a bottom axis takes below its line: ticks, tick labels and the title. */
export const BOTTOM_AXIS_HEIGHT = 7 + SIZE.tick + 10 + SIZE.axis + 2;
