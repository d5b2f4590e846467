/**
 * Render jobs over HTTP (app.inject, the local store, real worker threads and renderers):
 * what the submission refuses (type, options per type, files, output folder, workspace
 * rules), a job's life (202 queued → completed with image, TSV and a key-free preview),
 * outputs that never overwrite, the listing's order and cursor, the organization's limit, and
 * a job whose server stopped reading `failed`.
 */
import t from "tap";
import { readFileSync } from "node:fs";
import { testApp, type TestApp } from "../support/app.js";
import { decodePng, parseXml } from "../support/images.js";
import { sleep, until } from "../support/wait.js";

const fixture = (rel: string) => readFileSync(new URL(`../fixtures/${rel}`, import.meta.url));
const DE = fixture("viewers/deseq2-results.csv");

async function setup(opts: { orgConcurrency?: number } = {}) {
  const a = await testApp({ engine: { orgConcurrency: opts.orgConcurrency ?? 5 } });
  await a.service.createWorkspace("acme", "ws1");
  await a.service.createWorkspace("acme", "ws2");
  await a.service.createWorkspace("other", "wsx");
  const key = await a.key("acme", ["files"]);
  await put(a, "ws1", "de/results.csv", DE);
  return { a, h: { authorization: `Bearer ${key}` } };
}
const put = (a: TestApp, ws: string, key: string, body: Buffer | string, org = "acme") => a.store.put(`orgs/${org}/workspaces/${ws}/${key}`, body);
const render = (a: TestApp, h: Record<string, string>, body: Record<string, unknown>) => a.app.inject({ method: "POST", url: "/v1/visualizations/render", headers: h, payload: body });
const job = (a: TestApp, h: Record<string, string>, id: string, ws = "ws1") => a.app.inject({ method: "GET", url: `/v1/visualizations/${id}?workspace_id=${ws}`, headers: h });
async function finished(a: TestApp, h: Record<string, string>, id: string, ws = "ws1") {
  let last: Record<string, unknown> = {};
  await until(`render job ${id} to finish`, async () => { last = (await job(a, h, id, ws)).json().data; return last.status === "completed" || last.status === "failed"; }, 60_000);
  return last as { status: string; error: string | null; output_path: string; data_path: string; preview_url: string; image: { width: number; height: number; bytes: number } };
}
const read = async (a: TestApp, ws: string, key: string) => {
  const { body } = await a.store.get(`orgs/acme/workspaces/${ws}/${key}`);
  const parts: Buffer[] = [];
  for await (const c of body) parts.push(Buffer.from(c));
  return Buffer.concat(parts);
};

