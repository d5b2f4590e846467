/**
 * `operon stage-in` and `operon stage-out`: the operon-image containers of a cluster-mode step
 * pod (docs/kubernetes.md, "Step pods"). stage-in (init container) fills the shared working directory from object
 * storage before the tool image runs; stage-out (main container) uploads the declared outputs
 * with their SHA-256 afterwards. They run adapters/staging.ts, the same code as embedded mode.
 * The plan is env `OPERON_STEP_PLAN` (JSON of StepPlan); the store is configured exactly as the
 * server's. The result goes to the container's termination log, which Kubernetes hands to the
 * operator (≤ 4096 bytes):
 * - stage-in failure: the error line, `stage-in: <message>`; stage-in success: nothing, or when
 *   the step reads files on reference volumes, their checksums for run.json,
 *   `{"references":[{uri,sha256,size,kind?}]}` (core/references.ts `referencesReport`; the
 *   volumes are at /ref/<name>, or where OPERON_REF_VOLUMES says, as under a test kubelet);
 * - stage-out success: `{"outputs":[{filename,position?,key,size,sha256}]}`, or
 *   `{"outputs":null,"truncated":true}` when that would not fit (the operator then HEADs the
 *   objects); stage-out failure: `{"error":"<message>"}`.
 * Usage errors (e.g. no --workdir) go to the termination log too, in the same forms.
 * Exit 0 done, 1 staging failed, 2 bad arguments, plan or configuration.
 */
import { writeFile } from "node:fs/promises";
import { Command } from "commander";
import { parseConfig } from "../core/config.js";
import type { StepOutput } from "../core/ports.js";
import { parseStepPlan, publishOutputs, stageInputs, STEP_PLAN_ENV, type StepPlan } from "../adapters/staging.js";
import { checksumReferences, type VolumeRoots } from "../adapters/references.js";
import { REFERENCE_ROOT, referencesReport } from "../core/references.js";
import { onUsageError, parseCli, type CliIO, type Ctx } from "./program.js";
import { messageOf } from "../core/errors.js";

/** Kubernetes keeps at most this many bytes of a container's termination message. */
export const TERMINATION_LOG_MAX = 4096;
const DEFAULT_TERMINATION_LOG = "/dev/termination-log";

/** `s` cut to at most `max` UTF-8 bytes, at a character boundary. */
function truncateUtf8(s: string, max: number): string {
  const b = Buffer.from(s, "utf8");
  if (b.length <= max) return s;
  let end = max;
  while (end > 0 && ((b[end] ?? 0) & 0xc0) === 0x80) end--;
  return b.subarray(0, end).toString("utf8");
}

/** Writes the termination log; a path that cannot be written (not in a pod) is ignored. */
async function writeTerminationLog(path: string, text: string): Promise<void> {
  try { await writeFile(path, truncateUtf8(text, TERMINATION_LOG_MAX)); } catch { /* not in a pod */ }
}

/** `{"error":"…"}` within the size limit (the message is shortened if needed). */
function errorJson(message: string): string {
  let m = message;
  for (;;) {
    const json = JSON.stringify({ error: m });
    const over = Buffer.byteLength(json) - TERMINATION_LOG_MAX;
    if (over <= 0) return json;
    m = truncateUtf8(m, Math.max(0, Buffer.byteLength(m) - over));
  }
}

/** The stage-out termination message: every output, or the truncated form when too large. */
export function outputsJson(outputs: StepOutput[]): string {
  const json = JSON.stringify({
    outputs: outputs.map((o) => ({ filename: o.filename, ...(o.position !== undefined ? { position: o.position } : {}), key: o.key, size: o.size, sha256: o.sha256 })),
  });
  return Buffer.byteLength(json) <= TERMINATION_LOG_MAX ? json : JSON.stringify({ outputs: null, truncated: true });
}

type Setup = { ok: true; workdir: string; terminationLog: string; plan: StepPlan; env: NodeJS.ProcessEnv } | { ok: false; message: string; terminationLog: string };

interface StageOptions { workdir: string; terminationLog?: string }

function setup(name: string, opts: StageOptions, env: NodeJS.ProcessEnv): Setup {
  const terminationLog = opts.terminationLog || DEFAULT_TERMINATION_LOG;
  if (!opts.workdir) return { ok: false, message: `--workdir must not be empty (see operon ${name} --help)`, terminationLog };
  const parsed = parseStepPlan(env[STEP_PLAN_ENV]);
  if (!parsed.ok) return { ok: false, message: parsed.message, terminationLog };
  return { ok: true, workdir: opts.workdir, terminationLog, plan: parsed.plan, env };
}

/** stage-in or stage-out's definition; the action leaves its exit code in `ctx.code`. */
function stageCli(name: "stage-in" | "stage-out", ctx: Ctx, summary: string, description: string, result: string): Command {
  const cmd = new Command(name).summary(summary)
    .description(`${description} The plan is env ${STEP_PLAN_ENV} (JSON); the object store is configured as the server's (same environment).`)
    .requiredOption("--workdir <dir>", "the step's working directory, shared with the tool container")
    .option("--termination-log <path>", `where the result goes for the operator (default: ${DEFAULT_TERMINATION_LOG})`)
    .addHelpText("after", `\nTermination log: ${result}\nExit codes: 0 done, 1 staging failed, 2 usage error, bad ${STEP_PLAN_ENV} or configuration.\n\nExample (a step pod's container):\n  operon ${name} --workdir /work --termination-log /dev/termination-log`)
    .action(async (opts: StageOptions) => { ctx.code = await (name === "stage-in" ? stageIn : stageOut)(opts, ctx.io, ctx.env); });
  // A usage error in a pod is a chart or operator bug: report it to the operator like any failure.
  return onUsageError(cmd, async (problem) => {
    const path = (cmd.opts() as Partial<StageOptions>).terminationLog || DEFAULT_TERMINATION_LOG;
    await writeTerminationLog(path, name === "stage-in" ? `stage-in: ${problem}` : errorJson(problem));
  });
}

