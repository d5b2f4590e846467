/**
 * The CLI's conventions (cli/program.ts): help for the root and every command and
 * subcommand, --version, and usage errors (exit 2, one line on stderr naming the problem
 * with a `see operon <command> --help` hint, nothing on stdout, no stack trace). Usage errors
 * stop before any action runs, so none of these touches a store or starts a server.
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Command } from "commander";
import { createProgram, main } from "../../cli/main.js";

const pkg = JSON.parse(readFileSync("package.json", "utf8")) as { version: string };

async function cli(args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  // An environment of its own: no server or key of the machine's can change an answer.
  const code = await main(args, { out: (s) => out.push(s), err: (s) => err.push(s) }, { env: { OPERON_DATA_DIR: "/nonexistent" } });
  return { code, stdout: out.join("\n"), stderr: err.join("\n"), errLines: err.flatMap((s) => s.split("\n")) };
}

/**
 * Every command and subcommand with the options its help must list; `!` marks a required
 * option. The test below fails when the CLI has a command this table does not know.
 */
const COMMANDS: Record<string, string[]> = {
  "serve": [],
  "api-server": [],
  "operator": [],
  "workspaces": [],
  "workspaces create": ["!--org", "!--id", "--name", "--json"],
  "workspaces list": ["!--org", "--json"],
  "keys": [],
  "keys create": ["!--org", "!--scopes", "--workspaces", "--name", "--json"],
  "keys list": ["!--org", "--json"],
  "keys revoke": ["--json"],
  "validate": ["--json"],
  "run": ["!--workspace", "--input", "--follow", "--json", "--url", "--key", "--poll-ms"],
  "runs": [],
  "runs ls": ["--status", "--limit", "--cursor", "--all", "--workspace", "--json", "--url", "--key"],
  "runs show": ["--workspace", "--json", "--url", "--key"],
  "runs logs": ["--tail", "--workspace", "--json", "--url", "--key"],
  "runs cancel": ["--workspace", "--json", "--url", "--key"],
  "runs save-spec": ["!--name", "--overwrite", "--workspace", "--json", "--url", "--key"],
  "pipelines": [],
  "pipelines ls": ["--workspace", "--json", "--url", "--key"],
  "pipelines show": ["--json", "--url", "--key"],
  "pipelines validate": ["--spec-file", "--workspace", "--json", "--url", "--key"],
  "tools": [],
  "tools ls": ["--json", "--url", "--key"],
  "tools run": ["--command", "--param", "--workspace", "--json", "--url", "--key"],
  "files": [],
  "files ls": ["--prefix", "--limit", "--cursor", "--all", "--workspace", "--json", "--url", "--key"],
  "files upload": ["--path", "--description", "--parallel", "--wait-checksum", "--workspace", "--json", "--url", "--key"],
  "files download": ["--parallel", "--workspace", "--json", "--url", "--key"],
  "files rm": ["--workspace", "--json", "--url", "--key"],
  "viewer": ["--format", "--reference", "--region", "--expires-in", "--workspace", "--json", "--url", "--key"],
  "render": ["--option", "--format", "--output-path", "--workspace", "--json", "--url", "--key"],
  "ask": ["--workspace", "--conversation", "--url", "--key"],
  "mcp": ["--url", "--key"],
  "stage-in": ["!--workdir", "--termination-log"],
  "stage-out": ["!--workdir", "--termination-log"],
};

function paths(cmd: Command, prefix: string[] = []): string[][] {
  return cmd.commands.flatMap((c) => [[...prefix, c.name()], ...paths(c, [...prefix, c.name()])]);
}

t.test("the table covers every command of the CLI", async (t) => {
  const real = paths(createProgram({ io: { out: () => undefined, err: () => undefined }, env: {}, code: 0 })).map((p) => p.join(" "));
  t.same(real.sort(), Object.keys(COMMANDS).sort());
});

t.test("operon --help, -h, help and no arguments print the root help, exit 0", async (t) => {
  const root = await cli(["--help"]);
  t.equal(root.code, 0);
  t.equal(root.stderr, "");
  t.match(root.stdout, /^Usage: operon <command> \[options\]$/m);
  for (const name of Object.keys(COMMANDS).filter((c) => !c.includes(" "))) {
    t.match(root.stdout, new RegExp(`^ {2}${name}\\b.* {2}\\S`, "m"), `lists ${name} with a description`);
  }
  t.match(root.stdout, /^ {2}-V, --version +print the version$/m);
  t.match(root.stdout, /^ {2}-h, --help +show this help$/m);
  t.match(root.stdout, /Exit codes: 0 success/);
  for (const args of [["-h"], ["help"], []]) {
    const r = await cli(args);
    t.equal(r.code, 0, `operon ${args.join(" ")}`);
    t.equal(r.stdout, root.stdout, `operon ${args.join(" ")}: the same help`);
  }
});

