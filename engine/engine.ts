/**
 * The pipeline engine, one for both modes: submission (spec source, validation, inputs
 * checked against the workspace before anything starts), cancellation, and the control loop
 * (reconciler + controller) wired to a run store and an executor through core's ports.
 * Embedded mode wires the local adapters; cluster mode the Kubernetes ones (wiring/runtime.ts,
 * operator/cluster.ts). The api-server and the operator both use it; it uses neither.
 */
import { FINAL_RUN_STATUSES, isFinal } from "../core/status.js";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { RUN_ID, runFolderName, ulid } from "../core/ids.js";
import type { Issue } from "../core/issues.js";
import { messageOf, OperonError, type ErrorCode } from "../core/errors.js";
import { StoreError, type ClaimStore, type Clock, type ObjectStore, type RunRecord, type RunStore, type SlotGate, type StepExecutor } from "../core/ports.js";
import { Ledger, positionsOf, queuePositions } from "../core/quota.js";
import { dryBuildSteps, resolveInputs } from "../core/spec/resolve.js";
import type { PipelineSpec } from "../core/spec/schema.js";
import { validateSpec } from "../core/spec/validate.js";
import { isReferenceUri } from "../core/paths.js";
import { defaultCatalogue, type ToolCatalogue } from "../core/tools/index.js";
import { stepPodIssues, type StepPodConfig } from "../core/kubernetes/step-pods.js";
import { compressionRefusals } from "./compression.js";
import { claimSlots, MemoryClaims, observedClaims, startAdmission } from "./admission.js";
import { startController } from "./controller.js";
import { createReconciler } from "./reconciler.js";
import { runFolderClaimKey, workspaceRoot } from "../core/layout.js";

/**
 * Where the engine runs: `embedded`, one process running steps as local processes; `cluster`,
 * Kubernetes, where steps are Jobs of the operator and the api-server only submits, reads and
 * cancels PipelineRuns (its tool runs become one-step runs; its renders and viewer
 * preparations wait for the operator to admit their claims).
 */
export type EngineMode = "embedded" | "cluster";

export interface Engine {
  /** Embedded or cluster mode: what the api-server's services branch on (never the executor's runtime). */
  readonly mode: EngineMode;
  runs: RunStore;
  /** Where steps run; absent in an engine that only submits, reads and cancels (the api-server in cluster mode). */
  executor?: StepExecutor;
  ledger: Ledger;
  /**
   * A slot of the organization's limit for a task outside a run's steps (tool run, render,
   * viewer preparation): it queues with the organization's steps, first come first served,
   * and is admitted where the ledger is (this process, or the operator in cluster mode).
   */
  slots: SlotGate;
  builtins: ReadonlyMap<string, PipelineSpec>;
  /** The reference volumes steps may name (`ref://<volume>/…`). */
  referenceVolumes: readonly string[];
  /**
   * Checks and creates a run, or says why not: an `OperonError` (`validation_failed`, or
   * `invalid_request` for what this cluster's step pods may not do) whose `details.errors` lists
   * every issue. Nothing is created then.
   */
  submit(input: SubmitInput): Promise<{ ok: true; run: RunRecord } | { ok: false; error: OperonError }>;
  cancel(run: RunRecord): Promise<RunRecord>;
  /**
   * Copies of `runs` with each waiting step's queue position, computed now: from the ledger
   * where this engine reconciles, else from the organization's run records (the api-server
   * in cluster mode). Positions are never stored, so a moving queue writes nothing.
   */
  withQueuePositions(runs: RunRecord[]): Promise<RunRecord[]>;
  /** One reconcile of one run (what the controller's workers call). */
  reconcile(runId: string): Promise<{ requeueAfterMs?: number }>;
  /**
   * The engine's own Prometheus metrics (served by the api-server's and the operator's
   * /metrics; docs/metrics.md): step start latency; where it reconciles, also its controller's
   * and work queue's (controller-runtime's and client-go's names) and its runs by phase.
   */
  metrics: Registry;
  /** Sizes of what its control loop keeps per run and per claim (pruned when they end), by part. */
  cacheSizes(): Record<string, number>;
  stop(): Promise<void>;
}

