/**
 * Staging a step's files between object storage and its working directory, in one place for
 * both modes: embedded mode's process executor calls it in-process, and in cluster mode the
 * step pod's `operon stage-in` / `operon stage-out` containers call it around the tool
 * container (docs/kubernetes.md#step-pods). Inputs come from the workspace with their secondary files (indexes);
 * declared outputs go to the run folder with their SHA-256. Every path of a plan is relative
 * to the working directory: one that would land outside it (absolute, or climbing with `..`,
 * or an output that is a symlink leading out) is refused, since in a pod the plan and the
 * tool image's files must never reach the stager's own files.
 */
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, realpath, stat } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, posix, relative, sep } from "node:path";
import { pipeline } from "node:stream/promises";
import { z } from "zod";
import { normalizeWorkspacePath, parseReferenceUri } from "../core/paths.js";
import { MAX_REFERENCES_PER_STEP } from "../core/references.js";
import { secondaryCandidates } from "../core/tools/index.js";
import { StoreError, type ObjectStore, type StepOutput } from "../core/ports.js";
import type { OutputFile, StagedInput } from "../core/tools/types.js";
import { messageOf } from "../core/errors.js";

/** Everything a step's stager needs to know; in cluster mode, the JSON of env `OPERON_STEP_PLAN`. */
export interface StepPlan {
  /** Storage key prefix of the workspace, ending in `/` (`orgs/<org>/workspaces/<ws>/`). */
  workspaceRoot: string;
  /** Storage key prefix of the run folder, ending in `/`. */
  runRoot: string;
  inputs: StagedInput[];
  outputs: OutputFile[];
  mkdirs: string[];
  /** The file the tool's standard output goes to, relative to the working directory. */
  stdout?: string;
  /**
   * Files on reference volumes the tool reads in place (`ref://<volume>/<path>` at
   * `/ref/<volume>/<path>`): not staged; stage-in checksums them for run.json (adapters/references.ts).
   */
  references?: Array<{ uri: string; path: string }>;
}

/** The environment variable that carries a step pod's plan. */
export const STEP_PLAN_ENV = "OPERON_STEP_PLAN";

/** True when `path` (relative to a working directory) would land outside it. */
export function escapesDir(path: string): boolean {
  if (isAbsolute(path) || path.includes("\0")) return true;
  const n = posix.normalize(path.replaceAll("\\", "/"));
  return n === ".." || n.startsWith("../");
}

function insideOrThrow(path: string, what: string): void {
  if (escapesDir(path)) throw new Error(`${what} ${JSON.stringify(path)} is outside the working directory`);
}

/** Where a secondary file of `source` lands beside `local` (same suffix, or a replaced extension). */
export function secondaryLocal(source: string, candidate: string, local: string): string {
  if (candidate.startsWith(source)) return local + candidate.slice(source.length);
  const srcBase = basename(source);
  const candBase = basename(candidate);
  let i = 0;
  while (i < srcBase.length && srcBase[i] === candBase[i]) i++;
  const localBase = basename(local);
  const keep = localBase.length - (srcBase.length - i);
  return join(dirname(local), localBase.slice(0, Math.max(0, keep)) + candBase.slice(i));
}

/** One file a step reads: its storage key and where it lands, relative to the working directory. */
export interface InputFile { param: string; key: string; local: string }

/**
 * Every input of a plan with whichever of its secondary files exist, as storage keys and
 * local paths. All paths are checked first; a source that is not a normalized workspace
 * path is refused (the plan may come from a pod's environment), and a missing primary
 * file fails naming its parameter.
 */
export async function locateInputs(store: ObjectStore, plan: Pick<StepPlan, "workspaceRoot" | "inputs">): Promise<InputFile[]> {
  for (const input of plan.inputs) {
    insideOrThrow(input.local, `input ${input.param}: local path`);
    const n = normalizeWorkspacePath(input.source);
    if (!n.ok || n.path !== input.source) throw new Error(`input ${input.param}: ${n.ok ? "path is not normalized" : n.reason}`);
  }
  const files: InputFile[] = [];
  for (const input of plan.inputs) {
    if (!(await store.head(plan.workspaceRoot + input.source))) throw new Error(`input ${input.param}: ${input.source} not found in the workspace`);
    files.push({ param: input.param, key: plan.workspaceRoot + input.source, local: input.local });
    for (const cand of secondaryCandidates(input.source)) {
      const local = secondaryLocal(input.source, cand, input.local);
      insideOrThrow(local, `input ${input.param}: secondary file`);
      if (await store.head(plan.workspaceRoot + cand)) files.push({ param: input.param, key: plan.workspaceRoot + cand, local });
    }
  }
  return files;
}

/** Downloads located input files into `dir`. */
export async function copyInputs(store: ObjectStore, files: readonly InputFile[], dir: string): Promise<void> {
  for (const f of files) {
    const dest = join(dir, f.local);
    await mkdir(dirname(dest), { recursive: true });
    try {
      const { body } = await store.get(f.key);
      await pipeline(body, createWriteStream(dest));
    } catch (e) {
      if (e instanceof StoreError && e.code === "NotFound") throw new Error(`input ${f.param}: ${f.key.split("/").slice(4).join("/")} was deleted while it was staged`, { cause: e });
      throw e;
    }
  }
}

