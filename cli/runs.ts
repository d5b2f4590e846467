/**
 * `operon runs ls|show|logs|cancel|save-spec`: a workspace's pipeline runs through the HTTP
 * API (GET /v1/pipelines, GET and DELETE /v1/pipelines/{id}, its step logs and save-spec;
 * docs/api.md). `runs logs --follow` polls the step's log until the step ends, printing only
 * what is new. Exit 0 done, 1 the API refused (or, with --follow, the step did not complete),
 * 2 usage errors and an unreachable server.
 */
import { Command, Option } from "commander";
import { isFinalStep, RUN_STATUSES } from "../core/status.js";
import type { Ctx } from "./program.js";
import type { ApiClient} from "./client.js";
import { apiAction, apiPath, clientOf, query, type Page } from "./client.js";
import { firstLine, json, positiveInt, withCommon, shortTime, table, type CommonOptions } from "./output.js";

export interface StepView { step_id: string; tool: string; status: string; attempt: number; started_at: string | null; completed_at: string | null; exit_code: number | null; error: string | null; waiting_reason: string | null; queue_position?: number }
export interface RunView {
  id: string; status: string; progress_pct: number; output_paths: string[]; pipeline_id: string; name: string; workspace_id: string;
  created_at: string; started_at: string | null; completed_at: string | null; error: string | null; output_folder: string; manifest_path: string; steps: StepView[];
}

/** How often `runs logs --follow` looks for more. */
const FOLLOW_POLL_MS = 500;
/** The longest `--tail`, as the API allows. */
const MAX_TAIL = 10_000;

const runPath = (id: string, workspace: string | undefined) => apiPath`/v1/pipelines/${id}` + query({ workspace_id: workspace });

