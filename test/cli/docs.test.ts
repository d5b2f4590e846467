/**
 * docs/cli.md holds, under a `### \`operon …\`` heading per command, the command's real
 * `--help` output in a ```text block. This test fails when a block differs from the CLI's
 * help or when a command has no section (or a section names no command). To refresh the
 * blocks after changing the CLI: `OPERON_UPDATE_CLI_DOC=1 npx tap test/cli/docs.test.ts`
 * (the prose around them is kept as written).
 */
import t from "tap";
import { readFileSync, writeFileSync } from "node:fs";
import type { Command } from "commander";
import { createProgram, main } from "../../cli/main.js";

const DOC = "docs/cli.md";
const SECTION = /^### `(operon(?: [a-z-]+)*)`\n\n```text\n([\s\S]*?)\n```$/gm;

function paths(cmd: Command, prefix: string[] = []): string[][] {
  return cmd.commands.flatMap((c) => [[...prefix, c.name()], ...paths(c, [...prefix, c.name()])]);
}

async function help(words: string[]): Promise<string> {
  const out: string[] = [];
  const code = await main([...words, "--help"], { out: (s) => out.push(s), err: (s) => { throw new Error(`stderr: ${s}`); } });
  if (code !== 0) throw new Error(`operon ${words.join(" ")} --help: exit ${code}`);
  return out.join("\n");
}

const commands = ["operon", ...paths(createProgram({ io: { out: () => undefined, err: () => undefined }, env: {}, code: 0 })).map((p) => `operon ${p.join(" ")}`)];
const current = readFileSync(DOC, "utf8");
const helps = new Map<string, string>();
for (const c of commands) helps.set(c, await help(c.split(" ").slice(1)));
const expected = current.replace(SECTION, (whole, name: string) => {
  const text = helps.get(name);
  return text === undefined ? whole : `### \`${name}\`\n\n\`\`\`text\n${text}\n\`\`\``;
});
if (process.env.OPERON_UPDATE_CLI_DOC === "1" && expected !== current) writeFileSync(DOC, expected);

t.test("docs/cli.md has one help section per command, in the CLI's order", async (t) => {
  t.same([...current.matchAll(SECTION)].map((m) => m[1]), commands);
});

t.test("each section's block is the command's real --help output", async (t) => {
  for (const m of current.matchAll(SECTION)) {
    const name = m[1] ?? "";
    t.equal(m[2], helps.get(name), `${name} (refresh with OPERON_UPDATE_CLI_DOC=1 npx tap ${"test/cli/docs.test.ts"})`);
  }
});

t.test("the exit code table has a row for every command", async (t) => {
  const start = current.indexOf("| Command |");
  t.ok(start > 0, "the table is there");
  const rows = current.slice(start, current.indexOf("\n\n", start)).split("\n").slice(2);
  const named = new Set(rows.flatMap((r) => [...(r.split("|")[1] ?? "").matchAll(/`(operon[a-z -]*)`/g)].map((m) => m[1])));
  const groups = commands.filter((c) => commands.some((d) => d.startsWith(`${c} `)));
  t.same([...named].sort(), commands.filter((c) => c !== "operon" && !groups.includes(c)).sort(), "every command that runs something, nothing else");
});
