/**
 * Benchmark: Operon's embedded mode against the systems a user would run the same pipeline with
 * on a laptop — Debian's Snakemake and cwltool (issue 19, the laptop half; the cluster half,
 * Argo Workflows and Tekton on the test control plane, is bench/peers/cluster.bench.ts).
 *
 * The pipeline is Operon's built-in `bwa-align` (pipelines/builtin/bwa-align.pipeline.json):
 * bwa index → bwa mem → samtools sort → samtools index → samtools flagstat, on wgsim read pairs.
 * The same five commands, with the same arguments, are bench/peers/Snakefile and
 * bench/peers/cwl/bwa-align.cwl (five CommandLineTools and a Workflow). Each system uses the
 * machine's own (Debian's) bwa and samtools: Operon through a real `operon serve` (dist/, as
 * `./operon serve` runs it: bubblewrap sandbox per step) driven over its HTTP API, Snakemake
 * with `--cores 2`, cwltool with `--no-container` (there is no Docker engine here).
 *
 * Measured, in one run:
 * (a) small input (the lambda phage FASTA from test/fixtures, 1,000 read pairs: the systems'
 *     own costs dominate), in alternating rounds; (b) a large input (a fixed-seed random
 *     genome of a few Mb, hundreds of thousands of pairs: the tools dominate), once, the
 *     direct commands before and after. For each: wall time and CPU seconds (the system's
 *     process and everything it started: the bench's children's cutime, Operon's cgroup),
 *     against the same five commands spawned directly in a temp dir (argv, no shell) in the
 *     same round; overhead per step = (system − direct) / 5. On (b) also with bwa mem's own
 *     report of its run (read from each system's log) taken out of both sides, since the
 *     tool's speed drifts with the machine's load by more than the overheads.
 * (c) 50 small runs submitted at once: Operon 50 POSTs (its default organization limit, 5
 *     concurrent steps; and again with the limit at 2, the peers' parallelism), Snakemake one
 *     invocation naming 50 targets with `--cores 2`, cwltool 50 invocations two at a time,
 *     the direct commands as 50 chains two at a time.
 * (d) what each records for provenance (Operon's run.json, Snakemake's .snakemake/metadata
 *     and --detailed-summary, cwltool's output object and `--provenance`).
 * Every run's flagstat must report the same mapped count as the direct commands, else the
 * bench fails.
 *
 * Run: `make bench-peers` (builds dist/, installs snakemake and cwltool when missing), or
 * `npx tsx bench/peers/laptop.bench.ts [--small-pairs N] [--large-pairs N] [--large-genome BP]
 * [--rounds N] [--many N] [--out DIR] [--dry]` (--dry: print the section, write nothing).
 * Writes its section of bench/RESULTS.md and the laptop table in README's performance section.
 */
import { execFileSync, spawn } from "node:child_process";
import { closeSync, copyFileSync, existsSync, mkdirSync, openAsBlob, openSync, readFileSync, readdirSync, rmSync, rmdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePorts } from "../../test/support/minio.js";
import { writeSection } from "../serve.js";

/* ------------------------------------------------------------------ options */

