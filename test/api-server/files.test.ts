import t from "tap";
import { createHash } from "node:crypto";
import { readdirSync, statSync } from "node:fs";
import { request } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { testApp, multipartBody, type TestApp } from "../support/app.js";

const sha = (s: string | Buffer) => createHash("sha256").update(s).digest("hex");

/** Every file under a directory, relative paths. */
function tree(dir: string, base = dir): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? tree(p, base) : [p.slice(base.length + 1)];
  });
}

async function setup(opts: Parameters<typeof testApp>[0] = {}) {
  const a = await testApp(opts);
  await a.service.createWorkspace("acme", "ws1");
  await a.service.createWorkspace("acme", "ws2");
  const key = await a.key("acme", ["files", "conversations"]);
  return { a, h: { authorization: `Bearer ${key}` } };
}

const localPath = (url: string) => { const u = new URL(url); return u.pathname + u.search; };

async function upload(a: TestApp, h: Record<string, string>, fields: Array<[string, string]>, filename: string, content: string | Buffer, type?: string) {
  const mp = multipartBody(fields, { name: "file", filename, content, ...(type ? { type } : {}) });
  return a.app.inject({ method: "POST", url: "/v1/files/upload", headers: { ...h, ...mp.headers }, payload: mp.payload });
}

t.test("upload, list, download (with Range), delete", async (t) => {
  const { a, h } = await setup();
  t.teardown(() => a.close());
  const content = "@r1\nACGTACGT\n+\nIIIIIIII\n";
  const up = await upload(a, h, [["workspace_id", "ws1"], ["path", "reads/"], ["description", "lane 1"]], "s1.fastq", content, "text/plain");
  t.equal(up.statusCode, 201, up.body);
  t.match(up.json().data, { key: "reads/s1.fastq", name: "s1.fastq", size: content.length, sha256: sha(content), content_type: "text/plain", description: "lane 1" });

  const list = await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=ws1", headers: h });
  t.equal(list.statusCode, 200);
  t.same(list.json().data.map((f: { key: string }) => f.key), ["reads/s1.fastq"]);
  t.equal(list.json().data[0].sha256, sha(content));
  t.equal(list.json().has_more, false);
  t.equal(list.json().next_cursor, null);

  const other = await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=ws2", headers: h });
  t.same(other.json().data, [], "files stay in their workspace");

  const dl = await a.app.inject({ method: "GET", url: "/v1/files/download?workspace_id=ws1&key=reads/s1.fastq", headers: h });
  t.equal(dl.statusCode, 200);
  t.equal(dl.json().data.expiresIn, 3600);
  const full = await a.app.inject({ method: "GET", url: localPath(dl.json().data.downloadUrl) });
  t.equal(full.statusCode, 200);
  t.equal(full.body, content);
  const part = await a.app.inject({ method: "GET", url: localPath(dl.json().data.downloadUrl), headers: { range: "bytes=4-11" } });
  t.equal(part.statusCode, 206);
  t.equal(part.body, "ACGTACGT");
  t.equal(part.headers["content-range"], `bytes 4-11/${content.length}`);
  const bad = await a.app.inject({ method: "GET", url: localPath(dl.json().data.downloadUrl), headers: { range: "bytes=999-" } });
  t.equal(bad.statusCode, 416);
  // Suffix ranges (RFC 9110): the last N bytes; more than the object is the whole object; -0 selects nothing.
  const last = await a.app.inject({ method: "GET", url: localPath(dl.json().data.downloadUrl), headers: { range: "bytes=-1" } });
  t.equal(last.statusCode, 206, "bytes=-1 is the last byte");
  t.equal(last.body, content.slice(-1));
  t.equal(last.headers["content-range"], `bytes ${content.length - 1}-${content.length - 1}/${content.length}`);
  const tail = await a.app.inject({ method: "GET", url: localPath(dl.json().data.downloadUrl), headers: { range: `bytes=-${content.length + 100}` } });
  t.equal(tail.statusCode, 206, "a suffix longer than the object");
  t.equal(tail.body, content);
  t.equal((await a.app.inject({ method: "GET", url: localPath(dl.json().data.downloadUrl), headers: { range: "bytes=-0" } })).statusCode, 416, "bytes=-0 selects nothing");

  const fullKey = await a.app.inject({ method: "GET", url: "/v1/files/download?workspace_id=ws1&key=orgs/acme/workspaces/ws1/reads/s1.fastq", headers: h });
  t.equal(fullKey.statusCode, 200, "the full storage key of the same workspace is accepted");
  const otherWs = await a.app.inject({ method: "GET", url: "/v1/files/download?workspace_id=ws2&key=orgs/acme/workspaces/ws1/reads/s1.fastq", headers: h });
  t.equal(otherWs.statusCode, 400, "but not another workspace's");

  const del = await a.app.inject({ method: "DELETE", url: "/v1/files?workspace_id=ws1&key=reads/s1.fastq", headers: h });
  t.equal(del.statusCode, 200);
  t.same(del.json().data, { key: "reads/s1.fastq", deleted: true });
  const again = await a.app.inject({ method: "DELETE", url: "/v1/files?workspace_id=ws1&key=reads/s1.fastq", headers: h });
  t.equal(again.statusCode, 404);
  t.equal((await a.app.inject({ method: "GET", url: "/v1/files/download?workspace_id=ws1&key=reads/s1.fastq", headers: h })).statusCode, 404);
});

