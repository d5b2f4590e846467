#!/usr/bin/env node
/**
 * The `operon` command, parsed with commander (cli/program.ts holds the conventions every
 * command shares). Each subcommand lives in its own module and leaves an exit code; usage
 * errors are one line on stderr with a `see operon <command> --help` hint and exit 2, never
 * a stack trace. `operon --help` and `operon <command> --help` list every option.
 */
import { readFileSync, realpathSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Command } from "commander";
import { keysCli, workspacesCli } from "./admin.js";
import { parseCli, type CliIO, type Ctx } from "./program.js";
import { runCli } from "./run.js";
import { stageInCli, stageOutCli } from "./stage.js";
import { validateCli } from "./validate.js";
import { mcpCli } from "./mcp.js";
import { askCli } from "./ask.js";
import { filesCli } from "./files.js";
import { pipelinesCli } from "./pipelines.js";
import { runsCli } from "./runs.js";
import { toolsCli } from "./tools.js";
import { renderCli, viewerCli } from "./visualize.js";
import { messageOf } from "../core/errors.js";

/**
 * The version in package.json, read next to the module: ../package.json from the source
 * (cli/main.ts), ../../package.json from the build (dist/cli/main.js).
 */
export function packageVersion(): string {
  for (const rel of ["../package.json", "../../package.json"]) {
    try {
      const pkg = JSON.parse(readFileSync(fileURLToPath(new URL(rel, import.meta.url)), "utf8")) as { name?: unknown; version?: unknown };
      if (pkg.name === "operon" && typeof pkg.version === "string") return pkg.version;
    } catch { /* not there: try the next */ }
  }
  return "unknown";
}

/** Never resolves: the process runs until a signal stops it. */
const forever = () => new Promise<number>(() => undefined);

function serverCli(name: "serve" | "api-server", ctx: Ctx): Command {
  const embedded = name === "serve";
  return new Command(name)
    .summary(embedded ? "Start Operon (embedded mode by default; see README \"Configuration\")" : "Start only the HTTP API (cluster mode)")
    .description(embedded
      ? "Start Operon: the HTTP API and the engine in one process (embedded mode, OPERON_MODE=embedded, the default), or the API of cluster mode. Configured by environment variables (README \"Configuration\"); runs until stopped."
      : "Start the HTTP API alone, as the api-server Deployment of cluster mode does. Configured by environment variables (README \"Configuration\"); runs until stopped.")
    .addHelpText("after", `\nExit codes: 0 stopped by SIGTERM or SIGINT (in-flight requests finish first), 1 stopping failed,\n2 invalid configuration (the variable is named) or the server could not start.\n\nExample:\n  OPERON_DATA_DIR=./.operon PORT=8080 operon ${name}`)
    .action(async () => {
      const { parseConfig } = await import("../core/config.js");
      const c = parseConfig(ctx.env);
      if (!c.ok) { ctx.io.err(`operon ${name}: ${c.message}`); ctx.code = 2; return; }
      const { startServer } = await import("../api-server/server.js");
      await startServer(c.config, ctx.io.out, packageVersion());
      ctx.code = await forever();
    });
}