const HERE = fileURLToPath(new URL(".", import.meta.url));
const ROOT = join(HERE, "../..");
const arg = (name: string, def: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const SMALL_PAIRS = arg("small-pairs", 1000);
const LARGE_PAIRS = arg("large-pairs", 300_000);
const LARGE_GENOME = arg("large-genome", 4_000_000);
const ROUNDS = arg("rounds", 5);
const MANY = arg("many", 50);
const DRY = process.argv.includes("--dry");
const OUT = (() => { const i = process.argv.indexOf("--out"); return i > 0 ? process.argv[i + 1]! : "/tmp/operon-bench-peers"; })();
/** The peers' parallelism: the machine's cores (2 here), as a user would pass `--cores`. */
const CORES = cpus().length;
const STEPS = 5;
const SAMPLE = "sample";
const LAMBDA = join(ROOT, "test/fixtures/viewers/lambda_virus.fa");
const SNAKEFILE = join(HERE, "Snakefile");
const CWL = join(HERE, "cwl/bwa-align.cwl");
const DIST_MAIN = join(ROOT, "dist/cli/main.js");
if (!existsSync(DIST_MAIN)) throw new Error("run `make build` first (the bench runs dist/cli/main.js serve)");

const log = (s: string) => console.log(`[peers.bench ${new Date().toISOString().slice(11, 19)}] ${s}`);
const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); const m = Math.floor(s.length / 2); return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2; };
const sec = (ms: number) => (Math.abs(ms) >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : Math.abs(ms) >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(0)} ms`);
const cpuSec = (s: number) => (Number.isNaN(s) ? "n/a" : `${s.toFixed(2)} s`);
const cpuMs = (s: number) => (Number.isNaN(s) ? "n/a" : `${(s * 1000).toFixed(0)} ms`);
const int = (n: number) => n.toLocaleString("en-US");
/** Operon's figure against a peer's: "1/N" when Operon's is smaller, "×N" when larger. */
const ratio = (a: number, b: number) => (b <= 0 ? "—" : a <= 0 ? "≤ 0" : a <= b ? `1/${(b / a).toFixed(1)}` : `×${(a / b).toFixed(1)}`);

/* ------------------------------------------------------------------ processes and CPU */

const CLK_TCK = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
/**
 * user + system seconds of the bench's children so far, and of every process they waited for
 * (/proc/self/stat cutime + cstime: a child counts once libuv has reaped it).
 */
function childrenCpu(): number {
  const stat = readFileSync("/proc/self/stat", "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ").map(Number);
  // Fields 16 and 17 (cutime, cstime) are at 13 and 14 once pid and comm are cut off.
  return (f[13]! + f[14]!) / CLK_TCK;
}

/**
 * CPU accounting for the Operon server and everything it starts, through a cgroup of its own.
 * A process's cutime only holds the children it waited for, and with `--unshare-pid`
 * bubblewrap's outer process never reaps the namespace's init, so a step's tool never reaches
 * the server's cutime (a CPU-bound `sh` loop: 0.33 s plain, 0.01 s under `bwrap --unshare-pid`);
 * a cgroup counts every process in it, however it ends. cgroup v1's cpuacct
 * (cpuacct.usage, ns) or a cgroup v2 folder (cpu.stat usage_usec), whichever can be created
 * (root); null where neither can, and Operon's CPU is then not reported.
 */
interface CpuGroup { add(pid: number): void; seconds(): number; remove(): void }
function cpuGroup(name: string): CpuGroup | null {
  for (const parent of ["/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"]) {
    const dir = join(parent, name);
    try {
      if (!existsSync(join(parent, "cgroup.procs"))) continue;
      mkdirSync(dir, { recursive: true });
      const v1 = existsSync(join(dir, "cpuacct.usage"));
      if (!v1 && !existsSync(join(dir, "cpu.stat"))) { rmdirSync(dir); continue; }
      return {
        add: (pid) => writeFileSync(join(dir, "cgroup.procs"), String(pid)),
        seconds: () => (v1 ? Number(readFileSync(join(dir, "cpuacct.usage"), "utf8")) / 1e9 : Number(/usage_usec (\d+)/.exec(readFileSync(join(dir, "cpu.stat"), "utf8"))?.[1]) / 1e6),
        remove: () => { try { rmdirSync(dir); } catch { /* still has processes: left for the next run to reuse */ } },
      };
    } catch { /* not writable here: try the next */ }
  }
  return null;
}

interface Proc { code: number; ms: number; stderr: string }
/** Runs argv (no shell) in cwd; stdout straight into a file (as a shell's `>` would) or ignored, stderr kept (last 1 MB). */
function run(argv: string[], cwd: string, opts: { stdout?: string; env?: Record<string, string> } = {}): Promise<Proc> {
  return new Promise((resolve, reject) => {
    const out = opts.stdout ? openSync(opts.stdout, "w") : "ignore";
    const t0 = performance.now();
    const p = spawn(argv[0]!, argv.slice(1), { cwd, env: { ...process.env, ...opts.env }, stdio: ["ignore", out, "pipe"] });
    if (typeof out === "number") closeSync(out);
    let err = "";
    p.stderr!.on("data", (d: Buffer) => { err = (err + d.toString()).slice(-1_048_576); });
    p.on("error", reject);
    p.on("close", (code) => resolve({ code: code ?? -1, ms: performance.now() - t0, stderr: err }));
  });
}
async function must(argv: string[], cwd: string, opts: { stdout?: string; env?: Record<string, string> } = {}): Promise<Proc> {
  const r = await run(argv, cwd, opts);
  if (r.code !== 0) throw new Error(`${argv.join(" ")} (in ${cwd}) exited ${r.code}:\n${r.stderr.slice(-4000)}`);
  return r;
}
/** Runs `jobs` with at most `n` at a time. */
async function pool<T>(n: number, jobs: (() => Promise<T>)[]): Promise<T[]> {
  const out: T[] = new Array(jobs.length);
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(n, jobs.length) }, async () => {
    while (next < jobs.length) { const i = next++; out[i] = await jobs[i]!(); }
  }));
  return out;
}

/* ------------------------------------------------------------------ inputs */

interface Input { name: string; ref: string; r1: string; r2: string; what: string; refBytes: number; pairs: number }

/** A fixed-seed random genome (mulberry32), one contig, 60 bases a line. */
function randomGenome(path: string, length: number, seed: number): void {
  let a = seed >>> 0;
  const rnd = () => { a = (a + 0x6d2b79f5) >>> 0; let t = a; t = Math.imul(t ^ (t >>> 15), t | 1); t ^= t + Math.imul(t ^ (t >>> 7), t | 61); return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
  const lines = Math.ceil(length / 60);
  const buf = Buffer.alloc(`>chr1 random, mulberry32 seed ${seed}\n`.length + length + lines);
  let o = buf.write(`>chr1 random, mulberry32 seed ${seed}\n`);
  for (let i = 0; i < length; i++) {
    buf[o++] = "ACGT".charCodeAt(Math.floor(rnd() * 4));
    if ((i + 1) % 60 === 0 || i === length - 1) buf[o++] = 10;
  }
  writeFileSync(path, buf.subarray(0, o));
}

async function makeInput(name: string, pairs: number, genome: "lambda" | number): Promise<Input> {
  const dir = join(OUT, "inputs", `${name}-${genome}-${pairs}`);
  const input: Input = { name, ref: join(dir, "ref.fa"), r1: join(dir, "r1.fq"), r2: join(dir, "r2.fq"), what: "", refBytes: 0, pairs };
  if (!existsSync(join(dir, "done"))) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    if (genome === "lambda") copyFileSync(LAMBDA, input.ref);
    else randomGenome(input.ref, genome, 19);
    // wgsim: 100 bp mates, its default insert size, error and mutation rates; fixed seed.
    await must(["wgsim", "-N", String(pairs), "-1", "100", "-2", "100", "-S", "11", input.ref, input.r1, input.r2], dir);
    writeFileSync(join(dir, "done"), "");
  }
  input.refBytes = statSync(input.ref).size;
  input.what = genome === "lambda"
    ? `lambda phage (test/fixtures/viewers/lambda_virus.fa, 48.5 kb), ${int(pairs)} wgsim pairs of 100 bp`
    : `random ${(genome / 1e6).toFixed(1)} Mb genome (fixed seed), ${int(pairs)} wgsim pairs of 100 bp`;
  return input;
}

const mappedOf = (flagstat: string) => {
  const m = /^(\d+) \+ \d+ mapped \(/m.exec(flagstat);
  if (!m) throw new Error(`no "mapped" line in flagstat output:\n${flagstat}`);
  return Number(m[1]);
};

/* ------------------------------------------------------------------ the systems */

/** The five steps, in order, by the names Operon's bwa-align gives them. */
const STEP_IDS = ["index_reference", "align", "sort", "index_bam", "flagstat"] as const;
const SNAKEMAKE_RULES: Record<string, (typeof STEP_IDS)[number]> = { bwa_index: "index_reference", bwa_mem: "align", samtools_sort: "sort", samtools_index: "index_bam", samtools_flagstat: "flagstat" };

/** bwa mem's own report at its end (`[main] Real time: … sec; CPU: … sec`), from any log holding its stderr. */
interface BwaReport { realMs: number; cpu: number }
function bwaMemReport(log: string): BwaReport | undefined {
  const i = log.lastIndexOf("[main] CMD: bwa mem");
  const m = i < 0 ? null : /\[main\] Real time: ([\d.]+) sec; CPU: ([\d.]+) sec/.exec(log.slice(i));
  return m ? { realMs: Number(m[1]) * 1000, cpu: Number(m[2]) } : undefined;
}

interface Result {
  /** bwa mem's own report of its run: the tool's time, whatever wraps it. */
  bwa?: BwaReport;
  wallMs: number;
  cpu: number;
  mapped: number[];
  work?: string;
  /** One run: each step's time as the system itself records it (direct: spawn → exit), in STEP_IDS order. */
  stepMs?: number[];
}

/** The five commands as Operon's bwa-align runs them (run.json's argv), spawned one after another. */
async function directChain(input: Input, dir: string): Promise<{ mapped: number; ms: number[]; bwa: BwaReport | undefined }> {
  mkdirSync(dir, { recursive: true });
  copyFileSync(input.ref, join(dir, "ref.fa"));
  const index = await must(["bwa", "index", "ref.fa"], dir);
  const mem = await must(["bwa", "mem", "-R", `@RG\\tID:${SAMPLE}\\tSM:${SAMPLE}`, "ref.fa", input.r1, input.r2], dir, { stdout: join(dir, `${SAMPLE}.sam`) });
  const ms = [
    index.ms,
    mem.ms,
    (await must(["samtools", "sort", "-o", `${SAMPLE}.sorted.bam`, `${SAMPLE}.sam`], dir)).ms,
    (await must(["samtools", "index", `${SAMPLE}.sorted.bam`], dir)).ms,
    (await must(["samtools", "flagstat", `${SAMPLE}.sorted.bam`], dir, { stdout: join(dir, `${SAMPLE}.flagstat.txt`) })).ms,
  ];
  return { mapped: mappedOf(readFileSync(join(dir, `${SAMPLE}.flagstat.txt`), "utf8")), ms, bwa: bwaMemReport(`[main] CMD: bwa mem\n${mem.stderr}`) };
}

async function direct(input: Input, work: string, runs = 1, parallel = 1): Promise<Result> {
  mkdirSync(work, { recursive: true });
  // The reference copy (bwa index writes beside it) is inside the timing, as for the others.
  const c0 = childrenCpu(), t0 = performance.now();
  const chains = await pool(parallel, Array.from({ length: runs }, (_, i) => () => directChain(input, join(work, `r${i}`))));
  return { wallMs: performance.now() - t0, cpu: childrenCpu() - c0, mapped: chains.map((c) => c.mapped), work, ...(runs === 1 ? { stepMs: chains[0]!.ms, bwa: chains[0]!.bwa } : {}) };
}

/** One folder per run for Snakemake: the reference copied (its index is written beside it), the reads linked. */
function snakemakeFolder(input: Input, dir: string): void {
  mkdirSync(dir, { recursive: true });
  copyFileSync(input.ref, join(dir, "ref.fa"));
  symlinkSync(input.r1, join(dir, "r1.fq"));
  symlinkSync(input.r2, join(dir, "r2.fq"));
}

async function snakemake(input: Input, work: string, runs = 1): Promise<Result> {
  mkdirSync(work, { recursive: true });
  const names = Array.from({ length: runs }, (_, i) => (runs === 1 ? "one" : `m${String(i + 1).padStart(2, "0")}`));
  for (const n of names) snakemakeFolder(input, join(work, n));
  const c0 = childrenCpu(), t0 = performance.now();
  const r = await run(["snakemake", "-s", SNAKEFILE, "--cores", String(CORES), ...names.map((n) => `${n}/${SAMPLE}.flagstat.txt`)], work);
  const wallMs = performance.now() - t0, cpu = childrenCpu() - c0;
  writeFileSync(join(work, "snakemake.stderr"), r.stderr);
  if (r.code !== 0) throw new Error(`snakemake exited ${r.code}:\n${r.stderr.slice(-4000)}`);
  const mapped = names.map((n) => mappedOf(readFileSync(join(work, n, `${SAMPLE}.flagstat.txt`), "utf8")));
  // Its own record of each job's start and end (.snakemake/metadata): time inside the jobs.
  const meta = readdirSync(join(work, ".snakemake/metadata")).map((f) => JSON.parse(readFileSync(join(work, ".snakemake/metadata", f), "utf8")) as { rule: string; starttime: number; endtime: number });
  const stepMs = STEP_IDS.map((id) => { const m = meta.find((x) => SNAKEMAKE_RULES[x.rule] === id); return m ? (m.endtime - m.starttime) * 1000 : NaN; });
  const bwa = runs === 1 ? bwaMemReport(readFileSync(join(work, names[0]!, "logs/bwa_mem.log"), "utf8")) : undefined;
  return { wallMs, cpu, mapped, work, ...(runs === 1 ? { stepMs, bwa } : {}) };
}

function cwlJob(input: Input, path: string): void {
  const file = (p: string) => ({ class: "File", path: p });
  writeFileSync(path, JSON.stringify({ reference: file(input.ref), reads1: file(input.r1), reads2: file(input.r2), sample: SAMPLE }));
}
async function cwltoolOnce(input: Input, dir: string, extra: string[] = []): Promise<Proc & { mapped: number }> {
  mkdirSync(dir, { recursive: true });
  cwlJob(input, join(dir, "job.json"));
  // cwltool's own temp folders in the run's folder, not as random names in /tmp (where the test
  // suite's attacks test watches for stray files).
  for (const d of ["tmp", "tmp-out"]) mkdirSync(join(dir, d), { recursive: true });
  const tmp = [`--tmpdir-prefix=${join(dir, "tmp")}/`, `--tmp-outdir-prefix=${join(dir, "tmp-out")}/`];
  const r = await run(["cwltool", "--no-container", ...tmp, ...extra, "--outdir", join(dir, "out"), CWL, join(dir, "job.json")], dir, { stdout: join(dir, "outputs.json") });
  writeFileSync(join(dir, "cwltool.stderr"), r.stderr);
  if (r.code !== 0) return { ...r, mapped: -1 };
  return { ...r, mapped: mappedOf(readFileSync(join(dir, "out", `${SAMPLE}.sorted.flagstat.txt`), "utf8")) };
}
async function cwltool(input: Input, work: string, runs = 1, parallel = 1): Promise<Result> {
  mkdirSync(work, { recursive: true });
  const c0 = childrenCpu(), t0 = performance.now();
  const rs = await pool(parallel, Array.from({ length: runs }, (_, i) => () => cwltoolOnce(input, join(work, `r${i}`))));
  const wallMs = performance.now() - t0, cpu = childrenCpu() - c0;
  const bad = rs.find((r) => r.code !== 0);
  if (bad) throw new Error(`cwltool exited ${bad.code}:\n${bad.stderr.slice(-4000)}`);
  return { wallMs, cpu, mapped: rs.map((r) => r.mapped), work, ...(runs === 1 ? { bwa: bwaMemReport(rs[0]!.stderr) } : {}) };
}

/* ------------------------------------------------------------------ Operon over its API */

interface RunView { id: string; status: string; created_at: string; completed_at: string | null; error: string | null; output_folder: string; manifest_path: string; steps: { step_id: string; status: string; started_at: string | null; completed_at: string | null }[] }

class Operon {
  private constructor(readonly base: string, readonly headers: Record<string, string>, private readonly group: CpuGroup | null, private readonly stopFn: () => Promise<void>) {}

  /** `node dist/cli/main.js serve` (what `./operon serve` and `make run` start) on a fresh data folder. */
  static async start(dataDir: string, env: Record<string, string>): Promise<Operon> {
    rmSync(dataDir, { recursive: true, force: true });
    mkdirSync(dataDir, { recursive: true });
    const [port] = await freePorts(1) as [number];
    const logFile = join(dataDir, "..", `${dataDir.split("/").pop()}.log`);
    const fd = openSync(logFile, "w");
    const group = cpuGroup(`operon-bench-peers-${process.pid}-${dataDir.split("/").pop()}`);
    const server = spawn(process.execPath, [DIST_MAIN, "serve"], {
      cwd: ROOT, stdio: ["ignore", fd, fd],
      env: { ...process.env, OPERON_DATA_DIR: dataDir, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "warn", ...env },
    });
    closeSync(fd);
    // Into its cgroup before it has started anything (it loads its modules first).
    group?.add(server.pid!);
    const stop = async () => {
      if (server.exitCode === null && server.signalCode === null) {
        const exited = new Promise((r) => server.once("exit", r));
        server.kill("SIGTERM");
        // It finishes in-flight requests first; now and then it waits for one of this client's
        // keep-alive connections until the keep-alive timeout (72 s). Not what is measured here.
        const t = setTimeout(() => { log(`operon serve (${dataDir}) still running 10 s after SIGTERM: SIGKILL`); server.kill("SIGKILL"); }, 10_000);
        await exited;
        clearTimeout(t);
      }
      group?.remove();
    };
    const base = `http://127.0.0.1:${port}`;
    for (let i = 0; ; i++) {
      try { if ((await fetch(`${base}/healthz`)).ok) break; } catch { /* not yet */ }
      if (server.exitCode !== null || i > 600) { await stop(); throw new Error(`operon serve did not start:\n${readFileSync(logFile, "utf8").slice(-4000)}`); }
      await new Promise((r) => setTimeout(r, 100));
    }
    const headers = { authorization: `Bearer ${readFileSync(join(dataDir, "bootstrap-key"), "utf8").trim()}` };
    return new Operon(base, headers, group, stop);
  }

  stop(): Promise<void> { return this.stopFn(); }
  /** CPU seconds of the server and every process it started (each step's bwrap and tool); NaN without a cgroup. */
  cpu(): number { return this.group ? this.group.seconds() : NaN; }

  private async api<T>(method: string, path: string, body?: unknown): Promise<T> {
    const r = await fetch(`${this.base}${path}`, { method, headers: { ...this.headers, ...(body ? { "content-type": "application/json" } : {}) }, ...(body ? { body: JSON.stringify(body) } : {}) });
    const text = await r.text();
    if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
    return (JSON.parse(text) as { data: T }).data;
  }

  /** Uploads a local file into workspace `default` under `folder` (streamed from disk). */
  async upload(file: string, folder: string, name: string): Promise<string> {
    const form = new FormData();
    form.set("workspace_id", "default");
    form.set("path", folder);
    form.set("file", await openAsBlob(file), name);
    const r = await fetch(`${this.base}/v1/files/upload`, { method: "POST", headers: this.headers, body: form });
    if (r.status !== 201) throw new Error(`upload ${file}: ${r.status} ${await r.text()}`);
    return `${folder}/${name}`;
  }

  start(input: Record<string, string>): Promise<RunView> {
    return this.api<RunView>("POST", "/v1/pipelines", { workspace_id: "default", pipeline_id: "bwa-align", input });
  }
  get(id: string): Promise<RunView> { return this.api<RunView>("GET", `/v1/pipelines/${id}?workspace_id=default`); }
  async list(): Promise<RunView[]> { return this.api<RunView[]>("GET", "/v1/pipelines?workspace_id=default&limit=1000"); }
  async stepLog(id: string, step: string): Promise<string> {
    const r = await fetch(`${this.base}/v1/pipelines/${id}/steps/${step}/logs?workspace_id=default&tail=20`, { headers: this.headers });
    if (!r.ok) throw new Error(`step log ${id}/${step}: ${r.status} ${await r.text()}`);
    return r.text();
  }
  async read(key: string): Promise<string> {
    const { downloadUrl } = await this.api<{ downloadUrl: string }>("GET", `/v1/files/download?workspace_id=default&key=${encodeURIComponent(key)}`);
    const r = await fetch(downloadUrl);
    if (!r.ok) throw new Error(`download ${key}: ${r.status}`);
    return r.text();
  }
}