t.test("submission: what is refused, with the field named", async (t) => {
  const { a, h } = await setup();
  t.teardown(() => a.close());
  const base = { type: "volcano_plot", file_path: "de/results.csv", workspace_id: "ws1" };
  const cases: Array<[string, Record<string, unknown>, number, RegExp, string?]> = [
    ["unknown type", { ...base, type: "pie_chart" }, 400, /type: unknown plot type/, "type"],
    ["unknown option", { ...base, options: { threshold: 2 } }, 400, /options\.threshold: unknown option/, "options.threshold"],
    ["wrong option type", { ...base, options: { threshold_fc: "two" } }, 400, /options\.threshold_fc/, "options.threshold_fc"],
    ["option out of range", { ...base, options: { threshold_pvalue: 2 } }, 400, /options\.threshold_pvalue/, "options.threshold_pvalue"],
    ["bad output format", { ...base, output_format: "jpeg" }, 400, /output_format/, "output_format"],
    ["output folder outside the workspace", { ...base, output_path: "../elsewhere" }, 400, /output_path/, "output_path"],
    ["output folder in _system", { ...base, output_path: "_system/x" }, 400, /output_path/, "output_path"],
    ["file path escaping", { ...base, file_path: "../../other/x.csv" }, 400, /file_path/, "file_path"],
    ["missing file", { ...base, file_path: "de/nope.csv" }, 404, /not found/, "file_path"],
    ["wrong kind of file", { ...base, type: "structure_3d" }, 400, /structure_3d reads a PDB or mmCIF/, "file_path"],
    ["gene without annotation", { ...base, type: "coverage_track", file_path: "x.bam", options: { gene: "cI" } }, 400, /options\.annotation: a gene is found through an annotation file/, "options.annotation"],
    ["neither region nor gene", { ...base, type: "coverage_track", file_path: "x.bam", options: {} }, 400, /options\.region: give region/, "options.region"],
    ["bad region", { ...base, type: "coverage_track", file_path: "x.bam", options: { region: "chr1:5-2" } }, 400, /options\.region/, "options.region"],
    ["missing sample sheet", { ...base, type: "pca_plot", options: { sample_sheet: "meta/none.csv" } }, 404, /options\.sample_sheet/, "options.sample_sheet"],
    ["bad colormap", { ...base, type: "heatmap", options: { colormap: "jet" } }, 400, /options\.colormap/, "options.colormap"],
    ["bad residue", { ...base, type: "structure_3d", file_path: "s.pdb", options: { highlight_residues: ["25"] } }, 400, /options\.highlight_residues\.0/, "options.highlight_residues.0"],
    ["bad pathway id", { ...base, type: "pathway_map", options: { pathway_id: "hsa04110" } }, 400, /options\.pathway_id/, "options.pathway_id"],
  ];
  for (const [what, body, status, message, field] of cases) {
    const r = await render(a, h, body);
    t.equal(r.statusCode, status, `${what}: ${r.body}`);
    t.match(r.json().message, message, what);
    if (field) t.equal(r.json().details?.field, field, `${what}: details.field`);
  }
  const unknown = await render(a, h, { ...base, type: "pie_chart" });
  t.same(unknown.json().details.valid_values, ["volcano_plot", "manhattan_plot", "pca_plot", "heatmap", "coverage_track", "structure_3d", "pathway_map"]);
  t.equal((await render(a, h, { ...base, workspace_id: "wsx" })).statusCode, 404, "another organization's workspace is not found");
  const limitedKey = await a.key("acme", ["files"], ["ws2"]);
  const denied = await render(a, { authorization: `Bearer ${limitedKey}` }, base);
  t.equal(denied.statusCode, 403);
  t.equal(denied.json().error, "workspace_access_denied");
  const wrongScope = await a.key("acme", ["tools"]);
  t.equal((await render(a, { authorization: `Bearer ${wrongScope}` }, base)).statusCode, 403, "scope files is needed");
  t.equal((await a.store.list("orgs/acme/workspaces/ws1/plots/", { limit: 10 })).items.length, 0, "nothing was written by refused requests");
});

