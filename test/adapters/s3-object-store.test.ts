// The S3 ObjectStore adapter against a real MinIO (signatures checked): the shared contract,
// plus what is specific to S3 (signing, multipart copies, leftovers of failed uploads).
import t, { type Test } from "tap";
import { randomBytes, randomUUID } from "node:crypto";
import { createServer } from "node:net";
import type { Socket } from "node:net";
import { createServer as createHttpServer } from "node:http";
import type { IncomingMessage, ServerResponse } from "node:http";
import {
  CreateBucketCommand, HeadObjectCommand, ListMultipartUploadsCommand, ListObjectsV2Command, PutObjectCommand, S3Client,
} from "@aws-sdk/client-s3";
import { S3_DEFAULT_MAX_ATTEMPTS, createS3ObjectStore } from "../../adapters/s3/object-store.js";
import type { S3ObjectStoreConfig } from "../../adapters/s3/object-store.js";
import { startMinio } from "../support/minio.js";
import { chunked, expectStoreError, objectStoreContract, readAll, sha256Hex } from "../support/object-store-contract.js";
import type { ObjectStore } from "../../core/ports.js";

const MiB = 1024 * 1024;
const minio = await startMinio();
t.teardown(() => minio.stop());

const credentials = { accessKeyId: minio.accessKeyId, secretAccessKey: minio.secretAccessKey };
const admin = new S3Client({ endpoint: minio.endpoint, region: minio.region, forcePathStyle: true, credentials });
t.teardown(() => admin.destroy());

let buckets = 0;
async function freshBucket(): Promise<string> {
  const bucket = `t${++buckets}-${randomUUID().slice(0, 8)}`;
  await admin.send(new CreateBucketCommand({ Bucket: bucket }));
  return bucket;
}

function storeFor(bucket: string, extra: Partial<S3ObjectStoreConfig> = {}) {
  return createS3ObjectStore({
    endpoint: minio.endpoint, bucket, region: minio.region, forcePathStyle: true, credentials, ...extra,
  });
}

async function leftovers(bucket: string): Promise<{ uploads: string[]; temps: string[] }> {
  const mpu = await admin.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
  const temps = await admin.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: "_system/tmp/" }));
  return {
    uploads: (mpu.Uploads ?? []).map((u) => u.Key ?? ""),
    temps: (temps.Contents ?? []).map((o) => o.Key ?? ""),
  };
}

// Each contract case gets its own bucket: a fresh, empty store.
await objectStoreContract(t, "S3 adapter on MinIO: ObjectStore contract", async () => ({
  store: storeFor(await freshBucket()),
  cleanup: async () => undefined,
}));

t.test("MinIO checks signatures: a request signed with a wrong secret key is refused", async (t) => {
  const bucket = await freshBucket();
  await storeFor(bucket).put("k", "value");
  const wrong = { accessKeyId: minio.accessKeyId, secretAccessKey: `${minio.secretAccessKey}x` };
  const forger = new S3Client({ endpoint: minio.endpoint, region: minio.region, forcePathStyle: true, credentials: wrong });
  t.teardown(() => forger.destroy());
  await t.rejects(forger.send(new ListObjectsV2Command({ Bucket: bucket })),
    { name: "SignatureDoesNotMatch", $metadata: { httpStatusCode: 403 } }, "list refused");
  await t.rejects(forger.send(new PutObjectCommand({ Bucket: bucket, Key: "forged", Body: "x" })),
    { name: "SignatureDoesNotMatch" }, "put refused");
  const badStore = storeFor(bucket, { credentials: wrong });
  await expectStoreError(t, badStore.ping(), "Unavailable", "ping with a wrong secret");
  await t.rejects(badStore.get("k"), { name: "SignatureDoesNotMatch", $metadata: { httpStatusCode: 403 } },
    "get with a wrong secret: refused (not NotFound)");
  t.equal(await storeFor(bucket).head("forged"), undefined, "nothing was written");
  const url = await badStore.presignGet("k", { expiresIn: 60 });
  const res = await fetch(url);
  t.equal(res.status, 403, "a URL presigned with a wrong secret is refused");
  await res.arrayBuffer();
});

