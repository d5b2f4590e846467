/**
 * The one HTTP client of the CLI: every command that talks to an Operon server (run, ask,
 * mcp, runs, pipelines, files, tools, viewer, render) resolves the server and the key here,
 * once, and calls the API through `ApiClient`. Two kinds of failure, each with its exit code:
 * - `ServerError` (exit 1): the server answered and refused, with the API's error body
 *   `{error, message, details}` (docs/api.md) turned into one line, `<message> (<error>)`,
 *   plus one indented line per validation issue in `details.errors`;
 * - `ConnectionError` (exit 2): no answer, or an answer that is not the API's (not JSON).
 * Values that become URL path segments go through `apiPath`, which encodes each one.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Command } from "commander";
import { commandPath, UsageError, type CliIO, type Ctx } from "./program.js";
import { messageOf } from "../core/errors.js";

/** The help lines of --url and --key, the same on every command. */
export const URL_HELP = "the API's base URL (default: $OPERON_URL, else http://127.0.0.1:$PORT, port 8080)";
export const KEY_HELP = "the API key (default: $OPERON_API_KEY, else $OPERON_DATA_DIR/bootstrap-key)";

export interface ConnectionOptions { url?: string; key?: string }

/** Adds --url and --key to `cmd`. */
export function withConnection(cmd: Command): Command {
  return cmd.option("--url <url>", URL_HELP).option("--key <key>", KEY_HELP);
}

export function bootstrapKeyPath(env: NodeJS.ProcessEnv): string {
  return join(env.OPERON_DATA_DIR || "./.operon", "bootstrap-key");
}

export function readBootstrapKey(env: NodeJS.ProcessEnv): string | undefined {
  try { return readFileSync(bootstrapKeyPath(env), "utf8").trim() || undefined; } catch { return undefined; }
}

/** Where the server is and the key to call it with. */
export interface Connection { base: string; key: string }

/**
 * --url, else $OPERON_URL, else the local server on $PORT (8080); --key, else $OPERON_API_KEY,
 * else the bootstrap key the server wrote in $OPERON_DATA_DIR. No key, or a URL that is not
 * one, is a usage error.
 */
export function resolveConnection(opts: ConnectionOptions, env: NodeJS.ProcessEnv): Connection {
  const base = (opts.url ?? env.OPERON_URL ?? `http://127.0.0.1:${env.PORT || 8080}`).replace(/\/+$/, "");
  let parsed: URL;
  try { parsed = new URL(base); } catch { throw new UsageError(`--url: ${JSON.stringify(base)} is not a URL`); }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") throw new UsageError(`--url: ${JSON.stringify(base)} is not an http(s) URL`);
  const key = opts.key ?? env.OPERON_API_KEY ?? readBootstrapKey(env);
  if (!key) throw new UsageError(`no API key: pass --key, set OPERON_API_KEY, or keep one in ${bootstrapKeyPath(env)}`);
  return { base, key };
}

/** No answer from the server, or one that is not the API's: exit 2. */
export class ConnectionError extends Error {}

/**
 * The API answered with an error: exit 1. `lines` are the validation issues, one per line.
 * The client side of the wire; the server's own errors are `OperonError` (core/errors.ts).
 */
export class ServerError extends Error {
  constructor(readonly status: number, readonly code: string | undefined, message: string, readonly lines: string[] = [], readonly details?: unknown) { super(message); }
}

/** The innermost message of a fetch failure (`fetch failed` says nothing; its cause does). */
export function causeOf(e: unknown): string {
  if (e instanceof Error && e.cause instanceof Error) return e.cause.message;
  return messageOf(e);
}

/** `apiPath\`/v1/pipelines/${id}/logs\``: the path with every interpolated value percent-encoded as one segment. */
export function apiPath(strings: TemplateStringsArray, ...values: Array<string | number>): string {
  return strings.reduce((acc, s, i) => acc + s + (i < values.length ? encodeURIComponent(String(values[i])) : ""), "");
}

/** A query string from the defined values (`?a=1&b=x`), or "" when there are none. */
export function query(params: Record<string, string | number | boolean | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : "";
}

interface ErrorBody { error?: unknown; message?: unknown; details?: { errors?: Array<{ code?: string; path?: string; message?: string }> } }

/** The API's error body as a ServerError; anything else that is not a success as a ConnectionError. */
export function failure(res: Response, text: string, what: string): Error {
  let j: ErrorBody | undefined;
  try { j = JSON.parse(text) as ErrorBody; } catch { j = undefined; }
  if (!j || typeof j !== "object" || (typeof j.error !== "string" && typeof j.message !== "string")) {
    return new ConnectionError(`${what}: HTTP ${res.status}, not an answer of the API${text ? ` (${text.slice(0, 120).replace(/\s+/g, " ")})` : ""}`);
  }
  const code = typeof j.error === "string" ? j.error : undefined;
  const message = typeof j.message === "string" ? j.message : `HTTP ${res.status}`;
  const errors = Array.isArray(j.details?.errors) ? j.details.errors : [];
  const lines = errors.map((e) => `  ${e.path || "/"}: ${e.message ?? ""}${e.code ? ` [${e.code}]` : ""}`);
  return new ServerError(res.status, code, `${message}${code ? ` (${code})` : ""}`, lines, j.details);
}

