/**
 * The files API on S3 storage (cluster mode's store) against a real MinIO: the same routes,
 * with presigned URLs that point straight at the S3 server and are checked by it.
 */
import t from "tap";
import { createHash } from "node:crypto";
import { createS3ObjectStore } from "../../adapters/s3/object-store.js";
import { startMinio } from "../support/minio.js";
import { multipartBody, testApp } from "../support/app.js";

const minio = await startMinio();
t.teardown(() => minio.stop());
const store = createS3ObjectStore({
  endpoint: minio.endpoint, bucket: minio.bucket, region: minio.region, forcePathStyle: true,
  credentials: { accessKeyId: minio.accessKeyId, secretAccessKey: minio.secretAccessKey },
});
const a = await testApp({ store });
t.teardown(() => a.close());
await a.service.createWorkspace("acme", "ws1");
const key = await a.key("acme", ["files"], ["ws1"]);
const h = { authorization: `Bearer ${key}` };
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

t.test("upload, list, presigned download from S3, delete", async (t) => {
  const content = ">chr1\nACGTACGTNN\n";
  const mp = multipartBody([["workspace_id", "ws1"], ["path", "refs"]], { name: "file", filename: "ref.fa", content, type: "text/x-fasta" });
  const up = await a.app.inject({ method: "POST", url: "/v1/files/upload", headers: { ...h, ...mp.headers }, payload: mp.payload });
  t.equal(up.statusCode, 201, up.body);
  t.equal(up.json().data.sha256, sha(content));
  const list = await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=ws1", headers: h });
  t.same(list.json().data.map((f: { key: string; sha256: string }) => [f.key, f.sha256]), [["refs/ref.fa", sha(content)]]);
  const dl = await a.app.inject({ method: "GET", url: "/v1/files/download?workspace_id=ws1&key=refs/ref.fa", headers: h });
  const url: string = dl.json().data.downloadUrl;
  t.ok(url.startsWith(minio.endpoint), "the URL points at the S3 server");
  t.equal(await (await fetch(url)).text(), content);
  const ranged = await fetch(url, { headers: { range: "bytes=6-9" } });
  t.equal(ranged.status, 206);
  t.equal(await ranged.text(), "ACGT");
  const del = await a.app.inject({ method: "DELETE", url: "/v1/files?workspace_id=ws1&key=refs/ref.fa", headers: h });
  t.equal(del.statusCode, 200);
  t.equal((await fetch(url)).status, 404, "gone from S3");
});

t.test("large-file flow with a real S3 presigned PUT", async (t) => {
  const body = "x".repeat(100_000);
  const s1 = await a.app.inject({ method: "POST", url: "/v1/files/upload-url", headers: h, payload: { filename: "big.bin", workspace_id: "ws1", content_type: "application/octet-stream", size: body.length } });
  t.equal(s1.statusCode, 200, s1.body);
  const { uploadUrl, fileKey } = s1.json().data as { uploadUrl: string; fileKey: string };
  const wrong = await fetch(uploadUrl, { method: "PUT", body, headers: { "content-type": "text/plain" } });
  t.equal(wrong.status, 403, "S3 refuses a PUT whose Content-Type differs from the signed one");
  const longer = await fetch(uploadUrl, { method: "PUT", body: body + "more", headers: { "content-type": "application/octet-stream" } });
  t.equal(longer.status, 403, "S3 refuses a body longer than the declared size (Content-Length is signed)");
  const put = await fetch(uploadUrl, { method: "PUT", body, headers: { "content-type": "application/octet-stream" } });
  t.equal(put.status, 200);
  const ok = await a.app.inject({ method: "POST", url: "/v1/files/upload-confirm", headers: h, payload: { file_key: fileKey, workspace_id: "ws1", size: body.length } });
  t.equal(ok.statusCode, 200, ok.body);
  t.equal(ok.json().data.sha256, sha(body), "sha256 computed at confirm and recorded");
  const list = await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=ws1", headers: h });
  t.equal(list.json().data.find((f: { key: string }) => f.key === "big.bin")?.sha256, sha(body));
  const bad = await a.app.inject({ method: "POST", url: "/v1/files/upload-confirm", headers: h, payload: { file_key: fileKey, workspace_id: "ws1", size: 1 } });
  t.equal(bad.statusCode, 409);
});

