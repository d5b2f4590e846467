import t from "tap";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { main } from "../../cli/main.js";
import { MAX_SPEC_BYTES } from "../../core/spec/schema.js";

const dir = mkdtempSync(join(tmpdir(), "operon-cli-"));
const write = (name: string, content: string) => { const p = join(dir, name); writeFileSync(p, content); return p; };

const valid = write("valid.json", JSON.stringify({
  specVersion: "1.0", id: "qc", name: "QC",
  inputs: [{ name: "reads", type: "file" }],
  steps: [{ stepId: "fastqc", toolName: "fastqc", parameters: { inputFile: "${reads}" } }],
}));
const warnOnly = write("warn.json", JSON.stringify({
  steps: [{ stepId: "a", toolName: "samtools", timeout: 9_000_000, parameters: { command: "flagstat", inputFile: "x.bam", outputFile: "x.txt" } }],
}));
const invalid = write("invalid.json", JSON.stringify({ steps: [{ stepId: "a", toolName: "samtool", parameters: {} }] }));
const broken = write("broken.json", "{ \"steps\": [");
const big = write("big.json", JSON.stringify({ steps: [], pad: "x".repeat(MAX_SPEC_BYTES) }));

async function run(args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, { out: (s) => out.push(s), err: (s) => err.push(s) });
  return { code, out: out.join("\n"), err: err.join("\n") };
}

t.test("valid spec exits 0", async (t) => {
  const r = await run(["validate", valid]);
  t.equal(r.code, 0);
  t.match(r.out, /valid \(0 errors, 0 warnings\)/);
});

t.test("warnings only: still valid, exit 0, warning printed", async (t) => {
  const r = await run(["validate", warnOnly]);
  t.equal(r.code, 0);
  t.match(r.out, /warning \/steps\/0\/timeout: .*\[timeout_clamped\]/);
});

t.test("invalid spec exits 1 and names the field", async (t) => {
  const r = await run(["validate", invalid]);
  t.equal(r.code, 1);
  t.match(r.out, /error {3}\/steps\/0\/toolName: unknown tool "samtool"/);
});

t.test("--json prints the {valid, errors, warnings} object", async (t) => {
  const r = await run(["validate", invalid, "--json"]);
  t.equal(r.code, 1);
  const parsed = JSON.parse(r.out) as { valid: boolean; errors: Array<{ code: string; path: string; valid_values?: string[] }>; warnings: unknown[] };
  t.equal(parsed.valid, false);
  t.same(parsed.warnings, []);
  t.equal(parsed.errors[0]?.code, "unknown_tool");
  t.equal(parsed.errors[0]?.path, "/steps/0/toolName");
  t.ok(parsed.errors[0]?.valid_values?.includes("samtools"));
});

for (const [name, args, pattern] of [
  ["missing file", ["validate", join(dir, "nope.json")], /no such file/],
  ["unparsable JSON", ["validate", broken], /not valid JSON/],
  ["file over 1 MB", ["validate", big], /larger than 1 MB/],
  ["a directory", ["validate", dir], /not a regular file/],
  ["no file argument", ["validate"], /^operon validate: missing argument FILE \(see operon validate --help\)$/],
] as const) {
  t.test(`exit 2: ${name}`, async (t) => {
    const r = await run([...args]);
    t.equal(r.code, 2);
    t.match(r.err, pattern);
    t.equal(r.err.split("\n").length, 1, "one line");
    t.notMatch(r.err, /\n\s+at /, "no stack trace");
  });
}

t.test("the real process: exit codes and output through the entry point", async (t) => {
  const exec = (args: string[]) => spawnSync(process.execPath, ["--import", "tsx", "cli/main.ts", ...args], { encoding: "utf8" });
  const ok = exec(["validate", valid, "--json"]);
  t.equal(ok.status, 0, ok.stderr);
  t.equal((JSON.parse(ok.stdout) as { valid: boolean }).valid, true);
  const bad = exec(["validate", invalid]);
  t.equal(bad.status, 1);
  const gone = exec(["validate", join(dir, "missing.json")]);
  t.equal(gone.status, 2);
  t.equal(gone.stderr.trim().split("\n").length, 1);
  t.notMatch(gone.stderr, /\n\s+at /);
  const unknown = exec(["frobnicate"]);
  t.equal(unknown.status, 2);
  t.match(unknown.stderr, /unknown command "frobnicate"/);
});
