/**
 * The agent's own cost, against a direct HTTP call of the same tool in the same run: a real
 * `operon serve` (embedded) pointed at a fake OpenAI-compatible provider in this process
 * (test/support/fake-llm.ts, answering at once), turns of N tool rounds that each call
 * `service_list_files`. Per round, the time between two provider requests (parse the
 * model's answer, run the tool, build and send the next request) minus a direct
 * `GET /v1/files` is the agent's overhead; also the time to the first SSE event of
 * `POST /v1/query/stream`. Alternating rounds, medians.
 *
 * Run: `npx tsx bench/agent.bench.ts` (or `make bench`). Writes the `agent` section of
 * bench/RESULTS.md.
 */
import { cpus, loadavg, totalmem } from "node:os";
import { createParser } from "eventsource-parser";
import { startFakeLlm } from "../test/support/fake-llm.js";
import { startServe, writeSection } from "./serve.js";

const TURNS = Number(process.env.BENCH_TURNS ?? 20);
const ROUNDS_PER_TURN = 5;
const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]!; };
const p90 = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(0.9 * s.length))]!; };

async function main() {
  const fake = await startFakeLlm("openai");
  const arrivals: number[] = [];
  let round = 0;
  fake.script(() => {
    arrivals.push(performance.now());
    if (round++ < ROUNDS_PER_TURN) return { calls: [{ name: "service_list_files", arguments: { workspace_id: "default" } }] };
    return { text: "There are 20 FASTQ files under reads/." };
  });
  const { base, headers, stop } = await startServe({ OPERON_LLM_PROVIDER: "openai", OPERON_LLM_BASE_URL: fake.baseUrl, OPERON_LLM_MODEL: "fake-model" });
  try {
    const direct = async () => { const t0 = performance.now(); const r = await fetch(`${base}/v1/files?workspace_id=default`, { headers }); await r.json(); return performance.now() - t0; };
    const turn = async () => {
      round = 0; arrivals.length = 0;
      const r = await fetch(`${base}/v1/query`, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify({ prompt: "What is in reads/?", workspace_id: "default" }) });
      const body = (await r.json()) as { data?: { tool_calls: unknown[] } };
      if (r.status !== 200 || body.data?.tool_calls.length !== ROUNDS_PER_TURN) throw new Error(`turn: ${r.status} ${JSON.stringify(body).slice(0, 300)}`);
      return arrivals.slice(1).map((t, i) => t - arrivals[i]!);
    };
    const firstEvent = async () => {
      round = ROUNDS_PER_TURN; // answer at once
      const t0 = performance.now();
      const r = await fetch(`${base}/v1/query/stream`, { method: "POST", headers: { ...headers, "content-type": "application/json", accept: "text/event-stream" }, body: JSON.stringify({ prompt: "Hello", workspace_id: "default" }) });
      if (!r.ok || !r.body) throw new Error(`stream: ${r.status}`);
      let first: number | undefined;
      let done = false;
      const parser = createParser({ onEvent: (e) => { first ??= performance.now() - t0; if (e.event === "done" || e.event === "error") done = true; } });
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      while (!done) { const { value, done: end } = await reader.read(); if (end) break; parser.feed(dec.decode(value, { stream: true })); }
      await reader.cancel().catch(() => undefined);
      if (first === undefined) throw new Error("no SSE event");
      return first;
    };
    for (let i = 0; i < 3; i++) { await direct(); await turn(); await firstEvent(); } // warm-up
    const directs: number[] = [], gaps: number[] = [], firsts: number[] = [];
    const load0 = loadavg()[0]!;
    for (let i = 0; i < TURNS; i++) {
      const order = i % 2 ? [0, 1, 2] : [2, 1, 0];
      for (const o of order) {
        if (o === 0) for (let k = 0; k < ROUNDS_PER_TURN; k++) directs.push(await direct());
        if (o === 1) gaps.push(...(await turn()));
        if (o === 2) firsts.push(await firstEvent());
      }
    }
    const load1 = loadavg()[0]!;
    const [d, g, f] = [median(directs), median(gaps), median(firsts)];
    const machine = `${cpus().length} × ${cpus()[0]?.model.trim() ?? "CPU"}, ${Math.round(totalmem() / 1024 ** 3)} GiB, Node ${process.version}`;
    const section = `<!-- agent:start -->
## The agent's own cost (\`bench/agent.bench.ts\`)

Measured ${new Date().toISOString().slice(0, 10)} on ${machine}; load average ${load0.toFixed(1)} → ${load1.toFixed(1)}. One \`operon serve\` (embedded) whose provider is a fake OpenAI-compatible server in the bench's process (test/support/fake-llm.ts: it answers at once, so the model's time is ~0); ${TURNS} turns of ${ROUNDS_PER_TURN} tool rounds (\`service_list_files\` on 20 files) and ${TURNS} streamed turns, alternating with ${TURNS * ROUNDS_PER_TURN} direct calls.

| | median | p90 |
|---|---|---|
| direct \`GET /v1/files\` (the same tool over HTTP) | ${d.toFixed(2)} ms | ${p90(directs).toFixed(2)} ms |
| one tool round inside a turn (provider answer received → next provider request: parse, run the tool, build and send the request) | ${g.toFixed(2)} ms | ${p90(gaps).toFixed(2)} ms |
| **agent overhead per tool round** (round − direct call) | **${(g - d).toFixed(2)} ms** (×${(g / d).toFixed(1)} of the direct call) | |
| time to the first SSE event of \`POST /v1/query/stream\` | ${f.toFixed(2)} ms (×${(f / d).toFixed(1)} of the direct call) | ${p90(firsts).toFixed(2)} ms |
<!-- agent:end -->`;
    console.log(section);
    writeSection("agent", section);
  } finally {
    await stop();
    await fake.close();
  }
}

await main();
