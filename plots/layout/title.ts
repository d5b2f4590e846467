/**
 * The title block of the PCA and the heatmap, measured: the title (the user's, or the chart's
 * default naming the file) set as large as fits the width, and under a default title a line
 * saying what is drawn. Drawing it is paint/title.ts.
 */
import { fitLine, SIZE } from "./text.js";

export interface TitleLines {
  title: { text: string; size: number };
  subtitle?: { text: string; size: number };
  /** Where the block ends. The tallest it can be does not depend on `W`, so a layout may reserve it before `W` is final. */
  height: number;
}

export function titleLines(title: string, subtitle: string | undefined, W: number): TitleLines {
  const t = fitLine(title, W - 24, SIZE.title, 11, true);
  let h = 14 + t.size;
  if (!subtitle) return { title: t, height: h };
  const st = fitLine(subtitle, W - 24, SIZE.tick, 8);
  h += 5 + st.size;
  return { title: t, subtitle: st, height: h };
}
