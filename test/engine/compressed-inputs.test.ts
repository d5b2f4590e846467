/**
 * Compressed data as a lab has it, through the embedded engine and the real Debian tools:
 * reads as `.fastq.gz` (gzip) and `.fq.gz` (bgzip) simulated from a sample with SNVs planted
 * at known places (test/support/planted.ts), against an uncompressed reference and a bgzip
 * `.fa.gz` one. The variants called must be the variants planted — positions, alleles and
 * genotypes — and the reads must map. Runs a tool cannot read are refused at submission
 * (422 naming the input) with what to do: a gzipped FASTA for hisat2-build, a compressed
 * file for `tabix bgzip` (a tool run), and, by its bytes, a plain-gzip reference for
 * bcftools mpileup (engine/compression.ts).
 */
import t from "tap";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync, gzipSync } from "node:zlib";
import { compressionRefusals } from "../../engine/compression.js";
import type { PipelineSpec } from "../../core/spec/schema.js";
import { defaultCatalogue } from "../../core/tools/index.js";
import { endedRun, readStored, testApp } from "../support/app.js";
import { plantedSample } from "../support/planted.js";

const dir = mkdtempSync(join(tmpdir(), "operon-compressed-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const sample = plantedSample(dir, { seed: 7 });
const file = (name: string) => readFileSync(join(dir, name));
const bgzip = (name: string) => execFileSync("bgzip", ["-c", join(dir, name)], { maxBuffer: 1 << 26 });
// The bgzip reference, with the .fai and .gzi samtools faidx writes beside it.
const refBgz = bgzip("ref.fa");
writeFileSync(join(dir, "ref.fa.gz"), refBgz);
execFileSync("samtools", ["faidx", "ref.fa.gz"], { cwd: dir });

const a = await testApp({ engine: {} });
t.teardown(() => a.close());
await a.service.createWorkspace("acme", "ws1");
const h = { authorization: `Bearer ${await a.key("acme", ["tools", "files"])}` };
const root = "orgs/acme/workspaces/ws1/";
const workspace: Record<string, Buffer> = {
  "data/ref.fa": file("ref.fa"),
  "data/ref.fa.gz": refBgz,
  "data/ref.fa.gz.fai": file("ref.fa.gz.fai"),
  "data/ref.fa.gz.gzi": file("ref.fa.gz.gzi"),
  "data/plain-gzip.fa.gz": gzipSync(file("ref.fa")),
  "data/s1_R1.fastq.gz": gzipSync(file("r1.fq")),
  "data/s1_R2.fq.gz": bgzip("r2.fq"),
};
for (const [k, v] of Object.entries(workspace)) await a.store.put(root + k, v);

type RunView = { status: string; steps: Array<{ step_id: string; status: string; error: string | null }>; output_paths: string[] };
const reads = { reads1: "data/s1_R1.fastq.gz", reads2: "data/s1_R2.fq.gz", sampleName: "s1" };
const submit = (pipeline: string, input: Record<string, string>) =>
  a.app.inject({ method: "POST", url: "/v1/pipelines", headers: h, payload: { workspace_id: "ws1", pipeline_id: pipeline, input } });
async function completed(pipeline: string, input: Record<string, string>): Promise<RunView> {
  const res = await submit(pipeline, input);
  if (res.statusCode !== 201) throw new Error(res.body);
  return endedRun<RunView>(a, h, res.json().data.id, { timeoutMs: 120_000 });
}

/** The calls of a bgzip VCF: position, alleles and the sample's genotype. */
async function calls(path: string): Promise<string[]> {
  const text = gunzipSync(await readStored(a.store, root + path)).toString("utf8");
  return text.split("\n").filter((l) => l && !l.startsWith("#")).map((l) => {
    const c = l.split("\t");
    return `${c[1]} ${c[3]}>${c[4]} ${(c[9] ?? "").split(":")[0]}`;
  });
}
const planted = sample.snvs.map((s) => `${s.pos} ${s.ref}>${s.alt} ${s.gt}`);

for (const [what, reference] of [["an uncompressed reference", "data/ref.fa"], ["a bgzip reference (.fa.gz)", "data/ref.fa.gz"]] as const) {
  t.test(`variant-calling on .fastq.gz/.fq.gz reads and ${what}: the variants found are the variants planted`, async (t) => {
    const run = await completed("variant-calling", { ...reads, reference });
    t.equal(run.status, "completed", JSON.stringify(run.steps.filter((s) => s.error)));
    const vcf = run.output_paths.find((p) => p.endsWith("/s1.vcf.gz"));
    t.ok(vcf && run.output_paths.includes(`${vcf}.tbi`), "the indexed VCF is published with its .tbi");
    const found = await calls(vcf as string);
    t.same(found, planted, `${planted.length} planted (${sample.snvs.filter((s) => s.gt === "0/1").length} heterozygous), ${found.length} found, all equal`);
    t.comment(`planted ${planted.length}, found ${found.length}, in common ${found.filter((f) => planted.includes(f)).length}`);
  });
}

t.test("bwa-align on gzip/bgzip reads and a bgzip reference: every read pair maps", async (t) => {
  const run = await completed("bwa-align", { ...reads, reference: "data/ref.fa.gz" });
  t.equal(run.status, "completed", JSON.stringify(run.steps.filter((s) => s.error)));
  const flagstat = (await readStored(a.store, root + (run.output_paths.find((p) => p.endsWith(".flagstat.txt")) as string))).toString();
  const total = sample.pairs * 2;
  t.match(flagstat, new RegExp(`^${total} \\+ 0 in total`, "m"), `all ${total} reads read from the compressed FASTQs`);
  const mapped = Number(/^(\d+) \+ 0 mapped/m.exec(flagstat)?.[1]);
  t.ok(mapped >= total * 0.995, `mapped ${mapped} of ${total}`);
  t.comment(`bwa-align: ${mapped} of ${total} reads mapped`);
});

t.test("fastq-qc on .fastq.gz and .fq.gz: FastQC counts every read", async (t) => {
  const run = await completed("fastq-qc", { reads1: reads.reads1, reads2: reads.reads2, sampleName: "s1" });
  t.equal(run.status, "completed", JSON.stringify(run.steps.filter((s) => s.error)));
  for (const name of ["s1_R1_fastqc.html", "s1_R2_fastqc.html"]) {
    const html = run.output_paths.find((p) => p.endsWith(`/${name}`));
    t.ok(html, `${name}: the report is named without .fastq.gz/.fq.gz`);
    t.match((await readStored(a.store, root + (html as string))).toString(), new RegExp(`Total Sequences</td><td>${sample.pairs}<`), `${name}: ${sample.pairs} sequences`);
  }
});

t.test("refused at submission, naming the input and what to do", async (t) => {
  const runs = async () => (await a.app.inject({ method: "GET", url: "/v1/pipelines?workspace_id=ws1", headers: h })).json().data.length as number;
  const before = await runs();
  const hisat = await submit("hisat2-align", { ...reads, reference: "data/ref.fa.gz" });
  t.equal(hisat.statusCode, 422, hisat.body);
  t.match(hisat.json().details.errors, [{ code: "unsupported_compression", path: "/input/reference", message: /hisat2 build.*uncompressed only: decompress it/ }]);
  t.ok(before > 0, `${before} runs so far`);
  t.equal(await runs(), before, "no run was created");

  const tool = await a.app.inject({ method: "POST", url: "/v1/tools/tabix/run", headers: h, payload: { workspace_id: "ws1", input: { command: "bgzip", inputFile: "data/s1_R2.fq.gz" } } });
  t.equal(tool.statusCode, 422, tool.body);
  t.match(tool.json().details.errors, [{ code: "unsupported_compression", path: "/steps/0/parameters/inputFile" }]);
  t.match(tool.json().message, /data\/s1_R2\.fq\.gz\) is gzip-compressed.*tabix bgzip/);

  // By the file's bytes: a plain-gzip reference where bcftools mpileup needs bgzip (or none).
  const spec = JSON.parse(readFileSync(new URL("../../pipelines/builtin/variant-calling.pipeline.json", import.meta.url), "utf8")) as PipelineSpec;
  const check = (reference: string) => compressionRefusals(a.store, root, spec, { ...reads, reference }, defaultCatalogue);
  const refused = await check("data/plain-gzip.fa.gz");
  t.match(refused, [{ code: "unsupported_compression", path: "/input/reference", message: /plain gzip, not bgzip, and step "mpileup" \(bcftools mpileup\).*recompress it with bgzip/ }]);
  t.same(await check("data/ref.fa.gz"), [], "a bgzip reference passes");
  const pipelineRun = await submit("variant-calling", { ...reads, reference: "data/plain-gzip.fa.gz" });
  t.equal(pipelineRun.statusCode, 422, `a pipeline run reads the bytes at submission: ${pipelineRun.body}`);
  t.match(pipelineRun.json().details.errors, [{ code: "unsupported_compression", path: "/input/reference", message: /plain gzip, not bgzip/ }]);
  t.equal(await runs(), before, "still no run was created");
  const viaTool = await a.app.inject({ method: "POST", url: "/v1/tools/samtools/run", headers: h, payload: { workspace_id: "ws1", input: { command: "tabix", inputFile: "data/plain-gzip.fa.gz" } } });
  t.equal(viaTool.statusCode, 422, "a tool run reads the bytes too");
  t.match(viaTool.json().message, /plain gzip, not bgzip/);
});
