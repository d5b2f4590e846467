/**
 * The Helm chart's value behind each environment variable it sets (charts/operon), so that a
 * configuration error in a pod the chart made names the value to set — `s3.bucket` — rather
 * than a variable nobody wrote. The chart marks its pods with `OPERON_CONFIG_SOURCE=helm`;
 * test/chart/chart.test.ts checks this table against the rendered chart (every variable is
 * one the chart sets, every value one values.yaml has). Pure.
 */

/** Variable → the chart value it comes from (alternatives: any of them sets it). */
export const HELM_VALUE_OF: Readonly<Record<string, readonly string[]>> = {
  S3_BUCKET: ["s3.bucket"],
  S3_REGION: ["s3.region"],
  S3_ENDPOINT: ["s3.endpoint"],
  S3_FORCE_PATH_STYLE: ["s3.forcePathStyle"],
  OPERON_STEP_S3_ENDPOINT: ["s3.stepEndpoint"],
  OPERON_S3_CREDENTIALS_SECRET: ["s3.existingSecret"],
  AWS_ACCESS_KEY_ID: ["s3.accessKeyId", "s3.existingSecret"],
  AWS_SECRET_ACCESS_KEY: ["s3.secretAccessKey", "s3.existingSecret"],
  OPERON_SIGNING_SECRET: ["signing.secret", "signing.existingSecret"],
  OPERON_IMAGE: ["image.repository", "image.tag"],
  OPERON_ORG_CONCURRENCY: ["orgConcurrency"],
  OPERON_KEY_CACHE_TTL_SECONDS: ["keyCacheTtlSeconds"],
  OPERON_RATE_LIMIT_PER_MINUTE: ["rateLimitPerMinute"],
  OPERON_PUBLIC_URL: ["publicUrl"],
  OPERON_LEASE_DURATION_SECONDS: ["operator.leaseDurationSeconds"],
  OPERON_OPERATOR_WORKERS: ["operator.workers"],
  OPERON_JOB_TTL_SECONDS: ["operator.jobTtlSeconds"],
  OPERON_STEP_POD_CONFIG: ["steps"],
  LOG_LEVEL: ["logLevel"],
  PORT: ["apiServer.port", "operator.port"],
};

/** What else to set with a value, on a first install. */
const ALSO: Readonly<Record<string, string>> = {
  S3_BUCKET: "; and S3 credentials: s3.existingSecret, or s3.accessKeyId and s3.secretAccessKey, or the pods' cloud identity (serviceAccount.annotations)",
};

/**
 * A start-up error (`invalid configuration: <VARIABLE>: …`) with the chart value to set
 * appended, when the environment comes from the chart; unchanged otherwise.
 */
export function withHelmValue(message: string, env: Readonly<Record<string, string | undefined>>): string {
  if (env.OPERON_CONFIG_SOURCE !== "helm") return message;
  const variable = /^invalid configuration: ([A-Z][A-Z0-9_]*):/.exec(message)?.[1];
  const value = variable === undefined ? undefined : HELM_VALUE_OF[variable];
  if (value === undefined) return message;
  return `${message} — set the Helm value ${value.join(" or ")}${ALSO[variable as string] ?? ""}`;
}