/** Creates the plan's directories in `dir`, each checked to stay inside it. */
export async function makeDirs(plan: Pick<StepPlan, "mkdirs">, dir: string): Promise<void> {
  for (const d of plan.mkdirs) insideOrThrow(d, "directory");
  for (const d of plan.mkdirs) await mkdir(join(dir, d), { recursive: true });
}

/**
 * Downloads every input (and whichever of its secondary files exist) into `dir`, then creates
 * the plan's directories. All paths are checked before anything is written.
 */
export async function stageInputs(store: ObjectStore, plan: Pick<StepPlan, "workspaceRoot" | "inputs" | "mkdirs">, dir: string): Promise<void> {
  for (const d of plan.mkdirs) insideOrThrow(d, "directory");
  await copyInputs(store, await locateInputs(store, plan), dir);
  await makeDirs(plan, dir);
}

/** The file's real path when it is a regular file inside `realDir`; undefined when absent. */
async function producedFile(realDir: string, dir: string, path: string): Promise<string | undefined> {
  let real: string;
  try { real = await realpath(join(dir, path)); } catch { return undefined; }
  const rel = relative(realDir, real);
  if (rel === "") return undefined;
  if (rel === ".." || rel.startsWith(".." + sep) || isAbsolute(rel)) throw new Error(`declared output ${path} resolves outside the working directory`);
  return (await stat(real)).isFile() ? real : undefined;
}

/**
 * Uploads every declared output to `runRoot + path` with its SHA-256. A missing primary
 * output fails the step before anything is uploaded; a missing secondary file is skipped.
 * Primary outputs carry their position (0 is `${step.outputFile}`).
 */
export async function publishOutputs(store: ObjectStore, plan: Pick<StepPlan, "runRoot" | "outputs">, dir: string): Promise<StepOutput[]> {
  for (const o of plan.outputs) for (const p of [o.path, ...o.secondary]) insideOrThrow(p, "declared output");
  const realDir = await realpath(dir);
  const primaries: string[] = [];
  for (const o of plan.outputs) {
    const real = await producedFile(realDir, dir, o.path);
    if (!real) throw new Error(`declared output ${o.path} was not produced`);
    primaries.push(real);
  }
  const outputs: StepOutput[] = [];
  for (const [position, o] of plan.outputs.entries()) {
    for (const [i, path] of [o.path, ...o.secondary].entries()) {
      const real = i === 0 ? primaries[position] : await producedFile(realDir, dir, path);
      if (!real) continue;
      const key = plan.runRoot + path;
      const body = createReadStream(real);
      // A file that vanishes before the upload attaches (a step torn down meanwhile) must fail
      // this put, not raise an unhandled 'error' event that stops the process; the put still
      // sees the stream's error.
      body.on("error", () => undefined);
      const info = await store.put(key, body);
      outputs.push({ filename: path, key, size: info.size, sha256: info.sha256 as string, ...(i === 0 ? { position } : {}) });
    }
  }
  return outputs;
}

const relPath = z.string().min(1).superRefine((v, ctx) => {
  if (escapesDir(v)) ctx.addIssue({ code: "custom", message: `${JSON.stringify(v)} is outside the working directory` });
});
const prefix = z.string().min(1).refine((v) => v.endsWith("/"), "must end in /");

export const stepPlanSchema = z.object({
  workspaceRoot: prefix,
  runRoot: prefix,
  inputs: z.array(z.object({ param: z.string().min(1), source: z.string().min(1).refine((v) => { const n = normalizeWorkspacePath(v); return n.ok && n.path === v; }, "must be a normalized workspace path"), local: relPath })),
  outputs: z.array(z.object({ path: relPath, secondary: z.array(relPath) })),
  mkdirs: z.array(relPath),
  stdout: relPath.optional(),
  references: z.array(z.object({
    uri: z.string().refine((v) => { const r = parseReferenceUri(v); return r.ok && r.uri === v; }, "must be a normalized ref://<volume>/<path>"),
    path: z.string().min(1),
  })).max(MAX_REFERENCES_PER_STEP).optional(),
});

/** Parses a plan's JSON text; on failure one line naming the bad field (e.g. `inputs[0].local`). */
export function parseStepPlan(text: string | undefined): { ok: true; plan: StepPlan } | { ok: false; message: string } {
  if (text === undefined || text === "") return { ok: false, message: `${STEP_PLAN_ENV} is not set` };
  let json: unknown;
  try { json = JSON.parse(text); } catch (e) { return { ok: false, message: `${STEP_PLAN_ENV} is not JSON: ${messageOf(e)}` }; }
  const r = stepPlanSchema.safeParse(json);
  if (r.success) return { ok: true, plan: r.data };
  const issue = r.error.issues[0];
  const field = (issue?.path ?? []).reduce<string>((s, k) => (typeof k === "number" ? `${s}[${k}]` : s ? `${s}.${String(k)}` : String(k)), "");
  return { ok: false, message: `${STEP_PLAN_ENV}: ${field || "plan"}: ${issue?.message ?? "invalid"}` };
}
