/**
 * The built-in pipelines (pipelines/builtin/*.pipeline.json) against the real Debian tools.
 * Each spec must validate with no errors and no warnings; then it is run end to end the way
 * an executor runs it: inputs resolved, steps walked in topological order, `${...}` resolved
 * against the published outputs of earlier steps, `buildInvocation` for the local runtime,
 * inputs (and the index files beside them) staged into a per-step working directory, the
 * argv run without a shell, and the outputs (with their index files) published to
 * `out/<stepId>/`. Each pipeline ends with a check on its biology: read counts, VCF, reports.
 */
import t, { type Test } from "tap";
import { spawnSync } from "node:child_process";
import { closeSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { gunzipSync } from "node:zlib";
import { buildDag } from "../../core/dag.js";
import { resolveInputs, resolveStepParameters } from "../../core/spec/resolve.js";
import { PipelineSpecSchema, type PipelineSpec } from "../../core/spec/schema.js";
import { validateSpec } from "../../core/spec/validate.js";
import { buildInvocation, defaultCatalogue, secondaryCandidates } from "../../core/tools/index.js";

const BUILTIN_DIR = join(import.meta.dirname, "..", "..", "pipelines", "builtin");
const top = mkdtempSync(join(tmpdir(), "operon-builtin-"));
t.teardown(() => spawnSync("rm", ["-rf", top]));

// Shared data: a random 20 kb reference and 2,000 read pairs simulated from it with wgsim.
const data = join(top, "data");
mkdirSync(data);
let seed = 20_240_601;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
const seq = Array.from({ length: 20_000 }, () => "ACGT"[Math.floor(rand() * 4)]).join("");
writeFileSync(join(data, "ref.fa"), `>chr1\n${seq.match(/.{1,60}/g)?.join("\n")}\n`);
const sim = spawnSync("wgsim", ["-N", "2000", "-1", "100", "-2", "100", "-S", "7", "ref.fa", "r1.fastq", "r2.fastq"], { cwd: data, encoding: "utf8" });
if (sim.status !== 0) throw new Error(`wgsim failed (${sim.status}): ${sim.stderr}`);

/** A fresh run root holding a copy of the data under data/, as a workspace would. */
function runRoot(name: string): string {
  const root = join(top, name);
  mkdirSync(join(root, "data"), { recursive: true });
  for (const f of ["ref.fa", "r1.fastq", "r2.fastq"]) copyFileSync(join(data, f), join(root, "data", f));
  return root;
}

/** Where a secondary file of `src` lands when `src` is staged as `dst` (renamed along with it). */
function secondaryName(src: string, dst: string, sec: string): string {
  const [s, d, x] = [basename(src), basename(dst), basename(sec)];
  if (x.startsWith(s)) return d + x.slice(s.length);
  const [ss, ds] = [s.replace(/\.[^.]+$/, ""), d.replace(/\.[^.]+$/, "")];
  return x.startsWith(ss) ? ds + x.slice(ss.length) : x;
}

/**
 * Runs one step like an executor: stages inputs with their secondary files, runs the argv
 * (no shell), checks every declared output, publishes the outputs to out/<stepId>/.
 * Returns the root-relative published paths, in the invocation's output order, or
 * undefined when the step failed (the failure, with argv and stderr, is recorded on `tt`).
 */
function runStep(tt: Test, root: string, stepId: string, toolName: string, params: Record<string, unknown>): string[] | undefined {
  const label = `${stepId} (${toolName} ${String(params.command ?? params[`${toolName}Command`] ?? "")})`;
  const tool = defaultCatalogue.get(toolName);
  if (!tool) { tt.fail(`${label}: unknown tool`); return undefined; }
  const built = buildInvocation(tool, params, { runtime: "local" });
  if (!built.ok) { tt.fail(`${label}: buildInvocation: ${JSON.stringify(built.errors)}`); return undefined; }
  const inv = built.invocation;
  const wd = join(root, "work", stepId);
  mkdirSync(wd, { recursive: true });
  for (const input of inv.inputs) {
    const src = join(root, input.source);
    const dst = join(wd, input.local);
    mkdirSync(dirname(dst), { recursive: true });
    if (!existsSync(src)) { tt.fail(`${label}: input ${input.param} = ${input.source} does not exist`); return undefined; }
    copyFileSync(src, dst);
    for (const sec of secondaryCandidates(src)) {
      if (existsSync(sec)) copyFileSync(sec, join(dirname(dst), secondaryName(src, dst, sec)));
    }
  }
  for (const d of inv.mkdirs) mkdirSync(join(wd, d), { recursive: true });
  const fd = inv.stdout !== undefined ? openSync(join(wd, inv.stdout), "w") : "ignore";
  const [cmd, ...args] = inv.argv;
  const res = spawnSync(cmd ?? "", args, {
    cwd: wd, stdio: ["ignore", fd, "pipe"], encoding: "utf8", timeout: 60_000,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: wd, LC_ALL: "C" },
  });
  if (typeof fd === "number") closeSync(fd);
  if (res.status !== 0) {
    tt.fail(`${label} exits 0`, { argv: inv.argv, status: res.status, signal: res.signal, error: res.error?.message, stderr: res.stderr?.slice(-2000) });
    return undefined;
  }
  tt.pass(`${label} exits 0`);
  const published: string[] = [];
  let complete = true;
  for (const o of inv.outputs) {
    const p = join(wd, o.path);
    const ok = existsSync(p) && statSync(p).size > 0;
    tt.ok(ok, `${label} wrote ${o.path}`, ok ? {} : { argv: inv.argv, stderr: res.stderr?.slice(-2000) });
    if (!ok) { complete = false; continue; }
    const rel = join("out", stepId, o.path);
    mkdirSync(dirname(join(root, rel)), { recursive: true });
    copyFileSync(p, join(root, rel));
    for (const s of o.secondary) {
      const there = existsSync(join(wd, s));
      tt.ok(there, `${label} wrote secondary ${s}`);
      if (there) copyFileSync(join(wd, s), join(root, "out", stepId, s));
      else complete = false;
    }
    published.push(rel);
  }
  return complete ? published : undefined;
}

