import t from "tap";
import { MANIFEST_SCHEMA_VERSION, RunManifestSchema } from "../../core/manifest.js";
import { RUN_STATUSES, STEP_STATUSES } from "../../core/status.js";

const FOLDER = "pipelines/2026-11-21T22-40-05Z";
const KEY = (f: string) => `orgs/acme/workspaces/ws1/${FOLDER}/${f}`;
const SHA_A = "9f2c1e7b5d3a8c6e4f0b2d1a7c9e5b3f8a6d4c2e0b9f7a5c3e1d8b6f4a2c0e9d";
const SHA_B = "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9";
const SHA_C = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

type Json = Record<string, unknown>;

/** A complete manifest of a finished two-step bwa/samtools run, as run.json holds it. */
function fullManifest(): Json {
  return {
    schemaVersion: 1,
    executionId: "run-01jd3m8q2x7k9v4n5p6r7s8t9w",
    pipelineId: "bwa-align",
    pipelineName: "BWA Align",
    status: "completed",
    workspaceId: "ws1",
    organizationId: "acme",
    outputFolder: FOLDER,
    startedAt: "2026-11-21T22:40:05Z",
    completedAt: "2026-11-21T22:46:35Z",
    durationMs: 390_000,
    stepsTotal: 2,
    stepsCompleted: 2,
    stepsFailed: 0,
    parameters: { reads: "data/s1_R1.fastq", reference: "refs/ref.fa" },
    inputChecksums: {
      reads: { s3Key: "orgs/acme/workspaces/ws1/data/s1_R1.fastq", checksum: SHA_A, size: 52_428_800 },
      reference: { s3Key: "orgs/acme/workspaces/ws1/refs/ref.fa", checksum: SHA_B, size: 3_145_728 },
    },
    pipelineDefinition: {
      specVersion: "1.0",
      id: "bwa-align",
      name: "BWA Align",
      inputs: [{ name: "reads", type: "file" }, { name: "reference", type: "file" }],
      steps: [
        { stepId: "align", toolName: "bwa", parameters: { command: "mem", inputFile: "${reads}", reference: "${reference}", outputFile: "s1.sam" } },
        { stepId: "sort", toolName: "samtools", dependsOn: ["align"], parameters: { command: "sort", inputFile: "${align.outputFile}", outputFile: "s1.sorted.bam" } },
      ],
    },
    steps: [
      {
        stepId: "align", stepNumber: 1, toolName: "bwa", toolVersion: "0.7.18",
        imageDigest: `sha256:${SHA_C}`, taskDefinitionArn: "run-01jd3m8q2x7k9v4n5p6r7s8t9w-align",
        status: "completed", dependsOn: [],
        startedAt: "2026-11-21T22:40:05Z", completedAt: "2026-11-21T22:44:05Z", durationMs: 240_000,
        outputFiles: [{ filename: "s1.sam", s3Key: KEY("s1.sam"), size: 104_857_600, checksum: SHA_A }],
        command: "mem",
        argv: ["bwa", "mem", "ref.fa", "s1_R1.fastq"],
      },
      {
        stepId: "sort", stepNumber: 2, toolName: "samtools", toolVersion: "1.21",
        imageDigest: null, taskDefinitionArn: null,
        status: "completed", dependsOn: ["align"],
        startedAt: "2026-11-21T22:44:06Z", completedAt: "2026-11-21T22:46:35Z", durationMs: 149_000,
        outputFiles: [{ filename: "s1.sorted.bam", s3Key: KEY("s1.sorted.bam"), size: 31_457_280, checksum: SHA_B }],
        executable: { path: "/usr/bin/samtools", sha256: SHA_C },
      },
    ],
  };
}

const parses = (m: unknown): boolean => RunManifestSchema.safeParse(m).success;
const steps = (m: Json): Json[] => m["steps"] as Json[];
const firstStep = (m: Json): Json => steps(m)[0] as Json;
const firstOutput = (m: Json): Json => (firstStep(m)["outputFiles"] as Json[])[0] as Json;

