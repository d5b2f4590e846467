/**
 * The dependency gate (scripts/check-deps.mjs) that starts `make test`: it passes on this
 * checkout's installed tree and on a faithful scratch copy of it, and fails with one line
 * naming the package when the copy is broken (an invalid version, a missing package, an
 * extraneous one) — the three ways a lock file and node_modules drift apart.
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const root = process.cwd();
const gate = join(root, "scripts/check-deps.mjs");

function runGate(dir: string) {
  const r = spawnSync(process.execPath, [gate, dir], { encoding: "utf8" });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A scratch copy of the project's manifest, lock and installed tree (hard links: fast, and
 * a file is replaced, never written through, so the checkout is untouched). */
function scratchCopy(): string {
  const dir = mkdtempSync(join(tmpdir(), "operon-deps-"));
  cpSync(join(root, "package.json"), join(dir, "package.json"));
  cpSync(join(root, "package-lock.json"), join(dir, "package-lock.json"));
  const r = spawnSync("cp", ["-al", join(root, "node_modules"), join(dir, "node_modules")]);
  if (r.status !== 0) throw new Error(`cp -al failed: ${r.stderr.toString()}`);
  return dir;
}

/** Replaces (unlink, then write) a package's manifest in the copy with another version. */
function setVersion(dir: string, pkg: string, version: string) {
  const file = join(dir, "node_modules", pkg, "package.json");
  const manifest = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
  rmSync(file);
  writeFileSync(file, JSON.stringify({ ...manifest, version }));
}

t.test("the checkout's installed tree passes the gate", async (t) => {
  const r = runGate(root);
  t.equal(r.status, 0, r.stderr);
  t.match(r.stdout, /dependency tree is valid/);
});

t.test("a scratch copy passes, then fails on each kind of drift with one line naming it", async (t) => {
  const dir = scratchCopy();
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const clean = runGate(dir);
  t.equal(clean.status, 0, `an unbroken copy passes: ${clean.stderr}`);

  // fast-uri@3 where fast-json-stringify needs ^4: the very drift that broke `npm ci` on 2026-11-24.
  setVersion(dir, "fast-uri", "3.1.9");
  const invalid = runGate(dir);
  t.equal(invalid.status, 1);
  t.equal(invalid.stderr.trim().split("\n").length, 1, "one line");
  t.match(invalid.stderr, /invalid: fast-uri@3\.1\.9/);

  rmSync(join(dir, "node_modules", "yaml"), { recursive: true });
  const missing = runGate(dir);
  t.equal(missing.status, 1);
  t.match(missing.stderr, /missing: yaml@/);

  mkdirSync(join(dir, "node_modules", "left-behind"));
  writeFileSync(join(dir, "node_modules", "left-behind", "package.json"), JSON.stringify({ name: "left-behind", version: "1.0.0" }));
  const extraneous = runGate(dir);
  t.equal(extraneous.status, 1);
  t.match(extraneous.stderr, /extraneous: left-behind@1\.0\.0/);
  t.equal(extraneous.stderr.trim().split("\n").length, 1, "still one line with three problems");
});
