/**
 * `operon files ls|upload|download|rm`: a workspace's files through the HTTP API
 * (docs/api.md). An upload goes by the transport `chooseTransport` picks for the file's size:
 * one multipart/form-data POST /v1/files/upload, streamed from disk, up to 100 MiB; above, by
 * parts in parallel, resumable (cli/transfer.ts). A download fetches the presigned link's
 * ranges in parallel into a partial file next to the target, renamed into place once complete
 * and checked, resumable too (cli/transfer.ts); an interrupted transfer (Ctrl-C included)
 * never leaves anything under the target's name, and exits 130.
 */
import { openAsBlob } from "node:fs";
import { stat } from "node:fs/promises";
import { basename, join } from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import { UsageError, type Ctx } from "./program.js";
import { ServerError, apiAction, clientOf, query, type ApiClient } from "./client.js";
import { humanSize, json, positiveInt, withCommon, shortTime, table, type CommonOptions } from "./output.js";
import { morePages } from "./runs.js";
import { httpFetch } from "./http-fetch.js";
import {
  DEFAULT_PARALLEL, DEFAULT_PART_THRESHOLD, DEFAULT_RANGE_BYTES, Interrupted, Progress, downloadByRanges, interruptible, uploadByParts, waitChecksum,
  type FileView, type Transfer, type TransferIO, type UploadRequest,
} from "./transfer.js";

export type { FileView, UploadRequest } from "./transfer.js";

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

  const upload = uploadCommand(ctx);
  const download = downloadCommand(ctx);

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

/** `files upload`: form uploads for small files, resumable uploads by parts for large ones. */
function uploadCommand(ctx: Ctx): Command {
  const upload = withCommon(new Command("upload").description("Upload files from this machine into the workspace (each keeps its name)")
    .argument("<LOCAL...>", "the files to upload")
    .option("--path <folder>", "the workspace folder to put them in (default: the top)")
    .option("--description <text>", "a description stored with each file")
    .option("--parallel <n>", "parts in flight at once, for files sent by parts (1 to 32)", positiveInt(32), DEFAULT_PARALLEL)
    .option("--wait-checksum", "wait until the server has computed each file's sha256 and print it")
    .addOption(new Option("--part-threshold <bytes>", "files larger than this go by parts").argParser(byteSize).default(DEFAULT_PART_THRESHOLD).hideHelp())
    .addOption(new Option("--part-size <bytes>", "the part size asked of the server (5 MiB to 5 GiB)").argParser(byteSize).hideHelp())
    .addHelpText("after", `
Files up to 100 MiB go as one form upload; larger ones by parts (the multipart flow): --parallel
parts at once, each checked (MD5) and retried when it fails. An upload by parts that is interrupted
(Ctrl-C, a lost connection) resumes when the same command runs again: the parts already received
are not sent again. Its state is kept in $XDG_STATE_HOME/operon/uploads/ (else
~/.local/state/operon/uploads/) until the upload is confirmed. After an upload by parts the
server computes the file's sha256 in the background (null in --json until then): --wait-checksum
waits for it and prints "sha256 <hex>  <key>". On a terminal, a progress line on stderr (bytes,
rate, ETA); otherwise one line per file once it is stored.

Exit codes: 0 every file uploaded, 1 refused by the API or the storage (the first refusal stops the
rest), 2 a local file cannot be read, usage error, server unreachable or the transfer broke off,
130 interrupted (run the same command again to resume).

Examples:
  operon files upload r1.fq r2.fq --path data/
  operon files upload sample.bam --path bams/ --parallel 8 --wait-checksum`), { json: "print the stored files as JSON: [file]" });
  upload.action(apiAction(upload, ctx, async (locals: string[], opts: UploadOptions) => uploadAll(ctx, locals, opts)));
  return upload;
}

