/**
 * Viewer links over HTTP (app.inject, the local store, Debian's samtools/bcftools/tabix): the
 * API's rules, the capability's limits (tampered 403, expired 410, no other file, no
 * listing, no API), Range serving, and the derived area (hidden from listings, reused).
 */
import t from "tap";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { testApp, type TestApp } from "../support/app.js";

const FIX = new URL("../fixtures/viewers/", import.meta.url);
const fixture = (name: string) => readFileSync(new URL(name, FIX));

async function setup() {
  const a = await testApp();
  await a.service.createWorkspace("acme", "ws1");
  await a.service.createWorkspace("acme", "ws2");
  await a.service.createWorkspace("other", "wsx");
  const key = await a.key("acme", ["files"]);
  return { a, h: { authorization: `Bearer ${key}` } };
}

const put = (a: TestApp, ws: string, key: string, body: Buffer | string, org = "acme") => a.store.put(`orgs/${org}/workspaces/${ws}/${key}`, body);
const pathOf = (url: string) => new URL(url).pathname;
const link = async (a: TestApp, h: Record<string, string>, body: Record<string, unknown>) => a.app.inject({ method: "POST", url: "/v1/visualizations/viewer-url", headers: h, payload: body });

t.test("issuing a link: fields, detection, workspace rules", async (t) => {
  const { a, h } = await setup();
  t.teardown(() => a.close());
  await put(a, "ws1", "calls/test.vcf", fixture("nfcore-sarscov2-test.vcf"));
  await put(a, "ws1", "notes/readme.md", "# notes\n");
  await put(a, "wsx", "x.vcf", fixture("nfcore-sarscov2-test.vcf"), "other");

  const ok = await link(a, h, { file_path: "calls/test.vcf", workspace_id: "ws1" });
  t.equal(ok.statusCode, 200, ok.body);
  const d = ok.json().data;
  t.equal(d.format, "vcf");
  t.equal(d.expires_in, 3600);
  t.match(d.viewer_url, /^http:\/\/localhost\/view\/[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
  t.ok(Math.abs(Date.parse(d.expires_at) - (a.clock.now() + 3600_000)) < 2000, "expires_at is an hour away");

  const alias = await link(a, h, { file_key: "calls/test.vcf", workspace_id: "ws1", expires_in: 60 });
  t.equal(alias.statusCode, 200, "file_key is an alias of file_path");
  t.equal(alias.json().data.expires_in, 60);

  for (const bad of [0, 86_401, 1.5]) {
    const r = await link(a, h, { file_path: "calls/test.vcf", workspace_id: "ws1", expires_in: bad });
    t.equal(r.statusCode, 400, `expires_in ${bad}`);
    t.match(r.json().message, /expires_in/);
  }
  const unknown = await link(a, h, { file_path: "notes/readme.md", workspace_id: "ws1" });
  t.equal(unknown.statusCode, 400);
  t.same(unknown.json().details.valid_values, ["vcf", "bam", "fasta", "pdb", "csv"]);
  const forced = await link(a, h, { file_path: "notes/readme.md", workspace_id: "ws1", format: "csv" });
  t.equal(forced.statusCode, 200, "format overrides detection");
  t.equal(forced.json().data.format, "csv");
  const badFormat = await link(a, h, { file_path: "calls/test.vcf", workspace_id: "ws1", format: "png" });
  t.equal(badFormat.statusCode, 400);
  t.same(badFormat.json().details.valid_values, ["vcf", "bam", "fasta", "pdb", "csv"]);

  const missing = await link(a, h, { file_path: "calls/none.vcf", workspace_id: "ws1" });
  t.equal(missing.statusCode, 404);
  const escape = await link(a, h, { file_path: "../ws2/calls/test.vcf", workspace_id: "ws1" });
  t.equal(escape.statusCode, 400);
  t.match(escape.json().message, /file_path/);
  const sys = await link(a, h, { file_path: "_system/keys/x.json", workspace_id: "ws1", format: "csv" });
  t.equal(sys.statusCode, 400, "_system/ is never a file");
  const region = await link(a, h, { file_path: "calls/test.vcf", workspace_id: "ws1", region: "MT192765.1:500-100" });
  t.equal(region.statusCode, 400);
  t.match(region.json().message, /^region:/);
  const notFasta = await link(a, h, { file_path: "calls/test.vcf", workspace_id: "ws1", reference: "calls/test.vcf" });
  t.equal(notFasta.statusCode, 400);
  t.match(notFasta.json().message, /^reference:/);
  const noFile = await link(a, h, {});
  t.equal(noFile.statusCode, 400);

  const otherOrg = await link(a, h, { file_path: "x.vcf", workspace_id: "wsx" });
  t.equal(otherOrg.statusCode, 404, "another organization's workspace is not found");
  const limited = await a.key("acme", ["files"], ["ws2"]);
  const denied = await link(a, { authorization: `Bearer ${limited}` }, { file_path: "calls/test.vcf", workspace_id: "ws1" });
  t.equal(denied.statusCode, 403);
  t.equal(denied.json().error, "workspace_access_denied");
  const noScope = await a.key("acme", ["query"]);
  t.equal((await link(a, { authorization: `Bearer ${noScope}` }, { file_path: "calls/test.vcf", workspace_id: "ws1" })).statusCode, 403, "scope files is required");
  t.equal((await link(a, {}, { file_path: "calls/test.vcf", workspace_id: "ws1" })).statusCode, 401);
});

t.test("a link is a capability for one file, until it expires", async (t) => {
  const { a, h } = await setup();
  t.teardown(() => a.close());
  const vcf = fixture("nfcore-sarscov2-test.vcf");
  await put(a, "ws1", "calls/test.vcf", vcf);
  await put(a, "ws1", "secret/other.csv", "a,b\n1,2\n");
  const url = (await link(a, h, { file_path: "calls/test.vcf", workspace_id: "ws1", expires_in: 120 })).json().data.viewer_url as string;
  const base = pathOf(url);

  const page = await a.app.inject({ method: "GET", url: base });
  t.equal(page.statusCode, 200);
  t.match(page.headers["content-type"], /text\/html/);
  t.match(page.headers["content-security-policy"], /default-src 'self'/);
  t.match(page.body, /test\.vcf/);
  t.notMatch(page.body, /https?:\/\/(?!localhost)/, "the page names no other host");

  const meta = await a.app.inject({ method: "GET", url: `${base}/meta` });
  t.equal(meta.statusCode, 200, meta.body);
  t.equal(meta.json().data.stats.variants, 9);
  t.equal(meta.json().data.locus, "MT192765.1:1-29829");
  t.notMatch(meta.body, /orgs\//, "storage keys stay on the server");

  const whole = await a.app.inject({ method: "GET", url: `${base}/data/primary` });
  t.equal(whole.statusCode, 200);
  t.equal(whole.body, vcf.toString());
  t.equal(whole.headers["accept-ranges"], "bytes");
  const part = await a.app.inject({ method: "GET", url: `${base}/data/primary`, headers: { range: "bytes=2-11" } });
  t.equal(part.statusCode, 206);
  t.equal(part.body, vcf.subarray(2, 12).toString());
  t.equal(part.headers["content-range"], `bytes 2-11/${vcf.length}`);
  t.equal(part.headers["content-encoding"], undefined);
  t.equal((await a.app.inject({ method: "GET", url: `${base}/data/primary`, headers: { range: `bytes=${vcf.length + 10}-` } })).statusCode, 416);
  const last = await a.app.inject({ method: "GET", url: `${base}/data/primary`, headers: { range: "bytes=-1" } });
  t.equal(last.statusCode, 206, "a suffix range (bytes=-1) is served");
  t.equal(last.body, vcf.subarray(vcf.length - 1).toString());
  t.equal(last.headers["content-range"], `bytes ${vcf.length - 1}-${vcf.length - 1}/${vcf.length}`);

  // Nothing else: no other name, no path, no listing, no API.
  for (const p of [`${base}/data/secret%2Fother.csv`, `${base}/data/..%2F..%2Fsecret%2Fother.csv`, `${base}/data/reference`, `${base}/files`, `${base}/rows`]) {
    const r = await a.app.inject({ method: "GET", url: p });
    t.ok(r.statusCode === 404, `${p} → ${r.statusCode}`);
    t.notMatch(r.body, /a,b/);
  }
  const token = base.split("/").pop() as string;
  for (const api of ["/v1/files?workspace_id=ws1", "/v1/workspaces"]) {
    const r = await a.app.inject({ method: "GET", url: api, headers: { authorization: `Bearer ${token}` } });
    t.equal(r.statusCode, 401, `the token is no API key (${api})`);
  }

  // Tampered: one character of the payload or of the signature.
  const [payload, sig] = token.split(".") as [string, string];
  const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === "A" ? "B" : "A") + s.slice(i + 1);
  const forged = JSON.parse(Buffer.from(payload, "base64url").toString());
  forged.k = "secret/other.csv";
  forged.f = "csv";
  for (const bad of [`${flip(payload, 5)}.${sig}`, `${payload}.${flip(sig, 3)}`, `${Buffer.from(JSON.stringify(forged)).toString("base64url")}.${sig}`, "nonsense"]) {
    const r = await a.app.inject({ method: "GET", url: `/view/${bad}` });
    t.equal(r.statusCode, 403);
    t.match(r.headers["content-type"], /text\/html/);
    t.match(r.body, /not valid/);
    const d = await a.app.inject({ method: "GET", url: `/view/${bad}/data/primary` });
    t.equal(d.statusCode, 403);
    t.notMatch(d.body, /a,b|fileformat/);
  }

  a.clock.advance(121_000);
  const expired = await a.app.inject({ method: "GET", url: base });
  t.equal(expired.statusCode, 410);
  t.match(expired.body, /expired/);
  t.equal((await a.app.inject({ method: "GET", url: `${base}/data/primary` })).statusCode, 410);
  t.equal((await a.app.inject({ method: "GET", url: `${base}/meta` })).statusCode, 410);
});

t.test("conversions go to a derived area that listings do not show, and are reused", async (t) => {
  const { a, h } = await setup();
  t.teardown(() => a.close());
  const dir = mkdtempSync(join(tmpdir(), "viewer-derive-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, "t.vcf"), fixture("nfcore-sarscov2-test.vcf"));
  execFileSync("bcftools", ["view", "--no-version", "-Ob", "-o", join(dir, "t.bcf"), join(dir, "t.vcf")]);
  await put(a, "ws1", "calls/t.bcf", readFileSync(join(dir, "t.bcf")));

  const url = (await link(a, h, { file_path: "calls/t.bcf", workspace_id: "ws1" })).json().data.viewer_url as string;
  const meta = await a.app.inject({ method: "GET", url: `${pathOf(url)}/meta` });
  t.equal(meta.statusCode, 200, meta.body);
  t.equal(meta.json().data.track.indexed, true);
  t.equal(meta.json().data.stats.variants, 9, "bcftools index -s counts the converted records");
  t.match(meta.json().data.notes.join(" "), /converted from BCF/);
  const gz = await a.app.inject({ method: "GET", url: `${pathOf(url)}/data/primary` });
  t.equal(gz.rawPayload.subarray(0, 2).toString("hex"), "1f8b", "served as BGZF, byte for byte");
  t.equal(gz.headers["content-encoding"], undefined);
  const idx = await a.app.inject({ method: "GET", url: `${pathOf(url)}/data/primary-index` });
  t.equal(idx.statusCode, 200);

  const list = await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=ws1", headers: h });
  t.same(list.json().data.map((f: { key: string }) => f.key), ["calls/t.bcf"], "derived files are not listed");
  const derived = await a.store.list("_system/orgs/acme/workspaces/ws1/derived/", { limit: 100 });
  t.ok(derived.items.some((i) => i.key.endsWith("variants.vcf.gz.tbi")), "the index is kept in the derived area");

  // A second link, on a fresh server over the same store, reads the kept result.
  const b = await testApp({ store: a.store });
  t.teardown(() => b.close());
  const before = (await a.store.list("_system/orgs/acme/workspaces/ws1/derived/", { limit: 100 })).items.map((i) => `${i.key}@${i.lastModified.getTime()}`);
  const url2 = (await link(a, h, { file_path: "calls/t.bcf", workspace_id: "ws1", expires_in: 30 })).json().data.viewer_url as string;
  const meta2 = await b.app.inject({ method: "GET", url: `${pathOf(url2)}/meta` });
  t.equal(meta2.statusCode, 200, meta2.body);
  const after = (await a.store.list("_system/orgs/acme/workspaces/ws1/derived/", { limit: 100 })).items.map((i) => `${i.key}@${i.lastModified.getTime()}`);
  t.same(after, before, "nothing was converted again");
  t.same(meta2.json().data.stats, meta.json().data.stats);
});

t.test("SAM is converted to sorted, indexed BAM; a missing .bai is built; FASTQ and tables are read on the server", async (t) => {
  const { a, h } = await setup();
  t.teardown(() => a.close());
  const dir = mkdtempSync(join(tmpdir(), "viewer-sam-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const ref = fixture("lambda_virus.fa");
  writeFileSync(join(dir, "ref.fa"), ref);
  execFileSync("wgsim", ["-N", "400", "-1", "100", "-2", "100", "-S", "7", "-e", "0", "-r", "0.001", join(dir, "ref.fa"), join(dir, "r1.fq"), join(dir, "r2.fq")], { stdio: "ignore" });
  execFileSync("bwa", ["index", join(dir, "ref.fa")], { stdio: "ignore" });
  const sam = execFileSync("bwa", ["mem", "-t", "1", join(dir, "ref.fa"), join(dir, "r1.fq"), join(dir, "r2.fq")], { maxBuffer: 1 << 28, stdio: ["ignore", "pipe", "ignore"] });
  await put(a, "ws1", "aln/reads.sam", sam);
  writeFileSync(join(dir, "reads.sam"), sam);
  execFileSync("samtools", ["sort", "-o", join(dir, "reads.bam"), join(dir, "reads.sam")]);
  await put(a, "ws1", "aln/sorted.bam", readFileSync(join(dir, "reads.bam")));
  await put(a, "ws1", "reads/r1.fq", readFileSync(join(dir, "r1.fq")));
  await put(a, "ws1", "de/results.csv", fixture("deseq2-results.csv"));

  const mapped = Number(execFileSync("samtools", ["view", "-c", "-F", "0x904", join(dir, "reads.bam")]).toString().trim());
  for (const file of ["aln/reads.sam", "aln/sorted.bam"]) {
    const url = (await link(a, h, { file_path: file, workspace_id: "ws1" })).json().data.viewer_url as string;
    const meta = await a.app.inject({ method: "GET", url: `${pathOf(url)}/meta` });
    t.equal(meta.statusCode, 200, meta.body);
    const m = meta.json().data;
    t.equal(m.track.format, "bam", file);
    t.match(m.locus, /^gi\|9626243\|ref\|NC_001416\.1\|:\d+-\d+$/, `${file} opens on the first covered region`);
    t.ok(m.stats.mappedReads >= mapped, `${file}: idxstats mapped reads`);
    const bai = await a.app.inject({ method: "GET", url: `${pathOf(url)}/data/primary-index` });
    t.equal(bai.rawPayload.subarray(0, 4).toString("latin1"), "BAI\u0001", `${file}: a BAM index is served`);
  }

  const fq = (await link(a, h, { file_path: "reads/r1.fq", workspace_id: "ws1" })).json().data.viewer_url as string;
  const fqMeta = (await a.app.inject({ method: "GET", url: `${pathOf(fq)}/meta` })).json().data;
  t.equal(fqMeta.fastq.summary.reads, 400);
  t.equal(fqMeta.fastq.complete, true);
  const reads = (await a.app.inject({ method: "GET", url: `${pathOf(fq)}/reads?offset=10&limit=5` })).json().data;
  t.equal(reads.reads.length, 5);
  t.equal(reads.total, 400);
  t.equal(reads.reads[0].name, readFileSync(join(dir, "r1.fq"), "utf8").split("\n")[40]?.slice(1));

  const csv = (await link(a, h, { file_path: "de/results.csv", workspace_id: "ws1" })).json().data.viewer_url as string;
  const csvMeta = (await a.app.inject({ method: "GET", url: `${pathOf(csv)}/meta` })).json().data;
  t.equal(csvMeta.table.rows, 500);
  t.same(csvMeta.table.header.slice(0, 2), ["gene_id", "gene_name"]);
  const col = csvMeta.table.header.indexOf("padj");
  const sorted = (await a.app.inject({ method: "GET", url: `${pathOf(csv)}/rows?sort=${col}&dir=asc&limit=20` })).json().data;
  t.equal(sorted.rows.length, 20);
  const values = sorted.rows.map((r: string[]) => Number(r[col]));
  t.same(values, [...values].sort((x, y) => x - y), "sorted by padj on the server");
  const filtered = (await a.app.inject({ method: "GET", url: `${pathOf(csv)}/rows?filter=${encodeURIComponent("padj<0.05")}&limit=500` })).json().data;
  t.ok(filtered.filtered > 0 && filtered.filtered < 500);
  t.ok(filtered.rows.every((r: string[]) => Number(r[col]) < 0.05));
});