t.test("a full valid manifest parses", (t) => {
  const r = RunManifestSchema.safeParse(fullManifest());
  t.ok(r.success, r.success ? "parsed" : JSON.stringify(r.error.issues));
  t.equal(MANIFEST_SCHEMA_VERSION, 1);
  if (r.success) {
    t.equal(r.data.steps.length, 2);
    t.equal(r.data.pipelineDefinition.steps[1]?.parameters?.["inputFile"], "${align.outputFile}", "the spec is embedded as executed");
  }
  t.end();
});

t.test("a running manifest (nulls where the run has not finished) parses", (t) => {
  const m = fullManifest();
  Object.assign(m, { status: "running", completedAt: null, durationMs: null, stepsCompleted: 1 });
  Object.assign(steps(m)[1] as Json, { status: "running", completedAt: null, durationMs: null, outputFiles: [] });
  Object.assign(firstStep(m), { toolVersion: null });
  t.ok(parses(m));
  t.end();
});

const TOP_LEVEL = [
  "schemaVersion", "executionId", "pipelineId", "pipelineName", "status", "workspaceId", "organizationId", "outputFolder",
  "startedAt", "completedAt", "durationMs", "stepsTotal", "stepsCompleted", "stepsFailed", "parameters", "inputChecksums",
  "pipelineDefinition", "steps",
] as const;

t.test("every top-level field of the spec's table is required", (t) => {
  for (const field of TOP_LEVEL) {
    const m = fullManifest();
    t.ok(Object.hasOwn(m, field), `fixture has ${field}`);
    delete m[field];
    t.notOk(parses(m), `without ${field} the manifest does not parse`);
  }
  t.end();
});

const STEP_FIELDS = [
  "stepId", "stepNumber", "toolName", "toolVersion", "imageDigest", "taskDefinitionArn", "status", "dependsOn",
  "startedAt", "completedAt", "durationMs", "outputFiles",
] as const;

t.test("every step field the spec lists is required", (t) => {
  for (const field of STEP_FIELDS) {
    for (const index of [0, 1]) {
      const m = fullManifest();
      const step = steps(m)[index] as Json;
      t.ok(Object.hasOwn(step, field), `fixture step ${index} has ${field}`);
      delete step[field];
      t.notOk(parses(m), `without steps[${index}].${field} the manifest does not parse`);
    }
  }
  t.end();
});

t.test("every output file field and input checksum field is required", (t) => {
  for (const field of ["filename", "s3Key", "size", "checksum"]) {
    const m = fullManifest();
    delete firstOutput(m)[field];
    t.notOk(parses(m), `without outputFiles[0].${field} the manifest does not parse`);
  }
  for (const field of ["s3Key", "checksum", "size"]) {
    const m = fullManifest();
    delete ((m["inputChecksums"] as Json)["reads"] as Json)[field];
    t.notOk(parses(m), `without inputChecksums.reads.${field} the manifest does not parse`);
  }
  t.end();
});

t.test("checksums are 64 lowercase hex characters", (t) => {
  const bad: Array<[string, string]> = [
    ["uppercase", SHA_A.toUpperCase()],
    ["one uppercase letter", "F" + SHA_A.slice(1)],
    ["63 characters", SHA_A.slice(0, 63)],
    ["65 characters", SHA_A + "0"],
    ["non-hex letter", "g" + SHA_A.slice(1)],
    ["sha256: prefix", `sha256:${SHA_A}`],
    ["empty", ""],
  ];
  for (const [name, checksum] of bad) {
    const a = fullManifest();
    firstOutput(a)["checksum"] = checksum;
    t.notOk(parses(a), `output checksum, ${name}: refused`);
    const b = fullManifest();
    ((b["inputChecksums"] as Json)["reads"] as Json)["checksum"] = checksum;
    t.notOk(parses(b), `input checksum, ${name}: refused`);
    const c = fullManifest();
    (steps(c)[1] as Json)["executable"] = { path: "/usr/bin/samtools", sha256: checksum };
    t.notOk(parses(c), `executable sha256, ${name}: refused`);
  }
  t.end();
});

