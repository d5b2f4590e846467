#!/usr/bin/env node
// The test command behind `make test`: lint, type check, then every tap test file.
// It exists so that CI gets one plain closing line, `N passed, N failed, N skipped`, that
// counts every assertion in every test file plus the lint and type-check gates, and so that
// each skipped test is listed with its reason.
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync, rmSync, existsSync } from "node:fs";
import { join } from "node:path";
import { Parser } from "tap-parser";

const args = process.argv.slice(2);
const onlyTap = args.includes("--only-tap");
const files = args.filter((a) => !a.startsWith("--"));
let passed = 0;
let failed = 0;
const skipped = [];
const failures = [];

/** How long each phase took, printed at the end (docs/development.md#how-long-make-test-takes). */
const phases = [];
function timed(name, fn) {
  const start = Date.now();
  const r = fn();
  phases.push(`${name} ${((Date.now() - start) / 1000).toFixed(0)} s`);
  return r;
}

function gate(name, cmd, cmdArgs) {
  process.stdout.write(`\n== ${name}: ${cmd} ${cmdArgs.join(" ")}\n`);
  const r = timed(name, () => spawnSync(cmd, cmdArgs, { stdio: "inherit" }));
  if (r.status === 0) passed++;
  else { failed++; failures.push(`${name} (exit ${r.status ?? r.signal})`); }
}

if (!onlyTap) {
  gate("lint", "npx", ["eslint", "--max-warnings=0", "."]);
  gate("typecheck", "npx", ["tsc", "-p", "tsconfig.json"]);
}

const resultsDir = ".tap/test-results";
rmSync(resultsDir, { recursive: true, force: true });
process.stdout.write("\n== tests: tap\n");
const tapArgs = ["tap", "--reporter", process.env.CI ? "terse" : "base", ...files];
const tapRun = timed("tests", () => spawnSync("npx", tapArgs, { stdio: "inherit" }));

function walk(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith(".tap") ? [join(dir, e.name)] : []);
}

const resultFiles = walk(resultsDir);
// Count leaf assertions: a subtest's own summary point is not counted (its children are),
// unless the subtest produced no points of its own (a crash), which counts as a failure.
function attach(parser, file) {
  let childPoints = null;
  parser.on("child", (child) => {
    childPoints = { n: 0 };
    const mine = childPoints;
    attach(child, file).on("assert", () => { mine.n++; });
    child.on("child", () => { mine.n++; });
  });
  parser.on("assert", (a) => {
    const summary = childPoints;
    childPoints = null;
    if (summary && summary.n > 0 && a.ok) return;
    if (summary && summary.n > 0 && !a.ok && !a.todo) return; // children already counted the failure
    const where = file.slice(resultsDir.length + 1).replace(/\.tap$/, "");
    if (a.skip) skipped.push(`${where}: ${a.name} (${a.skip === true ? "no reason given" : a.skip})`);
    else if (a.ok || a.todo) passed++;
    else { failed++; failures.push(`${where}: ${a.name}`); }
  });
  return parser;
}

for (const file of resultFiles) {
  const p = attach(new Parser(), file);
  let complete = null;
  p.on("complete", (res) => { complete = res; });
  p.end(readFileSync(file, "utf8"));
  if (!complete || (!complete.ok && complete.count === 0)) { failed++; failures.push(`${file}: no result (crashed before its first assertion)`); }
}
if (tapRun.status !== 0 && failed === 0) { failed++; failures.push(`tap exited ${tapRun.status ?? tapRun.signal}`); }
if (resultFiles.length === 0) { failed++; failures.push("no test results found"); }

if (skipped.length) process.stdout.write(`\nSkipped:\n${skipped.map((s) => `  - ${s}`).join("\n")}\n`);
if (failures.length) process.stdout.write(`\nFailed:\n${failures.map((s) => `  - ${s}`).join("\n")}\n`);
process.stdout.write(`\nTime: ${phases.join(", ")}\n`);
process.stdout.write(`\n${passed} passed, ${failed} failed${skipped.length ? `, ${skipped.length} skipped` : ""}\n`);
process.exit(failed === 0 ? 0 : 1);
