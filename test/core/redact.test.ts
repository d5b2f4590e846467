import t from "tap";
import { isSecretQueryParam, redactSecrets, redactUrl, sanitizeMessage, scrubPaths } from "../../core/redact.js";

t.test("scrubPaths replaces absolute filesystem paths with <path>", async (t) => {
  for (const [input, expected] of [
    ["ENOENT: no such file or directory, open '/work/main/.operon/tmp/3f2a.json'", "ENOENT: no such file or directory, open '<path>'"],
    ["ENAMETOOLONG: name too long, rename '/srv/data/.operon/tmp/9e72.json' -> '/srv/data/.operon/meta/orgs/a/b.json'", "ENAMETOOLONG: name too long, rename '<path>' -> '<path>'"],
    ["EACCES: permission denied, mkdir \"/var/lib/operon/objects\"", "EACCES: permission denied, mkdir \"<path>\""],
    ["spawn /usr/local/bin/samtools ENOENT", "spawn <path> ENOENT"],
    ["cannot read /home/me/data.txt.", "cannot read <path>."],
    ["failed at file:///work/main/adapters/local/x.ts:10:3", "failed at <path>"],
    ["open 'C:\\Users\\op\\.operon\\tmp\\x'", "open '<path>'"],
    ["see ~/.operon/signing-secret", "see <path>"],
    ["(/tmp/operon-api-x/objects/a)", "(<path>)"],
  ] as const) t.equal(scrubPaths(input), expected, input);
});

t.test("scrubPaths keeps relative names, media types, URLs and the API's routes", async (t) => {
  for (const input of [
    "file \"reads/s1.fastq\" not found",
    "use multipart/form-data with a `file` part",
    "uploads are limited to 500 bytes; use POST /v1/files/upload-url for larger files",
    "follow it with GET /v1/pipelines/run-01abc",
    "object storage is not reachable: connect ECONNREFUSED 127.0.0.1:9000",
    "see https://example.org/docs/a/b",
    "a / b and/or c",
    "GET /healthz and /metrics",
  ]) t.equal(scrubPaths(input), input, input);
});

t.test("redactSecrets: presigned signatures, credentials, keys and bearer tokens", async (t) => {
  const key = "sk_live_" + "A1b2".repeat(8);
  const sig = "9f33e96cda9c6b573d0e6ab9eeca5ac888724a07820cce00b9e281df9eb24e5b";
  const out = redactSecrets(`GET /v1/storage/object?key=orgs%2Fa%2Fx&method=GET&expires=1&signature=${sig} with ${key} and Authorization: Bearer ${key}`);
  t.notOk(out.includes(sig));
  t.notOk(out.includes(key));
  t.match(out, /key=orgs%2Fa%2Fx&method=GET&expires=1&signature=\[REDACTED\]/, "the object key and the rest of the URL stay");
  const s3 = redactUrl("/bucket/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20260101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Security-Token=FwoGZXIvYXdz&X-Amz-Signature=abcdef0123&x-id=GetObject");
  t.equal(s3, "/bucket/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=[REDACTED]&X-Amz-Security-Token=[REDACTED]&X-Amz-Signature=[REDACTED]&x-id=GetObject");
  t.equal(redactUrl("/v1/files?workspace_id=ws1&key=reads/a"), "/v1/files?workspace_id=ws1&key=reads/a", "nothing secret: unchanged");
  t.equal(redactSecrets("https://user:pa55@host/x"), "https://[REDACTED]@host/x");
  for (const n of ["signature", "X-Amz-Signature", "x-amz-credential", "X-Amz-Security-Token", "token", "api_key", "sig"]) t.ok(isSecretQueryParam(n), n);
  for (const n of ["key", "method", "expires", "content_type", "workspace_id"]) t.notOk(isSecretQueryParam(n), n);
});

t.test("viewer-link tokens are capabilities: redacted from paths and texts", async (t) => {
  const token = "eyJ2IjoxLCJvIjoiYWNtZSJ9." + "A".repeat(43);
  t.equal(redactUrl(`/view/${token}`), "/view/[REDACTED]");
  t.equal(redactUrl(`/view/${token}/data/primary?x=1`), "/view/[REDACTED]/data/primary?x=1");
  t.equal(redactSecrets(`link: http://h:8080/view/${token} sent`), "link: http://h:8080/view/[REDACTED] sent");
  t.equal(redactUrl("/view/assets/igv.min.js"), "/view/assets/igv.min.js", "asset paths are kept");
});

t.test("sanitizeMessage does both", async (t) => {
  t.equal(sanitizeMessage("open '/srv/x' for ?signature=abc"), "open '<path>' for ?signature=[REDACTED]");
});
