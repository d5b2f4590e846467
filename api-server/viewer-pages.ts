/**
 * The viewer pages themselves, apart from their routes: the files a page may load (the
 * pages' own scripts from web/viewers/, igv.js with its two patches, 3Dmol.js) with their
 * ETags, each kind's scripts, the Content-Security-Policy each page is served with, and the
 * HTML of a file's page, a chart preview and a problem (expired, altered, file gone).
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import type { FastifyReply } from "fastify";
import type { ViewerGrant } from "../core/viewers.js";
import { workspaceRoot as workspaceRootKey } from "../core/layout.js";
import type { ObjectStore } from "../core/ports.js";
import { humanSize } from "../core/sizes.js";

const require = createRequire(import.meta.url);

/**
 * The pages' own scripts and styles (web/viewers/), from the source tree or next to dist/.
 * Without them (an image built without web/) the API still serves; the pages say what is missing.
 */
function webDir(): string | undefined {
  for (const rel of ["../web/viewers/", "../../web/viewers/"]) {
    const p = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(p)) return p;
  }
  return undefined;
}

export interface Asset { body: Buffer; type: string; etag: string }

/** Every file a page may load, by the name it is served under: nothing outside this list. */
export function loadAssets(): Map<string, Asset> {
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
 * igv.js 3.8.10, served with two statements rewritten (each left alone when a later igv.js no
 * longer has it, so a fixed bundle is served unchanged):
 * - it fails to load any genome whose sequence names start with `gi|` (NCBI's old style, e.g.
 *   Debian's lambda phage FASTA): its alias table declares `const t = t.substring(…)` (a
 *   temporal-dead-zone error);
 * - it reads nothing of a bgzip FASTA's last BGZF block (the whole of a genome under 64 KiB):
 *   for a start past the last block its `.gzi` lists, the block list it returns lacks the
 *   "read to the end of the file" mark (-1) that every other path adds.
 */
export function patchIgv(bundle: Buffer): Buffer {
  const text = bundle.toString("utf8");
  const fixed = text
    .replace(/\{const ([A-Za-z_$][\w$]*)=\1\.substring\(0,([A-Za-z_$][\w$]*)\);([A-Za-z_$][\w$]*)\["ncbi-gi"\]=\1\}/, '{$3["ncbi-gi"]=$1.substring(0,$2)}')
    .replace(/if\(([A-Za-z_$][\w$]*)>this\.compressedIndex\[([A-Za-z_$][\w$]*)\]\[1\]\)return\[\2\]/, "if($1>this.compressedIndex[$2][1])return[$2,-1]");
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

export function pageHeaders(reply: FastifyReply, kind?: string): FastifyReply {
  return reply.header("content-security-policy", PAGE_CSP[kind ?? ""] ?? CSP).header("x-content-type-options", "nosniff").header("referrer-policy", "no-referrer").header("cache-control", "private, no-store");
}

/** A small page for a link that cannot be shown: expired, altered, or its file gone. */
export function problemPage(reply: FastifyReply, status: number, title: string, message: string): FastifyReply {
  return pageHeaders(reply).status(status).type("text/html; charset=utf-8").send(`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${esc(title)} — Operon</title><link rel="icon" href="data:,"><link rel="stylesheet" href="assets/viewer.css"></head><body class="problem"><main><h1>${esc(title)}</h1><p>${esc(message)}</p><p class="hint">Viewer links are issued by <code>POST /v1/visualizations/viewer-url</code> and stop working when they expire.</p></main></body></html>`);
}

/** A file viewer's page: the bar (name, size, kind, expiry), the page's data for its scripts, and its scripts. */
export function filePage(reply: FastifyReply, page: { kind: string; name: string; path: string; size: number; expiresAt: string; token: string } & Record<string, unknown>): FastifyReply {
  const { kind, name } = page;
  const scripts = (PAGE_SCRIPTS[kind] ?? []).map((s) => `<script src="assets/${s}"></script>`).join("");
  return pageHeaders(reply, kind).type("text/html; charset=utf-8").send(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(name)} — Operon viewer</title><link rel="icon" href="data:,"><link rel="stylesheet" href="assets/viewer.css"></head>
<body data-kind="${kind}">
<header class="bar"><div class="file"><h1 class="name" title="${esc(page.path)}">${esc(name)}</h1><div class="facts"><span>${esc(humanSize(page.size))}</span><span>${esc(kindLabel(kind))}</span><span class="expiry" data-expires="${page.expiresAt}">link expires ${page.expiresAt.replace("T", " ").replace(/\.\d+Z$/, " UTC")}</span></div></div><div class="brand">Operon</div></header>
<main id="viewer" aria-busy="true"><p class="status">Preparing the viewer…</p></main>
<footer id="notes"></footer>
<script type="application/json" id="operon-page">${jsonForScript(page)}</script>
${scripts}
</body></html>`);
}

/** A rendered chart's preview: the image, its name and the link's expiry, nothing else. */
export async function imagePage(reply: FastifyReply, store: ObjectStore, grant: ViewerGrant): Promise<FastifyReply> {
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
