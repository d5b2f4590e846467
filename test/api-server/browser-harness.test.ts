// The browser harness the viewer tests stand on (test/support/browser.ts), checked against a
// tiny page served from 127.0.0.1: every request is recorded (a foreign one too), console
// and page errors are captured, CSP violations are recorded (even a caught eval, which logs
// no console error), a drawn 2D canvas and a drawn WebGL canvas read as non-blank
// while an untouched one reads as blank, and screenshots land in .tap/screenshots/.
import t from "tap";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { existsSync, readFileSync } from "node:fs";
import { crc32, deflateSync } from "node:zlib";
import {
  canvasNonBlank, chromiumMissing, decodePng, distinctColours, openBrowser, openPage, screenshot, waitForViewer,
  type BrowserHandle,
} from "../support/browser.js";

// Nothing listens on 127.0.0.2:9 (a loopback address), and Chromium refuses port 9 outright
// (net::ERR_UNSAFE_PORT): the request is recorded and never leaves the machine. A second
// server on 127.0.0.2 stands for a foreign origin that answers (an image).
const FOREIGN = "http://127.0.0.2:9/x";
const DATA = JSON.stringify({ hello: "world", padding: "x".repeat(4000) });

const PIXEL = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==", "base64");

const makePage = (foreignImage: string) => `<!doctype html>
<html><head><meta charset="utf-8"><title>harness</title>
<style>body{margin:0;background:#fff} canvas{display:block;margin:4px}</style></head>
<body>
<canvas id="c2d" width="200" height="100"></canvas>
<canvas id="cgl" width="200" height="100"></canvas>
<canvas id="blank" width="200" height="100"></canvas>
<img id="px" src="${foreignImage}" width="1" height="1" alt="">
<script>
const t0 = performance.now();
window.operonViewer = { kind: "self-test", ready: false, counts: {} };
const ctx = document.getElementById("c2d").getContext("2d");
ctx.fillStyle = "#c00"; ctx.fillRect(10, 10, 80, 40);
ctx.fillStyle = "#06c"; ctx.beginPath(); ctx.arc(140, 50, 30, 0, Math.PI * 2); ctx.fill();

const gl = document.getElementById("cgl").getContext("webgl");
let webgl = "none";
if (gl) {
  webgl = gl.getParameter(gl.VERSION);
  gl.clearColor(0.1, 0.4, 0.8, 1); gl.clear(gl.COLOR_BUFFER_BIT);
  const sh = (type, src) => { const s = gl.createShader(type); gl.shaderSource(s, src); gl.compileShader(s); return s; };
  const prog = gl.createProgram();
  gl.attachShader(prog, sh(gl.VERTEX_SHADER, "attribute vec2 p; void main(){ gl_Position = vec4(p, 0.0, 1.0); }"));
  gl.attachShader(prog, sh(gl.FRAGMENT_SHADER, "precision mediump float; void main(){ gl_FragColor = vec4(1.0, 0.85, 0.1, 1.0); }"));
  gl.linkProgram(prog); gl.useProgram(prog);
  gl.bindBuffer(gl.ARRAY_BUFFER, gl.createBuffer());
  gl.bufferData(gl.ARRAY_BUFFER, new Float32Array([-0.6, -0.6, 0.6, -0.6, 0.0, 0.7]), gl.STATIC_DRAW);
  const loc = gl.getAttribLocation(prog, "p");
  gl.enableVertexAttribArray(loc); gl.vertexAttribPointer(loc, 2, gl.FLOAT, false, 0, 0);
  gl.drawArrays(gl.TRIANGLES, 0, 3);
}
console.error("harness self-test: deliberate console error");
Promise.all([
  fetch("/data.json").then((r) => r.json()),
  fetch(${JSON.stringify(FOREIGN)}).then(() => "reached", () => "refused"),
]).then(([data, foreign]) => {
  window.operonViewer = { kind: "self-test", ready: true, webgl, foreign,
    counts: { canvases: document.querySelectorAll("canvas").length, dataBytes: JSON.stringify(data).length },
    firstPaintMs: Math.round(performance.now() - t0) };
});
</script></body></html>`;

const broken = `<!doctype html><html><body><script>
window.operonViewer = { kind: "self-test", ready: false, counts: {} };
setTimeout(() => { window.operonViewer.error = "could not load"; throw new Error("deliberate page error"); }, 10);
</script></body></html>`;

// Under `script-src 'self'`: an eval and a WebAssembly compile, both caught by the page.
const strict = `<!doctype html><html><body><script src="/strict.js"></script></body></html>`;
const strictJs = `window.operonViewer = { kind: "self-test", ready: false, counts: {} };
try { eval("1"); } catch (e) { window.operonViewer.evalError = String(e); }
WebAssembly.compile(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0])).catch(() => undefined).then(() => { window.operonViewer.ready = true; });`;

async function listen(server: Server, host: string): Promise<string> {
  await new Promise<void>((r) => server.listen(0, host, r));
  return `http://${host}:${(server.address() as AddressInfo).port}`;
}

