/**
 * The hostile-file suite: a corpus of files built to hurt — a decompression bomb of each
 * compressed format Operon reads (gzip, BGZF, bigWig's zlib blocks behind a looping tree),
 * lines and records without end, crafted headers and indexes — sent by one organization
 * through every endpoint that reads a file (viewer links and their pages' data, chart
 * renders, pipeline spec files), all at once, while another organization's requests run beside them. Held: the
 * process's RSS stays under its bound, the other organization is answered within 1 s every
 * time, every hostile request ends in an answer that names a bound or says what is wrong
 * with the file, and nothing is left in temp or in the derived area.
 */
import t from "tap";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { testApp } from "../support/app.js";
import { bgzfHeaderBomb, gzipBomb, rssSampler } from "../support/hostile.js";
import { until } from "../support/wait.js";

const MB = 1024 * 1024, GB = 1024 * MB;
/** What every hostile answer says: a bound by name, or what is wrong with the file. */
const CLEAR = /larger than|longer than|more than|at most|corrupt|truncated|not valid|not a |could not|failed: |is not|no reads|holds no/;
/** RSS the whole process (API, reader and render workers) may grow by during the attack. */
const RSS_BOUND = 1536 * MB;
/** This file's own temp folder (tap runs two test files at once): the working directories counted are this server's. */
const TMP = mkdtempSync(join(tmpdir(), "operon-hostile-"));
process.env.TMPDIR = TMP;
t.teardown(() => rmSync(TMP, { recursive: true, force: true }));
const temps = () => readdirSync(TMP).filter((n) => /^operon-(viewer|render)-/.test(n)).length;