function operatorCli(ctx: Ctx): Command {
  return new Command("operator")
    .summary("Start the operator: reconcile PipelineRuns into Jobs (cluster mode; KUBECONFIG or in-cluster)")
    .description("Start the operator of cluster mode: reconcile PipelineRuns into step Jobs, with leader election (a Lease). "
      + "Talks to Kubernetes through KUBECONFIG or the in-cluster service account; OPERON_POD_NAME names this replica. "
      + "Serves /healthz, /readyz and /metrics; stops cleanly on SIGTERM or SIGINT.")
    .addHelpText("after", "\nExit codes: 0 stopped by SIGTERM or SIGINT, 1 stopping failed, 2 invalid configuration (the\nvariable is named) or the operator could not start.\n\nExample:\n  KUBECONFIG=~/.kube/config OPERON_STORAGE=s3 S3_BUCKET=operon operon operator")
    .action(async () => {
      const { io, env } = ctx;
      const { parseConfig } = await import("../core/config.js");
      const c = parseConfig({ ...env, OPERON_MODE: env.OPERON_MODE ?? "cluster" });
      if (!c.ok) { io.err(`operon operator: ${c.message}`); ctx.code = 2; return; }
      const { createStore } = await import("../wiring/runtime.js");
      const { startOperator } = await import("../operator/cluster.js");
      // OPERON_POD_NAME (the downward API in the chart) names this replica in the Lease and on its Jobs.
      const op = await startOperator(c.config, await createStore(c.config, ""), { log: io.out, ...(env.OPERON_POD_NAME ? { identity: env.OPERON_POD_NAME } : {}) });
      io.out(`operon operator ${op.identity}: health on ${c.config.host}:${c.config.PORT} (/healthz, /readyz, /metrics)`);
      const stop = (signal: string) => { io.out(`${signal}: stopping the operator`); void op.stop().then(() => process.exit(0), () => process.exit(1)); };
      process.once("SIGTERM", () => stop("SIGTERM"));
      process.once("SIGINT", () => stop("SIGINT"));
      ctx.code = await forever();
    });
}

/** The whole command tree; actions leave their exit code in `ctx.code`. */
export function createProgram(ctx: Ctx): Command {
  const program = new Command("operon")
    .description("operon — bioinformatics pipelines as an HTTP API")
    .version(packageVersion(), "-V, --version", "print the version")
    .addHelpText("after", `
Run operon <command> --help for a command's options; operon help <command> does the same.
Configuration is by environment variables (README "Configuration"). Administration commands
(workspaces, keys) act on the configured store directly: run them with the server's environment.
The other commands that name a server (run, runs, pipelines, files, tools, viewer, render, ask, mcp)
call its HTTP API: --url, else $OPERON_URL, else http://127.0.0.1:$PORT; --key, else
$OPERON_API_KEY, else $OPERON_DATA_DIR/bootstrap-key; --workspace, else default. --json prints
machine-readable output.
Embedded mode is one process, operon serve. Cluster mode runs operon api-server and operon operator
from one image, whose step pods run operon stage-in and operon stage-out around the tool.

Exit codes: 0 success, 1 the command's own failure (validate: spec invalid; run: refused, failed or
cancelled; an API command: refused by the API; ask: refused or the turn failed; keys revoke: no
such key; stage-in/out: staging failed), 2 usage error (unknown command, unknown or missing option,
bad value), unreadable input, invalid configuration or server unreachable. tools run exits with the
tool's own code.`);
  const group = (heading: string, ...cmds: Command[]) => { for (const c of cmds) program.addCommand(c.helpGroup(heading)); };
  group("Servers:", serverCli("serve", ctx), serverCli("api-server", ctx), operatorCli(ctx));
  group("Administration:", workspacesCli(ctx), keysCli(ctx));
  group("Pipelines:", validateCli(ctx), runCli(ctx), runsCli(ctx), pipelinesCli(ctx), toolsCli(ctx));
  group("Files and charts:", filesCli(ctx), viewerCli(ctx), renderCli(ctx));
  group("Assistants:", askCli(ctx), mcpCli(ctx));
  group("Step pods (cluster mode):", stageInCli(ctx), stageOutCli(ctx));
  return program;
}

/** `operon …` with the words after `operon`; `opts` replaces the environment and fetch (tests). */
export async function main(argv: string[], io: CliIO, opts: { env?: NodeJS.ProcessEnv; fetch?: typeof fetch } = {}): Promise<number> {
  const ctx: Ctx = { io, env: opts.env ?? process.env, code: 0, ...(opts.fetch ? { fetch: opts.fetch } : {}) };
  return parseCli(createProgram(ctx), argv.length === 0 ? ["--help"] : argv, ctx);
}

const io: CliIO = { out: (s) => process.stdout.write(s + "\n"), err: (s) => process.stderr.write(s + "\n") };
// Run when executed directly (also through the npm bin symlink), not when imported by tests.
const isEntry = process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href;
if (isEntry) {
  main(process.argv.slice(2), io).then((code) => { process.exitCode = code; }, (e: unknown) => {
    process.stderr.write(`operon: ${messageOf(e)}\n`);
    process.exitCode = 2;
  });
}