interface OperonInput { reference: string; reads1: string; reads2: string }

/** Servers started and not yet stopped: stopped (and their cgroups removed) however the bench ends. */
const servers: Operon[] = [];
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.once(sig, () => { void Promise.all(servers.map((s) => s.stop().catch(() => undefined))).finally(() => process.exit(130)); });
}

/** Submits `runs` runs at once and waits until every one has ended (polling: one GET per run for one run, the list for many). */
async function operon(o: Operon, keys: OperonInput, runs = 1): Promise<Result & { views: RunView[] }> {
  const c0 = o.cpu();
  const t0 = Date.now();
  const started = await Promise.all(Array.from({ length: runs }, () => o.start({ ...keys })));
  const ids = new Set(started.map((r) => r.id));
  let views: RunView[];
  for (;;) {
    views = runs === 1 ? [await o.get(started[0]!.id)] : (await o.list()).filter((v) => ids.has(v.id));
    if (views.length === runs && views.every((v) => ["completed", "failed", "cancelled"].includes(v.status))) break;
    await new Promise((r) => setTimeout(r, runs === 1 ? 100 : 250));
  }
  const cpu = o.cpu() - c0;
  const bad = views.find((v) => v.status !== "completed");
  if (bad) throw new Error(`Operon run ${bad.id} ${bad.status}: ${bad.error ?? JSON.stringify(bad.steps)}`);
  // Wall: the first POST sent → the last run's completedAt (the server's clock, same machine; polling not counted).
  const wallMs = Math.max(...views.map((v) => Date.parse(v.completed_at!))) - t0;
  const mapped = await Promise.all(views.map(async (v) => mappedOf(await o.read(`${v.output_folder}/${SAMPLE}.flagstat.txt`))));
  const stepMs = STEP_IDS.map((id) => { const s = views[0]!.steps.find((x) => x.step_id === id)!; return Date.parse(s.completed_at!) - Date.parse(s.started_at!); });
  const bwa = runs === 1 ? bwaMemReport(`[main] CMD: bwa mem\n${await o.stepLog(views[0]!.id, "align")}`) : undefined;
  return { wallMs, cpu, mapped, views, ...(runs === 1 ? { stepMs, bwa } : {}) };
}

