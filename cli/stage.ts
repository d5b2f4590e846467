/**
 * `operon stage-in` and `operon stage-out`: the operon-image containers of a cluster-mode step
 * pod (DESIGN §4). stage-in (init container) fills the shared working directory from object
 * storage before the tool image runs; stage-out (main container) uploads the declared outputs
 * with their SHA-256 afterwards. They run adapters/staging.ts, the same code as embedded mode.
 * The plan is env `OPERON_STEP_PLAN` (JSON of StepPlan); the store is configured exactly as the
 * server's. The result goes to the container's termination log, which Kubernetes hands to the
 * operator (≤ 4096 bytes):
 * - stage-in failure: the error line, `stage-in: <message>`;
 * - stage-out success: `{"outputs":[{filename,position?,key,size,sha256}]}`, or
 *   `{"outputs":null,"truncated":true}` when that would not fit (the operator then HEADs the
 *   objects); stage-out failure: `{"error":"<message>"}`.
 * Exit 0 done, 1 staging failed, 2 bad arguments, plan or configuration.
 */
import { writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { parseConfig } from "../core/config.js";
import type { StepOutput } from "../core/ports.js";
import { createStore } from "../engine/runtime.js";
import { parseStepPlan, publishOutputs, stageInputs, STEP_PLAN_ENV, type StepPlan } from "../adapters/staging.js";
import type { CliIO } from "./validate.js";

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

function setup(name: string, args: string[], env: NodeJS.ProcessEnv): Setup {
  let values: { workdir?: string | undefined; "termination-log"?: string | undefined };
  try {
    ({ values } = parseArgs({ args, options: { workdir: { type: "string" }, "termination-log": { type: "string" } } }));
  } catch (e) {
    return { ok: false, message: `${e instanceof Error ? e.message : String(e)}; usage: operon ${name} --workdir DIR [--termination-log PATH]`, terminationLog: DEFAULT_TERMINATION_LOG };
  }
  const terminationLog = values["termination-log"] || DEFAULT_TERMINATION_LOG;
  if (!values.workdir) return { ok: false, message: `usage: operon ${name} --workdir DIR [--termination-log PATH]`, terminationLog };
  const parsed = parseStepPlan(env[STEP_PLAN_ENV]);
  if (!parsed.ok) return { ok: false, message: parsed.message, terminationLog };
  return { ok: true, workdir: values.workdir, terminationLog, plan: parsed.plan, env };
}

/** The configured object store. The signing secret only serves the local store's presigned URLs, which staging never makes. */
async function store(env: NodeJS.ProcessEnv) {
  const c = parseConfig(env);
  if (!c.ok) throw new UsageError(c.message);
  return createStore(c.config, c.config.OPERON_SIGNING_SECRET ?? "staging-makes-no-presigned-urls-000000");
}

class UsageError extends Error {}

const messageOf = (e: unknown) => (e instanceof Error ? e.message : String(e)).replace(/\s*\n\s*/g, " ");

export async function stageInCommand(args: string[], io: CliIO, env: NodeJS.ProcessEnv): Promise<number> {
  const s = setup("stage-in", args, env);
  const fail = async (message: string, code: number) => {
    const line = `stage-in: ${message}`;
    io.err(line);
    await writeTerminationLog(s.terminationLog, line);
    return code;
  };
  if (!s.ok) return fail(s.message, 2);
  try {
    await stageInputs(await store(s.env), s.plan, s.workdir);
  } catch (e) {
    return fail(messageOf(e), e instanceof UsageError ? 2 : 1);
  }
  return 0;
}

export async function stageOutCommand(args: string[], io: CliIO, env: NodeJS.ProcessEnv): Promise<number> {
  const s = setup("stage-out", args, env);
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
    return fail(messageOf(e), e instanceof UsageError ? 2 : 1);
  }
  await writeTerminationLog(s.terminationLog, outputsJson(outputs));
  return 0;
}
