/**
 * The hostile-file reproductions of issue 28, each as it was reported, against the real app
 * (local store, Debian's samtools, the viewers' reader workers): a 100 MB gzip bomb behind a
 * viewer link no longer takes the server's memory, a line without end and a table too large
 * to sort end in sentences naming their bound, a read past its deadline ends, and one
 * organization's slow preparations leave another organization's links answered.
 */
import t from "tap";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { testApp, type TestApp } from "../support/app.js";
import { gzipBomb, rssSampler } from "../support/hostile.js";
import { PreparationGate } from "../../media/viewer-data.js";

const MB = 1024 * 1024;
const tokenOf = (url: string) => new URL(url).pathname.split("/").pop() as string;
/** This file's own temp folder (tap runs two test files at once): the working directories counted are this server's. */
const TMP = mkdtempSync(join(tmpdir(), "operon-hostile-"));
process.env.TMPDIR = TMP;
t.teardown(() => rmSync(TMP, { recursive: true, force: true }));
const viewerTemps = () => readdirSync(TMP).filter((n) => n.startsWith("operon-viewer-")).length;

async function link(a: TestApp, h: Record<string, string>, ws: string, file: string, extra: Record<string, unknown> = {}) {
  const r = await a.app.inject({ method: "POST", url: "/v1/visualizations/viewer-url", headers: h, payload: { file_path: file, workspace_id: ws, ...extra } });
  if (r.statusCode !== 200) throw new Error(`viewer-url ${file}: ${r.statusCode} ${r.body}`);
  return tokenOf(r.json().data.viewer_url as string);
}

