#!/usr/bin/env node
// The dependency gate at the start of `make test`: the installed tree must be exactly what
// package.json and the lock file describe. `npm ci` installs what the lock says even when an
// edge in it is invalid, so a broken lock can pass every test on a machine whose npm cache
// still answers the old version, then fail on a fresh one (docs/development.md#dependencies).
// Prints one line and exits 1 on any invalid, missing or extraneous package.
// Usage: node scripts/check-deps.mjs [project-dir]
import { spawnSync } from "node:child_process";
import { resolve } from "node:path";

const dir = resolve(process.argv[2] ?? ".");
const ls = spawnSync("npm", ["ls", "--all", "--json"], { cwd: dir, encoding: "utf8", maxBuffer: 256 * 1024 * 1024 });
if (ls.error) {
  console.error(`dependency gate: could not run npm ls in ${dir}: ${ls.error.message}`);
  process.exit(1);
}
let tree;
try {
  tree = JSON.parse(ls.stdout);
} catch {
  console.error(`dependency gate: npm ls in ${dir} printed no JSON (exit ${ls.status}): ${ls.stderr.trim().split("\n")[0] ?? ""}`);
  process.exit(1);
}

/** npm ls --json reports problems as sentences ("invalid: x@1 /path", "missing: y@^2, required by z"). */
const problems = [...new Set(tree.problems ?? [])].map((p) => p.replace(`${dir}/`, ""));
if (problems.length > 0 || ls.status !== 0) {
  const shown = problems.length > 0 ? problems.join("; ") : `npm ls exited ${ls.status}`;
  console.error(`dependency gate: the installed tree does not match package.json and package-lock.json (${problems.length} problem(s)): ${shown}. Fix it with npm (npm install, an upgrade, or an "overrides" entry whose reason is written in docs/development.md), never by editing the lock file.`);
  process.exit(1);
}
console.log(`dependency gate: ${dir === process.cwd() ? "the" : dir} dependency tree is valid`);