/* ------------------------------------------------------------------ provenance */

interface Provenance { operon: string[]; snakemake: string[]; cwltool: string[]; cwlProvenanceError: string }

/** What each system wrote down about the large run: the facts the provenance table is made of. */
async function provenance(o: Operon, view: RunView, smWork: string, cwlWork: string, input: Input, small: Input): Promise<Provenance> {
  const manifest = JSON.parse(await o.read(view.manifest_path)) as {
    inputChecksums: Record<string, { checksum: string }>;
    steps: { toolName: string; toolVersion: string | null; argv?: string[]; executable?: { path: string; sha256: string }; outputFiles: { checksum: string }[]; startedAt: string | null }[];
  };
  const outs = manifest.steps.flatMap((s) => s.outputFiles);
  const versions = [...new Set(manifest.steps.map((s) => `${s.toolName} ${s.toolVersion}`))];
  const operonFacts = [
    `${Object.keys(manifest.inputChecksums).length} of 3 inputs (SHA-256)`,
    `all ${outs.length} output files (SHA-256, size)`,
    `per step: ${versions.join(", ")} (the binary's own \`--version\`), its path and SHA-256`,
    `per step: argv as run (${manifest.steps.filter((s) => s.argv).length} of ${manifest.steps.length})`,
    `per step: start, end, attempt; the spec as executed and the parameters`,
  ];

  const metaDir = join(smWork, ".snakemake/metadata");
  const meta = readdirSync(metaDir).map((f) => ({ file: Buffer.from(f, "base64").toString(), ...(JSON.parse(readFileSync(join(metaDir, f), "utf8")) as { rule: string; version: string | null; shellcmd: string; input_checksums?: Record<string, string>; starttime: number }) }));
  const checked = new Set(meta.flatMap((m) => Object.keys(m.input_checksums ?? {})));
  const inputsUsed = new Set(["one/ref.fa", "one/r1.fq", "one/r2.fq"]);
  const summary = await run(["snakemake", "-s", SNAKEFILE, "--cores", "1", "--detailed-summary", `one/${SAMPLE}.flagstat.txt`], smWork, { stdout: join(smWork, "detailed-summary.tsv") });
  const header = readFileSync(join(smWork, "detailed-summary.tsv"), "utf8").split("\n")[0] ?? "";
  const snakemakeFacts = [
    `sha256 of inputs under 100,000 bytes only: here ${[...inputsUsed].filter((f) => checked.has(f)).map((f) => f.slice(4)).join(", ") || "none"} of ref.fa, r1.fq, r2.fq (${(input.refBytes / 1e6).toFixed(1)} MB reference, ${(statSync(input.r1).size / 1e6).toFixed(0)} MB reads)`,
    `no output checksums (${meta.length} metadata files, one per output: rule, input names, log file, shell command, start/end, code hash)`,
    `no tool versions (\`version\` ${meta.every((m) => m.version === null) ? "null in every record" : "set"}; the deprecated \`version:\` directive is all there is)`,
    `shell command per job (\`--detailed-summary\`${summary.code === 0 ? `: ${header.split("\t").join(", ")}` : " failed"})`,
  ];

  const outputs = JSON.parse(readFileSync(join(cwlWork, "r0", "outputs.json"), "utf8")) as Record<string, { checksum?: string; secondaryFiles?: { checksum?: string }[] }>;
  const sums = Object.values(outputs).flatMap((f) => [f.checksum, ...(f.secondaryFiles ?? []).map((s) => s.checksum)]).filter(Boolean);
  const stderr = readFileSync(join(cwlWork, "r0", "cwltool.stderr"), "utf8");
  const cmdLines = (stderr.match(/\[job [^\]]+\] \S+\$ /g) ?? []).length;
  // Debian's build: is --provenance there? (Tried on the small input.)
  cwlJob(small, join(cwlWork, "prov-job.json"));
  const prov = await run(["cwltool", "--no-container", "--provenance", join(cwlWork, "ro"), "--outdir", join(cwlWork, "prov-out"), CWL, join(cwlWork, "prov-job.json")], cwlWork);
  const provErr = prov.code === 0 ? "" : (prov.stderr.trim().split("\n").at(-1) ?? `exit ${prov.code}`);
  const cwlFacts = [
    `sha1 and size of the ${sums.length} final output files (the output object on stdout); intermediate files and inputs: none`,
    `no tool versions (only if a tool declares \`SoftwareRequirement\`, and then as declared, not as run)`,
    `command line of each step in the log (stderr, ${cmdLines} of 5), not in a file`,
    prov.code === 0 ? "`--provenance`: a research object with checksums (see the run's folder)" : `\`--provenance\` (RO-Crate with checksums upstream) is disabled in Debian's build (patch \`disable_prov\`): hidden from \`--help\`, and it fails (\`${provErr}\`)`,
  ];
  return { operon: operonFacts, snakemake: snakemakeFacts, cwltool: cwlFacts, cwlProvenanceError: provErr };
}

