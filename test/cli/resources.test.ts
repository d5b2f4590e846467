/**
 * The CLI's API commands (runs, pipelines, files, tools, viewer, render) against a real
 * `operon serve` started on a fresh data folder, with the real Debian tools. The CLI finds the
 * server and its key the default way (PORT and OPERON_DATA_DIR/bootstrap-key) and acts in the
 * `default` workspace the first start creates. Each test checks what the command did through
 * the API or the file system, not just its exit code.
 */
import t, { type Test } from "tap";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { main } from "../../cli/main.js";
import { serveProcess } from "../support/serve.js";
import { freePorts } from "../support/minio.js";
import { simulateReads } from "../support/reads.js";
import { until } from "../support/wait.js";

const dir = mkdtempSync(join(tmpdir(), "operon-cli-resources-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const data = join(dir, "server");
mkdirSync(data);
const server = await serveProcess(t, data);
await server.start();
t.teardown(() => server.stop("SIGTERM"));
const base = `http://127.0.0.1:${server.port}`;
const env: NodeJS.ProcessEnv = { OPERON_DATA_DIR: data, PORT: String(server.port) };
const key = readFileSync(join(data, "bootstrap-key"), "utf8").trim();

async function cli(args: string[], opts: { fetch?: typeof fetch } = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, { out: (s) => out.push(s), err: (s) => err.push(s) }, { env, ...opts });
  return { code, out, err, stdout: out.join("\n"), stderr: err.join("\n") };
}
/** The command's --json output, parsed (the command must succeed). */
async function cliJson<T>(t: Test, args: string[]): Promise<T> {
  const r = await cli([...args, "--json"]);
  t.equal(r.code, 0, `${args.join(" ")}: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}
const api = async (path: string) => {
  const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, text: await res.text() };
};
const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");
const local = (name: string, content: Buffer | string) => { const p = join(dir, name); writeFileSync(p, content); return p; };

interface FileView { key: string; size: number; sha256: string | null }
interface Page<T> { data: T[]; has_more: boolean; next_cursor: string | null }
interface Run { id: string; status: string; steps: Array<{ step_id: string; status: string; exit_code: number | null }> }

const TINY_SAM = "@HD\tVN:1.6\n@SQ\tSN:chr1\tLN:100\nr1\t0\tchr1\t1\t60\t10M\t*\t0\t0\tACGTACGTAC\tIIIIIIIIII\n";
const tinySam = local("tiny.sam", TINY_SAM);
t.equal((await cli(["files", "upload", tinySam, "--path", "data/"])).code, 0, "the SAM for the tool and run tests is uploaded");

t.test("files: upload, ls (sizes, paging), download (identical bytes, no temporary file), rm", async (t) => {
  const blob = randomBytes(300_000);
  const files = [local("blob.bin", blob), local("odd name #1?.txt", "odd\n")];
  const up = await cliJson<FileView[]>(t, ["files", "upload", ...files, "--path", "up/"]);
  t.same(up.map((f) => [f.key, f.size]), [["up/blob.bin", 300_000], ["up/odd name #1?.txt", 4]], "both stored, in their folder, with their sizes");

  const listed = await cliJson<Page<FileView>>(t, ["files", "ls", "--prefix", "up/"]);
  t.same(listed.data.map((f) => [f.key, f.size, f.sha256]), [["up/blob.bin", 300_000, sha256(blob)], ["up/odd name #1?.txt", 4, sha256(Buffer.from("odd\n"))]]);
  const human = await cli(["files", "ls", "--prefix", "up/"]);
  t.match(human.out[0], /^SIZE +MODIFIED +KEY$/);
  t.match(human.out[1], /^293 KB +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +up\/blob\.bin$/);
  const first = await cliJson<Page<FileView>>(t, ["files", "ls", "--prefix", "up/", "--limit", "1"]);
  t.equal(first.data.length, 1);
  t.equal(first.has_more, true);
  const second = await cliJson<Page<FileView>>(t, ["files", "ls", "--prefix", "up/", "--limit", "1", "--cursor", first.next_cursor ?? ""]);
  t.same(second.data.map((f) => f.key), ["up/odd name #1?.txt"], "--cursor gives the next page");
  t.match((await cli(["files", "ls", "--prefix", "up/", "--limit", "1"])).stderr, /^more files: --cursor \S+ \(or --all\)$/);
  const all = await cliJson<Page<FileView>>(t, ["files", "ls", "--prefix", "up/", "--limit", "1", "--all"]);
  t.same(all.data.map((f) => f.key), ["up/blob.bin", "up/odd name #1?.txt"], "--all follows every page");

  const out = mkdtempSync(join(dir, "download-"));
  const got = await cli(["files", "download", "up/blob.bin", "-o", `${out}/`]);
  t.equal(got.code, 0, got.stderr);
  t.match(got.stdout, /^downloaded up\/blob\.bin → .*blob\.bin \(293 KB\)$/);
  t.equal(sha256(readFileSync(join(out, "blob.bin"))), sha256(blob), "identical bytes");
  t.same(readdirSync(out), ["blob.bin"], "no temporary file left");
  const named = await cliJson<{ key: string; path: string; size: number; sha256: string }>(t, ["files", "download", "up/odd name #1?.txt", "-o", join(out, "odd.txt")]);
  t.same(named, { key: "up/odd name #1?.txt", path: join(out, "odd.txt"), size: 4, sha256: sha256(Buffer.from("odd\n")) });
  t.equal(readFileSync(join(out, "odd.txt"), "utf8"), "odd\n", "a key with spaces, # and ? is found");
  const missing = await cli(["files", "download", "up/none.bin", "-o", join(out, "none.bin")]);
  t.equal(missing.code, 1);
  t.match(missing.stderr, /^operon files download: .*not found.*\(not_found\)$/);
  t.same(readdirSync(out).sort(), ["blob.bin", "odd.txt"], "nothing written for a missing file");

  const rm = await cli(["files", "rm", "up/odd name #1?.txt"]);
  t.equal(rm.code, 0, rm.stderr);
  t.equal(rm.stdout, "deleted up/odd name #1?.txt");
  t.same((await cliJson<Page<FileView>>(t, ["files", "ls", "--prefix", "up/"])).data.map((f) => f.key), ["up/blob.bin"], "gone from the listing");
  const again = await cli(["files", "rm", "up/odd name #1?.txt"]);
  t.equal(again.code, 1);
  t.match(again.stderr, /not found.*\(not_found\)/);
});

t.test("files download: a transfer that breaks off, or Ctrl-C, leaves neither the target nor a temporary file", async (t) => {
  await cli(["files", "upload", local("big.bin", randomBytes(200_000)), "--path", "dl/"]);
  const isLink = (input: Parameters<typeof fetch>[0]) => String(input).includes("/v1/storage/");
  // The presigned link answers 64 KiB, then the connection breaks.
  const broken: typeof fetch = async (input, init) => {
    if (!isLink(input)) return fetch(input, init);
    let sent = false;
    const body = new ReadableStream<Uint8Array>({ pull(c) { if (sent) c.error(new Error("connection reset")); else { sent = true; c.enqueue(new Uint8Array(65_536)); } } });
    return new Response(body, { status: 200, headers: { "content-length": "200000" } });
  };
  const out = mkdtempSync(join(dir, "broken-"));
  const r = await cli(["files", "download", "dl/big.bin", "-o", join(out, "big.bin")], { fetch: broken });
  t.equal(r.code, 2);
  t.match(r.stderr, /^operon files download: downloading dl\/big\.bin: connection reset$/);
  t.same(readdirSync(out), [], "nothing left behind");

  // The link sends a first chunk, then stalls; SIGINT arrives meanwhile.
  const stalled: typeof fetch = async (input, init) => {
    if (!isLink(input)) return fetch(input, init);
    let sent = false;
    const body = new ReadableStream<Uint8Array>({
      pull(c) {
        if (sent) return new Promise<void>(() => undefined);
        sent = true;
        c.enqueue(new Uint8Array(65_536));
        setTimeout(() => process.emit("SIGINT"), 50);
        return undefined;
      },
    });
    return new Response(body, { status: 200 });
  };
  const before = process.listenerCount("SIGINT");
  const i = await cli(["files", "download", "dl/big.bin", "-o", join(out, "big.bin")], { fetch: stalled });
  t.equal(i.code, 130);
  t.match(i.stderr, /interrupted; nothing written to .*big\.bin$/);
  t.same(readdirSync(out), [], "no partial file, no temporary file");
  t.equal(process.listenerCount("SIGINT"), before, "the SIGINT handler is removed afterwards");
});

t.test("tools: ls, run (stdout, written files, the tool's exit code), refusals", async (t) => {
  const list = await cliJson<Page<{ id: string; available: boolean; commands: Array<{ name: string }> }>>(t, ["tools", "ls"]);
  const samtools = list.data.find((x) => x.id === "samtools");
  t.equal(samtools?.available, true, "samtools is installed where the server runs");
  t.ok(samtools?.commands.some((c) => c.name === "flagstat"));
  const alone = await cli(["tools"]);
  t.equal(alone.code, 0, "operon tools alone is tools ls");
  t.match(alone.stdout, /^ID +VERSION +AVAILABLE +COMMANDS$/m);
  t.match(alone.stdout, /^samtools +\S+ +yes +view, sort, index/m);

  const ok = await cli(["tools", "run", "samtools", "--command", "flagstat", "--param", "inputFile=data/tiny.sam"]);
  t.equal(ok.code, 0, ok.stderr);
  t.match(ok.stdout, /^1 \+ 0 in total/m, "the tool's output on stdout");
  t.match(ok.stderr, /^wrote tool-runs\/\S+\/tiny\.flagstat\.txt \(\d+ B\)$/m, "the files it wrote on stderr");

  const failed = await cli(["tools", "run", "samtools", "--command", "index", "--param", "inputFile=data/tiny.sam", "--json"]);
  const result = JSON.parse(failed.stdout) as { exit_code: number; status: string };
  t.not(result.exit_code, 0, "indexing a SAM fails");
  t.equal(failed.code, result.exit_code, "the CLI exits with the tool's exit code");
  const failedHuman = await cli(["tools", "run", "samtools", "--command", "index", "--param", "inputFile=data/tiny.sam"]);
  t.equal(failedHuman.code, result.exit_code);
  t.match(failedHuman.stderr, /not BGZF compressed/, "the tool's log on stderr");
  t.match(failedHuman.stderr, /^operon tools run: samtools failed \(exit \d+\)/m);

  // Encoded as one path segment: never /v1/tools/bwa/run.
  const sneaky = await cli(["tools", "run", "samtools/../bwa", "--command", "index", "--param", "reference=data/tiny.sam"]);
  t.equal(sneaky.code, 1);
  t.match(sneaky.stderr, /^operon tools run: unknown tool "samtools\/\.\.\/bwa".*\(not_found\)$/);
  const bad = await cli(["tools", "run", "samtools", "--command", "flagstat", "--param", "inputFile=data/none.sam"]);
  t.equal(bad.code, 1);
  t.match(bad.stderr, /input\.inputFile: data\/none\.sam not found/);
});

t.test("runs: ls, show, logs (plain, --tail, --follow), cancel, save-spec", async (t) => {
  const spec = local("tiny-stats.json", JSON.stringify({
    specVersion: "1.0", id: "tiny-stats", name: "Tiny stats", inputs: [{ name: "sam", type: "file" }],
    steps: [{ stepId: "stats", toolName: "samtools", parameters: { command: "flagstat", inputFile: "${sam}", outputFile: "tiny.txt" } }],
  }));
  const tiny = await cliJson<Run>(t, ["run", spec, "--workspace", "default", "--input", "sam=data/tiny.sam", "--follow", "--poll-ms", "50"]);
  t.equal(tiny.status, "completed");

  const shown = await cliJson<Run>(t, ["runs", "show", tiny.id]);
  t.match(shown.steps, [{ step_id: "stats", status: "completed", exit_code: 0 }]);
  const human = await cli(["runs", "show", tiny.id]);
  t.match(human.stdout, new RegExp(`^Run: +${tiny.id}$`, "m"));
  t.match(human.stdout, /^Pipeline: +tiny-stats \(Tiny stats\)$/m);
  t.match(human.stdout, /^stats +samtools +completed +0 +1$/m, "a row per step: status, exit code, attempt");
  t.match(human.stdout, /^ {2}pipelines\/\S+\/tiny\.txt$/m, "its outputs");

  // A run with a real log: bwa-align on simulated reads, followed from the start.
  simulateReads(dir, { seed: 11, length: 5_000, pairs: 200, readLength: 70, names: ["ref.fa", "r1.fq", "r2.fq"] });
  t.equal((await cli(["files", "upload", join(dir, "ref.fa"), join(dir, "r1.fq"), join(dir, "r2.fq"), "--path", "reads/"])).code, 0);
  const inputs = ["--input", "reads1=reads/r1.fq", "--input", "reads2=reads/r2.fq", "--input", "reference=reads/ref.fa"];
  const started = await cli(["run", "bwa-align", "--workspace", "default", ...inputs]);
  const bwa = started.out[0] ?? "";
  t.match(bwa, /^run-[0-9a-z]{26}$/);
  const followed = await cli(["runs", "logs", bwa, "align", "--follow"]);
  t.equal(followed.code, 0, followed.stderr);
  const log = await api(`/v1/pipelines/${bwa}/steps/align/logs`);
  t.equal(log.status, 200);
  t.ok(log.text.trim().length > 0, "bwa mem logs something");
  t.equal(followed.stdout, log.text.replace(/\n$/, ""), "--follow printed the whole log, each line once");
  const run = JSON.parse((await api(`/v1/pipelines/${bwa}`)).text) as { data: Run };
  t.equal(run.data.steps.find((s) => s.step_id === "align")?.status, "completed", "--follow returned once the step had ended");
  const plain = await cli(["runs", "logs", bwa, "align"]);
  t.equal(plain.stdout, followed.stdout, "the log without --follow");
  const lines = log.text.replace(/\n$/, "").split("\n");
  t.same((await cli(["runs", "logs", bwa, "align", "--tail", "2"])).out, [lines.slice(-2).join("\n")], "--tail 2: the last two lines");
  const tailFollow = await cli(["runs", "logs", bwa, "align", "--tail", "2", "-f"]);
  t.same(tailFollow.out, lines.slice(-2), "--tail with --follow");
  const jsonl = await cli(["runs", "logs", bwa, "align", "-f", "--json"]);
  const objects = jsonl.out.map((l) => JSON.parse(l) as { line?: string; status?: string });
  t.same(objects.slice(0, -1).map((o) => o.line), lines, "one {line} per line");
  t.match(objects.at(-1), { run_id: bwa, step_id: "align", status: "completed", exit_code: 0 });
  const logJson = await cliJson<{ log: string; status: string }>(t, ["runs", "logs", bwa, "align"]);
  t.equal(logJson.log, log.text);
  const noStep = await cli(["runs", "logs", bwa, "nope"]);
  t.equal(noStep.code, 1);
  t.match(noStep.stderr, /step "nope" not in run.*\(not_found\)/);
  await until("the bwa-align run to end", async () => (JSON.parse((await api(`/v1/pipelines/${bwa}`)).text) as { data: Run }).data.status === "completed", 120_000);

  // Listing: the newest first, a status filter, paging.
  const listed = await cliJson<Page<Run>>(t, ["runs", "ls"]);
  t.same(listed.data.slice(0, 2).map((r) => r.id), [bwa, tiny.id], "newest first");
  t.same((await cliJson<Page<Run>>(t, ["runs", "ls", "--status", "failed"])).data, [], "--status filters");
  const page = await cliJson<Page<Run>>(t, ["runs", "ls", "--limit", "1"]);
  t.same([page.data.length, page.has_more], [1, true]);
  t.same((await cliJson<Page<Run>>(t, ["runs", "ls", "--limit", "1", "--all"])).data.map((r) => r.id).slice(0, 2), [bwa, tiny.id], "--all");
  const table = await cli(["runs", "ls"]);
  t.match(table.out[0], /^ID +STATUS +PROGRESS +PIPELINE +CREATED$/);
  t.match(table.stdout, new RegExp(`^${tiny.id} +completed +100% +tiny-stats +\\d{4}-`, "m"));

  // Cancel a run that has just been queued.
  const third = (await cli(["run", "bwa-align", "--workspace", "default", ...inputs, "--input", "sampleName=c"])).out[0] ?? "";
  const cancel = await cli(["runs", "cancel", third]);
  t.equal(cancel.code, 0, cancel.stderr);
  t.match(cancel.stdout, new RegExp(`^run ${third}(: cancellation requested \\((queued|running)\\)| cancelled)$`));
  await until("the run to be cancelled", async () => (JSON.parse((await api(`/v1/pipelines/${third}`)).text) as { data: Run }).data.status === "cancelled", 60_000);

  // Save a finished run as a spec, then check it with the server.
  const saved = await cli(["runs", "save-spec", tiny.id, "--name", "CLI saved"]);
  t.equal(saved.code, 0, saved.stderr);
  t.equal(saved.stdout, "saved pipelines/specs/cli-saved.pipeline.json (workspace default)");
  const taken = await cli(["runs", "save-spec", tiny.id, "--name", "CLI saved"]);
  t.equal(taken.code, 1);
  t.match(taken.stderr, /already exists.*\(conflict\)$/);
  t.match(await cliJson<{ path: string }>(t, ["runs", "save-spec", tiny.id, "--name", "CLI saved", "--overwrite"]), { path: "pipelines/specs/cli-saved.pipeline.json" });
  const check = await cliJson<{ valid: boolean }>(t, ["pipelines", "validate", "--spec-file", "pipelines/specs/cli-saved.pipeline.json"]);
  t.equal(check.valid, true, "the saved spec is valid for the server");
  const absent = await cli(["pipelines", "validate", "--spec-file", "pipelines/specs/none.json"]);
  t.equal(absent.code, 1);
  t.match(absent.stderr, /not found/);

  // A run id is one path segment: "a/b" is looked up as a run, not routed elsewhere.
  const slash = await cli(["runs", "show", "a/b"]);
  t.equal(slash.code, 1);
  t.equal(slash.stderr, 'operon runs show: run "a/b" not found (not_found)');
});

t.test("pipelines: ls, show, validate (a local FILE as operon validate does)", async (t) => {
  const list = await cliJson<Page<{ id: string; origin: string }>>(t, ["pipelines", "ls"]);
  t.ok(list.data.some((d) => d.id === "bwa-align" && d.origin === "builtin"));
  t.match((await cli(["pipelines", "ls"])).stdout, /^bwa-align +builtin +5 +BWA-MEM/m);
  const show = await cli(["pipelines", "show", "bwa-align"]);
  t.equal(show.code, 0, show.stderr);
  t.match(show.stdout, /^ {2}reads1 +file +yes +- +/m);
  t.match(show.stdout, /^ {2}align +bwa +index_reference +/m);
  const def = await cliJson<{ spec: { steps: unknown[] } }>(t, ["pipelines", "show", "bwa-align"]);
  t.equal(def.spec.steps.length, 5);
  const none = await cli(["pipelines", "show", "no-such"]);
  t.equal(none.code, 1);
  t.match(none.stderr, /^operon pipelines show: .*\(not_found\)$/);

  const invalid = local("invalid.json", JSON.stringify({ steps: [{ stepId: "a", toolName: "samtool", parameters: {} }] }));
  const p = await cli(["pipelines", "validate", invalid]);
  const v = await cli(["validate", invalid]);
  t.equal(p.code, 1);
  t.same([p.code, p.stdout], [v.code, v.stdout], "the same check and output as operon validate");
  t.match(p.stdout, /unknown tool "samtool"/);
});

t.test("viewer: a link that opens without a key", async (t) => {
  t.equal((await cli(["files", "upload", "test/fixtures/viewers/deseq2-results.csv", "--path", "de/"])).code, 0);
  const r = await cli(["viewer", "de/deseq2-results.csv"]);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.out.length, 1, "just the link");
  t.match(r.stdout, new RegExp(`^${base}/view/\\S+$`));
  const page = await fetch(r.stdout);
  t.equal(page.status, 200);
  t.match(page.headers.get("content-type"), /text\/html/);
  t.match(await page.text(), /deseq2-results\.csv/);
  const j = await cliJson<{ viewer_url: string; format: string; expires_in: number }>(t, ["viewer", "de/deseq2-results.csv", "--expires-in", "60"]);
  t.match(j, { format: "csv", expires_in: 60 });
  const missing = await cli(["viewer", "de/none.vcf"]);
  t.equal(missing.code, 1);
  t.match(missing.stderr, /not found/);
});

t.test("render: waits for the job and prints the image's and data's paths; failures exit 1 in words", async (t) => {
  const r = await cli(["render", "volcano_plot", "de/deseq2-results.csv", "--option", "threshold_fc=1.5", "--option", "title=Treated vs control"]);
  t.equal(r.code, 0, r.stderr);
  t.match(r.out[0], /^image: plots\/deseq2-results_volcano\.png \(\d+×\d+, .+\)$/);
  t.equal(r.out[1], "data:  plots/deseq2-results_volcano.tsv");
  const plots = await cliJson<Page<FileView>>(t, ["files", "ls", "--prefix", "plots/"]);
  t.same(plots.data.map((f) => f.key), ["plots/deseq2-results_volcano.png", "plots/deseq2-results_volcano.tsv"], "both exist in the workspace");
  t.ok(plots.data.every((f) => f.size > 0));
  const svg = await cliJson<{ status: string; output_path: string; options: { threshold_fc: number } }>(t, ["render", "volcano_plot", "de/deseq2-results.csv", "--format", "svg", "--output-path", "charts/", "--option", "threshold_fc=2"]);
  t.match(svg, { status: "completed", output_path: "charts/deseq2-results_volcano.svg", options: { threshold_fc: 2 } }, "a JSON value is sent as a number");

  const refused = await cli(["render", "volcano_plot", "de/deseq2-results.csv", "--option", "threshold=2"]);
  t.equal(refused.code, 1);
  t.match(refused.err[0], /^operon render: options\.threshold: unknown option.*\(invalid_request\)$/);
  t.match(refused.err[1], /^ {2}options\.threshold: unknown option/, "then each issue on its own line");
  // A table without the columns a volcano plot needs: accepted, then the job fails.
  t.equal((await cli(["files", "upload", local("nocols.csv", "gene,count\nA,1\nB,2\n"), "--path", "de/"])).code, 0);
  const failed = await cli(["render", "volcano_plot", "de/nocols.csv"]);
  t.equal(failed.code, 1);
  t.match(failed.stderr, /^operon render: the volcano_plot of de\/nocols\.csv failed: .+ \(job \S+\)$/, "the job's error in words");
});

t.test("a server that cannot be reached exits 2", async (t) => {
  const [port] = await freePorts(1);
  const r = await cli(["runs", "ls", "--url", `http://127.0.0.1:${port}`]);
  t.equal(r.code, 2);
  t.match(r.stderr, new RegExp(`^operon runs ls: cannot reach http://127\\.0\\.0\\.1:${port} \\(.+\\)$`));
});
