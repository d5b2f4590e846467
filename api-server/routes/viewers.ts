/**
 * Viewer links (spec: Visualizations; docs/viewers.md). `POST /v1/visualizations/viewer-url`
 * issues a signed, expiring capability for one workspace file (and the index and reference
 * it needs); `/view/<token>` serves the page for its kind, and everything the page loads —
 * scripts, styles, the file's bytes (with Range), its index — comes from this server under
 * `/view/`, so a viewer works in an air-gapped cluster. A token names no path the client can
 * change: the data URLs take fixed names (`data/primary`, `data/primary-index`, …) that the
 * server maps to keys from the signed grant.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import type { FastifyInstance, FastifyReply } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { detectViewer, VIEWER_DEFAULT_SECONDS, VIEWER_FORMATS, VIEWER_KIND, VIEWER_MAX_SECONDS, type FileGrant, isFileGrant, type ViewerGrant } from "../../core/viewers.js";
import { workspaceRoot as workspaceRootKey } from "../../core/layout.js";
import type { ObjectStore } from "../../core/ports.js";
import { DATA_NAMES, ViewerData, ViewerDataError, type DataName, type PreparedView, type ViewerDataDeps } from "../../engine/viewer-data.js";
import { createToolRunner, type ToolRunner } from "../../adapters/local/tool-runner.js";
import { ReaderPool, type ReaderPoolOptions } from "../../engine/readers/pool.js";
import { organizationSlots } from "../../engine/render-jobs.js";
import { ApiError } from "../errors.js";
import { dataOf, errorResponses, jsonResponse } from "../openapi.js";
import { sendObject } from "../byte-range.js";
import { verifyGrant } from "../../engine/viewer-token.js";
import { createViewerLink } from "../../engine/viewer-links.js";
import { requireAuth, workspaceId } from "./common.js";
import { humanSize } from "../../core/sizes.js";

const require = createRequire(import.meta.url);

/**
 * The pages' own scripts and styles (web/viewers/), from the source tree or next to dist/.
 * Without them (an image built without web/) the API still serves; the pages say what is missing.
 */
function webDir(): string | undefined {
  for (const rel of ["../../web/viewers/", "../../../web/viewers/"]) {
    const p = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(p)) return p;
  }
  return undefined;
}

interface Asset { body: Buffer; type: string; etag: string }

/** Every file a page may load, by the name it is served under: nothing outside this list. */
function loadAssets(): Map<string, Asset> {
  const dir = webDir();
  const files: Record<string, string> = {
    "igv.min.js": require.resolve("igv/dist/igv.min.js"),
    "3Dmol-min.js": require.resolve("3dmol/build/3Dmol-min.js"),
  };
  for (const f of ["viewer.css", "common.js", "variant.js", "alignment.js", "sequence.js", "fastq.js", "structure.js", "table.js"]) if (dir) files[f] = dir + f;
  const assets = new Map<string, Asset>();
  for (const [name, path] of Object.entries(files)) {
    if (!existsSync(path)) continue;
    const body = name === "igv.min.js" ? patchIgv(readFileSync(path)) : readFileSync(path);
    assets.set(name, { body, type: name.endsWith(".css") ? "text/css; charset=utf-8" : "text/javascript; charset=utf-8", etag: `"${createHash("sha256").update(body).digest("hex").slice(0, 32)}"` });
  }
  return assets;
}

/**
 * igv.js 3.8.10 fails to load any genome whose sequence names start with `gi|` (NCBI's old
 * style, e.g. Debian's lambda phage FASTA): its alias table declares `const t = t.substring(…)`
 * (a temporal-dead-zone error). The bundle is served with that one statement rewritten;
 * when a later igv.js no longer has it, the bundle is served unchanged.
 */
