/**
 * `fetch` for presigned URLs, on node:http and node:https: sending a 64 MiB part through
 * Node's built-in fetch (undici) costs three times the CPU of an http.request on this kind of
 * machine, and the CLI's parts compete for the same cores as the MD5 of the next part. Takes
 * what the CLI sends (a Buffer, a Blob, or nothing; a headers object; a signal) and answers a
 * standard Response, so callers and tests see plain fetch.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream as WebReadableStream } from "node:stream/web";

const agents = { "http:": new HttpAgent({ keepAlive: true, maxSockets: 64 }), "https:": new HttpsAgent({ keepAlive: true, maxSockets: 64 }) };

function headersOf(h: RequestInit["headers"]): Record<string, string> {
  if (!h) return {};
  if (h instanceof Headers) { const out: Record<string, string> = {}; h.forEach((v, k) => { out[k] = v; }); return out; }
  if (Array.isArray(h)) return Object.fromEntries(h);
  return { ...(h as Record<string, string>) };
}

function responseOf(res: IncomingMessage): Response {
  const headers = new Headers();
  for (const [k, v] of Object.entries(res.headers)) {
    if (Array.isArray(v)) for (const x of v) headers.append(k, x);
    else if (v !== undefined) headers.set(k, v);
  }
  const status = res.statusCode ?? 0;
  const empty = status === 204 || status === 304 || (status >= 100 && status < 200);
  if (empty) res.resume();
  return new Response(empty ? null : (Readable.toWeb(res) as unknown as ReadableStream<Uint8Array>), { status, statusText: res.statusMessage ?? "", headers });
}

export const httpFetch: typeof fetch = async (input, init = {}) => {
  const url = new URL(input instanceof Request ? input.url : String(input));
  const proto = url.protocol as "http:" | "https:";
  if (proto !== "http:" && proto !== "https:") throw new TypeError(`unsupported URL ${url.protocol}`);
  const body = init.body;
  const send = proto === "https:" ? httpsRequest : httpRequest;
  return new Promise<Response>((resolve, reject) => {
    const req = send(url, { method: init.method ?? "GET", headers: headersOf(init.headers), agent: agents[proto], ...(init.signal ? { signal: init.signal } : {}) }, (res) => { resolve(responseOf(res)); });
    req.on("error", (e) => { reject(new TypeError("fetch failed", { cause: e })); });
    if (body === undefined || body === null) req.end();
    else if (body instanceof Uint8Array) req.end(body);
    else if (body instanceof Blob) pipeline(Readable.fromWeb(body.stream() as WebReadableStream<Uint8Array>), req).catch((e: unknown) => { req.destroy(e as Error); });
    else if (typeof body === "string") req.end(body);
    else { req.destroy(); reject(new TypeError("httpFetch sends a Buffer, a Blob or a string")); }
  });
};