export interface SubmitInput {
  organization: string;
  workspace: string;
  keyId: string;
  spec: PipelineSpec | unknown;
  pipelineId?: string;
  name?: string;
  source: RunRecord["source"];
  input: Record<string, unknown>;
  /** The agent's conversation and model, when the agent starts the run (recorded in run.json). */
  startedBy?: RunRecord["startedBy"];
}

/** The built-in pipelines shipped in `pipelines/builtin/` (found from source or dist). */
export function loadBuiltins(): Map<string, PipelineSpec> {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4 && !existsSync(join(dir, "pipelines/builtin")); i++) dir = dirname(dir);
  const base = join(dir, "pipelines/builtin");
  const out = new Map<string, PipelineSpec>();
  if (!existsSync(base)) return out;
  for (const f of readdirSync(base).filter((n) => n.endsWith(".pipeline.json")).sort()) {
    const spec = JSON.parse(readFileSync(join(base, f), "utf8")) as PipelineSpec;
    out.set(spec.id ?? f.replace(/\.pipeline\.json$/, ""), spec);
  }
  return out;
}

export interface EngineDeps {
  /** Default `embedded`; cluster mode's api-server and operator say `cluster`. */
  mode?: EngineMode;
  runs: RunStore;
  /**
   * Where steps run. Required where the engine reconciles; cluster mode's api-server has none
   * (the operator runs steps; their logs are read from storage).
   */
  executor?: StepExecutor;
  store: ObjectStore;
  clock: Clock;
  orgConcurrency: (org: string) => number;
  workers?: number;
  log?: (msg: string) => void;
  tools?: ToolCatalogue;
  /**
   * Run the operator loop in this process (default). Cluster mode's api-server only submits,
   * reads and cancels: the operator Deployment reconciles.
   */
  controller?: boolean;
  /**
   * Cluster mode's step-pod configuration (OPERON_STEP_POD_CONFIG): submission refuses a step
   * above its maxResources or whose tool has no image (400), and the reconciler sizes pods by it.
   */
  stepPods?: StepPodConfig;
  /**
   * The reference volumes steps may name (`ref://<volume>/…`): embedded mode's
   * OPERON_REF_VOLUMES. Default: the step-pod configuration's `referenceVolumes`, else none.
   */
  referenceVolumes?: readonly string[];
  /**
   * Where claims for tasks outside runs live (default: memory, for one process). Cluster
   * mode: Lease objects, shared by the api-server replicas (which wait) and the operator
   * (which admits).
   */
  claims?: ClaimStore;
  /** This process, as the holder of the claims it creates (default: a random name). */
  instance?: string;
}

/** Buckets of operon_step_start_latency_seconds: fine below a second, where the targets are. */
export const STEP_START_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2.5, 5, 10, 30, 60, 300];

/** The controller's name in its metrics (`controller` label), in both modes. */
export const CONTROLLER_NAME = "pipelinerun";

/**
 * The runs of an engine that reconciles: `operon_runs{phase}` counted when scraped from what
 * the run store keeps in memory (its countActive), and `operon_runs_finished_total{phase}`,
 * which the returned function increments when a run's end is recorded.
 */
function runMetrics(registry: Registry, runs: RunStore, log?: (msg: string) => void): (phase: RunRecord["status"]) => void {
  new Gauge({
    name: "operon_runs", help: "Runs in progress by phase (queued, running), as the engine's run store holds them when scraped",
    labelNames: ["phase"] as const, registers: [registry],
    async collect() {
      if (!runs.countActive) return;
      try {
        const n = await runs.countActive();
        this.set({ phase: "queued" }, n.queued);
        this.set({ phase: "running" }, n.running);
      } catch (e) {
        this.reset(); // unknown: no sample rather than a stale one
        log?.(`metrics: counting runs failed: ${messageOf(e)}`);
      }
    },
  });
  const finished = new Counter({ name: "operon_runs_finished_total", help: "Runs this engine recorded the end of, by final phase (completed, failed, cancelled)", labelNames: ["phase"] as const, registers: [registry] });
  for (const phase of FINAL_RUN_STATUSES) finished.inc({ phase }, 0);
  return (phase) => finished.inc({ phase });
}

