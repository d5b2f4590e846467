/**
 * Pipelines as a service (spec: Pipelines; docs/api.md#pipelines): spec files, validation, starting a
 * run from exactly one source, a run as its caller may see it, cancel, step logs, saving a
 * finished run as a spec, and pipeline definitions. The pipelines routes and the assistant's
 * `service_*` tools both call these: one rule each, authorised through services/access.ts.
 */
import { Readable } from "node:stream";
import { MAX_SPEC_BYTES, type PipelineSpec } from "../core/spec/schema.js";
import { extractSpec } from "../core/save-spec.js";
import { RunManifestSchema, buildManifest } from "../core/manifest.js";
import { validateSpec } from "../core/spec/validate.js";
import { defaultCatalogue } from "../core/tools/index.js";
import { StoreError, type Clock, type ObjectStore, type RunOrigin, type RunRecord } from "../core/ports.js";
import type { ValidationResult } from "../core/issues.js";
import { RUN_ID } from "../core/ids.js";
import { manifestPath, stepLogKey, workspaceRoot } from "../core/layout.js";
import { isFinalStep } from "../core/status.js";
import { OperonError, badRequest, messageOf } from "../core/errors.js";
import { fileKey, type AuthContext, type WorkspaceAccess } from "./access.js";
import { tailObject, lastLines } from "./log-tail.js";
import type { Engine } from "../engine/engine.js";
import type { WorkspaceRecord } from "./store.js";

/** A run as the API shows it (snake_case, workspace-relative output keys). */
export function runView(run: RunRecord) {
  const root = workspaceRoot(run.organization, run.workspace);
  return {
    id: run.id,
    status: run.status,
    progress_pct: run.progressPct,
    output_paths: run.steps.flatMap((s) => s.outputs.map((o) => o.key.slice(root.length))),
    pipeline_id: run.pipelineId,
    name: run.name,
    workspace_id: run.workspace,
    created_at: run.createdAt,
    started_at: run.startedAt,
    completed_at: run.completedAt,
    error: run.error,
    output_folder: run.outputFolder,
    manifest_path: manifestPath(run.outputFolder),
    steps: run.steps.map((s) => ({
      step_id: s.stepId, tool: s.toolName, status: s.status, attempt: s.attempt, started_at: s.startedAt, completed_at: s.completedAt,
      exit_code: s.exitCode, error: s.error, waiting_reason: s.waitingReason ?? null, ...(s.queuePosition !== undefined ? { queue_position: s.queuePosition } : {}),
    })),
  };
}

/** A pipeline definition: a built-in pipeline or a workspace's saved spec, with its inputs and steps. */
export function definitionView(s: PipelineSpec, origin: "builtin" | "workspace") {
  return {
    id: s.id ?? null, name: s.name ?? null, description: s.description ?? null, category: s.category ?? null, tags: s.tags ?? [],
    estimated_duration: s.estimatedDuration ?? null, origin,
    inputs: (s.inputs ?? []).map((i) => ({ name: i.name, type: i.type, description: i.description ?? null, default: i.default ?? null, options: i.options ?? null, required: i.default === undefined })),
    steps: s.steps.map((st) => ({ step_id: st.stepId, tool: st.toolName, depends_on: st.dependsOn ?? [], description: st.description ?? null })),
  };
}

export interface StartRunInput {
  workspace_id: string;
  pipeline_id?: string | undefined;
  tool_id?: string | undefined;
  spec_file?: string | undefined;
  spec?: unknown;
  input: Record<string, unknown>;
}

/** A step's log: a stored object to stream, or text at hand. */
export type StepLog = { kind: "stream"; body: Readable; size: number } | { kind: "text"; text: string | Buffer };

export class PipelineService {
  constructor(private readonly deps: { engine: Engine; store: ObjectStore; access: WorkspaceAccess; clock: Clock }) {}

  get builtins(): ReadonlyMap<string, PipelineSpec> { return this.deps.engine.builtins; }

  /** A spec file of the workspace: at most 1 MB, JSON. */
  async readSpecFile(ws: WorkspaceRecord, path: string): Promise<{ spec: unknown; key: string }> {
    const { store } = this.deps;
    const { key, storageKey } = fileKey(ws, "spec_file", path);
    const info = await store.head(storageKey);
    if (!info) throw new OperonError("not_found", `spec_file: ${key} not found`, { field: "spec_file" });
    if (info.size > MAX_SPEC_BYTES) throw new OperonError("payload_too_large", `spec_file: ${key} is ${info.size} bytes; spec files larger than 1 MB are not read`, { field: "spec_file" });
    const { body } = await store.get(storageKey);
    const chunks: Buffer[] = [];
    let read = 0;
    // The size checked above is the head's: the body is capped too (the object may be replaced in between).
    for await (const c of body) {
      read += c.length;
      if (read > MAX_SPEC_BYTES) throw new OperonError("payload_too_large", `spec_file: ${key} is more than ${MAX_SPEC_BYTES} bytes; spec files larger than 1 MB are not read`, { field: "spec_file" });
      chunks.push(Buffer.from(c));
    }
    try { return { spec: JSON.parse(Buffer.concat(chunks).toString("utf8")), key }; } catch (e) {
      throw new OperonError("invalid_request", `spec_file: ${key} is not valid JSON (${messageOf(e)})`, { field: "spec_file" });
    }
  }

