/**
 * `operon run` against a real engine-backed api-server listening on a port, with the real
 * Debian tools on data the test makes (a random 5 kb reference and wgsim reads): a built-in
 * pipeline followed to completion, a refused spec, a failing run, usage and connection
 * errors, and the `--input` parsing.
 */
import t from "tap";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseInputs, runCommand, type RunIO } from "../../cli/run.js";
import { main } from "../../cli/main.js";
import { testApp, type TestApp } from "../support/app.js";
import { simulateReads } from "../support/reads.js";

const dir = mkdtempSync(join(tmpdir(), "operon-cli-run-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

simulateReads(dir, { seed: 7, length: 5_000, pairs: 200, readLength: 70, names: ["ref.fa", "r1.fq", "r2.fq"] });

const a: TestApp = await testApp({ engine: {} });
t.teardown(() => a.close());
await a.service.createWorkspace("acme", "ws");
const key = await a.key("acme", ["tools"]);
for (const f of ["ref.fa", "r1.fq", "r2.fq"]) await a.store.put(`orgs/acme/workspaces/ws/data/${f}`, readFileSync(join(dir, f)));
await a.app.listen({ port: 0, host: "127.0.0.1" });
const addr = a.app.server.address();
if (addr === null || typeof addr === "string") throw new Error("no port");
const url = `http://127.0.0.1:${addr.port}`;

const writeSpec = (name: string, spec: unknown) => { const p = join(dir, name); writeFileSync(p, JSON.stringify(spec)); return p; };
// samtools index on a FASTA: the run is accepted (the file exists) and the step fails.
const failingSpec = {
  specVersion: "1.0", id: "bad-index", inputs: [{ name: "bam", type: "file" }],
  steps: [{ stepId: "index_bam", toolName: "samtools", parameters: { command: "index", inputFile: "${bam}" } }],
};

async function cli(args: string[], opts: { env?: NodeJS.ProcessEnv; tty?: boolean; auth?: boolean } = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const io: RunIO = { out: (l) => out.push(l), err: (l) => err.push(l), isTTY: opts.tty ?? false };
  const extra = opts.auth === false ? [] : ["--url", url, "--key", key];
  const code = await runCommand([...args, ...extra, "--poll-ms", "50"], io, opts.env ?? {});
  return { code, out, err, stdout: out.join("\n"), stderr: err.join("\n") };
}

const bwaInputs = ["--input", "reads1=data/r1.fq", "--input", "reads2=data/r2.fq", "--input", "reference=data/ref.fa"];

t.test("a built-in pipeline followed to completion", async (t) => {
  const r = await cli(["bwa-align", "--workspace", "ws", ...bwaInputs, "--follow"]);
  t.equal(r.code, 0, r.stderr);
  for (const step of ["index_reference", "align", "sort", "index_bam", "flagstat"]) {
    t.match(r.stdout, new RegExp(`^  ${step} +\\[##########\\] completed$`, "m"), `${step}: a completed line`);
  }
  t.notOk(r.out.some((l) => l.includes("\x1b[")), "no ANSI codes when stdout is not a terminal");
  const lines = r.out.filter((l) => l.startsWith("  flagstat "));
  t.equal(new Set(lines).size, lines.length, "a line only when the status changes");
  t.match(r.stdout, /^run run-[0-9a-z]{26} completed$/m);
  t.ok(r.out.some((l) => /^ {2}\S+\.flagstat\.txt$/.test(l)), "output paths printed");
});

t.test("on a terminal the block is redrawn in place, and --json prints the final run", async (t) => {
  const tty = await cli(["bwa-align", "--workspace", "ws", ...bwaInputs, "--input", "sampleName=s2", "--follow"], { tty: true });
  t.equal(tty.code, 0, tty.stderr);
  t.ok(tty.out.some((l) => l.startsWith("\x1b[6A\x1b[2Krun run-")), "cursor up over the header and five steps");
  t.ok(tty.out.filter((l) => / \[[#-]{10}\] /.test(l)).every((l) => l.startsWith("\x1b[2K  ")), "every step line cleared before it is drawn");
  const json = await cli(["bwa-align", "--workspace", "ws", ...bwaInputs, "--follow", "--json"]);
  t.equal(json.code, 0, json.stderr);
  const run = JSON.parse(json.stdout);
  t.equal(run.status, "completed");
  t.ok(run.output_paths.some((p: string) => p.endsWith("sample.flagstat.txt")));
});

t.test("an invalid local spec is refused with each validation error on its own line", async (t) => {
  const file = writeSpec("unknown.json", { steps: [{ stepId: "a", toolName: "samtool", parameters: {} }] });
  const r = await cli([file, "--workspace", "ws", "--follow"]);
  t.equal(r.code, 1);
  t.match(r.err[0], /^operon run: .+/);
  t.match(r.stderr, /^ {2}\/steps\/0\/toolName: .*\[unknown_tool\]$/m);
  t.equal(r.stdout, "", "no run was started");
});

t.test("a run that fails exits 1 with the step's error", async (t) => {
  const file = writeSpec("failing.json", failingSpec);
  const r = await cli([file, "--workspace", "ws", "--input", "bam=data/ref.fa", "--follow"]);
  t.equal(r.code, 1, r.stderr);
  t.match(r.stdout, /^ {2}index_bam +\[-{10}\] failed: .+/m, "the step's line carries its error");
  t.match(r.stdout, /^run run-[0-9a-z]{26} failed$/m);
  t.match(r.stdout, /^error: .*index_bam.*cannot be usefully indexed/m);
});

t.test("a .json path that is not on this machine is a workspace spec file", async (t) => {
  await a.store.put("orgs/acme/workspaces/ws/specs/remote-failing.json", JSON.stringify(failingSpec));
  const r = await cli(["specs/remote-failing.json", "--workspace", "ws", "--input", "bam=data/ref.fa", "--follow"]);
  t.equal(r.code, 1, r.stderr);
  t.match(r.stdout, /index_bam +\[-{10}\] failed/);
  const missing = await cli(["specs/none.json", "--workspace", "ws"]);
  t.equal(missing.code, 1);
  t.match(missing.stderr, /^operon run: spec_file: specs\/none\.json not found/);
});

t.test("without --follow: the run id, exit 0", async (t) => {
  const r = await cli(["bwa-align", "--workspace", "ws", ...bwaInputs, "--input", "sampleName=s=3"]);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.out.length, 1);
  t.match(r.out[0], /^run-[0-9a-z]{26}$/);
  t.equal((await a.engine?.runs.get(r.out[0] ?? ""))?.parameters.sampleName, "s=3", "a value containing = reaches the run intact");
});

t.test("url and key from the environment and the bootstrap key file", async (t) => {
  const data = mkdtempSync(join(dir, "data-"));
  writeFileSync(join(data, "bootstrap-key"), `${key}\n`);
  const r = await cli(["bwa-align", "--workspace", "ws", ...bwaInputs], { auth: false, env: { OPERON_URL: url, OPERON_DATA_DIR: data } });
  t.equal(r.code, 0, r.stderr);
  t.match(r.out[0], /^run-[0-9a-z]{26}$/);
  const bad = await cli(["bwa-align", "--workspace", "ws", ...bwaInputs], { auth: false, env: { OPERON_URL: url, OPERON_API_KEY: "sk_live_" + "x".repeat(32) } });
  t.equal(bad.code, 1, "the API refuses a wrong key");
  t.match(bad.stderr, /^operon run: .*unauthorized/);
  const none = await cli(["bwa-align", "--workspace", "ws"], { auth: false, env: { OPERON_URL: url, OPERON_DATA_DIR: join(dir, "nothing") } });
  t.equal(none.code, 2);
  t.match(none.stderr, /no API key/);
});

t.test("usage and connection problems exit 2", async (t) => {
  const noWs = await cli(["bwa-align", ...bwaInputs]);
  t.equal(noWs.code, 2);
  t.match(noWs.stderr, /--workspace is required/);
  t.equal(noWs.err.length, 1, "one line");
  t.match(noWs.stderr, /\(see operon run --help\)$/, "with the hint");
  t.equal((await cli(["--workspace", "ws"])).code, 2, "no pipeline");
  t.equal((await cli(["bwa-align", "--workspace", "ws", "--input", "noequals"])).code, 2, "--input without =");
  t.equal((await cli(["bwa-align", "--workspace", "ws", "--bogus"])).code, 2, "unknown option");
  const down = await runCommand(["bwa-align", "--workspace", "ws", "--url", "http://127.0.0.1:1", "--key", key], { out: () => undefined, err: () => undefined }, {});
  t.equal(down, 2, "nothing listening");
  const errs: string[] = [];
  await runCommand(["bwa-align", "--workspace", "ws", "--url", "http://127.0.0.1:1", "--key", key], { out: () => undefined, err: (l) => errs.push(l) }, {});
  t.match(errs[0], /^operon run: cannot reach http:\/\/127\.0\.0\.1:1/);
  const big = join(dir, "big.json");
  writeFileSync(big, JSON.stringify({ pad: "x".repeat(1_100_000) }));
  const tooBig = await cli([big, "--workspace", "ws"]);
  t.equal(tooBig.code, 2);
  t.match(tooBig.stderr, /larger than 1 MB/);
});

t.test("--input parsing", async (t) => {
  t.same(parseInputs(["a=b", "args=-k 19 -T x=y", "empty="]), { a: "b", args: "-k 19 -T x=y", empty: "" }, "split at the first =");
  t.throws(() => parseInputs(["=v"]), /expected NAME=VALUE/);
  t.throws(() => parseInputs(["novalue"]), /expected NAME=VALUE/);
  t.throws(() => parseInputs(["a=1", "a=2"]), /given twice/);
});

t.test("operon run is dispatched by main", async (t) => {
  const err: string[] = [];
  t.equal(await main(["run", "bwa-align"], { out: () => undefined, err: (l) => err.push(l) }), 2);
  t.match(err.join("\n"), /--workspace is required/);
  const help: string[] = [];
  await main(["--help"], { out: (l) => help.push(l), err: () => undefined });
  t.match(help.join("\n"), /^ {2}run <SPEC_OR_PIPELINE_ID> +Start a run/m);
  const runHelp: string[] = [];
  t.equal(await main(["run", "--help"], { out: (l) => runHelp.push(l), err: () => undefined }), 0);
  t.match(runHelp.join("\n"), /^Usage: operon run <SPEC_OR_PIPELINE_ID> --workspace <id> \[options\]$/m);
});
