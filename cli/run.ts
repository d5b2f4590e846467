/**
 * `operon run SPEC_OR_PIPELINE_ID --workspace W --input k=v … [--follow]`: starts a run
 * through the HTTP API (never the store directly, so it works against a remote server and
 * obeys the same keys, scopes and validation as any other client) and, with `--follow`,
 * shows one progress line per step until the run ends, then its output paths. Exit 0 when
 * the run was started (or, with --follow, completed); 1 when the API refused it or it failed
 * or was cancelled; 2 for usage and connection problems.
 */
import { isFinal } from "../core/status.js";
import { existsSync } from "node:fs";
import { Command, InvalidArgumentError } from "commander";
import { parseCli, UsageError, type CliIO, type Ctx } from "./program.js";
import { ApiClient, ServerError, apiPath, ConnectionError, query, resolveConnection, withConnection } from "./client.js";
import { readSpecFile } from "./validate.js";
import { messageOf } from "../core/errors.js";

/** The CLI's output, plus whether stdout is a terminal (defaults to process.stdout.isTTY). */
export type RunIO = CliIO & { isTTY?: boolean };

const BAR = 10;
/** Consecutive failed polls (network errors, 429, 5xx) tolerated before giving up. */
const MAX_POLL_FAILURES = 5;

interface StepView { step_id: string; tool: string; status: string; error: string | null; waiting_reason: string | null; queue_position?: number }
interface RunView { id: string; status: string; progress_pct: number; output_paths: string[]; steps: StepView[]; error: string | null; output_folder: string }

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

export interface RunOptions { workspace: string; input?: string[]; follow?: boolean; json?: boolean; url?: string; key?: string; pollMs: number }

function pollMs(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 10 || n > 60_000) throw new InvalidArgumentError("expected an integer from 10 to 60000");
  return n;
}

/** The `run` command's definition; its action leaves the exit code in `ctx.code`. */
export function runCli(ctx: Ctx<RunIO>, fetchImpl: typeof fetch = ctx.fetch ?? fetch): Command {
  const cmd = new Command("run")
    .summary("Start a run via the HTTP API, optionally following it to the end")
    .description("Start a run through the HTTP API (so it works against a remote server, with the same keys, scopes and "
      + "validation as any client) and, with --follow, show one progress line per step until it ends, then its outputs.\n"
      + "SPEC_OR_PIPELINE_ID is a built-in pipeline id, a spec file on this machine (*.json), or else a spec file's path "
      + "in the workspace.")
    .argument("<SPEC_OR_PIPELINE_ID>", "a pipeline id (e.g. bwa-align), or a spec file path ending in .json")
    .requiredOption("--workspace <id>", "the workspace the run belongs to")
    .option("--input <name=value>", "a pipeline input; repeat for each input", (v: string, prev: string[] | undefined) => [...(prev ?? []), v])
    .option("--follow", "wait for the run to end, showing each step's progress")
    .option("--json", "print the API's run object as JSON (with --follow: the final one)");
  return withConnection(cmd)
    .option("--poll-ms <ms>", "with --follow, the polling interval in milliseconds, 10 to 60000", pollMs, 500)
    .addHelpText("after", `
Exit codes: 0 started (with --follow: completed), 1 refused by the API, failed or cancelled,
2 usage error, unreadable spec, no API key or server unreachable.

Examples:
  operon run bwa-align --workspace default --input reads1=data/r1.fq --input reads2=data/r2.fq \\
    --input reference=data/ref.fa --follow
  operon run my-pipeline.json --workspace default --input bam=data/x.bam --json`)
    .action(async (target: string, opts: RunOptions) => { ctx.code = await runAction(target, opts, ctx.io, ctx.env, fetchImpl); });
}

/** `operon run …` with the words after `run`, as the tests call it. */
export async function runCommand(args: string[], io: RunIO, env: NodeJS.ProcessEnv, fetchImpl: typeof fetch = fetch): Promise<number> {
  const ctx: Ctx<RunIO> = { io, env, code: 0 };
  return parseCli(runCli(ctx, fetchImpl), args, ctx);
}

/** Runs `operon run` with parsed options; usage problems are thrown as UsageError (exit 2 with the help hint). */
async function runAction(target: string, opts: RunOptions, io: RunIO, env: NodeJS.ProcessEnv, fetchImpl: typeof fetch): Promise<number> {
  try {
    return await run(target, opts, io, env, fetchImpl);
  } catch (e) {
    if (e instanceof UsageError) throw e;
    if (e instanceof ServerError) { io.err(`operon run: ${e.message}`); for (const l of e.lines) io.err(l); return 1; }
    io.err(`operon run: ${messageOf(e)}`);
    return 2;
  }
}

async function run(target: string, opts: RunOptions, io: RunIO, env: NodeJS.ProcessEnv, fetchImpl: typeof fetch): Promise<number> {
  const workspace = opts.workspace;
  if (!workspace) throw new UsageError("--workspace must not be empty");
  const input = parseInputs(opts.input ?? []);
  const client = new ApiClient(resolveConnection(opts, env), fetchImpl);

  const body: Record<string, unknown> = { workspace_id: workspace, input };
  if (target.endsWith(".json") && existsSync(target)) {
    const read = await readSpecFile(target);
    if (!read.ok) { io.err(`operon run: ${read.message}`); return 2; }
    body.spec = read.spec;
  } else if (target.endsWith(".json")) {
    body.spec_file = target; // not on this machine: a path in the workspace
  } else {
    body.pipeline_id = target;
  }

  const api = (method: "GET" | "POST", path: string, b?: unknown) => client.data<RunView>(method, path, b === undefined ? {} : { body: b });
  const submitted = await api("POST", "/v1/pipelines", body);
  if (!opts.follow) {
    io.out(opts.json ? JSON.stringify(submitted, null, 2) : submitted.id);
    return 0;
  }

  const tty = io.isTTY ?? process.stdout.isTTY === true;
  const render = opts.json ? () => undefined : renderer(io, tty);
  const path = apiPath`/v1/pipelines/${submitted.id}` + query({ workspace_id: workspace });
  let current = submitted;
  let failures = 0;
  render(current);
  while (!isFinal(current.status)) {
    await new Promise((r) => setTimeout(r, opts.pollMs));
    try {
      current = await api("GET", path);
      failures = 0;
    } catch (e) {
      const transient = e instanceof ConnectionError || (e instanceof ServerError && (e.status === 429 || e.status >= 500));
      if (!transient || ++failures >= MAX_POLL_FAILURES) throw new ConnectionError(`following ${submitted.id}: ${messageOf(e)}`);
      continue;
    }
    render(current);
  }

  if (opts.json) io.out(JSON.stringify(current, null, 2));
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
