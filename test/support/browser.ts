/**
 * Driving real Chromium in tests (the viewer pages): Debian's /usr/bin/chromium through
 * playwright-core, never a downloaded browser. Records every request a page makes (with the
 * bytes that crossed the wire, from the CDP Network domain), console errors, uncaught page
 * errors and Content-Security-Policy violations (the document's `securitypolicyviolation`
 * events: a blocked eval, script, connection or image); waits for our viewer pages'
 * `window.operonViewer` handshake; takes screenshots into .tap/screenshots/; and tells a
 * drawn canvas from a blank one by decoding an element screenshot (works for 2D and WebGL
 * canvases alike, whatever `preserveDrawingBuffer` is).
 */
import { accessSync, constants, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type Browser, type BrowserContext, type Page, type Request } from "playwright-core";
import { decodePng } from "./images.js";

export const CHROMIUM_PATH = "/usr/bin/chromium";

/**
 * Chromium flags. WebGL: Debian's Chromium headless has no GPU here, and falls back to ANGLE
 * on SwiftShader's Vulkan device; `--use-angle=swiftshader` asks for that explicitly and
 * `--enable-unsafe-swiftshader` keeps WebGL allowed on the software rasterizer (newer
 * Chromium releases stop the automatic fallback without it).
 */
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-default-apps",
  "--disable-sync",
  "--no-first-run",
  "--disable-dev-shm-usage",
  "--use-angle=swiftshader",
  "--enable-unsafe-swiftshader",
];

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const SCREENSHOT_DIR = join(repoRoot, ".tap", "screenshots");

/** Why Chromium cannot run here, or undefined when it can (a tap `skip` reason as it is). */
export function chromiumMissing(): string | undefined {
  try {
    accessSync(CHROMIUM_PATH, constants.X_OK);
  } catch {
    return `${CHROMIUM_PATH} is missing (Debian package chromium; \`make test\` installs it)`;
  }
  return undefined;
}

export interface BrowserHandle {
  browser: Browser;
  close(): Promise<void>;
}

export async function openBrowser(): Promise<BrowserHandle> {
  const why = chromiumMissing();
  if (why) throw new Error(why);
  const browser = await chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: CHROMIUM_ARGS, timeout: 60_000 });
  return {
    browser,
    close: async () => { await browser.close().catch(() => undefined); },
  };
}

export interface RecordedRequest {
  url: string;
  method: string;
  /** Playwright's resource type (document, script, fetch, xhr, image, websocket, ...). */
  resourceType: string;
  status?: number;
  /** The request failed (net::ERR_...), as reported by the browser. */
  failure?: string;
  /** Bytes received over the network for it (CDP loadingFinished.encodedDataLength: headers + body as encoded). */
  bytes?: number;
}

export interface PageRecord {
  page: Page;
  context: BrowserContext;
  requests: RecordedRequest[];
  consoleErrors: string[];
  pageErrors: string[];
  /** Each `securitypolicyviolation` the document saw: `<directive> <blocked URI or "eval"/"inline"/"wasm-eval">`. */
  cspViolations: string[];
  /** URLs of requests to any origin other than `origin` (data:, blob: and about: URLs excluded). */
  foreignRequests(origin: string): string[];
  /** Sum of encodedDataLength over every finished request of the page: what crossed the wire. */
  transferredBytes(): number;
  close(): Promise<void>;
}

export interface OpenPageOptions {
  viewport?: { width: number; height: number };
  isMobile?: boolean;
  deviceScaleFactor?: number;
  /** When `goto` resolves; default "load". */
  waitUntil?: "load" | "domcontentloaded" | "networkidle" | "commit";
  timeoutMs?: number;
  /** Called with the new page before it navigates (to install `page.route` handlers). */
  beforeNavigation?: (page: Page) => Promise<unknown>;
}

const localSchemes = new Set(["data:", "blob:", "about:", "chrome-error:"]);

/**
 * Opens `url` in a fresh browser context, recording from before the first byte. Requests of
 * dedicated workers are listed but carry no `bytes` (the CDP session is the page's own).
 */
