/**
 * The assistant tool registry's contract: what one tool is (name, title, a description
 * written for a model, a zod input schema and its JSON Schema, an output shape, MCP
 * annotations, the scope it needs, a handler) and how a call is made — arguments checked
 * against the schema with every error naming its field, the handler run with the caller's
 * key, and any failure turned into a tool error instead of a crash. MCP (api-server/routes/
 * mcp.ts), and later the agent and the CLI, all go through `toolsFor` and `callTool`.
 */
import { z } from "zod";
import type { Clock, ObjectStore } from "../core/ports.js";
import type { AuthContext, WorkspaceAccess } from "../services/access.js";
import type { Engine } from "../engine/engine.js";
import type { PipelineService } from "../services/pipelines.js";
import type { RenderQueue } from "../services/renders.js";
import { knownError, type ErrorCode } from "../core/errors.js";
import type { Scope, ServiceStore } from "../services/store.js";

/** The service a tool acts on; the same objects the HTTP routes use. */
export interface AssistantDeps {
  store: ObjectStore;
  service: ServiceStore;
  clock: Clock;
  access: WorkspaceAccess;
  publicUrl: string;
  signingSecret: string;
  storage: "local" | "s3";
  engine?: Engine | undefined;
  pipelines?: PipelineService | undefined;
  renders?: RenderQueue | undefined;
}

/** One call's context: the caller's key and the service. `signal` ends a wait early (the client went away). */
export interface ToolContext {
  auth: AuthContext;
  deps: AssistantDeps;
  signal?: AbortSignal | undefined;
  /** Set when the agent calls the tool: its conversation and model (a run it starts records them). */
  agent?: { conversationId: string; model: string } | undefined;
}

/** MCP tool annotations: every tool sets all four. */
export interface ToolAnnotations { readOnlyHint: boolean; destructiveHint: boolean; idempotentHint: boolean; openWorldHint: boolean }

export interface AssistantTool<I extends z.ZodObject = z.ZodObject> {
  name: string;
  title: string;
  description: string;
  input: I;
  /** The result's shape (an object; unknown members allowed). */
  output: z.ZodObject;
  annotations: ToolAnnotations;
  /** The scope a key needs to see and call the tool ("any": every key). */
  scope: Scope | "any";
  /** Whether the tool can work with these deps (e.g. pipeline tools need the engine). */
  available?: (deps: AssistantDeps) => boolean;
  handler(args: z.output<I>, ctx: ToolContext): Promise<Record<string, unknown>>;
}

/** Keeps each tool's handler typed by its own input schema. */
export const defineTool = <I extends z.ZodObject>(t: AssistantTool<I>): AssistantTool => t as unknown as AssistantTool;

/** Annotation presets. */
export const READ_ONLY: ToolAnnotations = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };
export const CREATES: ToolAnnotations = { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false };

/** The tools a key may see and call: its scopes allow them and the service offers them. */
export function toolsFor(tools: readonly AssistantTool[], auth: Pick<AuthContext, "scopes">, deps: AssistantDeps): AssistantTool[] {
  return tools.filter((t) => (t.scope === "any" || auth.scopes.has(t.scope)) && (t.available?.(deps) ?? true));
}

const jsonSchemas = new WeakMap<z.ZodType, Record<string, unknown>>();
/** A schema as JSON Schema (zod 4's z.toJSONSchema), computed once per schema. */
export function jsonSchemaOf(schema: z.ZodType, io: "input" | "output" = "input"): Record<string, unknown> {
  let s = jsonSchemas.get(schema);
  if (!s) {
    s = z.toJSONSchema(schema, { io, unrepresentable: "any" }) as Record<string, unknown>;
    delete s.$schema;
    jsonSchemas.set(schema, s);
  }
  return s;
}

export type ToolOutcome = { ok: true; result: Record<string, unknown> } | { ok: false; code: ErrorCode; message: string; details?: Record<string, unknown> };

/** Arguments checked against a tool's schema: every problem, each naming its field. */
export function checkArguments(tool: AssistantTool, args: unknown): { ok: true; value: unknown } | { ok: false; message: string; fields: string[] } {
  const parsed = tool.input.safeParse(args ?? {});
  if (parsed.success) return { ok: true, value: parsed.data };
  const issues = parsed.error.issues.map((i) => {
    const field = i.path.length ? i.path.join(".") : i.code === "unrecognized_keys" ? (i as { keys?: string[] }).keys?.join(", ") ?? "arguments" : "arguments";
    return { field, message: i.message };
  });
  return { ok: false, message: issues.map((i) => `${i.field}: ${i.message}`).join("; "), fields: issues.map((i) => i.field) };
}

/**
 * Calls `name` for the caller: a tool the key's scopes do not allow is unknown to it, bad
 * arguments and service errors come back as outcomes, never as exceptions.
 */
export async function callTool(tools: readonly AssistantTool[], name: string, args: unknown, ctx: ToolContext, log?: (err: unknown) => void): Promise<ToolOutcome> {
  const tool = toolsFor(tools, ctx.auth, ctx.deps).find((t) => t.name === name);
  if (!tool) return { ok: false, code: "not_found", message: `name: no tool ${JSON.stringify(name)} for this key` };
  const checked = checkArguments(tool, args);
  if (!checked.ok) return { ok: false, code: "invalid_request", message: checked.message, details: { fields: checked.fields } };
  try {
    return { ok: true, result: await tool.handler(checked.value as never, ctx) };
  } catch (e) {
    // The taxonomy's errors (and the object store's that a caller may see) as the model sees them: code and message.
    const known = knownError(e);
    if (known) return { ok: false, code: known.code, message: known.message, ...(known.details ? { details: known.details } : {}) };
    log?.(e);
    return { ok: false, code: "internal_error", message: "internal error" };
  }
}
