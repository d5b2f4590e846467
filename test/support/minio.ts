/**
 * A real S3 server for tests (docs/testing.md#minio): MinIO, built from its Go module by
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
import { CreateBucketCommand, HeadBucketCommand, S3Client } from "@aws-sdk/client-s3";

export interface MinioServer {
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Stops the server for good and removes its data. */
  stop(): Promise<void>;
  /** An outage: kills the server (SIGKILL), keeping its data, until `restart()`. Connections are refused. */
  kill(): Promise<void>;
  /** Starts a killed server again on the same address, with the same data and credentials; resolves once it answers S3 requests. */
  restart(): Promise<void>;
  /** A frozen store: SIGSTOP, so connections are still accepted (by the kernel) but never answered, until `thaw()`. */
  freeze(): void;
  thaw(): void;
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

  const env = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: dataDir,
    MINIO_ROOT_USER: accessKeyId,
    MINIO_ROOT_PASSWORD: secretAccessKey,
    MINIO_BROWSER: "off",
    MINIO_UPDATE: "off",
    MINIO_CALLHOME_ENABLE: "off",
    MINIO_REGION: region,
  };
  const s3 = () => new S3Client({ endpoint, region, forcePathStyle: true, credentials: { accessKeyId, secretAccessKey } });

  /** One MinIO process; `start` launches it and waits until it is live. */
  function launch(deadline: number) {
    const child: ChildProcess = spawn(binary, [
      "server", dataDir, "--address", `127.0.0.1:${port}`, "--console-address", `127.0.0.1:${consolePort}`, "--quiet",
    ], { env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    const keep = (chunk: Buffer) => { output = (output + chunk.toString()).slice(-4000); };
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
    const state: { exited?: { code: number | null; signal: NodeJS.Signals | null } } = {};
    const exitPromise = new Promise<void>((resolve) => {
      child.on("exit", (code, signal) => { state.exited = { code, signal }; resolve(); });
    });
    const spawnError = new Promise<Error>((resolve) => child.on("error", resolve));
    // Last resort: MinIO must not outlive the test process when stop() was never called.
    const killOnExit = () => { if (!state.exited) child.kill("SIGKILL"); };
    process.on("exit", killOnExit);
    void exitPromise.then(() => process.off("exit", killOnExit));

    async function live(): Promise<void> {
      for (;;) {
        const failure = await Promise.race([spawnError, sleep(0).then(() => undefined)]);
        if (failure) throw new Error(`could not start ${binary}: ${failure.message}`);
        if (state.exited) throw new Error(`MinIO exited (${state.exited.code ?? state.exited.signal}) before it was ready:\n${output}`);
        try {
          const res = await fetch(`${endpoint}/minio/health/live`, { signal: AbortSignal.timeout(1000) });
          if (res.ok) return;
        } catch {
          // not listening yet
        }
        if (Date.now() > deadline) throw new Error(`MinIO did not become ready on ${endpoint}:\n${output}`);
        await sleep(100);
      }
    }

    async function kill(signal: NodeJS.Signals): Promise<void> {
      if (state.exited) return;
      child.kill("SIGCONT"); // a frozen process cannot handle SIGTERM
      child.kill(signal);
      const killed = await Promise.race([exitPromise.then(() => true), sleep(5000).then(() => false)]);
      if (!killed) {
        child.kill("SIGKILL");
        await exitPromise;
      }
    }
    return { child, live, kill, output: () => output };
  }

  let current = launch(Date.now() + (options.startTimeoutMs ?? 30_000));

  async function stop(): Promise<void> {
    await current.kill("SIGTERM");
    await rm(dataDir, { recursive: true, force: true });
  }

  /** Retries `op` (a request MinIO may refuse while it starts) until it succeeds or the deadline passes. */
  async function retryUntil(what: string, deadline: number, op: (client: S3Client) => Promise<unknown>): Promise<void> {
    const client = s3();
    try {
      for (;;) {
        try {
          await op(client);
          return;
        } catch (err) {
          if (Date.now() > deadline) throw new Error(`MinIO on ${endpoint} did not ${what}: ${String(err)}\n${current.output()}`, { cause: err });
          await sleep(200);
        }
      }
    } finally {
      client.destroy();
    }
  }

  try {
    const deadline = Date.now() + (options.startTimeoutMs ?? 30_000);
    await current.live();
    // Live is not always ready for writes: retry creating the bucket until the deadline.
    await retryUntil(`create bucket ${bucket}`, deadline, (client) => client.send(new CreateBucketCommand({ Bucket: bucket })));
  } catch (err) {
    await stop();
    throw err;
  }

  return {
    endpoint, bucket, region, accessKeyId, secretAccessKey, stop,
    kill: () => current.kill("SIGKILL"),
    async restart() {
      await current.kill("SIGKILL");
      const deadline = Date.now() + (options.startTimeoutMs ?? 30_000);
      current = launch(deadline);
      await current.live();
      await retryUntil(`serve bucket ${bucket} again`, deadline, (client) => client.send(new HeadBucketCommand({ Bucket: bucket })));
    },
    freeze: () => { current.child.kill("SIGSTOP"); },
    thaw: () => { current.child.kill("SIGCONT"); },
  };
}
