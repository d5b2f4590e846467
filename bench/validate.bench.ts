/**
 * Benchmark: pipeline spec validation speed (issue: foundation).
 * (a) validations per second of a 12-step spec with interpolation, against a baseline of the
 *     zod schema parse alone on the same spec, in the same run;
 * (b) the cost of a 1 MB spec (JSON.parse + validateSpec), against JSON.parse alone.
 * Writes its section of bench/RESULTS.md. Run: `make bench` (builds dist/ first).
 */
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import type * as SchemaModule from "../core/spec/schema.js";
import type * as ValidateModule from "../core/spec/validate.js";
// Measure the compiled JavaScript that `operon` runs (make build), not the TypeScript loader's output.
const dist = new URL("../dist/core/spec/", import.meta.url);
if (!existsSync(new URL("validate.js", dist))) throw new Error("run `make build` first (bench measures dist/)");
const { PipelineSpecSchema, MAX_SPEC_BYTES } = (await import(new URL("schema.js", dist).href)) as typeof SchemaModule;
const { validateSpec } = (await import(new URL("validate.js", dist).href)) as typeof ValidateModule;

function twelveStepSpec() {
  const steps: Array<Record<string, unknown>> = [
    { stepId: "bwa_index", toolName: "bwa", parameters: { command: "index", inputFile: "${reference}", outputFile: "ref.fa" } },
    { stepId: "fai", toolName: "samtools", parameters: { command: "view", inputFile: "${reads1}", outputFile: "${sampleName}.raw.bam", region: "chr1" } },
    { stepId: "align", toolName: "bwa", dependsOn: ["bwa_index"], parameters: { command: "mem", reference: "${bwa_index.outputFile}", inputFile: "${reads1}", inputFile2: "${reads2}", outputFile: "${sampleName}.sam", threads: "${threads}", readGroup: "@RG\\tID:${sampleName}\\tSM:${sampleName}" } },
    { stepId: "sort", toolName: "samtools", dependsOn: ["align"], parameters: { command: "sort", inputFile: "${align.outputFile}", outputFile: "${sampleName}.sorted.bam", threads: "${threads}" } },
    { stepId: "index", toolName: "samtools", dependsOn: ["sort"], parameters: { command: "index", inputFile: "${sort.outputFile}", outputFile: "${sampleName}.sorted.bam" } },
    { stepId: "flagstat", toolName: "samtools", dependsOn: ["index"], parameters: { command: "flagstat", inputFile: "${index.outputFile}", outputFile: "${sampleName}.flagstat.txt" } },
    { stepId: "stats", toolName: "samtools", dependsOn: ["index"], parameters: { command: "stats", inputFile: "${index.outputFile}", outputFile: "${sampleName}.stats.txt" } },
    { stepId: "depth", toolName: "samtools", dependsOn: ["index"], parameters: { command: "depth", inputFile: "${index.outputFile}", outputFile: "${sampleName}.depth.tsv", region: "${region}" } },
    { stepId: "mpileup", toolName: "bcftools", dependsOn: ["index", "bwa_index"], parameters: { command: "mpileup", inputFile: "${index.outputFile}", reference: "${bwa_index.outputFile}", outputFile: "${sampleName}.pileup.bcf", region: "${region}" } },
    { stepId: "call", toolName: "bcftools", dependsOn: ["mpileup"], parameters: { command: "call", inputFile: "${mpileup.outputFile}", outputFile: "${sampleName}.vcf.gz", args: ["--ploidy", "2"] } },
    { stepId: "tabix", toolName: "tabix", dependsOn: ["call"], parameters: { command: "index", inputFile: "${call.outputFile}", outputFile: "${sampleName}.vcf.gz" } },
    { stepId: "vstats", toolName: "bcftools", dependsOn: ["tabix"], parameters: { command: "stats", inputFile: "${tabix.outputFile}", outputFile: "${sampleName}.vcf.stats.txt" } },
  ];
  return {
    specVersion: "1.0", id: "bench-variant-calling", name: "Bench variant calling", description: "12 steps with interpolation",
    inputs: [
      { name: "reads1", type: "file" }, { name: "reads2", type: "file" }, { name: "reference", type: "file" },
      { name: "sampleName", type: "string", default: "s1" }, { name: "threads", type: "string", default: "2" },
      { name: "region", type: "select", options: ["chr1", "chr2"], default: "chr1" },
    ],
    steps,
  };
}

/**
 * A spec just under 1 MB: 12 steps, each with 256 extra args (the schema's maximum) of long
 * strings holding several references, and 200 declared string inputs they refer to.
 */
