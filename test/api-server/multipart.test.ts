/**
 * Multipart uploads (docs/api.md#files-over-5-gib) over real HTTP, on the local store (parts
 * served by the api-server) and on a real MinIO (parts PUT straight to S3, signatures checked
 * by it): parts in any order and in parallel, resumed from the parts received, every refusal
 * of confirm leaving nothing visible, abort, the 7-day sweep, the checksum computed after
 * confirm and required before a run, and one real upload over 5 GiB checked byte for byte.
 */
import t from "tap";
import { createHash, randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdtemp, open, rm, truncate } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { createS3ObjectStore } from "../../adapters/s3/object-store.js";
import { sweepMultipartUploads } from "../../services/uploads.js";
import { freePorts, startMinio } from "../support/minio.js";
import { testApp, type TestApp } from "../support/app.js";
import { until } from "../support/wait.js";

const MiB = 1024 * 1024;
const minio = await startMinio();
t.teardown(() => minio.stop());
const s3 = () => createS3ObjectStore({
  endpoint: minio.endpoint, bucket: minio.bucket, region: minio.region, forcePathStyle: true,
  credentials: { accessKeyId: minio.accessKeyId, secretAccessKey: minio.secretAccessKey },
});
const scratch = await mkdtemp(join(tmpdir(), "operon-multipart-"));
t.teardown(() => rm(scratch, { recursive: true, force: true }));

interface Server { a: TestApp; org: string; base: string; h: Record<string, string>; api(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; json: Json }> }
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API answers of many shapes, checked by t.match
type Json = any;

let servers = 0;
/**
 * A real listening api-server over `kind`'s store, with workspaces ws1 (of organization
 * `org`) and ws9 (of another); each server's organizations are new (the S3 bucket is shared).
 */