  /** A run of the caller's organization (else not_found), in `workspace` when given, whose workspace the key may use. */
  async runOf(auth: AuthContext, id: string, workspace?: string): Promise<RunRecord> {
    const { engine, access } = this.deps;
    const run = RUN_ID.test(id) ? await engine.runs.get(id) : undefined;
    if (!run || run.organization !== auth.organization) throw new OperonError("not_found", `run ${JSON.stringify(id)} not found`);
    if (workspace !== undefined && run.workspace !== workspace) throw new OperonError("not_found", `workspace_id: run ${JSON.stringify(id)} not found in workspace ${JSON.stringify(workspace)}`, { field: "workspace_id" });
    await access.workspace(auth, run.workspace);
    return (await engine.withQueuePositions([run]))[0] as RunRecord;
  }

  async validate(auth: AuthContext, b: { workspace_id: string; spec_file?: string | undefined; spec?: unknown }): Promise<ValidationResult> {
    const ws = await this.deps.access.workspace(auth, b.workspace_id);
    if ((b.spec_file === undefined) === (b.spec === undefined)) throw badRequest("spec_file", "give exactly one of spec_file or spec");
    const spec = b.spec_file !== undefined ? (await this.readSpecFile(ws, b.spec_file)).spec : b.spec;
    return validateSpec(spec, { tools: defaultCatalogue, referenceVolumes: this.deps.engine.referenceVolumes });
  }

  /** Starts a run from exactly one of a built-in id, a spec file or an inline spec; it is `queued`. */
  async start(auth: AuthContext, b: StartRunInput, startedBy?: RunOrigin): Promise<RunRecord> {
    const { engine, access } = this.deps;
    const builtinId = b.pipeline_id ?? b.tool_id;
    const sources = [builtinId !== undefined, b.spec_file !== undefined, b.spec !== undefined].filter(Boolean).length;
    if (sources !== 1) throw new OperonError("invalid_request", "give exactly one of pipeline_id, spec_file or spec", { field: "pipeline_id" });
    const ws = await access.workspace(auth, b.workspace_id);
    let spec: unknown;
    let source: RunRecord["source"];
    let name: string | undefined;
    if (builtinId !== undefined) {
      const found = engine.builtins.get(builtinId);
      if (!found) throw new OperonError("not_found", `pipeline_id: no built-in pipeline ${JSON.stringify(builtinId)} (built-in: ${[...engine.builtins.keys()].join(", ")})`, { field: "pipeline_id", valid_values: [...engine.builtins.keys()] });
      spec = found;
      source = { kind: "builtin", ref: builtinId };
    } else if (b.spec_file !== undefined) {
      const f = await this.readSpecFile(ws, b.spec_file);
      spec = f.spec;
      source = { kind: "spec_file", ref: f.key };
      name = (f.key.split("/").pop() ?? f.key).replace(/\.pipeline\.json$|\.json$/, "");
    } else {
      spec = b.spec;
      source = { kind: "inline" };
    }
    const res = await engine.submit({ organization: auth.organization, workspace: ws.id, keyId: auth.keyId, spec, source, input: b.input, ...(name ? { name } : {}), ...(startedBy ? { startedBy } : {}) });
    if (!res.ok) throw res.error;
    return res.run;
  }

  /** The built-in pipelines, then the workspace's saved specs when a workspace is given (unreadable ones skipped). */
  async listDefinitions(auth: AuthContext, workspaceId?: string): Promise<Array<Record<string, unknown>>> {
    const out: Array<Record<string, unknown>> = [...this.builtins.values()].map((s) => definitionView(s, "builtin"));
    if (workspaceId) {
      const ws = await this.deps.access.workspace(auth, workspaceId);
      const root = workspaceRoot(ws.organization, ws.id);
      const page = await this.deps.store.list(`${root}pipelines/specs/`, { limit: 1000 });
      for (const i of page.items.filter((x) => x.key.endsWith(".pipeline.json"))) {
        try {
          const { spec } = await this.readSpecFile(ws, i.key.slice(root.length));
          out.push({ ...definitionView(spec as PipelineSpec, "workspace"), spec_file: i.key.slice(root.length) });
        } catch { /* unreadable spec files are skipped in the listing */ }
      }
    }
    return out;
  }

