import t from "tap";
import { testApp, multipartBody } from "../support/app.js";

/** A pino destination that keeps every line written to it. */
function capture() {
  const lines: string[] = [];
  return { lines, stream: { write: (s: string) => { lines.push(s); } }, text: () => lines.join("") };
}

const localPath = (url: string) => { const u = new URL(url); return u.pathname + u.search; };

t.test("request logs never hold API keys or presigned signatures, but keep the path", async (t) => {
  const log = capture();
  const a = await testApp({ logger: { level: "trace", stream: log.stream } });
  t.teardown(() => a.close());
  await a.service.createWorkspace("acme", "ws1");
  const key = await a.key("acme", ["files"]);

  const viaHeader = await a.app.inject({ method: "GET", url: "/v1/workspaces", headers: { "x-api-key": key } });
  t.equal(viaHeader.statusCode, 200);
  const viaBearer = await a.app.inject({ method: "GET", url: "/v1/workspaces", headers: { authorization: `Bearer ${key}` } });
  t.equal(viaBearer.statusCode, 200);
  const wrongKey = "sk_live_" + "Z9y8".repeat(8);
  t.equal((await a.app.inject({ method: "GET", url: "/v1/workspaces", headers: { authorization: `Bearer ${wrongKey}` } })).statusCode, 401);

  const mp = multipartBody([["workspace_id", "ws1"], ["path", "reads"]], { name: "file", filename: "s1.fastq", content: "@r1\nACGT\n+\nIIII\n" });
  t.equal((await a.app.inject({ method: "POST", url: "/v1/files/upload", headers: { "x-api-key": key, ...mp.headers }, payload: mp.payload })).statusCode, 201);
  const dl = await a.app.inject({ method: "GET", url: "/v1/files/download?workspace_id=ws1&key=reads/s1.fastq", headers: { "x-api-key": key } });
  t.equal(dl.statusCode, 200);
  const downloadUrl = dl.json().data.downloadUrl as string;
  const signature = new URL(downloadUrl).searchParams.get("signature") as string;
  t.match(signature, /^[0-9a-f]{64}$/);
  const got = await a.app.inject({ method: "GET", url: localPath(downloadUrl) });
  t.equal(got.statusCode, 200, "the presigned GET works");

  const up = await a.app.inject({ method: "POST", url: "/v1/files/upload-url", headers: { authorization: `Bearer ${key}` }, payload: { workspace_id: "ws1", filename: "big.bin" } });
  const putSig = new URL(up.json().data.uploadUrl).searchParams.get("signature") as string;
  t.equal((await a.app.inject({ method: "PUT", url: localPath(up.json().data.uploadUrl), payload: "bytes" })).statusCode, 200, "the presigned PUT works");
  // A tampered URL (403) and S3-style credentials in a query are logged redacted too.
  const tampered = localPath(downloadUrl).replace(signature, "0".repeat(63) + "1");
  t.equal((await a.app.inject({ method: "GET", url: tampered })).statusCode, 403);
  const amz = "/v1/storage/object?key=k&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260101&X-Amz-Security-Token=FwoGZXIvYXdzSESSION&X-Amz-Signature=deadbeefcafe0123";
  await a.app.inject({ method: "GET", url: amz });
  // Someone logging a request's headers: censored by the logger itself.
  a.app.log.info({ headers: { authorization: `Bearer ${key}`, "x-api-key": key, host: "localhost" } }, "headers");
  a.app.log.info(`a message naming ${key} and ${downloadUrl}`);
  a.app.log.error(new Error(`fetch of ${downloadUrl} failed`));

  const text = log.text();
  t.ok(log.lines.length > 10, `${log.lines.length} lines logged`);
  for (const [what, secret] of [["the API key", key], ["the wrong key", wrongKey], ["the GET signature", signature], ["the PUT signature", putSig], ["the tampered signature", "0".repeat(63) + "1"], ["an S3 credential", "AKIAIOSFODNN7EXAMPLE"], ["an S3 session token", "FwoGZXIvYXdzSESSION"], ["an S3 signature", "deadbeefcafe0123"]] as const) {
    t.notOk(text.includes(secret), `${what} is not in the log`);
  }
  t.ok(text.includes("/v1/storage/object?key="), "the presigned path (and object key) is logged");
  t.ok(text.includes("signature=[REDACTED]"), "the signature's place is marked");
  t.ok(text.includes("/v1/workspaces"), "the API path is logged");
  t.ok(text.includes("/v1/files/download?workspace_id=ws1&key=reads/s1.fastq"), "harmless query parameters are kept");
  const headerLine = log.lines.map((l) => JSON.parse(l) as { msg?: string; headers?: Record<string, string> }).find((l) => l.msg === "headers");
  t.same(headerLine?.headers, { authorization: "[REDACTED]", "x-api-key": "[REDACTED]", host: "localhost" });
});
