/**
 * The registry as an MCP server for one caller: a fresh McpServer (stateless, so any
 * api-server replica can answer any request) offering the tools the caller's key may use,
 * each call going through the registry's callTool. Results carry the JSON as text for any
 * client and as structuredContent for those that read the output schema; failures are tool
 * results with isError and a message that starts with the error code and names the field.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { ASSISTANT_TOOLS, callTool, toolsFor, type AssistantDeps } from "./tools.js";
import type { AuthContext } from "../engine/access.js";

const INSTRUCTIONS = "Operon runs bioinformatics pipelines and tools on files in workspaces. Start with service_list_workspaces; find pipelines with service_list_pipelines and their inputs with service_get_pipeline; start one with service_run_pipeline and follow it with service_get_run (wait_seconds). File paths are workspace-relative keys (see service_list_files).";

export function createMcpServer(auth: AuthContext, deps: AssistantDeps, opts: { version: string; log?: (err: unknown) => void }): McpServer {
  const server = new McpServer({ name: "operon", version: opts.version }, { capabilities: { tools: {} }, instructions: INSTRUCTIONS });
  for (const tool of toolsFor(ASSISTANT_TOOLS, auth, deps)) {
    server.registerTool(tool.name, {
      title: tool.title,
      description: tool.description,
      inputSchema: tool.input,
      outputSchema: tool.output,
      annotations: { title: tool.title, ...tool.annotations },
    }, async (args: unknown, extra: { signal: AbortSignal }): Promise<CallToolResult> => {
      const outcome = await callTool(ASSISTANT_TOOLS, tool.name, args, { auth, deps, signal: extra.signal }, opts.log);
      if (!outcome.ok) {
        const details = outcome.details ? `\n${JSON.stringify(outcome.details)}` : "";
        return { isError: true, content: [{ type: "text", text: `${outcome.code}: ${outcome.message}${details}` }] };
      }
      return { content: [{ type: "text", text: JSON.stringify(outcome.result) }], structuredContent: outcome.result };
    });
  }
  return server;
}