async function serve(kind: "local" | "s3", engine = false): Promise<Server> {
  const org = `acme${++servers}`;
  const other = `other${servers}`;
  const [port] = await freePorts(1);
  const base = `http://127.0.0.1:${port}`;
  const a = await testApp({ publicUrl: base, ...(kind === "s3" ? { store: s3() } : {}), ...(engine ? { engine: {} } : {}) });
  await a.app.listen({ port: port as number, host: "127.0.0.1" });
  await a.service.createWorkspace(org, "ws1");
  await a.service.createWorkspace(other, "ws9");
  const h = { authorization: `Bearer ${await a.key(org, ["files", "tools"], ["ws1"])}` };
  const api = async (method: string, path: string, body?: unknown, headers: Record<string, string> = h) => {
    const res = await fetch(base + path, { method, headers: { ...headers, ...(body !== undefined ? { "content-type": "application/json" } : {}) }, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : undefined };
  };
  return { a, org, base, h, api };
}

const md5 = (b: Buffer) => createHash("md5").update(b).digest();
const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/** PUTs one part's bytes to its URL with its Content-MD5; the answer's ETag (unquoted). */
async function putPart(url: string, bytes: Buffer, contentMd5 = md5(bytes).toString("base64")): Promise<{ status: number; etag: string }> {
  const res = await fetch(url, { method: "PUT", body: new Uint8Array(bytes), headers: { "content-md5": contentMd5 } });
  await res.arrayBuffer();
  return { status: res.status, etag: (res.headers.get("etag") ?? "").replace(/"/g, "") };
}

async function listed(s: Server, key: string) {
  const r = await s.api("GET", `/v1/files?workspace_id=ws1&prefix=${encodeURIComponent(key)}`);
  return (r.json.data as Array<{ key: string; size: number; sha256: string | null }>).find((f) => f.key === key);
}

async function fetchAll(s: Server, key: string): Promise<Buffer> {
  const dl = await s.api("GET", `/v1/files/download?workspace_id=ws1&key=${encodeURIComponent(key)}`);
  return Buffer.from(await (await fetch(new URL(dl.json.data.downloadUrl, s.base))).arrayBuffer());
}

/** 2 full 5 MiB parts and a short last one. */
const body = randomBytes(12 * MiB + 12345);
const slice = (n: number, partSize: number) => body.subarray((n - 1) * partSize, Math.min(n * partSize, body.length));

for (const kind of ["local", "s3"] as const) {
  t.test(`${kind}: parts out of order and in parallel, confirmed in one call, the checksum computed afterwards`, async (t) => {
    const s = await serve(kind);
    t.teardown(() => s.a.close());
    const up = await s.api("POST", "/v1/files/upload-url", { workspace_id: "ws1", filename: "reads.fastq.gz", path: "raw", size: body.length, multipart: true, part_size: 5 * MiB, content_type: "application/gzip", description: "run 7, lane 2" });
    t.equal(up.status, 200, JSON.stringify(up.json));
    const d = up.json.data;
    t.match(d, { fileKey: "raw/reads.fastq.gz", partSize: 5 * MiB, partCount: 3, expiresIn: Number });
    t.match(d.uploadId, /^mpu-/);
    t.same(d.parts.map((p: { partNumber: number }) => p.partNumber), [1, 2, 3]);
    if (kind === "s3") t.ok(d.parts[0].uploadUrl.startsWith(minio.endpoint), "part URLs point at the S3 server");
    const etags = await Promise.all([3, 1, 2].map(async (n) => ({ n, ...(await putPart(d.parts[n - 1].uploadUrl, slice(n, d.partSize))) })));
    for (const e of etags) {
      t.equal(e.status, 200, `part ${e.n} stored`);
      t.equal(e.etag, md5(slice(e.n, d.partSize)).toString("hex"), `part ${e.n}'s ETag is its MD5`);
    }
    t.equal(await listed(s, "raw/reads.fastq.gz"), undefined, "parts are not a file");
    const all = await s.api("GET", "/v1/files?workspace_id=ws1");
    t.same(all.json.data, [], "nothing of the upload is listed before confirm");
    const ok = await s.api("POST", "/v1/files/upload-confirm", { workspace_id: "ws1", file_key: d.fileKey, filename: "reads.fastq.gz", size: body.length, upload_id: d.uploadId, parts: etags.map((e) => ({ part_number: e.n, etag: `"${e.etag}"` })) });
    t.equal(ok.status, 200, JSON.stringify(ok.json));
    t.match(ok.json.data, { key: "raw/reads.fastq.gz", size: body.length, content_type: "application/gzip", description: "run 7, lane 2" });
    const f = await until("the file's sha256", async () => (await listed(s, "raw/reads.fastq.gz"))?.sha256 ?? undefined);
    t.equal(f, sha256(body), "the server computed the whole file's SHA-256");
    t.equal(sha256(await fetchAll(s, "raw/reads.fastq.gz")), sha256(body), "the file is the parts, in part order");
    const again = await s.api("POST", "/v1/files/upload-confirm", { workspace_id: "ws1", file_key: d.fileKey, size: body.length, upload_id: d.uploadId, parts: etags.map((e) => ({ part_number: e.n, etag: e.etag })) });
    t.equal(again.status, 404, "a confirmed upload is gone");
    const late = await putPart(d.parts[0].uploadUrl, slice(1, d.partSize));
    t.not(late.status, 200, "a part URL writes nothing once its upload is confirmed");
    t.equal(sha256(await fetchAll(s, "raw/reads.fastq.gz")), sha256(body), "the file is unchanged");
  });

  t.test(`${kind}: interrupted after half its parts, resumed from the parts received`, async (t) => {
    const s = await serve(kind);
    t.teardown(() => s.a.close());
    const up = await s.api("POST", "/v1/files/upload-url", { workspace_id: "ws1", filename: "r.bin", size: body.length, multipart: true, part_size: 5 * MiB });
    const d = up.json.data;
    t.equal((await putPart(d.parts[1].uploadUrl, slice(2, d.partSize))).status, 200);
    const wrong = await putPart(d.parts[0].uploadUrl, slice(1, d.partSize), md5(Buffer.from("not the part")).toString("base64"));
    t.equal(wrong.status, 400, "a part whose Content-MD5 does not match its bytes is refused");
    // A new client knows only the upload id: it asks what arrived.
    const got = await s.api("GET", `/v1/files/upload-parts?workspace_id=ws1&upload_id=${d.uploadId}`);
    t.equal(got.status, 200, JSON.stringify(got.json));
    t.match(got.json.data, { uploadId: d.uploadId, fileKey: "r.bin", size: body.length, partSize: 5 * MiB, partCount: 3 });
    t.same(got.json.data.parts, [{ partNumber: 2, size: 5 * MiB, etag: md5(slice(2, d.partSize)).toString("hex") }], "only the part that arrived whole");
    const fresh = await s.api("POST", "/v1/files/upload-parts", { workspace_id: "ws1", upload_id: d.uploadId, part_numbers: [1, 3] });
    t.equal(fresh.status, 200, JSON.stringify(fresh.json));
    const sent = await Promise.all(fresh.json.data.parts.map(async (p: { partNumber: number; uploadUrl: string }) => ({ n: p.partNumber, ...(await putPart(p.uploadUrl, slice(p.partNumber, d.partSize))) })));
    const parts = [...sent.map((e) => ({ part_number: e.n, etag: e.etag })), { part_number: 2, etag: got.json.data.parts[0].etag }];
    const ok = await s.api("POST", "/v1/files/upload-confirm", { workspace_id: "ws1", file_key: "r.bin", size: body.length, upload_id: d.uploadId, parts });
    t.equal(ok.status, 200, JSON.stringify(ok.json));
    t.equal(sha256(await fetchAll(s, "r.bin")), sha256(body));
    const outOfRange = await s.api("POST", "/v1/files/upload-parts", { workspace_id: "ws1", upload_id: d.uploadId, part_numbers: [1] });
    t.equal(outOfRange.status, 404, "no URLs for a confirmed upload");
  });

  t.test(`${kind}: confirm refuses a missing part, a wrong etag, a wrong size, another organization's upload and a key without files scope; nothing is listed`, async (t) => {
    const s = await serve(kind);
    t.teardown(() => s.a.close());
    const up = await s.api("POST", "/v1/files/upload-url", { workspace_id: "ws1", filename: "c.bin", size: body.length, multipart: true, part_size: 5 * MiB });
    const d = up.json.data;
    const e1 = (await putPart(d.parts[0].uploadUrl, slice(1, d.partSize))).etag;
    const e3 = (await putPart(d.parts[2].uploadUrl, slice(3, d.partSize))).etag;
    const e2 = md5(slice(2, d.partSize)).toString("hex");
    const confirm = (over: Record<string, unknown>, headers?: Record<string, string>) => s.api("POST", "/v1/files/upload-confirm", { workspace_id: "ws1", file_key: "c.bin", size: body.length, upload_id: d.uploadId, parts: [{ part_number: 1, etag: e1 }, { part_number: 2, etag: e2 }, { part_number: 3, etag: e3 }], ...over }, headers);
    const notReceived = await confirm({});
    t.equal(notReceived.status, 409);
    t.match(notReceived.json, { error: "conflict", message: /part 2 was not received/, details: { field: "parts", part_number: 2 } });
    t.equal((await putPart(d.parts[1].uploadUrl, slice(2, d.partSize))).status, 200);
    const unlisted = await confirm({ parts: [{ part_number: 1, etag: e1 }, { part_number: 3, etag: e3 }] });
    t.match([unlisted.status, unlisted.json.details], [409, { part_number: 2 }], "a part left out of the list");
    const wrongEtag = await confirm({ parts: [{ part_number: 1, etag: e1 }, { part_number: 2, etag: e2 }, { part_number: 3, etag: e1 }] });
    t.match([wrongEtag.status, wrongEtag.json.details], [409, { part_number: 3 }], "a wrong etag names the part");
    const wrongSize = await confirm({ size: body.length + 1 });
    t.match([wrongSize.status, wrongSize.json.details], [409, { field: "size" }]);
    const otherOrg = await s.a.key(s.org.replace("acme", "other"), ["files"], ["ws9"]);
    const foreign = await confirm({ workspace_id: "ws9" }, { authorization: `Bearer ${otherOrg}` });
    t.match([foreign.status, foreign.json.details], [404, { field: "upload_id" }], "another organization's upload id is not found");
    const foreignParts = await s.api("GET", `/v1/files/upload-parts?workspace_id=ws9&upload_id=${d.uploadId}`, undefined, { authorization: `Bearer ${otherOrg}` });
    t.equal(foreignParts.status, 404, "nor are its parts listed");
    const noScope = await s.a.key(s.org, ["tools"], ["ws1"]);
    const scoped = await confirm({}, { authorization: `Bearer ${noScope}` });
    t.equal(scoped.status, 403, "a key without the files scope");
    t.equal(await listed(s, "c.bin"), undefined, "nothing became visible");
    const ok = await confirm({});
    t.equal(ok.status, 200, "the upload was left intact by every refusal");
    t.equal(sha256(await fetchAll(s, "c.bin")), sha256(body));
  });

  t.test(`${kind}: abort discards the parts; the sweep aborts what was never confirmed after 7 days`, async (t) => {
    const s = await serve(kind);
    t.teardown(() => s.a.close());
    const begin = async (name: string) => (await s.api("POST", "/v1/files/upload-url", { workspace_id: "ws1", filename: name, size: body.length, multipart: true, part_size: 5 * MiB })).json.data;
    const d = await begin("a.bin");
    t.equal((await putPart(d.parts[0].uploadUrl, slice(1, d.partSize))).status, 200);
    const ab = await s.api("POST", "/v1/files/upload-abort", { workspace_id: "ws1", upload_id: d.uploadId });
    t.same([ab.status, ab.json.data], [200, { uploadId: d.uploadId, aborted: true }]);
    t.equal((await s.api("GET", `/v1/files/upload-parts?workspace_id=ws1&upload_id=${d.uploadId}`)).status, 404);
    t.not((await putPart(d.parts[1].uploadUrl, slice(2, d.partSize))).status, 200, "a part URL of an aborted upload stores nothing");
    t.equal((await s.api("POST", "/v1/files/upload-abort", { workspace_id: "ws1", upload_id: d.uploadId })).status, 404);

    const mp = s.a.store.multipart;
    if (!mp) throw new Error("the store has multipart uploads");
    // An upload the store holds without a record (a crash between the store's create and the record).
    const orphanKey = `orgs/${s.org}/workspaces/ws1/orphan.bin`;
    const orphan = await mp.create(orphanKey, { size: 10, partSize: 5 * MiB });
    const old = await begin("old.bin");
    t.equal((await putPart(old.parts[0].uploadUrl, slice(1, old.partSize))).status, 200);
    t.equal(await sweepMultipartUploads(s.a.store, s.a.clock.now()), 0, "a young upload is kept");
    s.a.clock.advance(6 * 24 * 3600_000);
    const young = await begin("young.bin");
    s.a.clock.advance(2 * 24 * 3600_000);
    const swept = await sweepMultipartUploads(s.a.store, s.a.clock.now() + (kind === "s3" ? 0 : 0));
    t.ok(swept >= 1, `the sweep aborted ${swept} upload(s)`);
    t.equal((await s.api("GET", `/v1/files/upload-parts?workspace_id=ws1&upload_id=${old.uploadId}`)).status, 404, "the 8-day-old upload is aborted");
    t.equal((await s.api("GET", `/v1/files/upload-parts?workspace_id=ws1&upload_id=${young.uploadId}`)).status, 200, "the 2-day-old one is kept");
    await t.rejects(mp.listParts(orphanKey, orphan), { code: "NotFound" }, "the old upload without a record is aborted too");
    t.equal((await s.api("GET", "/v1/files?workspace_id=ws1")).json.data.length, 0);
  });

  t.test(`${kind}: sizes and limits`, async (t) => {
    const s = await serve(kind);
    t.teardown(() => s.a.close());
    const noSize = await s.api("POST", "/v1/files/upload-url", { workspace_id: "ws1", filename: "x.bin", multipart: true });
    t.match([noSize.status, noSize.json.details], [400, { field: "size" }]);
    const big = await s.api("POST", "/v1/files/upload-url", { workspace_id: "ws1", filename: "x.bin", size: 5 * 1024 ** 4 + 1 });
    t.match([big.status, big.json.details], [413, { field: "size" }], "over 5 TiB");
    const other = await s.api("POST", "/v1/files/upload-url", { workspace_id: "ws9", filename: "x.bin", size: 5 * 1024 ** 4 + 1 });
    t.equal(other.status, 403, "403 before 413: another workspace is refused first");
    const tiny = await s.api("POST", "/v1/files/upload-url", { workspace_id: "ws1", filename: "x.bin", size: 100 * MiB, multipart: true, part_size: MiB });
    t.match([tiny.status, tiny.json.details], [400, { field: "part_size" }]);
    const huge = await s.api("POST", "/v1/files/upload-url", { workspace_id: "ws1", filename: "genome.bam", size: 4 * 1024 ** 4 });
    t.equal(huge.status, 200, "4 TiB by parts");
    t.equal(huge.json.data.partCount <= 10_000, true, `${huge.json.data.partCount} parts of ${huge.json.data.partSize}`);
    t.equal(huge.json.data.parts.length, 1000, "URLs for the first 1,000 parts");
    await s.api("POST", "/v1/files/upload-abort", { workspace_id: "ws1", upload_id: huge.json.data.uploadId });
    const path = await s.api("POST", "/v1/files/upload-url", { workspace_id: "ws1", filename: "x.bin", path: "../ws2", size: 6 * 1024 ** 3 });
    t.match([path.status, path.json.details], [400, { field: "path" }]);
  });
}

t.test("local: a run refuses an input whose checksum is still being computed, and takes it once known", async (t) => {
  const s = await serve("local", true);
  t.teardown(() => s.a.close());
  const mp = s.a.store.multipart;
  if (!mp) throw new Error("the local store has multipart uploads");
  // A file completed by parts whose checksum was not asked for yet: as between confirm and its hash.
  const key = `orgs/${s.org}/workspaces/ws1/in/reads.txt`;
  const text = Buffer.from("hello\n".repeat(1000));
  const id = await mp.create(key, { size: text.length, partSize: 5 * MiB });
  const part = await fetch((await mp.presignPart(key, id, 1, { expiresIn: 60, size: text.length })), { method: "PUT", body: new Uint8Array(text) });
  t.equal(part.status, 200);
  await mp.complete(key, id, [{ partNumber: 1, etag: md5(text).toString("hex") }]);
  const spec = { inputs: [{ name: "reads", type: "file" }], steps: [{ stepId: "gz", toolName: "tabix", parameters: { command: "bgzip", inputFile: "${reads}" } }] };
  const run = () => s.api("POST", "/v1/pipelines", { workspace_id: "ws1", spec, input: { reads: "in/reads.txt" } });
  const refused = await run();
  t.equal(refused.status, 409, JSON.stringify(refused.json));
  t.match(refused.json, { error: "conflict", message: /input "reads": the SHA-256 of in\/reads.txt is still being computed/ });
  const checksums = s.a.app.operon.checksums;
  if (!checksums) throw new Error("the files routes set up checksums");
  const info = await s.a.store.head(key);
  await checksums.request(s.org, info as NonNullable<typeof info>);
  await until("the checksum", async () => (await s.a.store.head(key))?.sha256);
  t.equal((await s.a.store.head(key))?.sha256, sha256(text));
  const ok = await run();
  t.ok(ok.status >= 200 && ok.status < 300, `accepted once the checksum is known: ${JSON.stringify(ok.json)}`);
});

/** A sparse file of `size` bytes with random bytes at a few places, so that a byte-for-byte comparison means something. */
async function sparseFile(path: string, size: number): Promise<void> {
  const f = await open(path, "w");
  try {
    for (const at of [0, 3 * 1024 ** 3 + 7, size - MiB]) await f.write(randomBytes(MiB), 0, MiB, at);
  } finally { await f.close(); }
  await truncate(path, size);
}

async function hashFile(path: string): Promise<string> {
  const h = createHash("sha256");
  for await (const c of createReadStream(path, { highWaterMark: 4 * MiB })) h.update(c as Buffer);
  return h.digest("hex");
}

async function hashStream(url: string): Promise<string> {
  const res = await fetch(url);
  if (!res.body) throw new Error(`no body: ${res.status}`);
  const h = createHash("sha256");
  for await (const c of Readable.fromWeb(res.body as WebReadableStream<Uint8Array>)) h.update(c as Buffer);
  return h.digest("hex");
}

/** Sends the parts of `path` (`parallel` at once) from disk. */
async function sendParts(path: string, d: { partSize: number; partCount: number; parts: Array<{ partNumber: number; uploadUrl: string }> }, size: number, parallel = 4) {
  const out: Array<{ part_number: number; etag: string }> = [];
  let next = 0;
  const worker = async () => {
    while (next < d.parts.length) {
      const p = d.parts[next++] as { partNumber: number; uploadUrl: string };
      const start = (p.partNumber - 1) * d.partSize;
      const end = Math.min(start + d.partSize, size) - 1;
      const h = createHash("md5");
      for await (const c of createReadStream(path, { start, end, highWaterMark: 4 * MiB })) h.update(c as Buffer);
      const res = await fetch(p.uploadUrl, {
        method: "PUT", duplex: "half",
        body: Readable.toWeb(createReadStream(path, { start, end, highWaterMark: 4 * MiB })) as unknown as BodyInit,
        headers: { "content-md5": h.digest("base64"), "content-length": String(end - start + 1) },
      } as RequestInit);
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`part ${p.partNumber}: HTTP ${res.status}`);
      out.push({ part_number: p.partNumber, etag: res.headers.get("etag") ?? "" });
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  return out;
}

for (const kind of ["local", "s3"] as const) {
  t.test(`${kind}: a real upload over 5 GiB (a sparse file), checked byte for byte after download`, async (t) => {
    const s = await serve(kind);
    t.teardown(() => s.a.close());
    const size = 5 * 1024 ** 3 + 3 * MiB + 17;
    const file = join(scratch, `big-${kind}.bin`);
    await sparseFile(file, size);
    t.teardown(() => rm(file, { force: true }));
    const expected = await hashFile(file);
    const up = await s.api("POST", "/v1/files/upload-url", { workspace_id: "ws1", filename: "genome.bin", size, part_size: 256 * MiB });
    t.equal(up.status, 200, JSON.stringify(up.json));
    t.ok(up.json.data.uploadId, "over 5 GiB is a multipart upload without asking");
    const parts = await sendParts(file, up.json.data, size);
    const began = Date.now();
    const ok = await s.api("POST", "/v1/files/upload-confirm", { workspace_id: "ws1", file_key: "genome.bin", size, upload_id: up.json.data.uploadId, parts });
    t.equal(ok.status, 200, JSON.stringify(ok.json));
    t.ok(Date.now() - began < 30_000, `confirm took ${Date.now() - began} ms, not a copy of the bytes`);
    t.equal(ok.json.data.size, size);
    const sha = await until("the checksum of the 5 GiB file", async () => (await listed(s, "genome.bin"))?.sha256 ?? undefined, 600_000, 500);
    t.equal(sha, expected, "the server's SHA-256 is the local file's");
    const dl = await s.api("GET", "/v1/files/download?workspace_id=ws1&key=genome.bin");
    t.equal(await hashStream(new URL(dl.json.data.downloadUrl, s.base).href), expected, "downloaded byte for byte");
    await s.api("DELETE", "/v1/files?workspace_id=ws1&key=genome.bin");
  });
}