t.test("pagination with limit and cursor returns every file exactly once", async (t) => {
  const { a, h } = await setup();
  t.teardown(() => a.close());
  const names = ["a.txt", "b/c.txt", "b/d.txt", "b.txt", "e.txt"];
  for (const n of names) await a.store.put(`orgs/acme/workspaces/ws1/${n}`, n);
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const r = await a.app.inject({ method: "GET", url: `/v1/files?workspace_id=ws1&limit=2${cursor ? `&cursor=${cursor}` : ""}`, headers: h });
    t.equal(r.statusCode, 200, r.body);
    const body = r.json() as { data: Array<{ key: string }>; has_more: boolean; next_cursor: string | null };
    t.ok(body.data.length <= 2);
    seen.push(...body.data.map((f) => f.key));
    t.equal(body.has_more, body.next_cursor !== null);
    cursor = body.next_cursor;
    pages++;
  } while (cursor && pages < 10);
  t.same(seen, [...names].sort(), "byte order, no duplicates, nothing missed");
  const prefixed = await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=ws1&prefix=b/", headers: h });
  t.same(prefixed.json().data.map((f: { key: string }) => f.key), ["b/c.txt", "b/d.txt"]);
  const partial = await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=ws1&prefix=b", headers: h });
  t.same(partial.json().data.map((f: { key: string }) => f.key), ["b.txt", "b/c.txt", "b/d.txt"]);
  const forged = await a.app.inject({ method: "GET", url: `/v1/files?workspace_id=ws1&cursor=${Buffer.from("orgs/acme/workspaces/ws2/x").toString("base64url")}`, headers: h });
  t.equal(forged.statusCode, 400, "a cursor from elsewhere is refused");
});

t.test("uploads over the limit get 413 and leave nothing behind", async (t) => {
  const { a, h } = await setup({ maxUploadBytes: 1000 });
  t.teardown(() => a.close());
  const r = await upload(a, h, [["workspace_id", "ws1"]], "big.bin", Buffer.alloc(5000, 1));
  t.equal(r.statusCode, 413, r.body);
  t.equal(r.json().error, "payload_too_large");
  const files = tree(a.dir).filter((p) => p.startsWith("objects/orgs") || p.startsWith("tmp/"));
  t.same(files, [], "no object and no temporary file");
  const ok = await upload(a, h, [["workspace_id", "ws1"]], "small.bin", Buffer.alloc(1000, 1));
  t.equal(ok.statusCode, 201, "exactly the limit is fine");
});