t.test("schemaVersion must be 1", (t) => {
  for (const v of [2, 0, "1", 1.5, null]) {
    const m = fullManifest();
    m["schemaVersion"] = v;
    t.notOk(parses(m), `schemaVersion ${JSON.stringify(v)} refused`);
  }
  t.end();
});

t.test("statuses: known values parse, unknown ones do not", (t) => {
  for (const status of RUN_STATUSES) {
    const m = fullManifest();
    m["status"] = status;
    t.ok(parses(m), `run status ${status}`);
  }
  for (const status of ["succeeded", "COMPLETED", "done", ""]) {
    const m = fullManifest();
    m["status"] = status;
    t.notOk(parses(m), `run status ${JSON.stringify(status)} refused`);
  }
  for (const status of STEP_STATUSES) {
    const m = fullManifest();
    firstStep(m)["status"] = status;
    t.ok(parses(m), `step status ${status}`);
  }
  for (const status of ["succeeded", "queued", "Completed"]) {
    const m = fullManifest();
    firstStep(m)["status"] = status;
    t.notOk(parses(m), `step status ${JSON.stringify(status)} refused`);
  }
  t.end();
});

t.test("error is optional on a step, and a string when present", (t) => {
  const without = fullManifest();
  t.notOk(Object.hasOwn(firstStep(without), "error"));
  t.ok(parses(without), "no error field");

  const failed = fullManifest();
  failed["status"] = "failed";
  failed["stepsFailed"] = 1;
  Object.assign(steps(failed)[1] as Json, { status: "failed", outputFiles: [], error: "samtools sort exited with code 1: truncated file" });
  t.ok(parses(failed), "failed step with error");

  const bad = fullManifest();
  firstStep(bad)["error"] = { message: "boom" };
  t.notOk(parses(bad), "a non-string error is refused");
  t.end();
});

t.test("timestamps are ISO 8601", (t) => {
  for (const ok of ["2026-11-21T22:40:05Z", "2026-11-21T22:40:05.123Z", "2026-11-21T23:40:05+01:00"]) {
    const m = fullManifest();
    m["startedAt"] = ok;
    t.ok(parses(m), `${ok} accepted`);
  }
  for (const bad of ["2026-11-21 22:40:05", "21/11/2026", "1764000000000", "2026-11-21T22:40:05"]) {
    const m = fullManifest();
    m["startedAt"] = bad;
    t.notOk(parses(m), `${bad} refused at startedAt`);
    const s = fullManifest();
    firstStep(s)["completedAt"] = bad;
    t.notOk(parses(s), `${bad} refused at steps[0].completedAt`);
  }
  const m = fullManifest();
  m["startedAt"] = null;
  t.notOk(parses(m), "a run always has startedAt");
  t.end();
});

t.test("numbers: counts are non-negative integers, durations non-negative", (t) => {
  const cases: Array<[string, (m: Json) => void]> = [
    ["negative durationMs", (m) => { m["durationMs"] = -1; }],
    ["fractional stepsTotal", (m) => { m["stepsTotal"] = 1.5; }],
    ["negative stepsFailed", (m) => { m["stepsFailed"] = -1; }],
    ["stepNumber 0", (m) => { firstStep(m)["stepNumber"] = 0; }],
    ["negative output size", (m) => { firstOutput(m)["size"] = -5; }],
    ["string output size", (m) => { firstOutput(m)["size"] = "1024"; }],
    ["non-string parameter value", (m) => { m["parameters"] = { threads: 8 }; }],
    ["empty executionId", (m) => { m["executionId"] = ""; }],
    ["empty outputFolder", (m) => { m["outputFolder"] = ""; }],
    ["empty output filename", (m) => { firstOutput(m)["filename"] = ""; }],
    ["invalid embedded spec (no steps)", (m) => { (m["pipelineDefinition"] as Json)["steps"] = []; }],
  ];
  for (const [name, mutate] of cases) {
    const m = fullManifest();
    mutate(m);
    t.notOk(parses(m), `${name} refused`);
  }
  t.end();
});
