/**
 * Who is asking and what they may touch, below the HTTP layer: the authenticated key's
 * context, the workspace check every file, pipeline and visualization call makes (a
 * restricted key naming another workspace → workspace_access_denied; another organization's
 * workspace → not_found, never revealed), scope checks, and workspace file keys. The
 * api-server's Authenticator and the assistant tools both call these, so a tool is
 * authorised exactly as the route it mirrors.
 */
import type { Clock } from "../core/ports.js";
import { workspaceRoot } from "../core/layout.js";
import { normalizeWorkspacePath } from "../core/paths.js";
import { OperonError, badRequest } from "../core/errors.js";
import type { Scope, ServiceStore, WorkspaceRecord } from "./store.js";

export interface AuthContext {
  keyId: string;
  organization: string;
  scopes: ReadonlySet<Scope>;
  /** null: all workspaces of the organization. */
  workspaces: ReadonlySet<string> | null;
}

/** The workspace check, with workspace records cached for the key cache's TTL. */
export class WorkspaceAccess {
  private readonly cache = new Map<string, { record: WorkspaceRecord; at: number }>();

  constructor(private readonly service: ServiceStore, private readonly ttlSeconds: number, private readonly clock: Clock) {}

  async workspace(ctx: AuthContext, workspaceId: string): Promise<WorkspaceRecord> {
    if (ctx.workspaces && !ctx.workspaces.has(workspaceId)) {
      throw new OperonError("workspace_access_denied", `this key may not use workspace ${JSON.stringify(workspaceId)}`);
    }
    const k = `${ctx.organization}/${workspaceId}`;
    const now = this.clock.now();
    const hit = this.cache.get(k);
    let record = hit && now - hit.at < this.ttlSeconds * 1000 ? hit.record : undefined;
    if (!record) {
      record = await this.service.getWorkspace(ctx.organization, workspaceId);
      if (record) this.cache.set(k, { record, at: now });
    }
    if (!record) throw new OperonError("not_found", `workspace ${JSON.stringify(workspaceId)} not found`);
    return record;
  }

  /** The organization's workspaces this key may use (all of them for an unrestricted key). */
  async visibleWorkspaces(ctx: AuthContext): Promise<WorkspaceRecord[]> {
    const all = await this.service.listWorkspaces(ctx.organization);
    return all.filter((w) => ctx.workspaces === null || ctx.workspaces.has(w.id));
  }
}

export function requireScope(ctx: AuthContext, scope: Scope | "any"): void {
  if (scope !== "any" && !ctx.scopes.has(scope)) {
    throw new OperonError("insufficient_scope", `this key lacks the "${scope}" scope`, { required_scope: scope });
  }
}

/**
 * A user-given file key (workspace-relative, or the full storage key of the same workspace)
 * as `{key, storageKey}`; anything that could leave the workspace is a 400 naming the field.
 */
export function fileKey(ws: WorkspaceRecord, field: string, input: string): { key: string; storageKey: string } {
  const root = workspaceRoot(ws.organization, ws.id);
  let rel = input;
  if (rel.startsWith(root)) rel = rel.slice(root.length);
  else if (rel.startsWith("orgs/")) throw badRequest(field, "a full storage key must be of this workspace");
  const n = normalizeWorkspacePath(rel);
  if (!n.ok) throw badRequest(field, n.reason);
  return { key: n.path, storageKey: root + n.path };
}