t.test("bad input: field named, nothing read or written outside the workspace", async (t) => {
  const { a, h } = await setup();
  t.teardown(() => a.close());
  await a.store.put("orgs/acme/workspaces/ws2/secret.txt", "ws2 secret");
  await a.store.put("orgs/acme/workspaces/ws1/ok.txt", "fine");
  const before = tree(a.dir).sort();
  const hostile = ["../ws2/secret.txt", "/etc/passwd", "a/../../ws2/secret.txt", "%2e%2e/ws2/secret.txt", "..%2fws2%2fsecret.txt", "_system/keys", "a\\..\\b", "a\u0000b", "./../x", "a//b", "orgs/globex/workspaces/g1/x"];
  for (const k of hostile) {
    const q = encodeURIComponent(k);
    for (const [method, url] of [["GET", `/v1/files/download?workspace_id=ws1&key=${q}`], ["DELETE", `/v1/files?workspace_id=ws1&key=${q}`]] as const) {
      const r = await a.app.inject({ method, url, headers: h });
      t.equal(r.statusCode, 400, `${method} ${JSON.stringify(k)} → ${r.body}`);
      if (r.statusCode === 400) t.match(r.json().message, /^key: /, "names the field");
    }
    const p = await upload(a, h, [["workspace_id", "ws1"], ["path", k]], "x.txt", "x");
    t.equal(p.statusCode, 400, `upload path ${JSON.stringify(k)}`);
    const u = await a.app.inject({ method: "POST", url: "/v1/files/upload-url", headers: h, payload: { workspace_id: "ws1", filename: "x", path: k } });
    t.equal(u.statusCode, 400, `upload-url path ${JSON.stringify(k)}`);
  }
  for (const name of ["..", "."]) {
    const r = await upload(a, h, [["workspace_id", "ws1"]], name, "x");
    t.equal(r.statusCode, 400, `file name ${name}`);
  }
  const listBad = await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=ws1&prefix=../ws2/", headers: h });
  t.equal(listBad.statusCode, 400);
  t.match(listBad.json().message, /^prefix: /);
  t.same(tree(a.dir).sort(), before, "the data directory is unchanged");
  const secret = await a.store.get("orgs/acme/workspaces/ws2/secret.txt");
  t.ok(secret, "the other workspace's file is untouched");

  const unknownWs = await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=nope", headers: h });
  t.equal(unknownWs.statusCode, 404);
  const noWs = await a.app.inject({ method: "GET", url: "/v1/files", headers: h });
  t.equal(noWs.statusCode, 400);
  t.match(noWs.json().message, /workspace_id/);
  const json = await a.app.inject({ method: "POST", url: "/v1/files/upload", headers: { ...h, "content-type": "application/json" }, payload: { file: "x" } });
  t.equal(json.statusCode, 415, "upload needs multipart/form-data");
  const onlyField = multipartBody([["workspace_id", "ws1"]]);
  const noFile = await a.app.inject({ method: "POST", url: "/v1/files/upload", headers: { ...h, ...onlyField.headers }, payload: onlyField.payload });
  t.equal(noFile.statusCode, 400);
  t.match(noFile.json().message, /^file: /);
  const broken = await a.app.inject({ method: "POST", url: "/v1/files/upload", headers: { ...h, "content-type": "multipart/form-data; boundary=xyz" }, payload: "--xyz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\ntruncated" });
  t.equal(broken.statusCode, 400, "a malformed multipart body is a 400, not a 500");
  const badBody = await a.app.inject({ method: "POST", url: "/v1/files/upload-url", headers: h, payload: { workspace_id: "ws1" } });
  t.equal(badBody.statusCode, 400);
  t.match(badBody.json().message, /filename/);
});

t.test("a file name is one plain segment: paths are refused with 400 naming the field, never cut to a basename", async (t) => {
  const { a, h } = await setup();
  t.teardown(() => a.close());
  const before = tree(a.dir).sort();
  for (const name of ["../x", "a/b", "/etc/passwd", "..\\x", "a\\b", "C:\\x", "./x", "x/", "..", ".", "..%2fx", "%2e%2e"]) {
    const m = await upload(a, h, [["workspace_id", "ws1"]], name, "x");
    t.equal(m.statusCode, 400, `multipart filename ${JSON.stringify(name)} → ${m.body}`);
    if (m.statusCode === 400) t.match(m.json(), { error: "invalid_request", message: /^file: /, details: { field: "file" } });
    const u = await a.app.inject({ method: "POST", url: "/v1/files/upload-url", headers: h, payload: { workspace_id: "ws1", filename: name } });
    t.equal(u.statusCode, 400, `upload-url filename ${JSON.stringify(name)} → ${u.body}`);
    if (u.statusCode === 400) t.match(u.json(), { error: "invalid_request", message: /^filename: /, details: { field: "filename" } });
  }
  t.same(tree(a.dir).sort(), before, "nothing was stored");

  const plain = await upload(a, h, [["workspace_id", "ws1"], ["path", "reads"]], "échantillon 1.fastq", "@r\nA\n+\nI\n");
  t.equal(plain.statusCode, 201, plain.body);
  t.equal(plain.json().data.key, "reads/échantillon 1.fastq", "a plain name (UTF-8, spaces) is stored as given");
});

