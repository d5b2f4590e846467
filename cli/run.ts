/**
 * `operon run SPEC_OR_PIPELINE_ID --workspace W --input k=v … [--follow]`: starts a run
 * through the HTTP API (never the store directly, so it works against a remote server and
 * obeys the same keys, scopes and validation as any other client) and, with `--follow`,
 * shows one progress line per step until the run ends, then its output paths. Exit 0 when
 * the run was started (or, with --follow, completed); 1 when the API refused it or it failed
 * or was cancelled; 2 for usage and connection problems.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { readSpecFile, type CliIO } from "./validate.js";

/** The CLI's output, plus whether stdout is a terminal (defaults to process.stdout.isTTY). */
export type RunIO = CliIO & { isTTY?: boolean };

const USAGE = "usage: operon run SPEC_OR_PIPELINE_ID --workspace W [--input k=v …] [--follow] [--json] [--url URL] [--key KEY] [--poll-ms MS]";
const TERMINAL = new Set(["completed", "failed", "cancelled"]);
const BAR = 10;
/** Consecutive failed polls (network errors, 429, 5xx) tolerated before giving up. */
const MAX_POLL_FAILURES = 5;

interface StepView { step_id: string; tool: string; status: string; error: string | null; waiting_reason: string | null; queue_position?: number }
interface RunView { id: string; status: string; progress_pct: number; output_paths: string[]; steps: StepView[]; error: string | null; output_folder: string }

class UsageError extends Error {}
/** A problem talking to the server (exit 2), as opposed to an answer refusing the run (exit 1). */
class ConnectionError extends Error {}
class ApiFailure extends Error {
  constructor(readonly status: number, message: string, readonly lines: string[]) { super(message); }
}

/** Parses repeated `k=v` arguments; the value is everything after the first `=` (it may contain `=`). */
export function parseInputs(pairs: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const p of pairs) {
    const i = p.indexOf("=");
    if (i <= 0) throw new UsageError(`--input ${JSON.stringify(p)}: expected NAME=VALUE`);
    const k = p.slice(0, i);
    if (Object.hasOwn(out, k)) throw new UsageError(`--input ${k} given twice`);
    out[k] = p.slice(i + 1);
  }
  return out;
}

export async function runCommand(args: string[], io: RunIO, env: NodeJS.ProcessEnv, fetchImpl: typeof fetch = fetch): Promise<number> {
  try {
    return await run(args, io, env, fetchImpl);
  } catch (e) {
    if (e instanceof UsageError) { io.err(`operon run: ${e.message}`); io.err(USAGE); return 2; }
    if (e instanceof ApiFailure) { io.err(`operon run: ${e.message}`); for (const l of e.lines) io.err(l); return 1; }
    io.err(`operon run: ${e instanceof Error ? e.message : String(e)}`);
    return 2;
  }
}

async function run(args: string[], io: RunIO, env: NodeJS.ProcessEnv, fetchImpl: typeof fetch): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args, allowPositionals: true,
      options: {
        workspace: { type: "string" }, input: { type: "string", multiple: true, default: [] },
        follow: { type: "boolean", default: false }, json: { type: "boolean", default: false },
        url: { type: "string" }, key: { type: "string" }, "poll-ms": { type: "string" },
      },
    });
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
  const { values, positionals } = parsed;
  if (positionals.length !== 1) throw new UsageError("give exactly one SPEC_OR_PIPELINE_ID");
  const target = positionals[0] as string;
  if (!values.workspace) throw new UsageError("--workspace is required");
  const workspace = values.workspace;
  const input = parseInputs(values.input ?? []);
  const pollMs = values["poll-ms"] === undefined ? 500 : Number(values["poll-ms"]);
  if (!Number.isInteger(pollMs) || pollMs < 10 || pollMs > 60_000) throw new UsageError("--poll-ms must be an integer from 10 to 60000");
  const base = (values.url ?? env.OPERON_URL ?? `http://127.0.0.1:${env.PORT || 8080}`).replace(/\/+$/, "");
  const key = values.key ?? env.OPERON_API_KEY ?? readBootstrapKey(env);
  if (!key) throw new UsageError(`no API key: pass --key, set OPERON_API_KEY, or keep one in ${bootstrapKeyPath(env)}`);

  const body: Record<string, unknown> = { workspace_id: workspace, input };
  if (target.endsWith(".json") && existsSync(target)) {
    const read = await readSpecFile(target);
    if (!read.ok) throw new UsageError(read.message);
    body.spec = read.spec;
  } else if (target.endsWith(".json")) {
    body.spec_file = target; // not on this machine: a path in the workspace
  } else {
    body.pipeline_id = target;
  }

  const api = client(base, key, fetchImpl);
  const submitted = await api("POST", "/v1/pipelines", body);
  if (!values.follow) {
    io.out(values.json ? JSON.stringify(submitted, null, 2) : submitted.id);
    return 0;
  }

  const tty = io.isTTY ?? process.stdout.isTTY === true;
  const render = values.json ? () => undefined : renderer(io, tty);
  const path = `/v1/pipelines/${encodeURIComponent(submitted.id)}?workspace_id=${encodeURIComponent(workspace)}`;
  let current = submitted;
  let failures = 0;
  render(current);
  while (!TERMINAL.has(current.status)) {
    await new Promise((r) => setTimeout(r, pollMs));
    try {
      current = await api("GET", path);
      failures = 0;
    } catch (e) {
      const transient = e instanceof ConnectionError || (e instanceof ApiFailure && (e.status === 429 || e.status >= 500));
      if (!transient || ++failures >= MAX_POLL_FAILURES) throw new ConnectionError(`following ${submitted.id}: ${e instanceof Error ? e.message : String(e)}`);
      continue;
    }
    render(current);
  }

  if (values.json) io.out(JSON.stringify(current, null, 2));
  else {
    io.out(`run ${current.id} ${current.status}`);
    if (current.error) io.out(`error: ${current.error}`);
    if (current.output_paths.length) {
      io.out(`outputs (${current.output_folder}):`);
      for (const p of current.output_paths) io.out(`  ${p}`);
    }
  }
  return current.status === "completed" ? 0 : 1;
}