for (const [path, options] of Object.entries(COMMANDS)) {
  t.test(`operon ${path} --help lists its options, exit 0`, async (t) => {
    const words = path.split(" ");
    const r = await cli([...words, "--help"]);
    t.equal(r.code, 0);
    t.equal(r.stderr, "", "nothing on stderr");
    const usage = /^Usage: (.*)$/m.exec(r.stdout)?.[1] ?? "";
    t.match(usage, new RegExp(`^operon ${path} `), "the usage line names the command");
    t.match(r.stdout, /^ {2}-h, --help +show this help$/m);
    for (const o of options) {
      const flag = o.replace(/^!/, "");
      const line = r.stdout.split("\n").find((l) => new RegExp(`^ {2}${flag}\\b`).test(l));
      t.ok(line, `${flag} is listed`);
      t.match(line ?? "", new RegExp(`^ {2}${flag}\\b\\S* *(<[^>]+> +)?\\S`), `${flag} has a description`);
      if (o.startsWith("!")) {
        t.match(line, /\(required\)$/, `${flag} is marked required`);
        t.match(usage, new RegExp(` ${flag} <`), `${flag} is in the usage line`);
      } else {
        t.notMatch(line, /\(required\)/, `${flag} is not marked required`);
      }
    }
    const listed = r.stdout.split("\n").filter((l) => /^ {2}--[a-z]/.test(l)).map((l) => l.trim().split(/[ ,]/)[0]);
    t.same(listed, options.map((o) => o.replace(/^!/, "")), "exactly these options");
    const sub = await cli(words.length === 1 ? ["help", ...words] : [...words.slice(0, -1), "help", ...words.slice(-1)]);
    t.equal(sub.code, 0);
    t.equal(sub.stdout, r.stdout, "the help command prints the same");
    t.equal((await cli([...words, "-h"])).stdout, r.stdout, "-h too");
  });
}

t.test("leaf commands carry an example", async (t) => {
  const leaves = ["workspaces create", "keys create", "keys revoke", "validate", "run", "ask", "stage-in", "stage-out", "serve",
    "runs ls", "runs show", "runs logs", "runs cancel", "runs save-spec", "pipelines ls", "pipelines show", "pipelines validate",
    "tools ls", "tools run", "files ls", "files upload", "files download", "files rm", "viewer", "render"];
  for (const path of leaves) {
    const r = await cli([...path.split(" "), "--help"]);
    t.match(r.stdout, new RegExp(`^Examples?\\b[^\\n]*:\\n {2}.*operon ${path}\\b`, "m"), path);
  }
});

t.test("--version and -V print package.json's version", async (t) => {
  for (const flag of ["--version", "-V"]) {
    const r = await cli([flag]);
    t.equal(r.code, 0);
    t.equal(r.stdout, pkg.version);
    t.equal(r.stderr, "");
  }
});