/** `files download`: ranges in parallel into a partial file, resumable, renamed into place once checked. */
function downloadCommand(ctx: Ctx): Command {
  const download = withCommon(new Command("download").description("Download a file (through its presigned link); written only once complete")
    .argument("<KEY>", "the file's key in the workspace, as files ls lists it")
    .option("-o, --output <file>", "where to write it: a file (replaced if it exists) or an existing folder (default: the key's file name, here)")
    .option("--parallel <n>", "ranges fetched at once (1 to 32)", positiveInt(32), DEFAULT_PARALLEL)
    .addOption(new Option("--range-size <bytes>", "the size of the ranges fetched").argParser(byteSize).default(DEFAULT_RANGE_BYTES).hideHelp())
    .addHelpText("after", `
The file comes in ranges of 64 MiB, --parallel at once, into .NAME.<id>.part next to the target,
renamed to the target once complete and checked (its size, and its sha256 against the file's when
the server has it). Interrupted (Ctrl-C, a lost connection), the ranges already written are kept
and the same command run again fetches only the missing ones; a file changed on the server since
starts over. Nothing is ever written under the target's name before the end.

Exit codes: 0 downloaded, 1 refused by the API or the storage (no such file), 2 usage error, server
unreachable, the download broke off or its checksum differs, 130 interrupted.

Example:
  operon files download results/sample.flagstat.txt -o flagstat.txt`), { json: "print {key, path, size, sha256} as JSON" });
  download.action(apiAction(download, ctx, async (key: string, opts: CommonOptions & { output?: string; parallel: number; rangeSize: number }) => {
    const client = clientOf(ctx, opts);
    const target = await targetPath(key, opts.output);
    try {
      const got = await interruptible((signal) => downloadByRanges(transferOf(ctx, client, signal, opts.parallel), opts.workspace ?? "", key, target, { rangeSize: opts.rangeSize }));
      ctx.io.out(opts.json ? json({ key, path: target, size: got.size, sha256: got.sha256 }) : `downloaded ${key} → ${target} (${humanSize(got.size)})`);
      return 0;
    } catch (e) {
      if (!(e instanceof Interrupted)) throw e;
      ctx.io.err(`operon files download: interrupted; ${e.message}`);
      return 130;
    }
  }));
  return download;
}

type UploadOptions = CommonOptions & { path?: string; description?: string; parallel: number; waitChecksum?: boolean; partThreshold: number; partSize?: number };

/** `64MiB`, `5m`, `1048576`: a byte count, in binary units when one is given. */
export function byteSize(v: string): number {
  const m = /^(\d+)\s*(b|k|kb|kib|m|mb|mib|g|gb|gib)?$/i.exec(v.trim());
  const unit = { "": 1, b: 1, k: 1024, kb: 1024, kib: 1024, m: 1024 ** 2, mb: 1024 ** 2, mib: 1024 ** 2, g: 1024 ** 3, gb: 1024 ** 3, gib: 1024 ** 3 }[(m?.[2] ?? "").toLowerCase()];
  if (!m || unit === undefined) throw new InvalidArgumentError("expected a size in bytes (e.g. 5242880, 64MiB)");
  return Number(m[1]) * unit;
}

function transferOf(ctx: Ctx, client: ApiClient, signal: AbortSignal, parallel: number): Transfer {
  const progress = new Progress(ctx.io as TransferIO);
  return { client, fetch: ctx.fetch ?? httpFetch, env: ctx.env, signal, progress, parallel, note: (line) => { progress.clear(); ctx.io.err(line); } };
}

/** The local files, each a regular file that can be read (a usage error otherwise, before anything is sent). */
async function localFiles(locals: string[]): Promise<Array<{ local: string; size: number; mtimeMs: number }>> {
  const sources: Array<{ local: string; size: number; mtimeMs: number }> = [];
  for (const local of locals) {
    let st;
    try { st = await stat(local); } catch (e) { throw new UsageError(`${local}: cannot read (${(e as NodeJS.ErrnoException).code ?? String(e)})`); }
    if (!st.isFile()) throw new UsageError(`${local}: not a regular file`);
    sources.push({ local, size: st.size, mtimeMs: st.mtimeMs });
  }
  return sources;
}