export function stageInCli(ctx: Ctx): Command {
  return stageCli("stage-in", ctx, "Step pod: stage the inputs of env OPERON_STEP_PLAN in (cluster mode)",
    "Init container of a cluster-mode step pod: download the step's inputs (with their secondary files) into the working directory, create its directories, and checksum the files it reads on reference volumes (at /ref/<name>, or where OPERON_REF_VOLUMES maps them).",
    "on failure the error line, stage-in: <message>; on success nothing, or for\n  a step that reads reference files their checksums, {\"references\":[{uri,sha256,size,kind?}]}.");
}

export function stageOutCli(ctx: Ctx): Command {
  return stageCli("stage-out", ctx, "Step pod: upload the declared outputs with their sha256 (cluster mode)",
    "Main container of a cluster-mode step pod, after the tool: upload the step's declared outputs with their SHA-256.",
    `on success {"outputs":[{filename,position?,key,size,sha256}]}, or {"outputs":null,"truncated":true}\n  when that is over ${TERMINATION_LOG_MAX} bytes; on failure {"error":"<message>"}.`);
}

/** The configured object store. The signing secret only serves the local store's presigned URLs, which staging never makes. */
async function store(env: NodeJS.ProcessEnv) {
  const c = parseConfig(env);
  if (!c.ok) throw new ConfigError(c.message);
  const { createStore } = await import("../wiring/runtime.js"); // the store adapters load only when needed
  return createStore(c.config, c.config.OPERON_SIGNING_SECRET ?? "staging-makes-no-presigned-urls-000000");
}

/** The store's configuration is invalid (exit 2, like a bad plan). */
class ConfigError extends Error {}

const oneLine = (e: unknown) => messageOf(e).replace(/\s*\n\s*/g, " ");

/** `operon stage-in …` with the words after `stage-in`. */
export async function stageInCommand(args: string[], io: CliIO, env: NodeJS.ProcessEnv): Promise<number> {
  const ctx: Ctx = { io, env, code: 0 };
  return parseCli(stageInCli(ctx), args, ctx);
}

/** `operon stage-out …` with the words after `stage-out`. */
export async function stageOutCommand(args: string[], io: CliIO, env: NodeJS.ProcessEnv): Promise<number> {
  const ctx: Ctx = { io, env, code: 0 };
  return parseCli(stageOutCli(ctx), args, ctx);
}

async function stageIn(opts: StageOptions, io: CliIO, env: NodeJS.ProcessEnv): Promise<number> {
  const s = setup("stage-in", opts, env);
  const fail = async (message: string, code: number) => {
    const line = `stage-in: ${message}`;
    io.err(line);
    await writeTerminationLog(s.terminationLog, line);
    return code;
  };
  if (!s.ok) return fail(s.message, 2);
  let report: string | undefined;
  try {
    // Reference data first (refused if it leaves its volume), then the inputs.
    if (s.plan.references?.length) report = referencesReport((await checksumReferences(s.plan.references, referenceRoots(s.env))).checksums);
    await stageInputs(await store(s.env), s.plan, s.workdir);
  } catch (e) {
    return fail(oneLine(e), e instanceof ConfigError ? 2 : 1);
  }
  if (report !== undefined) await writeTerminationLog(s.terminationLog, report);
  return 0;
}

/**
 * Where the step pod's reference volumes are: mounted at /ref/<name>, unless OPERON_REF_VOLUMES
 * maps them elsewhere (a test kubelet that runs the pod's containers as local processes).
 */
function referenceRoots(env: NodeJS.ProcessEnv): VolumeRoots {
  const c = parseConfig(env);
  if (!c.ok) throw new ConfigError(c.message);
  const mapped = c.config.OPERON_REF_VOLUMES;
  if (mapped === undefined) return (name) => `${REFERENCE_ROOT}/${name}`;
  return (name) => (Object.hasOwn(mapped, name) ? mapped[name] : undefined);
}

async function stageOut(opts: StageOptions, io: CliIO, env: NodeJS.ProcessEnv): Promise<number> {
  const s = setup("stage-out", opts, env);
  const fail = async (message: string, code: number) => {
    io.err(`stage-out: ${message}`);
    await writeTerminationLog(s.terminationLog, errorJson(message));
    return code;
  };
  if (!s.ok) return fail(s.message, 2);
  let outputs: StepOutput[];
  try {
    outputs = await publishOutputs(await store(s.env), s.plan, s.workdir);
  } catch (e) {
    return fail(oneLine(e), e instanceof ConfigError ? 2 : 1);
  }
  await writeTerminationLog(s.terminationLog, outputsJson(outputs));
  return 0;
}
