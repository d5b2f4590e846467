/**
 * MCP against plain HTTP, same server, same run: the latency of listing the tools
 * (`tools/list` over MCP with the SDK's client, against `GET /v1/tools`) and of a read-only
 * call (`service_list_files` against `GET /v1/files`). One request at a time (latency, not
 * throughput), alternating rounds, medians and p99 over all rounds; the server is a real
 * `operon serve` (embedded) in its own process, the clients in this one.
 *
 * Run: `npx tsx bench/mcp.bench.ts` (or `make bench`). Writes the `mcp` section of
 * bench/RESULTS.md.
 */
import { cpus, loadavg, totalmem } from "node:os";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { startServe, writeSection } from "./serve.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const PER_ROUND = Number(process.env.BENCH_REQUESTS ?? 100);

const quantile = (xs: number[], q: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(q * s.length))]!; };
const ms = (x: number) => `${x.toFixed(2)} ms`;

async function main() {
  const { base, headers, stop } = await startServe();
  try {
    const client = new Client({ name: "operon-bench", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers } }));

    const ops: Record<string, () => Promise<unknown>> = {
      "http GET /v1/tools": async () => { const r = await fetch(`${base}/v1/tools`, { headers }); if (!r.ok) throw new Error(String(r.status)); return r.json(); },
      "mcp tools/list": async () => client.listTools(),
      "mcp tools/list, raw POST": async () => {
        const r = await fetch(`${base}/mcp`, { method: "POST", headers: { ...headers, "content-type": "application/json", accept: "application/json, text/event-stream" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }) });
        const body = (await r.json()) as { result?: { tools: unknown[] } };
        if (!r.ok || !body.result?.tools.length) throw new Error(`raw tools/list: ${r.status} ${JSON.stringify(body).slice(0, 200)}`);
        return body;
      },
      "http GET /v1/files": async () => { const r = await fetch(`${base}/v1/files?workspace_id=default`, { headers }); if (!r.ok) throw new Error(String(r.status)); return r.json(); },
      "mcp service_list_files": async () => { const r = await client.callTool({ name: "service_list_files", arguments: { workspace_id: "default" } }); if (r.isError) throw new Error(JSON.stringify(r.content)); return r; },
    };
    const times: Record<string, number[]> = Object.fromEntries(Object.keys(ops).map((k) => [k, []]));
    for (const op of Object.values(ops)) for (let i = 0; i < 20; i++) await op(); // warm-up
    const load0 = loadavg()[0]!;
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 ? Object.keys(ops).reverse() : Object.keys(ops);
      for (const name of order) {
        for (let i = 0; i < PER_ROUND; i++) {
          const t0 = performance.now();
          await ops[name]!();
          times[name]!.push(performance.now() - t0);
        }
      }
    }
    const load1 = loadavg()[0]!;
    await client.close();
    const row = (mcp: string, http: string, what: string) => {
      const [m50, h50, m99, h99] = [quantile(times[mcp]!, 0.5), quantile(times[http]!, 0.5), quantile(times[mcp]!, 0.99), quantile(times[http]!, 0.99)];
      return `| ${what} | ${ms(h50)} / ${ms(h99)} | ${ms(m50)} / ${ms(m99)} | ×${(m50 / h50).toFixed(2)} / ×${(m99 / h99).toFixed(2)} |`;
    };
    const machine = `${cpus().length} × ${cpus()[0]?.model.trim() ?? "CPU"}, ${Math.round(totalmem() / 1024 ** 3)} GiB, Node ${process.version}`;
    const section = `<!-- mcp:start -->
## MCP against plain HTTP (\`bench/mcp.bench.ts\`)

Measured ${new Date().toISOString().slice(0, 10)} on ${machine}; load average ${load0.toFixed(1)} → ${load1.toFixed(1)}. One \`operon serve\` (embedded) in its own process; one request at a time from one client process; ${ROUNDS} alternating rounds of ${PER_ROUND} requests per operation after 20 warm-up requests each. MCP: the SDK's \`Client\` over \`StreamableHTTPClientTransport\` (one POST per call; the server builds a new MCP server and transport per request — stateless, so any replica answers). HTTP: \`fetch\` with keep-alive.

| operation | HTTP p50 / p99 | MCP p50 / p99 | MCP ÷ HTTP (p50 / p99) |
|---|---|---|---|
${row("mcp tools/list", "http GET /v1/tools", "list the tools (MCP `tools/list`: the 16 assistant tools for this key; HTTP `GET /v1/tools`: the catalogue)")}
${row("mcp tools/list, raw POST", "http GET /v1/tools", "the same `tools/list` as one plain JSON-RPC POST (no SDK client: no response validation, no output-schema compilation)")}
${row("mcp service_list_files", "http GET /v1/files", "list a workspace's 20 files (`service_list_files` / `GET /v1/files`)")}
<!-- mcp:end -->`;
    console.log(section);
    writeSection("mcp", section);
  } finally {
    await stop();
  }
}

await main();
