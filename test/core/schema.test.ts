import t from "tap";
import { pipelineSpecJsonSchema } from "../../core/spec/schema.js";

// The spec schema as JSON Schema is what the OpenAPI document and the PipelineRun CRD reuse.
t.test("the spec's JSON Schema carries the rules of the spec's tables", async (t) => {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- walking a JSON document
  const s = pipelineSpecJsonSchema() as { required: string[]; properties: Record<string, any> };
  t.same(s.required, ["steps"]);
  t.equal(s.properties.steps.minItems, 1);
  t.equal(s.properties.steps.maxItems, 12);
  t.same(s.properties.steps.items.required, ["stepId", "toolName"]);
  t.match(s.properties.steps.items.properties.stepId.pattern, /A-Za-z0-9_-/);
  t.same(s.properties.steps.items.properties.parameters, { type: "object", additionalProperties: {} });
  t.same(s.properties.inputs.items.properties.type.enum, ["file", "string", "select"]);
  t.equal(s.properties.executionMode.const, "process-manager");
  t.equal(s.properties.steps.items.additionalProperties, false, "unknown step fields are rejected");
});