export function patchIgv(bundle: Buffer): Buffer {
  const text = bundle.toString("utf8");
  const fixed = text.replace(/\{const ([A-Za-z_$][\w$]*)=\1\.substring\(0,([A-Za-z_$][\w$]*)\);([A-Za-z_$][\w$]*)\["ncbi-gi"\]=\1\}/, '{$3["ncbi-gi"]=$1.substring(0,$2)}');
  return fixed === text ? bundle : Buffer.from(fixed);
}

/** Scripts each kind's page loads, in order. */
const PAGE_SCRIPTS: Record<string, string[]> = {
  variant: ["igv.min.js", "common.js", "variant.js"],
  alignment: ["igv.min.js", "common.js", "alignment.js"],
  sequence: ["igv.min.js", "common.js", "sequence.js"],
  fastq: ["common.js", "fastq.js"],
  structure: ["3Dmol-min.js", "common.js", "structure.js"],
  table: ["common.js", "table.js"],
};

/**
 * Pages may load only from this server: no other origin for scripts, data, fonts or images
 * (a viewer library that tried would be blocked, and the tests would see the console error).
 * No page may evaluate strings as code (no `'unsafe-eval'`): neither igv.js nor 3Dmol.js
 * needs it (3Dmol's only `eval` turns a callback given as a string into a function, and the
 * structure page passes functions). The alignment page alone may compile WebAssembly
 * (`'wasm-unsafe-eval'`): igv.js decodes CRAM's rANS, arithmetic, bzip2 and lzma blocks with
 * htscodecs and xz built to WebAssembly.
 */
const cspWith = (script: string) => `default-src 'self'; script-src ${script}; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; object-src 'none'; base-uri 'none'; frame-ancestors 'self'; form-action 'none'`;
const CSP = cspWith("'self'");
const PAGE_CSP: Record<string, string> = { alignment: cspWith("'self' 'wasm-unsafe-eval'") };

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const jsonForScript = (v: unknown) => JSON.stringify(v).replace(/</g, "\\u003c");

function pageHeaders(reply: FastifyReply, kind?: string): FastifyReply {
  return reply.header("content-security-policy", PAGE_CSP[kind ?? ""] ?? CSP).header("x-content-type-options", "nosniff").header("referrer-policy", "no-referrer").header("cache-control", "private, no-store");
}

/** A small page for a link that cannot be shown: expired, altered, or its file gone. */
function problemPage(reply: FastifyReply, status: number, title: string, message: string): FastifyReply {
  return pageHeaders(reply).status(status).type("text/html; charset=utf-8").send(`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${esc(title)} — Operon</title><link rel="icon" href="data:,"><link rel="stylesheet" href="assets/viewer.css"></head><body class="problem"><main><h1>${esc(title)}</h1><p>${esc(message)}</p><p class="hint">Viewer links are issued by <code>POST /v1/visualizations/viewer-url</code> and stop working when they expire.</p></main></body></html>`);
}