export async function openPage(browser: Browser, url: string, opts: OpenPageOptions = {}): Promise<PageRecord> {
  const context = await browser.newContext({
    viewport: opts.viewport ?? { width: 1280, height: 800 },
    isMobile: opts.isMobile ?? false,
    hasTouch: opts.isMobile ?? false,
    deviceScaleFactor: opts.deviceScaleFactor ?? 1,
  });
  const page = await context.newPage();
  page.setDefaultTimeout(opts.timeoutMs ?? 30_000);
  const requests: RecordedRequest[] = [];
  const consoleErrors: string[] = [];
  const pageErrors: string[] = [];
  const cspViolations: string[] = [];
  const byRequest = new Map<Request, RecordedRequest>();
  // CDP finished-loading sizes not yet matched to a Playwright request, by URL.
  const pendingBytes = new Map<string, number[]>();
  let total = 0;

  const claim = (entry: RecordedRequest) => {
    const q = pendingBytes.get(entry.url);
    if (q && q.length > 0) entry.bytes = q.shift();
  };
  context.on("request", (r) => {
    const entry: RecordedRequest = { url: r.url(), method: r.method(), resourceType: r.resourceType() };
    byRequest.set(r, entry);
    requests.push(entry);
    claim(entry);
  });
  context.on("response", (res) => {
    const entry = byRequest.get(res.request());
    if (entry) entry.status = res.status();
  });
  context.on("requestfailed", (r) => {
    const entry = byRequest.get(r);
    if (entry) entry.failure = r.failure()?.errorText ?? "failed";
  });
  page.on("websocket", (ws) => {
    requests.push({ url: ws.url(), method: "GET", resourceType: "websocket" });
  });
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => { pageErrors.push(e.stack ?? e.message ?? String(e)); });
  // A binding and an init script are installed through the DevTools protocol, outside the page's CSP.
  await context.exposeBinding("__operonCspViolation", (_source, v: string) => { cspViolations.push(v); });
  await context.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (e) => {
      (globalThis as unknown as { __operonCspViolation(v: string): void }).__operonCspViolation(`${e.effectiveDirective} ${e.blockedURI || "(none)"}`);
    }, true);
  });

  const cdp = await context.newCDPSession(page);
  const cdpUrl = new Map<string, string>();
  cdp.on("Network.requestWillBeSent", (e) => { cdpUrl.set(e.requestId, e.request.url); });
  cdp.on("Network.loadingFinished", (e) => {
    total += e.encodedDataLength;
    const u = cdpUrl.get(e.requestId);
    cdpUrl.delete(e.requestId);
    if (u === undefined) return;
    const entry = requests.find((r) => r.url === u && r.bytes === undefined && r.resourceType !== "websocket");
    if (entry) entry.bytes = e.encodedDataLength;
    else pendingBytes.set(u, [...(pendingBytes.get(u) ?? []), e.encodedDataLength]);
  });
  cdp.on("Network.loadingFailed", (e) => { cdpUrl.delete(e.requestId); });
  await cdp.send("Network.enable");

  await opts.beforeNavigation?.(page);
  await page.goto(url, { waitUntil: opts.waitUntil ?? "load" });

  return {
    page,
    context,
    requests,
    consoleErrors,
    pageErrors,
    cspViolations,
    foreignRequests(origin: string): string[] {
      const mine = new URL(origin).origin;
      return requests
        .filter((r) => {
          let u: URL;
          try { u = new URL(r.url); } catch { return true; }
          if (localSchemes.has(u.protocol)) return false;
          return u.origin !== mine;
        })
        .map((r) => r.url);
    },
    transferredBytes: () => total,
    close: async () => { await context.close().catch(() => undefined); },
  };
}

/** What our viewer pages publish as `window.operonViewer`. */
export interface ViewerState {
  kind: string;
  ready: boolean;
  error?: string;
  counts: Record<string, number>;
  firstPaintMs?: number;
  [k: string]: unknown;
}

/** Waits until the page's viewer is ready or has failed, and returns its state. */
export async function waitForViewer(page: Page, timeoutMs = 30_000): Promise<ViewerState> {
  try {
    await page.waitForFunction(() => {
      const v = (globalThis as unknown as { operonViewer?: { ready?: unknown; error?: unknown } }).operonViewer;
      return !!v && (v.ready === true || !!v.error);
    }, undefined, { timeout: timeoutMs, polling: 50 });
  } catch (e) {
    const now = await page.evaluate(() => JSON.stringify((globalThis as unknown as { operonViewer?: unknown }).operonViewer ?? null)).catch(() => "unavailable");
    throw new Error(`viewer not ready after ${timeoutMs} ms (window.operonViewer = ${now}): ${(e as Error).message.split("\n")[0]}`, { cause: e });
  }
  return page.evaluate(() => (globalThis as unknown as { operonViewer: ViewerState }).operonViewer);
}