function bootstrapKeyPath(env: NodeJS.ProcessEnv): string {
  return join(env.OPERON_DATA_DIR || "./.operon", "bootstrap-key");
}

function readBootstrapKey(env: NodeJS.ProcessEnv): string | undefined {
  try { return readFileSync(bootstrapKeyPath(env), "utf8").trim() || undefined; } catch { return undefined; }
}

/** A JSON call to the API returning `data`; API errors become ApiFailure, transport errors ConnectionError. */
function client(base: string, key: string, fetchImpl: typeof fetch) {
  return async (method: "GET" | "POST", path: string, body?: unknown): Promise<RunView> => {
    let res: Response;
    let text: string;
    try {
      res = await fetchImpl(`${base}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, accept: "application/json", ...(body !== undefined ? { "content-type": "application/json" } : {}) },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      text = await res.text();
    } catch (e) {
      const cause = e instanceof Error && e.cause instanceof Error ? e.cause.message : e instanceof Error ? e.message : String(e);
      throw new ConnectionError(`cannot reach ${base} (${cause})`);
    }
    let json: unknown;
    try { json = JSON.parse(text); } catch {
      throw new ConnectionError(`${method} ${base}${path}: HTTP ${res.status}, not a JSON answer${text ? ` (${text.slice(0, 120).replace(/\s+/g, " ")})` : ""}`);
    }
    const j = json as { data?: RunView; error?: string; message?: string; details?: { errors?: Array<{ code?: string; path?: string; message?: string }> } };
    if (!res.ok || j.data === undefined) {
      const lines = (j.details?.errors ?? []).map((e) => `  ${e.path || "/"}: ${e.message ?? ""}${e.code ? ` [${e.code}]` : ""}`);
      throw new ApiFailure(res.status, `${j.message ?? `HTTP ${res.status}`}${j.error ? ` (${j.error})` : ""}`, lines);
    }
    return j.data;
  };
}

function bar(status: string): string {
  const filled = status === "completed" ? BAR : status === "running" ? BAR / 2 : 0;
  return "#".repeat(filled) + "-".repeat(BAR - filled);
}

function stepLine(s: StepView, width: number): string {
  let extra = "";
  if (s.status === "waiting" && (s.waiting_reason || s.queue_position !== undefined)) {
    extra = ` (${[s.waiting_reason, s.queue_position !== undefined ? `queue position ${s.queue_position}` : undefined].filter(Boolean).join(", ")})`;
  }
  if (s.error) extra += `: ${s.error.split("\n").find((l) => l.trim()) ?? s.error}`.slice(0, 240);
  return `  ${s.step_id.padEnd(width)} [${bar(s.status)}] ${s.status}${extra}`;
}

/**
 * On a terminal: the whole block (a header and one line per step) redrawn in place with
 * cursor-up. Otherwise (a log, a pipe): a step's line only when its status changes.
 */
function renderer(io: CliIO, tty: boolean): (run: RunView) => void {
  let drawn = 0;
  let started = false;
  const seen = new Map<string, string>();
  return (run) => {
    const width = Math.max(4, ...run.steps.map((s) => s.step_id.length));
    if (tty) {
      const lines = [`run ${run.id} ${run.status} ${run.progress_pct}%`, ...run.steps.map((s) => stepLine(s, width))];
      lines.forEach((l, i) => io.out(`${i === 0 && drawn > 0 ? `\x1b[${drawn}A` : ""}\x1b[2K${l}`));
      drawn = lines.length;
      return;
    }
    if (!started) io.out(`run ${run.id} (${run.steps.length} step${run.steps.length === 1 ? "" : "s"})`);
    started = true;
    for (const s of run.steps) {
      if (seen.get(s.step_id) === s.status) continue;
      seen.set(s.step_id, s.status);
      io.out(stepLine(s, width));
    }
  };
}
