/**
 * Administration commands that act on the configured store directly (same environment as
 * the server; docs/security.md, "API keys"): `operon workspaces create|list`, `operon keys create|list|revoke`.
 */
import { Command } from "commander";
import { parseConfig } from "../core/config.js";
import { SCOPES, type Scope } from "../services/store.js";
import { commaList, parseCli, type CliIO, type Ctx } from "./program.js";

const STORE_NOTE = "\nActs on the configured store directly: run it with the server's environment (OPERON_DATA_DIR, OPERON_STORAGE, …).";

async function runtime(env: NodeJS.ProcessEnv) {
  const c = parseConfig(env);
  if (!c.ok) throw new Error(c.message);
  const { createRuntime } = await import("../wiring/runtime.js"); // the store adapters load only when a command needs them
  return createRuntime(c.config);
}

/** `operon workspaces`: its definition; actions leave their exit code in `ctx.code`. */
export function workspacesCli(ctx: Ctx): Command {
  const { io, env } = ctx;
  const workspaces = new Command("workspaces").summary("Create and list an organization's workspaces")
    .description(`Create and list an organization's workspaces.${STORE_NOTE}`);
  workspaces.command("create").description("Create a workspace")
    .requiredOption("--org <org>", "the organization")
    .requiredOption("--id <id>", "the workspace id: 1-63 letters, digits, _ or -")
    .option("--name <name>", "a display name (default: the id)")
    .option("--json", "print the workspace as JSON")
    .addHelpText("after", "\nExit codes: 0 created, 2 usage error, bad configuration or refused (e.g. it exists).\n\nExample:\n  operon workspaces create --org acme --id rnaseq --name \"RNA-seq\"")
    .action(async (opts: { org: string; id: string; name?: string; json?: boolean }) => {
      const ws = await (await runtime(env)).service.createWorkspace(opts.org, opts.id, opts.name);
      io.out(opts.json ? JSON.stringify(ws) : `created workspace ${ws.organization}/${ws.id}`);
      ctx.code = 0;
    });
  workspaces.command("list").description("List an organization's workspaces (id, name)")
    .requiredOption("--org <org>", "the organization")
    .option("--json", "print them as JSON")
    .addHelpText("after", "\nExample:\n  operon workspaces list --org acme --json")
    .action(async (opts: { org: string; json?: boolean }) => {
      const list = await (await runtime(env)).service.listWorkspaces(opts.org);
      io.out(opts.json ? JSON.stringify(list) : list.map((w) => `${w.id}\t${w.name}`).join("\n"));
      ctx.code = 0;
    });
  return workspaces;
}

/** `operon keys`: its definition; actions leave their exit code in `ctx.code`. */
export function keysCli(ctx: Ctx): Command {
  const { io, env } = ctx;
  const keys = new Command("keys").summary("Create, list and revoke API keys")
    .description(`Create, list and revoke API keys.${STORE_NOTE}`);
  keys.command("create").description("Create an API key; the key is printed once")
    .requiredOption("--org <org>", "the organization the key belongs to")
    .requiredOption("--scopes <list>", `comma-separated scopes: ${SCOPES.join(",")}`)
    .option("--workspaces <list>", "comma-separated workspaces the key may use (default: all)")
    .option("--name <name>", "a name to recognise the key by")
    .option("--json", "print {id, key} as JSON")
    .addHelpText("after", "\nExit codes: 0 created, 2 usage error, bad configuration, unknown scope or workspace.\n\nExample:\n  operon keys create --org acme --scopes files,tools --workspaces rnaseq --name ci --json")
    .action(async (opts: { org: string; scopes: string; workspaces?: string; name?: string; json?: boolean }) => {
      const scopes = commaList(opts.scopes) as Scope[];
      const workspaces = opts.workspaces ? commaList(opts.workspaces) : null;
      const rt = await runtime(env);
      const { record, key } = await rt.service.createKey({ organization: opts.org, scopes, workspaces, ...(opts.name ? { name: opts.name } : {}) });
      io.out(opts.json ? JSON.stringify({ id: record.id, key }) : `created key ${record.id} (shown once, store it now):\n${key}`);
      ctx.code = 0;
    });
  keys.command("list").description("List an organization's keys (id, scopes, workspaces, state, name; never the key)")
    .requiredOption("--org <org>", "the organization")
    .option("--json", "print them as JSON")
    .addHelpText("after", "\nExample:\n  operon keys list --org acme")
    .action(async (opts: { org: string; json?: boolean }) => {
      const list = (await (await runtime(env)).service.listKeys(opts.org)).map(({ hash: _hash, ...r }) => r);
      io.out(opts.json ? JSON.stringify(list) : list.map((k) => `${k.id}\t${k.scopes.join(",")}\t${k.workspaces?.join(",") ?? "*"}\t${k.revoked_at ? "revoked" : "active"}\t${k.name}`).join("\n"));
      ctx.code = 0;
    });
  keys.command("revoke").description("Revoke a key (effective within the key cache TTL, at most 30 s)")
    .argument("<ID>", "the key id (key_…, as keys list shows it)")
    .option("--json", "print {id, revoked_at} as JSON")
    .addHelpText("after", "\nExit codes: 0 revoked, 1 no such key, 2 usage error or bad configuration.\n\nExample:\n  operon keys revoke key_0123456789abcdef")
    .action(async (id: string, opts: { json?: boolean }) => {
      const rec = await (await runtime(env)).service.revokeKey(id);
      if (!rec) { io.err(`operon keys revoke: no key ${id}`); ctx.code = 1; return; }
      io.out(opts.json ? JSON.stringify({ id: rec.id, revoked_at: rec.revoked_at }) : `revoked ${rec.id} (takes effect within the key cache TTL, at most 30 s)`);
      ctx.code = 0;
    });
  return keys;
}

/** `operon workspaces …` with the words after `workspaces`. */
export async function workspacesCommand(args: string[], io: CliIO, env: NodeJS.ProcessEnv): Promise<number> {
  const ctx: Ctx = { io, env, code: 0 };
  return parseCli(workspacesCli(ctx), args, ctx);
}

/** `operon keys …` with the words after `keys`. */
export async function keysCommand(args: string[], io: CliIO, env: NodeJS.ProcessEnv): Promise<number> {
  const ctx: Ctx = { io, env, code: 0 };
  return parseCli(keysCli(ctx), args, ctx);
}