/** A page of a listing, as every list endpoint answers. */
export interface Page<T> { data: T[]; has_more: boolean; next_cursor: string | null }

export interface RequestOptions { body?: unknown; form?: FormData; headers?: Record<string, string>; signal?: AbortSignal }

export class ApiClient {
  constructor(readonly conn: Connection, private readonly fetchImpl: typeof fetch = fetch) {}

  /** The response to `method path` with the key, whatever its status; a transport failure is a ConnectionError. */
  async raw(method: string, path: string, opts: RequestOptions = {}): Promise<Response> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.conn.key}`, accept: "application/json", ...opts.headers };
    let body: RequestInit["body"];
    if (opts.form) body = opts.form;
    else if (opts.body !== undefined) { headers["content-type"] = "application/json"; body = JSON.stringify(opts.body); }
    try {
      return await this.fetchImpl(`${this.conn.base}${path}`, { method, headers, ...(body !== undefined ? { body } : {}), ...(opts.signal ? { signal: opts.signal } : {}) });
    } catch (e) {
      if (opts.signal?.aborted) throw e;
      throw new ConnectionError(`cannot reach ${this.conn.base} (${causeOf(e)})`);
    }
  }

  /** GET of a URL that is not the API's (a presigned link): no key sent; a transport failure is a ConnectionError. */
  async fetchUrl(url: string, signal?: AbortSignal): Promise<Response> {
    try {
      return await this.fetchImpl(url, signal ? { signal } : {});
    } catch (e) {
      if (signal?.aborted) throw e;
      throw new ConnectionError(`cannot fetch ${new URL(url).origin} (${causeOf(e)})`);
    }
  }

  /** The parsed JSON answer of a successful call; an error answer becomes ServerError. */
  async json<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const res = await this.raw(method, path, opts);
    const text = await this.text(res);
    if (!res.ok) throw failure(res, text, `${method} ${path}`);
    try { return JSON.parse(text) as T; } catch {
      throw new ConnectionError(`${method} ${this.conn.base}${path}: HTTP ${res.status}, not a JSON answer${text ? ` (${text.slice(0, 120).replace(/\s+/g, " ")})` : ""}`);
    }
  }

  /** The `data` of a successful call. */
  async data<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const j = await this.json<{ data?: T }>(method, path, opts);
    if (j.data === undefined) throw new ConnectionError(`${method} ${this.conn.base}${path}: an answer without data`);
    return j.data;
  }

  /** The text of a successful call (a step's log); an error answer becomes ServerError. */
  async textOf(method: string, path: string): Promise<string> {
    const res = await this.raw(method, path, { headers: { accept: "text/plain, application/json" } });
    const text = await this.text(res);
    if (!res.ok) throw failure(res, text, `${method} ${path}`);
    return text;
  }

  /** One page, or with `all` every page (following next_cursor); `path` ends with its query. */
  async list<T>(path: string, all: boolean): Promise<Page<T>> {
    const first = await this.json<Page<T>>("GET", path);
    if (!all) return first;
    const items = [...first.data];
    let page = first;
    while (page.has_more && page.next_cursor) {
      page = await this.json<Page<T>>("GET", `${path}${path.includes("?") ? "&" : "?"}cursor=${encodeURIComponent(page.next_cursor)}`);
      items.push(...page.data);
    }
    return { data: items, has_more: false, next_cursor: null };
  }

  /** An error answer whose body cannot be read is still an answer: its status is reported. */
  private async text(res: Response): Promise<string> {
    try { return await res.text(); } catch (e) { throw new ConnectionError(`reading the answer from ${this.conn.base}: ${causeOf(e)}`); }
  }
}

/** The client of a command, from its --url and --key (or their defaults). */
export function clientOf(ctx: Ctx, opts: ConnectionOptions): ApiClient {
  return new ApiClient(resolveConnection(opts, ctx.env), ctx.fetch ?? fetch);
}

/**
 * Reports a failure of an action: ServerError one line (and its issue lines) and exit 1,
 * ConnectionError one line and exit 2; usage errors and anything else are left to parseCli.
 */
export function reportFailure(cmd: Command, io: CliIO, e: unknown): number {
  if (e instanceof ServerError) {
    io.err(`${commandPath(cmd)}: ${e.message}`);
    for (const l of e.lines) io.err(l);
    return 1;
  }
  if (e instanceof ConnectionError) { io.err(`${commandPath(cmd)}: ${e.message}`); return 2; }
  throw e;
}

/** An action that calls the API: its exit code, or the failure's (reportFailure). */
export function apiAction<A extends unknown[]>(cmd: Command, ctx: Ctx, fn: (...args: A) => Promise<number>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try { ctx.code = await fn(...args); } catch (e) { ctx.code = reportFailure(cmd, ctx.io, e); }
  };
}
