/**
 * README.md's Quick start, run as written: the shell blocks after the `make run` block are
 * executed with bash, unchanged, in the repository's root (where a user types them), against a
 * real `operon serve` on a temp data folder and a free port. Only the environment differs from
 * a fresh second terminal: OPERON_DATA_DIR and PORT, which the README's commands read
 * (`${OPERON_DATA_DIR:-.operon}/bootstrap-key`, `${PORT:-8080}`) as `make run` does. The run
 * must complete, the uploaded files must be the ones shipped in examples/quickstart/, and the
 * flagstat the commands print must show every read counted and more than 95 % of them mapped.
 *
 * `./operon` rebuilds dist/ when a source changed (make build), as it does for a user; when
 * node_modules is not marked installed by `make install`, that would run `npm ci` in this
 * checkout under the other tests, so the test fails instead and says so.
 */
import t from "tap";
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { serveProcess } from "../support/serve.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const readme = readFileSync(join(ROOT, "README.md"), "utf8");
/** At most this many lines from the Quick start heading to the next section: one screen. */
const ONE_SCREEN = 40;

/** The Quick start section: from its heading to the next `## ` heading. */
function quickStart(md: string): string | undefined {
  const start = md.search(/^## Quick start$/m);
  if (start < 0) return undefined;
  const next = md.slice(start + 1).search(/^## /m);
  return next < 0 ? md.slice(start) : md.slice(start, start + 1 + next);
}

/** The section's ```sh blocks that come after the block with `make run`. */
function commandsAfterMakeRun(section: string): string[] {
  const blocks = [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1] ?? "");
  const i = blocks.findIndex((b) => /^make run\b/m.test(b));
  return i < 0 ? [] : blocks.slice(i + 1);
}

function sha256(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

function run(script: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-euo", "pipefail", "-c", script], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => { stdout += c.toString(); });
    child.stderr.on("data", (c: Buffer) => { stderr += c.toString(); });
    // The commands' own processes (./operon, make, curl) are in the child's process group.
    const timer = setTimeout(() => { try { process.kill(-child.pid!, "SIGKILL"); } catch { /* gone */ } }, timeoutMs);
    child.on("error", reject);
    child.on("close", (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }); });
  });
}

const section = quickStart(readme);
const blocks = section === undefined ? [] : commandsAfterMakeRun(section);
const script = blocks.join("\n");

t.test("the Quick start is there, one screen long, with commands after `make run`", async (t) => {
  t.ok(section, "README.md has a `## Quick start` section");
  const lines = (section ?? "").trimEnd().split("\n").length;
  t.ok(lines <= ONE_SCREEN, `the section is ${lines} lines (at most ${ONE_SCREEN})`);
  t.ok(blocks.length > 0, "a ```sh block follows the one with `make run`");
});

t.test("the commands reach the server `make run` started, wherever its data folder and port are", async (t) => {
  t.match(script, "${OPERON_DATA_DIR:-.operon}/bootstrap-key", "the key is read where the server writes it");
  t.match(script, /127\.0\.0\.1:\$\{PORT:-8080\}/, "the API is addressed through PORT");
  t.notMatch(script.replaceAll("${PORT:-8080}", ""), /:8080\b/, "no fixed port besides PORT's default");
});

t.test("the Quick start's commands run to a completed bwa-align run with the expected alignments", async (t) => {
  // Running against port 8080 would upload into whatever server a developer has there.
  if (!script.includes("${PORT:-8080}") || !script.includes("${OPERON_DATA_DIR:-.operon}")) {
    t.fail("not run: the commands do not take the port and data folder from PORT and OPERON_DATA_DIR (see the test above)");
    return;
  }
  const stamp = spawnSync("make", ["-s", "-n", "node_modules/.install-stamp"], { cwd: ROOT, encoding: "utf8" });
  if (stamp.status !== 0 || stamp.stdout.includes("npm ci")) {
    t.fail("not run: node_modules is not marked installed (node_modules/.install-stamp missing or older than package.json), "
      + "so the README's ./operon would run `npm ci` in this checkout; run `make install` first");
    return;
  }

  const data = mkdtempSync(join(tmpdir(), "operon-quickstart-"));
  const server = await serveProcess(t, data);
  t.teardown(async () => { await server.stop("SIGTERM"); rmSync(data, { recursive: true, force: true }); });
  await server.start();

  const env: NodeJS.ProcessEnv = { ...process.env, OPERON_DATA_DIR: data, PORT: String(server.port) };
  // A developer's own settings would point the CLI elsewhere than the README says.
  for (const v of ["OPERON_URL", "OPERON_API_KEY"]) delete env[v];
  const r = await run(script, env, 480_000);
  t.equal(r.code, 0, "the commands exit 0", { stdout: r.stdout.slice(-4000), stderr: r.stderr.slice(-4000) });
  t.match(r.stdout, /^run run-\S+ completed$/m, "./operon run --follow reports the run completed");

  // What was uploaded is what the repository ships, byte for byte.
  const files = (await server.api("GET", "/v1/files?workspace_id=default&limit=1000")).body.data as unknown as { key: string; name: string; sha256: string }[];
  const uploaded = files.filter((f) => !f.key.startsWith("pipelines/"));
  t.ok(uploaded.length >= 3, `a reference and two read files were uploaded (${uploaded.map((f) => f.key).join(", ")})`);
  for (const f of uploaded) {
    const shipped = join(ROOT, "examples/quickstart", f.name);
    t.ok(existsSync(shipped) && sha256(shipped) === f.sha256, `${f.key} is examples/quickstart/${f.name}`);
  }

  const runs = (await server.api("GET", "/v1/pipelines?workspace_id=default")).body.data as unknown as { status: string }[];
  t.same(runs.map((x) => x.status), ["completed"], "one run, completed");

  // The flagstat the last commands print: every simulated read counted, nearly all mapped.
  const reads = uploaded.filter((f) => f.name.endsWith(".fastq"))
    .reduce((n, f) => n + readFileSync(join(ROOT, "examples/quickstart", f.name), "utf8").trimEnd().split("\n").length / 4, 0);
  const total = /^(\d+) \+ 0 in total/m.exec(r.stdout);
  const mapped = /^(\d+) \+ 0 mapped \(([\d.]+)%/m.exec(r.stdout);
  t.ok(total && mapped, "the output ends with samtools flagstat's report");
  t.equal(Number(total?.[1]), reads, `flagstat counts all ${reads} reads of the two FASTQ files`);
  t.ok(Number(mapped?.[2]) > 95, `more than 95 % mapped (${mapped?.[2]} %)`);
});