t.test("a file name over 250 bytes of UTF-8 is a 400 that leaves nothing behind", async (t) => {
  const { a, h } = await setup();
  t.teardown(() => a.close());
  const before = tree(a.dir).sort();
  // 251 to 306 bytes: ASCII, and two-byte characters (126 of them, well under 250 characters);
  // 251–255 bytes would pass the file system's NAME_MAX but not the store's sidecar name.
  for (const name of ["a".repeat(251), "c".repeat(255), "a".repeat(256), "é".repeat(126), "b".repeat(300) + ".fastq"]) {
    const label = `${name.length} characters, ${Buffer.byteLength(name)} bytes`;
    const m = await upload(a, h, [["workspace_id", "ws1"], ["path", "reads"]], name, "x".repeat(1000));
    t.equal(m.statusCode, 400, `multipart: ${label} → ${m.body}`);
    t.match(m.json(), { error: "invalid_request", message: /^file: /, details: { field: "file" } });
    t.notOk(m.body.includes(a.dir), "no server path in the answer");
    const u = await a.app.inject({ method: "POST", url: "/v1/files/upload-url", headers: h, payload: { workspace_id: "ws1", filename: name, path: "reads" } });
    t.equal(u.statusCode, 400, `upload-url: ${label} → ${u.body}`);
    t.match(u.json(), { error: "invalid_request", message: /^filename: /, details: { field: "filename" } });
  }
  const after = tree(a.dir).sort();
  t.same(after.filter((p) => p.split("/").includes("tmp")), [], "no stray file in <data dir>/tmp or any other tmp folder");
  t.same(after.filter((p) => p.startsWith("objects/orgs") || p.startsWith("meta/orgs")), [], "no object and no sidecar was created");
  t.same(after, before, "the data directory is unchanged");
  const longest = await upload(a, h, [["workspace_id", "ws1"], ["path", "reads"]], "d".repeat(250), "x");
  t.equal(longest.statusCode, 201, "a 250-byte name is stored");
});

