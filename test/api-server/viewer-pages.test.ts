/// <reference lib="dom" />
/**
 * The viewer pages in a real browser (Debian's Chromium through playwright-core), on real
 * files: the nf-core SARS-CoV-2 test VCF, the lambda phage genome Debian ships (also bgzipped), a BAM and a
 * VCF made by the built-in variant-calling pipeline from wgsim reads (and the BAM as CRAM), a
 * PDB entry (1A1P) and its mmCIF, a DESeq2-style table. Each page must draw (canvas
 * non-blank; the counts the viewer itself reports match what samtools/bcftools say), load
 * nothing from any host but the server, log no console error, run under a policy without
 * `'unsafe-eval'` with no CSP violation, and leave a screenshot under .tap/screenshots/.
 */
import t, { type Test } from "tap";
import { execFileSync } from "node:child_process";
import { createWriteStream, mkdtempSync, readFileSync, rmSync, createReadStream, writeFileSync } from "node:fs";
import { once } from "node:events";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import type { AddressInfo } from "node:net";
import { testApp } from "../support/app.js";
import { canvasNonBlank, chromiumMissing, openBrowser, openPage, screenshot, waitForViewer, type PageRecord } from "../support/browser.js";
import { until } from "../support/wait.js";

const missing = chromiumMissing();
if (missing) {
  t.fail(`Chromium is required for the viewer tests and \`make test\` installs it: ${missing}`);
} else {
  const FIX = new URL("../fixtures/viewers/", import.meta.url);
  const fixture = (name: string) => readFileSync(new URL(name, FIX));
  const dir = mkdtempSync(join(tmpdir(), "viewer-pages-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));

  const a = await testApp({ engine: {} });
  t.teardown(() => a.close());
  await a.service.createWorkspace("acme", "ws1");
  const h = { authorization: `Bearer ${await a.key("acme", ["files", "tools"])}` };
  await a.app.listen({ port: 0, host: "127.0.0.1" });
  const origin = `http://127.0.0.1:${(a.app.server.address() as AddressInfo).port}`;
  const ws = (k: string) => `orgs/acme/workspaces/ws1/${k}`;

  // Inputs: the lambda genome and 2,000 read pairs simulated from it; a variant-calling run.
  writeFileSync(join(dir, "lambda.fa"), fixture("lambda_virus.fa"));
  execFileSync("wgsim", ["-N", "2000", "-1", "100", "-2", "100", "-S", "11", "-r", "0.002", join(dir, "lambda.fa"), join(dir, "r1.fq"), join(dir, "r2.fq")], { stdio: "ignore" });
  await a.store.put(ws("ref/lambda.fa"), fixture("lambda_virus.fa"));
  // The same genome bgzip-compressed, with the .fai and .gzi samtools faidx writes beside it.
  execFileSync("bgzip", ["-k", join(dir, "lambda.fa")]);
  execFileSync("samtools", ["faidx", join(dir, "lambda.fa.gz")]);
  for (const ext of ["", ".fai", ".gzi"]) await a.store.put(ws(`ref/lambda.fa.gz${ext}`), readFileSync(join(dir, `lambda.fa.gz${ext}`)));
  // A 200 kb random genome, bgzip-compressed (four BGZF blocks), with no index beside it.
  const bigSeq = Array.from({ length: 200_000 }, (_, i) => "ACGT"[(i * 2654435761 >>> 7) % 4]).join("");
  await a.store.put(ws("ref/big.fa.gz"), execFileSync("bgzip", ["-c"], { input: `>big\n${bigSeq.match(/.{1,70}/g)?.join("\n")}\n` }));
  await a.store.put(ws("reads/r1.fq"), readFileSync(join(dir, "r1.fq")));
  await a.store.put(ws("reads/r2.fq"), readFileSync(join(dir, "r2.fq")));
  await a.store.put(ws("reads/r1.fastq.gz"), gzipSync(readFileSync(join(dir, "r1.fq"))));
  await a.store.put(ws("calls/nfcore-test.vcf"), fixture("nfcore-sarscov2-test.vcf"));
  await a.store.put(ws("structures/1a1p.pdb"), fixture("1a1p.pdb"));
  await a.store.put(ws("structures/1a1p.cif"), fixture("1a1p.cif"));
  await a.store.put(ws("de/results.csv"), fixture("deseq2-results.csv"));
  const submitted = await a.app.inject({ method: "POST", url: "/v1/pipelines", headers: h, payload: { workspace_id: "ws1", pipeline_id: "variant-calling", input: { reads1: "reads/r1.fq", reads2: "reads/r2.fq", reference: "ref/lambda.fa", sampleName: "lambda" } } });
  if (submitted.statusCode !== 201) throw new Error(submitted.body);
  const run = await until("the variant-calling run", async () => {
    const r = (await a.app.inject({ method: "GET", url: `/v1/pipelines/${submitted.json().data.id}?workspace_id=ws1`, headers: h })).json().data;
    return ["completed", "failed", "cancelled"].includes(r.status) ? r : undefined;
  }, 240_000, 200);
  if (run.status !== "completed") throw new Error(`variant-calling ended ${run.status}: ${JSON.stringify(run.steps)}`);
  const bamKey = (run.output_paths as string[]).find((p) => p.endsWith("/lambda.bam")) as string;
  const vcfKey = (run.output_paths as string[]).find((p) => p.endsWith("/lambda.vcf.gz")) as string;
  const local = (k: string) => a.store.localPath?.(ws(k)) as string;

  const browser = await openBrowser();
  t.teardown(() => browser.close());

  async function viewerUrl(body: Record<string, unknown>): Promise<string> {
    const r = await a.app.inject({ method: "POST", url: "/v1/visualizations/viewer-url", headers: h, payload: { workspace_id: "ws1", ...body } });
    if (r.statusCode !== 200) throw new Error(r.body);
    return origin + new URL(r.json().data.viewer_url).pathname;
  }

  /** Opens a link, waits for its viewer, checks the rules every page shares, saves a screenshot. */
  async function view(tt: Test, name: string, body: Record<string, unknown>, opts: { viewport?: { width: number; height: number }; isMobile?: boolean } = {}) {
    const url = await viewerUrl(body);
    const csp = (await a.app.inject({ method: "GET", url: new URL(url).pathname })).headers["content-security-policy"] as string;
    tt.match(csp, /script-src 'self'/, `${name}: scripts from the server only`);
    tt.notMatch(csp, /'unsafe-eval'/, `${name}: no 'unsafe-eval'`);
    const rec: PageRecord = await openPage(browser.browser, url, opts);
    tt.teardown(() => rec.close());
    const state = await waitForViewer(rec.page, 120_000);
    tt.notOk(state.error, `${name}: no error (${state.error ?? ""})`);
    tt.same(rec.foreignRequests(origin), [], `${name}: every request went to the server`);
    tt.ok(rec.requests.length > 3, `${name}: requests were recorded (${rec.requests.length})`);
    tt.same(rec.consoleErrors, [], `${name}: no console error`);
    tt.same(rec.pageErrors, [], `${name}: no page error`);
    tt.same(rec.cspViolations, [], `${name}: no CSP violation`);
    const header = await rec.page.locator("header .name").textContent();
    tt.equal(header, (body.file_path as string).split("/").pop(), `${name}: the page names the file`);
    tt.match(await rec.page.locator("header .expiry").textContent(), /link expires/);
    await screenshot(rec.page, name);
    return { rec, state };
  }

  t.test("variants: the nf-core VCF on its own contigs (no genome from the internet)", async (tt) => {
    const { rec, state } = await view(tt, "variant-nfcore", { file_path: "calls/nfcore-test.vcf" });
    tt.equal(state.counts.variants, 9, "igv.js loaded the VCF's 9 variants for the whole contig");
    tt.equal(state.counts.locus, "MT192765.1:1-29829");
    const canvases = await canvasNonBlank(rec.page, "#igv canvas:visible");
    tt.ok(canvases.nonBlank >= 2, `the tracks drew (${canvases.nonBlank} of ${canvases.total} canvases)`);
    tt.ok(rec.requests.some((r) => r.url.endsWith("/chrom.sizes")), "contigs came from the server");
  });

  t.test("variants with a reference: the pipeline's bgzipped VCF and its .tbi over Range", async (tt) => {
    const { rec, state } = await view(tt, "variant-reference", { file_path: vcfKey, reference: "ref/lambda.fa", region: "gi|9626243|ref|NC_001416.1|:1-48502" });
    const expected = Number(execFileSync("bcftools", ["view", "-H", "-c", "1", local(vcfKey)]).toString().split("\n").filter(Boolean).length);
    const all = Number(execFileSync("bcftools", ["view", "-H", local(vcfKey)]).toString().split("\n").filter(Boolean).length);
    tt.ok(expected > 5, `the run called variants (${all})`);
    tt.equal(state.counts.variants, all, "igv.js shows every record bcftools reads in the region");
    tt.ok(rec.requests.some((r) => r.url.endsWith("/data/primary-index")), "the .tbi was read");
    tt.ok(rec.requests.some((r) => r.url.endsWith("/data/reference-index")), "the reference's .fai was read");
    tt.ok((await canvasNonBlank(rec.page, "#igv canvas:visible")).nonBlank >= 2);
  });

  t.test("alignments: the pipeline's BAM opens on the first covered region with coverage", async (tt) => {
    const { rec, state } = await view(tt, "alignment-bam", { file_path: bamKey, reference: "ref/lambda.fa" });
    const locus = state.counts.locus as unknown as string;
    const region = locus.replace(/^(.*):(\d+)-(\d+)$/, (_m, c: string, s: string, e: string) => `${c}:${s}-${e}`);
    const expected = Number(execFileSync("samtools", ["view", "-c", "-F", "0x604", local(bamKey), region]).toString().trim());
    tt.ok(expected > 0, `reads in ${region}: ${expected}`);
    tt.equal(state.counts.alignments, expected, "igv.js loaded the alignments samtools counts in the locus");
    tt.ok((await canvasNonBlank(rec.page, "#igv canvas:visible")).nonBlank >= 3, "coverage, alignments and sequence drew");
  });

  t.test("alignments: a CRAM (rANS-coded blocks) with its reference, WebAssembly allowed on this page only", async (tt) => {
    const cram = join(dir, "lambda.cram");
    execFileSync("samtools", ["view", "-C", "-T", join(dir, "lambda.fa"), "-o", cram, local(bamKey)]);
    await a.store.put(ws("aln/lambda.cram"), readFileSync(cram));
    const region = "gi|9626243|ref|NC_001416.1|:20001-20400";
    const body = { file_path: "aln/lambda.cram", reference: "ref/lambda.fa", region };
    const { rec, state } = await view(tt, "alignment-cram", body);
    const csp = (await a.app.inject({ method: "GET", url: new URL(await viewerUrl(body)).pathname })).headers["content-security-policy"] as string;
    tt.match(csp, /script-src 'self' 'wasm-unsafe-eval';/, "the alignment page may compile WebAssembly");
    const expected = Number(execFileSync("samtools", ["view", "-c", "-F", "0x604", local(bamKey), region]).toString().trim());
    tt.ok(expected > 0, `reads in ${region}: ${expected}`);
    tt.equal(state.counts.alignments, expected, "igv.js decoded the CRAM's alignments samtools counts");
    tt.ok((await canvasNonBlank(rec.page, "#igv canvas:visible")).nonBlank >= 3);

    // The same page under `script-src 'self'`: igv.js cannot compile its CRAM decoders.
    const strict = await openPage(browser.browser, await viewerUrl(body), {
      beforeNavigation: (page) => page.route(/\/view\/[^/]+$/, async (route) => {
        const res = await route.fetch();
        await route.fulfill({ response: res, headers: { ...res.headers(), "content-security-policy": csp.replace(" 'wasm-unsafe-eval'", "") } });
      }),
    });
    tt.teardown(() => strict.close());
    const failed = await waitForViewer(strict.page, 60_000).catch((e: Error) => ({ error: e.message, counts: {} as Record<string, number> }));
    await until("the violation", async () => strict.cspViolations.length > 0 || undefined, 30_000, 100).catch(() => undefined);
    tt.ok(strict.cspViolations.includes("script-src wasm-eval"), `without it the WebAssembly compile is refused (${JSON.stringify(strict.cspViolations)})`);
    tt.not(failed.counts.alignments, expected, `and the alignments are not shown (${failed.error ?? JSON.stringify(failed.counts)})`);
  });

  t.test("sequence: a FASTA without .fai (built on the server) with its sequence picker", async (tt) => {
    const { rec, state } = await view(tt, "sequence-fasta", { file_path: "ref/lambda.fa" });
    const seq = readFileSync(new URL("lambda_virus.fa", FIX), "utf8").split("\n").slice(1).join("");
    tt.equal(state.counts.sequences, 1);
    tt.equal(state.counts.firstBases, seq.slice(0, 20), "igv.js read the bases the file holds");
    tt.equal(await rec.page.locator("#sequence-picker option").count(), 1);
    tt.ok((await canvasNonBlank(rec.page, "#igv canvas:visible")).nonBlank >= 1);
  });

  t.test("sequence: a bgzip FASTA (.fa.gz), read compressed through its .fai and .gzi", async (tt) => {
    const { rec, state } = await view(tt, "sequence-fasta-bgzip", { file_path: "ref/lambda.fa.gz" });
    const seq = readFileSync(new URL("lambda_virus.fa", FIX), "utf8").split("\n").slice(1).join("");
    tt.equal(state.counts.firstBases, seq.slice(0, 20), "igv.js read the bases the file holds");
    tt.ok(rec.requests.some((r) => r.url.endsWith("/data/primary-gzi")), "the .gzi was read");
    tt.ok((await canvasNonBlank(rec.page, "#igv canvas:visible")).nonBlank >= 1);

    // Several blocks, indexed on the server: bases across a block boundary and in the last block.
    const big = await view(tt, "sequence-fasta-bgzip-blocks", { file_path: "ref/big.fa.gz" });
    tt.equal(big.state.counts.firstBases, bigSeq.slice(0, 20));
    const read = (start: number, end: number) => big.rec.page.evaluate(([s, e]) => (window as unknown as { operonIgv: { genome: { getSequence(c: string, s: number, e: number): Promise<string> } } }).operonIgv.genome.getSequence("big", s as number, e as number), [start, end]);
    for (const [start, end] of [[65_000, 67_000], [199_900, 200_000]] as const) tt.equal(await read(start, end), bigSeq.slice(start, end), `bases ${start}-${end}`);
  });

  t.test("reads: a gzipped FASTQ in the read browser", async (tt) => {
    const { rec, state } = await view(tt, "fastq-reads", { file_path: "reads/r1.fastq.gz" });
    tt.equal(state.counts.reads, 50, "the first page of reads");
    tt.equal(state.counts.summaryReads, 2000, "summary over the 2,000 reads");
    tt.equal(await rec.page.locator(".read").count(), 50);
    tt.equal(await rec.page.locator(".read").first().locator(".seq span").count(), 100, "one coloured base per position");
    tt.equal(await rec.page.locator(".chart svg").count(), 2);
  });

  for (const [file, fmt] of [["structures/1a1p.pdb", "pdb"], ["structures/1a1p.cif", "cif"]] as const) {
    t.test(`structure: ${fmt} in 3Dmol.js (WebGL)`, async (tt) => {
      const { rec, state } = await view(tt, `structure-${fmt}`, { file_path: file });
      const text = fixture(file.split("/").pop() as string).toString();
      const atoms = fmt === "pdb" ? text.split("\n").filter((l) => /^(ATOM {2}|HETATM)/.test(l)).length : text.split("\n").filter((l) => /^(ATOM|HETATM)\s/.test(l)).length;
      tt.equal(state.counts.atoms, atoms, `3Dmol.js parsed every atom (${atoms})`);
      tt.ok((state.counts.chains ?? 0) >= 1);
      const c = await canvasNonBlank(rec.page, "#mol canvas");
      tt.ok(c.nonBlank >= 1, `the molecule drew (${JSON.stringify(c.canvases[0])})`);
      await rec.page.selectOption("#colour-by", "plddt");
      await rec.page.selectOption("#colour-by", "b");
      tt.same(rec.pageErrors, [], "colour schemes switch without errors");
    });
  }

  t.test("table: sortable, filterable, paged from the server; readable on a phone", async (tt) => {
    const { rec, state } = await view(tt, "table-csv", { file_path: "de/results.csv" });
    tt.equal(state.counts.rows, 100, "one page of 100 rows, not the whole file");
    tt.equal(state.counts.totalRows, 500);
    tt.equal(await rec.page.locator("#data-table tbody tr").count(), 100);
    const header = await rec.page.locator("#data-table th").allTextContents();
    const padj = header.indexOf("padj");
    await rec.page.locator("#data-table th").nth(padj).click();
    await rec.page.waitForFunction((i) => document.querySelectorAll("#data-table th")[i]?.getAttribute("aria-sort") === "ascending", padj);
    const col = (await rec.page.locator(`#data-table tbody tr td:nth-child(${padj + 1})`).allTextContents()).map(Number);
    tt.same(col, [...col].sort((x, y) => x - y), "sorted by padj");
    tt.equal(await rec.page.locator(`#data-table tbody tr td:nth-child(${padj + 1})`).first().evaluate((e) => getComputedStyle(e).textAlign), "right", "numbers right-aligned");
    await rec.page.fill("#table-filter", "padj<0.01");
    await rec.page.waitForFunction(() => /of \d+ \(filtered/.test(document.querySelector("#row-range")?.textContent ?? ""));
    const filtered = (await rec.page.locator(`#data-table tbody tr td:nth-child(${padj + 1})`).allTextContents()).map(Number);
    tt.ok(filtered.length > 0 && filtered.every((v) => v < 0.01), "filtered on the server");
    await screenshot(rec.page, "table-csv-sorted-filtered");

    const phone = await view(tt, "table-csv-phone", { file_path: "de/results.csv" }, { viewport: { width: 390, height: 844 }, isMobile: true });
    const overflow = await phone.rec.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    tt.ok(overflow <= 1, `the page itself does not scroll sideways on a phone (${overflow}px)`);
  });

  t.test("phone-sized variant page", async (tt) => {
    const { rec } = await view(tt, "variant-phone", { file_path: "calls/nfcore-test.vcf" }, { viewport: { width: 390, height: 844 }, isMobile: true });
    tt.ok((await canvasNonBlank(rec.page, "#igv canvas:visible")).nonBlank >= 1);
  });

  t.test("readable errors: an unreadable file, an expired and a tampered link", async (tt) => {
    await a.store.put(ws("broken/not-really.bam"), "this is not a BAM file\n");
    const url = await viewerUrl({ file_path: "broken/not-really.bam" });
    const rec = await openPage(browser.browser, url);
    tt.teardown(() => rec.close());
    const state = await waitForViewer(rec.page, 60_000);
    tt.match(state.error, /could not be indexed|failed/);
    tt.match(await rec.page.locator("[role=alert]").textContent(), /cannot be shown/);
    await screenshot(rec.page, "error-unreadable");

    const short = await viewerUrl({ file_path: "calls/nfcore-test.vcf", expires_in: 1 });
    a.clock.advance(2000);
    const expired = await openPage(browser.browser, short);
    tt.teardown(() => expired.close());
    tt.match(await expired.page.locator("h1").textContent(), /expired/);
    await screenshot(expired.page, "error-expired");
    const tampered = await openPage(browser.browser, short.slice(0, -3) + "AAA");
    tt.teardown(() => tampered.close());
    tt.match(await tampered.page.locator("h1").textContent(), /not valid/);
  });

  t.test("a 200 MB VCF is bgzipped and indexed on the server; the page stays responsive", async (tt) => {
    // 2.2 million records on one 250 Mb contig, written as a stream.
    const big = join(dir, "big.vcf");
    const out = createWriteStream(big);
    out.write("##fileformat=VCFv4.2\n##contig=<ID=chr1,length=250000000>\n##INFO=<ID=DP,Number=1,Type=Integer,Description=\"Depth\">\n##FORMAT=<ID=GT,Number=1,Type=String,Description=\"Genotype\">\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\tS1\tS2\n");
    let bytes = 0;
    for (let i = 0; bytes < 200 * 1024 * 1024; i++) {
      const line = `chr1\t${100 + i * 110}\trs${i}\t${"ACGT"[i % 4]}\t${"CGTA"[i % 4]}\t${(i % 97) + 3}\tPASS\tDP=${i % 60}\tGT\t0/1\t1/1\n`;
      bytes += line.length;
      if (!out.write(line)) await once(out, "drain");
    }
    out.end();
    await once(out, "finish");
    await a.store.put(ws("calls/big.vcf"), createReadStream(big));
    const { rec, state } = await view(tt, "variant-200mb", { file_path: "calls/big.vcf", region: "chr1:1000000-1010000" });
    const responsive = await rec.page.evaluate(() => new Promise<number>((res) => { const t0 = performance.now(); setTimeout(() => res(performance.now() - t0), 0); }));
    tt.ok(responsive < 1000, `the page answers (${responsive.toFixed(0)} ms for a timer)`);
    tt.ok((state.counts.variants ?? 0) > 50 && (state.counts.variants ?? 0) < 200, `only the 10 kb region's variants were loaded (${state.counts.variants})`);
    const read = rec.requests.filter((r) => r.url.includes("/data/primary")).reduce((s, r) => s + (r.bytes ?? 0), 0);
    tt.ok(read < 5 * 1024 * 1024, `the browser read ${read} bytes of the bgzipped VCF, not the file`);
  });
}