/** A submission refused: the error, with every issue in `details.errors`. */
const refuse = (code: ErrorCode, message: string, errors: Issue[]) => ({ ok: false as const, error: new OperonError(code, message, { errors }) });

export function createEngine(deps: EngineDeps): Engine {
  const ledger = new Ledger(deps.orgConcurrency);
  const claims = deps.claims ?? new MemoryClaims();
  const tools = deps.tools ?? defaultCatalogue;
  const referenceVolumes = deps.referenceVolumes ?? deps.stepPods?.referenceVolumes?.map((v) => v.name) ?? [];
  const metrics = new Registry();
  const stepStart = new Histogram({
    name: "operon_step_start_latency_seconds",
    help: "From a step becoming ready (its last parent seen ended, or its run created) to its start; slot=waited when it had to wait for an organization slot; step=first|dependent",
    labelNames: ["slot", "step"], buckets: STEP_START_BUCKETS, registers: [metrics],
  });
  const executor = deps.executor;
  if (!executor && deps.controller !== false) throw new Error("an engine that reconciles needs an executor");
  const runEnded = deps.controller === false ? undefined : runMetrics(metrics, deps.runs, deps.log);
  const reconcile = executor && createReconciler({
    runs: deps.runs, executor, store: deps.store, ledger, clock: deps.clock, tools,
    ...(deps.stepPods ? { stepPods: deps.stepPods } : {}),
    referenceVolumes,
    ...(runEnded ? { onRunEnded: (run: RunRecord) => runEnded(run.status) } : {}),
    onStepStarted: (s) => stepStart.observe({ slot: s.waitedForSlot ? "waited" : "free", step: s.dependent ? "dependent" : "first" }, s.latencyMs / 1000),
  });
  const controller = deps.controller === false || !executor || !reconcile ? undefined : startController({
    runs: deps.runs, executor, reconcile, workers: deps.workers ?? 4,
    metrics, name: CONTROLLER_NAME,
    waitingRuns: (org) => ledger.admittedRuns(org),
    hasFreeSlot: (org) => ledger.inUse(org) < ledger.limit(org),
    // A step's slot freed: the admission loop looks again only if a claim of the organization waits.
    onSlotFree: (org) => { if (ledger.hasWaitingClaims(org)) admission?.enqueue(org); },
    // The ledger starts from the steps running now (live Jobs) and the claims admitted now,
    // before anything is admitted.
    prime: async () => {
      executor.engineStarted?.();
      for (const a of (await executor.activeSteps?.()) ?? []) ledger.observe(a.organization, a.runId, 0, { known: a.stepIds, running: a.stepIds, ready: [] });
      const listed = await claims.list();
      for (const org of new Set(listed.map((c) => c.organization))) {
        ledger.observeClaims(org, observedClaims(listed, org));
      }
    },
    onError: (id, e) => deps.log?.(`reconcile ${id} failed: ${messageOf(e)}`),
  });
  // Claims are admitted where runs are reconciled: one ledger, one queue per organization.
  const admission = controller ? startAdmission({
    claims, ledger, clock: deps.clock,
    onSlotFree: (org) => { for (const id of ledger.admittedRuns(org)) controller.queue.add(id); },
    onError: (org, e) => deps.log?.(`admission of ${org}'s claims failed: ${messageOf(e)}`),
  }) : undefined;
  const slots = claimSlots({ claims, clock: deps.clock, holder: deps.instance ?? `operon-${randomBytes(4).toString("hex")}` });
  const builtins = loadBuiltins();

  /**
   * The run folder: a UTC timestamp, suffixed when a run of the same second already took it.
   * A folder is claimed in the store with a create-if-absent write of
   * `_system/run-folders/<workspace root><folder>` (hidden from the files API), so two
   * api-server replicas never hand out the same folder; a folder that already holds files
   * (an older run without a claim) is skipped too. Names handed out in this process are
   * remembered for a minute and the search starts after the last one given for that second,
   * so a burst of submissions does not try every earlier folder of the second again.
   */
  async function uniqueFolder(root: string, now: number, runId: string): Promise<string> {
    const base = `pipelines/${runFolderName(now)}`;
    const key = `${root}${base}`;
    for (const [k, v] of reserved) if (now - v.at > 60_000) reserved.delete(k);
    for (;;) {
      // Claim the next suffix before looking (no await in between): concurrent submissions
      // each claim their own, and each lists only the folder it claimed.
      const n = (reserved.get(key)?.last ?? 0) + 1;
      reserved.set(key, { at: now, last: n });
      const folder = n === 1 ? base : `${base}-${n}`;
      const page = await deps.store.list(`${root}${folder}/`, { limit: 1 });
      if (page.items.length !== 0) continue;
      try {
        await deps.store.put(runFolderClaimKey(root, folder), runId, { ifNoneMatch: "*", contentType: "text/plain" });
        return folder;
      } catch (e) {
        if (!(e instanceof StoreError && e.code === "PreconditionFailed")) throw e;
      }
    }
  }
  /** Per workspace root and second: the highest suffix handed out, and when. */
  const reserved = new Map<string, { at: number; last: number }>();

  async function withQueuePositions(list: RunRecord[]): Promise<RunRecord[]> {
    const orgs = new Set(list.filter((r) => r.steps.some((s) => s.status === "waiting")).map((r) => r.organization));
    if (orgs.size === 0) return list;
    const byOrg = new Map<string, Map<string, Map<string, number>>>();
    for (const org of orgs) {
      if (controller) { byOrg.set(org, positionsOf(ledger.allocation(org))); continue; }
      const active = [...await deps.runs.list({ organization: org, status: "running" }), ...await deps.runs.list({ organization: org, status: "queued" })];
      byOrg.set(org, queuePositions(ledger.limit(org), active.map((r) => ({ id: r.id, createdAt: Date.parse(r.createdAt), steps: r.steps })), observedClaims(await claims.list(), org)));
    }
    return list.map((r) => {
      const pos = byOrg.get(r.organization)?.get(r.id);
      if (!pos) return r;
      return { ...r, steps: r.steps.map((s) => (s.status === "waiting" && pos.has(s.stepId) ? { ...s, queuePosition: pos.get(s.stepId) as number } : s)) };
    });
  }

  return {
    mode: deps.mode ?? "embedded",
    withQueuePositions,
    runs: deps.runs,
    ...(executor ? { executor } : {}),
    ledger,
    slots,
    builtins,
    referenceVolumes,
    async submit(input) {
      const check = validateSpec(input.spec, { tools, referenceVolumes });
      if (!check.valid) return refuse("validation_failed", `the pipeline spec is invalid: ${check.errors.map((e) => `${e.path || "/"}: ${e.message}`).join("; ")}`, check.errors);
      const spec = input.spec as PipelineSpec;
      // What this cluster's step pods may not do: more than maxResources, a tool without an image.
      const refused = deps.stepPods ? stepPodIssues(spec, deps.stepPods, tools) : [];
      if (refused.length) return refuse("invalid_request", refused.map((e) => e.message).join("; "), refused);
      const inputs = resolveInputs(spec, input.input, referenceVolumes);
      if (!inputs.ok) return refuse("validation_failed", inputs.errors.map((e) => e.message).join("; "), inputs.errors);
      // Every step's parameters as they will be with these inputs: refused now, not at run time.
      const built = dryBuildSteps(spec, inputs.values, tools, referenceVolumes);
      if (built.length) return refuse("validation_failed", `the pipeline spec is invalid with these inputs: ${built.map((e) => `${e.path}: ${e.message}`).join("; ")}`, built);
      const root = workspaceRoot(input.organization, input.workspace);
      // Every file input must exist before anything starts.
      const inputChecksums: RunRecord["inputChecksums"] = {};
      const missing: Issue[] = [];
      const pending: Issue[] = [];
      for (const decl of spec.inputs ?? []) {
        if (decl.type !== "file") continue;
        const path = inputs.values[decl.name] as string;
        // A file on a reference volume is read in place; its checksum is its step's (run.json `references`).
        if (isReferenceUri(path)) continue;
        const info = await deps.store.head(root + path);
        if (!info) { missing.push({ code: "input_not_found", path: `/input/${decl.name}`, message: `input "${decl.name}": ${path} not found in workspace ${input.workspace}` }); continue; }
        // A file stored by parts gets its checksum once the api-server has read it (docs/storage.md#multipart-uploads).
        if (!info.sha256) { pending.push({ code: "input_checksum_pending", path: `/input/${decl.name}`, message: `input "${decl.name}": the SHA-256 of ${path} is still being computed (it was uploaded by parts moments ago); submit again once the file's sha256 is listed` }); continue; }
        inputChecksums[decl.name] = { s3Key: info.key, checksum: info.sha256, size: info.size };
      }
      missing.push(...await compressionRefusals(deps.store, root, spec, inputs.values, tools, { referenceVolumes }));
      if (missing.length) return refuse("validation_failed", missing.map((m) => m.message).join("; "), missing);
      if (pending.length) return refuse("conflict", pending.map((m) => m.message).join("; "), pending);
      const now = deps.clock.now();
      const id = `run-${ulid(now, randomBytes(10))}`;
      if (!RUN_ID.test(id)) throw new Error(`bad run id ${id}`);
      const run: RunRecord = {
        id,
        organization: input.organization,
        workspace: input.workspace,
        pipelineId: input.pipelineId ?? spec.id ?? "inline",
        name: input.name ?? spec.name ?? spec.id ?? "pipeline",
        source: input.source,
        spec,
        parameters: inputs.values,
        inputChecksums,
        outputFolder: await uniqueFolder(root, now, id),
        createdAt: new Date(now).toISOString(),
        startedAt: null,
        completedAt: null,
        status: "queued",
        progressPct: 0,
        error: null,
        cancelRequested: false,
        steps: spec.steps.map((s) => ({ stepId: s.stepId, toolName: s.toolName, status: "pending", startedAt: null, completedAt: null, exitCode: null, error: null, attempt: 0, outputs: [] })),
        submittedBy: input.keyId,
        ...(input.startedBy ? { startedBy: { conversationId: input.startedBy.conversationId, model: input.startedBy.model } } : {}),
      };
      await deps.runs.create(run);
      return { ok: true, run };
    },
    async cancel(run) {
      return (await deps.runs.update(run.id, (r) => (r.cancelRequested || isFinal(r.status) ? undefined : { ...r, cancelRequested: true }))) ?? run;
    },
    reconcile: (runId) => (reconcile ? reconcile(runId) : Promise.reject(new Error("this engine does not reconcile: the operator does"))),
    metrics,
    cacheSizes: () => {
      const out: Record<string, number> = {};
      for (const [k, v] of Object.entries(controller?.cacheSizes() ?? {})) out[`controller.${k}`] = v;
      for (const [k, v] of Object.entries(reconcile?.cacheSizes() ?? {})) out[`reconciler.${k}`] = v;
      for (const [k, v] of Object.entries(admission?.cacheSizes() ?? {})) out[`admission.${k}`] = v;
      return out;
    },
    stop: async () => { await controller?.stop(); await admission?.stop(); },
  };
}
