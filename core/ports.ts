/**
 * Ports: the interfaces through which Operon's logic reaches the outside world. core/ only
 * declares them; adapters/ implement them (filesystem, S3, Kubernetes), so the engine and
 * every HTTP route are the same code in embedded and cluster mode (docs/architecture.md#ports).
 */
import type { PipelineSpec } from "./spec/schema.js";
import type { Invocation, Runtime } from "./tools/types.js";
import type { ReferenceChecksum, StepReference } from "./references.js";

/** Bytes as a stream: a Node Readable satisfies it, and so does any async iterable of chunks. */
export type ByteStream = AsyncIterable<Uint8Array>;

export interface ObjectInfo {
  /** Full storage key, e.g. `orgs/acme/workspaces/ws1/reads/s1.fastq`. */
  key: string;
  size: number;
  lastModified: Date;
  etag?: string;
  contentType?: string;
  /** Lowercase hex SHA-256 of the content, when the store knows it (always for Operon's writes). */
  sha256?: string;
  /** User metadata (e.g. `description`). */
  metadata?: Record<string, string>;
}

export interface PutOptions {
  contentType?: string;
  metadata?: Record<string, string>;
  /** Refuse to overwrite: fail with PreconditionFailed when the key exists. */
  ifNoneMatch?: "*";
  /** Only replace the object whose etag is this (optimistic concurrency). */
  ifMatch?: string;
  /** Stop and fail with TooLarge once more than this many bytes arrive; nothing is stored. */
  maxBytes?: number;
}

export interface ByteRange { start: number; end?: number }

export interface GetResult {
  body: ByteStream & { destroy?(error?: Error): void };
  info: ObjectInfo;
  /** Set when a range was served: the inclusive byte range and the object's total size. */
  range?: { start: number; end: number; total: number };
}

export interface ListPage {
  items: ObjectInfo[];
  /**
   * The last key of this page, to pass back as `cursor` for the next page (every adapter: a
   * key, never a backend token). Absent on the last page.
   */
  nextCursor?: string;
}

export interface ListOptions {
  /** A key: the page holds only keys after it (S3's StartAfter); it need not exist. */
  cursor?: string;
  limit: number;
  /** Also fill contentType, sha256 and metadata (costs a HEAD per object on S3). */
  withMetadata?: boolean;
}

export interface PresignOptions {
  /** Seconds until the URL stops working. */
  expiresIn: number;
  contentType?: string;
  /** PUT: the exact number of bytes the upload must carry (signed into the URL); another length is refused. */
  size?: number;
  range?: ByteRange;
}

/** Object storage (docs/storage.md#the-object-store-contract). Keys are full storage keys; callers have already validated them. */
export interface ObjectStore {
  /** Streams `body` into `key`. The object appears only once complete (never half written). */
  put(key: string, body: ByteStream | Uint8Array | string, options?: PutOptions): Promise<ObjectInfo>;
  /** Throws NotFound when absent; RangeNotSatisfiable for a bad range. */
  get(key: string, range?: ByteRange): Promise<GetResult>;
  head(key: string): Promise<ObjectInfo | undefined>;
  /** Lexicographic order by key, `limit` at most per page. */
  list(prefix: string, options: ListOptions): Promise<ListPage>;
  /** Deleting an absent key is not an error. */
  delete(key: string): Promise<void>;
  /** Records the sha256 (and metadata) of an object written directly (presigned PUT). */
  describe(key: string, info: { sha256: string; contentType?: string; metadata?: Record<string, string> }): Promise<ObjectInfo>;
  presignGet(key: string, options: PresignOptions): Promise<string>;
  presignPut(key: string, options: PresignOptions): Promise<string>;
  /** Liveness of the backing store, for /readyz. */
  ping(): Promise<void>;
  /**
   * Optional: true when a presigned PUT URL can write its key again and again until it
   * expires (S3 checks only the signature). Upload URLs of such a store then write a staging
   * key of their own, which only upload-confirm turns into the file (services/files.ts);
   * the local store's URLs are single-use already (the api-server claims each one).
   */
  readonly reusablePresignedPuts?: boolean;
  /**
   * Optional: multipart uploads (docs/storage.md#multipart-uploads), for files larger than one
   * presigned PUT takes (5 GiB). Both adapters have them.
   */
  readonly multipart?: MultipartUploads;
  /**
   * Optional: a number that changes whenever this store writes or deletes anything, for
   * stores that own their data (the local one). Lets callers cache listings safely.
   */
  version?(): number;
  /**
   * Optional, for stores that keep objects as local files (the local one): the file holding
   * `key`, which callers only read (the step sandbox mounts it read-only); undefined when
   * the store has no such file.
   */
  localPath?(key: string): string | undefined;
}

