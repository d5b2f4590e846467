/**
 * A step's `resources` in the pipeline spec (cpu, memory, ephemeralStorage as Kubernetes
 * quantities): accepted as written, and every mistake reported with a JSON pointer and a
 * message naming the field as `steps[i].resources.<key>`.
 */
import t from "tap";
import { validateSpec } from "../../core/spec/validate.js";
import { pipelineSpecJsonSchema } from "../../core/spec/schema.js";

const spec = (resources: unknown, more: Record<string, unknown> = {}) => ({
  steps: [
    { stepId: "sort", toolName: "samtools", parameters: { command: "sort", inputFile: "a.bam" } },
    { stepId: "align", toolName: "bwa", parameters: { command: "mem", inputFile: "r1.fq", reference: "ref.fa" }, resources, ...more },
  ],
});

t.test("resources as Kubernetes quantities are accepted", async (t) => {
  for (const r of [{ cpu: "4", memory: "16Gi", ephemeralStorage: "200Gi" }, { cpu: "500m" }, { memory: "16000Mi" }, { cpu: "2.5", memory: "1e10" }, {}]) {
    const v = validateSpec(spec(r));
    t.same(v.errors, [], JSON.stringify(r));
  }
});

t.test("a bad resources field is named steps[i].resources.<key>", async (t) => {
  const cases: Array<{ resources: unknown; code: string; path: string; message: string }> = [
    { resources: { memory: "16GB" }, code: "invalid_resources", path: "/steps/1/resources/memory", message: "steps[1].resources.memory: must be a Kubernetes quantity such as \"500m\", \"4\" or \"16Gi\"" },
    { resources: { memory: "16" }, code: "invalid_resources", path: "/steps/1/resources/memory", message: "steps[1].resources.memory: must be at least 1Mi: give a unit, such as \"16Gi\"" },
    { resources: { memory: 16 }, code: "invalid_resources", path: "/steps/1/resources/memory", message: "steps[1].resources.memory: must be a string holding a Kubernetes quantity, such as \"16Gi\"" },
    { resources: { cpu: "-1" }, code: "invalid_resources", path: "/steps/1/resources/cpu", message: "steps[1].resources.cpu: must be a Kubernetes quantity such as \"500m\", \"4\" or \"16Gi\"" },
    { resources: { cpu: "0" }, code: "invalid_resources", path: "/steps/1/resources/cpu", message: "steps[1].resources.cpu: must be at least 1m (a thousandth of a CPU)" },
    { resources: { ephemeralStorage: "lots" }, code: "invalid_resources", path: "/steps/1/resources/ephemeralStorage", message: "steps[1].resources.ephemeralStorage: must be a Kubernetes quantity such as \"500m\", \"4\" or \"16Gi\"" },
    { resources: { "ephemeral-storage": "10Gi" }, code: "unknown_field", path: "/steps/1/resources/ephemeral-storage", message: "steps[1].resources: unknown field \"ephemeral-storage\" (known: cpu, memory, ephemeralStorage)" },
    { resources: { gpu: "1", tpu: "1" }, code: "unknown_field", path: "/steps/1/resources", message: "steps[1].resources: unknown fields \"gpu\", \"tpu\" (known: cpu, memory, ephemeralStorage)" },
    { resources: "16Gi", code: "invalid_resources", path: "/steps/1/resources", message: "steps[1].resources: must be an object with cpu, memory and/or ephemeralStorage" },
  ];
  for (const c of cases) {
    const v = validateSpec(spec(c.resources));
    t.equal(v.valid, false, JSON.stringify(c.resources));
    t.same(v.errors, [{ code: c.code, path: c.path, message: c.message }], JSON.stringify(c.resources));
  }
  // Several steps, several problems: each names its own step.
  const two = validateSpec({ steps: [
    { stepId: "a", toolName: "samtools", parameters: { command: "sort", inputFile: "a.bam" }, resources: { memory: "1 Gi" } },
    { stepId: "b", toolName: "samtools", parameters: { command: "sort", inputFile: "a.bam" }, resources: { cpu: "two" } },
  ] });
  t.same(two.errors.map((e) => e.message.split(":")[0]), ["steps[0].resources.memory", "steps[1].resources.cpu"]);
});

t.test("the spec's JSON Schema (OpenAPI, the PipelineRun CRD) carries the field", async (t) => {
  const schema = pipelineSpecJsonSchema() as { properties: { steps: { items: { properties: Record<string, { properties?: Record<string, { pattern?: string }>; additionalProperties?: unknown }> } } } };
  const res = schema.properties.steps.items.properties.resources;
  t.same(Object.keys(res?.properties ?? {}), ["cpu", "memory", "ephemeralStorage"]);
  t.ok(res?.properties?.memory?.pattern, "quantities checked by a pattern");
  t.equal(res?.additionalProperties, false, "no other keys");
});