t.test("a job's life: 202 queued, then completed with the image, the data drawn and a preview", async (t) => {
  const { a, h } = await setup();
  t.teardown(() => a.close());
  const r = await render(a, h, { type: "volcano_plot", file_key: "de/results.csv", workspace_id: "ws1", options: { title: "Treated vs control" } });
  t.equal(r.statusCode, 202, r.body);
  const d = r.json().data;
  t.match(d.job_id, /^render-[0-9a-z]{26}$/);
  t.equal(d.status, "queued");
  t.equal(d.output_path, null);
  t.equal(d.options.threshold_fc, 1, "defaults are applied and shown");
  const done = await finished(a, h, d.job_id);
  t.equal(done.status, "completed", done.error ?? "");
  t.equal(done.output_path, "plots/results_volcano.png");
  t.equal(done.data_path, "plots/results_volcano.tsv");
  const png = decodePng(await read(a, "ws1", done.output_path));
  t.same([png.width, png.height], [800 * 2, 640 * 2], "PNG of the default size at scale 2");
  t.same([done.image.width, done.image.height], [png.width, png.height], "the job reports the image's size");

  // The TSV holds the genes drawn; its up/down counts match a direct computation over the file.
  const tsv = (await read(a, "ws1", done.data_path)).toString("utf8");
  const lines = tsv.split("\n").filter((l) => l && !l.startsWith("#"));
  const rows = DE.toString("utf8").trim().split("\n").slice(1).map((l) => l.split(","));
  const usable = rows.filter((c) => Number.isFinite(parseFloat(c[3]!)) && Number.isFinite(parseFloat(c[7]!)));
  t.equal(lines.length - 1, usable.length, "one TSV row per gene drawn");
  const up = usable.filter((c) => parseFloat(c[3]!) >= 1 && parseFloat(c[7]!) < 0.05).length;
  const down = usable.filter((c) => parseFloat(c[3]!) <= -1 && parseFloat(c[7]!) < 0.05).length;
  const cat = lines[0]!.split("\t").findIndex((x) => /categor/i.test(x));
  t.ok(cat >= 0, "the TSV says which category each gene is in");
  const counted = (re: RegExp) => lines.slice(1).filter((l) => re.test(l.split("\t")[cat]!)).length;
  t.equal(counted(/^up/i), up, "genes up");
  t.equal(counted(/^down/i), down, "genes down");

  // The preview needs no key, shows the image and nothing else.
  const page = await a.app.inject({ method: "GET", url: new URL(done.preview_url).pathname });
  t.equal(page.statusCode, 200);
  t.match(page.body, /<img src="data\/primary"/);
  const img = await a.app.inject({ method: "GET", url: `${new URL(done.preview_url).pathname}/data/primary` });
  t.equal(img.statusCode, 200);
  t.equal(img.headers["content-type"], "image/png");
  t.equal(img.rawPayload.length, done.image.bytes);
  for (const other of ["primary-index", "reference"]) t.equal((await a.app.inject({ method: "GET", url: `${new URL(done.preview_url).pathname}/data/${other}` })).statusCode, 404, `no ${other} through a preview`);
  t.equal((await a.app.inject({ method: "GET", url: `${new URL(done.preview_url).pathname}/meta` })).statusCode, 404, "a preview is not a viewer");
  // The second-to-last character: the last one of a base64url token may carry only padding
  // bits, so changing it can leave the decoded bytes as they were (the test then saw 200).
  const tampered = new URL(done.preview_url).pathname.replace(/.(?=.$)/, (c) => (c === "A" ? "B" : "A"));
  t.equal((await a.app.inject({ method: "GET", url: tampered })).statusCode, 403, "a tampered preview link is refused");

  // SVG: parses as XML, names the font; a second render of the same file takes a new name.
  const s = await render(a, h, { type: "volcano_plot", file_path: "de/results.csv", workspace_id: "ws1", output_format: "svg" });
  const sd = await finished(a, h, s.json().data.job_id);
  t.equal(sd.output_path, "plots/results_volcano-2.svg", "the image and its TSV share a name that neither has yet");
  const svg = parseXml((await read(a, "ws1", sd.output_path)).toString("utf8"));
  t.equal(svg.name, "svg");
  t.match(svg.attrs["font-family"], /DejaVu Sans/);
  const again = await finished(a, h, (await render(a, h, { type: "volcano_plot", file_path: "de/results.csv", workspace_id: "ws1" })).json().data.job_id);
  t.equal(again.output_path, "plots/results_volcano-3.png", "an existing image is never overwritten");
  t.equal(again.data_path, "plots/results_volcano-3.tsv");
  const first = await read(a, "ws1", "plots/results_volcano.png");
  t.equal(first.length, done.image.bytes, "the first image is untouched");
  const custom = await finished(a, h, (await render(a, h, { type: "volcano_plot", file_path: "de/results.csv", workspace_id: "ws1", output_path: "figures/fig2/" })).json().data.job_id);
  t.equal(custom.output_path, "figures/fig2/results_volcano.png", "output_path is the folder");

  // Read without workspace_id; from another workspace it does not exist.
  const noWs = await a.app.inject({ method: "GET", url: `/v1/visualizations/${d.job_id}`, headers: h });
  t.equal(noWs.json().data.status, "completed", "found through the key's workspaces");
  t.equal((await job(a, h, d.job_id, "ws2")).statusCode, 404, "not in another workspace");
  const otherOrg = await a.key("other", ["files"]);
  t.equal((await a.app.inject({ method: "GET", url: `/v1/visualizations/${d.job_id}?workspace_id=wsx`, headers: { authorization: `Bearer ${otherOrg}` } })).statusCode, 404, "not for another organization");
  t.equal((await job(a, h, "render-nope")).statusCode, 404);
});

t.test("problems in the data are the job's failure, in words", async (t) => {
  const { a, h } = await setup();
  t.teardown(() => a.close());
  const r = await render(a, h, { type: "volcano_plot", file_path: "de/results.csv", workspace_id: "ws1", options: { log2fc_col: "lfc" } });
  const done = await finished(a, h, r.json().data.job_id);
  t.equal(done.status, "failed");
  t.match(done.error, /column "lfc" \(option log2fc_col\) is not in the file; its columns are: .*"log2FoldChange"/);
  t.equal(done.output_path, null);
  t.equal((await a.store.list("orgs/acme/workspaces/ws1/plots/", { limit: 10 })).items.length, 0, "a failed job writes no files");
  await put(a, "ws1", "de/words.csv", "gene,log2FoldChange,padj\nA,high,low\nB,NA,NA\n");
  const words = await finished(a, h, (await render(a, h, { type: "volcano_plot", file_path: "de/words.csv", workspace_id: "ws1" })).json().data.job_id);
  t.equal(words.status, "failed", "a non-numeric column fails");
  t.match(words.error, /numeric|number|no (usable|plottable)/i);
});

