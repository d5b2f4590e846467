/**
 * Viewer links on compressed files as a lab has them, made by Debian's bgzip, tabix, gzip and
 * samtools (app.inject, the local store): a `.vcf.gz` with its `.tbi` is served as it is, its
 * index the one beside it (nothing converted or rebuilt); FASTQ as `.fq.gz` (gzip) and
 * `.fastq.gz` (bgzip) in the read browser; a bgzip `.fa.gz` served compressed with the `.fai`
 * and `.gzi` beside it, or with ones built when they are not; a plain-gzip `.fa.gz`
 * decompressed (it cannot be read at random).
 */
import t from "tap";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { testApp } from "../support/app.js";

const FIX = new URL("../fixtures/viewers/", import.meta.url);
const dir = mkdtempSync(join(tmpdir(), "viewer-gz-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string) => readFileSync(join(dir, name));
const sh = (argv: string[]) => execFileSync(argv[0] as string, argv.slice(1), { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });

writeFileSync(join(dir, "t.vcf"), readFileSync(new URL("nfcore-sarscov2-test.vcf", FIX)));
sh(["bgzip", "-k", "t.vcf"]);
sh(["tabix", "-p", "vcf", "t.vcf.gz"]);
writeFileSync(join(dir, "lambda.fa"), readFileSync(new URL("lambda_virus.fa", FIX)));
sh(["bgzip", "-k", "lambda.fa"]);
sh(["samtools", "faidx", "lambda.fa.gz"]);
sh(["wgsim", "-N", "300", "-1", "100", "-2", "100", "-S", "5", "lambda.fa", "r1.fq", "r2.fq"]);
sh(["bgzip", "-k", "r1.fq"]);

const a = await testApp();
t.teardown(() => a.close());
await a.service.createWorkspace("acme", "ws1");
const h = { authorization: `Bearer ${await a.key("acme", ["files"])}` };
const root = "orgs/acme/workspaces/ws1/";
const derived = `_system/${root}derived/`;
const put = (key: string, body: Buffer) => a.store.put(root + key, body);

async function open(body: Record<string, unknown>) {
  const r = await a.app.inject({ method: "POST", url: "/v1/visualizations/viewer-url", headers: h, payload: { workspace_id: "ws1", ...body } });
  if (r.statusCode !== 200) throw new Error(r.body);
  const base = new URL(r.json().data.viewer_url).pathname;
  const meta = await a.app.inject({ method: "GET", url: `${base}/meta` });
  const bytes = async (name: string) => (await a.app.inject({ method: "GET", url: `${base}/data/${name}` })).rawPayload;
  return { base, status: meta.statusCode, m: meta.json().data, body: meta.body, bytes };
}
const derivedFiles = async () => (await a.store.list(derived, { limit: 1000 })).items.map((i) => i.key);
const added = async (before: string[]) => (await derivedFiles()).filter((k) => !before.includes(k)).map((k) => k.split("/").pop());

t.test(".vcf.gz with its .tbi: the file and the index beside it are served, nothing is rebuilt", async (t) => {
  await put("calls/t.vcf.gz", file("t.vcf.gz"));
  await put("calls/t.vcf.gz.tbi", file("t.vcf.gz.tbi"));
  const before = await derivedFiles();
  const v = await open({ file_path: "calls/t.vcf.gz" });
  t.equal(v.status, 200, v.body);
  t.same(v.m.track, { format: "vcf", indexed: true });
  t.equal(v.m.stats.variants, 9, "bcftools index -s counts the 9 records through the .tbi");
  t.same(v.m.notes, [], "nothing was converted or indexed");
  t.same(v.m.data, { primary: "data/primary", "primary-index": "data/primary-index" });
  t.ok((await v.bytes("primary")).equals(file("t.vcf.gz")), "the VCF is the uploaded bgzip file, byte for byte");
  t.ok((await v.bytes("primary-index")).equals(file("t.vcf.gz.tbi")), "the index is the .tbi tabix made");
  t.same(await added(before), ["view.json"], "the derived area holds the description only");
});

t.test("FASTQ as .fq.gz (gzip) and .fastq.gz (bgzip) in the read browser", async (t) => {
  const text = file("r1.fq").toString("utf8").split("\n");
  await put("reads/r1.fq.gz", gzipSync(file("r1.fq")));
  await put("reads/r1.fastq.gz", file("r1.fq.gz"));
  for (const path of ["reads/r1.fq.gz", "reads/r1.fastq.gz"]) {
    const v = await open({ file_path: path });
    t.equal(v.status, 200, v.body);
    t.equal(v.m.fastq.summary.reads, 300, `${path}: all 300 reads summarised`);
    t.equal(v.m.fastq.complete, true);
    const page = (await a.app.inject({ method: "GET", url: `${v.base}/reads?offset=299&limit=5` })).json().data;
    t.equal(page.total, 300);
    t.same(page.reads.map((r: { name: string; seq: string }) => [r.name, r.seq]), [[text[4 * 299]?.slice(1), text[4 * 299 + 1]]], `${path}: the last read, as the file holds it`);
  }
});

t.test("a bgzip .fa.gz is served compressed, with the .fai and .gzi beside it or built ones", async (t) => {
  await put("ref/lambda.fa.gz", file("lambda.fa.gz"));
  await put("ref/lambda.fa.gz.fai", file("lambda.fa.gz.fai"));
  await put("ref/lambda.fa.gz.gzi", file("lambda.fa.gz.gzi"));
  const before = await derivedFiles();
  const v = await open({ file_path: "ref/lambda.fa.gz" });
  t.equal(v.status, 200, v.body);
  t.same(v.m.sequences, [{ name: "gi|9626243|ref|NC_001416.1|", length: 48502 }]);
  t.same(v.m.notes, [], "the indexes beside it are used");
  t.same(v.m.data, { primary: "data/primary", "primary-index": "data/primary-index", "primary-gzi": "data/primary-gzi" });
  t.ok((await v.bytes("primary")).equals(file("lambda.fa.gz")), "the FASTA is served as uploaded, compressed");
  t.ok((await v.bytes("primary-index")).equals(file("lambda.fa.gz.fai")));
  t.ok((await v.bytes("primary-gzi")).equals(file("lambda.fa.gz.gzi")));
  t.same(await added(before), ["view.json"], "nothing decompressed or rebuilt");

  await put("bare/lambda.fa.gz", file("lambda.fa.gz"));
  const built = await open({ file_path: "bare/lambda.fa.gz" });
  t.equal(built.status, 200, built.body);
  t.match(built.m.notes.join(" "), /\.fai and \.gzi built with samtools faidx/);
  t.ok((await built.bytes("primary")).equals(file("lambda.fa.gz")), "still served compressed");
  t.ok((await built.bytes("primary-index")).equals(file("lambda.fa.gz.fai")), "the .fai samtools builds");
  t.ok((await built.bytes("primary-gzi")).equals(file("lambda.fa.gz.gzi")), "the .gzi samtools builds");

  // As the reference of a variant link.
  const withRef = await open({ file_path: "calls/t.vcf.gz", reference: "ref/lambda.fa.gz" });
  t.equal(withRef.status, 200, withRef.body);
  t.same(Object.keys(withRef.m.data).sort(), ["primary", "primary-index", "reference", "reference-gzi", "reference-index"]);
});

t.test("a plain-gzip .fa.gz is decompressed for the viewer", async (t) => {
  await put("ref/plain.fa.gz", gzipSync(file("lambda.fa")));
  const v = await open({ file_path: "ref/plain.fa.gz" });
  t.equal(v.status, 200, v.body);
  t.match(v.m.notes.join(" "), /decompressed and indexed/);
  t.same(Object.keys(v.m.data).sort(), ["primary", "primary-index"], "no .gzi: the decompressed copy is served");
  t.ok((await v.bytes("primary")).equals(file("lambda.fa")), "the decompressed sequence");
  t.equal(v.m.stats.bases, 48502);
});
