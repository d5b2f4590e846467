/// <reference lib="dom" />
/**
 * Stored script never runs on Operon's origin, shown in real Chromium (docs/security.md,
 * "User content"). Files whose script would leave a mark — a request to the server, the
 * document's title, localStorage of the origin — are uploaded through POST /v1/files/upload:
 * an HTML page as text/html, an SVG with a script as image/svg+xml, and an XHTML page
 * uploaded as image/svg+xml (served with that type a browser parses it as XML, and XHTML
 * script elements would run). Each is opened through its presigned download URL: the browser
 * downloads it (Content-Disposition: attachment). Then the same URL is opened with that header
 * stripped, as if a browser rendered it anyway: the sandboxing CSP still keeps every script
 * from running. A control strips the CSP too, and the marks appear.
 */
import t, { type Test } from "tap";
import type { AddressInfo } from "node:net";
import { multipartBody, testApp } from "../support/app.js";
import { chromiumMissing, openBrowser, openPage } from "../support/browser.js";
import { until } from "../support/wait.js";

const missing = chromiumMissing();
if (missing) {
  t.fail(`Chromium is required for the browser tests and \`make test\` installs it: ${missing}`);
} else {
  const a = await testApp();
  t.teardown(() => a.close());
  await a.service.createWorkspace("acme", "ws1");
  const h = { authorization: `Bearer ${await a.key("acme", ["files"])}` };
  await a.app.listen({ port: 0, host: "127.0.0.1" });
  const origin = `http://127.0.0.1:${(a.app.server.address() as AddressInfo).port}`;
  const browser = await openBrowser();
  t.teardown(() => browser.close());

  // What a script that ran would do: ask the server for /marker, retitle, write localStorage.
  const mark = (id: string) => `fetch("/marker/${id}"); document.title = "ran-${id}"; localStorage.setItem("ran", "${id}");`;
  const files = [
    { name: "page.html", type: "text/html", body: `<!doctype html><html><head><title>page</title></head><body><p>hello</p><script>${mark("html")}</script><img src="x" onerror='${mark("html-onerror")}'></body></html>` },
    { name: "drawing.svg", type: "image/svg+xml", body: `<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100" onload='${mark("svg-onload")}'><title>drawing</title><rect width="50" height="50" fill="red"/><script>${mark("svg")}</script></svg>` },
    { name: "page.svg", type: "image/svg+xml", body: `<html xmlns="http://www.w3.org/1999/xhtml"><head><title>xhtml</title></head><body><p>hello</p><script>${mark("xhtml")}</script></body></html>` },
  ];

  async function downloadUrl(f: (typeof files)[number]): Promise<string> {
    const { payload, headers } = multipartBody([["workspace_id", "ws1"], ["path", "hostile"]], { name: "file", filename: f.name, content: f.body, type: f.type });
    const up = await a.app.inject({ method: "POST", url: "/v1/files/upload", headers: { ...h, ...headers }, payload });
    if (up.statusCode !== 201) throw new Error(up.body);
    const dl = await a.app.inject({ method: "GET", url: `/v1/files/download?workspace_id=ws1&key=hostile/${f.name}`, headers: h });
    const u = new URL(dl.json().data.downloadUrl as string);
    return `${origin}${u.pathname}${u.search}`;
  }

  /** Nothing a script would have done: no /marker request, the title unchanged, localStorage of the origin empty. */
  async function leftNoMark(tt: Test, rec: Awaited<ReturnType<typeof openPage>>, what: string) {
    await new Promise((r) => setTimeout(r, 500));
    tt.same(rec.requests.filter((r) => r.url.includes("/marker")).map((r) => r.url), [], `${what}: no script asked for /marker`);
    tt.notMatch(await rec.page.title(), /^ran-/, `${what}: the title is not the script's`);
    const check = await rec.context.newPage();
    await check.goto(`${origin}/healthz`);
    tt.equal(await check.evaluate(() => localStorage.getItem("ran")), null, `${what}: nothing in the origin's localStorage`);
    await check.close();
  }

  for (const f of files) {
    t.test(`${f.name} uploaded as ${f.type}`, async (tt) => {
      const url = await downloadUrl(f);
      const head = await fetch(url);
      tt.equal(head.status, 200);
      tt.equal(head.headers.get("content-type")?.split(";")[0], f.type, "served with the type it was uploaded with");
      tt.equal(head.headers.get("x-content-type-options"), "nosniff");
      tt.match(head.headers.get("content-security-policy"), /(^|; )sandbox($|;)/);
      tt.match(head.headers.get("content-disposition"), /^attachment;/);
      tt.equal(await head.text(), f.body, "the bytes are untouched");

      // As served: a download, never a page.
      const rec = await openPage(browser.browser, `${origin}/healthz`);
      tt.teardown(() => rec.close());
      const [download] = await Promise.all([
        rec.page.waitForEvent("download", { timeout: 15_000 }),
        rec.page.goto(url).catch((e: Error) => e),
      ]);
      tt.equal(download.suggestedFilename(), f.name, "Chromium downloads it");
      tt.equal(rec.page.url(), `${origin}/healthz`, "and stays on the page it was on");
      await leftNoMark(tt, rec, "downloaded");

      // Rendered anyway (Content-Disposition removed on the way): the sandbox holds.
      const shown = await openPage(browser.browser, url, {
        beforeNavigation: (page) => page.route(/\/v1\/storage\/object/, async (route) => {
          const res = await route.fetch();
          const headers = res.headers();
          delete headers["content-disposition"];
          await route.fulfill({ response: res, headers });
        }),
      });
      tt.teardown(() => shown.close());
      tt.equal(shown.page.url(), url, "the file is shown as a page");
      tt.equal(await shown.page.evaluate(() => self.origin), "null", "in an opaque origin");
      await leftNoMark(tt, shown, "shown");
      tt.ok(shown.consoleErrors.some((m) => /sandboxed|allow-scripts/.test(m)), `Chromium blocked its script (${JSON.stringify(shown.consoleErrors.map((m) => m.slice(0, 120)))})`);

      // The control: without the policy either, the script runs and the checks above see it.
      const bare = await openPage(browser.browser, url, {
        beforeNavigation: (page) => page.route(/\/v1\/storage\/object/, async (route) => {
          const res = await route.fetch();
          const headers = res.headers();
          delete headers["content-disposition"];
          delete headers["content-security-policy"];
          await route.fulfill({ response: res, headers });
        }),
      });
      tt.teardown(() => bare.close());
      await until("the unprotected script's request", () => bare.requests.some((r) => r.url.includes("/marker")), 10_000);
      tt.match(await bare.page.title(), /^ran-/, "unprotected, the script runs");
    });
  }
}