t.test("presigned URLs point straight at the S3 endpoint", async (t) => {
  const store = storeFor(await freshBucket());
  t.ok((await store.presignGet("a/b", { expiresIn: 60 })).startsWith(`${minio.endpoint}/`), "GET");
  t.ok((await store.presignPut("a/b", { expiresIn: 60 })).startsWith(`${minio.endpoint}/`), "PUT");
});

t.test("objects over the copy threshold are copied part by part (UploadPartCopy)", async (t) => {
  const bucket = await freshBucket();
  const store = storeFor(bucket, { multipartCopyThreshold: 5 * MiB, copyPartSize: 5 * MiB });
  const data = randomBytes(12 * MiB + 123);
  const put = await store.put("big/obj", chunked(data), { contentType: "application/x-test", metadata: { description: "big" } });
  t.equal(put.sha256, sha256Hex(data), "sha256");
  const head = await store.head("big/obj");
  t.equal(head?.size, data.byteLength, "size");
  t.equal(head?.sha256, sha256Hex(data), "sha256 metadata");
  t.equal(head?.contentType, "application/x-test", "contentType");
  t.same(head?.metadata, { description: "big" }, "metadata");
  t.match(head?.etag ?? "", /-3"?$/, "a 3-part multipart etag");
  t.ok(data.equals(await readAll((await store.get("big/obj")).body)), "the same bytes");
  const described = await store.describe("big/obj", { sha256: sha256Hex(data), metadata: { description: "described" } });
  t.equal(described.size, data.byteLength, "describe over the threshold");
  t.ok(data.equals(await readAll((await store.get("big/obj")).body)), "content intact after describe");
  t.same((await store.head("big/obj"))?.metadata, { description: "described" }, "metadata replaced");
  t.same(await leftovers(bucket), { uploads: [], temps: [] }, "no uploads or temporary objects left");
});

t.test("failed uploads leave no multipart upload and no temporary object", async (t) => {
  const bucket = await freshBucket();
  const store = storeFor(bucket);
  const data = randomBytes(20 * MiB);
  await expectStoreError(t, store.put("x/too-large", chunked(data), { maxBytes: 10 * MiB }), "TooLarge", "maxBytes");
  await t.rejects(store.put("x/failing", chunked(data, 64 * 1024, 17 * MiB)), /failed midway/, "failing stream");
  await store.put("x/exists", "x");
  await expectStoreError(t, store.put("x/exists", chunked(data), { ifNoneMatch: "*" }), "PreconditionFailed", "ifNoneMatch");
  t.same(await leftovers(bucket), { uploads: [], temps: [] }, "nothing left behind");
});

t.test("metadata on the wire: sha256 as x-amz-meta-sha256, non-ASCII values RFC 2047 encoded", async (t) => {
  const bucket = await freshBucket();
  const store = storeFor(bucket);
  await store.put("m/x", "x", { metadata: { Description: "naïve" } });
  const raw = await admin.send(new HeadObjectCommand({ Bucket: bucket, Key: "m/x" }));
  t.equal(raw.Metadata?.sha256, sha256Hex("x"), "x-amz-meta-sha256 holds the hex digest");
  t.equal(raw.Metadata?.description, `=?UTF-8?B?${Buffer.from("naïve").toString("base64")}?=`, "encoded value, lower-case key");
  t.same((await store.head("m/x"))?.metadata, { description: "naïve" }, "decoded on read");
});

t.test("an unreachable store is Unavailable", async (t) => {
  const port = await new Promise<number>((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 1));
    });
  });
  const store = createS3ObjectStore({
    endpoint: `http://127.0.0.1:${port}`, bucket: "nope", region: minio.region, forcePathStyle: true, credentials,
  });
  await expectStoreError(t, store.ping(), "Unavailable", "ping");
  await expectStoreError(t, store.get("k"), "Unavailable", "get");
});

/** A stand-in S3 endpoint on loopback: `http` answers every request, `tcp` gets every raw connection. */
async function fakeEndpoint(t: Test, kind: { http: (req: IncomingMessage, res: ServerResponse) => void } | { tcp: (socket: Socket) => void }) {
  const sockets = new Set<Socket>();
  const server = "http" in kind ? createHttpServer(kind.http) : createServer(kind.tcp);
  server.on("connection", (socket: Socket) => { sockets.add(socket); socket.on("close", () => sockets.delete(socket)); });
  const port = await new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => {
    const address = server.address();
    resolve(typeof address === "object" && address ? address.port : 1);
  }));
  t.teardown(() => new Promise<void>((resolve) => {
    for (const socket of sockets) socket.destroy();
    server.close(() => resolve());
  }));
  return `http://127.0.0.1:${port}`;
}

