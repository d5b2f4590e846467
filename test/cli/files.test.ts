/**
 * `operon files upload|download` moving files as people expect (issue 30), the real CLI
 * against a real api-server, on the local store (`operon serve`, part URLs served by the
 * api-server) and on a real MinIO (part URLs straight to S3): uploads by parts then downloads
 * by ranges, byte for byte; a CLI killed mid-upload and run again resumes without sending any
 * part twice; a download interrupted and run again fetches only the missing ranges; one line
 * per file off a terminal, a progress line on one; failed parts retried, expired URLs renewed.
 *
 * Presigned URLs go through an HTTP proxy of the test's (OPERON_PUBLIC_URL, or the S3
 * endpoint the store is given), which records every part PUT and ranged GET and can hold
 * some of them unanswered, so an interruption happens at a known point: the test waits on
 * what the server has (parts received, ranges written), never on time.
 */
import t, { type Test } from "tap";
import { spawn, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { createServer, request, type IncomingMessage } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { main } from "../../cli/main.js";
import type { TransferIO } from "../../cli/transfer.js";
import { createS3ObjectStore } from "../../adapters/s3/object-store.js";
import { freePorts, startMinio } from "../support/minio.js";
import { testApp } from "../support/app.js";
import { until } from "../support/wait.js";

const MiB = 1024 * 1024;
const dir = mkdtempSync(join(tmpdir(), "operon-cli-files-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/** A presigned request the proxy saw answered (or holds): its method, part number, Range. */
interface Seen { method: string; part?: number; range?: string; status?: number }

interface Proxy { url: string; seen: Seen[]; hold: (r: Seen) => boolean; close(): Promise<void> }

/** An HTTP proxy in front of `target` that records the presigned requests and holds, unanswered, those `hold` picks. */
async function startProxy(target: string): Promise<Proxy> {
  const to = new URL(target);
  const held = new Set<IncomingMessage>();
  const proxy: Proxy = { url: "", seen: [], hold: () => false, close: async () => undefined };
  const server = createServer((req, res) => {
    const u = new URL(req.url ?? "/", "http://proxy");
    const presigned = u.pathname.startsWith("/v1/storage/") || u.searchParams.has("X-Amz-Signature");
    const part = u.searchParams.get("part_number") ?? u.searchParams.get("partNumber");
    const info: Seen = { method: req.method ?? "GET", ...(part ? { part: Number(part) } : {}), ...(req.headers.range ? { range: req.headers.range } : {}) };
    if (presigned && proxy.hold(info)) {
      held.add(req);
      req.on("close", () => held.delete(req));
      return;
    }
    const up = request({ host: to.hostname, port: to.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      if (presigned) proxy.seen.push({ ...info, status: answer.statusCode ?? 0 });
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    up.on("error", () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  proxy.url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  proxy.close = async () => {
    for (const r of held) r.socket.destroy();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return proxy;
}

/** An api-server the CLI talks to: its URL, a key with the files scope, the workspace, the proxy its presigned URLs go through. */
interface Backend { name: "local" | "s3"; base: string; key: string; workspace: string; proxy: Proxy }

/** `operon serve` on a fresh data folder, its presigned URLs (OPERON_PUBLIC_URL) through the proxy. */
async function localBackend(t: Test): Promise<Backend> {
  const data = mkdtempSync(join(dir, "serve-"));
  const [port] = await freePorts(1);
  const base = `http://127.0.0.1:${port}`;
  const proxy = await startProxy(base);
  const env = { ...process.env, OPERON_DATA_DIR: data, PORT: String(port), HOST: "127.0.0.1", OPERON_MODE: "embedded", LOG_LEVEL: "warn", OPERON_PUBLIC_URL: proxy.url };
  const child = spawn(process.execPath, ["--import", "tsx", "cli/main.ts", "serve"], { env, stdio: ["ignore", "ignore", "inherit"] });
  t.teardown(async () => { child.kill("SIGKILL"); await proxy.close(); });
  await until("the server to answer", async () => { try { return (await fetch(`${base}/healthz`)).ok; } catch { return false; } }, 60_000);
  return { name: "local", base, key: readFileSync(join(data, "bootstrap-key"), "utf8").trim(), workspace: "default", proxy };
}

/** An api-server over a real MinIO, the S3 store's endpoint being the proxy. */
async function s3Backend(t: Test): Promise<Backend> {
  const minio = await startMinio();
  const proxy = await startProxy(minio.endpoint);
  const store = createS3ObjectStore({
    endpoint: proxy.url, bucket: minio.bucket, region: minio.region, forcePathStyle: true,
    credentials: { accessKeyId: minio.accessKeyId, secretAccessKey: minio.secretAccessKey },
  });
  const a = await testApp({ store });
  await a.app.listen({ port: 0, host: "127.0.0.1" });
  t.teardown(async () => { await a.close(); await proxy.close(); await minio.stop(); });
  await a.service.createWorkspace("acme", "ws1");
  const base = `http://127.0.0.1:${(a.app.server.address() as { port: number }).port}`;
  return { name: "s3", base, key: await a.key("acme", ["files"], ["ws1"]), workspace: "ws1", proxy };
}

interface Result { code: number | null; signal?: NodeJS.Signals | null; out: string[]; stdout: string; stderr: string; raw: string }

/** The CLI in this process (`fetch` replaces the global one), stderr not a terminal unless `tty`. */
async function cli(b: Backend, state: string, args: string[], opts: { fetch?: typeof fetch; tty?: boolean } = {}): Promise<Result> {
  const out: string[] = [];
  const err: string[] = [];
  let raw = "";
  const io: TransferIO = { out: (s) => out.push(s), err: (s) => err.push(s), errIsTTY: opts.tty ?? false, errRaw: (s) => { raw += s; } };
  const env = { OPERON_URL: b.base, OPERON_API_KEY: b.key, XDG_STATE_HOME: state, HOME: state };
  const code = await main([...args, "--workspace", b.workspace], io, { env, ...(opts.fetch ? { fetch: opts.fetch } : {}) });
  return { code, out, stdout: out.join("\n"), stderr: err.join("\n"), raw };
}

/** The CLI as a child process (stdout and stderr pipes: not a terminal). */
function spawnCli(b: Backend, state: string, args: string[]): { child: ChildProcess; done: Promise<Result> } {
  const env = { ...process.env, OPERON_URL: b.base, OPERON_API_KEY: b.key, XDG_STATE_HOME: state, HOME: state };
  const child = spawn(process.execPath, ["--import", "tsx", "cli/main.ts", ...args, "--workspace", b.workspace], { env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (c: Buffer) => { stdout += c.toString(); });
  child.stderr?.on("data", (c: Buffer) => { stderr += c.toString(); });
  const done = new Promise<Result>((resolve) => child.on("close", (code, signal) => {
    resolve({ code, signal, out: stdout.split("\n").filter(Boolean), stdout: stdout.trimEnd(), stderr: stderr.trimEnd(), raw: stderr });
  }));
  return { child, done };
}

async function api<T>(b: Backend, method: string, path: string): Promise<T> {
  const res = await fetch(b.base + path, { method, headers: { authorization: `Bearer ${b.key}` } });
  if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${await res.text()}`);
  return ((await res.json()) as { data: T }).data;
}

interface FileView { name: string; key: string; size: number; content_type: string | null; last_modified: string; sha256: string | null }
const listed = async (b: Backend, key: string) => (await api<FileView[]>(b, "GET", `/v1/files?workspace_id=${b.workspace}&prefix=${encodeURIComponent(key)}`)).find((f) => f.key === key);

const PARTS = ["--part-size", "5MiB", "--part-threshold", "1MiB"];
/** The five ranges of a 23 MiB file in 5 MiB pieces, as Range headers. */
const rangesOf = (size: number, piece: number) => Array.from({ length: Math.ceil(size / piece) }, (_, i) => `bytes=${i * piece}-${Math.min(size, (i + 1) * piece) - 1}`);
const puts = (seen: Seen[]) => seen.filter((s) => s.method === "PUT" && s.status === 200).map((s) => s.part ?? 0);
const rangedGets = (seen: Seen[]) => seen.filter((s) => s.method === "GET" && s.range !== undefined && s.status === 206).map((s) => s.range ?? "");
const byNumber = (a: number, b: number) => a - b;

/** operon_uploaded_bytes_total{via="parts"} of the server: bytes of parts it received (the local store counts each part as it comes). */
async function partBytesMetric(b: Backend): Promise<number> {
  const text = await (await fetch(`${b.base}/metrics`)).text();
  return Number(/^operon_uploaded_bytes_total\{via="parts"\} (\d+)$/m.exec(text)?.[1] ?? 0);
}

for (const kind of ["local", "s3"] as const) {
  t.test(`${kind} store`, async (t) => {
    const b = kind === "local" ? await localBackend(t) : await s3Backend(t);
    const scratch = mkdtempSync(join(dir, `${kind}-`));
    const state = join(scratch, "state");
    const uploads = join(state, "operon", "uploads");
    const local = (name: string, content: Buffer) => { const p = join(scratch, name); writeFileSync(p, content); return p; };

    t.test("a file uploaded by parts, then downloaded by ranges: the same bytes; --json shapes; the state removed", async (t) => {
      const body = randomBytes(23 * MiB);
      const src = local("big1.bin", body);
      const mark = b.proxy.seen.length;
      const up = await cli(b, state, ["files", "upload", src, "--path", "p1/", ...PARTS, "--json", "--wait-checksum"]);
      t.equal(up.code, 0, up.stderr);
      const files = JSON.parse(up.stdout) as FileView[];
      t.same(files.map((f) => [f.name, f.key, f.size, f.sha256]), [["big1.bin", "p1/big1.bin", 23 * MiB, sha256(body)]], "--json: the stored files, sha256 waited for");
      t.same(Object.keys(files[0] ?? {}).filter((k) => k !== "description").sort(), ["content_type", "key", "last_modified", "name", "sha256", "size"]);
      t.same(puts(b.proxy.seen.slice(mark)).sort(byNumber), [1, 2, 3, 4, 5], "five parts of 5 MiB (the last 3 MiB), each PUT once");
      t.same(readdirSync(uploads), [], "no upload state left once confirmed");
      t.equal((await listed(b, "p1/big1.bin"))?.sha256, sha256(body), "the server's sha256 is the file's");

      const out = mkdtempSync(join(scratch, "dl-"));
      const before = b.proxy.seen.length;
      const dl = await cli(b, state, ["files", "download", "p1/big1.bin", "-o", `${out}/`, "--range-size", "5MiB", "--json"]);
      t.equal(dl.code, 0, dl.stderr);
      t.same(JSON.parse(dl.stdout), { key: "p1/big1.bin", path: join(out, "big1.bin"), size: 23 * MiB, sha256: sha256(body) });
      t.ok(readFileSync(join(out, "big1.bin")).equals(body), "byte for byte");
      t.same(readdirSync(out), ["big1.bin"], "no partial file, no sidecar left");
      t.same(rangedGets(b.proxy.seen.slice(before)).sort(), rangesOf(23 * MiB, 5 * MiB).sort(), "five ranges, each fetched once");
    });

    t.test(`the CLI killed mid-upload (${kind === "local" ? "SIGINT" : "SIGKILL"}) and run again: it resumes, no part sent twice`, async (t) => {
      const body = randomBytes(23 * MiB);
      const src = local("big2.bin", body);
      const args = ["files", "upload", src, "--path", "p2/", ...PARTS, "--parallel", "4"];
      const mark = b.proxy.seen.length;
      const metric = await partBytesMetric(b);
      let arrived = 0;
      b.proxy.hold = (r) => r.method === "PUT" && ++arrived > 2; // two parts reach the storage, the others hang
      const run = spawnCli(b, state, args);
      const saved = await until("the upload's state file", () => {
        const f = existsSync(uploads) ? readdirSync(uploads).find((n) => n.endsWith(".json")) : undefined;
        return f ? JSON.parse(readFileSync(join(uploads, f), "utf8")) as { uploadId: string } : undefined;
      }, 60_000);
      await until("two parts received", async () => (await api<{ parts: unknown[] }>(b, "GET", `/v1/files/upload-parts?workspace_id=${b.workspace}&upload_id=${saved.uploadId}`)).parts.length >= 2);
      run.child.kill(kind === "local" ? "SIGINT" : "SIGKILL");
      const first = await run.done;
      if (kind === "local") {
        t.equal(first.code, 130, first.stderr);
        t.match(first.stderr, /^operon files upload: interrupted; .*big2\.bin: [0-2] of 5 parts received and kept; run the same command again to resume$/m);
      } else {
        t.equal(first.signal, "SIGKILL");
        // As if killed before the storage's answers were read: the parts the server has are checked against the file itself.
        for (const n of readdirSync(uploads).filter((f) => f.endsWith(".parts"))) rmSync(join(uploads, n));
      }
      t.equal(await listed(b, "p2/big2.bin"), undefined, "nothing visible: the upload was never confirmed");
      t.equal(readdirSync(uploads).filter((n) => n.endsWith(".json")).length, 1, "its state is kept");
      const sent = puts(b.proxy.seen.slice(mark));
      t.equal(sent.length, 2, "two parts reached the storage");

      b.proxy.hold = () => false;
      const resumedAt = b.proxy.seen.length;
      const again = await cli(b, state, [...args, "--json", "--wait-checksum"]);
      t.equal(again.code, 0, again.stderr);
      t.match(again.stderr, /^resuming .*big2\.bin: 2 of 5 parts already received$/m);
      const resent = puts(b.proxy.seen.slice(resumedAt));
      t.same(resent.filter((n) => sent.includes(n)), [], "no part received before is sent again");
      t.same([...sent, ...resent].sort(byNumber), [1, 2, 3, 4, 5], "every part reached the storage exactly once");
      if (kind === "local") t.equal(await partBytesMetric(b) - metric, body.length, "the server received exactly the file's bytes in parts");
      t.equal((JSON.parse(again.stdout) as FileView[])[0]?.sha256, sha256(body), "the file is the one on disk");
      t.same(readdirSync(uploads), [], "the state goes once confirmed");
      const out = mkdtempSync(join(scratch, "dl-"));
      const dl = await cli(b, state, ["files", "download", "p2/big2.bin", "-o", join(out, "copy.bin")]);
      t.equal(dl.code, 0, dl.stderr);
      t.ok(readFileSync(join(out, "copy.bin")).equals(body), "downloaded byte for byte");
    });

    t.test("a download interrupted and run again: only the missing ranges are fetched, the partial file never under the target's name", async (t) => {
      const body = randomBytes(23 * MiB);
      t.equal((await cli(b, state, ["files", "upload", local("big3.bin", body), "--path", "p3/"])).code, 0, "uploaded (one form upload)");
      const out = mkdtempSync(join(scratch, "dl-"));
      const target = join(out, "big3.bin");
      const args = ["files", "download", "p3/big3.bin", "-o", target, "--range-size", "5MiB", "--parallel", "4"];
      let asked = 0;
      b.proxy.hold = (r) => r.method === "GET" && r.range !== undefined && ++asked > 2;
      const run = spawnCli(b, state, args);
      const sidecar = await until("two ranges written", () => {
        const f = readdirSync(out).find((n) => n.endsWith(".part.json"));
        const s = f ? JSON.parse(readFileSync(join(out, f), "utf8")) as { done: number[] } : undefined;
        return s && s.done.length >= 2 ? s : undefined;
      }, 60_000);
      run.child.kill("SIGINT");
      const first = await run.done;
      t.equal(first.code, 130, first.stderr);
      t.match(first.stderr, /^operon files download: interrupted; nothing written to .*big3\.bin; 2 of 5 ranges kept in .*\.big3\.bin\.[0-9a-f]+\.part: run the same command again to resume$/m);
      t.notOk(existsSync(target), "nothing under the target's name");
      t.equal(readdirSync(out).filter((n) => n.endsWith(".part")).length, 1, "the partial file is kept");

      b.proxy.hold = () => false;
      const mark = b.proxy.seen.length;
      const again = await cli(b, state, [...args, "--json"]);
      t.equal(again.code, 0, again.stderr);
      t.match(again.stderr, /^resuming p3\/big3\.bin: 2 of 5 ranges already in .*\.part$/m);
      const all = rangesOf(23 * MiB, 5 * MiB);
      t.same(rangedGets(b.proxy.seen.slice(mark)).sort(), all.filter((_, i) => !sidecar.done.includes(i)).sort(), "only the three missing ranges");
      t.same(JSON.parse(again.stdout), { key: "p3/big3.bin", path: target, size: body.length, sha256: sha256(body) });
      t.ok(readFileSync(target).equals(body), "byte for byte");
      t.same(readdirSync(out), ["big3.bin"], "the partial file and its sidecar are gone");
    });

    t.test("off a terminal one line per file; on a terminal a progress line (bytes, rate, ETA)", async (t) => {
      const small = local("small.txt", Buffer.from("abc\n"));
      const big = local("big4.bin", randomBytes(11 * MiB));
      const run = await spawnCli(b, state, ["files", "upload", small, big, "--path", "p4/", ...PARTS]).done;
      t.equal(run.code, 0, run.stderr);
      t.same(run.out, [`uploaded ${small} → p4/small.txt (4 B)`, `uploaded ${big} → p4/big4.bin (11 MB)`]);
      t.equal(run.stderr, "", "nothing else: no progress line off a terminal");

      const tty = await cli(b, state, ["files", "upload", local("big5.bin", randomBytes(11 * MiB)), "--path", "p4/", ...PARTS], { tty: true });
      t.equal(tty.code, 0, tty.stderr);
      t.same(tty.out, [`uploaded ${join(scratch, "big5.bin")} → p4/big5.bin (11 MB)`]);
      // eslint-disable-next-line no-control-regex -- the terminal's erase-line sequence is what is checked
      t.match(tty.raw, /\r\x1b\[Kbig5\.bin {2}\d+(\.\d)? [KMG]?B \/ 11 MB {2}\d+% {2}\d+(\.\d)? [KMG]?B\/s {2}ETA (\d+:\d\d|--:--)/, "a progress line redrawn in place");
      t.match(tty.raw, /11 MB \/ 11 MB {2}100%/, "up to the last byte");
      t.ok(tty.raw.endsWith("\r\x1b[K"), "erased once the file is done");
    });

    t.test("a file changed while it uploads is not confirmed", async (t) => {
      const body = randomBytes(12 * MiB);
      const src = local("changing.bin", body);
      let touched = false;
      const touching: typeof fetch = async (input, init) => {
        if (init?.method === "PUT" && !touched) { touched = true; utimesSync(src, new Date(), new Date(Date.now() + 60_000)); }
        return fetch(input, init);
      };
      const up = await cli(b, state, ["files", "upload", src, "--path", "p7/", ...PARTS], { fetch: touching });
      t.not(up.code, 0);
      t.match(up.stderr, /changing\.bin: changed while it was uploading; nothing was confirmed/);
      t.equal(await listed(b, "p7/changing.bin"), undefined, "nothing visible");
      t.same(existsSync(uploads) ? readdirSync(uploads) : [], [], "no state left to resume a file that is not the same");
    });

    t.test("a failed part is sent again; an expired part URL (403) is renewed through upload-parts", async (t) => {
      const body = randomBytes(16 * MiB);
      const tries = new Map<string, number>();
      let renewals = 0;
      const flaky: typeof fetch = async (input, init) => {
        const url = String(input instanceof Request ? input.url : input);
        if (url.includes("/v1/files/upload-parts") && init?.method === "POST") renewals++;
        const part = /[?&](?:part_number|partNumber)=(\d+)/.exec(url)?.[1];
        if (init?.method === "PUT" && (part === "2" || part === "3")) {
          const n = (tries.get(part) ?? 0) + 1;
          tries.set(part, n);
          if (n === 1) {
            // The part's bytes (a Buffer) are not sent: the storage answers before reading them.
            return new Response(part === "2" ? "boom" : "<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>", { status: part === "2" ? 500 : 403 });
          }
        }
        return fetch(input, init);
      };
      const up = await cli(b, state, ["files", "upload", local("big6.bin", body), "--path", "p6/", ...PARTS, "--json", "--wait-checksum"], { fetch: flaky });
      t.equal(up.code, 0, up.stderr);
      t.same([tries.get("2"), tries.get("3")], [2, 2], "each sent twice: once refused, once stored");
      t.ok(renewals >= 1, "fresh URLs asked for after the 403");
      t.equal((JSON.parse(up.stdout) as FileView[])[0]?.sha256, sha256(body));
    });
  });
}
