/**
 * MCP over Streamable HTTP at `/mcp` (docs/mcp.md): the assistant tool registry for external
 * agents (Claude Code, Cursor, …) with the same API keys as the rest of the API. Stateless:
 * each POST gets a new server and transport (sessionIdGenerator undefined, JSON responses),
 * so any replica answers; GET (a server-sent stream) and DELETE (ending a session) are 405.
 * A request without a valid key is a 401 carrying `WWW-Authenticate: Bearer`, as MCP clients
 * expect.
 */
import type { FastifyInstance } from "fastify";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { createMcpServer } from "../../assistant/mcp-server.js";
import type { AssistantDeps } from "../../assistant/tools.js";
import { requireAuth } from "./common.js";
import { errorResponses, jsonResponse } from "../openapi.js";
import { z } from "zod";

/** A JSON-RPC 2.0 message or batch, as MCP sends it: documented, never validated here (the MCP transport checks it). */
const JsonRpcMessage = z.object({
  jsonrpc: z.literal("2.0"),
  id: z.union([z.string(), z.number()]).optional().describe("Absent on a notification."),
  method: z.string().optional().describe("e.g. `initialize`, `tools/list`, `tools/call`."),
  params: z.record(z.string(), z.unknown()).optional(),
  result: z.unknown().optional(),
  error: z.object({ code: z.number(), message: z.string(), data: z.unknown().optional() }).optional(),
}).meta({ id: "JsonRpcMessage" });

/** The POST /mcp operation in the OpenAPI document (the reply is the MCP transport's own). */
const mcpDocumentation = {
  tags: ["mcp"], operationId: "postMcp", summary: "MCP (Model Context Protocol) over Streamable HTTP",
  description: "One JSON-RPC 2.0 message (or a batch) per request, answered as JSON (`Accept: application/json, text/event-stream`). Stateless: no session id, any replica answers; GET and DELETE answer 405. The tools and their arguments are listed by `tools/list` (docs/mcp.md). Protocol errors are JSON-RPC error objects with the transport's status (400, 406, 415).",
  documentedBody: { "application/json": z.union([JsonRpcMessage, z.array(JsonRpcMessage)]) },
  response: {
    200: jsonResponse(z.union([JsonRpcMessage, z.array(JsonRpcMessage)]), "The JSON-RPC response(s)."),
    202: z.null().describe("Accepted: the message was a notification or a response (no body)."),
    ...errorResponses(401, 429, 500),
  },
};

export const MCP_PATH = "/mcp";

export async function mcpRoutes(app: FastifyInstance, opts: { deps: AssistantDeps; version: string }): Promise<void> {
  // Encapsulated in this plugin: only /mcp's answers get the header.
  app.addHook("onSend", async (_req, reply, payload) => {
    if (reply.statusCode === 401) void reply.header("www-authenticate", 'Bearer realm="operon", error="invalid_token"');
    return payload;
  });

  app.post(MCP_PATH, { config: { scope: "any" }, schema: mcpDocumentation }, async (req, reply) => {
    const auth = requireAuth(req);
    const server = createMcpServer(auth, opts.deps, { version: opts.version, log: (err) => req.log.error({ err }, "assistant tool failed") });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    reply.hijack();
    reply.raw.setHeader("x-request-id", req.id);
    reply.raw.on("close", () => { void transport.close(); void server.close(); });
    try {
      await server.connect(transport);
      await transport.handleRequest(req.raw, reply.raw, req.body);
    } catch (err) {
      req.log.error({ err }, "MCP request failed");
      if (!reply.raw.headersSent) reply.raw.writeHead(500, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32603, message: "internal error" }, id: null }));
    }
  });

  const notAllowed = { config: { scope: "public" as const }, schema: { hide: true } };
  for (const method of ["GET", "DELETE"] as const) {
    app.route({ method, url: MCP_PATH, ...notAllowed, handler: async (req, reply) => reply.status(405).header("allow", "POST").send({
      jsonrpc: "2.0", error: { code: -32000, message: `Method not allowed: this MCP server is stateless; ${req.method} is not served, send JSON-RPC messages with POST` }, id: null,
    }) });
  }
}