/** Every operation that reaches the store, each expected to fail with `code` within a bound (not hang). */
async function expectEveryOperation(t: Test, store: ObjectStore, code: "Unavailable", label: string): Promise<void> {
  const ops: Array<[string, () => Promise<unknown>]> = [
    ["head", () => store.head("a/x")],
    ["get", () => store.get("a/x")],
    ["list", () => store.list("a/", { limit: 10 })],
    ["put (bytes)", () => store.put("a/x", "hello")],
    ["put (stream)", () => store.put("a/y", chunked(Buffer.from("hello stream")))],
    ["delete", () => store.delete("a/x")],
    ["describe", () => store.describe("a/x", { sha256: sha256Hex("hello") })],
    ["ping", () => store.ping()],
  ];
  // All at once, each against the same bound: a hanging store fails this in one bound, not eight.
  await Promise.all(ops.map(async ([name, op]) => {
    let timer: NodeJS.Timeout | undefined;
    const hung = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`${name} did not answer within 60 s`)), 60_000); });
    try {
      await expectStoreError(t, Promise.race([op(), hung]), code, `${label}: ${name}`);
    } finally {
      clearTimeout(timer);
    }
  }));
}

t.test("outages are Unavailable: 503 SlowDown and 500 answers, reset connections; 501 is not an outage", async (t) => {
  const slowDown = '<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>';
  let gets = 0;
  const busy = await fakeEndpoint(t, { http: (req, res) => {
    if (req.method === "GET" && req.url?.includes("x-id=GetObject")) gets++;
    req.resume();
    res.writeHead(503, { "content-type": "application/xml" }).end(req.method === "HEAD" ? undefined : slowDown);
  } });
  const store = createS3ObjectStore({ endpoint: busy, bucket: "b", region: minio.region, forcePathStyle: true, credentials });
  await expectEveryOperation(t, store, "Unavailable", "503 SlowDown");
  gets = 0;
  await expectStoreError(t, store.get("a/x"), "Unavailable", "one more get");
  t.ok(gets >= 1 && gets <= S3_DEFAULT_MAX_ATTEMPTS, `a bounded number of attempts (${gets} ≤ ${S3_DEFAULT_MAX_ATTEMPTS})`);

  const failing = await fakeEndpoint(t, { http: (req, res) => {
    req.resume();
    res.writeHead(500, { "content-type": "application/xml" }).end(req.method === "HEAD" ? undefined : "<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>");
  } });
  await expectStoreError(t, createS3ObjectStore({ endpoint: failing, bucket: "b", region: minio.region, forcePathStyle: true, credentials }).get("a/x"),
    "Unavailable", "500 InternalError");

  const resetting = await fakeEndpoint(t, { tcp: (socket) => { socket.once("data", () => socket.resetAndDestroy()); } });
  await expectEveryOperation(t, createS3ObjectStore({ endpoint: resetting, bucket: "b", region: minio.region, forcePathStyle: true, credentials }),
    "Unavailable", "connection reset");

  const unimplemented = await fakeEndpoint(t, { http: (req, res) => {
    req.resume();
    res.writeHead(501, { "content-type": "application/xml" }).end("<Error><Code>NotImplemented</Code><Message>A header you provided implies functionality that is not implemented</Message></Error>");
  } });
  const err = await createS3ObjectStore({ endpoint: unimplemented, bucket: "b", region: minio.region, forcePathStyle: true, credentials })
    .get("a/x").then(() => undefined, (e: unknown) => e);
  t.ok(err, "501 fails");
  t.not((err as { code?: string }).code, "Unavailable", "501 NotImplemented is not an outage: no retry mends it");
});

t.test("a frozen store (connections accepted, never answered) fails with Unavailable instead of hanging", async (t) => {
  const frozen = await fakeEndpoint(t, { tcp: (socket) => { socket.resume(); } });
  const store = createS3ObjectStore({
    endpoint: frozen, bucket: "b", region: minio.region, forcePathStyle: true, credentials, requestTimeoutMs: 300, maxAttempts: 1,
  });
  await expectEveryOperation(t, store, "Unavailable", "frozen");
});
