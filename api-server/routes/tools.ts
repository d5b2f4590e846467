/** The tool catalogue over HTTP: each tool with its commands and parameter JSON Schema. */
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import type { FastifyInstance } from "fastify";
import { defaultCatalogue, toolInputJsonSchema } from "../../core/tools/index.js";

/** Whether every local executable of a tool is on PATH (embedded mode runs them from there). */
function availableLocally(executables: readonly string[]): boolean {
  const dirs = (process.env.PATH ?? "").split(delimiter).filter(Boolean);
  return executables.every((e) => dirs.some((d) => { try { accessSync(join(d, e), constants.X_OK); return true; } catch { return false; } }));
}

export async function toolRoutes(app: FastifyInstance): Promise<void> {
  const tools = defaultCatalogue.ids.map((id) => defaultCatalogue.get(id)).filter((t) => t !== undefined);
  const view = tools.map((t) => ({
    id: t.id, description: t.description, version: t.version, image: t.image, ...(t.imageNote ? { image_note: t.imageNote } : {}),
    commands: Object.entries(t.commands).map(([name, c]) => ({ name, description: c.description, required: c.required })),
    input_schema: toolInputJsonSchema(t),
    available: app.operon.deps.config.storage === "local" ? availableLocally(t.localExecutables) : true,
  }));
  app.get("/v1/tools", { config: { scope: "tools" }, schema: { tags: ["tools"], summary: "List tools with their commands and input schemas" } }, async () => ({ data: view, has_more: false, next_cursor: null }));
}
