/**
 * Benchmark: a 6 GiB file into Operon by `./operon files upload` (issue 30), against what a
 * lab would use otherwise, in the same run on the same disk:
 * (a) to MinIO (the api-server in S3 mode; the CLI PUTs parts straight to MinIO) against
 *     Debian's `aws s3 cp` to the same bucket (target ≥ 0.9 of its rate);
 * (b) to the embedded store (parts through the api-server to its data folder) against `cp`
 *     to the same disk (target ≥ 0.5);
 * and the api-server's RSS growth during each upload (target ≤ +100 MB). Each case runs
 * BENCH_ROUNDS times (default 2), alternating with its peer; medians are reported. The time
 * until the server has the file's SHA-256 (read once after confirm) is shown apart.
 * Run: `make bench-uploads` (builds dist/, installs Debian's awscli when missing).
 */
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { open } from "node:fs/promises";
import { cpus, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { freePorts, startMinio, type MinioServer } from "../test/support/minio.js";
import { writeSection } from "./serve.js";

const root = new URL("..", import.meta.url).pathname;
const GiB = 1024 ** 3;
const SIZE = Number(process.env.BENCH_UPLOAD_BYTES ?? 6 * GiB);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const AWS = process.env.BENCH_AWS ?? "/usr/bin/aws";
const scratch = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), "operon-upload-bench-"));
const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 ? s[(s.length - 1) / 2] as number : ((s[s.length / 2 - 1] as number) + (s[s.length / 2] as number)) / 2; };
const rssKb = (pid: number) => { try { return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0); } catch { return 0; } };

/** The source file: SIZE bytes of random data (a 64 MiB random block repeated: nothing compresses it). */
async function makeSource(path: string): Promise<void> {
  const block = randomBytes(64 * 1024 * 1024);
  const f = await open(path, "w");
  try {
    for (let at = 0; at < SIZE; at += block.length) await f.write(block, 0, Math.min(block.length, SIZE - at), at);
  } finally { await f.close(); }
}

function run(cmd: string, args: string[], env: Record<string, string> = {}): number {
  const t0 = performance.now();
  const r = spawnSync(cmd, args, { cwd: root, env: { ...process.env, ...env }, stdio: ["ignore", "ignore", "pipe"], maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")}: exit ${r.status}: ${r.stderr?.toString().slice(-2000)}`);
  return (performance.now() - t0) / 1000;
}

interface Server { base: string; key: string; pid: number; data: string; stop(): Promise<void> }

async function serve(env: Record<string, string>): Promise<Server> {
  const data = mkdtempSync(join(scratch, "data-"));
  const [port] = await freePorts(1) as [number];
  const p = spawn(process.execPath, ["dist/cli/main.js", "serve"], { cwd: root, stdio: ["ignore", "ignore", "inherit"], env: { ...process.env, OPERON_DATA_DIR: data, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "warn", ...env } });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try { if ((await fetch(`${base}/healthz`)).ok) break; } catch { /* not yet */ }
    if (i > 600) throw new Error("the server did not start");
    await new Promise((r) => setTimeout(r, 100));
  }
  const key = readFileSync(join(data, "bootstrap-key"), "utf8").trim();
  return {
    base, key, pid: p.pid as number, data,
    stop: async () => { if (p.exitCode === null) { const exited = new Promise((r) => p.once("exit", r)); p.kill("SIGTERM"); await exited; } rmSync(data, { recursive: true, force: true }); },
  };
}

/** One `./operon files upload` of the source: seconds, the server's RSS growth (MB), seconds until the server had the SHA-256. */
async function operonUpload(s: Server, source: string, name: string): Promise<{ s: number; rssMb: number; sha256S: number }> {
  const rss0 = rssKb(s.pid);
  let peak = rss0;
  const sampler = setInterval(() => { peak = Math.max(peak, rssKb(s.pid)); }, 100);
  const t0 = performance.now();
  await new Promise<void>((resolve, reject) => {
    const p = spawn(process.execPath, ["dist/cli/main.js", "files", "upload", source, "--workspace", "default", "--path", name], { cwd: root, stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, OPERON_URL: s.base, OPERON_API_KEY: s.key } });
    let err = "";
    p.stderr.on("data", (c: Buffer) => { err = (err + c.toString()).slice(-4000); });
    p.on("exit", (code) => code === 0 ? resolve() : reject(new Error(`operon files upload: exit ${code}: ${err}`)));
  });
  const seconds = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  const key = `${name}/${source.split("/").pop() as string}`;
  for (;;) {
    const r = await fetch(`${s.base}/v1/files?workspace_id=default&prefix=${encodeURIComponent(key)}`, { headers: { authorization: `Bearer ${s.key}` } });
    const f = ((await r.json()) as { data: Array<{ key: string; sha256: string | null }> }).data.find((x) => x.key === key);
    if (f?.sha256) break;
    if (performance.now() - t0 > 3600_000) throw new Error("no sha256 within an hour");
    await new Promise((r) => setTimeout(r, 250));
  }
  await fetch(`${s.base}/v1/files?workspace_id=default&key=${encodeURIComponent(key)}`, { method: "DELETE", headers: { authorization: `Bearer ${s.key}` } });
  return { s: seconds, rssMb: (peak - rss0) / 1024, sha256S: (performance.now() - t0) / 1000 };
}