async function serve(): Promise<{ servers: Server[]; origin: string; pixelUrl: string; page: string }> {
  const foreign = createServer((req, res) => {
    res.writeHead(req.url === "/pixel.png" ? 200 : 404, { "content-type": "image/png" });
    res.end(req.url === "/pixel.png" ? PIXEL : undefined);
  });
  const pixelUrl = `${await listen(foreign, "127.0.0.2")}/pixel.png`;
  const page = makePage(pixelUrl);
  const server = createServer((req, res) => {
    if (req.url === "/") { res.writeHead(200, { "content-type": "text/html; charset=utf-8" }); res.end(page); return; }
    if (req.url === "/broken") { res.writeHead(200, { "content-type": "text/html; charset=utf-8" }); res.end(broken); return; }
    if (req.url === "/strict") { res.writeHead(200, { "content-type": "text/html; charset=utf-8", "content-security-policy": "script-src 'self'" }); res.end(strict); return; }
    if (req.url === "/strict.js") { res.writeHead(200, { "content-type": "text/javascript" }); res.end(strictJs); return; }
    if (req.url === "/data.json") { res.writeHead(200, { "content-type": "application/json" }); res.end(DATA); return; }
    res.writeHead(404); res.end();
  });
  return { servers: [server, foreign], origin: await listen(server, "127.0.0.1"), pixelUrl, page };
}

// A PNG built here (RGB, one filter type per row) so the decoder is checked independently of Chromium.
function makePng(width: number, height: number, pixel: (x: number, y: number) => [number, number, number]): Buffer {
  const rows: number[] = [];
  const prev = new Array<number>(width * 3).fill(0);
  for (let y = 0; y < height; y++) {
    const filter = y % 5;
    const line: number[] = [];
    for (let x = 0; x < width; x++) line.push(...pixel(x, y));
    rows.push(filter);
    for (let i = 0; i < line.length; i++) {
      const a = i >= 3 ? line[i - 3]! : 0;
      const b = prev[i]!;
      const c = i >= 3 ? prev[i - 3]! : 0;
      const p = a + b - c;
      const paeth = Math.abs(p - a) <= Math.abs(p - b) && Math.abs(p - a) <= Math.abs(p - c) ? a : Math.abs(p - b) <= Math.abs(p - c) ? b : c;
      const pred = [0, a, b, (a + b) >> 1, paeth][filter]!;
      rows.push((line[i]! - pred) & 0xff);
    }
    prev.splice(0, prev.length, ...line);
  }
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4); len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, "latin1"), data]);
    const crc = Buffer.alloc(4); crc.writeUInt32BE(crc32(body));
    return Buffer.concat([len, body, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0); ihdr.writeUInt32BE(height, 4); ihdr[8] = 8; ihdr[9] = 2;
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", ihdr), chunk("IDAT", deflateSync(Buffer.from(rows))), chunk("IEND", Buffer.alloc(0)),
  ]);
}

t.test("the PNG decoder undoes every filter type", async (t) => {
  const px = (x: number, y: number): [number, number, number] => [(x * 37 + y * 11) & 0xff, (x * y) & 0xff, x < 4 ? 0 : 200];
  const png = makePng(9, 10, px);
  const d = decodePng(png);
  t.equal(d.width, 9);
  t.equal(d.height, 10);
  let same = true;
  for (let y = 0; y < 10; y++) for (let x = 0; x < 9; x++) {
    const [r, g, b] = px(x, y);
    const i = (y * 9 + x) * 4;
    if (d.rgba[i] !== r || d.rgba[i + 1] !== g || d.rgba[i + 2] !== b || d.rgba[i + 3] !== 255) same = false;
  }
  t.ok(same, "pixels round-trip");
  t.equal(distinctColours(makePng(4, 4, () => [1, 2, 3])), 1, "a flat image has one colour");
  t.throws(() => decodePng(Buffer.from("not a png")), /not a PNG/);
  const corrupt = Buffer.from(png);
  corrupt[40] = corrupt[40]! ^ 0xff;
  t.throws(() => decodePng(corrupt), /bad CRC/, "a damaged chunk is refused");
});

