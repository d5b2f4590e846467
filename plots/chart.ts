/**
 * The contract between a renderer and its caller (the render worker, tests, benches): what a
 * chart is (an SVG document plus exactly the data drawn), the TSV that data is written as, the
 * frame a chart is drawn in, the sink table-driven charts take their rows through, and
 * ChartError, the error a renderer throws for a problem in the user's data or options. Every
 * other module of plots/ is one step of a renderer: data/ → layout/ → paint/.
 */
import { OperonError } from "../core/errors.js";

/**
 * A problem in the user's data or options, worded for a scientist (it becomes the job's
 * `error`): the taxonomy's `validation_failed` (core/errors.ts).
 */
export class ChartError extends OperonError {
  constructor(message: string) { super("validation_failed", message); this.name = "ChartError"; }
}

/** The data a chart drew, written next to the image as TSV. */
export interface ChartData {
  header: string[];
  rows: Array<Array<string | number>>;
  /** Lines written as `# ...` before the header: thresholds, skipped cells, sources. */
  comments: string[];
}

export interface Chart {
  svg: string;
  width: number;
  height: number;
  data: ChartData;
}

/** The TSV written next to the image: `# ` comment lines, the header, the rows drawn. */
export function toTsv(d: ChartData): string {
  const cell = (v: string | number) => (typeof v === "number" ? (Number.isInteger(v) ? String(v) : String(+v.toPrecision(8))) : v.replace(/[\t\n\r]/g, " "));
  return d.comments.map((c) => `# ${c.replace(/\n/g, " ")}\n`).join("") + d.header.join("\t") + "\n" + d.rows.map((r) => r.map(cell).join("\t")).join("\n") + (d.rows.length ? "\n" : "");
}

/** The frame a renderer draws in: SVG size in px, the title (the user's or a default), the file's name. */
export interface Frame { width: number; height: number; title?: string; source: string }

/**
 * Table-driven charts take rows one at a time (the file is streamed; a renderer keeps only
 * what it draws, in typed arrays where it can) and build the chart at the end.
 */
export interface TableSink {
  row(cells: readonly string[]): void;
  finish(): Chart;
}