async function main(): Promise<void> {
  if (spawnSync(AWS, ["--version"]).status !== 0) throw new Error(`${AWS} not found: make bench-uploads installs Debian's awscli`);
  const awsVersion = spawnSync(AWS, ["--version"]).stdout.toString().trim();
  const source = join(scratch, "sample.bin");
  await makeSource(source);
  const minio: MinioServer = await startMinio();
  const rows: Record<string, number[]> = { s3Operon: [], s3Aws: [], s3Rss: [], s3Sha: [], localOperon: [], localCp: [], localRss: [], localSha: [] };
  try {
    const s3env = { OPERON_STORAGE: "s3", S3_ENDPOINT: minio.endpoint, S3_BUCKET: minio.bucket, S3_REGION: minio.region, S3_FORCE_PATH_STYLE: "true", AWS_ACCESS_KEY_ID: minio.accessKeyId, AWS_SECRET_ACCESS_KEY: minio.secretAccessKey };
    const s3 = await serve(s3env);
    const local = await serve({});
    try {
      for (let round = 0; round < ROUNDS; round++) {
        const aws = run(AWS, ["s3", "cp", "--only-show-errors", source, `s3://${minio.bucket}/aws-${round}.bin`, "--endpoint-url", minio.endpoint], { AWS_ACCESS_KEY_ID: minio.accessKeyId, AWS_SECRET_ACCESS_KEY: minio.secretAccessKey, AWS_DEFAULT_REGION: minio.region, AWS_CONFIG_FILE: "/dev/null" });
        run(AWS, ["s3", "rm", "--only-show-errors", `s3://${minio.bucket}/aws-${round}.bin`, "--endpoint-url", minio.endpoint], { AWS_ACCESS_KEY_ID: minio.accessKeyId, AWS_SECRET_ACCESS_KEY: minio.secretAccessKey, AWS_DEFAULT_REGION: minio.region, AWS_CONFIG_FILE: "/dev/null" });
        const o = await operonUpload(s3, source, `s3-${round}`);
        rows.s3Aws?.push(aws); rows.s3Operon?.push(o.s); rows.s3Rss?.push(o.rssMb); rows.s3Sha?.push(o.sha256S);
        const copy = join(local.data, `cp-${round}.bin`);
        const cp = run("cp", [source, copy]);
        rmSync(copy);
        const l = await operonUpload(local, source, `local-${round}`);
        rows.localCp?.push(cp); rows.localOperon?.push(l.s); rows.localRss?.push(l.rssMb); rows.localSha?.push(l.sha256S);
        console.error(`round ${round + 1}: S3 operon ${o.s.toFixed(1)} s vs aws ${aws.toFixed(1)} s; local operon ${l.s.toFixed(1)} s vs cp ${cp.toFixed(1)} s; RSS +${o.rssMb.toFixed(0)}/+${l.rssMb.toFixed(0)} MB`);
      }
    } finally {
      await s3.stop();
      await local.stop();
    }
  } finally {
    await minio.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
  const m = Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, median(v)])) as Record<string, number>;
  const rate = (s: number) => `${(SIZE / 2 ** 20 / s).toFixed(0)} MiB/s`;
  const section = `<!-- uploads:start -->
## Uploads (\`bench/upload.bench.ts\`)

Measured ${new Date().toISOString().slice(0, 10)} on ${cpus().length} × ${cpus()[0]?.model ?? "CPU"}, ${(totalmem() / GiB).toFixed(0)} GiB, Node ${process.versions.node}, ${awsVersion}; one ${(SIZE / GiB).toFixed(1)} GiB file of random bytes, ${ROUNDS} alternating rounds, medians (per round: Operon to S3 ${rows.s3Operon?.map((x) => x.toFixed(1)).join(", ")} s, aws ${rows.s3Aws?.map((x) => x.toFixed(1)).join(", ")} s; Operon embedded ${rows.localOperon?.map((x) => x.toFixed(1)).join(", ")} s, cp ${rows.localCp?.map((x) => x.toFixed(1)).join(", ")} s). MinIO, the api-server, the CLI and the peer share the machine's cores and disk.

| case | Operon (\`./operon files upload\`, 4 parts in flight) | peer, same run | ratio of the peer's rate | api-server RSS growth | SHA-256 known after |
|---|---|---|---|---|---|
| to MinIO | **${m.s3Operon?.toFixed(1)} s** (${rate(m.s3Operon as number)}) | \`aws s3 cp\`: ${m.s3Aws?.toFixed(1)} s (${rate(m.s3Aws as number)}) | **${((m.s3Aws as number) / (m.s3Operon as number)).toFixed(2)}** (target ≥ 0.9) | **+${m.s3Rss?.toFixed(0)} MB** (target ≤ 100) | ${m.s3Sha?.toFixed(1)} s |
| to the embedded store | **${m.localOperon?.toFixed(1)} s** (${rate(m.localOperon as number)}) | \`cp\` to the same disk: ${m.localCp?.toFixed(1)} s (${rate(m.localCp as number)}) | **${((m.localCp as number) / (m.localOperon as number)).toFixed(2)}** (target ≥ 0.5) | **+${m.localRss?.toFixed(0)} MB** (target ≤ 100) | ${m.localSha?.toFixed(1)} s |

The upload's time ends when \`upload-confirm\` answered (the file is listed); "SHA-256 known after" counts from the same start until the file's \`sha256\` is listed: the api-server reads the file once after confirm (services/checksums.ts), and on S3 records it by a server-side copy of the object onto itself.
<!-- uploads:end -->`;
  writeSection("uploads", section);
  console.log(section);
}

void main().catch((e: unknown) => { console.error(e); process.exit(1); });