/** One part of a multipart upload, as the store received it. `etag` is the hex MD5 of its bytes, unquoted. */
export interface UploadedPart { partNumber: number; size: number; etag: string }

/** An upload begun but neither completed nor aborted (for the sweep of abandoned uploads). */
export interface OpenUpload { key: string; uploadId: string; initiated: Date }

/**
 * Multipart uploads (S3's model; docs/storage.md#multipart-uploads): one object's bytes sent
 * as numbered parts (1..10,000; every part but the last at least 5 MiB), in any order and in
 * parallel, each to a presigned URL of its own; `complete` makes the parts, in part order,
 * the object at `key` at once (never visible half written, no copy of the bytes), `abort`
 * discards them. Parts are never visible in listings. A part URL answers the part's ETag
 * (its MD5, quoted); a `Content-MD5` header sent with a part is checked against its bytes.
 */
export interface MultipartUploads {
  /** Begins an upload of `size` bytes in parts of `partSize` (the last part takes the rest); returns the store's upload id. */
  create(key: string, o: { size: number; partSize: number; contentType?: string; metadata?: Record<string, string> }): Promise<string>;
  /** A URL taking part `partNumber` by PUT, exactly `size` bytes (signed in), for `expiresIn` seconds; parts may be sent again until complete. */
  presignPart(key: string, uploadId: string, partNumber: number, o: { expiresIn: number; size: number }): Promise<string>;
  /** The parts received so far, in part order. StoreError NotFound when there is no such open upload. */
  listParts(key: string, uploadId: string): Promise<UploadedPart[]>;
  /**
   * Makes `parts` (in part order, etags as listParts gives them) the object at `key`, with the
   * content type and metadata given to create; the object has no sha256 yet. StoreError
   * NotFound when there is no such open upload, PreconditionFailed when a part is missing or
   * its etag differs.
   */
  complete(key: string, uploadId: string, parts: ReadonlyArray<{ partNumber: number; etag: string }>): Promise<ObjectInfo>;
  /** Discards the upload and its parts; an absent upload is not an error. */
  abort(key: string, uploadId: string): Promise<void>;
  /** Uploads begun before `before`, at most `limit`. */
  listOpen(before: Date, limit: number): Promise<OpenUpload[]>;
  /**
   * Only for stores whose part URLs the api-server serves (the local one): stores part
   * `partNumber`'s bytes, exactly `size` of them; `md5` (base64, from Content-MD5) when the
   * client sent one: a mismatch stores nothing and fails with StoreError "BadDigest".
   */
  putPart?(key: string, uploadId: string, partNumber: number, body: ByteStream, o: { size: number; md5?: string }): Promise<UploadedPart>;
}

/**
 * Errors every ObjectStore adapter throws, so callers can map them to error codes (core/errors.ts).
 * `Unavailable`: the store cannot be reached or is failing (refused, reset or timed-out
 * connections, 5xx answers) and a later retry may succeed; the API answers unavailable.
 */
export class StoreError extends Error {
  constructor(readonly code: "NotFound" | "PreconditionFailed" | "TooLarge" | "RangeNotSatisfiable" | "Unavailable" | "InvalidKey" | "BadDigest", message: string) {
    super(message);
    this.name = "StoreError";
  }
}

/** Time, injectable so that TTLs, expiry and timeouts are testable. */
/**
 * Takes a slot of the organization's compute limit for a task outside a run's steps (a tool
 * run, a render, a viewer preparation): the task enters the organization's queue as a claim
 * and the promise resolves with its release once the claim is admitted, in its turn
 * (docs/architecture.md#the-organization-limit). An aborted wait gives up its place.
 */
export type SlotGate = (organization: string, taskId: string, signal: AbortSignal, kind?: ClaimKind) => Promise<() => void>;

export type ClaimKind = "tool" | "render" | "preparation";

/** A task's request for one slot of its organization's limit, as the claim store keeps it. */
export interface ComputeClaim {
  /** Unique; lowercase letters, digits and `-`, at most 40 characters (it names a Kubernetes object). */
  id: string;
  organization: string;
  kind: ClaimKind;
  /** The caller's name for the task (e.g. the render job id), for people reading the queue. */
  task: string;
  /** The process that waits for it and runs the task; it renews the claim while it lives. */
  holder: string;
  /** Its place in the organization's queue (ms since the epoch). */
  createdAt: number;
  /** How long the claim lives without a renewal before the admitting side deletes it. */
  ttlMs: number;
  /** The last renewal, as the store records it (compared for change only). */
  renewedAt: string;
  /** When it was admitted; absent while it waits. */
  admittedAt?: number;
}