/** Saves a PNG to .tap/screenshots/<name>.png and returns its path. */
export async function screenshot(page: Page, name: string, opts: { fullPage?: boolean } = {}): Promise<string> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const file = join(SCREENSHOT_DIR, `${name.replace(/[^A-Za-z0-9._-]+/g, "_")}.png`);
  const png = await page.screenshot({ fullPage: opts.fullPage ?? false });
  writeFileSync(file, png);
  return file;
}

// --- PNG decoding: test/support/images.ts (one decoder for screenshots and charts) -------

export { decodePng, type DecodedPng } from "./images.js";

/** Number of distinct RGBA colours in a PNG image. */
export function distinctColours(png: Buffer): number {
  const { rgba } = decodePng(png);
  const view = new Uint32Array(rgba.buffer, rgba.byteOffset, rgba.length / 4);
  return new Set(view).size;
}

export interface ImageStats {
  width: number;
  height: number;
  distinctColours: number;
  /** The background: the most common colour among the four corners, as #rrggbbaa. */
  background: string;
  /** Fraction of pixels differing from the background by more than a small tolerance. */
  nonBackgroundFraction: number;
}

/** Colour statistics of a PNG image. */
export function imageStats(png: Buffer): ImageStats {
  const { width, height, rgba } = decodePng(png);
  const view = new Uint32Array(rgba.buffer, rgba.byteOffset, rgba.length / 4);
  const n = width * height;
  if (n === 0) return { width, height, distinctColours: 0, background: "", nonBackgroundFraction: 0 };
  const corners = [0, width - 1, (height - 1) * width, n - 1].map((i) => i * 4);
  const votes = new Map<string, number>();
  for (const c of corners) {
    const k = Array.from(rgba.subarray(c, c + 4)).join(",");
    votes.set(k, (votes.get(k) ?? 0) + 1);
  }
  const bg = [...votes.entries()].sort((x, y) => y[1] - x[1])[0]![0].split(",").map(Number);
  let differing = 0;
  for (let i = 0; i < n; i++) {
    const d = i * 4;
    const delta = Math.max(
      Math.abs(rgba[d]! - bg[0]!), Math.abs(rgba[d + 1]! - bg[1]!),
      Math.abs(rgba[d + 2]! - bg[2]!), Math.abs(rgba[d + 3]! - bg[3]!));
    if (delta > 8) differing++;
  }
  return {
    width,
    height,
    distinctColours: new Set(view).size,
    background: "#" + bg.map((v) => v.toString(16).padStart(2, "0")).join(""),
    nonBackgroundFraction: differing / n,
  };
}

export interface CanvasStats extends Partial<ImageStats> {
  index: number;
  nonBlank: boolean;
  /** Why it could not be captured (not visible, zero size, ...). */
  error?: string;
}

export interface CanvasReport {
  /** Canvases matching the selector. */
  total: number;
  /** How many of them show a drawing. */
  nonBlank: number;
  canvases: CanvasStats[];
}

/**
 * Whether the canvases matching `selector` show anything: each is captured with an element
 * screenshot (what is on screen, for 2D and WebGL alike) and decoded here. A canvas counts as
 * drawn when at least `minFraction` of its pixels (default 0.001) and at least 10 pixels
 * differ from its background colour.
 */
export async function canvasNonBlank(page: Page, selector: string, opts: { minFraction?: number } = {}): Promise<CanvasReport> {
  const minFraction = opts.minFraction ?? 0.001;
  const loc = page.locator(selector);
  const total = await loc.count();
  const canvases: CanvasStats[] = [];
  for (let i = 0; i < total; i++) {
    try {
      const png = await loc.nth(i).screenshot({ timeout: 10_000, animations: "disabled" });
      const s = imageStats(png);
      const drawn = s.nonBackgroundFraction >= minFraction && s.nonBackgroundFraction * s.width * s.height >= 10;
      canvases.push({ index: i, ...s, nonBlank: drawn });
    } catch (e) {
      canvases.push({ index: i, nonBlank: false, error: (e as Error).message.split("\n")[0] ?? String(e) });
    }
  }
  return { total, nonBlank: canvases.filter((c) => c.nonBlank).length, canvases };
}