t.test("large-file flow: upload-url → PUT → upload-confirm, and presigned URL checks", async (t) => {
  const { a, h } = await setup();
  t.teardown(() => a.close());
  const step1 = await a.app.inject({ method: "POST", url: "/v1/files/upload-url", headers: h, payload: { filename: "big.bam", workspace_id: "ws1", content_type: "application/octet-stream", size: 10, path: "bams" } });
  t.equal(step1.statusCode, 200, step1.body);
  const { uploadUrl, fileKey, expiresIn } = step1.json().data as { uploadUrl: string; fileKey: string; expiresIn: number };
  t.equal(fileKey, "bams/big.bam");
  t.equal(expiresIn, 3600);

  const early = await a.app.inject({ method: "POST", url: "/v1/files/upload-confirm", headers: h, payload: { file_key: fileKey, workspace_id: "ws1", filename: "big.bam", size: 10 } });
  t.equal(early.statusCode, 409, "confirm before the PUT");

  const wrongType = await a.app.inject({ method: "PUT", url: localPath(uploadUrl), headers: { "content-type": "text/plain" }, payload: "0123456789" });
  t.equal(wrongType.statusCode, 403, "content type is part of the signature");
  const tampered = localPath(uploadUrl).replace(/signature=([0-9a-f])/, (_m, c: string) => `signature=${c === "0" ? "1" : "0"}`);
  t.equal((await a.app.inject({ method: "PUT", url: tampered, headers: { "content-type": "application/octet-stream" }, payload: "x" })).statusCode, 403, "tampered signature");
  const otherKey = localPath(uploadUrl).replace("big.bam", "evil.bam");
  t.equal((await a.app.inject({ method: "PUT", url: otherKey, headers: { "content-type": "application/octet-stream" }, payload: "x" })).statusCode, 403, "tampered key");
  t.equal((await a.app.inject({ method: "GET", url: localPath(uploadUrl) })).statusCode, 403, "a PUT URL does not GET");

  const put = await a.app.inject({ method: "PUT", url: localPath(uploadUrl), headers: { "content-type": "application/octet-stream" }, payload: "0123456789" });
  t.equal(put.statusCode, 200, put.body);
  const mismatch = await a.app.inject({ method: "POST", url: "/v1/files/upload-confirm", headers: h, payload: { fileKey, workspace_id: "ws1", size: 11 } });
  t.equal(mismatch.statusCode, 409, "size mismatch");
  const ok = await a.app.inject({ method: "POST", url: "/v1/files/upload-confirm", headers: h, payload: { file_key: fileKey, workspace_id: "ws1", filename: "big.bam", size: 10 } });
  t.equal(ok.statusCode, 200, ok.body);
  t.match(ok.json().data, { key: "bams/big.bam", size: 10, sha256: sha("0123456789") });

  // Single use: the URL that stored the file cannot replace it, before or after the confirm.
  const again = await a.app.inject({ method: "PUT", url: localPath(uploadUrl), headers: { "content-type": "application/octet-stream" }, payload: "9876543210" });
  t.equal(again.statusCode, 409, "a used URL is refused");
  t.match(again.json().message, /already been used/);
  const listed = await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=ws1&prefix=bams/", headers: h });
  t.match(listed.json().data, [{ key: "bams/big.bam", size: 10, sha256: sha("0123456789") }], "the confirmed file is unchanged");

  const dl = await a.app.inject({ method: "GET", url: "/v1/files/download?workspace_id=ws1&key=bams/big.bam", headers: h });
  a.clock.advance(3601_000);
  const expired = await a.app.inject({ method: "GET", url: localPath(dl.json().data.downloadUrl) });
  t.equal(expired.statusCode, 403, "expired URL");
  t.match(expired.json().message, /expired/);

  const tooBig = await a.app.inject({ method: "POST", url: "/v1/files/upload-url", headers: h, payload: { filename: "huge.bam", workspace_id: "ws1", size: 6 * 1024 ** 4 } });
  t.equal(tooBig.statusCode, 413, "over 5 TiB is refused");
  t.match(tooBig.json(), { error: "payload_too_large", message: /at most 5497558138880 bytes \(5 TiB\)/, details: { field: "size" } }, "the message gives the limit");
  const byParts = await a.app.inject({ method: "POST", url: "/v1/files/upload-url", headers: h, payload: { filename: "huge.bam", workspace_id: "ws1", size: 6 * 1024 ** 3 } });
  t.equal(byParts.statusCode, 200, "over 5 GiB goes by parts (test/api-server/multipart.test.ts)");
  t.match(byParts.json().data, { uploadId: /^mpu-/, partCount: 96 });
});

t.test("a stored file never runs on Operon's origin: nosniff, a sandboxing CSP, attachment unless passive", async (t) => {
  const { a, h } = await setup();
  t.teardown(() => a.close());
  const served = async (filename: string, type: string, content = "x") => {
    t.equal((await upload(a, h, [["workspace_id", "ws1"], ["path", "up"]], filename, content, type)).statusCode, 201);
    const dl = await a.app.inject({ method: "GET", url: `/v1/files/download?workspace_id=ws1&key=${encodeURIComponent(`up/${filename}`)}`, headers: h });
    return a.app.inject({ method: "GET", url: localPath(dl.json().data.downloadUrl) });
  };
  // The reproduction: a page uploaded as text/html, fetched through its presigned URL.
  const html = await served("page.html", "text/html", "<script>document.title = 'ran'</script>");
  t.equal(html.statusCode, 200);
  t.equal(html.headers["x-content-type-options"], "nosniff");
  t.match(html.headers["content-security-policy"], /(^|; )sandbox($|;)/, "sandboxed: no script, an opaque origin");
  t.match(html.headers["content-security-policy"], /default-src 'none'/);
  t.equal(html.headers["content-disposition"], `attachment; filename="page.html"; filename*=UTF-8''page.html`, "HTML is an attachment");
  for (const [name, type] of [["p.svg", "image/svg+xml"], ["x.xml", "application/xml"], ["s.js", "text/javascript"], ["u.bin", "application/x-unknown"]] as const) {
    t.match((await served(name, type)).headers["content-disposition"], /^attachment;/, `${type} is an attachment`);
  }
  const png = await served("plot.png", "image/png");
  t.match(png.headers["content-disposition"], /^inline;/, "a PNG may be shown in place");
  t.match(png.headers["content-security-policy"], /sandbox/, "still sandboxed");
  const odd = await served("r\u00e9sum\u00e9 v1.txt", "text/plain");
  t.equal(odd.headers["content-disposition"], `inline; filename="r_sum_ v1.txt"; filename*=UTF-8''${encodeURIComponent("r\u00e9sum\u00e9 v1.txt")}`, "the name: ASCII in filename, exact in filename*");
  const ranged = await a.app.inject({ method: "GET", url: localPath((await a.app.inject({ method: "GET", url: "/v1/files/download?workspace_id=ws1&key=up/page.html", headers: h })).json().data.downloadUrl), headers: { range: "bytes=0-3" } });
  t.equal(ranged.statusCode, 206);
  t.equal(ranged.headers["content-disposition"], html.headers["content-disposition"], "a range carries the same headers");
});