/* ------------------------------------------------------------------ main */

const versionOf = (argv: string[], re: RegExp) => {
  try { return re.exec(execFileSync(argv[0]!, argv.slice(1), { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }))?.[1] ?? "?"; } catch (e) {
    const out = `${(e as { stdout?: string }).stdout ?? ""}${(e as { stderr?: string }).stderr ?? ""}`;
    return re.exec(out)?.[1] ?? "?";
  }
};

async function main(): Promise<void> {
  for (const b of ["snakemake", "cwltool", "bwa", "samtools", "wgsim", "bwrap"]) {
    try { execFileSync("sh", ["-c", `command -v ${b}`], { stdio: "ignore" }); } catch { throw new Error(`${b} is missing: \`make bench-peers\` installs snakemake and cwltool, \`make debian-tools\` the rest`); }
  }
  const versions = {
    bwa: versionOf(["bwa"], /Version: (\S+)/),
    samtools: versionOf(["samtools", "--version"], /samtools (\S+)/),
    snakemake: versionOf(["snakemake", "--version"], /(\S+)/),
    cwltool: versionOf(["cwltool", "--version"], /cwltool (\S+)/),
    python: versionOf(["python3", "--version"], /Python (\S+)/),
  };
  const cpu = cpus();
  const machine = `${cpu.length} × ${cpu[0]?.model ?? "?"}, ${(totalmem() / 1024 ** 3).toFixed(0)} GiB, Node ${process.versions.node}; Debian's bwa ${versions.bwa}, samtools ${versions.samtools}, Snakemake ${versions.snakemake} and cwltool ${versions.cwltool} (Python ${versions.python})`;
  log(machine);
  mkdirSync(OUT, { recursive: true });
  const work = join(OUT, "work");
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });

  const loads: number[] = [loadavg()[0]!];
  const sampler = setInterval(() => loads.push(loadavg()[0]!), 5000);
  const benchStart = performance.now();

  log("inputs");
  const small = await makeInput("small", SMALL_PAIRS, "lambda");
  const large = await makeInput("large", LARGE_PAIRS, LARGE_GENOME);

  try {
    const o = await Operon.start(join(OUT, "operon-data"), {});
    servers.push(o);
    const up = async (inp: Input): Promise<OperonInput> => ({
      reference: await o.upload(inp.ref, inp.name, "ref.fa"), reads1: await o.upload(inp.r1, inp.name, "r1.fq"), reads2: await o.upload(inp.r2, inp.name, "r2.fq"),
    });
    log("uploading the inputs to Operon");
    const smallKeys = await up(small);
    const largeKeys = await up(large);

    type Sys = "direct" | "operon" | "snakemake" | "cwltool";
    const SYSTEMS: Sys[] = ["direct", "operon", "snakemake", "cwltool"];
    const one = async (s: Sys, inp: Input, keys: OperonInput, dir: string): Promise<Result> => {
      switch (s) {
        case "direct": return direct(inp, dir);
        case "operon": return operon(o, keys);
        case "snakemake": return snakemake(inp, dir);
        case "cwltool": return cwltool(inp, dir);
      }
    };

    // Warm-up: one small run each (page cache, Python's bytecode cache, the server's first requests).
    log("warm-up");
    for (const s of SYSTEMS) await one(s, small, smallKeys, join(work, `warmup-${s}`));

    // (a) small input, alternating rounds; the order turns by one each round.
    const smallRes = new Map<Sys, Result[]>(SYSTEMS.map((s) => [s, []]));
    for (let round = 0; round < ROUNDS; round++) {
      const order = SYSTEMS.map((_, i) => SYSTEMS[(i + round) % SYSTEMS.length]!);
      for (const s of order) smallRes.get(s)!.push(await one(s, small, smallKeys, join(work, `small-${s}-${round}`)));
      log(`small round ${round + 1}/${ROUNDS}: ${SYSTEMS.map((s) => `${s} ${sec(smallRes.get(s)!.at(-1)!.wallMs)}`).join(", ")}`);
    }

    // (b) large input, once each; the commands alone before and after the three systems.
    const largeRes = new Map<Sys, Result>();
    for (const s of SYSTEMS) {
      largeRes.set(s, await one(s, large, largeKeys, join(work, `large-${s}`)));
      log(`large ${s}: ${sec(largeRes.get(s)!.wallMs)}, CPU ${cpuSec(largeRes.get(s)!.cpu)}`);
    }
    const largeDirectAfter = await direct(large, join(work, "large-direct-after"));
    log(`large direct again: ${sec(largeDirectAfter.wallMs)}, CPU ${cpuSec(largeDirectAfter.cpu)}`);
    const largeOperonView = (largeRes.get("operon") as Result & { views: RunView[] }).views[0]!;
    log("provenance");
    const prov = await provenance(o, largeOperonView, join(work, "large-snakemake"), join(work, "large-cwltool"), large, small);
    // The large runs' files are big; the small ones stay for looking at.
    for (const d of [...SYSTEMS, "direct-after"]) rmSync(join(work, `large-${d}`), { recursive: true, force: true });

    // (c) MANY small runs at once.
    log(`${MANY} runs at once`);
    const many = new Map<string, Result>();
    many.set("direct", await direct(small, join(work, "many-direct"), MANY, CORES));
    log(`many direct: ${sec(many.get("direct")!.wallMs)}`);
    many.set("operon", await operon(o, smallKeys, MANY));
    log(`many operon: ${sec(many.get("operon")!.wallMs)}`);
    await o.stop();
    log("first server stopped");
    const o2 = await Operon.start(join(OUT, "operon-data-2"), { OPERON_ORG_CONCURRENCY: String(CORES) });
    servers.push(o2);
    log(`second server started (OPERON_ORG_CONCURRENCY=${CORES})`);
    const smallKeys2: OperonInput = { reference: await o2.upload(small.ref, "small", "ref.fa"), reads1: await o2.upload(small.r1, "small", "r1.fq"), reads2: await o2.upload(small.r2, "small", "r2.fq") };
    await operon(o2, smallKeys2); // its first run, not measured
    log("second server warmed up");
    many.set("operon-2", await operon(o2, smallKeys2, MANY));
    log(`many operon (limit ${CORES}): ${sec(many.get("operon-2")!.wallMs)}`);
    await o2.stop();
    many.set("snakemake", await snakemake(small, join(work, "many-snakemake"), MANY));
    log(`many snakemake: ${sec(many.get("snakemake")!.wallMs)}`);
    many.set("cwltool", await cwltool(small, join(work, "many-cwltool"), MANY, CORES));
    log(`many cwltool: ${sec(many.get("cwltool")!.wallMs)}`);

    clearInterval(sampler);
    loads.push(loadavg()[0]!);
    const benchSec = (performance.now() - benchStart) / 1000;

    // Sanity: every run of every system maps as many reads as the direct commands.
    const expectSmall = smallRes.get("direct")![0]!.mapped[0]!;
    const expectLarge = largeRes.get("direct")!.mapped[0]!;
    const check = (what: string, r: Result, expect: number) => {
      const wrong = r.mapped.filter((m) => m !== expect);
      if (wrong.length > 0 || r.mapped.length === 0) throw new Error(`flagstat disagrees: ${what} mapped ${wrong.join(", ")} where the direct commands mapped ${expect}`);
    };
    for (const s of SYSTEMS) { for (const r of smallRes.get(s)!) check(`${s} (small)`, r, expectSmall); check(`${s} (large)`, largeRes.get(s)!, expectLarge); }
    check("direct (large, after)", largeDirectAfter, expectLarge);
    for (const [k, r] of many) check(`${k} (${MANY} runs)`, r, expectSmall);
    const totalMapped = (inp: Input) => inp.pairs * 2;
    log(`flagstat agrees: small ${expectSmall} of ${totalMapped(small)} reads mapped, large ${expectLarge} of ${totalMapped(large)}, ${MANY} × 5 systems`);

    /* ---------------- the tables ---------------- */
    const NAMES: Record<Sys, string> = { direct: "the 5 commands spawned directly", operon: "**Operon** (embedded, HTTP API)", snakemake: "Snakemake", cwltool: "cwltool" };
    // Small: medians of per-round values; overhead per round against that round's direct run.
    const perRound = (s: Sys, f: (r: Result, d: Result) => number) => smallRes.get(s)!.map((r, i) => f(r, smallRes.get("direct")![i]!));
    const ovW = (s: Sys) => median(perRound(s, (r, d) => (r.wallMs - d.wallMs) / STEPS));
    const ovC = (s: Sys) => median(perRound(s, (r, d) => (r.cpu - d.cpu) / STEPS));
    // Large: against the mean of the commands' two runs (before and after the systems).
    const ld = largeRes.get("direct")!;
    const ldWall = (ld.wallMs + largeDirectAfter.wallMs) / 2, ldCpu = (ld.cpu + largeDirectAfter.cpu) / 2;
    const lovW = (s: Sys) => (largeRes.get(s)!.wallMs - ldWall) / STEPS;
    const lovC = (s: Sys) => (largeRes.get(s)!.cpu - ldCpu) / STEPS;
    // The same with bwa mem's own run taken out of both sides (its own "Real time" report): what a
    // system adds around the tools, without the tool's speed drifting with the machine's load.
    const bwaReal = (r: Result) => r.bwa?.realMs ?? NaN;
    const ldRest = (ld.wallMs - bwaReal(ld) + largeDirectAfter.wallMs - bwaReal(largeDirectAfter)) / 2;
    const lovX = (s: Sys) => (largeRes.get(s)!.wallMs - bwaReal(largeRes.get(s)!) - ldRest) / STEPS;
    const bwaCell = (r: Result) => (r.bwa ? `${sec(r.bwa.realMs)} (CPU ${r.bwa.cpu.toFixed(1)} s)` : "n/a");
    const peers: Sys[] = ["snakemake", "cwltool"];
    const target = (a: number, b: number) => a <= b / 5;

    const mainRows: string[] = [];
    for (const s of SYSTEMS) {
      const sm = smallRes.get(s)!, lg = largeRes.get(s)!;
      const smallCell = `${sec(median(sm.map((r) => r.wallMs)))} (${sm.map((r) => sec(r.wallMs)).join(", ")}); CPU ${cpuSec(median(sm.map((r) => r.cpu)))}`;
      const smallOv = s === "direct" ? "—" : `${s === "operon" ? "**" : ""}${sec(ovW(s))}${s === "operon" ? "**" : ""} wall, ${cpuMs(ovC(s))} CPU`;
      const largeCell = s === "direct"
        ? `${sec(lg.wallMs)} before, ${sec(largeDirectAfter.wallMs)} after the systems; CPU ${cpuSec(lg.cpu)}, ${cpuSec(largeDirectAfter.cpu)}; bwa mem ${bwaCell(lg)}, ${bwaCell(largeDirectAfter)}`
        : `${sec(lg.wallMs)}; CPU ${cpuSec(lg.cpu)}; bwa mem ${bwaCell(lg)}`;
      const largeOv = s === "direct" ? "—" : `${s === "operon" ? "**" : ""}${sec(lovX(s))}${s === "operon" ? "**" : ""} (raw: ${sec(lovW(s))} wall, ${cpuMs(lovC(s))} CPU)`;
      mainRows.push(`| ${NAMES[s]} | ${smallCell} | ${smallOv} | ${largeCell} | ${largeOv} |`);
    }
    const ratioRows = peers.map((p) => `| Operon ÷ ${p} | | **${ratio(ovW("operon"), ovW(p))}** wall (target ≤ 1/5: ${target(ovW("operon"), ovW(p)) ? "**met**" : "**missed**"}), ${ratio(ovC("operon"), ovC(p))} CPU | | **${ratio(lovX("operon"), lovX(p))}** (raw: ${ratio(lovW("operon"), lovW(p))} wall, ${ratio(lovC("operon"), lovC(p))} CPU) |`);
    const mainTable = [
      `| system | (a) small: wall, median of ${ROUNDS} (each round); CPU | (a) overhead per step (median of rounds) | (b) large: wall; CPU; bwa mem's own report of its run (real time, CPU) | (b) overhead per step, bwa mem's own run taken out of both sides (raw: without that) |`,
      "|---|---|---|---|---|",
      ...mainRows,
      ...ratioRows,
    ].join("\n");

    const md = many.get("direct")!;
    const manyRow = (k: string, name: string, how: string) => {
      const r = many.get(k)!;
      const runsPerMin = MANY / (r.wallMs / 60_000);
      const exc = k === "direct" ? "—" : `${sec((r.wallMs - md.wallMs) / (MANY * STEPS))} wall, ${cpuMs((r.cpu - md.cpu) / (MANY * STEPS))} CPU`;
      return `| ${name} | ${how} | ${sec(r.wallMs)} (${runsPerMin.toFixed(0)} runs/min) | ${cpuSec(r.cpu)} | ${exc} |`;
    };
    const mo = many.get("operon")!, mo2 = many.get("operon-2")!, ms = many.get("snakemake")!, mc = many.get("cwltool")!;
    const manyTable = [
      `| system | how the ${MANY} runs were started | wall, first start → last run done | CPU | excess over direct per step (÷ ${MANY * STEPS}) |`,
      "|---|---|---|---|---|",
      manyRow("direct", NAMES.direct, `${MANY} chains, ${CORES} at a time`),
      manyRow("operon", "**Operon**", `${MANY} \`POST /v1/pipelines\` at once; organization limit 5 steps (the default)`),
      manyRow("operon-2", "Operon", `the same, limit ${CORES} (\`OPERON_ORG_CONCURRENCY=${CORES}\`: the peers' parallelism)`),
      manyRow("snakemake", "Snakemake", `one \`snakemake --cores ${CORES}\` naming the ${MANY} targets (${MANY} run folders)`),
      manyRow("cwltool", "cwltool", `${MANY} \`cwltool\` invocations, ${CORES} at a time`),
      `| Operon ÷ Snakemake, ÷ cwltool (wall) | | | | ×${(mo.wallMs / ms.wallMs).toFixed(2)}, ×${(mo.wallMs / mc.wallMs).toFixed(2)} (limit ${CORES}: ×${(mo2.wallMs / ms.wallMs).toFixed(2)}, ×${(mo2.wallMs / mc.wallMs).toFixed(2)}) |`,
    ].join("\n");

    const provTable = [
      "| | Operon `run.json` (per run, in the run's folder) | Snakemake 7.21 `.snakemake/metadata` + `--detailed-summary` | cwltool (Debian's build) |",
      "|---|---|---|---|",
      `| inputs | ${prov.operon[0]} | ${prov.snakemake[0]} | no checksums |`,
      `| outputs | ${prov.operon[1]} | ${prov.snakemake[1]} | ${prov.cwltool[0]} |`,
      `| tool versions | ${prov.operon[2]} | ${prov.snakemake[2]} | ${prov.cwltool[1]} |`,
      `| command lines | ${prov.operon[3]} | ${prov.snakemake[3]} | ${prov.cwltool[2]} |`,
      `| the rest | ${prov.operon[4]} | job start/end times, the rule's code hash (to rerun when it changes) | ${prov.cwltool[3]} |`,
    ].join("\n");

    // Where the time goes, small input: each step as the system records it, against the command alone (medians of rounds).
    const stepMed = (sys: Sys, i: number) => median(smallRes.get(sys)!.map((r) => r.stepMs![i]!));
    const restMed = (sys: Sys) => median(smallRes.get(sys)!.map((r) => r.wallMs - r.stepMs!.reduce((a, b) => a + b, 0)));
    const diff = (a: number, b: number) => `${a - b >= 0 ? "+" : "−"}${sec(Math.abs(a - b))}`;
    const breakdown = [
      "| step (small input, medians of rounds) | the command alone (spawn → exit) | Operon: the step as run.json records it (sandbox, staging, the tool, publishing outputs with SHA-256, work dir removed) | Snakemake: the job as .snakemake/metadata records it |",
      "|---|---|---|---|",
      ...STEP_IDS.map((id, i) => `| ${id} | ${sec(stepMed("direct", i))} | ${sec(stepMed("operon", i))} (${diff(stepMed("operon", i), stepMed("direct", i))}) | ${sec(stepMed("snakemake", i))} (${diff(stepMed("snakemake", i), stepMed("direct", i))}) |`),
      `| outside the steps: wall − the five steps | ${sec(restMed("direct"))} | ${sec(restMed("operon"))}: the POST (validation, run folder, run record, run.json), and between steps the engine seeing one end and starting the next | ${sec(restMed("snakemake"))}: Python and Snakemake start, the Snakefile, the DAG, file checks, between jobs |`,
    ].join("\n");
    const opWall = median(smallRes.get("operon")!.map((r) => r.wallMs)), smWall = median(smallRes.get("snakemake")!.map((r) => r.wallMs));
    const metSm = target(ovW("operon"), ovW("snakemake")), metCwl = target(ovW("operon"), ovW("cwltool"));
    const largeVerdict = ` On the large input, with bwa mem's own run taken out, Operon adds ${sec(lovX("operon"))} per step against Snakemake's ${sec(lovX("snakemake"))} and cwltool's ${sec(lovX("cwltool"))} (${ratio(lovX("operon"), lovX("snakemake"))} and ${ratio(lovX("operon"), lovX("cwltool"))}).`;
    const verdict = metSm && metCwl
      ? `**Target met** on the small input: Operon's per-step overhead is ${ratio(ovW("operon"), ovW("snakemake"))} of Snakemake's and ${ratio(ovW("operon"), ovW("cwltool"))} of cwltool's (target ≤ 1/5 of each).`
      : `**Target ${metSm || metCwl ? "partly " : ""}missed** on the small input: Operon's per-step overhead (${sec(ovW("operon"))}) is ${ratio(ovW("operon"), ovW("snakemake"))} of Snakemake's (${metSm ? "met" : `target ≤ ${sec(ovW("snakemake") / 5)}: ${sec(ovW("operon") - ovW("snakemake") / 5)} over`}) and ${ratio(ovW("operon"), ovW("cwltool"))} of cwltool's (${metCwl ? "met" : `target ≤ ${sec(ovW("cwltool") / 5)}: ${sec(ovW("operon") - ovW("cwltool") / 5)} over`}).`;
    const loadLine = `load average (1 min) ${loads[0]!.toFixed(1)} at the start, ${loads.at(-1)!.toFixed(1)} at the end, ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)} meanwhile (sampled every 5 s; the bench itself keeps about one core busy, so anything above ~1 is other work on the machine)`;
    const date = new Date().toISOString().slice(0, 10);

    const section = `<!-- peers-laptop:start -->
## Operon against Snakemake and cwltool on a laptop (\`bench/peers/laptop.bench.ts\`)

Measured ${date} on ${machine}; ${loadLine}; whole bench ${benchSec.toFixed(0)} s. One pipeline, four ways: Operon's built-in \`bwa-align\` (bwa index → bwa mem → samtools sort → samtools index → samtools flagstat) through a real \`operon serve\` (dist/, embedded: every step in its bubblewrap sandbox, inputs staged and outputs published with SHA-256) driven over its HTTP API; \`bench/peers/Snakefile\` under \`snakemake --cores ${CORES}\`; \`bench/peers/cwl/bwa-align.cwl\` under \`cwltool --no-container\` (no Docker engine on this machine, so each tool is the machine's own, as for the others); and the same five commands spawned directly by the bench (argv, no shell) — the tools' own time, measured in the same round. Same arguments everywhere (\`bwa mem -R '@RG\\tID:sample\\tSM:sample'\`, one thread).

**(a) and (b): one run at a time.** (a) small input: ${small.what} — the systems' own costs dominate; ${ROUNDS} rounds after one warm-up run each, the order of the four turning by one each round. (b) large input: ${large.what} — the tools dominate; once each, the commands alone before and after the three systems (overhead against the mean of the two). Overhead per step = (system − the direct commands) ÷ 5, in wall time and in CPU seconds.

${mainTable}

${verdict}${largeVerdict}

Where the time goes on the small input (cwltool records no per-step times; its log has none either):

${breakdown}

On the large input (b) a run's tool time moves by more than the systems' overheads from one minute to the next on this shared VM (the commands alone: ${sec(ld.wallMs)} and ${sec(largeDirectAfter.wallMs)}; bwa mem alone reporting ${bwaCell(ld)} and ${bwaCell(largeDirectAfter)}), so the raw difference says little: the overhead column takes bwa mem's own report of its run (the \`[main] Real time\` line it prints at the end, read from each system's log) out of both sides, leaving what each system adds around the tools plus the four short steps' drift.

**(c) ${MANY} small runs submitted at once** (small input; ${MANY * STEPS} steps each way).

${manyTable}

Snakemake: one invocation naming ${MANY} targets is what a Snakemake user does with ${MANY} samples (it then schedules all ${MANY * STEPS} jobs ${CORES} at a time and pays its start once); each target is its own folder with its own reference, so every system builds ${MANY} indexes (a Snakemake user with one shared reference would index it once: ${MANY * (STEPS - 1) + 1} jobs instead of ${MANY * STEPS}). cwltool: one invocation per run, ${CORES} at a time (\`--parallel\` only parallelises steps inside one workflow, and this one is a chain); a user scattering over ${MANY} samples in one workflow would pay cwltool's start once. Operon: ${MANY} POSTs from one client at once; the runs queue under the organization's limit and start as slots free. Each system is measured once here, one after the other (the commands alone, Operon at limit 5, Operon at limit 2, Snakemake, cwltool), so a change in the machine's load falls on some of them and not the others: compare these rows across runs, not within one on a busy machine.

**(d) What each records for provenance** (the large run):

${provTable}

How measured: wall time is the process's (Snakemake, cwltool, the direct commands) from spawn to exit; for Operon, from sending the first \`POST /v1/pipelines\` to the last run's \`completed_at\` (the server's clock on the same machine; the client's polling interval is not counted). CPU is user + system seconds of the process and every process it waited for: the bench's own children (\`/proc/self/stat\` cutime + cstime) for the direct commands, Snakemake and cwltool; for Operon, ${!Number.isNaN(smallRes.get("operon")![0]!.cpu) ? "the server's own cgroup (cgroup v1 cpuacct or v2 cpu.stat: the server, each step's bwrap and tool, and answering the bench's polling; a cutime would miss the tools, since bubblewrap's outer process does not reap its init)" : "not measured (no cgroup could be created; a process's cutime misses the tools, since bubblewrap's outer process does not reap its init)"}. Every run's \`samtools flagstat\` reported the same mapped count as the direct commands (small ${int(expectSmall)} of ${int(totalMapped(small))} reads, large ${int(expectLarge)} of ${int(totalMapped(large))}), or the bench would have failed.
<!-- peers-laptop:end -->`;

    const readme = `<!-- peers-laptop:start -->
On a laptop (\`make bench-peers\`, ${date}, ${cpu.length} cores, load average ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)}): the built-in \`bwa-align\` pipeline (5 steps) against the same commands as a Snakefile and a CWL workflow, with Debian's Snakemake ${versions.snakemake} and cwltool ${versions.cwltool} (\`--no-container\`). Overhead per step = (wall time − the same five commands run directly) ÷ 5.

| | Operon (embedded, over HTTP) | Snakemake | cwltool |
|---|---|---|---|
| small input (${int(small.pairs)} pairs on lambda): wall | ${sec(opWall)} | ${sec(smWall)} | ${sec(median(smallRes.get("cwltool")!.map((r) => r.wallMs)))} |
| overhead per step | **${sec(ovW("operon"))}** | ${sec(ovW("snakemake"))} (Operon: ${ratio(ovW("operon"), ovW("snakemake"))}) | ${sec(ovW("cwltool"))} (Operon: ${ratio(ovW("operon"), ovW("cwltool"))}) |
| large input (${int(large.pairs)} pairs on ${(LARGE_GENOME / 1e6).toFixed(0)} Mb): wall (the commands alone: ${sec(ld.wallMs)} and ${sec(largeDirectAfter.wallMs)}) | ${sec(largeRes.get("operon")!.wallMs)} | ${sec(largeRes.get("snakemake")!.wallMs)} | ${sec(largeRes.get("cwltool")!.wallMs)} |
| overhead per step, large (bwa mem's own run taken out) | **${sec(lovX("operon"))}** | ${sec(lovX("snakemake"))} | ${sec(lovX("cwltool"))} |
| ${MANY} small runs at once (the commands alone, ${CORES} at a time: ${sec(md.wallMs)}) | ${sec(mo.wallMs)} (limit 5; ${sec(mo2.wallMs)} at limit ${CORES}) | ${sec(ms.wallMs)} (one invocation, ${MANY} targets, \`--cores ${CORES}\`) | ${sec(mc.wallMs)} (${MANY} invocations, ${CORES} at a time) |
| provenance | inputs' and outputs' SHA-256, tool versions, argv, per run | SHA-256 of inputs < 100 kB, shell commands | outputs' SHA-1; \`--provenance\` disabled in Debian's build |

The 50-run row is one measurement per system, taken one after the other on a shared machine: see the notes in bench/RESULTS.md before comparing it. Details, CPU seconds and the method: [bench/RESULTS.md](bench/RESULTS.md), section "Operon against Snakemake and cwltool".
<!-- peers-laptop:end -->`;

    console.log(`\n${section}\n\n${readme}\n`);
    writeFileSync(join(OUT, "results.json"), JSON.stringify({ machine, loads, benchSec, small: Object.fromEntries(smallRes), large: Object.fromEntries(largeRes), many: Object.fromEntries(many), prov }, (k, v: unknown) => (k === "views" ? undefined : v), 2));
    if (DRY) { log("--dry: nothing written"); return; }
    writeSection("peers-laptop", section);
    const readmePath = join(ROOT, "README.md");
    const current = readFileSync(readmePath, "utf8");
    const re = /<!-- peers-laptop:start -->[\s\S]*<!-- peers-laptop:end -->/;
    if (re.test(current)) { writeFileSync(readmePath, current.replace(re, () => readme)); log("README.md: laptop table updated"); }
    else log("README.md has no <!-- peers-laptop:start --> marker: its table is printed above");
    log("bench/RESULTS.md: section peers-laptop written");
  } finally {
    clearInterval(sampler);
    for (const s of servers) await s.stop().catch(() => undefined);
    // The servers' data folders hold the uploaded inputs and every run's outputs (large ones too).
    for (const d of ["operon-data", "operon-data-2"]) rmSync(join(OUT, d), { recursive: true, force: true });
  }
}

await main();