  builtinDefinition(id: string) {
    const found = this.builtins.get(id);
    if (!found) throw new OperonError("not_found", `no built-in pipeline ${JSON.stringify(id)}`, { field: "pipeline_id", valid_values: [...this.builtins.keys()] });
    return { ...definitionView(found, "builtin"), spec: found };
  }

  /** A workspace spec file as a definition; a file that is not a valid spec is a validation_failed naming its errors. */
  async specFileDefinition(auth: AuthContext, workspaceId: string, specFile: string) {
    const ws = await this.deps.access.workspace(auth, workspaceId);
    const { spec, key } = await this.readSpecFile(ws, specFile);
    const v = validateSpec(spec);
    if (!v.valid) throw new OperonError("validation_failed", `spec_file: ${key} is not a valid spec: ${v.errors.map((e) => `${e.path} ${e.message}`).join("; ")}`, { field: "spec_file", errors: v.errors });
    return { ...definitionView(spec as PipelineSpec, "workspace"), spec_file: key, spec };
  }

  async cancel(auth: AuthContext, id: string, workspace?: string): Promise<RunRecord> {
    return this.deps.engine.cancel(await this.runOf(auth, id, workspace));
  }

  /**
   * A step's log, or its last `tail` lines. An ended step's log is in storage; a running
   * one's only with the executor (which may also keep an earlier attempt's in storage, so it
   * is asked first).
   */
  async stepLog(run: RunRecord, stepId: string, tail?: number): Promise<StepLog> {
    const { engine, store } = this.deps;
    const step = run.steps.find((s) => s.stepId === stepId);
    if (!step) throw new OperonError("not_found", `step ${JSON.stringify(stepId)} not in run ${run.id}`, { field: "step_id", valid_values: run.steps.map((s) => s.stepId) });
    const key = stepLogKey(run, step.stepId);
    const stored = async (): Promise<StepLog | undefined> => {
      try {
        if (tail !== undefined) {
          const info = await store.head(key);
          if (!info) return undefined;
          return { kind: "text", text: await tailObject(store, key, info.size, tail) };
        }
        const { body, info } = await store.get(key);
        return { kind: "stream", body: typeof (body as Partial<Readable>).pipe === "function" ? body as Readable : Readable.from(body), size: info.size };
      } catch (e) {
        if (e instanceof StoreError && e.code === "NotFound") return undefined;
        throw e;
      }
    };
    const ended = isFinalStep(step.status);
    if (ended) { const s = await stored(); if (s) return s; }
    const live = await engine.executor?.logs(run.id, step.stepId);
    if (live !== undefined) return { kind: "text", text: tail !== undefined ? lastLines(Buffer.from(live), tail) : live };
    if (!ended) { const s = await stored(); if (s) return s; }
    return { kind: "text", text: "" };
  }

  /** Saves a completed or failed run as `pipelines/specs/<name>.pipeline.json`: conflict when the name is taken without `overwrite`. */
  async saveSpec(auth: AuthContext, id: string, b: { workspace_id?: string | undefined; name?: string | undefined; overwrite?: boolean | undefined }) {
    const { engine, store, clock, access } = this.deps;
    const run = await this.runOf(auth, id, b.workspace_id);
    if (run.status !== "completed" && run.status !== "failed") throw new OperonError("conflict", `run ${run.id} is ${run.status}; only completed or failed runs can be saved`);
    const name = b.name ?? run.name;
    const slug = name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "") || "pipeline";
    const manifest = RunManifestSchema.parse(buildManifest(run, clock.now()));
    const extracted = extractSpec(manifest, { name, builtinIds: [...engine.builtins.keys()], now: new Date(clock.now()).toISOString() });
    if (!extracted.ok) throw new OperonError("validation_failed", extracted.errors.map((e) => e.message).join("; "), { errors: extracted.errors });
    const ws = await access.workspace(auth, run.workspace);
    const path = `pipelines/specs/${slug}.pipeline.json`;
    try {
      await store.put(`${workspaceRoot(ws.organization, ws.id)}${path}`, JSON.stringify(extracted.spec, null, 2) + "\n", { contentType: "application/json", ...(b.overwrite ? {} : { ifNoneMatch: "*" as const }) });
    } catch (e) {
      if (e instanceof StoreError && e.code === "PreconditionFailed") throw new OperonError("conflict", `${path} already exists; pass "overwrite": true to replace it`, { path });
      throw e;
    }
    return { path, spec: extracted.spec, warnings: extracted.warnings };
  }
}
