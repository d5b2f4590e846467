/**
 * The registry as an MCP server for one caller: a fresh server per request (stateless, so any
 * api-server replica can answer any request) offering the tools the caller's key may use,
 * each call going through the registry's callTool (which checks the arguments and names the
 * field). The SDK's low-level Server rather than McpServer: McpServer converts every tool's
 * zod schemas to JSON Schema on every tools/list, which with a new server per request made
 * listing ~9× slower than the HTTP API (bench/RESULTS.md, mcp); here each tool's definition
 * is built once per process. Results carry the JSON as text for any client and as
 * structuredContent for those that read the output schema; failures are tool results with
 * isError and a message that starts with the error code.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { ASSISTANT_TOOLS, callTool, jsonSchemaOf, toolsFor, type AssistantDeps, type AssistantTool } from "./tools.js";
import type { AuthContext } from "../services/access.js";

const INSTRUCTIONS = "Operon runs bioinformatics pipelines and tools on files in workspaces. Start with service_list_workspaces; find pipelines with service_list_pipelines and their inputs with service_get_pipeline; start one with service_run_pipeline and follow it with service_get_run (wait_seconds). File paths are workspace-relative keys (see service_list_files).";

const definitions = new WeakMap<AssistantTool, Tool>();
/** A tool as tools/list describes it, built once. */
function definition(tool: AssistantTool): Tool {
  let d = definitions.get(tool);
  if (!d) {
    d = {
      name: tool.name,
      title: tool.title,
      description: tool.description,
      inputSchema: jsonSchemaOf(tool.input) as Tool["inputSchema"],
      outputSchema: jsonSchemaOf(tool.output, "output") as Tool["outputSchema"],
      annotations: { title: tool.title, ...tool.annotations },
    };
    definitions.set(tool, d);
  }
  return d;
}

export function createMcpServer(auth: AuthContext, deps: AssistantDeps, opts: { version: string; log?: (err: unknown) => void }): Server {
  const server = new Server({ name: "operon", version: opts.version }, { capabilities: { tools: {} }, instructions: INSTRUCTIONS });
  const tools = toolsFor(ASSISTANT_TOOLS, auth, deps);
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: tools.map(definition) }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const outcome = await callTool(ASSISTANT_TOOLS, request.params.name, request.params.arguments ?? {}, { auth, deps, signal: extra.signal }, opts.log);
    if (!outcome.ok) {
      const details = outcome.details ? `\n${JSON.stringify(outcome.details)}` : "";
      return { isError: true, content: [{ type: "text", text: `${outcome.code}: ${outcome.message}${details}` }] };
    }
    return { content: [{ type: "text", text: JSON.stringify(outcome.result) }], structuredContent: outcome.result };
  });
  return server;
}
