/**
 * The tool catalogue and synchronous tool runs as a service: each tool with its commands
 * and parameter JSON Schema, and one tool run as one compute task — a slot of the
 * organization's concurrency limit like any pipeline step (waiting behind steps queued
 * earlier), the same executor, and its exit code, output (capped) and files. The tools
 * routes and the assistant's tool tools both call these.
 */
import { isFinal } from "../core/status.js";
import { randomBytes } from "node:crypto";
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import { runFolderName, ulid } from "../core/ids.js";
import { toolRunsRoot, workspaceRoot } from "../core/layout.js";
import { stepTimeoutMs } from "../core/plan.js";
import { StoreError, type Clock, type ObjectStore } from "../core/ports.js";
import { buildInvocation, defaultCatalogue, toolInputJsonSchema } from "../core/tools/index.js";
import { OperonError } from "../core/errors.js";
import type { AuthContext, WorkspaceAccess } from "./access.js";
import type { Engine } from "../engine/engine.js";
import { compressionRefusals } from "../engine/compression.js";

const OUTPUT_CAP = 64 * 1024;
/** How long a tool run waits for a free slot before giving up (503). */
const SLOT_WAIT_MS = 5 * 60_000;

/** Whether every local executable of a tool is on PATH (embedded mode runs them from there). */
function availableLocally(executables: readonly string[]): boolean {
  const dirs = (process.env.PATH ?? "").split(delimiter).filter(Boolean);
  return executables.every((e) => dirs.some((d) => { try { accessSync(join(d, e), constants.X_OK); return true; } catch { return false; } }));
}

/** Every tool of the catalogue as the API lists it; `storage` says whether executables are looked for on PATH. */
export function toolViews(storage: "local" | "s3") {
  const tools = defaultCatalogue.ids.map((id) => defaultCatalogue.get(id)).filter((t) => t !== undefined);
  return tools.map((t) => ({
    id: t.id, description: t.description, version: t.version, image: t.image, ...(t.imageNote ? { image_note: t.imageNote } : {}),
    commands: Object.entries(t.commands).map(([name, c]) => ({ name, description: c.description, required: c.required })),
    input_schema: toolInputJsonSchema(t),
    available: storage === "local" ? availableLocally(t.localExecutables) : true,
  }));
}

export interface ToolRunDeps { engine: Engine; store: ObjectStore; access: WorkspaceAccess; clock: Clock }

/** Runs `toolId` with `input` and waits for its result (never fails because the organization is full; 503 after a long wait). */
export async function runTool(deps: ToolRunDeps, auth: AuthContext, toolId: string, b: { input: Record<string, unknown>; workspace_id?: string | undefined }) {
  const { engine, store, access, clock } = deps;
  const tool = defaultCatalogue.get(toolId);
  if (!tool) throw new OperonError("not_found", `unknown tool ${JSON.stringify(toolId)}; tools: ${defaultCatalogue.ids.join(", ")}`, { valid_values: [...defaultCatalogue.ids] });
  const built = buildInvocation(tool, b.input, { runtime: "local", referenceVolumes: engine.referenceVolumes });
  if (!built.ok) throw new OperonError("invalid_request", built.errors.map((e) => `input${e.path.replace(/\//g, ".")}: ${e.message}`).join("; "), { errors: built.errors });
  if (built.invocation.inputs.length > 0 && !b.workspace_id) throw new OperonError("invalid_request", "workspace_id: is required for a tool that reads files", { field: "workspace_id" });
  const ws = b.workspace_id ? await access.workspace(auth, b.workspace_id) : undefined;
  const root = ws ? workspaceRoot(ws.organization, ws.id) : toolRunsRoot(auth.organization);
  for (const i of built.invocation.inputs) {
    if (!(await store.head(root + i.source))) throw new OperonError("not_found", `input.${i.param}: ${i.source} not found in workspace ${ws?.id}`, { field: i.param });
  }
  // A compressed file the tool cannot read (by its name, or a plain-gzip one by its bytes where bgzip is needed).
  const compressed = await compressionRefusals(store, root, { steps: [{ stepId: "run", toolName: tool.id, parameters: b.input }] }, {}, defaultCatalogue, { referenceVolumes: engine.referenceVolumes, byName: true });
  if (compressed.length) throw new OperonError("validation_failed", compressed.map((e) => e.message).join("; "), { errors: compressed });
  if (engine.mode === "cluster") return runAsPipelineRun(store, engine, clock, { organization: auth.organization, keyId: auth.keyId, workspace: ws?.id, root, toolId: tool.id, input: b.input, stdout: built.invocation.stdout });
  const executor = engine.executor;
  if (!executor) throw new Error("an embedded engine runs its tool runs itself: it has no executor");
  const now = clock.now();
  const taskId = `tool-${ulid(now, randomBytes(10))}`;
  // Take a slot like a pipeline step would: queue with the organization's steps, first come
  // first served; wait (never fail) while the organization is full.
  const waited = new AbortController();
  const timer = setTimeout(() => waited.abort(), SLOT_WAIT_MS);
  let release: () => void;
  try {
    release = await engine.slots(auth.organization, taskId, waited.signal, "tool");
  } catch (e) {
    if (waited.signal.aborted) throw new OperonError("unavailable", "no compute slot became free in time; retry later");
    throw e;
  } finally {
    clearTimeout(timer);
  }
  try {
    const runRoot = `${root}tool-runs/${runFolderName(now)}-${taskId.slice(-6)}/`;
    const done = new Promise<void>((resolve) => {
      const unwatch = executor.watch(async (id) => {
        if (id !== taskId) return;
        const o = (await executor.observe(taskId)).get(tool.id);
        if (o && o.phase !== "running") { unwatch(); resolve(); }
      });
    });
    await executor.submit({ runId: taskId, organization: auth.organization, stepId: tool.id, attempt: 1, toolName: tool.id, invocation: built.invocation, workspaceRoot: root, runRoot, timeoutMs: stepTimeoutMs({ stepId: tool.id }) });
    await done;
    const o = (await executor.observe(taskId)).get(tool.id);
    const log = (await executor.logs(taskId, tool.id)) ?? "";
    let stdout = "";
    if (built.invocation.stdout) {
      try {
        const { body } = await store.get(runRoot + built.invocation.stdout);
        for await (const c of body) { stdout += Buffer.from(c).toString("utf8"); if (stdout.length > OUTPUT_CAP) break; }
      } catch (e) { if (!(e instanceof StoreError)) throw e; }
    }
    return {
      exit_code: o?.exitCode ?? null,
      status: o?.phase ?? "failed",
      stdout: stdout.slice(0, OUTPUT_CAP),
      stderr: log.slice(-OUTPUT_CAP),
      error: o?.phase === "completed" ? null : (o?.message ?? null),
      output_files: (o?.outputs ?? []).map((f) => ({ key: f.key.slice(root.length), size: f.size, sha256: f.sha256 })),
    };
  } finally {
    release();
    executor.forgetRun?.(taskId);
  }
}

