/**
 * The render options of each plot type, validated at submission (`POST /v1/visualizations/render`):
 * one zod schema per type, strict (an unknown option is a 400 naming `options.<name>`), with
 * the defaults the renderers rely on. The same schemas are the JSON Schema of the API docs.
 */
import { z } from "zod";
import { parseRegion } from "../core/viewers.js";
import { COLORMAPS } from "./paint/colours.js";

export const PLOT_TYPES = ["volcano_plot", "manhattan_plot", "pca_plot", "heatmap", "coverage_track", "structure_3d", "pathway_map"] as const;
export type PlotType = (typeof PLOT_TYPES)[number];

const column = z.string().min(1).max(200);
/** Size and title, common to every type: pixels of the SVG; a PNG has `scale` × as many. */
const frame = {
  title: z.string().max(200).optional(),
  width: z.number().int().min(320).max(4000).optional(),
  height: z.number().int().min(160).max(4000).optional(),
  scale: z.number().min(1).max(4).default(2).describe("PNG pixels per SVG pixel (2 by default: print-ready at the default size)."),
};
const labels = z.number().int().min(0).max(100);
const workspaceFile = z.string().min(1).max(1024);

export const VolcanoOptions = z.strictObject({
  ...frame,
  log2fc_col: column.optional(), pvalue_col: column.optional(), gene_col: column.optional(),
  threshold_fc: z.number().positive().max(100).default(1).describe("|log2 fold change| at or above which a gene counts as changed."),
  threshold_pvalue: z.number().gt(0).max(1).default(0.05).describe("(Adjusted) p-value below which a gene counts as significant."),
  top_labels: labels.default(15).describe("How many of the most significant changed genes get a label."),
});

export const ManhattanOptions = z.strictObject({
  ...frame,
  chr_col: column.optional(), pos_col: column.optional(), pvalue_col: column.optional(), snp_col: column.optional(),
  significance_line: z.number().gt(0).max(1).default(5e-8),
  suggestive_line: z.union([z.number().gt(0).max(1), z.literal(false)]).default(1e-5).describe("A second, dashed line; false to leave it out."),
  top_labels: labels.default(10).describe("How many of the genome-wide significant loci (the best SNP per chromosome region) get a label."),
});

const sampleGroups = z.record(z.string().min(1).max(200), z.string().max(200));
export const PcaOptions = z.strictObject({
  ...frame,
  color_by: z.union([sampleGroups, column]).optional().describe("An object mapping sample → group, or the name of a column of `sample_sheet`."),
  sample_sheet: workspaceFile.optional().describe("Workspace path of a sample sheet (first column: sample names)."),
  label_samples: z.boolean().default(true),
  components: z.tuple([z.number().int().min(1).max(10), z.number().int().min(1).max(10)]).default([1, 2]).refine((c) => c[0] !== c[1], "the two components must differ"),
  top_n: z.number().int().min(2).max(50_000).default(500).describe("How many of the most variable genes the PCA uses."),
  gene_col: column.optional(),
});

export const HeatmapOptions = z.strictObject({
  ...frame,
  top_n: z.number().int().min(2).max(2000).default(50),
  cluster_rows: z.boolean().default(true),
  cluster_cols: z.boolean().default(true),
  colormap: z.enum(COLORMAPS).default("RdBu"),
  gene_col: column.optional(),
});

export const CoverageOptions = z.strictObject({
  ...frame,
  region: z.string().max(300).refine((s) => !("error" in parseRegion(s)), "must be chr:start-end (1-based, start ≤ end)").optional(),
  gene: z.string().min(1).max(100).optional(),
  annotation: workspaceFile.optional().describe("Workspace path of a GTF, GFF3 or BED file used to find `gene`."),
  flank: z.number().int().min(0).max(1_000_000).default(0).describe("Bases added on each side of a gene."),
}).superRefine((o, ctx) => {
  if (!o.region && !o.gene) ctx.addIssue({ code: "custom", path: ["region"], message: "give region (chr:start-end) or gene" });
  if (o.region && o.gene) ctx.addIssue({ code: "custom", path: ["gene"], message: "give region or gene, not both" });
  if (o.gene && !o.annotation) ctx.addIssue({ code: "custom", path: ["annotation"], message: "a gene is found through an annotation file: give annotation (a GTF, GFF3 or BED file in the workspace), or give region instead" });
});

