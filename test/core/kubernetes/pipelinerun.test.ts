import t from "tap";
import { readFileSync } from "node:fs";
import { parse } from "yaml";
import { jobName, labelValue, pipelineRunCrd, resourceToRun, runToResource, runToStatus, toStructural } from "../../../core/kubernetes/pipelinerun.js";
import type { RunRecord } from "../../../core/ports.js";
import { renderCrd } from "../../../scripts/gen-crds.js";

const run: RunRecord = {
  id: "run-01jz0000000000000000000000",
  organization: "acme",
  workspace: "ws_1",
  pipelineId: "bwa-align",
  name: "Align",
  source: { kind: "builtin", ref: "bwa-align" },
  spec: { id: "bwa-align", steps: [{ stepId: "index", toolName: "bwa", parameters: { command: "index", inputFile: "${input.reference}" } }, { stepId: "align", toolName: "bwa", dependsOn: ["index"] }] },
  parameters: { reference: "ref.fa" },
  inputChecksums: { reference: { s3Key: "orgs/acme/workspaces/ws_1/ref.fa", checksum: "ab", size: 3 } },
  outputFolder: "pipelines/2026-11-22T01-00-00Z",
  createdAt: "2026-11-22T01:00:00.123Z",
  startedAt: "2026-11-22T01:00:01.000Z",
  completedAt: null,
  status: "running",
  progressPct: 50,
  error: null,
  cancelRequested: false,
  steps: [
    { stepId: "index", toolName: "bwa", status: "completed", startedAt: "2026-11-22T01:00:01.000Z", completedAt: "2026-11-22T01:00:02.000Z", exitCode: 0, error: null, attempt: 1, outputs: [{ filename: "ref.fa", position: 0, key: "k", size: 1, sha256: "aa" }], jobName: "j1", argv: ["bwa", "index", "ref.fa"], command: "index" },
    { stepId: "align", toolName: "bwa", status: "waiting", waitingReason: "OrgConcurrencyLimit", startedAt: null, completedAt: null, exitCode: null, error: null, attempt: 0, outputs: [] },
  ],
  submittedBy: "key_1",
};

t.test("the committed CRDs (repository and Helm chart) are what make crds generates", async (t) => {
  const chart = readFileSync(new URL("../../../charts/operon/crds/pipelinerun.yaml", import.meta.url), "utf8");
  t.equal(chart, renderCrd(), "charts/operon/crds/pipelinerun.yaml is stale: run `make crds`");
  const committed = readFileSync(new URL("../../../crds/pipelinerun.yaml", import.meta.url), "utf8");
  t.equal(committed, renderCrd(), "crds/pipelinerun.yaml is stale: run `make crds`");
  const crd = parse(committed) as ReturnType<typeof pipelineRunCrd> & { spec: { names: { shortNames: string[]; categories: string[] }; versions: Array<{ subresources: unknown; additionalPrinterColumns: Array<{ name: string }> }> } };
  t.same(crd.spec.names.shortNames, ["opr"]);
  t.same(crd.spec.names.categories, ["operon"]);
  t.same(crd.spec.versions[0]?.subresources, { status: {} });
  t.same(crd.spec.versions[0]?.additionalPrinterColumns.map((c) => c.name.toUpperCase()), ["ORG", "WORKSPACE", "PIPELINE", "STATUS", "PROGRESS", "AGE"]);
});

