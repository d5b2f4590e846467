#!/usr/bin/env node
/**
 * The `operon` command. Subcommands grow with the service (serve, api-server, operator,
 * keys, workspaces, run); each lives in its own module and returns an exit code. Errors are
 * one clear line on stderr, never a stack trace.
 */
import { realpathSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { validateCommand, type CliIO } from "./validate.js";

const HELP = `operon — bioinformatics pipelines as an HTTP API

Usage:
  operon serve                     Start Operon (embedded mode by default; see README "Configuration")
  operon api-server                Start only the HTTP API (cluster mode)
  operon operator                  Start the operator: reconcile PipelineRuns into Jobs (cluster mode; KUBECONFIG or in-cluster)
  operon workspaces create --org ORG --id ID [--name NAME] [--json]
  operon workspaces list --org ORG [--json]
  operon keys create --org ORG --scopes query,tools,conversations,files [--workspaces a,b] [--name N] [--json]
  operon keys list --org ORG [--json]
  operon keys revoke ID
  operon validate FILE [--json]    Check a pipeline spec file (exit 0 valid, 1 invalid, 2 unreadable)
  operon run SPEC_OR_PIPELINE_ID --workspace W [--input k=v …] [--follow] [--json] [--url URL] [--key KEY]   Start a run via the HTTP API
  operon tools [--json]            List the compute tools and their commands
  operon stage-in --workdir DIR [--termination-log PATH]    Step pod: stage the inputs of env OPERON_STEP_PLAN in (cluster mode)
  operon stage-out --workdir DIR [--termination-log PATH]   Step pod: upload the declared outputs with their sha256 (cluster mode)
  operon --help                    Show this help

Administration commands act on the configured store directly (same environment as the server).
`;

export async function main(argv: string[], io: CliIO): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === undefined || cmd === "--help" || cmd === "-h" || cmd === "help") { io.out(HELP.trimEnd()); return 0; }
  try {
    switch (cmd) {
      case "validate": {
        const { values, positionals } = parseArgs({ args: rest, options: { json: { type: "boolean", default: false } }, allowPositionals: true });
        if (positionals.length > 1) { io.err("operon validate: give exactly one FILE"); return 2; }
        return await validateCommand(positionals[0], values.json ?? false, io);
      }
      case "tools": {
        const { values } = parseArgs({ args: rest, options: { json: { type: "boolean", default: false } } });
        const { defaultCatalogue } = await import("../core/tools/index.js");
        const list = defaultCatalogue.ids.map((id) => defaultCatalogue.get(id)).filter((t) => t !== undefined);
        if (values.json) io.out(JSON.stringify(list.map((t) => ({ id: t.id, description: t.description, version: t.version, image: t.image, commands: Object.keys(t.commands) })), null, 2));
        else for (const t of list) io.out(`${t.id.padEnd(12)} ${t.version.padEnd(10)} ${Object.keys(t.commands).join(", ")}`);
        return 0;
      }
      case "serve":
      case "api-server": {
        const { parseConfig } = await import("../core/config.js");
        const c = parseConfig(process.env);
        if (!c.ok) { io.err(`operon ${cmd}: ${c.message}`); return 2; }
        const { startServer } = await import("../api-server/server.js");
        await startServer(c.config, io.out);
        return await new Promise<number>(() => undefined); // runs until a signal stops it
      }
      case "operator": {
        const { parseConfig } = await import("../core/config.js");
        const c = parseConfig({ ...process.env, OPERON_MODE: process.env.OPERON_MODE ?? "cluster" });
        if (!c.ok) { io.err(`operon operator: ${c.message}`); return 2; }
        const { createStore } = await import("../engine/runtime.js");
        const { startOperator } = await import("../operator/cluster.js");
        // OPERON_POD_NAME (the downward API in the chart) names this replica in the Lease and on its Jobs.
        const op = await startOperator(c.config, await createStore(c.config, ""), { log: io.out, ...(process.env.OPERON_POD_NAME ? { identity: process.env.OPERON_POD_NAME } : {}) });
        io.out(`operon operator ${op.identity}: health on ${c.config.host}:${c.config.PORT} (/healthz, /readyz, /metrics)`);
        const stop = (signal: string) => { io.out(`${signal}: stopping the operator`); void op.stop().then(() => process.exit(0), () => process.exit(1)); };
        process.once("SIGTERM", () => stop("SIGTERM"));
        process.once("SIGINT", () => stop("SIGINT"));
        return await new Promise<number>(() => undefined);
      }
      case "workspaces": return await (await import("./admin.js")).workspacesCommand(rest, io, process.env);
      case "keys": return await (await import("./admin.js")).keysCommand(rest, io, process.env);
      case "run": return await (await import("./run.js")).runCommand(rest, io, process.env);
      case "stage-in": return await (await import("./stage.js")).stageInCommand(rest, io, process.env);
      case "stage-out": return await (await import("./stage.js")).stageOutCommand(rest, io, process.env);
      default:
        io.err(`operon: unknown command "${cmd}" (see operon --help)`);
        return 2;
    }
  } catch (e) {
    io.err(`operon ${cmd}: ${e instanceof Error ? e.message : String(e)}`);
    return 2;
  }
}

const io: CliIO = { out: (s) => process.stdout.write(s + "\n"), err: (s) => process.stderr.write(s + "\n") };
// Run when executed directly (also through the npm bin symlink), not when imported by tests.
const isEntry = process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href;
if (isEntry) {
  main(process.argv.slice(2), io).then((code) => { process.exitCode = code; }, (e: unknown) => {
    process.stderr.write(`operon: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 2;
  });
}