export function runsCli(ctx: Ctx): Command {
  const runs = new Command("runs").summary("List, inspect, follow, cancel and save pipeline runs")
    .description("A workspace's pipeline runs through the HTTP API: list them, show one with its steps, print or follow a step's log, cancel a run, save a finished run as a spec.");

  const ls = withCommon(new Command("ls").description("List a workspace's runs, newest first (id, status, progress, pipeline, created)")
    .addOption(new Option("--status <status>", "only runs with this status").choices(RUN_STATUSES))
    .option("--limit <n>", "runs per page, 1 to 1000", positiveInt(1000), 20)
    .option("--cursor <cursor>", "the page after this cursor (next_cursor of the previous page)")
    .option("--all", "every page, not just the first")
    .addHelpText("after", "\nExample:\n  operon runs ls --status failed --limit 5"), { json: "print the API's page as JSON: {data: [run], has_more, next_cursor}" });
  ls.action(apiAction(ls, ctx, async (opts: CommonOptions & { status?: string; limit: number; cursor?: string; all?: boolean }) => {
    const client = clientOf(ctx, opts);
    const page = await client.list<RunView>("/v1/pipelines" + query({ workspace_id: opts.workspace, limit: opts.limit, status: opts.status, cursor: opts.cursor }), opts.all === true);
    if (opts.json) { ctx.io.out(json(page)); return 0; }
    if (page.data.length === 0) ctx.io.err(`no runs in workspace ${opts.workspace}${opts.status ? ` with status ${opts.status}` : ""}`);
    else for (const l of table(["ID", "STATUS", "PROGRESS", "PIPELINE", "CREATED"], page.data.map((r) => [r.id, r.status, `${r.progress_pct}%`, r.pipeline_id, shortTime(r.created_at)]))) ctx.io.out(l);
    morePages(ctx, page, "runs");
    return 0;
  }));

  const show = withCommon(new Command("show").description("Show a run: its status, steps (with status, exit code, error) and outputs")
    .argument("<ID>", "the run id (run-…)")
    .addHelpText("after", "\nExample:\n  operon runs show run-01jd3x5k7m9q2r4t6v8w0y2a4c"), { workspace: "the run's", json: "print the API's run object as JSON" });
  show.action(apiAction(show, ctx, async (id: string, opts: CommonOptions) => {
    const run = await clientOf(ctx, opts).data<RunView>("GET", runPath(id, opts.workspace));
    if (opts.json) { ctx.io.out(json(run)); return 0; }
    for (const l of describeRun(run)) ctx.io.out(l);
    return 0;
  }));

  const logs = withCommon(new Command("logs").description("Print a step's log; with --follow, keep printing until the step ends")
    .argument("<ID>", "the run id (run-…)")
    .argument("<STEP>", "the step id, as runs show lists it")
    .option("-f, --follow", "keep printing new lines until the step has ended")
    .option("--tail <n>", `only the last n lines, 1 to ${MAX_TAIL} (with --follow: of what is there when it starts)`, positiveInt(MAX_TAIL))
    .addHelpText("after", "\nExit codes: 0 printed (with --follow: the step completed), 1 refused by the API (no such run or\nstep) or, with --follow, the step failed, was cancelled or skipped, 2 usage error or server\nunreachable.\n\nExample:\n  operon runs logs run-01jd3x5k7m9q2r4t6v8w0y2a4c align --follow --tail 20"), { workspace: "the run's", json: "print JSON: {run_id, step_id, status, exit_code, log}; with --follow one {line} object per line, then {run_id, step_id, status, exit_code}" });
  logs.action(apiAction(logs, ctx, async (id: string, step: string, opts: CommonOptions & { follow?: boolean; tail?: number }) => {
    const client = clientOf(ctx, opts);
    return opts.follow ? followLog(ctx, client, id, step, opts) : printLog(ctx, client, id, step, opts);
  }));

  const cancel = withCommon(new Command("cancel").description("Cancel a run (a run that has already ended is left as it is)")
    .argument("<ID>", "the run id (run-…)")
    .addHelpText("after", "\nExample:\n  operon runs cancel run-01jd3x5k7m9q2r4t6v8w0y2a4c"), { workspace: "the run's", json: "print the API's run object as JSON" });
  cancel.action(apiAction(cancel, ctx, async (id: string, opts: CommonOptions) => {
    const run = await clientOf(ctx, opts).data<RunView>("DELETE", runPath(id, opts.workspace));
    if (opts.json) ctx.io.out(json(run));
    else if (run.status === "completed" || run.status === "failed" || run.status === "cancelled") ctx.io.out(`run ${run.id} ${run.status === "cancelled" ? "cancelled" : `had already ended (${run.status})`}`);
    else ctx.io.out(`run ${run.id}: cancellation requested (${run.status})`);
    return 0;
  }));

  const save = withCommon(new Command("save-spec").description("Save a completed or failed run as a spec, pipelines/specs/<name>.pipeline.json in its workspace")
    .argument("<ID>", "the run id (run-…)")
    .requiredOption("--name <name>", "the spec's name (its file name is made from it)")
    .option("--overwrite", "replace a spec of the same name")
    .addHelpText("after", "\nExit codes: 0 saved, 1 refused by the API (the run has not finished, the name is taken without\n--overwrite), 2 usage error or server unreachable.\n\nExample:\n  operon runs save-spec run-01jd3x5k7m9q2r4t6v8w0y2a4c --name \"my alignment\""), { workspace: "the run's", json: "print the API's answer as JSON: {path, spec, warnings}" });
  save.action(apiAction(save, ctx, async (id: string, opts: CommonOptions & { name: string; overwrite?: boolean }) => {
    const client = clientOf(ctx, opts);
    // The body names the workspace: the run's own unless --workspace says otherwise.
    const workspace = opts.workspace ?? (await client.data<RunView>("GET", runPath(id, undefined))).workspace_id;
    const saved = await client.data<{ path: string; warnings: Array<{ path: string; message: string; code: string }> }>("POST", apiPath`/v1/pipelines/${id}/save-spec`, { body: { workspace_id: workspace, name: opts.name, overwrite: opts.overwrite === true } });
    if (opts.json) { ctx.io.out(json(saved)); return 0; }
    ctx.io.out(`saved ${saved.path} (workspace ${workspace})`);
    for (const w of saved.warnings) ctx.io.err(`  warning ${w.path || "/"}: ${w.message} [${w.code}]`);
    return 0;
  }));

  for (const c of [ls, show, logs, cancel, save]) runs.addCommand(c);
  return runs;
}

/** The hint to the next page of a listing, on stderr so stdout stays the table. */
export function morePages(ctx: Ctx, page: Page<unknown>, what: string): void {
  if (page.has_more && page.next_cursor) ctx.io.err(`more ${what}: --cursor ${page.next_cursor} (or --all)`);
}

