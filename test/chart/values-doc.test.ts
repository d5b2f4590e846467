import t from "tap";
import { readFileSync } from "node:fs";
import { renderValuesDoc } from "../../scripts/gen-values-doc.js";

t.test("the chart's values reference is generated from the schema", async (t) => {
  const committed = readFileSync(new URL("../../charts/operon/README.md", import.meta.url), "utf8");
  t.equal(committed, renderValuesDoc(), "charts/operon/README.md is stale: run `make chart-docs`");
  const schema = JSON.parse(readFileSync(new URL("../../charts/operon/values.schema.json", import.meta.url), "utf8")) as { properties: Record<string, { properties?: Record<string, unknown> }> };
  for (const key of ["s3.bucket", "orgConcurrency", "operator.leaseDurationSeconds", "ingress.tls.secretName",
    "steps.resources", "steps.tools", "steps.tools.annovar.image", "steps.tools.bwa", "steps.maxResources.memory", "steps.imageRegistry", "steps.referenceVolumes"]) {
    t.match(committed, `| \`${key}\` |`, `${key} is documented`);
  }
  t.ok(schema.properties.s3?.properties?.bucket, "documented keys come from the schema");
});