t.test("hostile files through every endpoint that reads one, while another organization works", async (t) => {
  // An organization's compute limit sized to this 2-CPU machine, as a deployment sizes it: the
  // limit is what keeps one organization's renders and preparations from taking every core.
  const a = await testApp({ engine: { orgConcurrency: 2 }, readers: { timeoutMs: 8000 }, viewerLimits: { toolTimeoutMs: 8000, preparedFileBytes: 256 * MB, toolMemoryBytes: 1 * GB } });
  t.teardown(() => a.close());
  await a.service.createWorkspace("mallory", "wm");
  await a.service.createWorkspace("neighbour", "wn");
  const hm = { authorization: `Bearer ${await a.key("mallory", ["files", "tools"])}` };
  const hn = { authorization: `Bearer ${await a.key("neighbour", ["files"])}` };
  const put = (org: string, ws: string, key: string, body: Buffer | string) => a.store.put(`orgs/${org}/workspaces/${ws}/${key}`, body);

  // ---------- the corpus ----------
  const bw = readFileSync(join(import.meta.dirname, "../fixtures/charts/coverage/lambda.bw"));
  /** bigWig's chromosome B+ tree: its root turned into an inner node whose one child is itself. */
  const loopedBigWig = (() => {
    const b = Buffer.from(bw);
    const tree = Number(b.readBigUInt64LE(8));
    const keySize = b.readUInt32LE(tree + 8);
    const node = tree + 32;
    b[node] = 0;
    b.writeUInt16LE(1, node + 2);
    b.writeBigUInt64LE(BigInt(node), node + 4 + keySize);
    return b;
  })();
  const corpus: Array<[string, Buffer]> = [
    ["bomb.csv.gz", await gzipBomb("1,2\n", 2 * GB, "a,b\n")],
    ["line.tsv.gz", await gzipBomb("A", 1 * GB, "gene\tlog2FoldChange\tpvalue\n")],
    ["line-gwas.tsv.gz", await gzipBomb("1", 1 * GB, "CHR\tBP\tP\n")],
    ["line.fastq.gz", await gzipBomb("A", 1 * GB, "@")],
    ["reads-bomb.fastq.gz", await gzipBomb(`@r\n${"A".repeat(100)}\n+\n${"I".repeat(100)}\n`, 2 * GB)],
    ["bomb.fa.gz", await gzipBomb("ACGTTGCA", 1 * GB, ">c\n")],
    ["bomb.vcf.gz", await gzipBomb("c\t1\t.\tA\tC\t.\t.\t.\n", 1 * GB, "##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n")],
    ["bomb.pdb.gz", await gzipBomb("ATOM      1  CA  ALA A   1      11.104  13.207   2.100  1.00 20.00           C\n", 1 * GB)],
    ["header-bomb.bam", bgzfHeaderBomb("BAM", 1 * GB)],
    ["header-bomb.bcf", bgzfHeaderBomb("BCF", 1.5 * GB)],
    ["looped.bw", loopedBigWig],
    ["open-quote.csv", Buffer.concat([Buffer.from("a,b\n1,\""), Buffer.alloc(40 * MB, "x\n")])],
    ["deep.pipeline.json", Buffer.from("[".repeat(500_000) + "]".repeat(500_000))],
    ["huge.pipeline.json", Buffer.alloc(2 * MB, " ")],
  ];
  for (const [name, body] of corpus) await put("mallory", "wm", name, body);
  const packed = corpus.filter(([name]) => /\.(gz|bam|bw)$/.test(name));
  t.ok(packed.every(([, b]) => b.length < 8 * MB), `every compressed hostile file is small on disk (largest ${Math.max(...packed.map(([, b]) => b.length))} bytes)`);

  // ---------- the neighbour ----------
  await put("neighbour", "wn", "genes.csv", "gene,log2fc\nTP53,1.5\nBRCA1,-2\n");
  await put("neighbour", "wn", "ref.fa", ">s\nACGTACGT\n");
  const viewerToken = async (h: Record<string, string>, ws: string, file: string, extra: Record<string, unknown> = {}) => {
    const r = await a.app.inject({ method: "POST", url: "/v1/visualizations/viewer-url", headers: h, payload: { file_path: file, workspace_id: ws, ...extra } });
    if (r.statusCode !== 200) throw new Error(`viewer-url ${file}: ${r.statusCode} ${r.body}`);
    return new URL(r.json().data.viewer_url as string).pathname.split("/").pop() as string;
  };
  const theirs = await viewerToken(hn, "wn", "genes.csv");
  t.equal((await a.app.inject({ method: "GET", url: `/view/${theirs}/meta` })).statusCode, 200);

  // ---------- the attack ----------
  interface Outcome { what: string; status: number | string; message: string; ms: number }
  async function viewer(file: string, then: (tok: string) => string[], extra: Record<string, unknown> = {}): Promise<Outcome[]> {
    const t0 = performance.now();
    const tok = await viewerToken(hm, "wm", file, extra);
    const out: Outcome[] = [];
    for (const path of [`/view/${tok}/meta`, ...then(tok)]) {
      const r = await a.app.inject({ method: "GET", url: path });
      const body = r.headers["content-type"]?.toString().includes("json") ? r.json() : {};
      out.push({ what: `${file} ${path.replace(tok, "…")}`, status: r.statusCode, message: body.message ?? (body.data?.notes ?? []).join("; "), ms: performance.now() - t0 });
    }
    return out;
  }
  /** A pipeline spec file read by validate and by a run's start. */
  async function spec(file: string): Promise<Outcome[]> {
    const out: Outcome[] = [];
    for (const [url, payload] of [["/v1/pipelines/validate", { workspace_id: "wm", spec_file: file }], ["/v1/pipelines", { workspace_id: "wm", spec_file: file, input: {} }]] as const) {
      const t0 = performance.now();
      const r = await a.app.inject({ method: "POST", url, headers: hm, payload });
      const b = r.json();
      out.push({ what: `spec ${file} ${url}`, status: r.statusCode, message: b.message ?? (b.data?.errors ?? []).map((e: { message: string }) => e.message).join("; "), ms: performance.now() - t0 });
    }
    return out;
  }
  async function render(type: string, file: string, options: Record<string, unknown> = {}): Promise<Outcome[]> {
    const t0 = performance.now();
    const r = await a.app.inject({ method: "POST", url: "/v1/visualizations/render", headers: hm, payload: { workspace_id: "wm", type, file_path: file, options } });
    if (r.statusCode !== 202) return [{ what: `render ${type} ${file}`, status: r.statusCode, message: r.json().message, ms: performance.now() - t0 }];
    const id = r.json().data.job_id as string;
    const job = await until(`render ${id}`, async () => {
      const j = (await a.app.inject({ method: "GET", url: `/v1/visualizations/${id}?workspace_id=wm`, headers: hm })).json().data;
      return j.status === "completed" || j.status === "failed" ? j : undefined;
    }, 120_000, 200);
    return [{ what: `render ${type} ${file}`, status: job.status, message: job.error ?? "", ms: performance.now() - t0 }];
  }

  const before = temps();
  const base = process.memoryUsage.rss();
  const rss = rssSampler();
  let slowest = 0, slowestUrl = "";
  const failures: string[] = [];
  let stop = false;
  const neighbour = (async () => {
    let n = 0;
    while (!stop) {
      for (const [url, headers] of [[`/view/${theirs}/rows?sort=1&dir=desc`, {}], ["/v1/files?workspace_id=wn", hn], ["/healthz", {}]] as const) {
        const t0 = performance.now();
        const r = await a.app.inject({ method: "GET", url, headers });
        if (performance.now() - t0 > slowest) { slowest = performance.now() - t0; slowestUrl = url.replace(theirs, "…"); }
        if (r.statusCode !== 200) failures.push(`${url}: ${r.statusCode}`);
      }
      // Its own new links keep being prepared too.
      if (n++ % 10 === 0) {
        const t0 = performance.now();
        const tok = await viewerToken(hn, "wn", "ref.fa", { expires_in: 600 + n });
        const r = await a.app.inject({ method: "GET", url: `/view/${tok}/meta` });
        if (r.statusCode !== 200) failures.push(`ref.fa meta: ${r.statusCode}`);
        if (performance.now() - t0 > 5000) failures.push(`a new FASTA link took ${Math.round(performance.now() - t0)} ms`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  })();

  const results = (await Promise.all([
    viewer("bomb.csv.gz", (tok) => [`/view/${tok}/rows?offset=5&limit=2`, `/view/${tok}/rows?offset=1000000000`]),
    viewer("line.tsv.gz", () => []),
    viewer("line.fastq.gz", () => []),
    viewer("reads-bomb.fastq.gz", (tok) => [`/view/${tok}/reads?offset=1990&limit=20`]),
    viewer("bomb.fa.gz", () => []),
    viewer("bomb.vcf.gz", () => []),
    viewer("bomb.pdb.gz", (tok) => [`/view/${tok}/data/primary`]),
    viewer("header-bomb.bam", () => []),
    viewer("header-bomb.bcf", () => []),
    viewer("open-quote.csv", (tok) => [`/view/${tok}/rows?offset=0&limit=5`]),
    spec("deep.pipeline.json"),
    spec("huge.pipeline.json"),
    render("volcano_plot", "line.tsv.gz"),
    render("heatmap", "bomb.csv.gz"),
    render("manhattan_plot", "line-gwas.tsv.gz"),
    render("structure_3d", "bomb.pdb.gz"),
    render("coverage_track", "looped.bw", { region: "NC_001416.1:1-1000" }),
    render("coverage_track", "header-bomb.bam", { region: "NC_001416.1:1-1000" }),
  ])).flat();
  stop = true;
  await neighbour;
  const peak = rss.stop();

  // ---------- what held ----------
  const show = (o: Outcome) => `${o.what}: ${o.status} ${o.message.slice(0, 160)} (${Math.round(o.ms)} ms)`;
  t.comment(results.map(show).join("\n"));
  const expected: Array<[RegExp, number | string, RegExp]> = [
    [/^bomb\.csv\.gz .*\/meta$/, 200, /shown in file order: the file is larger than 64 MiB once decompressed/],
    [/^bomb\.csv\.gz .*offset=5&/, 200, /^$/],
    [/^bomb\.csv\.gz .*offset=1000000000$/, 422, /took longer than 8 s/],
    [/^line\.tsv\.gz/, 422, /a line of the file is longer than 8 MiB/],
    [/^line\.fastq\.gz/, 422, /a line of the file is longer than 8 MiB; the read browser/],
    [/^reads-bomb\.fastq\.gz .*\/meta$/, 200, /^$/],
    [/^reads-bomb\.fastq\.gz .*reads/, 200, /^$/],
    [/^bomb\.fa\.gz/, 422, /larger than 256 MiB once decompressed|decompressing the file took longer than 8 s/],
    [/^bomb\.vcf\.gz/, 422, /took longer than 8 s|larger than 256 MiB|more than 1 GiB of memory/],
    [/^bomb\.pdb\.gz .*\/meta$/, 200, /^$/],
    [/^bomb\.pdb\.gz .*data\/primary/, 200, /^$/],
    [/^header-bomb\.bam/, 422, CLEAR],
    [/^header-bomb\.bcf/, 422, /could not parse header|more than 1 GiB of memory/],
    [/^open-quote\.csv .*\/meta$/, 200, /shown in file order: the table has more than 4,000,000 cells/],
    [/^open-quote\.csv .*rows/, 422, /a record of the file is longer than 8 MiB \(is a quote left open\?\)/],
    [/^spec deep\.pipeline\.json \/v1\/pipelines\/validate$/, 200, /a pipeline spec must be a JSON object/],
    [/^spec deep\.pipeline\.json \/v1\/pipelines$/, 422, /a pipeline spec must be a JSON object/],
    [/^spec huge\.pipeline\.json/, 413, /spec files larger than 1 MB are not read/],
    [/^render volcano_plot/, "failed", /longer than 16 MB/],
    [/^render heatmap/, "failed", /more than 1,000,000 data rows|more than 1 GB once decompressed/],
    [/^render manhattan_plot/, "failed", /longer than 16 MB/],
    [/^render structure_3d/, "failed", /more than 256 MB once decompressed/],
    [/^render coverage_track looped\.bw/, "failed", /loop|corrupt|more than/],
    [/^render coverage_track header-bomb\.bam/, "failed", CLEAR],
  ];
  for (const o of results) {
    const e = expected.find(([what]) => what.test(o.what));
    if (!e) { t.fail(`no expectation for ${o.what}`); continue; }
    t.equal(o.status, e[1], show(o));
    t.match(o.message, e[2], `${o.what}: the answer names the bound or the fault`);
  }
  t.same(expected.filter(([what]) => !results.some((o) => what.test(o.what))).map(([what]) => String(what)), [], "every hostile request was answered");
  t.same(failures, [], "the other organization got every answer");
  t.ok(slowest < 1000, `the other organization was answered within 1 s throughout (slowest ${Math.round(slowest)} ms, ${slowestUrl})`);
  t.ok(peak - base < RSS_BOUND, `the process grew by ${Math.round((peak - base) / MB)} MB under attack (bound ${RSS_BOUND / MB} MB)`);
  t.equal((await a.app.inject({ method: "GET", url: "/healthz" })).statusCode, 200, "the server is up");
  await until("the working directories to be removed", () => temps() === before, 10_000);
  t.pass("nothing is left in temp");
  const derived = await a.store.list("_system/orgs/mallory/workspaces/wm/derived/", { limit: 1000 });
  t.same(derived.items.filter((i) => !i.key.endsWith("/view.json")).map((i) => i.key), [], "failed preparations left nothing in the derived area");
  const plots = await a.store.list("orgs/mallory/workspaces/wm/plots/", { limit: 10 });
  t.same(plots.items, [], "failed renders wrote no image");
});