t.test("a presigned PUT carries exactly the declared size, and a failed one can be retried", async (t) => {
  const { a, h } = await setup();
  t.teardown(() => a.close());
  const url = async (name: string, size: number) => localPath((await a.app.inject({ method: "POST", url: "/v1/files/upload-url", headers: h, payload: { filename: name, workspace_id: "ws1", size } })).json().data.uploadUrl as string);
  const put = (u: string, body: string | Buffer) => a.app.inject({ method: "PUT", url: u, headers: { "content-type": "application/octet-stream" }, payload: body });
  const keys = async () => ((await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=ws1", headers: h })).json().data as Array<{ key: string }>).map((f) => f.key);

  // The reproduction: a URL issued for 5 bytes took 2,000,000.
  const five = await url("five.txt", 5);
  const big = await put(five, Buffer.alloc(2_000_000, 65));
  t.equal(big.statusCode, 400, "a longer body is refused");
  t.match(big.json(), { error: "invalid_request", message: /exactly 5 bytes/, details: { field: "size" } });
  const short = await put(five, "abc");
  t.equal(short.statusCode, 400, "a shorter body is refused");
  t.match(short.json().message, /exactly 5 bytes .* has 3/);
  t.notOk((await keys()).includes("five.txt"), "nothing stored");
  const exact = await put(five, "hello");
  t.equal(exact.statusCode, 200, "the same URL still takes the right body after refused attempts");
  t.equal((await put(five, "hello")).statusCode, 409, "and only once");
  t.equal((await a.app.inject({ method: "POST", url: "/v1/files/upload-confirm", headers: h, payload: { file_key: "five.txt", workspace_id: "ws1", filename: "five.txt", size: 5 } })).statusCode, 200);

  // A length header that disagrees is refused before a byte is read (a streamed body with no size).
  const lying = await a.app.inject({ method: "PUT", url: await url("lying.txt", 5), headers: { "content-type": "application/octet-stream", "content-length": "6" }, payload: "hello!" });
  t.equal(lying.statusCode, 400);

  // Without a declared size the URL still works once (up to the presigned limit).
  const open = localPath((await a.app.inject({ method: "POST", url: "/v1/files/upload-url", headers: h, payload: { filename: "open.txt", workspace_id: "ws1" } })).json().data.uploadUrl as string);
  t.equal((await put(open, "any length")).statusCode, 200);
  t.equal((await put(open, "again")).statusCode, 409, "single use without a size too");
  t.notOk((await keys()).some((k) => k.startsWith("_system")), "the claims are not files");

  // Claims are swept once their URLs have long expired (and not before): the used URL is then refused by its expiry.
  const { sweepUploads, UPLOAD_URL_SECONDS, STAGED_UPLOAD_GRACE_SECONDS } = await import("../../services/files.js");
  const claims = async () => (await a.store.list("_system/presigned-put-used/", { limit: 100 })).items.length;
  t.equal(await claims(), 2, "one claim per used URL");
  t.equal(await sweepUploads(a.store, a.clock.now()), 0, "nothing swept while the URLs may be used");
  a.clock.advance((UPLOAD_URL_SECONDS + STAGED_UPLOAD_GRACE_SECONDS + 60) * 1000);
  t.equal(await sweepUploads(a.store, a.clock.now()), 2);
  t.equal(await claims(), 0, "the claims are gone");
  t.equal((await put(open, "again")).statusCode, 403, "the expired URL stays refused");
});

t.test("a client that disconnects mid-upload leaves no object and no temp file", async (t) => {
  const { a, h } = await setup();
  await a.app.listen({ port: 0, host: "127.0.0.1" });
  t.teardown(() => a.close());
  const { port } = a.app.server.address() as AddressInfo;
  const boundary = "----operoncut";
  const head = `--${boundary}\r\nContent-Disposition: form-data; name="workspace_id"\r\n\r\nws1\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="cut.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`;
  await new Promise<void>((resolve) => {
    const req = request({ host: "127.0.0.1", port, method: "POST", path: "/v1/files/upload", headers: { ...h, "content-type": `multipart/form-data; boundary=${boundary}`, "content-length": 10_000_000 } });
    req.on("error", () => undefined);
    req.write(head);
    req.write(Buffer.alloc(256 * 1024, 7));
    setTimeout(() => { req.destroy(); resolve(); }, 200);
  });
  // The server notices the disconnect asynchronously: give it up to 3 s to clean up.
  const leftovers = () => tree(a.dir).filter((p) => p.startsWith("objects/orgs") || p.startsWith("tmp/"));
  for (let i = 0; i < 30 && leftovers().length > 0; i++) await new Promise((r) => setTimeout(r, 100));
  t.same(tree(a.dir).filter((p) => p.startsWith("objects/orgs") || p.startsWith("tmp/")), [], "nothing stored, no temp file");
});

t.test("a presigned PUT cut off mid-body stores nothing, and its URL can be used again", async (t) => {
  const { a, h } = await setup();
  await a.app.listen({ port: 0, host: "127.0.0.1" });
  t.teardown(() => a.close());
  const { port } = a.app.server.address() as AddressInfo;
  const size = 4 * 1024 * 1024;
  const u = new URL((await a.app.inject({ method: "POST", url: "/v1/files/upload-url", headers: h, payload: { filename: "cut.bin", workspace_id: "ws1", size } })).json().data.uploadUrl as string);
  await new Promise<void>((resolve) => {
    const req = request({ host: "127.0.0.1", port, method: "PUT", path: u.pathname + u.search, headers: { "content-type": "application/octet-stream", "content-length": size } });
    req.on("error", () => undefined);
    req.write(Buffer.alloc(256 * 1024, 7));
    setTimeout(() => { req.destroy(); resolve(); }, 200);
  });
  const leftovers = () => tree(a.dir).filter((p) => p.startsWith("objects/orgs") || p.startsWith("tmp/") || p.includes("presigned-put-used"));
  for (let i = 0; i < 30 && leftovers().length > 0; i++) await new Promise((r) => setTimeout(r, 100));
  t.same(leftovers(), [], "no object, no temp file, and the claim given back");
  const retry = await a.app.inject({ method: "PUT", url: u.pathname + u.search, headers: { "content-type": "application/octet-stream" }, payload: Buffer.alloc(size, 7) });
  t.equal(retry.statusCode, 200, "the same URL takes the whole body");
});

t.test("graceful shutdown lets an in-flight upload finish", async (t) => {
  const { a } = await setup();
  await a.app.listen({ port: 0, host: "127.0.0.1" });
  const { port } = a.app.server.address() as AddressInfo;
  const url = await a.store.presignPut("orgs/acme/workspaces/ws1/slow.bin", { expiresIn: 60 });
  const path = localPath(url);
  const done = new Promise<number>((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, method: "PUT", path, headers: { "content-length": 6 } }, (res) => { res.resume(); res.on("end", () => resolve(res.statusCode ?? 0)); });
    req.on("error", reject);
    req.write("abc");
    setTimeout(() => {
      const closing = a.app.close();
      setTimeout(() => { req.end("def"); }, 150);
      void closing;
    }, 100);
  });
  t.equal(await done, 200, "the request started before close completes");
  const got = await a.store.get("orgs/acme/workspaces/ws1/slow.bin");
  const chunks: Buffer[] = [];
  for await (const c of got.body) chunks.push(Buffer.from(c));
  t.equal(Buffer.concat(chunks).toString(), "abcdef");
  await a.close();
});

