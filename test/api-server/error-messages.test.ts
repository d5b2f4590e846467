import t from "tap";
import { OperonError } from "../../core/errors.js";
import { testApp } from "../support/app.js";

// Messages are often built from a lower layer's (Node's fs errors name the server's files):
// whatever reaches a client has its absolute paths scrubbed, and a 500 says nothing at all.
t.test("error messages sent to clients never carry server filesystem paths", async (t) => {
  const a = await testApp();
  t.teardown(() => a.close());
  const fsMessage = `ENOENT: no such file or directory, open '${a.dir}/tmp/0b6f.json'`;
  const config = { scope: "public" as const };
  a.app.get("/test/fastify-400", { config }, async () => { throw Object.assign(new Error(fsMessage), { statusCode: 400 }); });
  a.app.get("/test/fastify-404", { config }, async () => { throw Object.assign(new Error(`cannot stat ${a.dir}/objects/x`), { statusCode: 404 }); });
  a.app.get("/test/api-409", { config }, async () => { throw new OperonError("conflict", `ENAMETOOLONG: name too long, rename '${a.dir}/tmp/9e72.json' -> '${a.dir}/meta/orgs/a/b.json'`, { errors: [{ code: "io", path: "/steps/0/inputFile", message: fsMessage }] }); });
  a.app.get("/test/api-503", { config }, async () => { throw new OperonError("unavailable", `object storage is not reachable: ${fsMessage}`); });
  a.app.get("/test/plain-500", { config }, async () => { throw new Error(fsMessage); });

  for (const [url, status] of [["/test/fastify-400", 400], ["/test/fastify-404", 404], ["/test/api-409", 409], ["/test/api-503", 503], ["/test/plain-500", 500]] as const) {
    const r = await a.app.inject({ method: "GET", url });
    t.equal(r.statusCode, status, url);
    t.notOk(r.body.includes(a.dir), `${url}: no server path in ${r.body}`);
    t.notOk(r.body.includes(".json'"), `${url}: no file name from the data dir`);
    t.ok(r.json().request_id, `${url}: still the error envelope`);
    if (status === 500) t.same({ error: r.json().error, message: r.json().message }, { error: "internal_error", message: "internal error" }, "a 500 is generic");
    else t.match(r.json().message, /<path>|not reachable/, `${url}: ${r.json().message}`);
  }
  const conflict = await a.app.inject({ method: "GET", url: "/test/api-409" });
  t.equal(conflict.json().message, "ENAMETOOLONG: name too long, rename '<path>' -> '<path>'");
  t.same(conflict.json().details.errors[0], { code: "io", path: "/steps/0/inputFile", message: "ENOENT: no such file or directory, open '<path>'" }, "details are scrubbed too; a JSON pointer `path` is kept");
});