/**
 * Cluster mode: the api-server runs no steps, so a tool run is a one-step PipelineRun. The
 * operator admits it under the organization's limit like any step and runs it as a Job; the
 * request waits for it to finish and answers in the same shape as embedded mode.
 */
async function runAsPipelineRun(store: ObjectStore, engine: Engine, clock: Clock, t: { organization: string; keyId: string; workspace: string | undefined; root: string; toolId: string; input: Record<string, unknown>; stdout: string | undefined }) {
  if (!t.workspace) throw new OperonError("invalid_request", "workspace_id: is required for tool runs in cluster mode (the run's files are kept in a workspace)", { field: "workspace_id" });
  const spec = { id: `tool-${t.toolId}`, name: `${t.toolId} (tool run)`, steps: [{ stepId: "run", toolName: t.toolId, parameters: t.input }] };
  const res = await engine.submit({ organization: t.organization, workspace: t.workspace, keyId: t.keyId, spec, source: { kind: "inline" }, input: {}, name: spec.name });
  if (!res.ok) throw res.error;
  const id = res.run.id;
  const deadline = clock.now() + SLOT_WAIT_MS + stepTimeoutMs({ stepId: "run" });
  let run = res.run;
  while (!isFinal(run.status)) {
    if (clock.now() > deadline) throw new OperonError("unavailable", `tool run ${id} did not finish in time; follow it with GET /v1/pipelines/${id}`);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, 1000);
      const unwatch = engine.runs.watch((changed) => { if (changed === id) done(); });
      function done() { clearTimeout(timer); unwatch(); resolve(); }
    });
    run = (await engine.runs.get(id)) ?? run;
  }
  const step = run.steps[0];
  const runRoot = `${t.root}${run.outputFolder}/`;
  const read = async (key: string): Promise<string> => {
    let text = "";
    try {
      const { body } = await store.get(key);
      for await (const c of body) { text += Buffer.from(c).toString("utf8"); if (text.length > OUTPUT_CAP) break; }
    } catch (e) { if (!(e instanceof StoreError)) throw e; }
    return text;
  };
  return {
    exit_code: step?.exitCode ?? null,
    status: step?.status ?? run.status,
    stdout: t.stdout ? (await read(runRoot + t.stdout)).slice(0, OUTPUT_CAP) : "",
    stderr: (await read(`${runRoot}logs/run.log`)).slice(-OUTPUT_CAP),
    error: step?.status === "completed" ? null : (step?.error ?? run.error),
    output_files: (step?.outputs ?? []).map((f) => ({ key: f.key.slice(t.root.length), size: f.size, sha256: f.sha256 })),
    run_id: id,
  };
}