/** A run for people: its facts, a table of its steps, its outputs. */
function describeRun(run: RunView): string[] {
  const lines = [
    `Run:        ${run.id}`,
    `Pipeline:   ${run.pipeline_id}${run.name && run.name !== run.pipeline_id ? ` (${run.name})` : ""}`,
    `Workspace:  ${run.workspace_id}`,
    `Status:     ${run.status} (${run.progress_pct}%)`,
    `Created:    ${shortTime(run.created_at)}`,
    `Started:    ${shortTime(run.started_at)}`,
    `Completed:  ${shortTime(run.completed_at)}`,
    `Outputs in: ${run.output_folder}`,
  ];
  if (run.error) lines.push(`Error:      ${firstLine(run.error, 240)}`);
  lines.push("", ...table(["STEP", "TOOL", "STATUS", "EXIT", "ATTEMPT", "NOTE"], run.steps.map((s) => [
    s.step_id, s.tool, s.status, s.exit_code === null ? "-" : String(s.exit_code), String(s.attempt),
    s.error ? firstLine(s.error) : s.status === "waiting" ? [s.waiting_reason, s.queue_position !== undefined ? `queue position ${s.queue_position}` : undefined].filter(Boolean).join(", ") : "",
  ])));
  if (run.output_paths.length) lines.push("", "Outputs:", ...run.output_paths.map((p) => `  ${p}`));
  return lines;
}

const logPath = (id: string, step: string, workspace: string | undefined, tail: number | undefined) =>
  apiPath`/v1/pipelines/${id}/steps/${step}/logs` + query({ workspace_id: workspace, tail });

function stepOf(run: RunView, step: string): StepView | undefined {
  return run.steps.find((s) => s.step_id === step);
}

async function printLog(ctx: Ctx, client: ApiClient, id: string, step: string, opts: CommonOptions & { tail?: number }): Promise<number> {
  const text = await client.textOf("GET", logPath(id, step, opts.workspace, opts.tail));
  if (opts.json) {
    const s = stepOf(await client.data<RunView>("GET", runPath(id, opts.workspace)), step);
    ctx.io.out(json({ run_id: id, step_id: step, status: s?.status ?? null, exit_code: s?.exit_code ?? null, log: text }));
  } else if (text !== "") ctx.io.out(text.replace(/\n$/, ""));
  return 0;
}

/** What `next` adds to `prev`: the rest after prev, or after the end of prev found in next (a log that was cut or moved). */
export function newText(prev: string, next: string): { text: string; restarted: boolean } {
  if (next.startsWith(prev)) return { text: next.slice(prev.length), restarted: false };
  const anchor = prev.slice(-256);
  const at = anchor ? next.lastIndexOf(anchor) : -1;
  if (at >= 0) return { text: next.slice(at + anchor.length), restarted: false };
  return { text: next, restarted: true };
}

/** The last `n` lines of `text` (a final newline does not count as a line). */
function lastLines(text: string, n: number): string {
  const lines = text.split("\n");
  const end = lines[lines.length - 1] === "" ? lines.length - 1 : lines.length;
  return lines.slice(Math.max(0, end - n), end).join("\n");
}

async function followLog(ctx: Ctx, client: ApiClient, id: string, step: string, opts: CommonOptions & { tail?: number }): Promise<number> {
  let seen = "";
  let pending = "";
  let first = true;
  const emit = (line: string) => ctx.io.out(opts.json ? JSON.stringify({ line }) : line);
  const write = (text: string) => {
    const lines = (pending + text).split("\n");
    pending = lines.pop() ?? "";
    for (const l of lines) emit(l);
  };
  for (;;) {
    // The step's status before its log: once the status is final, the log read after it is complete.
    const run = await client.data<RunView>("GET", runPath(id, opts.workspace));
    const s = stepOf(run, step);
    const text = await client.textOf("GET", logPath(id, step, opts.workspace, undefined));
    if (first && opts.tail !== undefined) { write(lastLines(text, opts.tail) + (text.endsWith("\n") ? "\n" : "")); seen = text; }
    else {
      const d = newText(seen, text);
      if (d.restarted && seen !== "") ctx.io.err(`operon runs logs: the log of ${step} started over (a new attempt)`);
      write(d.text);
      seen = text;
    }
    first = false;
    if (!s || isFinalStep(s.status)) {
      if (pending !== "") { emit(pending); pending = ""; }
      if (opts.json) ctx.io.out(JSON.stringify({ run_id: id, step_id: step, status: s?.status ?? null, exit_code: s?.exit_code ?? null }));
      else if (s && s.status !== "completed") ctx.io.err(`step ${step} ${s.status}${s.error ? `: ${firstLine(s.error, 240)}` : ""}`);
      return s?.status === "completed" ? 0 : 1;
    }
    await new Promise((r) => setTimeout(r, FOLLOW_POLL_MS));
  }
}