export async function viewerRoutes(app: FastifyInstance, opts: { runner?: ToolRunner; readers?: ReaderPoolOptions; limits?: ViewerDataDeps["limits"] } = {}): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { store, config, clock, engine } = app.operon.deps;
  const readers = new ReaderPool(opts.readers);
  app.addHook("onClose", () => readers.close());
  const data = new ViewerData({ store, runner: opts.runner ?? createToolRunner(), readers, ...(engine ? { slots: organizationSlots(engine, store) } : {}), ...(opts.limits ? { limits: opts.limits } : {}) });
  const assets = loadAssets();
  if (!assets.has("common.js")) app.log.error("viewer pages unavailable: web/viewers/ is not installed next to the api-server");

  const grantOf = (token: string) => verifyGrant(config.signingSecret, token, clock.now());
  const anyGrant = (token: string): ViewerGrant => {
    const g = grantOf(token);
    if (!g.ok) throw new ApiError(g.status === 410 ? "gone" : "forbidden", g.reason);
    return g.grant;
  };
  /** A file viewer's grant; a chart preview's grant opens nothing but its image. */
  const apiGrant = (token: string): FileGrant => {
    const g = anyGrant(token);
    if (!isFileGrant(g)) throw new ApiError("not_found", "this link shows an image only");
    return g;
  };
  const dataError = (e: unknown) => {
    if (e instanceof ViewerDataError) return new ApiError(e.code === "not_found" ? "not_found" : "validation_failed", e.message);
    return e;
  };

  r.post("/v1/visualizations/viewer-url", {
    config: { scope: "files" },
    schema: {
      tags: ["visualizations"], summary: "A shareable viewer link for a workspace file", operationId: "createViewerUrl",
      description: "The link (`/view/<token>`) needs no API key: it shows this one file (with its index and `reference`) until it expires. Format from the extension (`.vcf .bcf .bam .sam .cram .fa .fasta .fastq .fq .pdb .cif .mmcif .csv .tsv .txt`, also gzipped) unless `format` says.",
      body: z.object({
        file_path: z.string().min(1).max(1024).optional().describe("Workspace-relative path (or the full storage key of the same workspace)."),
        file_key: z.string().min(1).max(1024).optional().describe("Alias of file_path."),
        workspace_id: workspaceId,
        format: z.string().max(32).optional().describe("vcf, bam, fasta, pdb or csv: overrides detection."),
        expires_in: z.number().int().min(1).max(VIEWER_MAX_SECONDS).default(VIEWER_DEFAULT_SECONDS).describe("Seconds, 1–86400 (default 3600)."),
        reference: z.string().min(1).max(1024).optional().describe("A FASTA in the workspace to show sequence under variants or alignments (required for CRAM)."),
        region: z.string().min(1).max(300).optional().describe("Where to open, `chr:start-end` (1-based)."),
      }),
      response: {
        200: jsonResponse(dataOf(z.object({
          viewer_url: z.string(), format: z.enum(VIEWER_FORMATS), expires_in: z.number().int(), expires_at: z.string(),
        })), "The link."),
        ...errorResponses(400, 401, 403, 404, 429, 500, 503),
      },
    },
  }, async (req) => {
    const { grant, link } = await createViewerLink({ store, clock, access: app.operon.auth.access, publicUrl: config.publicUrl, signingSecret: config.signingSecret }, requireAuth(req), req.body);
    // Start the preparation now (an index, a conversion): the page usually opens seconds later.
    data.prepare(grant).catch((e: unknown) => req.log.debug({ err: e }, "viewer preparation failed"));
    return { data: link };
  });

  /* ------------------------------------------------------------ the pages */

  app.get<{ Params: { name: string } }>("/view/assets/:name", { config: { scope: "public" }, schema: { hide: true } }, async (req, reply) => {
    const a = assets.get(req.params.name);
    if (!a) return reply.status(404).type("text/plain").send("not found");
    void reply.header("etag", a.etag).header("cache-control", "public, max-age=3600").header("x-content-type-options", "nosniff");
    if (req.headers["if-none-match"] === a.etag) return reply.status(304).send();
    return reply.type(a.type).send(a.body);
  });

  app.get<{ Params: { token: string } }>("/view/:token", { config: { scope: "public" }, schema: { hide: true } }, async (req, reply) => {
    const g = grantOf(req.params.token);
    if (!g.ok) return problemPage(reply, g.status, g.status === 410 ? "This viewer link has expired" : "This viewer link is not valid", g.reason);
    const grant = g.grant;
    if (!isFileGrant(grant)) return imagePage(reply, store, grant);
    const info = await store.head(data.key(grant, grant.k));
    if (!info) return problemPage(reply, 404, "File not found", `${grant.k} is no longer in its workspace.`);
    const detected = detectViewer(grant.k, grant.f);
    const kind = detected?.subtype === "fastq" ? "fastq" : VIEWER_KIND[grant.f];
    const name = grant.k.split("/").pop() ?? grant.k;
    const page = { kind, name, path: grant.k, size: info.size, format: grant.f, expiresAt: new Date(grant.exp * 1000).toISOString(), region: grant.g ?? null, reference: grant.r ?? null };
    if (!assets.has("common.js")) return problemPage(reply, 503, "Viewers are not installed", "This Operon server was installed without its viewer pages (web/viewers/).");
    const scripts = (PAGE_SCRIPTS[kind] ?? []).map((s) => `<script src="assets/${s}"></script>`).join("");
    return pageHeaders(reply, kind).type("text/html; charset=utf-8").send(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(name)} — Operon viewer</title><link rel="icon" href="data:,"><link rel="stylesheet" href="assets/viewer.css"></head>
<body data-kind="${kind}">
<header class="bar"><div class="file"><h1 class="name" title="${esc(grant.k)}">${esc(name)}</h1><div class="facts"><span>${esc(humanSize(info.size))}</span><span>${esc(kindLabel(kind))}</span><span class="expiry" data-expires="${page.expiresAt}">link expires ${page.expiresAt.replace("T", " ").replace(/\.\d+Z$/, " UTC")}</span></div></div><div class="brand">Operon</div></header>
<main id="viewer" aria-busy="true"><p class="status">Preparing the viewer…</p></main>
<footer id="notes"></footer>
<script type="application/json" id="operon-page">${jsonForScript({ ...page, token: req.params.token })}</script>
${scripts}
</body></html>`);
  });

  r.get("/view/:token/meta", { config: { scope: "public" }, schema: { hide: true, params: z.object({ token: z.string().max(8192) }) } }, async (req, reply) => {
    const grant = apiGrant(req.params.token);
    let view: PreparedView;
    try { view = await data.prepare(grant); } catch (e) { throw dataError(e); }
    const { files, ...rest } = view;
    void reply.header("cache-control", "private, no-store");
    return { data: { ...rest, expiresAt: new Date(grant.exp * 1000).toISOString(), data: Object.fromEntries(DATA_NAMES.filter((n) => files[n]).map((n) => [n, `data/${n}`])) } };
  });

  app.get<{ Params: { token: string; name: string } }>("/view/:token/data/:name", { config: { scope: "public" }, schema: { hide: true } }, async (req, reply) => {
    const any = anyGrant(req.params.token);
    if (!isFileGrant(any)) {
      // A chart preview: its one image. SVG is served so that nothing in it can run (CSP sandbox).
      if (req.params.name !== "primary") throw new ApiError("not_found", "no such data for this link");
      const svg = any.k.toLowerCase().endsWith(".svg");
      const maxAge = Math.max(0, Math.min(3600, any.exp - Math.floor(clock.now() / 1000)));
      return sendObject(reply, store, `${workspaceRootKey(any.o, any.w)}${any.k}`, req.headers.range, { contentType: svg ? "image/svg+xml" : "image/png", headers: { "cache-control": `private, max-age=${maxAge}`, "x-content-type-options": "nosniff", "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox" } });
    }
    const grant = any;
    if (!(DATA_NAMES as readonly string[]).includes(req.params.name)) throw new ApiError("not_found", "no such data for this link");
    let view: PreparedView;
    try { view = await data.prepare(grant); } catch (e) { throw dataError(e); }
    const key = view.files[req.params.name as DataName];
    if (!key) throw new ApiError("not_found", "no such data for this link");
    const maxAge = Math.max(0, Math.min(3600, grant.exp - Math.floor(clock.now() / 1000)));
    const text = /\.(fa|fasta|fna|fai)$/i.test(key) || (view.kind === "structure") || (view.kind === "variant" && !view.track?.indexed);
    return sendObject(reply, store, key, req.headers.range, { contentType: text ? "text/plain; charset=utf-8" : "application/octet-stream", headers: { "cache-control": `private, max-age=${maxAge}` }, userContent: true });
  });

  r.get("/view/:token/chrom.sizes", { config: { scope: "public" }, schema: { hide: true, params: z.object({ token: z.string().max(8192) }) } }, async (req, reply) => {
    const grant = apiGrant(req.params.token);
    let view: PreparedView;
    try { view = await data.prepare(grant); } catch (e) { throw dataError(e); }
    if (!view.chromSizes) throw new ApiError("not_found", "no chromosome sizes for this link");
    return reply.type("text/plain; charset=utf-8").header("cache-control", "private, no-store").send(view.chromSizes);
  });

  r.get("/view/:token/rows", {
    config: { scope: "public" },
    schema: {
      hide: true,
      params: z.object({ token: z.string().max(8192) }),
      querystring: z.object({
        offset: z.coerce.number().int().min(0).max(1e9).default(0),
        limit: z.coerce.number().int().min(1).max(500).default(100),
        sort: z.coerce.number().int().min(0).max(10_000).optional(),
        dir: z.enum(["asc", "desc"]).default("asc"),
        filter: z.string().max(500).optional(),
      }),
    },
  }, async (req, reply) => {
    const grant = apiGrant(req.params.token);
    if (grant.f !== "csv") throw new ApiError("not_found", "this link is not a table");
    try {
      const q = req.query;
      const page = await data.rows(grant, { offset: q.offset, limit: q.limit, dir: q.dir, ...(q.sort !== undefined ? { sort: q.sort } : {}), ...(q.filter ? { filter: q.filter } : {}) });
      void reply.header("cache-control", "private, no-store");
      return { data: page };
    } catch (e) { throw dataError(e); }
  });

  r.get("/view/:token/reads", {
    config: { scope: "public" },
    schema: { hide: true, params: z.object({ token: z.string().max(8192) }), querystring: z.object({ offset: z.coerce.number().int().min(0).max(1e7).default(0), limit: z.coerce.number().int().min(1).max(500).default(50) }) },
  }, async (req, reply) => {
    const grant = apiGrant(req.params.token);
    if (detectViewer(grant.k, grant.f)?.subtype !== "fastq") throw new ApiError("not_found", "this link is not a FASTQ file");
    try {
      void reply.header("cache-control", "private, no-store");
      return { data: await data.reads(grant, req.query.offset, req.query.limit) };
    } catch (e) { throw dataError(e); }
  });
}

/** A rendered chart's preview: the image, its name and the link's expiry, nothing else. */
async function imagePage(reply: FastifyReply, store: ObjectStore, grant: ViewerGrant): Promise<FastifyReply> {
  const info = await store.head(`${workspaceRootKey(grant.o, grant.w)}${grant.k}`);
  if (!info) return problemPage(reply, 404, "Image not found", `${grant.k} is no longer in its workspace.`);
  const name = grant.k.split("/").pop() ?? grant.k;
  const expires = new Date(grant.exp * 1000).toISOString();
  return pageHeaders(reply).type("text/html; charset=utf-8").send(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(name)} — Operon chart</title><link rel="icon" href="data:,"><link rel="stylesheet" href="assets/viewer.css"></head>
<body data-kind="image">
<header class="bar"><div class="file"><h1 class="name" title="${esc(grant.k)}">${esc(name)}</h1><div class="facts"><span>${esc(humanSize(info.size))}</span><span>chart</span><span class="expiry">link expires ${expires.replace("T", " ").replace(/\.\d+Z$/, " UTC")}</span></div></div><div class="brand">Operon</div></header>
<main id="viewer" class="image-preview"><a href="data/primary" download="${esc(name)}"><img src="data/primary" alt="${esc(name)}"></a></main>
</body></html>`);
}

function kindLabel(kind: string): string {
  return ({ variant: "variants", alignment: "alignments", sequence: "sequences", fastq: "reads", structure: "3D structure", table: "table" } as Record<string, string>)[kind] ?? kind;
}
