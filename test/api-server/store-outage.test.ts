/**
 * Object store outages through the API, against a real MinIO (docs/api.md#errors: 503 `unavailable`).
 * MinIO is killed for about ten seconds, then frozen (SIGSTOP: connections are accepted but
 * never answered): meanwhile file listings, uploads, download URLs and key lookups answer
 * 503 with Retry-After and no internals, within a bound instead of hanging; once MinIO is
 * back, the same requests succeed and everything stored before the outage is still there.
 * The store runs with its production deadlines (no test overrides).
 */
import t, { type Test } from "tap";
import { createHash } from "node:crypto";
import type { LightMyRequestResponse } from "fastify";
import { createS3ObjectStore } from "../../adapters/s3/object-store.js";
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from "../../api-server/app.js";
import { startMinio } from "../support/minio.js";
import { multipartBody, testApp } from "../support/app.js";
import { sleep } from "../support/wait.js";

const minio = await startMinio();
t.teardown(() => minio.stop());
const store = createS3ObjectStore({
  endpoint: minio.endpoint, bucket: minio.bucket, region: minio.region, forcePathStyle: true,
  credentials: { accessKeyId: minio.accessKeyId, secretAccessKey: minio.secretAccessKey },
});
const a = await testApp({ store, engine: {} });
t.teardown(() => a.close());
await a.service.createWorkspace("acme", "ws1");
const h = { authorization: `Bearer ${await a.key("acme", ["files"], ["ws1"])}` };
const ht = { authorization: `Bearer ${await a.key("acme", ["tools"], ["ws1"])}` };
const submission = { workspace_id: "ws1", spec: { steps: [{ stepId: "s", toolName: "samtools", parameters: { command: "flagstat", inputFile: "reads/before-0.fastq" } }] } };
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

/** Longest an answer may take while the store is down or frozen; beyond it the request hangs. */
const BOUND_MS = 90_000;