/** Validates a built-in spec file: valid, no errors, no warnings; returns the typed spec. */
function loadSpec(tt: Test, id: string): PipelineSpec | undefined {
  const file = join(BUILTIN_DIR, `${id}.pipeline.json`);
  const raw: unknown = JSON.parse(readFileSync(file, "utf8"));
  const v = validateSpec(raw);
  tt.ok(v.valid, `${id}: validateSpec reports valid`);
  tt.same(v.errors, [], `${id}: no validation errors`);
  tt.same(v.warnings, [], `${id}: no validation warnings`);
  const parsed = PipelineSpecSchema.safeParse(raw);
  if (!parsed.success || !v.valid) return undefined;
  const spec = parsed.data;
  tt.equal(spec.specVersion, "1.0");
  tt.equal(spec.id, id, "id is the file's base name");
  tt.equal(spec.executionMode, "process-manager");
  for (const k of ["name", "description", "category", "estimatedDuration"] as const) tt.ok(spec[k], `${id} has ${k}`);
  tt.ok(spec.tags?.length, `${id} has tags`);
  for (const input of spec.inputs ?? []) {
    if (input.type === "file") tt.equal(input.default, undefined, `file input ${input.name} has no default`);
  }
  for (const s of spec.steps) tt.ok(s.description, `step ${s.stepId} has a description`);
  return spec;
}

