import t from "tap";
import { StoreError, type ObjectStore } from "../../core/ports.js";
import { testApp } from "../support/app.js";

t.test("an unexpected failure is a 500 internal_error without a stack trace", async (t) => {
  const a = await testApp();
  t.teardown(() => a.close());
  await a.service.createWorkspace("acme", "ws1");
  const key = await a.key("acme", ["files"]);
  const broken = a.store as ObjectStore & { list: ObjectStore["list"] };
  broken.list = async () => { throw new Error("disk on fire at /var/secret/path"); };
  const r = await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=ws1", headers: { authorization: `Bearer ${key}` } });
  t.equal(r.statusCode, 500);
  t.match(r.json(), { error: "internal_error", message: "internal error" });
  t.notMatch(r.body, /disk on fire|secret|\bat\s/, "no internals leak");
  t.equal(r.json().request_id, r.headers["x-request-id"]);
});

t.test("a store outage is a 503 unavailable with Retry-After, without internals", async (t) => {
  const a = await testApp();
  t.teardown(() => a.close());
  await a.service.createWorkspace("acme", "ws1");
  const key = await a.key("acme", ["files"]);
  a.store.list = async () => { throw new StoreError("Unavailable", "object store unavailable: Error: ECONNREFUSED: connect ECONNREFUSED 10.0.0.7:9000"); };
  const r = await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=ws1", headers: { authorization: `Bearer ${key}` } });
  t.equal(r.statusCode, 503);
  t.match(r.json(), { error: "unavailable", message: String });
  t.equal(r.headers["retry-after"], "5", "Retry-After in seconds");
  t.notMatch(r.body, /ECONNREFUSED|10\.0\.0\.7|\bat\s/, "no internals leak");
  t.equal(r.json().request_id, r.headers["x-request-id"]);
});

t.test("/readyz is 503 when storage is unreachable, 200 otherwise", async (t) => {
  const a = await testApp();
  t.teardown(() => a.close());
  t.equal((await a.app.inject({ method: "GET", url: "/readyz" })).statusCode, 200);
  a.store.ping = async () => { throw new StoreError("Unavailable", "connection refused"); };
  const r = await a.app.inject({ method: "GET", url: "/readyz" });
  t.equal(r.statusCode, 503);
  t.equal(r.json().error, "unavailable");
  t.ok(Number(r.headers["retry-after"]) > 0, "Retry-After");
  t.equal((await a.app.inject({ method: "GET", url: "/healthz" })).statusCode, 200, "liveness does not depend on storage");
});
