/**
 * Configuration from the environment (docs/configuration.md), validated with zod. A bad value stops
 * start-up with one line naming the variable (never echoing a secret's value). Pure: the
 * caller passes the environment.
 */
import { z } from "zod";
import { withHelmValue } from "./helm-values.js";
import { isSecretName, redactSecrets } from "./redact.js";
import { REFERENCE_VOLUME_NAME } from "./paths.js";

const bool = z.enum(["true", "false", "1", "0"]).transform((v) => v === "true" || v === "1");

/** OPERON_REF_VOLUMES: `{"<volume name>": "/absolute/host/dir"}`, the names DNS labels. */
const REF_VOLUMES_EXAMPLE = 'a JSON object of volume names and absolute directories, such as {"grch38": "/srv/ref/grch38"}';
const refVolumes = z.string().transform((text, ctx) => {
  let json: unknown;
  try { json = JSON.parse(text); } catch { json = undefined; }
  if (json === null || typeof json !== "object" || Array.isArray(json)) {
    ctx.addIssue({ code: "custom", message: `must be ${REF_VOLUMES_EXAMPLE}` });
    return z.NEVER;
  }
  for (const [name, dir] of Object.entries(json)) {
    const why = !REFERENCE_VOLUME_NAME.test(name) ? "is not a valid volume name (a DNS label: lowercase letters, digits and -, at most 63)"
      : typeof dir !== "string" || !dir.startsWith("/") ? "must name an absolute directory"
        // eslint-disable-next-line no-control-regex
        : /[\u0000-\u001f]/.test(dir) ? "has a control character in its directory" : undefined;
    if (why) {
      ctx.addIssue({ code: "custom", message: `volume ${JSON.stringify(name)} ${why} (expected ${REF_VOLUMES_EXAMPLE})` });
      return z.NEVER;
    }
  }
  return json as Record<string, string>;
});

const EnvSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().min(1).optional(),
  OPERON_MODE: z.enum(["embedded", "cluster"]).default("embedded"),
  OPERON_DATA_DIR: z.string().min(1).default("./.operon"),
  OPERON_PUBLIC_URL: z.url().optional(),
  /**
   * Embedded mode (local storage): the base of presigned storage URLs, another origin than
   * OPERON_PUBLIC_URL served by the same process, so that user content is never fetched from
   * the API's or the viewer pages' origin. Requests naming it get the storage routes only.
   */
  OPERON_CONTENT_URL: z.url({ protocol: /^https?$/, error: "must be an http or https URL, such as https://content.operon.example" }).optional(),
  OPERON_NAMESPACE: z.string().min(1).default("operon"),
  OPERON_ORG_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(5),
  /** Embedded mode: run steps without the bubblewrap sandbox (only where it cannot start; loudly logged). */
  OPERON_UNSAFE_NO_SANDBOX: bool.default(false),
  /** Embedded mode: keep each step's working directory after it ends (debugging). */
  OPERON_KEEP_WORKDIRS: bool.default(false),
  /**
   * Embedded mode: read-only reference volumes, `{"<name>": "/absolute/host/dir"}`. A step
   * names a file on one as ref://<name>/<path>; its tool reads it in place at /ref/<name>/<path>.
   * (Cluster mode's are the step-pod configuration's referenceVolumes; a step pod's stage-in
   * helper reads this only where the volumes are not at /ref/<name>, as under a test kubelet.)
   */
  OPERON_REF_VOLUMES: refVolumes.optional(),
  OPERON_KEY_CACHE_TTL_SECONDS: z.coerce.number().min(0).max(30).default(30),
  OPERON_SIGNING_SECRET: z.string().min(32, "must be at least 32 characters").optional(),
  /** Requests per minute per API key. */
  OPERON_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(6000),
  /** Requests per minute per client address, counted before the key is looked up. */
  OPERON_RATE_LIMIT_PER_IP_PER_MINUTE: z.coerce.number().int().min(1).default(12_000),
  /** S3 storage: seconds a request may wait for its response before the attempt fails (connecting: at most 3 s). */
  OPERON_S3_REQUEST_TIMEOUT_SECONDS: z.coerce.number().min(1).max(600).default(10),
  /** S3 storage: attempts per request, the first included. */
  OPERON_S3_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(10).default(2),
  OPERON_STORAGE: z.enum(["local", "s3"]).optional(),
  S3_ENDPOINT: z.url().optional(),
  S3_BUCKET: z.string().min(1).optional(),
  S3_REGION: z.string().min(1).default("us-east-1"),
  S3_FORCE_PATH_STYLE: bool.default(false),
  AWS_ACCESS_KEY_ID: z.string().min(1).optional(),
  AWS_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  /** Cluster mode: the operon image, run by each step Job's stage-in and stage-out helpers. */
  OPERON_IMAGE: z.string().min(1).default("ghcr.io/operon-dev/operon:0.1.0"),
  /** Cluster mode: Secret (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) the step helpers read S3 with. */
  OPERON_S3_CREDENTIALS_SECRET: z.string().min(1).optional(),
  /** Cluster mode: S3 endpoint as the step pods reach it, when it differs from S3_ENDPOINT. */
  OPERON_STEP_S3_ENDPOINT: z.url().optional(),
  /**
   * Cluster mode: path of the step-pod configuration (JSON: resources, images, scheduling,
   * reference volumes; core/kubernetes/step-pods.ts), read by the operator and the api-server
   * at start-up. Unset: the built-in defaults.
   */
  OPERON_STEP_POD_CONFIG: z.string().min(1).optional(),
  /** Operator: leader-election lease; renewals every 2/15 of it, leadership given up after 2/3 without one. */
  OPERON_LEASE_DURATION_SECONDS: z.coerce.number().int().min(2).max(300).default(15),
  OPERON_LEADER_ELECTION: bool.default(true),
  /** Operator: finished step Jobs (and their pods) are deleted after this long. */
  OPERON_JOB_TTL_SECONDS: z.coerce.number().int().min(0).default(86_400),
  /** Operator: a finished PipelineRun is deleted this many days after it finished (its files stay in storage). */
  OPERON_RUN_TTL_DAYS: z.coerce.number().positive().max(36_500).default(30),
  /** Operator: seconds between clean-up sweeps (run TTL, stopped Jobs, finished runs still to label). */
  OPERON_CLEANUP_INTERVAL_SECONDS: z.coerce.number().int().min(1).max(86_400).default(60),
  /** Operator: parallel reconciles. */
  OPERON_OPERATOR_WORKERS: z.coerce.number().int().min(1).max(64).default(8),
  /** The agent's LLM: `openai` (chat completions: OpenAI, Ollama, vLLM, llama.cpp) or `anthropic` (Messages). Unset: no agent (the query routes answer unavailable). */
  OPERON_LLM_PROVIDER: z.enum(["anthropic", "openai"]).optional(),
  /** The provider's API base, e.g. http://127.0.0.1:11434/v1 for Ollama (default: the provider's own). */
  OPERON_LLM_BASE_URL: z.url().optional(),
  OPERON_LLM_API_KEY: z.string().optional(),
  OPERON_LLM_MODEL: z.string().min(1).optional(),
  /** The agent: tool rounds (model answers with tool calls) per turn. */
  OPERON_LLM_MAX_TOOL_ROUNDS: z.coerce.number().int().min(1).max(100).default(12),
  /** The agent: seconds a turn may take, model and tools together. */
  OPERON_LLM_TURN_TIMEOUT_SECONDS: z.coerce.number().min(1).max(3600).default(600),
  /** The agent: output tokens the model may produce per turn, all rounds together. */
  OPERON_LLM_MAX_OUTPUT_TOKENS: z.coerce.number().int().min(64).max(1_000_000).default(16_384),
  /** Set to `helm` by the chart: a start-up error then names the chart value to set (core/helm-values.ts). */
  OPERON_CONFIG_SOURCE: z.enum(["env", "helm"]).optional(),
});