t.test("conversations: most recent first, limit, before, and workspace scoping", async (t) => {
  const { a, h } = await setup();
  t.teardown(() => a.close());
  for (let i = 0; i < 5; i++) {
    await a.service.saveConversation({
      id: `c${i}`, organization: "acme", workspace_id: "ws1", title: `chat ${i}`,
      created_at: `2026-11-0${i + 1}T00:00:00.000Z`, updated_at: `2026-11-1${(i * 3) % 5}T00:00:00.000Z`,
      messages: Array.from({ length: i + 1 }, (_, k) => ({ role: k % 2 ? "assistant" : "user", content: `m${k}` })),
    });
  }
  const order = ["c3", "c1", "c4", "c2", "c0"]; // updated_at days 19? no: (i*3)%5 → c0:0 c1:3 c2:1 c3:4 c4:2
  const l = await a.app.inject({ method: "GET", url: "/v1/conversations?workspace_id=ws1&limit=2", headers: h });
  t.equal(l.statusCode, 200, l.body);
  t.same(l.json().data.map((c: { id: string }) => c.id), order.slice(0, 2));
  t.equal(l.json().has_more, true);
  t.equal(l.json().data[0].message_count, 4);
  const next = await a.app.inject({ method: "GET", url: `/v1/conversations?workspace_id=ws1&limit=10&before=${l.json().next_cursor}`, headers: h });
  t.same(next.json().data.map((c: { id: string }) => c.id), order.slice(2));
  t.equal(next.json().has_more, false);
  const one = await a.app.inject({ method: "GET", url: "/v1/conversations/c2?workspace_id=ws1", headers: h });
  t.equal(one.statusCode, 200);
  t.equal(one.json().data.messages.length, 3);
  t.same(one.json().data.messages[1], { role: "assistant", content: "m1" });
  const wrongWs = await a.app.inject({ method: "GET", url: "/v1/conversations/c2?workspace_id=ws2", headers: h });
  t.equal(wrongWs.statusCode, 404, "not in that workspace");
  const big = await a.app.inject({ method: "GET", url: "/v1/conversations?workspace_id=ws1&limit=101", headers: h });
  t.equal(big.statusCode, 400);
  t.match(big.json().message, /limit/);
  const def = await a.app.inject({ method: "GET", url: "/v1/conversations?workspace_id=ws1", headers: h });
  t.equal(def.json().data.length, 5, "default limit 20 covers all five");
});

