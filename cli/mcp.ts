/**
 * `operon mcp`: Operon's assistant tools for MCP clients that start a local process (Claude
 * Desktop, editors): a stdio ↔ Streamable HTTP proxy that forwards every JSON-RPC message to
 * `<OPERON_URL>/mcp` with the API key and writes the answers back. The tools, their checks
 * and their authorisation are then exactly the server's; nothing is decided here. Defaults
 * as `operon run`: the local server (http://127.0.0.1:$PORT) and its bootstrap key.
 */
import { Command } from "commander";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { Ctx } from "./program.js";
import { resolveConnection, withConnection } from "./client.js";
import { messageOf } from "../core/errors.js";

export function mcpCli(ctx: Ctx): Command {
  return withConnection(new Command("mcp")
    .summary("Serve Operon's assistant tools to a stdio MCP client (proxies to <url>/mcp)")
    .description("Speak MCP on stdin/stdout for desktop clients, forwarding each message to the Operon server's /mcp endpoint "
      + "with the API key: the tools are exactly the server's, authorised for that key. Diagnostics go to stderr; stdout carries only MCP messages."))
    .addHelpText("after", "\nExit codes: 0 the client closed stdin, 2 no API key or a bad URL.\n\nExample (a stdio client's configuration):\n  {\"command\": \"operon\", \"args\": [\"mcp\"], \"env\": {\"OPERON_URL\": \"https://operon.example.org\", \"OPERON_API_KEY\": \"sk_live_...\"}}")
    .action(async (opts: { url?: string; key?: string }) => {
      const { env, io } = ctx;
      const { base, key } = resolveConnection(opts, env);
      ctx.code = await proxy(new URL(`${base}/mcp`), key, (s) => io.err(`operon mcp: ${s}`));
    });
}

/** Forwards messages both ways until stdin ends; a message the server cannot take is answered with a JSON-RPC error. */
async function proxy(endpoint: URL, key: string, warn: (s: string) => void): Promise<number> {
  const local = new StdioServerTransport();
  const remote = new StreamableHTTPClientTransport(endpoint, { requestInit: { headers: { authorization: `Bearer ${key}` } } });
  /** Ids of initialize requests, to learn the protocol version the server chose. */
  const initializing = new Set<string | number>();
  remote.onmessage = (m: JSONRPCMessage) => {
    if ("id" in m && initializing.delete(m.id as string | number) && "result" in m) {
      const v = (m.result as { protocolVersion?: unknown }).protocolVersion;
      if (typeof v === "string") remote.setProtocolVersion(v);
    }
    void local.send(m).catch((e: unknown) => warn(`writing to stdout failed: ${String(e)}`));
  };
  remote.onerror = (e) => warn(e.message);
  local.onmessage = (m: JSONRPCMessage) => {
    if ("method" in m && m.method === "initialize" && "id" in m) initializing.add(m.id as string | number);
    remote.send(m).catch((e: unknown) => {
      const message = messageOf(e);
      warn(message);
      if ("id" in m && "method" in m) void local.send({ jsonrpc: "2.0", id: m.id as string | number, error: { code: -32603, message: `Operon at ${endpoint.origin}: ${message}` } });
    });
  };
  await remote.start();
  await local.start();
  await new Promise<void>((resolve) => {
    process.stdin.once("end", resolve);
    process.stdin.once("close", resolve);
  });
  await local.close();
  await remote.close();
  return 0;
}