/**
 * Where claims live between the processes that wait for them and the one that admits them
 * (embedded mode: memory; cluster mode: Lease objects every api-server replica and the
 * operator see). It stores and reports; the ledger decides.
 */
export interface ClaimStore {
  create(claim: Omit<ComputeClaim, "renewedAt" | "admittedAt">): Promise<void>;
  get(id: string): Promise<ComputeClaim | undefined>;
  /** Every claim (all organizations). */
  list(): Promise<ComputeClaim[]>;
  /** Marks it admitted; false when it no longer exists. */
  admit(id: string, at: number): Promise<boolean>;
  /** Records a renewal; false when it no longer exists (expired and deleted). */
  renew(id: string, at: number): Promise<boolean>;
  /** Deletes it (absent is fine). */
  delete(id: string): Promise<void>;
  /** Calls back with a claim's organization and id whenever it is created, changed or deleted. */
  watch(onChange: (organization: string, id: string) => void): () => void;
}

export interface Clock {
  now(): number;
}

/* ------------------------------------------------------------------ pipeline runs */

export type { RunStatus as RunStatusValue, StepStatus as StepStatusValue } from "./status.js";
import type { RunStatus as RunStatusValue, StepStatus as StepStatusValue } from "./status.js";

/** An output file a step produced, as stored. */
export interface StepOutput {
  /** Path relative to the run folder. */
  filename: string;
  /** For a primary output: its position (0 is `${step.outputFile}`, 1 is `${step.outputFile2}`). */
  position?: number;
  /** Full storage key. */
  key: string;
  size: number;
  sha256: string;
}

export interface StepRecord {
  stepId: string;
  toolName: string;
  status: StepStatusValue;
  waitingReason?: string;
  /**
   * A waiting step's place in its organization's queue. Never stored: computed when the run
   * is read (Engine.withQueuePositions), so a queue that moves writes nothing.
   */
  queuePosition?: number;
  startedAt: string | null;
  completedAt: string | null;
  exitCode: number | null;
  error: string | null;
  attempt: number;
  outputs: StepOutput[];
  /** Provenance: the subcommand and argv as run, and what the executor reports of the tool. */
  command?: string;
  argv?: string[];
  toolVersion?: string | null;
  imageDigest?: string | null;
  executable?: { path: string; sha256: string };
  jobName?: string;
  /** Files on reference volumes the step read (`ref://…`), with their checksums once read. */
  references?: StepReference[];
}

/** A pipeline run as stored (local JSON file or PipelineRun custom resource). */
/** Who, beyond the key, started a run: the agent's conversation and model. */
export interface RunOrigin { conversationId: string; model: string }

export interface RunRecord {
  id: string;
  organization: string;
  workspace: string;
  pipelineId: string;
  name: string;
  source: { kind: "builtin" | "spec_file" | "inline"; ref?: string };
  /** The spec exactly as executed. */
  spec: PipelineSpec;
  /** Concrete input values, defaults applied (file inputs workspace-relative). */
  parameters: Record<string, string>;
  inputChecksums: Record<string, { s3Key: string; checksum: string; size: number }>;
  /** Workspace-relative run folder, e.g. `pipelines/2026-11-21T22-40-05Z`. */
  outputFolder: string;
  createdAt: string;
  startedAt: string | null;
  completedAt: string | null;
  status: RunStatusValue;
  progressPct: number;
  error: string | null;
  cancelRequested: boolean;
  steps: StepRecord[];
  submittedBy: string;
  /** Set when the agent started the run (POST /v1/query): its conversation and the model that asked. */
  startedBy?: RunOrigin;
  /**
   * Set by a store when the stored run cannot be executed as it is (e.g. a PipelineRun
   * applied by hand that does not match the schema): the reconciler fails it with this reason.
   */
  invalid?: string;
}

/** A run's place in listings (newest first): its creation time, then its id. */
export interface RunPosition { createdAt: string; id: string }

export interface RunListFilter {
  organization?: string;
  /** Only with an organization. */
  workspace?: string;
  status?: RunStatusValue;
  /** Keyset pagination: only runs listed after this position (see core/run-order.ts). */
  after?: RunPosition;
  /** At most this many runs (the first ones in list order); default: all. */
  limit?: number;
}

