/**
 * A real S3 server for tests (DESIGN §10): MinIO, built from its Go module by
 * `make test-deps` into the cache dir, started on loopback ports with random credentials in
 * a temporary data dir. It checks SigV4 signatures, so signing bugs fail the tests.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { access, mkdtemp, rm } from "node:fs/promises";
import { constants } from "node:fs";
import { createServer } from "node:net";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";

export interface MinioServer {
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  stop(): Promise<void>;
}

export function minioBinaryPath(): string {
  const cache = process.env.OPERON_CACHE_DIR ?? join(homedir(), ".cache", "operon");
  return join(cache, "bin", "minio");
}

/** `n` distinct ports that were free a moment ago on 127.0.0.1 (held open together, so distinct). */
export async function freePorts(n: number): Promise<number[]> {
  const servers = Array.from({ length: n }, () => createServer());
  try {
    return await Promise.all(servers.map((server) => new Promise<number>((resolve, reject) => {
      server.on("error", reject);
      server.listen(0, "127.0.0.1", () => {
        const address = server.address();
        if (typeof address === "object" && address) resolve(address.port);
        else reject(new Error("no free port"));
      });
    })));
  } finally {
    await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startMinio(options: { bucket?: string; startTimeoutMs?: number } = {}): Promise<MinioServer> {
  const binary = minioBinaryPath();
  try {
    await access(binary, constants.X_OK);
  } catch {
    throw new Error(`MinIO is not built: ${binary} is missing. Run \`make test-deps\` (needs Go) to build it.`);
  }
  const dataDir = await mkdtemp(join(tmpdir(), "operon-minio-"));
  const [port, consolePort] = await freePorts(2);
  const accessKeyId = `test${randomBytes(8).toString("hex")}`;
  const secretAccessKey = randomBytes(24).toString("hex");
  const region = "us-east-1";
  const bucket = options.bucket ?? "operon-test";
  const endpoint = `http://127.0.0.1:${port}`;

  const child: ChildProcess = spawn(binary, [
    "server", dataDir, "--address", `127.0.0.1:${port}`, "--console-address", `127.0.0.1:${consolePort}`, "--quiet",
  ], {
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: dataDir,
      MINIO_ROOT_USER: accessKeyId,
      MINIO_ROOT_PASSWORD: secretAccessKey,
      MINIO_BROWSER: "off",
      MINIO_UPDATE: "off",
      MINIO_CALLHOME_ENABLE: "off",
      MINIO_REGION: region,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const keep = (chunk: Buffer) => { output = (output + chunk.toString()).slice(-4000); };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  let exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const exitPromise = new Promise<void>((resolve) => {
    child.on("exit", (code, signal) => { exited = { code, signal }; resolve(); });
  });
  const spawnError = new Promise<Error>((resolve) => child.on("error", resolve));
  // Last resort: MinIO must not outlive the test process when stop() was never called.
  const killOnExit = () => { if (!exited) child.kill("SIGKILL"); };
  process.on("exit", killOnExit);
  void exitPromise.then(() => process.off("exit", killOnExit));

  async function stop(): Promise<void> {
    if (!exited) {
      child.kill("SIGTERM");
      const killed = await Promise.race([exitPromise.then(() => true), sleep(5000).then(() => false)]);
      if (!killed) {
        child.kill("SIGKILL");
        await exitPromise;
      }
    }
    await rm(dataDir, { recursive: true, force: true });
  }

  try {
    const deadline = Date.now() + (options.startTimeoutMs ?? 30_000);
    for (;;) {
      const failure = await Promise.race([spawnError, sleep(0).then(() => undefined)]);
      if (failure) throw new Error(`could not start ${binary}: ${failure.message}`);
      if (exited) throw new Error(`MinIO exited (${exited.code ?? exited.signal}) before it was ready:\n${output}`);
      try {
        const res = await fetch(`${endpoint}/minio/health/live`, { signal: AbortSignal.timeout(1000) });
        if (res.ok) break;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`MinIO did not become ready on ${endpoint}:\n${output}`);
      await sleep(100);
    }
    // Live is not always ready for writes: retry creating the bucket until the deadline.
    const s3 = new S3Client({
      endpoint, region, forcePathStyle: true, credentials: { accessKeyId, secretAccessKey },
    });
    try {
      for (;;) {
        try {
          await s3.send(new CreateBucketCommand({ Bucket: bucket }));
          break;
        } catch (err) {
          if (Date.now() > deadline) throw new Error(`MinIO on ${endpoint} did not create bucket ${bucket}: ${String(err)}\n${output}`, { cause: err });
          await sleep(200);
        }
      }
    } finally {
      s3.destroy();
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { endpoint, bucket, region, accessKeyId, secretAccessKey, stop };
}