t.test("listings are never stale after a write, and see outside changes within a second", async (t) => {
  const { a, h } = await setup();
  t.teardown(() => a.close());
  const keys = async () => (await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=ws1", headers: h })).json().data.map((f: { key: string }) => f.key);
  t.same(await keys(), []);
  t.same(await keys(), [], "served from the page cache");
  t.equal((await upload(a, h, [["workspace_id", "ws1"]], "a.txt", "a")).statusCode, 201);
  t.same(await keys(), ["a.txt"], "an upload shows at once");
  await a.store.put("orgs/acme/workspaces/ws1/b.txt", "b");
  t.same(await keys(), ["a.txt", "b.txt"], "a write by another part of the process shows at once");
  t.equal((await a.app.inject({ method: "DELETE", url: "/v1/files?workspace_id=ws1&key=a.txt", headers: h })).statusCode, 200);
  t.same(await keys(), ["b.txt"], "a delete shows at once");
  const other = (await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=ws2", headers: h })).json().data;
  t.same(other, [], "pages are per workspace");
  // A file that appears behind the store's back (another process writing into the data dir).
  const { mkdirSync, writeFileSync } = await import("node:fs");
  mkdirSync(join(a.dir, "objects/orgs/acme/workspaces/ws1"), { recursive: true });
  writeFileSync(join(a.dir, "objects/orgs/acme/workspaces/ws1/c.txt"), "c");
  a.clock.advance(1001);
  t.same(await keys(), ["b.txt", "c.txt"], "seen after the one-second re-check");
});
