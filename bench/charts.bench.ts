/**
 * Benchmark: chart rendering against Debian's python3-matplotlib drawing the same points to PNG
 * in the same run.
 *
 * Inputs (bench/charts-inputs.ts, deterministic, made once into <out>/inputs): a DESeq2-like
 * results table of 20,000 genes (volcano), GWAS summary statistics of 1,000,000 SNPs
 * (Manhattan), a count matrix of 1,000 genes × 50 samples (heatmap, clustered rows and
 * columns; measured with top_n 1000 so all 1,000 genes are clustered, and with the default
 * top_n of 50 as an extra row).
 *
 * Operon: each measurement in a fresh Node process (so its peak RSS is that render's): the
 * child imports media/charts/render-worker.ts and the type's renderer first (import time
 * reported apart, as Python's imports are), then times `renderTask` inline (format png,
 * default options, default frame from DEFAULT_SIZE: file read + parse + layout + SVG + resvg
 * rasterisation) plus writing the PNG, and reports `process.resourceUsage().maxRSS`. A second
 * child times the job path's worker thread (media/render-jobs.ts runWorker: a Worker on
 * render-worker with its 2 GB heap cap, thread start + module load + render + the result
 * posted back), without the object store around it.
 * matplotlib: bench/charts-matplotlib.py in a fresh /usr/bin/python3 per measurement: pandas
 * reads the same file, matplotlib (Agg) draws the same points at the same pixel size, scipy
 * clusters the heatmap (average linkage, Euclidean — Operon's method); time from file read to
 * savefig done, imports reported apart; peak RSS from getrusage.
 *
 * Rounds alternate the two sides (which goes first flips each round) so a drift in the
 * machine's load falls on both; medians of --runs rounds (3 by default). The PNGs of both
 * sides (last round) go to <out>/png/ to be looked at side by side.
 *
 * Run: `make bench-charts`, or `npx tsx bench/charts.bench.ts [--runs N] [--out DIR]`
 * (needs python3-matplotlib, python3-scipy, python3-pandas and fonts-dejavu-core). Prints the
 * table and the section text; writes it into bench/RESULTS.md only where that file already
 * has `<!-- charts:start -->` … `<!-- charts:end -->` markers (else to <out>/section.md).
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import type { PlotType } from "../plots/options.js";
import type { RenderResult, RenderTask } from "../media/charts/render-worker.js";

interface Case {
  key: string;
  type: PlotType;
  /** The renderer's module in plots/ (imported before timing). */
  module: string;
  file: string;
  what: string;
  points: string;
  options: Record<string, unknown>;
  /** Seconds; the issue's target for this type. */
  target?: number;
  py: string[];
}

const CASES: Case[] = [
  { key: "volcano", type: "volcano_plot", module: "volcano", file: "deseq2-20000.csv", what: "volcano", points: "20,000 genes", options: {}, target: 1, py: ["volcano"] },
  { key: "manhattan", type: "manhattan_plot", module: "manhattan", file: "gwas-1000000.tsv", what: "Manhattan", points: "1,000,000 SNPs", options: {}, target: 5, py: ["manhattan"] },
  { key: "heatmap", type: "heatmap", module: "heatmap", file: "counts-1000x50.tsv", what: "heatmap, clustered (top_n 1000)", points: "1,000 genes × 50 samples", options: { top_n: 1000 }, target: 2, py: ["heatmap", "1000"] },
  { key: "heatmap-top50", type: "heatmap", module: "heatmap", file: "counts-1000x50.tsv", what: "heatmap, clustered (default top_n 50)", points: "50 most variable of 1,000 genes × 50 samples", options: {}, py: ["heatmap", "50"] },
];

