/**
 * `operon files ls|upload|download|rm`: a workspace's files through the HTTP API
 * (docs/api.md). An upload goes by the transport `chooseTransport` picks for the file (today
 * every file is one multipart/form-data POST /v1/files/upload, streamed from disk); a
 * download asks GET /v1/files/download for a presigned link, fetches it into a temporary
 * file next to the target and renames it into place once complete, so an interrupted download
 * (Ctrl-C included) leaves nothing behind under the target's name, nor the temporary file.
 */
import { createHash, randomBytes } from "node:crypto";
import { createWriteStream, openAsBlob } from "node:fs";
import { rename, rm, stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { Command } from "commander";
import { UsageError, type Ctx } from "./program.js";
import type { ApiClient} from "./client.js";
import { ServerError, apiAction, causeOf, clientOf, ConnectionError, query } from "./client.js";
import { humanSize, json, positiveInt, withCommon, shortTime, table, type CommonOptions } from "./output.js";
import { morePages } from "./runs.js";

/** A file as the API shows it. */
export interface FileView { name: string; key: string; size: number; content_type: string | null; last_modified: string; sha256: string | null; description?: string }

export function filesCli(ctx: Ctx): Command {
  const files = new Command("files").summary("List, upload, download and delete workspace files")
    .description("A workspace's files through the HTTP API: list them, upload files from this machine, download one, delete some.");

  const ls = withCommon(new Command("ls").description("List the workspace's files in key order (size, modified, key)")
    .option("--prefix <prefix>", "only keys that start with this (e.g. data/)")
    .option("--limit <n>", "files per page, 1 to 1000", positiveInt(1000), 100)
    .option("--cursor <cursor>", "the page after this cursor (next_cursor of the previous page)")
    .option("--all", "every page, not just the first")
    .addHelpText("after", "\nExample:\n  operon files ls --prefix data/ --all"), { json: "print the API's page as JSON: {data: [file], has_more, next_cursor}" });
  ls.action(apiAction(ls, ctx, async (opts: CommonOptions & { prefix?: string; limit: number; cursor?: string; all?: boolean }) => {
    const page = await clientOf(ctx, opts).list<FileView>("/v1/files" + query({ workspace_id: opts.workspace, prefix: opts.prefix, limit: opts.limit, cursor: opts.cursor }), opts.all === true);
    if (opts.json) { ctx.io.out(json(page)); return 0; }
    if (page.data.length === 0) ctx.io.err(`no files in workspace ${opts.workspace}${opts.prefix ? ` under ${opts.prefix}` : ""}`);
    else for (const l of table(["SIZE", "MODIFIED", "KEY"], page.data.map((f) => [humanSize(f.size), shortTime(f.last_modified), f.key]))) ctx.io.out(l);
    morePages(ctx, page, "files");
    return 0;
  }));

  const upload = withCommon(new Command("upload").description("Upload files from this machine into the workspace (each keeps its name)")
    .argument("<LOCAL...>", "the files to upload")
    .option("--path <folder>", "the workspace folder to put them in (default: the top)")
    .option("--description <text>", "a description stored with each file")
    .addHelpText("after", "\nExit codes: 0 every file uploaded, 1 refused by the API (the first refusal stops the rest), 2 a\nlocal file cannot be read, usage error or server unreachable.\n\nExample:\n  operon files upload r1.fq r2.fq --path data/"), { json: "print the stored files as JSON: [file]" });
  upload.action(apiAction(upload, ctx, async (locals: string[], opts: CommonOptions & { path?: string; description?: string }) => {
    const sources: Array<{ local: string; size: number }> = [];
    for (const local of locals) {
      let st;
      try { st = await stat(local); } catch (e) { throw new UsageError(`${local}: cannot read (${(e as NodeJS.ErrnoException).code ?? String(e)})`); }
      if (!st.isFile()) throw new UsageError(`${local}: not a regular file`);
      sources.push({ local, size: st.size });
    }
    const client = clientOf(ctx, opts);
    const stored: FileView[] = [];
    for (const s of sources) {
      const f = await uploadFile(client, { ...s, name: basename(s.local), workspace: opts.workspace ?? "", ...(opts.path !== undefined ? { folder: opts.path } : {}), ...(opts.description !== undefined ? { description: opts.description } : {}) });
      stored.push(f);
      if (!opts.json) ctx.io.out(`uploaded ${s.local} → ${f.key} (${humanSize(f.size)})`);
    }
    if (opts.json) ctx.io.out(json(stored));
    return 0;
  }));

  const download = withCommon(new Command("download").description("Download a file (through its presigned link); written only once complete")
    .argument("<KEY>", "the file's key in the workspace, as files ls lists it")
    .option("-o, --output <file>", "where to write it: a file (replaced if it exists) or an existing folder (default: the key's file name, here)")
    .addHelpText("after", "\nThe bytes go to a temporary file next to the target, renamed into place once all have come: an\ninterrupted download (Ctrl-C) leaves neither a partial target nor the temporary file.\nExit codes: 0 downloaded, 1 refused by the API or the storage (no such file), 2 usage error, server\nunreachable or the download broke off, 130 interrupted.\n\nExample:\n  operon files download results/sample.flagstat.txt -o flagstat.txt"), { json: "print {key, path, size, sha256} as JSON" });
  download.action(apiAction(download, ctx, async (key: string, opts: CommonOptions & { output?: string }) => {
    const client = clientOf(ctx, opts);
    const target = await targetPath(key, opts.output);
    const got = await downloadFile(client, opts.workspace ?? "", key, target);
    if (got === "interrupted") { ctx.io.err(`operon files download: interrupted; nothing written to ${target}`); return 130; }
    ctx.io.out(opts.json ? json({ key, path: target, size: got.size, sha256: got.sha256 }) : `downloaded ${key} → ${target} (${humanSize(got.size)})`);
    return 0;
  }));

  const remove = withCommon(new Command("rm").description("Delete files from the workspace")
    .argument("<KEY...>", "the files' keys, as files ls lists them")
    .addHelpText("after", "\nExit codes: 0 every file deleted, 1 refused by the API (no such file; the first refusal stops\nthe rest), 2 usage error or server unreachable.\n\nExample:\n  operon files rm data/old.bam data/old.bam.bai"), { json: "print the API's answers as JSON: [{key, deleted}]" });
  remove.action(apiAction(remove, ctx, async (keys: string[], opts: CommonOptions) => {
    const client = clientOf(ctx, opts);
    const done: unknown[] = [];
    for (const key of keys) {
      done.push(await client.data("DELETE", "/v1/files" + query({ workspace_id: opts.workspace, key })));
      if (!opts.json) ctx.io.out(`deleted ${key}`);
    }
    if (opts.json) ctx.io.out(json(done));
    return 0;
  }));

  for (const c of [ls, upload, download, remove]) files.addCommand(c);
  return files;
}

/** One file to upload: where it is, its size, and where it goes. */
export interface UploadRequest { local: string; size: number; name: string; workspace: string; folder?: string; description?: string }

/** A way of sending a file to the API. */
export interface UploadTransport { name: string; send(client: ApiClient, req: UploadRequest): Promise<FileView> }

/** One multipart/form-data POST /v1/files/upload: the fields first (the API reads them before the file), the file streamed from disk. */
const formUpload: UploadTransport = {
  name: "form",
  async send(client, req) {
    const form = new FormData();
    form.set("workspace_id", req.workspace);
    if (req.folder !== undefined) form.set("path", req.folder);
    if (req.description !== undefined) form.set("description", req.description);
    form.set("file", await openAsBlob(req.local), req.name);
    return client.data<FileView>("POST", "/v1/files/upload", { form });
  },
};

/**
 * The transport for a file of `size` bytes. Every file goes as one form upload today (the
 * server takes up to its OPERON_MAX_UPLOAD_BYTES that way); a transport for larger files
 * (the multipart large-file flow) is chosen here by size when the API has it.
 */
export function chooseTransport(_size: number): UploadTransport {
  return formUpload;
}

export async function uploadFile(client: ApiClient, req: UploadRequest): Promise<FileView> {
  return chooseTransport(req.size).send(client, req);
}

/** `-o` as given (into it when it is a folder), or the key's file name in the current folder. */
async function targetPath(key: string, output: string | undefined): Promise<string> {
  const name = basename(key);
  if (output === undefined) {
    if (!name || name === "." || name === "..") throw new UsageError(`KEY ${JSON.stringify(key)} names no file; give -o`);
    return name;
  }
  if (output.endsWith("/")) return join(output, name);
  try { if ((await stat(output)).isDirectory()) return join(output, name); } catch { /* not there yet: the file to write */ }
  return output;
}

/**
 * Fetches `key` into `target` through a temporary file in the same folder, renamed into
 * place when complete; on any failure or SIGINT/SIGTERM the temporary file is removed.
 */
export async function downloadFile(client: ApiClient, workspace: string, key: string, target: string): Promise<{ size: number; sha256: string } | "interrupted"> {
  const link = await client.data<{ downloadUrl: string; key: string; expiresIn: number }>("GET", "/v1/files/download" + query({ workspace_id: workspace, key }));
  const tmp = join(dirname(target), `.${basename(target)}.${randomBytes(6).toString("hex")}.part`);
  const abort = new AbortController();
  const stop = () => abort.abort();
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  try {
    // A presigned link carries its own authority: the API key is not sent to it (it may be another host).
    const res = await client.fetchUrl(new URL(link.downloadUrl, client.conn.base).href, abort.signal);
    if (!res.ok || !res.body) {
      await res.body?.cancel().catch(() => undefined);
      throw new ServerError(res.status, undefined, `downloading ${key}: the storage answered HTTP ${res.status}`);
    }
    const hash = createHash("sha256");
    let size = 0;
    const count = new Transform({ transform(chunk: Buffer, _enc, cb) { hash.update(chunk); size += chunk.length; cb(null, chunk); } });
    await pipeline(Readable.fromWeb(res.body as WebReadableStream<Uint8Array>), count, createWriteStream(tmp, { flags: "wx" }), { signal: abort.signal });
    const expected = Number(res.headers.get("content-length") ?? Number.NaN);
    if (Number.isInteger(expected) && expected !== size) throw new ServerError(res.status, undefined, `downloading ${key}: ${size} bytes came, not the ${expected} announced`);
    await rename(tmp, target);
    return { size, sha256: hash.digest("hex") };
  } catch (e) {
    await rm(tmp, { force: true });
    if (abort.signal.aborted) return "interrupted";
    if (e instanceof ServerError || e instanceof ConnectionError) throw e;
    throw new ConnectionError(`downloading ${key}: ${causeOf(e)}`);
  } finally {
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
  }
}