/** Another organization's requests, every 50 ms while `fn` runs: the slowest answer (ms) and any failure. */
async function beside<T>(a: TestApp, paths: string[], fn: () => Promise<T>): Promise<{ value: T; slowest: number; failures: string[] }> {
  let slowest = 0;
  const failures: string[] = [];
  let stop = false;
  const loop = (async () => {
    while (!stop) {
      for (const url of paths) {
        const t0 = performance.now();
        const r = await a.app.inject({ method: "GET", url });
        slowest = Math.max(slowest, performance.now() - t0);
        if (r.statusCode !== 200) failures.push(`${url}: ${r.statusCode}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  try {
    const value = await fn();
    return { value, slowest, failures };
  } finally {
    stop = true;
    await loop;
  }
}

t.test("a gzip bomb behind a viewer link: the server's memory stays bounded and every bound is named", async (t) => {
  const a = await testApp({ readers: { timeoutMs: 15_000 } });
  t.teardown(() => a.close());
  await a.service.createWorkspace("acme", "ws1");
  await a.service.createWorkspace("other", "wso");
  const h = { authorization: `Bearer ${await a.key("acme", ["files"])}` };
  const ho = { authorization: `Bearer ${await a.key("other", ["files"])}` };
  const temps = viewerTemps();

  // The other organization's table, prepared before the attack.
  await a.store.put("orgs/other/workspaces/wso/genes.csv", "gene,log2fc\nTP53,1.5\nBRCA1,-2\n");
  const theirs = await link(a, ho, "wso", "genes.csv");
  t.equal((await a.app.inject({ method: "GET", url: `/view/${theirs}/meta` })).statusCode, 200);

  const bomb = await gzipBomb("1\n", 100 * MB);
  t.ok(bomb.length < 400 * 1024, `the bomb is ${bomb.length} bytes gzipped`);
  await a.store.put("orgs/acme/workspaces/ws1/bomb.csv.gz", bomb);
  const deep = await gzipBomb("1\n", 4096 * MB);
  await a.store.put("orgs/acme/workspaces/ws1/deep.csv.gz", deep);
  await a.store.put("orgs/acme/workspaces/ws1/oneline.csv.gz", await gzipBomb("A", 100 * MB, "a,b\n"));
  await a.store.put("orgs/acme/workspaces/ws1/tiny-rows.csv", Buffer.alloc(60 * MB, "1\n"));

  const base = process.memoryUsage.rss();
  const rss = rssSampler();
  const run = await beside(a, [`/view/${theirs}/meta`, `/view/${theirs}/rows?sort=1`, "/healthz"], async () => {
    // Issuing the link starts the preparation: it must not take the server down.
    const tok = await link(a, h, "ws1", "bomb.csv.gz");
    const meta = await a.app.inject({ method: "GET", url: `/view/${tok}/meta` });
    t.equal(meta.statusCode, 200, meta.body);
    const m = meta.json().data;
    t.equal(m.table.sortable, false, "100 MB of rows is not held for sorting");
    t.match(m.notes.join(" "), /larger than 64 MiB once decompressed/, "the note names the bound");
    const rows = await a.app.inject({ method: "GET", url: `/view/${tok}/rows?offset=10&limit=3` });
    t.equal(rows.statusCode, 200, rows.body);
    t.same(rows.json().data.rows, [["1"], ["1"], ["1"]], "its rows are paged in file order");
    const plain = await link(a, h, "ws1", "tiny-rows.csv");
    const pm = await a.app.inject({ method: "GET", url: `/view/${plain}/meta` });
    t.equal(pm.statusCode, 200, pm.body);
    t.equal(pm.json().data.table.sortable, false, "60 MB of one-cell rows is too many cells to hold");
    t.match(pm.json().data.notes.join(" "), /more than 4,000,000 cells/);
    const far = await a.app.inject({ method: "GET", url: `/view/${await link(a, h, "ws1", "deep.csv.gz")}/rows?offset=1000000000` });
    t.equal(far.statusCode, 422, "a page 4 GB into a bomb is cut off by the read's deadline");
    t.match(far.json().message, /longer than 15 s/);
    const one = await a.app.inject({ method: "GET", url: `/view/${await link(a, h, "ws1", "oneline.csv.gz")}/meta` });
    t.equal(one.statusCode, 422, "a 100 MB line ends the read");
    t.match(one.json().message, /a line of the file is longer than 8 MiB/);
  });
  const peak = rss.stop();
  t.same(run.failures, [], "the other organization got every answer");
  t.ok(run.slowest < 1000, `the other organization was answered within 1 s throughout (slowest ${Math.round(run.slowest)} ms)`);
  t.ok(peak - base < 1200 * MB, `the process grew by ${Math.round((peak - base) / MB)} MB (the report: 4.5 GB, then out of memory)`);
  t.equal((await a.app.inject({ method: "GET", url: "/healthz" })).statusCode, 200, "the server is up");
  const derived = await a.store.list("_system/orgs/acme/workspaces/ws1/derived/", { limit: 100 });
  t.ok(derived.items.every((i) => i.key.endsWith("/view.json")), "the failed preparation left nothing in the derived area");
  t.equal(viewerTemps(), temps, "no working directory is left behind");
});

t.test("one organization's slow preparations leave another's viewer links answered", async (t) => {
  const a = await testApp();
  t.teardown(() => a.close());
  await a.service.createWorkspace("acme", "ws1");
  await a.service.createWorkspace("other", "wso");
  const h = { authorization: `Bearer ${await a.key("acme", ["files"])}` };
  const ho = { authorization: `Bearer ${await a.key("other", ["files"])}` };
  const long = "ACGT".repeat(10 * MB);
  // The report: 60 reads of 40 MB in a 4.9 MB fastq.gz, and 305 MB of FASTA in 888 KB.
  await a.store.put("orgs/acme/workspaces/ws1/reads.fastq.gz", await gzipBomb(`@r\n${long}\n+\n${"I".repeat(long.length)}\n`, 3 * 2 * long.length));
  await a.store.put("orgs/acme/workspaces/ws1/g1.fa.gz", await gzipBomb("ACGTACGTAC", 150 * MB, ">chr1\n"));
  await a.store.put("orgs/acme/workspaces/ws1/g2.fa.gz", await gzipBomb("TTGACCA", 150 * MB, ">chr2\n"));
  await a.store.put("orgs/other/workspaces/wso/tiny.fa", ">s\nACGT\n");

  const mine = await Promise.all(["reads.fastq.gz", "g1.fa.gz", "g2.fa.gz"].map((f) => link(a, h, "ws1", f)));
  const hostile = mine.map(async (tok) => { const r = await a.app.inject({ method: "GET", url: `/view/${tok}/meta` }); return { at: performance.now(), r }; });
  const t0 = performance.now();
  const theirs = await a.app.inject({ method: "GET", url: `/view/${await link(a, ho, "wso", "tiny.fa")}/meta` });
  const took = performance.now() - t0;
  t.equal(theirs.statusCode, 200, theirs.body);
  t.same(theirs.json().data.sequences, [{ name: "s", length: 4 }]);
  const done = await Promise.all(hostile);
  t.ok(took < 20_000, `the other organization's 8-byte FASTA was ready in ${Math.round(took)} ms (the report: no answer in 30 s)`);
  t.ok(done.filter((d) => d.r.statusCode === 200).every((d) => d.at > t0 + took), "it did not wait for the hostile organization's decompressions");
  t.equal(done[0]?.r.statusCode, 422, "a 40 MB read ends the FASTQ sample");
  t.match(done[0]?.r.json().message, /a line of the file is longer than 8 MiB; the read browser reads lines up to that length/);
  t.equal(done[1]?.r.statusCode, 200, done[1]?.r.body ?? "");
  t.equal(done[1]?.r.json().data.stats.bases, 150 * MB - 6, "a large gzipped FASTA within the bound is still shown");
});

t.test("preparation places: at most half for one organization, freed places go to the longest-waiting organization that may take one", async (t) => {
  const gate = new PreparationGate(4);
  t.equal(gate.perOrganization, 2);
  const a1 = await gate.acquire("a");
  const a2 = await gate.acquire("a");
  const order: string[] = [];
  const a3 = gate.acquire("a").then((r) => { order.push("a3"); return r; });
  const b1 = await gate.acquire("b");
  const b2 = await gate.acquire("b");
  const c1 = gate.acquire("c").then((r) => { order.push("c1"); return r; });
  await new Promise((r) => setImmediate(r));
  t.same(order, [], "the server is full: a waits for its own place, c for any");
  b1();
  await new Promise((r) => setImmediate(r));
  t.same(order, ["c1"], "b's freed place goes to c, not to a (a holds its half)");
  a1();
  await a3;
  t.same(order, ["c1", "a3"]);
  a2(); b2(); (await c1)(); (await a3)();
  a2(); b2();
  await Promise.all([gate.acquire("x"), gate.acquire("x"), gate.acquire("y"), gate.acquire("y")]);
  let fifth = false;
  void gate.acquire("z").then(() => { fifth = true; });
  await new Promise((r) => setImmediate(r));
  t.equal(fifth, false, "a place released twice was freed once: four places, four held");
});