t.test("the harness records requests, errors and canvases in real Chromium", { skip: chromiumMissing() }, async (t) => {
  const { servers, origin, pixelUrl, page } = await serve();
  for (const s of servers) t.teardown(() => new Promise<void>((r) => s.close(() => r())));
  const b: BrowserHandle = await openBrowser();
  t.teardown(() => b.close());

  const rec = await openPage(b.browser, `${origin}/`, { viewport: { width: 640, height: 480 } });
  const state = await waitForViewer(rec.page, 30_000);
  t.equal(state.ready, true, "viewer handshake");
  t.equal(state.kind, "self-test");
  t.equal(state["foreign"], "refused", "the foreign fetch was attempted and refused");
  t.match(String(state["webgl"]), /^WebGL/, `WebGL available (${String(state["webgl"])})`);
  t.equal(state.counts["canvases"], 3);

  const urls = rec.requests.map((r) => r.url);
  t.ok(urls.includes(`${origin}/`), "the document is recorded");
  t.ok(urls.includes(`${origin}/data.json`), "the same-origin fetch is recorded");
  t.ok(urls.includes(FOREIGN), "the foreign fetch is recorded");
  const foreignEntry = rec.requests.find((r) => r.url === FOREIGN);
  t.ok(foreignEntry?.failure, `the foreign fetch failed (${foreignEntry?.failure})`);
  t.strictSame(rec.foreignRequests(origin).sort(), [FOREIGN, pixelUrl].sort(), "foreignRequests lists exactly the foreign URLs");
  t.strictSame(rec.foreignRequests(`${origin}/some/path`).sort(), [FOREIGN, pixelUrl].sort(), "origin may be given as any URL on it");
  const pixel = rec.requests.find((r) => r.url === pixelUrl);
  t.equal(pixel?.status, 200, "the answering foreign origin was reached");
  t.equal(pixel?.resourceType, "image");
  t.ok((pixel?.bytes ?? 0) >= PIXEL.length, `its wire bytes are counted (${pixel?.bytes})`);

  const doc = rec.requests.find((r) => r.url === `${origin}/`);
  const data = rec.requests.find((r) => r.url === `${origin}/data.json`);
  t.equal(doc?.status, 200);
  t.equal(data?.status, 200);
  t.equal(data?.resourceType, "fetch");
  t.ok((data?.bytes ?? 0) >= DATA.length, `wire bytes of data.json (${data?.bytes}) cover its body (${DATA.length})`);
  t.ok((doc?.bytes ?? 0) >= page.length, `wire bytes of the document (${doc?.bytes}) cover its body`);
  t.ok(rec.transferredBytes() >= DATA.length + page.length + PIXEL.length, `transferredBytes ${rec.transferredBytes()}`);

  t.ok(rec.consoleErrors.some((m) => m.includes("deliberate console error")), "console.error captured");
  t.strictSame(rec.pageErrors, [], "no uncaught errors");
  t.strictSame(rec.cspViolations, [], "no CSP violation on a page without a policy");

  const all = await canvasNonBlank(rec.page, "canvas");
  t.equal(all.total, 3);
  t.equal(all.nonBlank, 2, "two drawn canvases, one blank");
  const [c2d, cgl, blank] = all.canvases;
  t.ok(c2d?.nonBlank, `2D canvas drawn (${c2d?.distinctColours} colours, ${c2d?.nonBackgroundFraction})`);
  t.ok(cgl?.nonBlank, `WebGL canvas drawn (${cgl?.distinctColours} colours, ${cgl?.nonBackgroundFraction}, background ${cgl?.background})`);
  t.equal(cgl?.background, "#1a66ccff", "WebGL clear colour is the background");
  t.equal(blank?.nonBlank, false, "untouched canvas is blank");
  t.equal(blank?.distinctColours, 1);
  t.equal((await canvasNonBlank(rec.page, "#cgl")).nonBlank, 1, "a single canvas by selector");
  t.equal((await canvasNonBlank(rec.page, "#nothing")).total, 0);

  const file = await screenshot(rec.page, "browser-harness self-test");
  t.match(file, /\.tap\/screenshots\/browser-harness_self-test\.png$/);
  t.ok(existsSync(file), "screenshot written");
  const shot = decodePng(readFileSync(file));
  t.equal(shot.width, 640);
  t.equal(shot.height, 480);
  t.ok(distinctColours(readFileSync(file)) > 3, "screenshot shows the drawings");
  await rec.close();

  const mobile = await openPage(b.browser, `${origin}/`, { viewport: { width: 390, height: 844 }, isMobile: true, deviceScaleFactor: 2 });
  t.equal((await waitForViewer(mobile.page)).ready, true, "mobile emulation loads too");
  t.equal(decodePng(readFileSync(await screenshot(mobile.page, "browser-harness-mobile"))).width, 780, "device pixels");
  await mobile.close();

  const bad = await openPage(b.browser, `${origin}/broken`);
  const failed = await waitForViewer(bad.page, 10_000);
  t.equal(failed.error, "could not load", "a viewer error ends the wait");
  await t.resolves(async () => {
    for (let i = 0; i < 50 && bad.pageErrors.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
  });
  t.ok(bad.pageErrors.some((e) => e.includes("deliberate page error")), "uncaught page error captured");
  t.strictSame(bad.foreignRequests(origin), [], "no foreign requests");
  await bad.close();

  const strictPage = await openPage(b.browser, `${origin}/strict`);
  const strictState = await waitForViewer(strictPage.page, 10_000);
  t.match(String(strictState["evalError"]), /EvalError/, "the eval was refused");
  t.strictSame(strictPage.cspViolations, ["script-src eval", "script-src wasm-eval"], "both violations recorded");
  t.strictSame(strictPage.consoleErrors, [], "a caught eval logs no console error: only the event tells");
  await strictPage.close();

  const never = await openPage(b.browser, "data:text/html,<p>no viewer</p>");
  await t.rejects(waitForViewer(never.page, 300), /viewer not ready after 300 ms \(window.operonViewer = null\)/);
  t.strictSame(never.foreignRequests(origin), [], "data: URLs are not foreign requests");
  await never.close();
});
