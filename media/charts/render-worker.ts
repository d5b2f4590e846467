/**
 * One render, off the API's event loop: a worker thread reads the job's local files (tables
 * streamed row by row into the plot type's sink, structures and coverage through their
 * readers), asks the pure renderer in plots/ for the SVG and the data drawn, and
 * rasterises PNGs with resvg and DejaVu Sans — the font the SVG names and the layout was
 * measured with. A data problem comes back as `{ok: false, data: true}` with the renderer's
 * words; anything else is an internal failure. Runs as a worker (`runInWorker`) or inline in
 * tests and benches (`renderTask`).
 */
import { existsSync } from "node:fs";
import { stat } from "node:fs/promises";
import { StringDecoder } from "node:string_decoder";
import { parentPort, workerData, isMainThread } from "node:worker_threads";
import { Resvg } from "@resvg/resvg-js";
import { ChartError, toTsv, type Chart, type Frame, type TableSink } from "../../plots/chart.js";
import type { PlotType } from "../../plots/options.js";
import type { CoverageOpts, HeatmapOpts, ManhattanOpts, PathwayOpts, PcaOpts, StructureOpts, VolcanoOpts } from "../../plots/options.js";
import { DelimitedParser, detectDelimiter, parseTable } from "../../core/delimited.js";
import { parseRegion } from "../../core/viewers.js";
import { boundedChunks, LINE_MAX_BYTES, MANHATTAN_MAX_BYTES, overLine, readBounded, SAMPLE_SHEET_MAX_BYTES, STRUCTURE_MAX_BYTES, TABLE_MAX_BYTES, type TextBounds } from "./bounded-read.js";
import { messageOf, OperonError } from "../../core/errors.js";

export const FONT_DIR = "/usr/share/fonts/truetype/dejavu";
export const FONT_FILES = [`${FONT_DIR}/DejaVuSans.ttf`, `${FONT_DIR}/DejaVuSans-Bold.ttf`];

export interface RenderTask {
  type: PlotType;
  options: Record<string, unknown>;
  frame: Frame;
  format: "png" | "svg";
  /** Local paths of the files the job reads. */
  inputs: { primary: string; sheet?: string; annotation?: string; bamIndex?: string };
  /** A scratch directory for indexes built on the way. */
  workDir: string;
}

/**
 * What the worker thread answers. A failure's `data` says whether the input was at fault
 * (`validation_failed` of core/errors.ts: the message is for the user) or the render itself.
 */
export type RenderResult =
  | { ok: true; image: Uint8Array; tsv: string; width: number; height: number; rows: number }
  | { ok: false; data: boolean; error: string };

/**
 * The rows a table chart reads before it gives up, so a render's memory stays bounded however
 * large the file (the worker's heap is capped too; this makes the failure a sentence instead
 * of an out-of-memory). Gene tables have tens of thousands of rows; a Manhattan plot keeps its
 * own, larger cap (manhattan.ts).
 */
export const TABLE_MAX_ROWS: Readonly<Partial<Record<PlotType, { rows: number; what: string }>>> = {
  volcano_plot: { rows: 2_000_000, what: "a volcano plot draws one point per gene (a DESeq2, edgeR or limma table has tens of thousands of rows)" },
  pathway_map: { rows: 2_000_000, what: "a pathway map reads one row per gene" },
  heatmap: { rows: 1_000_000, what: "a heatmap reads a genes × samples matrix" },
  pca_plot: { rows: 1_000_000, what: "a PCA reads a genes × samples count matrix" },
};

/** The bytes a table chart reads (once decompressed): bounded-read.ts. */
const TABLE_BYTES: TextBounds = { maxBytes: TABLE_MAX_BYTES, what: "the file", why: "a gene table is at most a few hundred MB; filter the file first" };
const MANHATTAN_BYTES: TextBounds = { maxBytes: MANHATTAN_MAX_BYTES, what: "the file", why: "filter the summary statistics first (e.g. keep SNPs with p < 0.01) or split them by chromosome" };

/**
 * The lines of a delimited file, streamed: leading `#` lines skipped, the first record is the
 * header. Bytes and line length are bounded by `boundedChunks`; a record (which quotes may
 * spread over lines) by LINE_MAX_BYTES too (plus at most one chunk); rows by `cap`.
 */