export interface RunStore {
  create(run: RunRecord): Promise<void>;
  get(id: string): Promise<RunRecord | undefined>;
  /**
   * Newest first (createdAt, then id, both descending); without an organization, every run
   * (the operator's start-up resync). Stores narrow to the organization and workspace before
   * reading or copying any record, and copy only the runs they return.
   */
  list(filter: RunListFilter): Promise<RunRecord[]>;
  /** Read-modify-write; `change` returns the new record (or undefined to leave it). */
  update(id: string, change: (run: RunRecord) => RunRecord | undefined): Promise<RunRecord | undefined>;
  /** Calls `fn` with a run id whenever that run is created or changed. */
  watch(fn: (id: string) => void): () => void;
  /**
   * Optional: how many runs are queued and running, from what the store keeps in memory
   * (no read per call once filled), for the engine's `operon_runs` gauge.
   */
  countActive?(): Promise<{ queued: number; running: number }>;
}

/** One step handed to an executor: everything it needs, already resolved. */
export interface StepTask {
  runId: string;
  organization: string;
  stepId: string;
  attempt: number;
  toolName: string;
  invocation: Invocation;
  /** Storage key prefix of the workspace (`orgs/<org>/workspaces/<ws>/`). */
  workspaceRoot: string;
  /** Storage key prefix of the run folder, ending in `/`. */
  runRoot: string;
  timeoutMs: number;
  /**
   * Cluster mode: the tool container of the step's pod as the reconciler resolved it from the
   * step-pod configuration (core/kubernetes/step-pods.ts stepCompute), with the same thread
   * count the argv got. Absent: the executor uses its own defaults. Embedded mode ignores it.
   */
  pod?: { image: string; resources: { requests: Record<string, string>; limits: Record<string, string> } };
}

/**
 * What an executor reports of a step it was given. `lost`: the attempt's process vanished
 * (the server stopped while it ran); the planner runs the step again (core/plan.ts).
 */
export interface ObservedStepState {
  phase: "running" | "completed" | "failed" | "cancelled" | "lost";
  attempt: number;
  startedAt?: number;
  finishedAt?: number;
  /**
   * When this process first saw the step end, by its own clock (finishedAt may come from
   * another machine, rounded to the second): where a dependent step's start latency begins.
   */
  endSeenAt?: number;
  exitCode?: number | null;
  message?: string;
  outputs?: StepOutput[];
  toolVersion?: string | null;
  imageDigest?: string | null;
  executable?: { path: string; sha256: string };
  jobName?: string;
  /**
   * The checksums of the step's references (`invocation.references`), computed before the
   * tool ran, in their order; the cluster's may come without URIs (matched by position).
   */
  references?: ReferenceChecksum[];
}

/** Runs steps: local child processes (embedded) or Kubernetes Jobs (cluster). */
export interface StepExecutor {
  /** How argv is built for it: Debian's executables (`local`, default) or the tool images (`container`). */
  readonly runtime?: Runtime;
  /**
   * Steps running now, by run (cluster mode: the live Jobs), so a starting operator rebuilds
   * the per-organization ledger before it admits anything.
   */
  activeSteps?(): Promise<Array<{ organization: string; runId: string; stepIds: string[] }>>;
  /**
   * The engine has started: called once, before its first reconcile (its run store has synced
   * by then, so what it says about runs holds). An executor that writes on its own (the Job
   * executor's watch side: stopping Jobs that cannot start, copying logs) waits for it.
   */
  engineStarted?(): void;
  /** Starts the step; a step already known (same run, step and attempt) is not started twice. */
  submit(task: StepTask): Promise<void>;
  /** Every step of the run the executor knows, by step id. */
  observe(runId: string): Promise<Map<string, ObservedStepState>>;
  /** Stops a running step (SIGTERM, then SIGKILL); it ends `failed` (timeout) or `cancelled`. */
  kill(runId: string, stepId: string, reason: "timeout" | "cancelled"): Promise<void>;
  /** Calls `fn` with a run id whenever one of its steps changes phase. */
  watch(fn: (runId: string) => void): () => void;
  /** The step's log so far (stdout when not captured, and stderr). */
  logs(runId: string, stepId: string): Promise<string | undefined>;
  /**
   * Drops what the executor keeps in memory for a run that ended or is gone (nothing observes
   * it again; a finished step's log is in the run folder). Absent: it keeps nothing per run.
   */
  forgetRun?(runId: string): void;
}
