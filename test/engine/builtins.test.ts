/** Every built-in pipeline completes through the embedded engine, with the real tools. */
import t from "tap";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { testApp } from "../support/app.js";
import { simulateReads } from "../support/reads.js";

const data = mkdtempSync(join(tmpdir(), "operon-builtins-"));
t.teardown(() => rmSync(data, { recursive: true, force: true }));
simulateReads(data, { seed: 99 });

const a = await testApp({ engine: {} });
t.teardown(() => a.close());
await a.service.createWorkspace("acme", "ws1");
const h = { authorization: `Bearer ${await a.key("acme", ["tools"])}` };
for (const f of ["ref.fa", "r1.fastq", "r2.fastq"]) await a.store.put(`orgs/acme/workspaces/ws1/data/${f}`, readFileSync(join(data, f)));

async function run(pipeline: string, input: Record<string, string>) {
  const res = await a.app.inject({ method: "POST", url: "/v1/pipelines", headers: h, payload: { workspace_id: "ws1", pipeline_id: pipeline, input } });
  if (res.statusCode !== 201) throw new Error(res.body);
  const id = res.json().data.id as string;
  for (let i = 0; i < 1200; i++) {
    const r = (await a.app.inject({ method: "GET", url: `/v1/pipelines/${id}`, headers: h })).json().data;
    if (["completed", "failed", "cancelled"].includes(r.status)) return r as { status: string; output_paths: string[]; steps: Array<{ step_id: string; status: string; error: string | null }> };
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error(`${pipeline} did not finish`);
}

const reads = { reads1: "data/r1.fastq", reads2: "data/r2.fastq" };
const aligned: Record<string, string[]> = {};
for (const [id, input] of [
  ["fastq-qc", reads],
  ["bwa-align", { ...reads, reference: "data/ref.fa" }],
  ["variant-calling", { ...reads, reference: "data/ref.fa" }],
  ["bowtie2-align", { ...reads, reference: "data/ref.fa" }],
  ["hisat2-align", { ...reads, reference: "data/ref.fa" }],
] as const) {
  t.test(id, async (t) => {
    const r = await run(id, input);
    t.equal(r.status, "completed", JSON.stringify(r.steps.filter((x) => x.error)));
    t.ok(r.steps.every((x) => x.status === "completed"));
    t.ok(r.output_paths.length >= r.steps.length, "every step published its outputs");
    aligned[id] = r.output_paths;
  });
}

t.test("coverage (on the BAM bwa-align produced, its index travelling with it)", async (t) => {
  const bam = aligned["bwa-align"]?.find((p) => /\.bam$/.test(p) && aligned["bwa-align"]?.includes(`${p}.bai`));
  t.ok(bam, "an indexed BAM from bwa-align");
  const r = await run("coverage", { bam: bam as string });
  t.equal(r.status, "completed", JSON.stringify(r.steps.filter((x) => x.error)));
  t.ok(r.output_paths.some((p) => p.endsWith(".tsv") || p.endsWith(".txt")), "coverage tables");
});