export const STRUCTURE_STYLES = ["cartoon", "stick", "surface"] as const;
export const StructureOptions = z.strictObject({
  ...frame,
  style: z.enum(STRUCTURE_STYLES).default("cartoon"),
  color_by: z.enum(["chain", "bfactor", "plddt"]).default("chain"),
  highlight_residues: z.array(z.string().regex(/^[A-Za-z0-9]{1,4}:-?\d+(-\d+)?$/, "must look like A:25 or A:30-35")).max(50).default([]),
  rotate_x: z.number().min(-360).max(360).default(0).describe("Degrees about the horizontal axis, applied after the automatic orientation."),
  rotate_y: z.number().min(-360).max(360).default(0),
});

export const PathwayOptions = z.strictObject({
  ...frame,
  pathway_id: z.string().regex(/^WP\d{1,6}$/, "must look like WP254").optional(),
  organism: z.enum(["human", "mouse"]).optional().describe("Detected from the gene identifiers when omitted."),
  highlight_genes: z.array(z.string().min(1).max(100)).max(500).default([]),
  color_by_fc: z.boolean().default(true),
  gene_col: column.optional(), log2fc_col: column.optional(), pvalue_col: column.optional(),
  threshold_pvalue: z.number().gt(0).max(1).default(0.05),
});

export const PLOT_OPTIONS = {
  volcano_plot: VolcanoOptions, manhattan_plot: ManhattanOptions, pca_plot: PcaOptions, heatmap: HeatmapOptions,
  coverage_track: CoverageOptions, structure_3d: StructureOptions, pathway_map: PathwayOptions,
} as const satisfies Record<PlotType, z.ZodType>;

export type VolcanoOpts = z.output<typeof VolcanoOptions>;
export type ManhattanOpts = z.output<typeof ManhattanOptions>;
export type PcaOpts = z.output<typeof PcaOptions>;
export type HeatmapOpts = z.output<typeof HeatmapOptions>;
export type CoverageOpts = z.output<typeof CoverageOptions>;
export type StructureOpts = z.output<typeof StructureOptions>;
export type PathwayOpts = z.output<typeof PathwayOptions>;
export type PlotOptions<T extends PlotType> = z.output<(typeof PLOT_OPTIONS)[T]>;

/** Options that name workspace files the job reads besides `file_path`. */
export const FILE_OPTIONS: Readonly<Record<PlotType, readonly string[]>> = {
  volcano_plot: [], manhattan_plot: [], pca_plot: ["sample_sheet"], heatmap: [], coverage_track: ["annotation"], structure_3d: [], pathway_map: [],
};

/** Default size (SVG pixels) per type. */
export const DEFAULT_SIZE: Readonly<Record<PlotType, { width: number; height: number }>> = {
  volcano_plot: { width: 800, height: 640 }, manhattan_plot: { width: 1200, height: 520 }, pca_plot: { width: 760, height: 600 },
  heatmap: { width: 820, height: 900 }, coverage_track: { width: 1000, height: 300 }, structure_3d: { width: 800, height: 800 }, pathway_map: { width: 1100, height: 800 },
};

/** Validate `options` for a type: the parsed options, or issues with `options.<name>` paths. */
export function parsePlotOptions(type: PlotType, options: unknown): { ok: true; options: Record<string, unknown> } | { ok: false; errors: Array<{ path: string; message: string }> } {
  const r = PLOT_OPTIONS[type].safeParse(options ?? {});
  if (r.success) return { ok: true, options: r.data as Record<string, unknown> };
  const errors = r.error.issues.flatMap((i) => {
    if (i.code === "unrecognized_keys") return i.keys.map((k) => ({ path: `options.${k}`, message: `unknown option for ${type}; its options are: ${Object.keys(PLOT_OPTIONS[type].shape ?? {}).join(", ")}` }));
    return [{ path: ["options", ...i.path.map(String)].join("."), message: i.message }];
  });
  return { ok: false, errors };
}