t.test("listing: newest first, with a cursor", async (t) => {
  const { a, h } = await setup();
  t.teardown(() => a.close());
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push((await render(a, h, { type: "volcano_plot", file_path: "de/results.csv", workspace_id: "ws1", output_format: "svg" })).json().data.job_id);
  for (const id of ids) await finished(a, h, id);
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const page: { statusCode: number; body: string; json: () => unknown } = await a.app.inject({ method: "GET", url: `/v1/visualizations?workspace_id=ws1&limit=2${cursor ? `&cursor=${cursor}` : ""}`, headers: h });
    t.equal(page.statusCode, 200, page.body);
    const b: { data: { job_id: string }[]; has_more: boolean; next_cursor: string | null } = page.json() as { data: { job_id: string }[]; has_more: boolean; next_cursor: string | null };
    seen.push(...b.data.map((j: { job_id: string }) => j.job_id));
    t.equal(b.has_more, b.next_cursor !== null);
    cursor = b.next_cursor;
  } while (cursor);
  t.same(seen, [...ids].reverse(), "every job once, newest first");
  t.equal((await a.app.inject({ method: "GET", url: "/v1/visualizations?workspace_id=ws2", headers: h })).json().data.length, 0, "per workspace");
});

t.test("a render takes a slot of the organization's limit", async (t) => {
  const { a, h } = await setup({ orgConcurrency: 1 });
  t.teardown(() => a.close());
  const release = await a.engine!.slots("acme", "a-tool-run", new AbortController().signal);
  t.equal(a.engine!.ledger.inUse("acme"), 1, "the only slot is taken by another task");
  const id = (await render(a, h, { type: "volcano_plot", file_path: "de/results.csv", workspace_id: "ws1" })).json().data.job_id;
  // Give the job's holder time to (wrongly) start.
  await sleep(700);
  t.equal((await job(a, h, id)).json().data.status, "queued", "waits while the organization is full");
  release!();
  t.equal((await finished(a, h, id)).status, "completed", "starts once the slot is free");
  await until("the render's claim released", () => a.engine!.ledger.inUse("acme") === 0, 10_000);
  t.equal(a.engine!.ledger.inUse("acme"), 0, "and gives the slot back");
});

t.test("a job whose server stopped is failed, never stuck running", async (t) => {
  const { a, h } = await setup();
  t.teardown(() => a.close());
  // A job held by a server that went away: its record says running, its heartbeat is old.
  const id = "render-01jz0000000000000000000000";
  const key = `_system/orgs/acme/workspaces/ws1/render-jobs/`;
  const now = a.clock.now();
  const rec = {
    job_id: id, organization: "acme", workspace_id: "ws1", key_id: "k", type: "volcano_plot", file_path: "de/results.csv", options: {},
    output_format: "png", output_folder: "plots/", status: "running", output_path: null, data_path: null, error: null,
    created_at: new Date(now - 5000).toISOString(), started_at: new Date(now - 4000).toISOString(), completed_at: null,
    owner: { instance: "api-gone", heartbeat_at: new Date(now - 1000).toISOString() },
  };
  const inverted = [...id.slice(7)].map((c) => "0123456789abcdefghjkmnpqrstvwxyz"[31 - "0123456789abcdefghjkmnpqrstvwxyz".indexOf(c)]).join("");
  await a.store.put(`${key}${inverted}.json`, JSON.stringify(rec));
  await a.store.put(`_system/render-active/${id}`, `${key}${inverted}.json`);
  t.equal((await job(a, h, id)).json().data.status, "running", "fresh heartbeat: still running");
  a.clock.advance(60_000);
  const read1 = (await job(a, h, id)).json().data;
  t.equal(read1.status, "failed", "no heartbeat for 45 s: failed on read");
  t.match(read1.error, /stopped before it finished/);
});
