/**
 * Every plot type, through the API, on real files: nf-core DESeq2 results and salmon counts,
 * GWAS summary statistics, a BAM that the bwa-align pipeline made in this test (and a
 * bigWig), a PDB and an mmCIF, a DE table on a WikiPathways pathway. Each job completes; the
 * PNG decodes at the size the job reports and is not blank; the SVG parses; the TSV holds
 * the rows drawn, checked against a computation made here from the input (samtools depth for
 * coverage). The images are kept under .tap/charts/ for people to look at. Also the data
 * problems a scientist meets: a region with no reads, a file too big to draw.
 */
import t, { type Test } from "tap";
import { execFileSync, spawnSync } from "node:child_process";
import { createReadStream, createWriteStream, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { testApp } from "../support/app.js";
import { allText, colourCount, decodePng, elements, parseXml } from "../support/images.js";
import { until } from "../support/wait.js";
import { DEFAULT_SIZE, type PlotType } from "../../plots/options.js";

const FIX = join(import.meta.dirname, "..", "fixtures");
const ART = join(import.meta.dirname, "..", "..", ".tap", "charts");
mkdirSync(ART, { recursive: true });
const DESEQ2 = "charts/deseq2/nfcore-L1_L10.deseq2.results.head.tsv";

const a = await testApp({ engine: { orgConcurrency: 4 } });
t.teardown(() => a.close());
await a.service.createWorkspace("acme", "ws1");
const h = { authorization: `Bearer ${await a.key("acme", ["files", "tools"])}` };
const put = (key: string, body: Buffer | string) => a.store.put(`orgs/acme/workspaces/ws1/${key}`, body);
async function read(key: string): Promise<Buffer> {
  const { body } = await a.store.get(`orgs/acme/workspaces/ws1/${key}`);
  const parts: Buffer[] = [];
  for await (const c of body) parts.push(Buffer.from(c));
  return Buffer.concat(parts);
}
for (const [to, from] of [
  ["de/deseq2.tsv", DESEQ2],
  ["gwas/gwas.tsv", "charts/gwas/qqman-gwasResults.tsv"],
  ["rnaseq/counts.tsv", "charts/counts/SRP254919.salmon.merged.gene_counts.top1000cov.tsv"],
  ["rnaseq/samplesheet.csv", "charts/counts/SRP254919.samplesheet.csv"],
  ["cov/lambda.bam", "charts/coverage/lambda.bam"],
  ["cov/lambda.bw", "charts/coverage/lambda.bw"],
  ["cov/lambda.gtf", "charts/coverage/lambda.gtf"],
  ["pdb/1hpv.pdb", "charts/structure/1hpv.pdb"],
  ["pdb/1hpv.cif", "charts/structure/1hpv.cif"],
  ["pdb/AF-Q9GZY4-F1-model_v1.pdb", "charts/structure/AF-Q9GZY4-F1-model_v1.CA.pdb"],
  ["de/apoptosis.csv", "charts/pathway/apoptosis-de.csv"],
] as const) await put(to, readFileSync(join(FIX, from)));

interface Job { job_id: string; status: string; error: string | null; output_path: string; data_path: string; preview_url: string; image: { width: number; height: number; bytes: number } }
async function renderJob(body: Record<string, unknown>): Promise<Job> {
  const r = await a.app.inject({ method: "POST", url: "/v1/visualizations/render", headers: h, payload: { workspace_id: "ws1", ...body } });
  if (r.statusCode !== 202) throw new Error(`render refused: ${r.body}`);
  const id = r.json().data.job_id as string;
  let last: Job | undefined;
  await until(`render ${id}`, async () => {
    last = (await a.app.inject({ method: "GET", url: `/v1/visualizations/${id}?workspace_id=ws1`, headers: h })).json().data;
    return last!.status === "completed" || last!.status === "failed";
  }, 120_000);
  return last!;
}
interface Drawn { header: string[]; rows: string[][]; comments: string[]; svg: ReturnType<typeof parseXml>; png: ReturnType<typeof decodePng> }
/** Render as PNG and as SVG; check what every type owes; return the TSV and the parsed SVG. */
async function both(t: Test, name: string, type: PlotType, file_path: string, options: Record<string, unknown> = {}, size?: { width: number; height: number }): Promise<Drawn> {
  const png = await renderJob({ type, file_path, options });
  t.equal(png.status, "completed", `${name}: PNG job completed ${png.error ?? ""}`);
  const bytes = await read(png.output_path);
  writeFileSync(join(ART, `${name}.png`), bytes);
  const img = decodePng(bytes);
  t.same([img.width, img.height], [png.image.width, png.image.height], `${name}: the PNG decodes at the size the job reports`);
  if (size) t.same([img.width, img.height], [size.width * 2, size.height * 2], `${name}: the default size at scale 2`);
  t.ok(colourCount(img) > 8, `${name}: the PNG is a picture, not a blank (${colourCount(img)} colours)`);
  const svgJob = await renderJob({ type, file_path, options, output_format: "svg" });
  t.equal(svgJob.status, "completed", `${name}: SVG job completed ${svgJob.error ?? ""}`);
  const svgText = (await read(svgJob.output_path)).toString("utf8");
  writeFileSync(join(ART, `${name}.svg`), svgText);
  const svg = parseXml(svgText);
  t.equal(svg.name, "svg", `${name}: the SVG parses`);
  const tsv = (await read(png.data_path)).toString("utf8");
  t.equal((await read(svgJob.data_path)).toString("utf8"), tsv, `${name}: PNG and SVG draw the same data`);
  writeFileSync(join(ART, `${name}.tsv`), tsv);
  const lines = tsv.split("\n").filter((l) => l !== "");
  const [header, ...rows] = lines.filter((l) => !l.startsWith("#")).map((l) => l.split("\t"));
  return { header: header!, rows, comments: lines.filter((l) => l.startsWith("#")), svg, png: img };
}
const col = (d: Drawn, name: string) => { const i = d.header.indexOf(name); if (i < 0) throw new Error(`no column ${name} in ${d.header.join(",")}`); return d.rows.map((r) => r[i]!); };
const table = (file: string) => {
  const text = readFileSync(join(FIX, file), "utf8").trim().split("\n").filter((l) => !l.startsWith("#"));
  const sep = text[0]!.includes("\t") ? "\t" : ",";
  const header = text[0]!.split(sep).map((s) => s.replace(/^"|"$/g, ""));
  return { header, rows: text.slice(1).map((l) => l.split(sep).map((s) => s.replace(/^"|"$/g, ""))) };
};
const num = (s: string | undefined) => (s === undefined || s.trim() === "" || !Number.isFinite(Number(s)) ? undefined : Number(s));

t.test("volcano_plot: nf-core DESeq2 results", async (t) => {
  const d = await both(t, "volcano", "volcano_plot", "de/deseq2.tsv", {}, DEFAULT_SIZE.volcano_plot);
  const f = table(DESEQ2);
  const [fc, p] = [f.header.indexOf("log2FoldChange"), f.header.indexOf("padj")];
  const usable = f.rows.filter((r) => num(r[fc]) !== undefined && num(r[p]) !== undefined && num(r[p])! <= 1);
  t.equal(d.rows.length, usable.length, "one row per gene with a fold change and a padj");
  const up = usable.filter((r) => num(r[fc])! >= 1 && num(r[p])! < 0.05).length;
  const down = usable.filter((r) => num(r[fc])! <= -1 && num(r[p])! < 0.05).length;
  t.equal(col(d, "category").filter((c) => c === "up").length, up, "genes up past both thresholds");
  t.equal(col(d, "category").filter((c) => c === "down").length, down, "genes down past both thresholds");
  t.ok([...elements(d.svg)].some((e) => e.name === "text" && allText(e).includes(`(${up})`)), "the legend counts the genes up");
  if (f.rows.length > usable.length) t.ok(d.comments.some((c) => /skipped|NA/i.test(c)), "skipped rows are counted in the header");
});

t.test("manhattan_plot: GWAS summary statistics", async (t) => {
  const d = await both(t, "manhattan", "manhattan_plot", "gwas/gwas.tsv", {}, DEFAULT_SIZE.manhattan_plot);
  const f = table("charts/gwas/qqman-gwasResults.tsv");
  const P = f.header.indexOf("P");
  const sig = f.rows.filter((r) => Number(r[P]) < 5e-8).map((r) => r[0]).sort();
  t.ok(sig.length > 0, "the fixture has genome-wide significant SNPs");
  t.same(d.rows.filter((r) => Number(r[d.header.indexOf("p")]) < 5e-8).map((r) => r[0]).sort(), sig, "every significant SNP is drawn");
  t.ok(d.rows.length <= f.rows.length, "no more points than SNPs");
  const chrs = col(d, "chr").map(Number);
  t.ok(chrs.every((c, i) => i === 0 || c >= chrs[i - 1]!), "rows in chromosome order");
  const snps = new Set(f.rows.map((r) => r[0]));
  t.ok(col(d, "snp").every((s) => snps.has(s)), "every point is a SNP of the file");
});

t.test("pca_plot and heatmap: nf-core salmon counts", async (t) => {
  const counts = table("charts/counts/SRP254919.salmon.merged.gene_counts.top1000cov.tsv");
  const samples = counts.header.slice(2);
  const pca = await both(t, "pca", "pca_plot", "rnaseq/counts.tsv", { sample_sheet: "rnaseq/samplesheet.csv", color_by: "treatment" }, DEFAULT_SIZE.pca_plot);
  t.same(col(pca, "sample").sort(), [...samples].sort(), "one point per sample");
  const sheet = table("charts/counts/SRP254919.samplesheet.csv");
  const treatment = new Map(sheet.rows.map((r) => [r[0], r[sheet.header.indexOf("treatment")]]));
  t.same(pca.rows.map((r) => pca.header.indexOf("group") >= 0 ? r[pca.header.indexOf("group")] : undefined), pca.rows.map((r) => treatment.get(r[0])), "groups from the sample sheet's treatment column");
  t.ok(pca.comments.some((c) => /explained variance/.test(c)), "explained variance in the header");

  const heat = await both(t, "heatmap", "heatmap", "rnaseq/counts.tsv", { top_n: 40, colormap: "viridis" });
  t.equal(heat.rows.length, 40, "top_n genes drawn");
  t.same([...heat.header.slice(1)].sort(), [...samples].sort(), "one column per sample");
  const names = new Set(counts.rows.map((r) => r[1]));
  t.ok(heat.rows.every((r) => names.has(r[0])), "every row is a gene of the file");
  for (const r of heat.rows) {
    const z = r.slice(1).map(Number);
    t.ok(Math.abs(z.reduce((s, v) => s + v, 0) / z.length) < 1e-6, `${r[0]}: z-scores centred`);
  }
});

t.test("coverage_track: the BAM the bwa-align pipeline made, a bigWig with a gene from a GTF", async (t) => {
  // Reads simulated from the lambda genome, aligned by the built-in pipeline.
  const tmp = mkdtempSync(join(tmpdir(), "operon-cov-"));
  t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
  const ref = readFileSync(join(FIX, "viewers/lambda_virus.fa"), "utf8").replace(/^>.*$/m, ">lambda");
  writeFileSync(join(tmp, "ref.fa"), ref);
  const sim = spawnSync("wgsim", ["-S", "5", "-N", "3000", "-1", "100", "-2", "100", join(tmp, "ref.fa"), join(tmp, "r1.fq"), join(tmp, "r2.fq")], { encoding: "utf8" });
  t.equal(sim.status, 0, `wgsim ${sim.stderr}`);
  for (const f of ["ref.fa", "r1.fq", "r2.fq"]) await put(`reads/${f}`, readFileSync(join(tmp, f)));
  const run = await a.app.inject({ method: "POST", url: "/v1/pipelines", headers: h, payload: { workspace_id: "ws1", pipeline_id: "bwa-align", input: { reads1: "reads/r1.fq", reads2: "reads/r2.fq", reference: "reads/ref.fa", sampleName: "lambda" } } });
  t.equal(run.statusCode, 201, run.body);
  let done: { status: string; output_paths: string[] } = { status: "", output_paths: [] };
  await until("bwa-align", async () => {
    done = (await a.app.inject({ method: "GET", url: `/v1/pipelines/${run.json().data.id}?workspace_id=ws1`, headers: h })).json().data;
    return ["completed", "failed", "cancelled"].includes(done.status);
  }, 180_000);
  t.equal(done.status, "completed");
  const bam = done.output_paths.find((p) => p.endsWith(".bam"))!;
  t.ok(bam, "the pipeline published a BAM");
  const region = "lambda:20001-28000";
  const d = await both(t, "coverage-bwa-align", "coverage_track", bam, { region });
  // samtools depth over the same region, from the same bytes, is the independent account.
  writeFileSync(join(tmp, "s.bam"), await read(bam));
  execFileSync("samtools", ["index", join(tmp, "s.bam")]);
  const depth = execFileSync("samtools", ["depth", "-a", "-r", region, join(tmp, "s.bam")], { encoding: "utf8" }).trim().split("\n").map((l) => Number(l.split("\t")[2]));
  t.equal(depth.length, 8000, "samtools depth answers every base");
  const starts = col(d, "start").map(Number), ends = col(d, "end").map(Number), means = col(d, "mean_depth").map(Number), maxes = col(d, "max_depth").map(Number);
  t.equal(starts[0], 20001, "the first bin starts at the region's start");
  t.equal(ends.at(-1), 28000, "the last bin ends at the region's end");
  let worst = 0;
  for (let i = 0; i < d.rows.length; i++) {
    const slice = depth.slice(starts[i]! - 20001, ends[i]! - 20001 + 1);
    worst = Math.max(worst, Math.abs(slice.reduce((s, v) => s + v, 0) / slice.length - means[i]!));
    if (Math.max(...slice) !== maxes[i]) t.fail(`bin ${starts[i]}: max ${maxes[i]} vs samtools ${Math.max(...slice)}`);
  }
  t.ok(worst < 0.06, `mean depth per bin equals samtools depth's (largest difference ${worst.toFixed(3)}, rounding only)`);

  const bw = await both(t, "coverage-bigwig-gene", "coverage_track", "cov/lambda.bw", { gene: "int", annotation: "cov/lambda.gtf", flank: 500 });
  const gtf = readFileSync(join(FIX, "charts/coverage/lambda.gtf"), "utf8").split("\n").find((l) => /\tgene\t/.test(l) && /gene_name "int"|gene_id "int"/.test(l))!.split("\t");
  t.equal(Number(col(bw, "start")[0]), Number(gtf[3]) - 500, "the gene's start from the GTF, less the flank");
  t.equal(Number(col(bw, "end").at(-1)), Number(gtf[4]) + 500, "the gene's end from the GTF, plus the flank");

  const gap = await renderJob({ type: "coverage_track", file_path: "cov/lambda.bam", options: { region: "NC_001416.1:30300-31700" } });
  t.equal(gap.status, "failed", "a region without reads is a failed job");
  t.match(gap.error, /no reads in NC_001416\.1:30,300-31,700/, "which says so");
});

t.test("structure_3d: a PDB and the mmCIF of the same entry (HIV-1 protease), three styles; an AlphaFold model", async (t) => {
  const pdb = await both(t, "structure-1hpv-pdb-stick", "structure_3d", "pdb/1hpv.pdb", { style: "stick", highlight_residues: ["A:25", "B:25"] }, DEFAULT_SIZE.structure_3d);
  const cif = await both(t, "structure-1hpv-cif-stick", "structure_3d", "pdb/1hpv.cif", { style: "stick", highlight_residues: ["A:25", "B:25"] }, DEFAULT_SIZE.structure_3d);
  const residues = new Set(readFileSync(join(FIX, "charts/structure/1hpv.pdb"), "utf8").split("\n").filter((l) => /^(ATOM|HETATM)/.test(l) && l.slice(17, 20).trim() !== "HOH").map((l) => `${l[21]}:${l.slice(22, 26).trim()}`));
  t.equal(pdb.rows.length, residues.size, "one TSV row per residue of the PDB file (waters left out)");
  t.same(cif.rows.map((r) => r.slice(0, 3)), pdb.rows.map((r) => r.slice(0, 3)), "the mmCIF draws the same residues");
  t.same(pdb.rows.filter((r) => r[pdb.header.indexOf("highlighted")] !== "no").map((r) => `${r[0]}:${r[1]}`), ["A:25", "B:25"], "the highlighted residues are marked");
  await both(t, "structure-1hpv-cartoon", "structure_3d", "pdb/1hpv.pdb", {}, DEFAULT_SIZE.structure_3d);
  await both(t, "structure-1hpv-surface", "structure_3d", "pdb/1hpv.cif", { style: "surface", color_by: "bfactor" }, DEFAULT_SIZE.structure_3d);
  for (const style of ["cartoon", "surface"]) await both(t, `structure-alphafold-${style}`, "structure_3d", "pdb/AF-Q9GZY4-F1-model_v1.pdb", { style, color_by: "plddt" }, DEFAULT_SIZE.structure_3d);
});

t.test("pathway_map: a DE table on WikiPathways", async (t) => {
  const d = await both(t, "pathway", "pathway_map", "de/apoptosis.csv", {}, DEFAULT_SIZE.pathway_map);
  t.ok(d.comments.some((c) => /pathway: WP\d+/.test(c)), "the chosen pathway is named");
  const f = table("charts/pathway/apoptosis-de.csv");
  const fc = new Map(f.rows.map((r) => [r[0], Number(r[2])]));
  const matched = d.rows.filter((r) => (r[d.header.indexOf("file_gene")] ?? "") !== "");
  t.ok(matched.length > 10, `genes of the file are on the map (${matched.length})`);
  for (const r of matched) t.equal(Number(r[d.header.indexOf("log2FoldChange")]), fc.get(r[d.header.indexOf("file_gene")]!), `${r[0]}: fold change from the file`);
});

t.test("a 2 GB file: memory stays bounded, the job fails with words", async (t) => {
  const tmp = mkdtempSync(join(tmpdir(), "operon-big-"));
  t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
  // GWAS summary statistics with the columns real ones carry, written to 2 GiB.
  const path = join(tmp, "big.tsv");
  const out = createWriteStream(path);
  out.write("SNP\tCHR\tBP\tA1\tA2\tFRQ\tINFO\tOR\tSE\tP\tDIRECTION\tNOTE\n");
  const pad = "x".repeat(60);
  let block = "";
  for (let i = 0; i < 20_000; i++) block += `rs${i}\t${1 + (i % 22)}\t${1000 + i * 37}\tA\tG\t0.${(i * 7919) % 1000}\t0.98\t1.0${i % 10}\t0.012\t${((i * 7919) % 99991) / 99991 + 1e-9}\t++-+\t${pad}\n`;
  const blockBytes = Buffer.byteLength(block);
  const target = 2 * 1024 ** 3;
  for (let written = 0; written < target; written += blockBytes) if (!out.write(block)) await new Promise<void>((r) => out.once("drain", () => r()));
  await new Promise<void>((r) => out.end(() => r()));
  await a.store.put("orgs/acme/workspaces/ws1/gwas/big.tsv", createReadStream(path, { highWaterMark: 8 << 20 }));
  const base = process.memoryUsage().rss;
  let peak = base;
  const sampler = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss); }, 50);
  const job = await renderJob({ type: "manhattan_plot", file_path: "gwas/big.tsv" });
  clearInterval(sampler);
  t.equal(job.status, "failed", "too many rows for a Manhattan plot");
  t.match(job.error, /more than 10,000,000 rows.*filter it first/i, "the error says what to do");
  t.ok(peak - base < 1.5 * 1024 ** 3, `the server grew by ${((peak - base) / 1024 ** 2).toFixed(0)} MB reading a 2 GiB file`);
  const list = await a.store.list("orgs/acme/workspaces/ws1/plots/", { limit: 1000 });
  t.notOk(list.items.some((i) => /big_manhattan/.test(i.key)), "nothing half written");
  t.same(readdirSync(tmp), ["big.tsv"], "no stray files beside the input");
});
