/**
 * A PCA's data: log2(CPM + 1) of the most variable genes (genes with a gap left out),
 * centred, decomposed by SVD (ml-pca), the samples' scores on the two components asked for
 * and every component's explained variance; and each sample's group for the colours, from a
 * `color_by` mapping or a sample-sheet column.
 */
import { PCA } from "ml-pca";
import { isMissing } from "../../core/delimited.js";
import { ChartError } from "../chart.js";
import type { PcaOpts } from "../options.js";
import { log2Cpm, mostVariable, type CountMatrix, type LogCpm } from "./count-matrix.js";

export interface PcaResult {
  lc: LogCpm;
  /** The samples kept (those with counts). */
  samples: string[];
  /** The genes used (indices into the matrix), and how many vary at all. */
  genes: number[];
  variable: number;
  /** Genes left out for a missing value in some sample. */
  droppedMissing: number;
  /** Explained variance of every component there is. */
  explained: number[];
  /** Each sample's score on the two components asked for. */
  xs: number[];
  ys: number[];
}

/** The principal components of the matrix; too few samples, varying genes or components is the user's mistake. */
export function principalComponents(m: CountMatrix, opts: PcaOpts): PcaResult {
  const lc = log2Cpm(m);
  const samples = lc.kept.map((j) => m.samples[j]!);
  if (samples.length < 3) {
    throw new ChartError(`a PCA needs at least 3 samples with counts; this matrix has ${samples.length} (${samples.map((s) => JSON.stringify(s)).join(", ") || "none"})${lc.empty.length ? `, and ${lc.empty.length} whose counts sum to 0 (${lc.empty.join(", ")})` : ""}`);
  }
  const complete = (i: number) => lc.rows[i]!.every((x) => x === x);
  let droppedMissing = 0;
  for (let i = 0; i < lc.rows.length; i++) if (!complete(i)) droppedMissing++;
  const top = mostVariable(lc.rows, opts.top_n, complete);
  if (top.variable < 2) {
    throw new ChartError(`a PCA needs at least 2 genes whose expression varies between samples; this matrix has ${top.variable} (of ${m.values.length} genes${droppedMissing ? `, ${droppedMissing} left out for a missing value in some sample` : ""})`);
  }
  const genes = top.index;
  const data = samples.map((_, s) => genes.map((g) => lc.rows[g]![s]!));
  const pca = new PCA(data, { method: "SVD", center: true, scale: false });
  const available = Math.min(samples.length - 1, genes.length);
  const explained = pca.getExplainedVariance().slice(0, available);
  const [ca, cb] = opts.components;
  const maxComp = Math.max(ca, cb);
  if (maxComp > available) {
    throw new ChartError(`component ${maxComp} was asked for, but ${samples.length} samples and ${genes.length} genes give ${available} principal components; choose components between 1 and ${available}`);
  }
  const scores = pca.predict(data, { nComponents: maxComp });
  const xs = samples.map((_, s) => scores.get(s, ca - 1));
  const ys = samples.map((_, s) => scores.get(s, cb - 1));
  return { lc, samples, genes, variable: top.variable, droppedMissing, explained, xs, ys };
}

/** The group of a sample that has none (drawn grey, after the others). */
export const UNASSIGNED = "unassigned";

export interface SampleGroups {
  /** Each sample's group (UNASSIGNED when it has none). */
  groups: string[];
  /** The legend's title: the sheet's column, or "group". */
  title: string;
  /** Where the groups come from, for the TSV. */
  note: string;
  /** The groups in legend order: first seen first, UNASSIGNED last. */
  names: string[];
}

type Sheet = { header: string[]; rows: string[][] };
const SHEET_SAMPLE_COLUMNS = ["sample", "sample_id", "Sample", "sample_name", "SampleID"];

/** Each sample's group from an object or a sample-sheet column; undefined when there is no color_by. */
export function groupsOf(samples: readonly string[], colorBy: PcaOpts["color_by"], sheet: Sheet | undefined): SampleGroups | undefined {
  if (colorBy === undefined) return undefined;
  const { map, title, note } = typeof colorBy === "string" ? sheetGroups(samples, colorBy, sheet) : mappingGroups(samples, colorBy);
  const groups = samples.map((x) => { const g = map.get(x); return g === undefined || g === "" || isMissing(g) ? UNASSIGNED : g; });
  const names: string[] = [];
  for (const x of groups) if (x !== UNASSIGNED && !names.includes(x)) names.push(x);
  if (groups.includes(UNASSIGNED)) names.push(UNASSIGNED);
  return { groups, title, note, names };
}

type GroupMap = { map: Map<string, string>; title: string; note: string };

/** Groups from a sample sheet's column, matched on its sample-name column (or its first). */
function sheetGroups(samples: readonly string[], colorBy: string, sheet: Sheet | undefined): GroupMap {
  if (!sheet) throw new ChartError(`color_by "${colorBy}" names a column of a sample sheet, but no sample_sheet was given; give sample_sheet (a CSV or TSV with one row per sample), or give color_by as an object mapping each sample to its group`);
  const list = sheet.header.map((h) => JSON.stringify(h)).join(", ");
  let c = sheet.header.indexOf(colorBy);
  if (c < 0) c = sheet.header.findIndex((h) => h.toLowerCase() === colorBy.toLowerCase());
  if (c < 0) throw new ChartError(`column "${colorBy}" (option color_by) is not in the sample sheet; its columns are: ${list}`);
  let s = SHEET_SAMPLE_COLUMNS.map((n) => sheet.header.indexOf(n)).find((i) => i >= 0) ?? -1;
  if (s < 0) s = sheet.header.findIndex((h) => SHEET_SAMPLE_COLUMNS.some((n) => n.toLowerCase() === h.toLowerCase()));
  if (s < 0) s = 0;
  if (s === c) throw new ChartError(`color_by "${colorBy}" is the sample sheet's sample-name column; name a column that holds groups (the sheet's columns are: ${list})`);
  const map = new Map<string, string>();
  for (const r of sheet.rows) {
    const name = (r[s] ?? "").trim();
    if (name && !map.has(name)) map.set(name, (r[c] ?? "").trim());
  }
  if (![...samples].some((x) => map.has(x))) {
    const shown = [...map.keys()].slice(0, 8).map((k) => JSON.stringify(k)).join(", ");
    throw new ChartError(`none of the count matrix's ${samples.length} samples (${samples.slice(0, 8).map((k) => JSON.stringify(k)).join(", ")}${samples.length > 8 ? ", …" : ""}) is in the sample sheet's column "${sheet.header[s]}" (${shown}${map.size > 8 ? ", …" : ""}); the sheet's first column, or one named sample, must hold the matrix's column names`);
  }
  return { map, title: sheet.header[c]!, note: `groups: column "${sheet.header[c]}" of the sample sheet, matched on its column "${sheet.header[s]}"` };
}

/** Groups from the color_by object (sample → group). */
function mappingGroups(samples: readonly string[], colorBy: Record<string, string>): GroupMap {
  const map = new Map(Object.entries(colorBy).map(([k, v]) => [k.trim(), v.trim()]));
  if (map.size > 0 && !samples.some((x) => map.has(x))) {
    throw new ChartError(`none of the count matrix's samples (${samples.slice(0, 8).map((k) => JSON.stringify(k)).join(", ")}${samples.length > 8 ? ", …" : ""}) is named in color_by (${[...map.keys()].slice(0, 8).map((k) => JSON.stringify(k)).join(", ")})`);
  }
  return { map, title: "group", note: "groups: the color_by mapping" };
}