function oneMegabyteSpec() {
  const spec = twelveStepSpec();
  for (let k = 0; k < 200; k++) spec.inputs.push({ name: `opt_${k}`, type: "string", default: `value-${k}` });
  let n = 0;
  const arg = () => `--tag=${"${sampleName}"}:${"${opt_" + (n % 200) + "}"}:${"${region}"}:${n++}:` + "a".repeat(200);
  for (const s of spec.steps) {
    const p = s.parameters as Record<string, unknown>;
    p.args = Array.from({ length: 256 }, arg);
  }
  const size = JSON.stringify(spec).length;
  if (size > MAX_SPEC_BYTES) throw new Error(`generated spec is ${size} bytes, over the limit`);
  spec.description += "x".repeat(Math.max(0, MAX_SPEC_BYTES - 64 - size));
  return spec;
}

function opsPerSecond(fn: () => unknown, seconds: number): number {
  const end = performance.now() + seconds * 1000;
  let n = 0;
  while (performance.now() < end) { for (let i = 0; i < 50; i++) fn(); n += 50; }
  return n / seconds;
}

function medianMs(fn: () => unknown, runs: number): number {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) { const t0 = performance.now(); fn(); times.push(performance.now() - t0); }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)] as number;
}

const spec = twelveStepSpec();
const check = validateSpec(spec);
if (!check.valid) throw new Error(`bench spec is invalid: ${JSON.stringify(check.errors)}`);

// Warm up, then alternate measurements so drift hits both equally.
opsPerSecond(() => validateSpec(spec), 1);
opsPerSecond(() => PipelineSpecSchema.safeParse(spec), 1);
const v: number[] = [];
const b: number[] = [];
for (let r = 0; r < 7; r++) {
  v.push(opsPerSecond(() => validateSpec(spec), 2));
  b.push(opsPerSecond(() => PipelineSpecSchema.safeParse(spec), 2));
}
const med = (xs: number[]) => xs.slice().sort((x, y) => x - y)[Math.floor(xs.length / 2)] as number;
const validateOps = med(v);
const schemaOps = med(b);

const big = oneMegabyteSpec();
const bigText = JSON.stringify(big);
const bigCheck = validateSpec(JSON.parse(bigText));
if (!bigCheck.valid) throw new Error(`1 MB spec invalid: ${JSON.stringify(bigCheck.errors.slice(0, 3))}`);
medianMs(() => validateSpec(JSON.parse(bigText)), 3);
const bigMs = medianMs(() => validateSpec(JSON.parse(bigText)), 15);
const parseMs = medianMs(() => JSON.parse(bigText), 15);
const refs = bigText.split("${").length - 1;

const cpu = cpus()[0]?.model ?? "unknown CPU";
const date = new Date().toISOString().slice(0, 10);
const section = `<!-- validate:start -->
## Spec validation (\`bench/validate.bench.ts\`)

Measured ${date} on ${cpus().length} × ${cpu}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.versions.node}.

| measure | result | baseline (same run) | ratio |
|---|---|---|---|
| 12-step spec with interpolation: \`validateSpec\`, median of 7 rounds of 2 s (range ${Math.round(Math.min(...v)).toLocaleString("en")}–${Math.round(Math.max(...v)).toLocaleString("en")}) | **${Math.round(validateOps).toLocaleString("en")} /s** (target ≥ 20,000/s) | zod schema parse alone: ${Math.round(schemaOps).toLocaleString("en")} /s | ${(validateOps / schemaOps).toFixed(2)} |
| 1 MB spec (${bigText.length.toLocaleString("en")} bytes, ${refs.toLocaleString("en")} \`\${...}\` references): \`JSON.parse\` + \`validateSpec\`, median of 15 | **${bigMs.toFixed(1)} ms** | \`JSON.parse\` alone: ${parseMs.toFixed(1)} ms | ${(bigMs / parseMs).toFixed(1)}× |

The ratio column is \`validateSpec\` against the baseline: how much the cross-field checks (tools, commands, the DAG, every reference) cost on top of the schema or the JSON parse.
<!-- validate:end -->`;

process.stdout.write(section + "\n");
const path = new URL("./RESULTS.md", import.meta.url);
const header = "# Benchmark results\n\nEach section is written by its script in `bench/`; rerun with `make bench`.\n\n";
const current = existsSync(path) ? readFileSync(path, "utf8") : header;
const next = /<!-- validate:start -->[\s\S]*<!-- validate:end -->/.test(current)
  ? current.replace(/<!-- validate:start -->[\s\S]*<!-- validate:end -->/, section)
  : current.trimEnd() + "\n\n" + section + "\n";
writeFileSync(path, next);
