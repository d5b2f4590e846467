/**
 * Benchmark: the api-server (issue: API server, auth, workspaces and files).
 * (a) Authenticated GET /v1/files returning 100 entries, 50 connections, against a bare
 *     Fastify hello-world in the same run (both servers in their own process; the load
 *     generator, autocannon, in this one): throughput ratio and p99 latency.
 * (b) A 1 GiB upload through the api-server (embedded mode: the presigned PUT is served by
 *     the api-server and streamed to the filesystem store) against a direct ObjectStore.put
 *     of the same bytes to the same store, same run: throughput ratio and the server's peak
 *     RSS growth during the upload.
 * Writes its section of bench/RESULTS.md. Run: `make bench` (builds dist/ first).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { cpus, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import autocannon from "autocannon";
import { createLocalObjectStore } from "../adapters/local/object-store.js";

const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const root = new URL("..", import.meta.url).pathname;
if (!existsSync(join(root, "dist/cli/main.js"))) throw new Error("run `make build` first");

function start(args: string[], env: Record<string, string>, ready: RegExp): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    p.stdout?.on("data", (d: Buffer) => { out += d.toString(); if (ready.test(out)) resolve(p); });
    p.on("exit", (c) => reject(new Error(`server exited ${c}: ${out}`)));
  });
}

const stop = (p: ChildProcess) => new Promise<void>((r) => { p.once("exit", () => r()); p.kill("SIGTERM"); });

function rssKb(pid: number): number {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) : 0;
}

async function load(url: string, headers: Record<string, string> = {}) {
  const r = await autocannon({ url, connections: 50, duration: DURATION, headers });
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${url}: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, bytes: r.throughput.average };
}

/** 1 GiB as a stream of 1 MiB chunks (one random buffer reused: nothing large in memory). */
const GIB = 1024 ** 3;
const chunk = randomBytes(1024 * 1024);
const gib = () => Readable.from((function* () { for (let i = 0; i < GIB / chunk.length; i++) yield chunk; })());

function put(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = request({ host: u.hostname, port: u.port, method: "PUT", path: u.pathname + u.search, headers: { "content-length": GIB } }, (res) => {
      res.resume();
      res.on("end", () => (res.statusCode === 200 ? resolve(res.statusCode) : reject(new Error(`PUT ${res.statusCode}`))));
    });
    req.on("error", reject);
    gib().pipe(req);
  });
}

