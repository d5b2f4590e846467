/**
 * OPERON_CONTENT_URL (docs/security.md, "User content"): with a content origin configured,
 * the local store's presigned URLs name it instead of OPERON_PUBLIC_URL, requests naming the
 * content origin reach the presigned storage route only (the API, the viewer pages, health
 * and metrics are 404 there), and the API's own name no longer serves presigned storage URLs.
 * The app is built as `operon serve` builds it: configuration from parseConfig, the store
 * from createStore.
 */
import t from "tap";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseConfig } from "../../core/config.js";
import { createStore } from "../../wiring/runtime.js";
import { buildApp } from "../../api-server/app.js";
import { ServiceStore } from "../../services/store.js";
import { SECRET } from "../support/app.js";

const API = "api.operon.test";
const CONTENT = "content.operon.test:8443";

async function setup(env: Record<string, string>) {
  const dir = mkdtempSync(join(tmpdir(), "operon-content-"));
  const parsed = parseConfig({ OPERON_DATA_DIR: dir, OPERON_PUBLIC_URL: `http://${API}/`, ...env });
  if (!parsed.ok) throw new Error(parsed.message);
  const store = await createStore(parsed.config, SECRET);
  const service = new ServiceStore(store);
  const app = await buildApp({ config: { ...parsed.config, signingSecret: SECRET }, store, service });
  await service.createWorkspace("acme", "ws1");
  const key = (await service.createKey({ organization: "acme", scopes: ["files"], workspaces: null })).key;
  return { app, store, config: parsed.config, h: { authorization: `Bearer ${key}` }, close: async () => { await app.close(); rmSync(dir, { recursive: true, force: true }); } };
}

const pathOf = (url: string) => { const u = new URL(url); return u.pathname + u.search; };

t.test("with OPERON_CONTENT_URL, presigned URLs name the content origin, which serves them and nothing else", async (t) => {
  const s = await setup({ OPERON_CONTENT_URL: `https://${CONTENT}/` });
  t.teardown(() => s.close());
  t.equal(s.config.contentUrl, `https://${CONTENT}`, "the trailing slash is stripped");
  const api = { ...s.h, host: API };

  const up = await s.app.inject({ method: "POST", url: "/v1/files/upload-url", headers: api, payload: { filename: "page.html", workspace_id: "ws1", content_type: "text/html", size: 5 } });
  t.equal(up.statusCode, 200);
  const uploadUrl = up.json().data.uploadUrl as string;
  t.match(uploadUrl, new RegExp(`^https://${CONTENT}/v1/storage/object\\?`), "the upload URL is on the content origin");
  t.equal((await s.app.inject({ method: "PUT", url: pathOf(uploadUrl), headers: { host: API, "content-type": "text/html" }, payload: "<b/>x" })).statusCode, 404, "not through the API's name");
  t.equal((await s.app.inject({ method: "PUT", url: pathOf(uploadUrl), headers: { host: CONTENT, "content-type": "text/html" }, payload: "<b/>x" })).statusCode, 200, "through the content origin's");

  const dl = await s.app.inject({ method: "GET", url: "/v1/files/download?workspace_id=ws1&key=page.html", headers: api });
  t.equal(dl.statusCode, 200);
  const downloadUrl = dl.json().data.downloadUrl as string;
  t.match(downloadUrl, new RegExp(`^https://${CONTENT}/v1/storage/object\\?`), "the download URL is on the content origin");
  const got = await s.app.inject({ method: "GET", url: pathOf(downloadUrl), headers: { host: CONTENT } });
  t.equal(got.statusCode, 200);
  t.equal(got.body, "<b/>x");
  t.match(got.headers["content-security-policy"], /sandbox/, "with the user-content headers still");
  t.match(got.headers["content-disposition"], /^attachment;/);
  t.equal((await s.app.inject({ method: "GET", url: pathOf(downloadUrl), headers: { host: CONTENT.toUpperCase() } })).statusCode, 200, "the host compares without case");
  const onApi = await s.app.inject({ method: "GET", url: pathOf(downloadUrl), headers: { host: API } });
  t.equal(onApi.statusCode, 404, "the API's name does not serve stored files");
  t.match(onApi.json(), { error: "not_found", message: /content origin \(https:\/\/content\.operon\.test:8443\) only/ });

  const viewer = await s.app.inject({ method: "POST", url: "/v1/visualizations/viewer-url", headers: api, payload: { workspace_id: "ws1", file_path: "page.html", format: "csv" } });
  t.equal(viewer.statusCode, 200);
  const viewPath = new URL(viewer.json().data.viewer_url as string).pathname;
  t.equal((await s.app.inject({ method: "GET", url: viewPath, headers: { host: API } })).statusCode, 200, "viewer pages on the API's name");
  for (const [method, url, headers] of [
    ["GET", "/v1/workspaces", s.h],
    ["GET", "/v1/files/download?workspace_id=ws1&key=page.html", s.h],
    ["GET", viewPath, {}],
    ["GET", `${viewPath}/data/primary`, {}],
    ["GET", "/view/assets/common.js", {}],
    ["GET", "/healthz", {}],
    ["GET", "/metrics", {}],
    ["GET", "/v1/openapi.json", {}],
    ["POST", "/mcp", s.h],
  ] as const) {
    const r = await s.app.inject({ method, url, headers: { ...headers, host: CONTENT } });
    t.equal(r.statusCode, 404, `${method} ${url.split("?")[0]} on the content origin: 404`);
    t.match(r.json(), { error: "not_found", message: /content origin: it serves presigned storage URLs only/ });
  }
});

t.test("without OPERON_CONTENT_URL, presigned URLs name OPERON_PUBLIC_URL and any name serves everything", async (t) => {
  const s = await setup({});
  t.teardown(() => s.close());
  const dl = await s.app.inject({ method: "POST", url: "/v1/files/upload-url", headers: { ...s.h, host: "elsewhere.test" }, payload: { filename: "a.txt", workspace_id: "ws1" } });
  t.match(dl.json().data.uploadUrl, new RegExp(`^http://${API}/v1/storage/object\\?`));
  t.equal((await s.app.inject({ method: "PUT", url: pathOf(dl.json().data.uploadUrl), headers: { host: "elsewhere.test", "content-type": "application/octet-stream" }, payload: "a" })).statusCode, 200);
  t.equal((await s.app.inject({ method: "GET", url: "/healthz", headers: { host: CONTENT } })).statusCode, 200);
});