t.test("structural conversion", async (t) => {
  t.same(toStructural({ $schema: "x", type: "string", const: "a" }), { type: "string", enum: ["a"] });
  t.same(toStructural({ type: "integer", exclusiveMinimum: 0 }), { type: "integer", minimum: 1 });
  t.same(toStructural({ type: "object", additionalProperties: {} }), { type: "object", "x-kubernetes-preserve-unknown-fields": true });
  t.same(toStructural({ type: "object", propertyNames: { type: "string" }, additionalProperties: { type: "string" } }), { type: "object", additionalProperties: { type: "string" } });
  t.same(toStructural({ type: "object", properties: { a: { type: "string" } }, additionalProperties: false }), { type: "object", properties: { a: { type: "string" } } });
  // Nothing in the generated schema may keep a JSON-Schema-only keyword.
  const text = JSON.stringify(pipelineRunCrd());
  for (const k of ["$schema", "propertyNames", "\"const\"", "additionalProperties\":false", "additionalProperties\":{}"]) t.notOk(text.includes(k), `no ${k}`);
});

t.test("a run survives the round trip through the resource", async (t) => {
  const res = runToResource(run, "ns1");
  t.equal(res.metadata.name, run.id);
  t.equal(res.metadata.labels?.["operon.dev/org"], "acme");
  const status = runToStatus(run, undefined, "2026-11-22T01:00:03.000Z");
  t.equal(status.progress, "1/2");
  const admitted = status.conditions?.find((c) => c.type === "Admitted");
  t.equal(admitted?.status, "False");
  t.equal(admitted?.reason, "OrgConcurrencyLimit");
  t.match(admitted?.message, /1 step\(s\) wait for a free slot of organization acme, first align/);
  const back = resourceToRun({ ...res, status });
  t.same(back, run, "every field comes back");
  t.equal(back.invalid, undefined);
  // Same record again: the same conditions, transition times kept.
  t.same(runToStatus(run, status.conditions, "2026-11-22T02:00:00.000Z"), status);
  const done = runToStatus({ ...run, status: "completed" }, status.conditions, "2026-11-22T02:00:00.000Z");
  t.equal(done.conditions?.find((c) => c.type === "Succeeded")?.lastTransitionTime, "2026-11-22T02:00:00.000Z");
});

t.test("a resource that does not match the schema is marked invalid, not thrown", async (t) => {
  const bad = resourceToRun({ apiVersion: "operon.dev/v1alpha1", kind: "PipelineRun", metadata: { name: "by-hand", creationTimestamp: "2026-11-22T01:00:00Z" }, spec: { organization: "acme", workspace: "w", pipeline: { id: "x" }, spec: { steps: "nope" }, outputFolder: "pipelines/x" } });
  t.match(bad.invalid, /spec\.spec\.steps/);
  t.equal(bad.organization, "acme");
  t.equal(bad.status, "queued");
  t.same(bad.steps, []);
  t.equal(bad.createdAt, "2026-11-22T01:00:00Z");
  const noSpec = resourceToRun({ apiVersion: "operon.dev/v1alpha1", kind: "PipelineRun", metadata: { name: "empty" } });
  t.ok(noSpec.invalid);
});

t.test("job names are deterministic DNS labels, distinct per step and attempt", async (t) => {
  const id = "run-01jz0000000000000000000000";
  t.equal(jobName(id, "align", 1), `${id}-align-1`);
  t.equal(jobName(id, "align", 1), jobName(id, "align", 1));
  t.not(jobName(id, "align", 1), jobName(id, "align", 2));
  const upper = jobName(id, "Align", 1);
  t.not(upper, jobName(id, "align", 1), "case-distinct steps get distinct Jobs");
  t.not(jobName(id, "a_b", 1), jobName(id, "a-b", 1));
  const long = jobName(id, "x".repeat(64), 3);
  t.ok(long.length <= 63);
  t.not(long, jobName(id, "x".repeat(63), 3));
  for (const n of [upper, long, jobName(id, "_", 1), jobName(id, "A_B_C", 12)]) t.match(n, /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, n);
});

t.test("label values", async (t) => {
  t.equal(labelValue("acme"), "acme");
  t.match(labelValue("acme-"), /^acme-[0-9a-f]{8}$/);
  t.not(labelValue("acme-"), labelValue("acme_"));
  t.ok(labelValue("a".repeat(70)).length <= 63);
});