/** Runs a spec end to end; returns each step's published outputs, or undefined on a failure. */
function runPipeline(tt: Test, spec: PipelineSpec, root: string, supplied: Record<string, string>): Map<string, string[]> | undefined {
  const inputs = resolveInputs(spec, supplied);
  if (!inputs.ok) { tt.fail(`resolveInputs: ${JSON.stringify(inputs.errors)}`); return undefined; }
  const order = buildDag(spec.steps).topologicalOrder();
  if (!order) { tt.fail("the step graph has a cycle"); return undefined; }
  tt.same([...order].sort(), spec.steps.map((s) => s.stepId).sort(), "the order holds every step");
  const published = new Map<string, string[]>();
  const lookup = (stepId: string, output: "outputFile" | "outputFile2") => published.get(stepId)?.[output === "outputFile" ? 0 : 1];
  for (const stepId of order) {
    const step = spec.steps.find((s) => s.stepId === stepId);
    if (!step) { tt.fail(`no step ${stepId}`); return undefined; }
    const params = resolveStepParameters(step, inputs.values, lookup);
    if (!params.ok) { tt.fail(`${stepId}: resolveStepParameters: ${JSON.stringify(params.errors)}`); return undefined; }
    const outs = runStep(tt, root, stepId, step.toolName, params.parameters);
    if (!outs) return undefined;
    published.set(stepId, outs);
  }
  return published;
}

/** Loads, validates and runs one built-in pipeline, timing it; `check` gets the published outputs. */
function pipelineTest(id: string, supplied: (root: string, tt: Test) => Record<string, string> | undefined,
  check: (tt: Test, root: string, outs: Map<string, string[]>) => void): void {
  t.test(id, async (tt) => {
    const start = performance.now();
    const spec = loadSpec(tt, id);
    if (!spec) return;
    const root = runRoot(id);
    const values = supplied(root, tt);
    if (!values) return;
    const outs = runPipeline(tt, spec, root, values);
    if (outs) check(tt, root, outs);
    tt.comment(`${id}: ${((performance.now() - start) / 1000).toFixed(1)} s`);
  });
}