const PYTHON = "/usr/bin/python3";
/** PNG pixels per SVG pixel: the render options' default. */
const SCALE = 2;
const HERE = fileURLToPath(new URL(".", import.meta.url));
const ROOT = join(HERE, "..");
const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); const m = Math.floor(s.length / 2); return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2; };
const sec = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(0)} ms`);
const mb = (kb: number) => `${(kb / 1024).toFixed(0)} MB`;
const log = (s: string) => console.log(`[charts.bench ${new Date().toISOString().slice(11, 19)}] ${s}`);

/* ------------------------------------------------------------------ children */

interface OperonMeasure { ms: number; cpuMs: number; importMs: number; maxRssKb: number; rssAfterImportKb: number; width: number; height: number; rows: number; columns: number; comments: string[] }
interface PyMeasure { import_s: number; render_s: number; cpu_s: number; maxrss_kb: number; rss_after_import_kb: number; python: string; matplotlib: string; numpy: string; pandas: string; scipy: string; [k: string]: unknown }

async function child(args: string[]): Promise<void> {
  const [mode, key, input, out] = args as [string, string, string, string];
  const c = CASES.find((x) => x.key === key)!;
  const t0 = performance.now();
  const { renderTask } = await import("../media/charts/render-worker.js");
  const { parsePlotOptions, DEFAULT_SIZE } = await import("../plots/options.js");
  if (mode === "inline") await import(`../plots/${c.module}.js`);
  const importMs = performance.now() - t0;
  const rssAfterImportKb = Math.round(process.memoryUsage().rss / 1024);
  const parsed = parsePlotOptions(c.type, c.options);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  const task: RenderTask = { type: c.type, options: parsed.options, frame: { ...DEFAULT_SIZE[c.type], source: c.file }, format: "png", inputs: { primary: input }, workDir: join(out, "..") };
  const cpu0 = process.cpuUsage();
  const t1 = performance.now();
  let r: RenderResult;
  if (mode === "inline") r = await renderTask(task);
  else {
    // As media/render-jobs.ts runWorker starts one.
    const url = new URL(`../media/charts/render-worker${import.meta.url.endsWith(".ts") ? ".ts" : ".js"}`, import.meta.url);
    r = await new Promise<RenderResult>((resolve, reject) => {
      const w = new Worker(url, { workerData: { operonRender: true }, resourceLimits: { maxOldGenerationSizeMb: 2048 }, stdout: false, stderr: false });
      w.on("message", (m: RenderResult) => { resolve(m); void w.terminate(); });
      w.on("error", reject);
      w.postMessage(task);
    });
  }
  if (!r.ok) throw new Error(`render failed: ${r.error}`);
  writeFileSync(out, r.image);
  const ms = performance.now() - t1;
  const cpu = process.cpuUsage(cpu0);
  writeFileSync(out.replace(/\.png$/, ".tsv"), r.tsv);
  const lines = r.tsv.split("\n");
  const comments = lines.filter((l) => l.startsWith("#")).map((l) => l.replace(/^#\s*/, ""));
  const columns = (lines.find((l) => !l.startsWith("#")) ?? "").split("\t").length;
  const m: OperonMeasure = { ms, cpuMs: (cpu.user + cpu.system) / 1000, importMs, maxRssKb: process.resourceUsage().maxRSS, rssAfterImportKb, width: r.width, height: r.height, rows: r.rows, columns, comments };
  process.stdout.write(`${JSON.stringify(m)}\n`);
}

function run(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let out = "", err = "";
    p.stdout.on("data", (d: Buffer) => { out += d.toString(); });
    p.stderr.on("data", (d: Buffer) => { err += d.toString(); });
    p.on("error", reject);
    p.on("close", (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} ${args.join(" ")} exited ${code}: ${err.slice(-2000)}`))));
  });
}

const lastJson = <T>(s: string): T => JSON.parse(s.trim().split("\n").pop()!) as T;
const operon = async (mode: "inline" | "worker", c: Case, input: string, out: string) =>
  lastJson<OperonMeasure>(await run(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), "--child", mode, c.key, input, out]));
async function matplotlib(c: Case, input: string, out: string, size: { width: number; height: number }, scale: number): Promise<PyMeasure> {
  return lastJson<PyMeasure>(await run(PYTHON, [join(HERE, "charts-matplotlib.py"), c.py[0]!, input, out, String(size.width), String(size.height), String(scale), ...c.py.slice(1)]));
}

