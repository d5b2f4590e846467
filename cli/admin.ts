/**
 * Administration commands that act on the configured store directly (same environment as
 * the server, DESIGN §7): `operon workspaces create`, `operon keys create|list|revoke`.
 */
import { parseArgs } from "node:util";
import { parseConfig } from "../core/config.js";
import { createRuntime } from "../engine/runtime.js";
import { SCOPES, type Scope } from "../engine/service-store.js";
import type { CliIO } from "./validate.js";

async function runtime(env: NodeJS.ProcessEnv) {
  const c = parseConfig(env);
  if (!c.ok) throw new Error(c.message);
  return createRuntime(c.config);
}

export async function workspacesCommand(args: string[], io: CliIO, env: NodeJS.ProcessEnv): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === "create") {
    const { values } = parseArgs({ args: rest, options: { org: { type: "string" }, id: { type: "string" }, name: { type: "string" }, json: { type: "boolean", default: false } } });
    if (!values.org || !values.id) { io.err("usage: operon workspaces create --org ORG --id ID [--name NAME] [--json]"); return 2; }
    const rt = await runtime(env);
    const ws = await rt.service.createWorkspace(values.org, values.id, values.name);
    io.out(values.json ? JSON.stringify(ws) : `created workspace ${ws.organization}/${ws.id}`);
    return 0;
  }
  if (sub === "list") {
    const { values } = parseArgs({ args: rest, options: { org: { type: "string" }, json: { type: "boolean", default: false } } });
    if (!values.org) { io.err("usage: operon workspaces list --org ORG [--json]"); return 2; }
    const list = await (await runtime(env)).service.listWorkspaces(values.org);
    io.out(values.json ? JSON.stringify(list) : list.map((w) => `${w.id}\t${w.name}`).join("\n"));
    return 0;
  }
  io.err("usage: operon workspaces create|list …");
  return 2;
}

export async function keysCommand(args: string[], io: CliIO, env: NodeJS.ProcessEnv): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === "create") {
    const { values } = parseArgs({ args: rest, options: { org: { type: "string" }, scopes: { type: "string" }, workspaces: { type: "string" }, name: { type: "string" }, json: { type: "boolean", default: false } } });
    if (!values.org || !values.scopes) { io.err(`usage: operon keys create --org ORG --scopes ${SCOPES.join(",")} [--workspaces a,b] [--name N] [--json]`); return 2; }
    const scopes = values.scopes.split(",").map((s) => s.trim()).filter(Boolean) as Scope[];
    const workspaces = values.workspaces ? values.workspaces.split(",").map((s) => s.trim()).filter(Boolean) : null;
    const rt = await runtime(env);
    const { record, key } = await rt.service.createKey({ organization: values.org, scopes, workspaces, ...(values.name ? { name: values.name } : {}) });
    io.out(values.json ? JSON.stringify({ id: record.id, key }) : `created key ${record.id} (shown once, store it now):\n${key}`);
    return 0;
  }
  if (sub === "list") {
    const { values } = parseArgs({ args: rest, options: { org: { type: "string" }, json: { type: "boolean", default: false } } });
    if (!values.org) { io.err("usage: operon keys list --org ORG [--json]"); return 2; }
    const list = (await (await runtime(env)).service.listKeys(values.org)).map(({ hash: _hash, ...r }) => r);
    io.out(values.json ? JSON.stringify(list) : list.map((k) => `${k.id}\t${k.scopes.join(",")}\t${k.workspaces?.join(",") ?? "*"}\t${k.revoked_at ? "revoked" : "active"}\t${k.name}`).join("\n"));
    return 0;
  }
  if (sub === "revoke") {
    const { values, positionals } = parseArgs({ args: rest, options: { json: { type: "boolean", default: false } }, allowPositionals: true });
    const id = positionals[0];
    if (!id) { io.err("usage: operon keys revoke ID"); return 2; }
    const rec = await (await runtime(env)).service.revokeKey(id);
    if (!rec) { io.err(`operon keys revoke: no key ${id}`); return 1; }
    io.out(values.json ? JSON.stringify({ id: rec.id, revoked_at: rec.revoked_at }) : `revoked ${rec.id} (takes effect within the key cache TTL, at most 30 s)`);
    return 0;
  }
  io.err("usage: operon keys create|list|revoke …");
  return 2;
}