const PAIRED = { reads1: "data/r1.fastq", reads2: "data/r2.fastq", reference: "data/ref.fa" };
const text = (root: string, rel: string | undefined) => readFileSync(join(root, rel ?? "missing"), "utf8");
const out = (outs: Map<string, string[]>, stepId: string, i = 0) => outs.get(stepId)?.[i];
/** Runs a tool outside a pipeline (argv only) and returns its stdout. */
const tool = (cwd: string, argv: string[]) => {
  const r = spawnSync(argv[0] ?? "", argv.slice(1), { cwd, encoding: "utf8", maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`${argv.join(" ")}: ${r.stderr}`);
  return r.stdout;
};
/** FASTQ records in a gzip file (checking the gzip magic first). */
function gzipFastqNames(tt: Test, file: string): string[] {
  const buf = readFileSync(file);
  tt.ok(buf[0] === 0x1f && buf[1] === 0x8b, `${basename(file)} is gzip-compressed`);
  const lines = gunzipSync(buf).toString("utf8").split("\n").filter((l) => l !== "");
  tt.equal(lines.length % 4, 0, `${basename(file)} holds whole FASTQ records`);
  return lines.filter((_, i) => i % 4 === 0).map((l) => l.replace(/\/[12]$/, "").split(/\s/)[0] ?? "");
}
/**
 * 2,000 simulated pairs: every read counted once, nearly all mapped. wgsim's fragments are
 * 500 ± 50 bases, so bowtie2 (default --maxins 500) pairs only about a third properly.
 */
function checkFlagstat(tt: Test, flagstat: string, minProperlyPaired: number): void {
  tt.match(flagstat, /^4000 \+ 0 in total/m, "flagstat counts all 4000 reads (2000 pairs)");
  tt.match(flagstat, /^0 \+ 0 secondary/m, "no secondary alignments");
  const mapped = /^(\d+) \+ 0 mapped/m.exec(flagstat);
  tt.ok(mapped && Number(mapped[1]) >= 3900, `at least 3900 of 4000 reads mapped (${mapped?.[1]})`);
  const paired = /^(\d+) \+ 0 properly paired/m.exec(flagstat);
  tt.ok(paired && Number(paired[1]) >= minProperlyPaired, `at least ${minProperlyPaired} reads properly paired (${paired?.[1]})`);
}

pipelineTest("fastq-qc", () => ({ reads1: "data/r1.fastq", reads2: "data/r2.fastq" }), (tt, root, outs) => {
  const [html1, zip1, html2] = outs.get("fastqc") ?? [];
  tt.match(html1, /r1_fastqc\.html$/);
  tt.match(text(root, html1), /r1\.fastq/, "the R1 report names its input");
  tt.match(text(root, html2), /r2\.fastq/, "the R2 report names its input");
  tt.match(text(root, html1), /Total Sequences<\/td><td>2000</, "the R1 report counts 2000 sequences");
  tt.equal(readFileSync(join(root, zip1 ?? "missing")).subarray(0, 2).toString("latin1"), "PK", "the data file is a zip");
  const [p1, p2, u1, u2] = outs.get("trim") ?? [];
  tt.match(p1, /out\/trim\/sample_R1\.paired\.fastq\.gz$/, "outputs are named after the default sampleName");
  tt.match(u1, /sample_R1\.unpaired\.fastq\.gz$/);
  tt.match(u2, /sample_R2\.unpaired\.fastq\.gz$/);
  const n1 = gzipFastqNames(tt, join(root, p1 ?? "missing"));
  const n2 = gzipFastqNames(tt, join(root, p2 ?? "missing"));
  tt.ok(n1.length > 1000 && n1.length <= 2000, `most pairs survive trimming (${n1.length} of 2000)`);
  tt.same(n1, n2, "the paired outputs hold the same reads in the same order");
});

pipelineTest("bwa-align", () => PAIRED, (tt, root, outs) => {
  checkFlagstat(tt, text(root, out(outs, "flagstat")), 3800);
  const bam = out(outs, "index_bam");
  tt.match(bam, /out\/index_bam\/sample\.bam$/);
  tt.ok(existsSync(join(root, `${bam}.bai`)), "the BAM is published with its .bai");
  tt.match(tool(root, ["samtools", "view", "-H", bam ?? "missing"]), /^@RG\tID:sample\tSM:sample$/m, "the read group carries the sample name");
  tt.match(tool(root, ["samtools", "view", "-H", bam ?? "missing"]), /^@HD.*\tSO:coordinate/m, "the BAM is coordinate-sorted");
});

pipelineTest("variant-calling", () => PAIRED, (tt, root, outs) => {
  const vcf = out(outs, "index_vcf");
  tt.match(vcf, /out\/index_vcf\/sample\.vcf\.gz$/);
  const buf = readFileSync(join(root, vcf ?? "missing"));
  // bgzip: gzip with FEXTRA holding the "BC" subfield (block size).
  tt.ok(buf[0] === 0x1f && buf[1] === 0x8b && ((buf[3] ?? 0) & 4) !== 0 && buf[12] === 0x42 && buf[13] === 0x43, "the VCF is bgzip-compressed");
  tt.ok(existsSync(join(root, `${vcf}.tbi`)) && statSync(join(root, `${vcf}.tbi`)).size > 0, "the VCF is published with its .tbi");
  const lines = gunzipSync(buf).toString("utf8").split("\n");
  tt.match(lines[0], /^##fileformat=VCFv4/);
  tt.ok(lines.includes("#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\tsample"), "#CHROM header with the sample column");
  const records = lines.filter((l) => l !== "" && !l.startsWith("#"));
  // wgsim mutates the reference at a rate of 0.001: about 20 sites in 20 kb.
  tt.ok(records.length >= 5 && records.length <= 60, `variants found (${records.length})`);
  tt.ok(records.every((r) => r.startsWith("chr1\t")), "every record is on chr1");
  tt.match(tool(root, ["tabix", vcf ?? "missing", "chr1:1-20000"]).split("\n").filter(Boolean).length, records.length, "the index finds every record");
});

pipelineTest("bowtie2-align", () => PAIRED, (tt, root, outs) => {
  checkFlagstat(tt, text(root, out(outs, "flagstat")), 1000);
  tt.ok(existsSync(join(root, `${out(outs, "index_bam")}.bai`)), "the BAM is published with its .bai");
});

pipelineTest("hisat2-align", () => PAIRED, (tt, root, outs) => {
  const summary = text(root, out(outs, "align", 1));
  tt.match(summary, /^2000 reads; of these:/m, "hisat2 read 2000 pairs");
  const rate = /([\d.]+)% overall alignment rate/.exec(summary);
  tt.ok(rate && Number(rate[1]) >= 95, `overall alignment rate ≥ 95% (${rate?.[1]}%)`);
  const bam = out(outs, "index_bam") ?? "missing";
  tt.ok(existsSync(join(root, `${bam}.bai`)), "the BAM is published with its .bai");
  tt.equal(tool(root, ["samtools", "view", "-c", "-F", "0x900", bam]).trim(), "4000", "4000 primary records (2000 pairs)");
  tt.equal(tool(root, ["samtools", "idxstats", bam]).split("\t")[0], "chr1", "the index lists chr1");
});

pipelineTest("coverage", (root, tt) => {
  // A sorted, indexed BAM made with the catalogue's tools, placed in the workspace as data/s1.bam.
  const [ref] = runStep(tt, root, "prep-bwa-index", "bwa", { command: "index", inputFile: "data/ref.fa" }) ?? [];
  const [sam] = ref ? runStep(tt, root, "prep-bwa-mem", "bwa", { command: "mem", reference: ref, inputFile: "data/r1.fastq", inputFile2: "data/r2.fastq", outputFile: "s1.sam" }) ?? [] : [];
  const [sorted] = sam ? runStep(tt, root, "prep-sort", "samtools", { command: "sort", inputFile: sam, outputFile: "s1.sorted.bam" }) ?? [] : [];
  const [indexed] = sorted ? runStep(tt, root, "prep-index", "samtools", { command: "index", inputFile: sorted, outputFile: "s1.bam" }) ?? [] : [];
  if (!indexed) return undefined;
  copyFileSync(join(root, indexed), join(root, "data", "s1.bam"));
  copyFileSync(join(root, `${indexed}.bai`), join(root, "data", "s1.bam.bai"));
  return { bam: "data/s1.bam" };
}, (tt, root, outs) => {
  tt.ok(existsSync(join(root, "work", "depth", "in", "1", "s1.bam.bai")), "the .bai travelled with the input BAM");
  const depth = text(root, out(outs, "depth")).split("\n").filter(Boolean).map((l) => l.split("\t"));
  tt.ok(depth.length > 19_000 && depth.length <= 20_000, `depth has one line per covered position of the 20 kb reference (${depth.length})`);
  tt.ok(depth.every((c) => c.length === 3 && c[0] === "chr1"), "depth lines are chr1, position, depth");
  const depthSum = depth.reduce((a, c) => a + Number(c[2]), 0);
  const bg = text(root, out(outs, "genomecov")).split("\n").filter(Boolean).map((l) => l.split("\t"));
  tt.ok(bg.length > 0, "the bedGraph has lines");
  tt.ok(bg.every((c) => c.length === 4 && c[0] === "chr1" && Number(c[1]) < Number(c[2]) && Number(c[3]) > 0), "bedGraph lines are chr1, start < end, depth > 0");
  tt.ok(bg.every((c, i) => i === 0 || Number(c[1]) >= Number(bg[i - 1]?.[2])), "bedGraph intervals are sorted and disjoint");
  const bgSum = bg.reduce((a, c) => a + (Number(c[2]) - Number(c[1])) * Number(c[3]), 0);
  tt.ok(Math.abs(bgSum - depthSum) / depthSum < 0.02, `bedGraph and depth agree on total coverage (${bgSum} vs ${depthSum})`);
  // 2000 pairs × 200 bases over 20 kb: a mean depth near 20.
  const [header, row] = text(root, out(outs, "summary")).split("\n");
  tt.match(header, /^#rname\tstartpos\tendpos\tnumreads\tcovbases\tcoverage\tmeandepth/);
  const cols = (row ?? "").split("\t");
  tt.equal(cols[0], "chr1");
  tt.equal(cols[2], "20000", "the reference is 20,000 bases");
  tt.ok(Number(cols[3]) >= 3900 && Number(cols[3]) <= 4000, `numreads is about 4000 (${cols[3]})`);
  tt.ok(Number(cols[6]) > 17 && Number(cols[6]) < 21, `mean depth about 20 (${cols[6]})`);
});
