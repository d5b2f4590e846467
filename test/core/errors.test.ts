/**
 * The error taxonomy (core/errors.ts) and its one mapping to HTTP (api-server/errors.ts): every
 * code has exactly one status, a taxonomy error is answered with its code's status, code,
 * message and details, and anything else thrown is a 500 `internal_error` that says nothing of
 * what was thrown.
 */
import t from "tap";
import { readFileSync } from "node:fs";
import { ERROR_CODES, knownError, messageOf, OperonError, type ErrorCode } from "../../core/errors.js";
import { StoreError } from "../../core/ports.js";
import { errorReply, HTTP_STATUS } from "../../api-server/errors.js";
import { testApp } from "../support/app.js";

/** A log that records what the handler logged. */
function recorder() {
  const lines: Array<{ level: "warn" | "error"; msg: string }> = [];
  return { lines, log: { warn: (_o: object, msg: string) => { lines.push({ level: "warn", msg }); }, error: (_o: object, msg: string) => { lines.push({ level: "error", msg }); } } };
}

/** The statuses as they are on the wire (docs/api.md#errors, docs/errors.md). */
const EXPECTED: Record<ErrorCode, number> = {
  invalid_request: 400, unauthorized: 401, insufficient_scope: 403, workspace_access_denied: 403, forbidden: 403,
  not_found: 404, conflict: 409, gone: 410, payload_too_large: 413, unsupported_media_type: 415,
  range_not_satisfiable: 416, validation_failed: 422, rate_limited: 429, internal_error: 500, upstream_error: 502, unavailable: 503,
};

t.test("every code maps to exactly one HTTP status, and only codes are mapped", async (t) => {
  t.same([...new Set(ERROR_CODES)], [...ERROR_CODES], "no code twice");
  t.same(Object.keys(HTTP_STATUS).sort(), [...ERROR_CODES].sort(), "the table has every code and nothing else");
  for (const code of ERROR_CODES) {
    const status = HTTP_STATUS[code];
    t.ok(Number.isInteger(status) && status >= 400 && status <= 599, `${code}: ${status} is an error status`);
    t.equal(status, EXPECTED[code], `${code} → ${EXPECTED[code]}`);
  }
});

t.test("docs/errors.md and docs/api.md list every code with its status", async (t) => {
  for (const doc of ["docs/errors.md", "docs/api.md"]) {
    const text = readFileSync(new URL(`../../${doc}`, import.meta.url), "utf8");
    const rows = new Map([...text.matchAll(/^\| (?:`(\w+)` \| (\d{3})|(\d{3}) \| `(\w+)`) \|/gm)].map((m) => [m[1] ?? m[4], Number(m[2] ?? m[3])]));
    t.same(Object.fromEntries([...rows].sort()), Object.fromEntries(Object.entries(HTTP_STATUS).sort()), doc);
  }
});

t.test("a taxonomy error is answered with its code's status, its message and its details", async (t) => {
  for (const code of ERROR_CODES) {
    const { lines, log } = recorder();
    const withDetails = errorReply(new OperonError(code, `what went wrong (${code})`, { field: "x" }), log);
    t.same(withDetails, { status: EXPECTED[code], body: { error: code, message: `what went wrong (${code})`, details: { field: "x" } } }, code);
    t.same(errorReply(new OperonError(code, "m"), log).body, { error: code, message: "m" }, `${code}: no details, no details key`);
    t.same(lines, [], `${code}: nothing logged`);
  }
});

t.test("a thrown value outside the taxonomy is a 500 internal_error that leaks nothing", async (t) => {
  const secret = "ENOENT: open '/srv/operon/.operon/meta/orgs/acme/keys/key_1.json' token=sk-live-123";
  for (const [what, thrown] of [
    ["an Error", new Error(secret)],
    ["a TypeError", new TypeError(secret)],
    ["a string", secret],
    ["an object", { message: secret }],
    ["undefined", undefined],
    ["null", null],
    ["an Error with a 5xx statusCode", Object.assign(new Error(secret), { statusCode: 502 })],
  ] as const) {
    const { lines, log } = recorder();
    const reply = errorReply(thrown, log);
    t.same(reply, { status: 500, body: { error: "internal_error", message: "internal error" } }, what);
    t.notOk(JSON.stringify(reply).includes("sk-live"), `${what}: its message is not in the reply`);
    t.same(lines, [{ level: "error", msg: "unhandled error" }], `${what}: logged as unhandled`);
  }
});

t.test("the object store's errors a caller may see are taxonomy errors; its others are internal", async (t) => {
  t.match(knownError(new StoreError("InvalidKey", "key: not a valid key")), { code: "invalid_request", message: "key: not a valid key" });
  t.match(knownError(new StoreError("Unavailable", "connect ECONNREFUSED 10.0.0.1:9000")), { code: "unavailable", message: "object storage is temporarily unavailable; retry later" });
  t.equal(knownError(new StoreError("NotFound", "gone")), undefined, "NotFound is the store's own control flow");
  t.equal(knownError(new Error("x")), undefined);
  const { lines, log } = recorder();
  t.same(errorReply(new StoreError("Unavailable", "connect ECONNREFUSED 10.0.0.1:9000"), log), { status: 503, body: { error: "unavailable", message: "object storage is temporarily unavailable; retry later" } });
  t.same(lines, [{ level: "warn", msg: "object store unavailable" }], "the outage is logged as a warning");
});

t.test("messageOf: an Error's message, anything else as a string", async (t) => {
  t.equal(messageOf(new Error("boom")), "boom");
  t.equal(messageOf(new OperonError("conflict", "taken")), "taken");
  t.equal(messageOf("plain"), "plain");
  t.equal(messageOf(42), "42");
  t.equal(messageOf(undefined), "undefined");
});

t.test("core/errors.ts names no HTTP status", async (t) => {
  const source = readFileSync(new URL("../../core/errors.ts", import.meta.url), "utf8");
  t.notMatch(source, /\b[45]\d\d\b/, "no 4xx/5xx number in the taxonomy");
  t.notMatch(source, /\bstatus\b/i, "no status at all");
});

t.test("through the app: the envelope, and an unknown error's message never leaves", async (t) => {
  const a = await testApp();
  t.teardown(() => a.close());
  const config = { scope: "public" as const };
  a.app.get("/test/taxonomy", { config }, async () => { throw new OperonError("gone", "this link expired", { field: "token" }); });
  a.app.get("/test/unknown", { config }, async () => { throw new Error("secret: /srv/data/meta/keys.json"); });
  const gone = await a.app.inject({ method: "GET", url: "/test/taxonomy" });
  t.equal(gone.statusCode, 410);
  t.match(gone.json(), { error: "gone", message: "this link expired", details: { field: "token" }, request_id: String });
  const unknown = await a.app.inject({ method: "GET", url: "/test/unknown" });
  t.equal(unknown.statusCode, 500);
  t.same({ ...unknown.json(), request_id: "-" }, { error: "internal_error", message: "internal error", request_id: "-" });
  t.notOk(unknown.body.includes("secret"), "the thrown message is not sent");
});