const usageErrors: Array<[string, string[], string]> = [
  ["unknown command", ["frobnicate"], 'operon: unknown command "frobnicate" (see operon --help)'],
  ["unknown command, with a suggestion", ["kyes"], 'operon: unknown command "kyes" (did you mean keys?) (see operon --help)'],
  ["unknown subcommand", ["keys", "frob"], 'operon keys: unknown command "frob" (see operon keys --help)'],
  ["help for an unknown command", ["help", "frobnicate"], 'operon: unknown command "frobnicate" (see operon --help)'],
  ["missing subcommand", ["workspaces"], "operon workspaces: missing command: one of create, list (see operon workspaces --help)"],
  ["unknown root option", ["--bogus"], 'operon: unknown option "--bogus" (see operon --help)'],
  ["unknown option", ["validate", "x.json", "--bogus"], 'operon validate: unknown option "--bogus" (see operon validate --help)'],
  ["unknown option, with a suggestion", ["files", "ls", "--jsno"], 'operon files ls: unknown option "--jsno" (did you mean --json?) (see operon files ls --help)'],
  ["unknown option of the default subcommand (tools alone is tools ls)", ["tools", "--jsno"], 'operon tools ls: unknown option "--jsno" (did you mean --json?) (see operon tools ls --help)'],
  ["unknown option of a subcommand", ["keys", "list", "--org", "acme", "--all"], 'operon keys list: unknown option "--all" (see operon keys list --help)'],
  ["missing required option", ["keys", "create", "--org", "acme"], "operon keys create: --scopes is required (see operon keys create --help)"],
  ["missing required options", ["workspaces", "create"], "operon workspaces create: --org is required (see operon workspaces create --help)"],
  ["missing required option of run", ["run", "bwa-align"], "operon run: --workspace is required (see operon run --help)"],
  ["missing required option of stage-out", ["stage-out", "--termination-log", join(tmpdir(), "operon-no-such-dir", "log")], "operon stage-out: --workdir is required (see operon stage-out --help)"],
  ["option without its value", ["keys", "list", "--org"], "operon keys list: --org needs a value (see operon keys list --help)"],
  ["missing argument", ["keys", "revoke"], "operon keys revoke: missing argument ID (see operon keys revoke --help)"],
  ["extra argument", ["validate", "a.json", "b.json"], 'operon validate: unexpected argument "b.json" (see operon validate --help)'],
  ["argument where none is taken", ["tools", "ls", "all"], 'operon tools ls: unexpected argument "all" (see operon tools ls --help)'],
  ["missing second argument", ["runs", "logs", "run-x"], "operon runs logs: missing argument STEP (see operon runs logs --help)"],
  ["a value not among the choices", ["runs", "ls", "--status", "done"], 'operon runs ls: --status "done": Allowed choices are queued, running, completed, failed, cancelled. (see operon runs ls --help)'],
  ["missing required option of save-spec", ["runs", "save-spec", "run-x"], "operon runs save-spec: --name is required (see operon runs save-spec --help)"],
  ["neither FILE nor --spec-file", ["pipelines", "validate", "--url", "http://127.0.0.1:1", "--key", "k"], "operon pipelines validate: give exactly one of FILE or --spec-file (see operon pipelines validate --help)"],
  ["a --param without =", ["tools", "run", "samtools", "--param", "noequals", "--url", "http://127.0.0.1:1", "--key", "k"], 'operon tools run: --param "noequals": expected NAME=VALUE (see operon tools run --help)'],
  ["a bad --expires-in", ["viewer", "x.vcf", "--expires-in", "0"], 'operon viewer: --expires-in "0": expected an integer from 1 to 86400 (see operon viewer --help)'],
  ["a bad --url", ["files", "ls", "--url", "not a url", "--key", "k"], 'operon files ls: --url: "not a url" is not a URL (see operon files ls --help)'],
  ["no API key", ["files", "ls", "--url", "http://127.0.0.1:1"], "operon files ls: no API key: pass --key, set OPERON_API_KEY, or keep one in /nonexistent/bootstrap-key (see operon files ls --help)"],
  ["bad value", ["run", "bwa-align", "--workspace", "ws", "--poll-ms", "5"], 'operon run: --poll-ms "5": expected an integer from 10 to 60000 (see operon run --help)'],
  ["bad value found by the action", ["run", "bwa-align", "--workspace", "ws", "--input", "noequals", "--key", "k", "--url", "http://127.0.0.1:1"], 'operon run: --input "noequals": expected NAME=VALUE (see operon run --help)'],
];

for (const [what, args, line] of usageErrors) {
  t.test(`usage error, exit 2: ${what}`, async (t) => {
    const r = await cli(args);
    t.equal(r.code, 2);
    t.same(r.errLines, [line], "one line naming the problem, with the hint");
    t.equal(r.stdout, "", "nothing on stdout");
  });
}

t.test("the real process: help on stdout, usage errors on stderr as one line, exit codes", async (t) => {
  const exec = (args: string[]) => spawnSync(process.execPath, ["--import", "tsx", "cli/main.ts", ...args], { encoding: "utf8" });
  const help = exec(["keys", "create", "--help"]);
  t.equal(help.status, 0);
  t.match(help.stdout, /^ {2}--scopes <list> +comma-separated scopes: query,tools,conversations,files \(required\)$/m);
  t.equal(help.stderr, "");
  const version = exec(["--version"]);
  t.equal(version.status, 0);
  t.equal(version.stdout, `${pkg.version}\n`);
  for (const args of [["frobnicate"], ["keys", "create", "--org", "acme"], ["validate", "--nope"]]) {
    const r = exec(args);
    t.equal(r.status, 2, args.join(" "));
    t.equal(r.stdout, "");
    t.match(r.stderr, /^operon[^\n]+ \(see operon [a-z -]*--help\)\n$/, "exactly one line with the hint");
  }
});

t.test("--version from a build laid out as dist/cli/main.js reads the package.json two levels up", async (t) => {
  const root = mkdtempSync(join(tmpdir(), "operon-dist-"));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const tsc = spawnSync(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "tsconfig.build.json", "--outDir", join(root, "dist")], { encoding: "utf8" });
  t.equal(tsc.status, 0, tsc.stdout + tsc.stderr);
  symlinkSync(join(process.cwd(), "node_modules"), join(root, "node_modules"));
  // A version of its own, so the answer can only come from this file.
  writeFileSync(join(root, "package.json"), JSON.stringify({ ...JSON.parse(readFileSync("package.json", "utf8")), version: "9.8.7-dist" }));
  const r = spawnSync(process.execPath, [join(root, "dist/cli/main.js"), "--version"], { encoding: "utf8", cwd: tmpdir() });
  t.equal(r.status, 0, r.stderr);
  t.equal(r.stdout, "9.8.7-dist\n");
  const bad = spawnSync(process.execPath, [join(root, "dist/cli/main.js"), "keys", "create", "--org", "acme"], { encoding: "utf8", cwd: tmpdir() });
  t.equal(bad.status, 2);
  t.equal(bad.stderr, "operon keys create: --scopes is required (see operon keys create --help)\n");
});
