/**
 * The tool catalogue over HTTP: each tool with its commands and parameter JSON Schema, and
 * synchronous tool runs (`POST /v1/tools/:toolId/run`). A tool run is one compute task:
 * it takes a slot of the organization's concurrency limit like any pipeline step (waiting
 * behind steps queued earlier), runs through the same executor, and answers with its exit
 * code, output (capped) and the files it produced.
 */
import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { dataOf, errorResponses, jsonResponse, listOf } from "../openapi.js";
import type { Engine } from "../../engine/engine.js";
import { runTool, toolViews } from "../../services/tools.js";
import { requireAuth } from "./common.js";

const ToolSchema = z.object({
  id: z.string(),
  description: z.string(),
  version: z.string().describe("Version of the tool in its pinned image."),
  image: z.string().describe("Container image used in cluster mode."),
  image_note: z.string().optional(),
  commands: z.array(z.object({ name: z.string(), description: z.string(), required: z.array(z.string()).describe("Parameters the command cannot run without.") })),
  input_schema: z.record(z.string(), z.unknown()).describe("JSON Schema of the tool's parameters (the `input` of a tool run, a step's `parameters`)."),
  available: z.boolean().describe("Whether the tool can run here (embedded mode: its executables are installed)."),
}).meta({ id: "Tool" });

const ToolRunSchema = z.object({
  exit_code: z.number().int().nullable(),
  status: z.string().describe("How the task ended: `completed`, `failed`, `cancelled`…"),
  stdout: z.string().describe("The tool's standard output, when it writes its result there (at most 64 KiB)."),
  stderr: z.string().describe("The end of the tool's log (at most 64 KiB)."),
  error: z.string().nullable(),
  output_files: z.array(z.object({ key: z.string().describe("Workspace-relative key."), size: z.number().int(), sha256: z.string() })),
  run_id: z.string().optional().describe("Cluster mode: the one-step pipeline run that ran the tool."),
});

export async function toolRoutes(app: FastifyInstance, opts: { engine?: Engine }): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const view = toolViews(app.operon.deps.config.storage);
  app.get("/v1/tools", { config: { scope: "tools" }, schema: {
    tags: ["tools"], summary: "List tools with their commands and input schemas", operationId: "listTools",
    response: { 200: jsonResponse(listOf(ToolSchema), "Every tool of the catalogue (one page)."), ...errorResponses(401, 403, 429, 500, 503) },
  } }, async () => ({ data: view, has_more: false, next_cursor: null }));

  const engine = opts.engine;
  if (!engine) return;
  r.post("/v1/tools/:toolId/run", {
    config: { scope: "tools" },
    schema: {
      tags: ["tools"], summary: "Run a tool synchronously", operationId: "runTool",
      description: "One compute task under the organization's concurrency limit: the request waits for a free slot (503 if none frees in time), runs the tool and answers with its result. `input` is checked against the tool's input_schema (400 with `details.errors`); `workspace_id` is required for a tool that reads files; a compressed file the tool cannot read (a `.gz` where it reads uncompressed files only, a plain-gzip one where it needs bgzip) is refused with 422 (`unsupported_compression` in `details.errors`).",
      params: z.object({ toolId: z.string().min(1).max(64) }),
      body: z.object({ input: z.record(z.string(), z.unknown()), workspace_id: z.string().min(1).max(63).optional() }),
      response: { 200: jsonResponse(dataOf(ToolRunSchema), "The tool ran (whether it succeeded is in status and exit_code)."), ...errorResponses(400, 401, 403, 404, 413, 415, 422, 429, 500, 503) },
    },
  }, async (req) => {
    const { store, clock } = app.operon.deps;
    return { data: await runTool({ engine, store, clock, access: app.operon.auth.access }, requireAuth(req), req.params.toolId, req.body) };
  });
}
