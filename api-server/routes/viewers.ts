/**
 * Viewer links (spec: Visualizations; docs/viewers.md). `POST /v1/visualizations/viewer-url`
 * issues a signed, expiring capability for one workspace file (and the index and reference
 * it needs); `/view/<token>` serves the page for its kind, and everything the page loads —
 * scripts, styles, the file's bytes (with Range), its index — comes from this server under
 * `/view/`, so a viewer works in an air-gapped cluster. A token names no path the client can
 * change: the data URLs take fixed names (`data/primary`, `data/primary-index`, …) that the
 * server maps to keys from the signed grant.
 */
import type { FastifyInstance } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { detectViewer, VIEWER_DEFAULT_SECONDS, VIEWER_FORMATS, VIEWER_KIND, VIEWER_MAX_SECONDS, type FileGrant, isFileGrant, type ViewerGrant } from "../../core/viewers.js";
import { workspaceRoot as workspaceRootKey } from "../../core/layout.js";
import { DATA_NAMES, ViewerData, type DataName, type ViewerDataDeps } from "../../media/viewer-data.js";
import { createToolRunner, type ToolRunner } from "../../adapters/local/tool-runner.js";
import { ReaderPool, type ReaderPoolOptions } from "../../media/readers/pool.js";
import { OperonError } from "../../core/errors.js";
import { HTTP_STATUS } from "../errors.js";
import { dataOf, errorResponses, jsonResponse } from "../openapi.js";
import { sendObject } from "../byte-range.js";
import { verifyGrant } from "../../services/viewer-token.js";
import { createViewerLink } from "../../services/viewer-links.js";
import { requireAuth, workspaceId } from "./common.js";
import { filePage, imagePage, loadAssets, problemPage } from "../viewer-pages.js";