const data = mkdtempSync(join(tmpdir(), "operon-bench-"));
const port = 18080 + Math.floor(Math.random() * 1000);
const base = `http://127.0.0.1:${port}`;
try {
  // ---- (a) list of 100 files vs hello-world: both servers up, measured in alternating
  // rounds so that the machine's drift hits both alike; medians over the rounds.
  const hello = await start(["bench/hello.mjs"], { PORT: String(port + 1) }, /ready/);
  const server = await start(["dist/cli/main.js", "serve"], { PORT: String(port), OPERON_DATA_DIR: data, LOG_LEVEL: "warn", OPERON_RATE_LIMIT_PER_MINUTE: "100000000", OPERON_RATE_LIMIT_PER_IP_PER_MINUTE: "100000000" }, /listening on/);
  const key = readFileSync(join(data, "bootstrap-key"), "utf8").trim();
  const store = createLocalObjectStore({ root: data, publicUrl: base, signingSecret: "unused-here-0123456789abcdef01234" });
  for (let i = 0; i < 100; i++) await store.put(`orgs/default/workspaces/default/reads/sample${String(i).padStart(3, "0")}.fastq`, `@r${i}\nACGT\n+\nIIII\n`, { contentType: "text/plain" });
  const auth = { authorization: `Bearer ${key}` };
  const listUrl = `${base}/v1/files?workspace_id=default&limit=100`;
  const check = await fetch(listUrl, { headers: auth });
  const n = ((await check.json()) as { data: unknown[] }).data.length;
  if (n !== 100) throw new Error(`expected 100 entries, got ${n}`);
  await load(`http://127.0.0.1:${port + 1}/`); // warm-up both
  await load(listUrl, auth);
  const rounds: Array<{ hw: Awaited<ReturnType<typeof load>>; list: Awaited<ReturnType<typeof load>> }> = [];
  for (let r = 0; r < ROUNDS; r++) rounds.push({ hw: await load(`http://127.0.0.1:${port + 1}/`), list: await load(listUrl, auth) });
  await stop(hello);
  const median = (xs: number[]) => xs.slice().sort((x, y) => x - y)[Math.floor(xs.length / 2)] as number;
  const hw = { rps: median(rounds.map((r) => r.hw.rps)), p99: median(rounds.map((r) => r.hw.p99)) };
  const list = { rps: median(rounds.map((r) => r.list.rps)), p50: median(rounds.map((r) => r.list.p50)), p99: median(rounds.map((r) => r.list.p99)) };
  const ratios = rounds.map((r) => r.list.rps / r.hw.rps);

  // ---- (b) 1 GiB through the api-server vs direct to the store
  const direct = createLocalObjectStore({ root: data, publicUrl: base, signingSecret: "unused-here-0123456789abcdef01234" });
  let t0 = performance.now();
  await direct.put("orgs/default/workspaces/default/direct.bin", gib());
  const directS = (performance.now() - t0) / 1000;
  const up = await fetch(`${base}/v1/files/upload-url`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ filename: "via-api.bin", workspace_id: "default", size: GIB }) });
  const { uploadUrl } = ((await up.json()) as { data: { uploadUrl: string } }).data;
  const pid = server.pid as number;
  const rss0 = rssKb(pid);
  let peak = rss0;
  const sampler = setInterval(() => { peak = Math.max(peak, rssKb(pid)); }, 50);
  t0 = performance.now();
  await put(uploadUrl);
  const apiS = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  const confirm = await fetch(`${base}/v1/files/upload-confirm`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ file_key: "via-api.bin", workspace_id: "default", size: GIB }) });
  if (confirm.status !== 200) throw new Error(`confirm ${confirm.status}`);
  await stop(server);

  const mb = (s: number) => (GIB / 1024 ** 2 / s).toFixed(0);
  const section = `<!-- api:start -->
## API server (\`bench/api.bench.ts\`)

Measured ${new Date().toISOString().slice(0, 10)} on ${cpus().length} × ${cpus()[0]?.model ?? "CPU"}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.versions.node}; servers and the load generator (autocannon, 50 connections) share the machine's cores. (a) is ${ROUNDS} alternating rounds of ${DURATION} s per server after a warm-up; medians shown, per-round ratios ${ratios.map((x) => x.toFixed(2)).join(", ")}.

| measure | result | baseline (same run) | ratio |
|---|---|---|---|
| (a) authenticated \`GET /v1/files\`, 100 entries (embedded, filesystem) | **${Math.round(list.rps).toLocaleString("en")} req/s**, p50 ${list.p50} ms, **p99 ${list.p99} ms** (target ≤ 25 ms) | bare Fastify hello-world: ${Math.round(hw.rps).toLocaleString("en")} req/s, p99 ${hw.p99} ms | **${median(ratios).toFixed(2)}** (target ≥ 0.35) |
| (b) 1 GiB presigned PUT through the api-server to the filesystem store | **${apiS.toFixed(1)} s** (${mb(apiS)} MiB/s), server peak RSS growth **${((peak - rss0) / 1024).toFixed(0)} MB** (target ≤ 150 MB) | direct \`ObjectStore.put\` of the same bytes: ${directS.toFixed(1)} s (${mb(directS)} MiB/s) | **${(directS / apiS).toFixed(2)}** (target ≥ 0.7) |
<!-- api:end -->`;
  process.stdout.write(section + "\n");
  const path = join(root, "bench/RESULTS.md");
  const current = readFileSync(path, "utf8");
  writeFileSync(path, /<!-- api:start -->[\s\S]*<!-- api:end -->/.test(current)
    ? current.replace(/<!-- api:start -->[\s\S]*<!-- api:end -->/, section)
    : current.trimEnd() + "\n\n" + section + "\n");
} finally {
  rmSync(data, { recursive: true, force: true });
}
