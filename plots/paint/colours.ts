/**
 * The colours charts share: the Okabe–Ito palette for categories (distinguishable with the
 * common colour-vision deficiencies), the grey of "not significant", and the colour maps a
 * value is drawn with (heatmaps, colour bars).
 */
import { scaleLinear } from "d3-scale";
import { interpolateMagma, interpolateRdBu, interpolateViridis } from "d3-scale-chromatic";

/** Okabe–Ito: eight colours distinguishable with the common colour-vision deficiencies. */
export const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"] as const;
export const GREY = "#9a9a9a";

export const COLORMAPS = ["viridis", "magma", "RdBu", "coolwarm"] as const;
export type Colormap = (typeof COLORMAPS)[number];

const coolwarmStops = ["#3b4cc0", "#6788ee", "#9abbff", "#c9d7f0", "#edd1c2", "#f7a889", "#e26952", "#b40426"];
const coolwarm = scaleLinear<string>().domain(coolwarmStops.map((_, i) => i / (coolwarmStops.length - 1))).range(coolwarmStops).clamp(true);

/** t in [0, 1] → colour. RdBu runs blue (low) to red (high), as heatmaps of z-scores read. */
export function colormap(name: Colormap): (t: number) => string {
  switch (name) {
    case "viridis": return interpolateViridis;
    case "magma": return interpolateMagma;
    case "RdBu": return (t) => interpolateRdBu(1 - t);
    case "coolwarm": return (t) => coolwarm(t);
  }
}