/** `files upload`: each file in turn (form or parts), a line per file (or --json at the end); 130 when interrupted. */
async function uploadAll(ctx: Ctx, locals: string[], opts: UploadOptions): Promise<number> {
  const sources = await localFiles(locals);
  const client = clientOf(ctx, opts);
  const workspace = opts.workspace ?? "";
  const stored: FileView[] = [];
  try {
    await interruptible(async (signal) => {
      const t = transferOf(ctx, client, signal, opts.parallel);
      for (const [i, s] of sources.entries()) {
        if (signal.aborted) throw new Interrupted(`${sources.slice(i).map((x) => x.local).join(", ")} not uploaded`);
        const req: UploadRequest = { ...s, name: basename(s.local), workspace, ...(opts.path !== undefined ? { folder: opts.path } : {}), ...(opts.description !== undefined ? { description: opts.description } : {}) };
        let f = await uploadFile(t, req, { partThreshold: opts.partThreshold, ...(opts.partSize !== undefined ? { partSize: opts.partSize } : {}) });
        if (!opts.json) ctx.io.out(`uploaded ${s.local} → ${f.key} (${humanSize(f.size)})`);
        if (opts.waitChecksum && !f.sha256) f = await waitChecksum(t, workspace, f.key);
        if (opts.waitChecksum && !opts.json) ctx.io.out(`sha256 ${f.sha256 ?? "-"}  ${f.key}`);
        stored.push(f);
      }
    });
  } catch (e) {
    if (!(e instanceof Interrupted)) throw e;
    ctx.io.err(`operon files upload: interrupted; ${e.message}`);
    return 130;
  }
  if (opts.json) ctx.io.out(json(stored));
  return 0;
}

/** A way of sending a file to the API. */
export interface UploadTransport { name: string; send(t: Transfer, req: UploadRequest, o: { partSize?: number }): Promise<FileView> }

/** One multipart/form-data POST /v1/files/upload: the fields first (the API reads them before the file), the file streamed from disk. */
const formUpload: UploadTransport = {
  name: "form",
  async send(t, req) {
    const form = new FormData();
    form.set("workspace_id", req.workspace);
    if (req.folder !== undefined) form.set("path", req.folder);
    if (req.description !== undefined) form.set("description", req.description);
    form.set("file", await openAsBlob(req.local), req.name);
    try {
      return await t.client.data<FileView>("POST", "/v1/files/upload", { form, signal: t.signal });
    } catch (e) {
      if (t.signal.aborted) throw new Interrupted(`${req.local} not uploaded`);
      throw e;
    }
  },
};

/** The multipart flow (cli/transfer.ts): parts in parallel, resumable. */
const partsUpload: UploadTransport = { name: "parts", send: uploadByParts };

/**
 * The transport for a file of `size` bytes: one form upload up to `threshold` (the server takes
 * up to its OPERON_MAX_UPLOAD_BYTES that way, 500 MB by default), by parts above.
 */
export function chooseTransport(size: number, threshold = DEFAULT_PART_THRESHOLD): UploadTransport {
  return size > threshold ? partsUpload : formUpload;
}

/** Sends `req` by the transport its size calls for; a form upload the server finds too large (413) goes by parts instead. */
export async function uploadFile(t: Transfer, req: UploadRequest, o: { partThreshold?: number; partSize?: number } = {}): Promise<FileView> {
  const transport = chooseTransport(req.size, o.partThreshold);
  try {
    return await transport.send(t, req, o);
  } catch (e) {
    if (transport !== formUpload || !(e instanceof ServerError) || e.status !== 413) throw e;
    t.note(`${req.local}: larger than the server's form upload limit; sending it by parts`);
    return partsUpload.send(t, req, o);
  }
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