/** `inject`, failing (instead of waiting forever) when no answer comes within BOUND_MS. */
async function bounded(what: string, request: () => Promise<LightMyRequestResponse>): Promise<LightMyRequestResponse> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: no answer within ${BOUND_MS / 1000} s`)), BOUND_MS); });
  try {
    return await Promise.race([request(), hung]);
  } finally {
    clearTimeout(timer);
  }
}

const upload = (name: string, content: string, headers = h) => {
  const mp = multipartBody([["workspace_id", "ws1"], ["path", "reads"]], { name: "file", filename: name, content });
  return a.app.inject({ method: "POST", url: "/v1/files/upload", headers: { ...headers, ...mp.headers }, payload: mp.payload });
};

/** The requests of an outage: list, upload, download URL, and a key never seen before (a store lookup). */
function outageRequests(round: number, freshKey: Record<string, string>): Array<[string, () => Promise<LightMyRequestResponse>]> {
  return [
    ["file list", () => a.app.inject({ method: "GET", url: "/v1/files?workspace_id=ws1", headers: h })],
    ["upload", () => upload(`during-${round}.fastq`, `@r${round}\nACGT\n+\nIIII\n`)],
    ["download URL", () => a.app.inject({ method: "GET", url: "/v1/files/download?workspace_id=ws1&key=reads/before-0.fastq", headers: h })],
    ["an uncached key", () => a.app.inject({ method: "GET", url: "/v1/workspaces", headers: freshKey })],
    ["a pipeline submission", () => a.app.inject({ method: "POST", url: "/v1/pipelines", headers: ht, payload: submission })],
  ];
}

function expectUnavailable(t: Test, res: LightMyRequestResponse, label: string): void {
  t.equal(res.statusCode, 503, `${label}: 503`);
  const body = res.json() as Record<string, unknown>;
  t.equal(body.error, "unavailable", `${label}: error unavailable`);
  t.equal(res.headers["retry-after"], String(UNAVAILABLE_RETRY_AFTER_SECONDS), `${label}: Retry-After`);
  t.equal(body.request_id, res.headers["x-request-id"], `${label}: request_id`);
  t.notMatch(String(body.message), /127\.0\.0\.1|ECONN|Timeout|\bat\s|minio|S3|_system|orgs\//i, `${label}: no internals in the message`);
}

/** Everything uploaded before, intact: listed with its checksum, and its presigned URL serves the same bytes. */
async function expectIntact(t: Test, files: Map<string, string>): Promise<void> {
  const list = await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=ws1&prefix=reads/", headers: h });
  t.equal(list.statusCode, 200, "file list works again");
  const listed = new Map((list.json().data as Array<{ key: string; sha256: string }>).map((f) => [f.key, f.sha256]));
  for (const [key, content] of files) {
    t.equal(listed.get(key), sha(content), `${key} still listed with its sha256`);
    const dl = await a.app.inject({ method: "GET", url: `/v1/files/download?workspace_id=ws1&key=${key}`, headers: h });
    t.equal(dl.statusCode, 200, `${key}: download URL`);
    t.equal(await (await fetch(dl.json().data.downloadUrl as string)).text(), content, `${key}: same bytes`);
  }
}

const before = new Map<string, string>();
for (let i = 0; i < 3; i++) {
  const content = `@before${i}\n${"ACGT".repeat(100 + i)}\n+\n${"I".repeat(400 + 4 * i)}\n`;
  const res = await upload(`before-${i}.fastq`, content);
  if (res.statusCode !== 201) throw new Error(`setup upload failed: ${res.body}`);
  before.set(`reads/before-${i}.fastq`, content);
}
// The key and the workspace are cached now: during the outage the requests reach the store itself.
t.equal((await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=ws1", headers: h })).statusCode, 200, "works before the outage");

t.test("MinIO killed for ~10 s: 503 unavailable with Retry-After; afterwards everything works and nothing is lost", async (t) => {
  const freshKey = { "x-api-key": await a.key("acme", ["files"], ["ws1"]) };
  await minio.kill();
  const killedAt = Date.now();
  let round = 0;
  // Keep asking for the whole outage, not only right after the kill.
  while (round === 0 || Date.now() - killedAt < 10_000) {
    const answers = await Promise.all(outageRequests(round, freshKey).map(async ([what, request]) => [what, await bounded(what, request)] as const));
    for (const [what, res] of answers) expectUnavailable(t, res, `round ${round}: ${what}`);
    round++;
    await sleep(1000);
  }
  await minio.restart();

  await expectIntact(t, before);
  const fresh = await a.app.inject({ method: "GET", url: "/v1/workspaces", headers: freshKey });
  t.equal(fresh.statusCode, 200, "the key looked up during the outage works (the failure was not cached as unknown)");
  const after = `@after\n${"GATTACA".repeat(10)}\n`;
  t.equal((await upload("after-kill.fastq", after)).statusCode, 201, "uploads work again");
  before.set("reads/after-kill.fastq", after);
  const listed = (await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=ws1&prefix=reads/", headers: h })).json().data as Array<{ key: string }>;
  t.notOk(listed.some((f) => f.key.startsWith("reads/during-")), "no upload refused during the outage appears");
  const runs = await a.app.inject({ method: "GET", url: "/v1/pipelines?workspace_id=ws1", headers: ht });
  t.strictSame(runs.json().data, [], "no run was created by a submission refused during the outage");
});

t.test("MinIO frozen (accepts connections, never answers): 503 within a bound, not a hang", async (t) => {
  const freshKey = { "x-api-key": await a.key("acme", ["files"], ["ws1"]) };
  minio.freeze();
  try {
    const answers = await Promise.all(outageRequests(100, freshKey).map(async ([what, request]) => [what, await bounded(what, request)] as const));
    for (const [what, res] of answers) expectUnavailable(t, res, `frozen: ${what}`);
  } finally {
    minio.thaw();
  }
  await expectIntact(t, before);
  t.equal((await a.app.inject({ method: "GET", url: "/v1/workspaces", headers: freshKey })).statusCode, 200, "the key looked up while frozen works");
  t.equal((await upload("after-freeze.fastq", "@x\nA\n+\nI\n")).statusCode, 201, "uploads work again");
});
