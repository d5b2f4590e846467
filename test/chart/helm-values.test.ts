/**
 * A start-up error in a pod the Helm chart made names the chart value to set
 * (core/helm-values.ts through parseConfig), and only there. Pure; chart.test.ts checks the
 * table against the rendered chart and runs the processes with the chart's environment.
 */
import t from "tap";
import { parseConfig } from "../../core/config.js";
import { HELM_VALUE_OF, withHelmValue } from "../../core/helm-values.js";

const helm = { OPERON_CONFIG_SOURCE: "helm" };
const message = (env: Record<string, string>) => {
  const r = parseConfig(env);
  return r.ok ? "(accepted)" : r.message;
};

t.test("under the chart, a configuration error names the value to set", async (t) => {
  const cases: Array<[Record<string, string>, string]> = [
    [{ OPERON_MODE: "cluster", OPERON_STORAGE: "s3" },
      "invalid configuration: S3_BUCKET: required when storage is S3 (cluster mode) — set the Helm value s3.bucket; and S3 credentials: s3.existingSecret, or s3.accessKeyId and s3.secretAccessKey, or the pods' cloud identity (serviceAccount.annotations)"],
    [{ OPERON_MODE: "cluster", S3_BUCKET: "b", OPERON_ORG_CONCURRENCY: "0" },
      "invalid configuration: OPERON_ORG_CONCURRENCY: Too small: expected number to be >=1 (got \"0\") — set the Helm value orgConcurrency"],
    [{ OPERON_MODE: "cluster", S3_BUCKET: "b", OPERON_SIGNING_SECRET: "short" },
      "invalid configuration: OPERON_SIGNING_SECRET: must be at least 32 characters (value not shown) — set the Helm value signing.secret or signing.existingSecret"],
    [{ OPERON_MODE: "cluster", S3_BUCKET: "b", PORT: "http" },
      "invalid configuration: PORT: Invalid input: expected number, received NaN (got \"http\") — set the Helm value apiServer.port or operator.port"],
  ];
  for (const [env, expected] of cases) {
    t.equal(message({ ...env, ...helm }), expected, Object.keys(env).join(" "));
    // The same error outside the chart: the variable only, no Helm value.
    t.equal(message(env), expected.replace(/ — set the Helm value .*$/, ""), `${Object.keys(env).join(" ")}, not under the chart`);
  }
  // A variable the chart does not set: nothing to add.
  t.equal(message({ ...helm, OPERON_MODE: "cluster", S3_BUCKET: "b", OPERON_LLM_PROVIDER: "openai" }), message({ OPERON_MODE: "cluster", S3_BUCKET: "b", OPERON_LLM_PROVIDER: "openai" }));
  t.equal(message({ ...helm, OPERON_MODE: "cluster", S3_BUCKET: "b", OPERON_SIGNING_SECRET: "x".repeat(32) }), "(accepted)", "a good configuration is untouched");
  t.equal(message({ OPERON_CONFIG_SOURCE: "kustomize" }), "invalid configuration: OPERON_CONFIG_SOURCE: Invalid option: expected one of \"env\"|\"helm\" (got \"kustomize\")");
});

t.test("withHelmValue leaves anything but an `invalid configuration: <VARIABLE>:` line alone", async (t) => {
  t.equal(withHelmValue("invalid configuration: S3_REGION: too short", helm), "invalid configuration: S3_REGION: too short — set the Helm value s3.region");
  t.equal(withHelmValue("invalid configuration: S3_REGION: too short", {}), "invalid configuration: S3_REGION: too short");
  t.equal(withHelmValue("could not reach S3_REGION", helm), "could not reach S3_REGION");
  t.equal(withHelmValue("invalid configuration: environment: bad", helm), "invalid configuration: environment: bad");
  for (const [variable, values] of Object.entries(HELM_VALUE_OF)) {
    t.ok(values.length > 0 && values.every((v) => /^[a-z][A-Za-z0-9]*(\.[a-z][A-Za-z0-9]*)*$/.test(v)), `${variable}: values are dotted value paths`);
  }
});
