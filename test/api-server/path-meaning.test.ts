/**
 * One meaning of a workspace path (docs/security.md#one-meaning-of-a-workspace-path): `orgs/…`
 * always means a full storage key. Where a field names a file, the caller's own workspace's
 * full key is the same file as its path inside the workspace; no field takes `orgs/…` as a
 * folder inside the workspace. The reproduction: a render's `output_path` of
 * `orgs/acme/workspaces/ws1/plots` made a folder whose keys `file_path` later read as another file.
 */
import t from "tap";
import { multipartBody, testApp } from "../support/app.js";

const a = await testApp({ engine: {} });
t.teardown(() => a.close());
await a.service.createWorkspace("acme", "ws1");
await a.service.createWorkspace("acme", "ws2");
const h = { authorization: `Bearer ${await a.key("acme", ["files", "tools"])}` };
const root = "orgs/acme/workspaces/ws1/";
await a.store.put(`${root}data/de.csv`, "gene_name,log2FoldChange,padj\nA,2.5,0.001\nB,-3,0.0001\nC,0.1,0.8\n");

const post = (url: string, payload: object) => a.app.inject({ method: "POST", url, headers: h, payload });

t.test("a folder field refuses orgs/…, naming the field", async (t) => {
  const render = await post("/v1/visualizations/render", { type: "volcano_plot", workspace_id: "ws1", file_path: "data/de.csv", output_path: `${root}plots` });
  t.equal(render.statusCode, 400, render.body);
  t.match(render.json(), { error: "invalid_request", message: /output_path.*orgs\//, details: { field: "output_path" } });
  const mp = multipartBody([["workspace_id", "ws1"], ["path", `${root}data`]], { name: "file", filename: "x.txt", content: "x" });
  const up = await a.app.inject({ method: "POST", url: "/v1/files/upload", headers: { ...h, ...mp.headers }, payload: mp.payload });
  t.equal(up.statusCode, 400, up.body);
  t.match(up.json(), { details: { field: "path" } });
  const prefix = await a.app.inject({ method: "GET", url: `/v1/files?workspace_id=ws1&prefix=${encodeURIComponent("orgs/x")}`, headers: h });
  t.equal(prefix.statusCode, 400, "a listing prefix under orgs/ is refused too");
  const listed = await a.app.inject({ method: "GET", url: "/v1/files?workspace_id=ws1", headers: h });
  t.notOk((listed.json().data as Array<{ key: string }>).some((f) => f.key.startsWith("orgs/")), "nothing was stored under orgs/ inside the workspace");
});

t.test("a file field takes the workspace's own full key as the same file, and refuses another workspace's", async (t) => {
  const rel = await post("/v1/visualizations/viewer-url", { workspace_id: "ws1", file_path: "data/de.csv" });
  const full = await post("/v1/visualizations/viewer-url", { workspace_id: "ws1", file_path: `${root}data/de.csv` });
  t.equal(rel.statusCode, 200, rel.body);
  t.equal(full.statusCode, 200, full.body);
  const dl = await a.app.inject({ method: "GET", url: `/v1/files/download?workspace_id=ws1&key=${encodeURIComponent(`${root}data/de.csv`)}`, headers: h });
  t.equal(dl.json().data.key, "data/de.csv", "the full key is the path inside the workspace");
  const other = await post("/v1/visualizations/render", { type: "volcano_plot", workspace_id: "ws2", file_path: `${root}data/de.csv` });
  t.equal(other.statusCode, 400, "another workspace's full key");
  t.match(other.json(), { details: { field: "file_path" } });
  const nested = await post("/v1/visualizations/render", { type: "volcano_plot", workspace_id: "ws1", file_path: `${root}orgs/acme/workspaces/ws1/data/de.csv` });
  t.equal(nested.statusCode, 400, "a full key whose rest is again under orgs/ names no file");
});