t.test("uploads over the limit leave nothing in the bucket", async (t) => {
  const small = await testApp({ store, maxUploadBytes: 1000 });
  t.teardown(() => small.close());
  const mp = multipartBody([["workspace_id", "ws1"]], { name: "file", filename: "too-big.bin", content: Buffer.alloc(10_000, 1) });
  const r = await small.app.inject({ method: "POST", url: "/v1/files/upload", headers: { ...h, ...mp.headers }, payload: mp.payload });
  t.equal(r.statusCode, 413);
  const everything = await store.list("", { limit: 1000 });
  t.notOk(everything.items.some((i) => i.key.endsWith("too-big.bin")), "no object");
  const tmp = await store.list("_system/tmp/", { limit: 1000 });
  t.same(tmp.items, [], "no temporary upload left");
});

t.test("2,500 files listed through the API in pages: each exactly once, in order (cursor = last key, S3 StartAfter)", async (t) => {
  await a.service.createWorkspace("acme", "many");
  const all = await a.key("acme", ["files"], ["many"]);
  const root = "orgs/acme/workspaces/many/";
  const keys = Array.from({ length: 2500 }, (_, i) => `batch/f${String(i).padStart(4, "0")}.txt`);
  // Bounded concurrency: 16 puts in flight.
  let next = 0;
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (next < keys.length) {
      const k = keys[next++] as string;
      await store.put(root + k, k, { contentType: "text/plain" });
    }
  }));
  await store.put(`${root}zzz-after.txt`, "outside the prefix");
  const seen: string[] = [];
  const sizes: number[] = [];
  let cursor: string | null = null;
  do {
    const url: string = `/v1/files?workspace_id=many&prefix=batch/&limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
    const r = await a.app.inject({ method: "GET", url, headers: { authorization: `Bearer ${all}` } });
    t.equal(r.statusCode, 200, `page ${sizes.length + 1}`, { body: r.body.slice(0, 300) });
    if (r.statusCode !== 200) break;
    const body = r.json() as { data: Array<{ key: string; sha256: string | null }>; has_more: boolean; next_cursor: string | null };
    seen.push(...body.data.map((f) => f.key));
    sizes.push(body.data.length);
    t.equal(body.has_more, body.next_cursor !== null, "has_more exactly when there is a next cursor");
    if (sizes.length === 1) t.equal(body.data[0]?.sha256, sha(keys[0] as string), "with metadata");
    cursor = body.next_cursor;
  } while (cursor !== null && sizes.length < 10);
  t.same(sizes, [1000, 1000, 500], "three pages");
  t.equal(new Set(seen).size, seen.length, "no key twice");
  t.same(seen, keys, "every key, in order");
});

t.test("viewer links on S3: bytes proxied by the api-server with Range; conversions downloaded, done and kept in S3", async (t) => {
  const { execFileSync } = await import("node:child_process");
  const { mkdtempSync, readFileSync, rmSync, writeFileSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const dir = mkdtempSync(join(tmpdir(), "viewer-s3-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const vcf = readFileSync(new URL("../fixtures/viewers/nfcore-sarscov2-test.vcf", import.meta.url));
  writeFileSync(join(dir, "t.vcf"), vcf);
  execFileSync("bcftools", ["view", "--no-version", "-Ob", "-o", join(dir, "t.bcf"), join(dir, "t.vcf")]);
  await store.put("orgs/acme/workspaces/ws1/calls/t.vcf", vcf);
  await store.put("orgs/acme/workspaces/ws1/calls/t.bcf", readFileSync(join(dir, "t.bcf")));

  const plain = await a.app.inject({ method: "POST", url: "/v1/visualizations/viewer-url", headers: h, payload: { workspace_id: "ws1", file_path: "calls/t.vcf" } });
  t.equal(plain.statusCode, 200, plain.body);
  const base = new URL(plain.json().data.viewer_url).pathname;
  const part = await a.app.inject({ method: "GET", url: `${base}/data/primary`, headers: { range: "bytes=0-15" } });
  t.equal(part.statusCode, 206, "ranged read proxied from S3");
  t.equal(part.body, vcf.subarray(0, 16).toString());
  t.equal(part.headers["content-range"], `bytes 0-15/${vcf.length}`);
  t.notMatch(JSON.stringify(part.headers), new RegExp(minio.endpoint.replace(/[.:/]/g, "\\$&")), "the browser never sees the S3 address");

  const bcf = await a.app.inject({ method: "POST", url: "/v1/visualizations/viewer-url", headers: h, payload: { workspace_id: "ws1", file_path: "calls/t.bcf" } });
  const meta = await a.app.inject({ method: "GET", url: `${new URL(bcf.json().data.viewer_url).pathname}/meta` });
  t.equal(meta.statusCode, 200, meta.body);
  t.equal(meta.json().data.stats.variants, 9);
  const derived = await store.list("_system/orgs/acme/workspaces/ws1/derived/", { limit: 100 });
  t.ok(derived.items.some((i) => i.key.endsWith("variants.vcf.gz.tbi")), "the converted VCF's index is kept in S3");
  const listed = await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=ws1&prefix=calls/", headers: h });
  t.same(listed.json().data.map((f: { key: string }) => f.key).sort(), ["calls/t.bcf", "calls/t.vcf"]);
});

t.test("a presigned PUT on S3 sets the file once: staged until confirmed, never again after (issue 28)", async (t) => {
  const { sweepUploads, UPLOAD_URL_SECONDS, STAGED_UPLOAD_GRACE_SECONDS } = await import("../../services/files.js");
  await a.service.createWorkspace("acme", "once");
  const hk = { authorization: `Bearer ${await a.key("acme", ["files"], ["once"])}` };
  const octet = { "content-type": "application/octet-stream" };
  const uploadUrl = async (filename: string, size?: number) => {
    const r = await a.app.inject({ method: "POST", url: "/v1/files/upload-url", headers: hk, payload: { filename, workspace_id: "once", ...(size !== undefined ? { size } : {}) } });
    t.equal(r.statusCode, 200, r.body);
    return r.json().data as { uploadUrl: string; fileKey: string };
  };
  const confirm = (fileKey: string, size?: number) => a.app.inject({ method: "POST", url: "/v1/files/upload-confirm", headers: hk, payload: { file_key: fileKey, workspace_id: "once", ...(size !== undefined ? { size } : {}) } });
  const listing = async () => ((await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=once", headers: hk })).json().data as Array<{ key: string; size: number; sha256: string | null }>).map((f) => ({ key: f.key, size: f.size, sha256: f.sha256 }));
  const staging = async () => (await store.list("_system/uploads/acme/once/", { limit: 1000 })).items.map((i) => i.key);

  // The reproduction: a URL for 5 bytes, used, confirmed, then used again with 2,000,000.
  const five = await uploadUrl("five.txt", 5);
  t.ok(new URL(five.uploadUrl).pathname.includes("/_system/uploads/acme/once/"), "the URL writes a staging key of its own");
  const early = await confirm(five.fileKey, 5);
  t.equal(early.statusCode, 409, "confirm before any upload");
  t.match(early.json(), { error: "conflict", message: /file_key: nothing was uploaded to "five.txt"/, details: { field: "file_key" } });
  t.equal((await fetch(five.uploadUrl, { method: "PUT", body: "abc", headers: octet })).status, 403, "a shorter body is refused by S3 (Content-Length is signed)");
  t.equal((await fetch(five.uploadUrl, { method: "PUT", body: "hello", headers: octet })).status, 200);
  t.same(await listing(), [], "not a file before the confirm");
  const ok = await confirm(five.fileKey, 5);
  t.equal(ok.statusCode, 200, ok.body);
  t.match(ok.json().data, { key: "five.txt", size: 5, sha256: sha("hello"), content_type: "application/octet-stream" });
  const confirmed = [{ key: "five.txt", size: 5, sha256: sha("hello") }];
  t.same(await listing(), confirmed);
  const big = await fetch(five.uploadUrl, { method: "PUT", body: Buffer.alloc(2_000_000, 65), headers: octet });
  t.equal(big.status, 403, "2,000,000 bytes to the 5-byte URL: refused");
  // S3 itself cannot refuse a second PUT of the right length (that would need a header the
  // client does not send): it lands in the URL's staging key, and is never confirmed.
  t.equal((await fetch(five.uploadUrl, { method: "PUT", body: "HELLO", headers: octet })).status, 200, "S3 takes the bytes into staging");
  const again = await confirm(five.fileKey, 5);
  t.equal(again.statusCode, 409, "a used URL's later upload is refused at confirm");
  t.match(again.json(), { error: "conflict", message: /file_key: .*sets a file once/, details: { field: "file_key" } });
  t.same(await listing(), confirmed, "the confirmed file is unchanged");
  t.equal(await (await fetch((await a.app.inject({ method: "GET", url: "/v1/files/download?workspace_id=once&key=five.txt", headers: hk })).json().data.downloadUrl)).text(), "hello");

  // Two URLs for one file, both used: the confirm takes the newest upload and spends the other.
  const first = await uploadUrl("two.txt");
  const second = await uploadUrl("two.txt");
  t.equal((await fetch(first.uploadUrl, { method: "PUT", body: "first", headers: octet })).status, 200);
  await new Promise((r) => setTimeout(r, 1100)); // S3's Last-Modified has one-second resolution
  t.equal((await fetch(second.uploadUrl, { method: "PUT", body: "second!", headers: octet })).status, 200);
  const two = await confirm("two.txt");
  t.equal(two.statusCode, 200, two.body);
  t.match(two.json().data, { size: 7, sha256: sha("second!") });
  const repeat = await confirm("two.txt", 7);
  t.equal(repeat.statusCode, 200, "confirming a confirmed file again answers the file");
  t.equal(repeat.json().data.sha256, sha("second!"));
  t.equal((await fetch(first.uploadUrl, { method: "PUT", body: "first", headers: octet })).status, 200);
  t.equal((await confirm("two.txt")).statusCode, 409, "the older URL was spent by the confirm");
  t.equal((await listing()).find((f) => f.key === "two.txt")?.sha256, sha("second!"));

  // Before its confirm, a URL used twice leaves the later bytes (the size is still exact).
  const twice = await uploadUrl("twice.txt", 3);
  t.equal((await fetch(twice.uploadUrl, { method: "PUT", body: "one", headers: octet })).status, 200);
  t.equal((await fetch(twice.uploadUrl, { method: "PUT", body: "two", headers: octet })).status, 200);
  t.match((await confirm("twice.txt", 3)).json().data, { size: 3, sha256: sha("two") });

  // A confirm that fails (wrong size) consumes nothing.
  const sized = await uploadUrl("sized.txt");
  t.equal((await fetch(sized.uploadUrl, { method: "PUT", body: "1234", headers: octet })).status, 200);
  t.equal((await confirm("sized.txt", 5)).statusCode, 409, "size differs");
  t.equal((await confirm("sized.txt", 4)).statusCode, 200, "then the right size confirms");

  // The sweep: nothing before the URLs expired plus the grace period, everything after.
  t.ok((await staging()).length > 0, "leftovers of used URLs are in staging");
  t.notOk((await listing()).some((f) => f.key.includes("_system")), "staging is never listed");
  const now = Date.now();
  t.equal(await sweepUploads(store, now), 0, "nothing swept while the URLs may still be used or confirmed");
  const later = now + (UPLOAD_URL_SECONDS + STAGED_UPLOAD_GRACE_SECONDS + 60) * 1000;
  t.ok(await sweepUploads(store, later) > 0);
  t.same(await staging(), [], "staged uploads and their marks are gone");
  t.same((await listing()).map((f) => f.key).sort(), ["five.txt", "sized.txt", "twice.txt", "two.txt"], "files are untouched");
});