async function streamTable(path: string, makeSink: (header: readonly string[]) => TableSink, cap: { rows: number; what: string } | undefined, bytes: TextBounds): Promise<Chart> {
  let parser: DelimitedParser | undefined;
  let sink: TableSink | undefined;
  let pending = "";
  let rows = 0;
  const take = (records: string[][]) => {
    for (const rec of records) {
      if (!sink) {
        if ((rec[0] ?? "").startsWith("#") && rec.length <= 1) continue;
        if ((rec[0] ?? "").startsWith("#") && rec.slice(1).every((c) => c === "")) continue;
        sink = makeSink(rec.map((c, i) => (i === 0 ? c.replace(/^#\s*/, "") : c.trim())));
        continue;
      }
      if (rec.length === 1 && rec[0] === "") continue;
      if (cap && ++rows > cap.rows) throw new ChartError(`the file has more than ${cap.rows.toLocaleString("en-US")} data rows; ${cap.what}. Filter the file first`);
      sink.row(rec);
    }
  };
  const push = (s: string) => {
    const records = parser!.push(s);
    if (parser!.pendingChars > LINE_MAX_BYTES) throw overLine(bytes, true);
    take(records);
  };
  const dec = new StringDecoder("utf8");
  for await (const chunk of boundedChunks(path, bytes)) {
    const s = dec.write(chunk);
    if (!parser) {
      pending += s;
      if (pending.length < 64 * 1024) continue;
      parser = new DelimitedParser(detectDelimiter(pending));
      push(pending);
      pending = "";
      continue;
    }
    push(s);
  }
  pending += dec.end();
  if (!parser) { parser = new DelimitedParser(detectDelimiter(pending)); push(pending); } else if (pending) push(pending);
  take(parser.end());
  if (!sink) throw new ChartError("the file holds no header row and no data");
  return sink.finish();
}

async function readSmall(path: string, max: number, what: string): Promise<string> {
  const s = await stat(path);
  if (s.size > max) throw new ChartError(`${what} is ${(s.size / 1e6).toFixed(0)} MB; at most ${(max / 1e6).toFixed(0)} MB can be read`);
  return readBounded(path, { maxBytes: max, what });
}

/** Renderers load on demand: a worker reads only the modules of its plot type. */
async function chartOf(t: RenderTask): Promise<Chart> {
  const o = t.options;
  switch (t.type) {
    case "volcano_plot": {
      const { volcanoChart } = await import("../../plots/volcano.js");
      return streamTable(t.inputs.primary, (h) => volcanoChart(h, o as VolcanoOpts, t.frame), TABLE_MAX_ROWS.volcano_plot, TABLE_BYTES);
    }
    case "manhattan_plot": {
      const { manhattanChart } = await import("../../plots/manhattan.js");
      return streamTable(t.inputs.primary, (h) => manhattanChart(h, o as ManhattanOpts, t.frame), undefined, MANHATTAN_BYTES);
    }
    case "heatmap": {
      const { heatmapChart } = await import("../../plots/heatmap.js");
      return streamTable(t.inputs.primary, (h) => heatmapChart(h, o as HeatmapOpts, t.frame), TABLE_MAX_ROWS.heatmap, TABLE_BYTES);
    }
    case "pca_plot": {
      const { pcaChart } = await import("../../plots/pca.js");
      let sheet: { header: string[]; rows: string[][] } | undefined;
      if (t.inputs.sheet) {
        const p = parseTable(await readSmall(t.inputs.sheet, SAMPLE_SHEET_MAX_BYTES, "the sample sheet"));
        sheet = { header: p.header, rows: p.rows };
      }
      return streamTable(t.inputs.primary, (h) => pcaChart(h, o as PcaOpts, t.frame, sheet), TABLE_MAX_ROWS.pca_plot, TABLE_BYTES);
    }
    case "pathway_map": {
      const [{ pathwayChart }, { loadPathways }] = await Promise.all([import("../../plots/pathway.js"), import("./pathways.js")]);
      const collection = await loadPathways();
      return streamTable(t.inputs.primary, (h) => pathwayChart(h, o as PathwayOpts, t.frame, collection), TABLE_MAX_ROWS.pathway_map, TABLE_BYTES);
    }
    case "structure_3d": {
      const [{ structureChart }, { parseStructure }] = await Promise.all([import("../../plots/structure.js"), import("../../plots/data/structure-file.js")]);
      const text = await readSmall(t.inputs.primary, STRUCTURE_MAX_BYTES, "the structure file");
      const name = t.inputs.primary.replace(/\.(gz|bgz)$/i, "").toLowerCase();
      const format = /\.(cif|mmcif)$/.test(name) || /^data_/m.test(text.slice(0, 4096)) ? "mmcif" : "pdb";
      return structureChart(parseStructure(text, format), o as StructureOpts, t.frame);
    }
    case "coverage_track": {
      const [{ coverageChart }, { findGene }, { ensureBamIndex, loadCoverage, readAnnotation }] = await Promise.all([
        import("../../plots/coverage.js"), import("../../plots/data/annotation.js"), import("./coverage-data.js"),
      ]);
      const co = o as CoverageOpts;
      const kind = /\.(bw|bigwig)$/i.test(t.inputs.primary) ? "bigwig" : "bam";
      const features = t.inputs.annotation ? await readAnnotation(t.inputs.annotation) : [];
      let region: { chr: string; start: number; end: number };
      if (co.region) {
        const r = parseRegion(co.region);
        if ("error" in r) throw new ChartError(`region: ${r.error}`);
        region = r;
      } else {
        const g = findGene(features, co.gene ?? "");
        region = { chr: g.chr, start: Math.max(1, g.start - co.flank), end: g.end + co.flank };
      }
      const inRegion = features.filter((f) => f.chr === region.chr && f.end >= region.start && f.start <= region.end);
      const indexPath = kind === "bam" ? (t.inputs.bamIndex ?? await ensureBamIndex(t.inputs.primary, t.workDir)) : undefined;
      const bins = Math.max(50, Math.round(t.frame.width - 120));
      const track = await loadCoverage({ path: t.inputs.primary, kind, ...(indexPath ? { indexPath } : {}) }, region, bins, inRegion);
      return coverageChart(track, co, t.frame);
    }
  }
}

/** Render one task in this thread. */
export async function renderTask(t: RenderTask): Promise<RenderResult> {
  try {
    const chart = await chartOf(t);
    const tsv = toTsv(chart.data);
    if (t.format === "svg") {
      const image = Buffer.from(`<?xml version="1.0" encoding="UTF-8"?>\n${chart.svg}\n`, "utf8");
      return { ok: true, image, tsv, width: chart.width, height: chart.height, rows: chart.data.rows.length };
    }
    if (!FONT_FILES.every((f) => existsSync(f))) return { ok: false, data: false, error: `PNG rendering needs the DejaVu fonts (Debian package fonts-dejavu-core) in ${FONT_DIR}` };
    const scale = Number(t.options.scale ?? 2);
    const png = new Resvg(chart.svg, {
      fitTo: { mode: "zoom", value: scale },
      font: { fontFiles: FONT_FILES, loadSystemFonts: false, defaultFontFamily: "DejaVu Sans", sansSerifFamily: "DejaVu Sans" },
      shapeRendering: 2, textRendering: 1, imageRendering: 0,
    }).render().asPng();
    return { ok: true, image: png, tsv, width: Math.round(chart.width * scale), height: Math.round(chart.height * scale), rows: chart.data.rows.length };
  } catch (e) {
    // The input's fault (a ChartError of plots/, or another validation_failed): a data error,
    // whose message is the job's error as is.
    if (e instanceof OperonError && e.code === "validation_failed") return { ok: false, data: true, error: e.message };
    return { ok: false, data: false, error: messageOf(e) };
  }
}

/** Worker entry: one task in, one result out. */
if (!isMainThread && parentPort && (workerData as { operonRender?: boolean } | undefined)?.operonRender) {
  const port = parentPort;
  port.once("message", (t: RenderTask) => {
    void renderTask(t).then((r) => port.postMessage(r, r.ok ? [] : []));
  });
}