export async function viewerRoutes(app: FastifyInstance, opts: { runner?: ToolRunner; readers?: ReaderPoolOptions; limits?: ViewerDataDeps["limits"] } = {}): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { store, config, clock, engine } = app.operon.deps;
  const readers = new ReaderPool(opts.readers);
  app.addHook("onClose", () => readers.close());
  const data = new ViewerData({ store, runner: opts.runner ?? createToolRunner(), readers, ...(engine ? { slots: engine.slots } : {}), ...(opts.limits ? { limits: opts.limits } : {}) });
  const assets = loadAssets();
  if (!assets.has("common.js")) app.log.error("viewer pages unavailable: web/viewers/ is not installed next to the api-server");

  const grantOf = (token: string) => verifyGrant(config.signingSecret, token, clock.now());
  const anyGrant = (token: string): ViewerGrant => {
    const g = grantOf(token);
    if (!g.ok) throw g.error;
    return g.grant;
  };
  /** A file viewer's grant; a chart preview's grant opens nothing but its image. */
  const apiGrant = (token: string): FileGrant => {
    const g = anyGrant(token);
    if (!isFileGrant(g)) throw new OperonError("not_found", "this link shows an image only");
    return g;
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
    if (!g.ok) return problemPage(reply, HTTP_STATUS[g.error.code], g.error.code === "gone" ? "This viewer link has expired" : "This viewer link is not valid", g.error.message);
    const grant = g.grant;
    if (!isFileGrant(grant)) return imagePage(reply, store, grant);
    const info = await store.head(data.key(grant, grant.k));
    if (!info) return problemPage(reply, 404, "File not found", `${grant.k} is no longer in its workspace.`);
    const detected = detectViewer(grant.k, grant.f);
    const kind = detected?.subtype === "fastq" ? "fastq" : VIEWER_KIND[grant.f];
    const name = grant.k.split("/").pop() ?? grant.k;
    const page = { kind, name, path: grant.k, size: info.size, format: grant.f, expiresAt: new Date(grant.exp * 1000).toISOString(), region: grant.g ?? null, reference: grant.r ?? null };
    if (!assets.has("common.js")) return problemPage(reply, 503, "Viewers are not installed", "This Operon server was installed without its viewer pages (web/viewers/).");
    return filePage(reply, { ...page, token: req.params.token });
  });

  r.get("/view/:token/meta", { config: { scope: "public" }, schema: { hide: true, params: z.object({ token: z.string().max(8192) }) } }, async (req, reply) => {
    const grant = apiGrant(req.params.token);
    const view = await data.prepare(grant);
    const { files, ...rest } = view;
    void reply.header("cache-control", "private, no-store");
    return { data: { ...rest, expiresAt: new Date(grant.exp * 1000).toISOString(), data: Object.fromEntries(DATA_NAMES.filter((n) => files[n]).map((n) => [n, `data/${n}`])) } };
  });

  app.get<{ Params: { token: string; name: string } }>("/view/:token/data/:name", { config: { scope: "public" }, schema: { hide: true } }, async (req, reply) => {
    const any = anyGrant(req.params.token);
    if (!isFileGrant(any)) {
      // A chart preview: its one image. SVG is served so that nothing in it can run (CSP sandbox).
      if (req.params.name !== "primary") throw new OperonError("not_found", "no such data for this link");
      const svg = any.k.toLowerCase().endsWith(".svg");
      const maxAge = Math.max(0, Math.min(3600, any.exp - Math.floor(clock.now() / 1000)));
      return sendObject(reply, store, `${workspaceRootKey(any.o, any.w)}${any.k}`, req.headers.range, { contentType: svg ? "image/svg+xml" : "image/png", headers: { "cache-control": `private, max-age=${maxAge}`, "x-content-type-options": "nosniff", "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox" } });
    }
    const grant = any;
    if (!(DATA_NAMES as readonly string[]).includes(req.params.name)) throw new OperonError("not_found", "no such data for this link");
    const view = await data.prepare(grant);
    const key = view.files[req.params.name as DataName];
    if (!key) throw new OperonError("not_found", "no such data for this link");
    const maxAge = Math.max(0, Math.min(3600, grant.exp - Math.floor(clock.now() / 1000)));
    const text = /\.(fa|fasta|fna|fai)$/i.test(key) || (view.kind === "structure") || (view.kind === "variant" && !view.track?.indexed);
    return sendObject(reply, store, key, req.headers.range, { contentType: text ? "text/plain; charset=utf-8" : "application/octet-stream", headers: { "cache-control": `private, max-age=${maxAge}` }, userContent: true });
  });

  r.get("/view/:token/chrom.sizes", { config: { scope: "public" }, schema: { hide: true, params: z.object({ token: z.string().max(8192) }) } }, async (req, reply) => {
    const grant = apiGrant(req.params.token);
    const view = await data.prepare(grant);
    if (!view.chromSizes) throw new OperonError("not_found", "no chromosome sizes for this link");
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
    if (grant.f !== "csv") throw new OperonError("not_found", "this link is not a table");
    const q = req.query;
    const page = await data.rows(grant, { offset: q.offset, limit: q.limit, dir: q.dir, ...(q.sort !== undefined ? { sort: q.sort } : {}), ...(q.filter ? { filter: q.filter } : {}) });
    void reply.header("cache-control", "private, no-store");
    return { data: page };
  });

  r.get("/view/:token/reads", {
    config: { scope: "public" },
    schema: { hide: true, params: z.object({ token: z.string().max(8192) }), querystring: z.object({ offset: z.coerce.number().int().min(0).max(1e7).default(0), limit: z.coerce.number().int().min(1).max(500).default(50) }) },
  }, async (req, reply) => {
    const grant = apiGrant(req.params.token);
    if (detectViewer(grant.k, grant.f)?.subtype !== "fastq") throw new OperonError("not_found", "this link is not a FASTQ file");
    const reads = await data.reads(grant, req.query.offset, req.query.limit);
    void reply.header("cache-control", "private, no-store");
    return { data: reads };
  });
}