/* ------------------------------------------------------------------ main */

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const opt = (name: string) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : undefined; };
  const runs = Number(opt("--runs") ?? 3);
  const outDir = opt("--out") ?? "/tmp/bench-charts";
  const inputs = join(outDir, "inputs"), pngs = join(outDir, "png");
  mkdirSync(pngs, { recursive: true });

  const { DEFAULT_SIZE } = await import("../plots/options.js");
  const { writeCounts, writeDeseq2, writeGwas } = await import("./charts-inputs.js");
  const files = { "deseq2-20000.csv": () => writeDeseq2(join(inputs, "deseq2-20000.csv")), "gwas-1000000.tsv": () => writeGwas(join(inputs, "gwas-1000000.tsv")), "counts-1000x50.tsv": () => writeCounts(join(inputs, "counts-1000x50.tsv")) };
  mkdirSync(inputs, { recursive: true });
  for (const [name, make] of Object.entries(files)) if (!existsSync(join(inputs, name))) { log(`writing ${join(inputs, name)}`); await make(); }

  const py = JSON.parse(await run(PYTHON, ["-c", "import sys, json, matplotlib, numpy, scipy, pandas; print(json.dumps({'python': sys.version.split()[0], 'matplotlib': matplotlib.__version__, 'numpy': numpy.__version__, 'scipy': scipy.__version__, 'pandas': pandas.__version__}))"]).catch((e: Error) => {
    throw new Error(`${PYTHON} with matplotlib, scipy and pandas is needed (make bench-charts installs python3-matplotlib python3-scipy python3-pandas): ${e.message}`);
  })) as Record<string, string>;
  const cpu = cpus();
  const machine = `${cpu.length} × ${cpu[0]?.model ?? "?"}, ${(totalmem() / 1024 ** 3).toFixed(0)} GiB, Node ${process.versions.node}, Python ${py.python} with matplotlib ${py.matplotlib} (Agg), numpy ${py.numpy}, pandas ${py.pandas}, scipy ${py.scipy}`;
  log(machine);

  // Load average, sampled every second while measuring.
  const loads: number[] = [loadavg()[0]!];
  const sampler = setInterval(() => loads.push(loadavg()[0]!), 1000);
  const started = performance.now();
  const res = new Map<string, { inline: OperonMeasure[]; worker: OperonMeasure[]; py: PyMeasure[] }>(CASES.map((c) => [c.key, { inline: [], worker: [], py: [] }]));
  for (let round = 1; round <= runs; round++) {
    for (const c of CASES) {
      const input = join(inputs, c.file);
      const r = res.get(c.key)!;
      // matplotlib draws at the size Operon's PNG came out (round 1 runs Operon first): the
      // default frame, except where the renderer sizes the figure to its content (a heatmap
      // of 1,000 rows is taller than its default 900 px).
      const size = () => { const o = r.inline[0]; return o ? { width: Math.round(o.width / SCALE), height: Math.round(o.height / SCALE) } : DEFAULT_SIZE[c.type]; };
      const sides = [
        async () => { r.inline.push(await operon("inline", c, input, join(pngs, `${c.key}-operon.png`))); r.worker.push(await operon("worker", c, input, join(pngs, `${c.key}-operon-worker.png`))); },
        async () => { r.py.push(await matplotlib(c, input, join(pngs, `${c.key}-matplotlib.png`), size(), SCALE)); },
      ];
      if (round % 2 === 0) sides.reverse();
      for (const s of sides) await s();
      log(`round ${round}/${runs} ${c.key}: Operon ${sec(r.inline.at(-1)!.ms)} (worker ${sec(r.worker.at(-1)!.ms)}), ${mb(r.inline.at(-1)!.maxRssKb)}; matplotlib ${sec(r.py.at(-1)!.render_s * 1000)}, ${mb(r.py.at(-1)!.maxrss_kb)}`);
    }
  }
  clearInterval(sampler);
  loads.push(loadavg()[0]!);
  const wall = (performance.now() - started) / 1000;

  // ---- The table ----
  const rows = CASES.map((c) => {
    const r = res.get(c.key)!;
    const o = median(r.inline.map((m) => m.ms)), ocpu = median(r.inline.map((m) => m.cpuMs)), orss = median(r.inline.map((m) => m.maxRssKb));
    const ow = median(r.worker.map((m) => m.ms)), owrss = median(r.worker.map((m) => m.maxRssKb));
    const p = median(r.py.map((m) => m.render_s * 1000)), pcpu = median(r.py.map((m) => m.cpu_s * 1000)), prss = median(r.py.map((m) => m.maxrss_kb));
    const met = c.target === undefined ? "—" : o <= c.target * 1000 ? "**met**" : "**missed**";
    return { c, o, ocpu, orss, ow, owrss, p, pcpu, prss, met, r };
  });
  const list = (xs: number[]) => xs.map(sec).join(", ");
  const table = [
    "| chart | points | Operon render (inline) | Operon peak RSS | Operon as a job (worker thread) | matplotlib render | matplotlib peak RSS | time ratio matplotlib / Operon | target | met? |",
    "|---|---|---|---|---|---|---|---|---|---|",
    ...rows.map(({ c, o, ocpu, orss, ow, owrss, p, pcpu, prss, met, r }) =>
      `| ${c.what} | ${c.points} | **${sec(o)}** (${list(r.inline.map((m) => m.ms))}; CPU ${sec(ocpu)}) | ${mb(orss)} | ${sec(ow)}, ${mb(owrss)} | ${sec(p)} (${list(r.py.map((m) => m.render_s * 1000))}; CPU ${sec(pcpu)}) | ${mb(prss)} | **×${(p / o).toFixed(1)}** (CPU ×${(pcpu / ocpu).toFixed(1)}) | ${c.target === undefined ? "—" : `≤ ${c.target} s`} | ${met} |`),
  ].join("\n");

  const nodeFloor = median(CASES.flatMap((c) => res.get(c.key)!.inline.map((m) => m.rssAfterImportKb)));
  const pyFloor = median(CASES.flatMap((c) => res.get(c.key)!.py.map((m) => m.rss_after_import_kb)));
  const imports = `imports before timing: Operon ${sec(median(CASES.flatMap((c) => res.get(c.key)!.inline.map((m) => m.importMs))))} (render-worker + the renderer, through tsx), RSS after them ${mb(nodeFloor)}; matplotlib ${sec(median(CASES.flatMap((c) => res.get(c.key)!.py.map((m) => m.import_s * 1000))))} (numpy, pandas, matplotlib + pyplot, scipy.cluster), RSS after them ${mb(pyFloor)}`;
  // What each side drew, from Operon's TSV comments and the script's counts.
  const drawn = rows.map(({ c, r }) => {
    const com = r.inline.at(-1)!.comments, p = r.py.at(-1)!;
    const find = (re: RegExp) => com.find((l) => re.test(l)) ?? "";
    if (c.type === "volcano_plot") return `volcano: Operon "${find(/^counts:/)}"; matplotlib up ${p.up}, down ${p.down}, not significant ${p.ns}, points ${p.points}`;
    if (c.type === "manhattan_plot") return `Manhattan: Operon "${find(/^points:/).replace(/; thinning rule.*/, "")}", ${find(/^genome-wide significant:/)}; matplotlib ${p.points} points drawn, ${p.significant} SNPs genome-wide significant in ${p.loci} loci`;
    return `${c.what}: Operon ${r.inline.at(-1)!.rows} genes × ${r.inline.at(-1)!.columns - 1} samples; matplotlib ${p.genes} genes × ${p.samples} samples`;
  });
  const loadLine = `load average (1 min) ${loads[0]!.toFixed(1)} at the start, ${loads.at(-1)!.toFixed(1)} at the end, ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)} meanwhile (each measurement is one process using about one core)`;

  const date = new Date().toISOString().slice(0, 10);
  const section = `<!-- charts:start -->
## Charts against matplotlib (\`bench/charts.bench.ts\`)

Measured ${date} on ${machine}; ${loadLine}; whole bench ${wall.toFixed(0)} s, ${runs} alternating rounds, medians (each round's value in brackets).

${table}

How measured: every figure is a fresh process. Operon: \`renderTask\` (media/charts/render-worker.ts) inline with the type's default options and size (PNG at scale 2), from the file read to the PNG written: streaming parse, layout, SVG, resvg rasterisation; peak RSS is the process's \`maxRSS\`. "As a job" is the same render in a worker thread started the way media/render-jobs.ts starts one (thread start, module load, render, result posted back; no object store). matplotlib: bench/charts-matplotlib.py under ${PYTHON}: pandas \`read_csv\` of the same file, matplotlib (Agg) at the pixel size of Operon's PNG (width/100 × height/100 in at 200 dpi; ${rows.map(({ r, c }) => `${c.key} ${r.inline[0]!.width}×${r.inline[0]!.height}`).join(", ")}), from the file read to \`savefig\` done; peak RSS from \`getrusage\`. Volcano: padj NA dropped, three \`scatter\` calls coloured by class, dashed threshold lines, the 15 most significant changed genes annotated (matplotlib places them as they fall; Operon places them without overlap). Manhattan: every one of the 1,000,000 SNPs drawn (one \`scatter\` per chromosome, rasterised), both lines, the lead SNP of each significant 500 kb locus labelled; Operon draws every SNP past the suggestive line and one per 1 px × 2 px cell below it (the TSV lists those). Heatmap: log2(CPM + 1), the top_n most variable genes, per-gene z-scores, \`scipy.cluster.hierarchy.linkage\` average/Euclidean on rows and columns (Operon's method), both dendrograms, \`imshow\`, colour bar. CPU is user + system seconds of the render. ${imports}.

What was drawn (last round): ${drawn.join("; ")}.
<!-- charts:end -->`;

  console.log(`\n${section}\n`);
  writeFileSync(join(outDir, "results.json"), JSON.stringify({ machine, loads, wall, results: Object.fromEntries(res) }, null, 2));
  const results = new URL("./RESULTS.md", import.meta.url);
  const current = readFileSync(results, "utf8");
  if (/<!-- charts:start -->[\s\S]*<!-- charts:end -->/.test(current)) {
    writeFileSync(results, current.replace(/<!-- charts:start -->[\s\S]*<!-- charts:end -->/, () => section));
    log("section written into bench/RESULTS.md");
  } else {
    writeFileSync(join(outDir, "section.md"), `${section}\n`);
    log(`bench/RESULTS.md has no charts markers: section written to ${join(outDir, "section.md")}`);
  }
  log(`PNGs of both sides in ${pngs}`);
}

if (process.argv[2] === "--child") await child(process.argv.slice(3));
else await main();