export type Env = z.infer<typeof EnvSchema>;

export interface Config extends Env {
  host: string;
  publicUrl: string;
  /** OPERON_CONTENT_URL without a trailing slash, when set. */
  contentUrl?: string;
  storage: "local" | "s3";
}

export type ConfigResult = { ok: true; config: Config } | { ok: false; message: string };

/**
 * The offending value, for the error line: never for a secret (a mistyped secret is still a
 * secret, and start-up errors end up in logs and CI output), and credentials in a harmless
 * one (a URL with user-info or a token parameter) are redacted.
 */
function echo(name: string, value: string | undefined): string {
  if (value === undefined) return "";
  if (isSecretName(name)) return " (value not shown)";
  return ` (got ${JSON.stringify(redactSecrets(value))})`;
}

/** The configuration; under the Helm chart (OPERON_CONFIG_SOURCE=helm) an error also names the chart value to set. */
export function parseConfig(env: Readonly<Record<string, string | undefined>>): ConfigResult {
  const r = parseEnvironment(env);
  return r.ok ? r : { ok: false, message: withHelmValue(r.message, env) };
}

function parseEnvironment(env: Readonly<Record<string, string | undefined>>): ConfigResult {
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const r = EnvSchema.safeParse(cleaned);
  if (!r.success) {
    const i = r.error.issues[0];
    const name = String(i?.path[0] ?? "environment");
    return { ok: false, message: `invalid configuration: ${name}: ${i?.message ?? "invalid"}${echo(name, cleaned[name])}` };
  }
  const e = r.data;
  const storage = e.OPERON_STORAGE ?? (e.OPERON_MODE === "cluster" || e.S3_BUCKET ? "s3" : "local");
  if (storage === "s3" && !e.S3_BUCKET) return { ok: false, message: "invalid configuration: S3_BUCKET: required when storage is S3 (cluster mode)" };
  if (e.OPERON_LLM_PROVIDER && !e.OPERON_LLM_MODEL) return { ok: false, message: "invalid configuration: OPERON_LLM_MODEL: required when OPERON_LLM_PROVIDER is set (e.g. gpt-4.1, claude-sonnet-4-5, or an Ollama model such as qwen3)" };
  if (e.OPERON_LLM_PROVIDER && !e.OPERON_LLM_BASE_URL && !e.OPERON_LLM_API_KEY) return { ok: false, message: `invalid configuration: OPERON_LLM_API_KEY: required for ${e.OPERON_LLM_PROVIDER === "openai" ? "OpenAI's" : "Anthropic's"} own API (a self-hosted server such as Ollama needs OPERON_LLM_BASE_URL instead)` };
  const host = e.HOST ?? (e.OPERON_MODE === "cluster" ? "0.0.0.0" : "127.0.0.1");
  const publicUrl = (e.OPERON_PUBLIC_URL ?? `http://${host === "0.0.0.0" ? "127.0.0.1" : host}:${e.PORT}`).replace(/\/+$/, "");
  const contentUrl = e.OPERON_CONTENT_URL?.replace(/\/+$/, "");
  if (contentUrl !== undefined) {
    if (storage !== "local") return { ok: false, message: "invalid configuration: OPERON_CONTENT_URL: only for local storage (embedded mode); with S3, presigned URLs already point at the S3 endpoint, another origin" };
    if (new URL(contentUrl).host === new URL(publicUrl).host) return { ok: false, message: `invalid configuration: OPERON_CONTENT_URL: must name another host (or port) than OPERON_PUBLIC_URL (${new URL(publicUrl).host}) (got ${JSON.stringify(redactSecrets(contentUrl))})` };
  }
  return { ok: true, config: { ...e, host, publicUrl, ...(contentUrl !== undefined ? { contentUrl } : {}), storage } };
}
