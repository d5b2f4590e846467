/**
 * `operon tools ls|run`: the server's tool catalogue (GET /v1/tools) and synchronous tool
 * runs (POST /v1/tools/{toolId}/run with `{input: {command, …parameters}, workspace_id}`;
 * docs/api.md). `operon tools` alone is `operon tools ls`. A tool run prints the tool's
 * standard output on stdout and exits with the tool's own exit code.
 */
import { Command } from "commander";
import type { Ctx } from "./program.js";
import { apiAction, apiPath, clientOf, type Page } from "./client.js";
import { firstLine, humanSize, json, parseValues, repeatable, withCommon, table, type CommonOptions } from "./output.js";

interface ToolView { id: string; description: string; version: string; image: string; commands: Array<{ name: string; description: string; required: string[] }>; available: boolean }
interface ToolRun { exit_code: number | null; status: string; stdout: string; stderr: string; error: string | null; output_files: Array<{ key: string; size: number; sha256: string }>; run_id?: string }

export function toolsCli(ctx: Ctx): Command {
  const tools = new Command("tools").summary("List the server's tools; run one")
    .description("The server's compute tools through the HTTP API: list them with their commands, or run one synchronously. operon tools alone is operon tools ls.");

  const ls = withCommon(new Command("ls").description("List the server's tools: id, version, whether they can run there, commands")
    .addHelpText("after", "\nExample:\n  operon tools ls --json"), { workspace: false, json: "print the API's answer as JSON: {data: [tool], has_more, next_cursor}" });
  ls.action(apiAction(ls, ctx, async (opts: CommonOptions) => {
    const page = await clientOf(ctx, opts).json<Page<ToolView>>("GET", "/v1/tools");
    if (opts.json) { ctx.io.out(json(page)); return 0; }
    for (const l of table(["ID", "VERSION", "AVAILABLE", "COMMANDS"], page.data.map((t) => [t.id, t.version, t.available ? "yes" : "no", t.commands.map((c) => c.name).join(", ")]))) ctx.io.out(l);
    return 0;
  }));

  const run = withCommon(new Command("run").description("Run a tool once and wait for it: its output on stdout, its exit code as this command's")
    .argument("<TOOL>", "the tool id, as tools ls lists it (e.g. samtools)")
    .option("--command <name>", "the tool's command (e.g. flagstat), as tools ls lists them")
    .option("--param <name=value>", "a parameter; repeat for each. A JSON value (4, true, [\"-h\"], \"\\\"1\\\"\") is sent as that, anything else as a string", repeatable)
    .addHelpText("after", "\nFiles are workspace paths (--workspace). The tool's standard output goes to stdout; on failure\nthe end of its log goes to stderr; the files it wrote are listed on stderr.\nExit codes: the tool's own exit code when it ran (0 success), 1 it did not run to an exit code or\nthe API refused it (unknown tool, bad parameter, missing file), 2 usage error or server\nunreachable.\n\nExample:\n  operon tools run samtools --command flagstat --param inputFile=results/sample.sorted.bam"), { json: "print the API's result as JSON: {exit_code, status, stdout, stderr, error, output_files}" });
  run.action(apiAction(run, ctx, async (tool: string, opts: CommonOptions & { command?: string; param?: string[] }) => {
    const input = parseValues("--param", opts.param ?? []);
    if (opts.command !== undefined) input.command = opts.command;
    const r = await clientOf(ctx, opts).data<ToolRun>("POST", apiPath`/v1/tools/${tool}/run`, { body: { input, workspace_id: opts.workspace } });
    const code = r.exit_code === 0 && r.status === "completed" ? 0 : r.exit_code !== null && r.exit_code > 0 ? r.exit_code : 1;
    if (opts.json) { ctx.io.out(json(r)); return code; }
    if (r.stdout !== "") ctx.io.out(r.stdout.replace(/\n$/, ""));
    if (code !== 0) {
      if (r.stderr.trim()) ctx.io.err(r.stderr.replace(/\n$/, ""));
      ctx.io.err(`operon tools run: ${tool} ${r.status}${r.exit_code !== null ? ` (exit ${r.exit_code})` : ""}${r.error ? `: ${firstLine(r.error, 240)}` : ""}`);
    }
    for (const f of r.output_files) ctx.io.err(`wrote ${f.key} (${humanSize(f.size)})`);
    return code;
  }));

  tools.addCommand(ls, { isDefault: true });
  tools.addCommand(run);
  return tools;
}
