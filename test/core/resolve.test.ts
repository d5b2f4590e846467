import t from "tap";
import fc from "fast-check";
import { resolveInputs, resolveStepParameters, type OutputLookup } from "../../core/spec/resolve.js";
import { normalizeWorkspacePath } from "../../core/paths.js";
import type { PipelineInput } from "../../core/spec/schema.js";
import type { Issue } from "../../core/issues.js";

const INPUTS: PipelineInput[] = [
  { name: "reads", type: "file", description: "Forward reads" },
  { name: "reference", type: "file", default: "refs/ref.fa" },
  { name: "threads", type: "select", options: ["2", "4", "8"], default: "4" },
  { name: "sampleName", type: "string", default: "s1" },
];
const spec = { inputs: INPUTS };

const codes = (issues: Issue[]): string[] => issues.map((i) => i.code);

/* ------------------------------------------------------------------ resolveInputs */

t.test("resolveInputs applies defaults and keeps supplied values", (t) => {
  const r = resolveInputs(spec, { reads: "data/s1_R1.fastq" });
  t.same(r, { ok: true, values: { reads: "data/s1_R1.fastq", reference: "refs/ref.fa", threads: "4", sampleName: "s1" } });

  const r2 = resolveInputs(spec, { reads: "data/s2_R1.fastq", reference: "refs/hg38.fa", threads: "8", sampleName: "s2" });
  t.same(r2, { ok: true, values: { reads: "data/s2_R1.fastq", reference: "refs/hg38.fa", threads: "8", sampleName: "s2" } });

  const r3 = resolveInputs(spec, { reads: "data/s1_R1.fastq", threads: undefined });
  t.ok(r3.ok && r3.values["threads"] === "4", "an undefined value falls back to the default");

  t.same(resolveInputs({}, {}), { ok: true, values: {} }, "no inputs declared, none supplied");
  t.same(resolveInputs({ inputs: [] }), { ok: true, values: {} }, "supplied defaults to {}");
  t.end();
});

t.test("resolveInputs reports missing_input for an input without default", (t) => {
  const r = resolveInputs(spec, {});
  t.equal(r.ok, false);
  if (!r.ok) {
    t.same(codes(r.errors), ["missing_input"]);
    t.equal(r.errors[0]?.path, "/input/reads");
    t.match(r.errors[0]?.message, /reads/);
  }
  // A declared name that is also an Object.prototype property is not "supplied" by the prototype.
  const proto = resolveInputs({ inputs: [{ name: "constructor", type: "string" }] }, {});
  t.ok(!proto.ok && codes(proto.errors).includes("missing_input"), "inherited properties are not values");
  t.end();
});

t.test("resolveInputs reports unknown_input with valid_values", (t) => {
  const r = resolveInputs(spec, { reads: "data/a.fq", readz: "data/b.fq" });
  t.equal(r.ok, false);
  if (!r.ok) {
    t.same(codes(r.errors), ["unknown_input"]);
    t.equal(r.errors[0]?.path, "/input/readz");
    t.same(r.errors[0]?.valid_values, ["reads", "reference", "threads", "sampleName"]);
  }
  const none = resolveInputs({}, { x: "1" });
  t.ok(!none.ok && none.errors[0]?.code === "unknown_input" && none.errors[0].valid_values?.length === 0, "no declared inputs: empty valid_values");
  t.end();
});

t.test("resolveInputs: a select outside its options is invalid_input_value with the options", (t) => {
  for (const v of ["16", "", "4 ", "four"]) {
    const r = resolveInputs(spec, { reads: "data/a.fq", threads: v });
    t.equal(r.ok, false, `threads=${JSON.stringify(v)} refused`);
    if (!r.ok) {
      t.same(codes(r.errors), ["invalid_input_value"]);
      t.equal(r.errors[0]?.path, "/input/threads");
      t.same(r.errors[0]?.valid_values, ["2", "4", "8"]);
    }
  }
  t.end();
});

t.test("resolveInputs: non-string values are invalid_input_value", (t) => {
  for (const v of [8, true, null, ["data/a.fq"], { path: "data/a.fq" }, 0]) {
    const r = resolveInputs(spec, { reads: "data/a.fq", threads: v });
    t.equal(r.ok, false, `threads=${JSON.stringify(v)} refused`);
    if (!r.ok) {
      t.same(codes(r.errors), ["invalid_input_value"], `threads=${JSON.stringify(v)}`);
      t.equal(r.errors[0]?.path, "/input/threads");
    }
    const f = resolveInputs(spec, { reads: v });
    t.ok(!f.ok && codes(f.errors).includes("invalid_input_value"), `file reads=${JSON.stringify(v)} refused`);
  }
  t.end();
});

t.test("resolveInputs: unsafe file paths are invalid_input_value; safe ones are normalized", (t) => {
  for (const v of ["/etc/passwd", "../x", "data/../../x", "_system/keys", "./_system/x", "a//b", "a\\b", "a\u0000b", ""]) {
    const r = resolveInputs(spec, { reads: v });
    t.equal(r.ok, false, `reads=${JSON.stringify(v)} refused`);
    if (!r.ok) {
      t.same(codes(r.errors), ["invalid_input_value"], `reads=${JSON.stringify(v)}`);
      t.equal(r.errors[0]?.path, "/input/reads");
    }
  }
  const r = resolveInputs(spec, { reads: "./data/x", reference: "./refs/hg38.fa" });
  t.ok(r.ok && r.values["reads"] === "data/x" && r.values["reference"] === "refs/hg38.fa", "./data/x → data/x");

  // A default is checked like a supplied value.
  const badDefault = resolveInputs({ inputs: [{ name: "reference", type: "file", default: "../refs/ref.fa" }] }, {});
  t.ok(!badDefault.ok && codes(badDefault.errors).includes("invalid_input_value"), "unsafe default refused");

  // Paths are only checked for file inputs: a string input may hold anything.
  const str = resolveInputs(spec, { reads: "data/a.fq", sampleName: "../not-a-path" });
  t.ok(str.ok && str.values["sampleName"] === "../not-a-path");
  t.end();
});

t.test("resolveInputs collects every error", (t) => {
  const r = resolveInputs(spec, { extra: "1", threads: "3", reference: "/abs" });
  t.equal(r.ok, false);
  if (!r.ok) t.same(codes(r.errors).sort(), ["invalid_input_value", "invalid_input_value", "missing_input", "unknown_input"]);
  t.end();
});

/* ------------------------------------------------------------------ normalizeWorkspacePath */

t.test("normalizeWorkspacePath accepts and normalizes", (t) => {
  const accepted: Array<[string, string]> = [
    ["a", "a"],
    ["a/b.bam", "a/b.bam"],
    ["./a", "a"],
    ["./data/x", "data/x"],
    ["pipelines/2026-11-21T22-40-05Z/s1.sorted.bam", "pipelines/2026-11-21T22-40-05Z/s1.sorted.bam"],
    ["a..b/c", "a..b/c"],
    ["...", "..."],
    ["system/x", "system/x"],
    ["a/_system/x", "a/_system/x"],
    [Array.from({ length: 4 }, () => "x".repeat(250)).join("/") + "/" + "y".repeat(19), Array.from({ length: 4 }, () => "x".repeat(250)).join("/") + "/" + "y".repeat(19)],
  ];
  t.equal(accepted[accepted.length - 1]?.[0].length, 1023);
  for (const [input, path] of accepted) t.same(normalizeWorkspacePath(input), { ok: true, path }, JSON.stringify(input.length > 40 ? `${input.slice(0, 20)}…(${input.length})` : input));
  t.end();
});

t.test("normalizeWorkspacePath rejects unsafe paths", (t) => {
  const rejected: Array<[string, string]> = [
    ["empty", ""],
    ["absolute", "/etc/passwd"],
    ["parent", "../x"],
    ["parent inside", "a/../b"],
    ["trailing parent", "a/.."],
    ["only parent", ".."],
    ["empty segment", "a//b"],
    ["trailing slash", "a/"],
    ["dot inside", "a/./b"],
    ["dot only", "."],
    ["dot slash only", "./"],
    ["backslash", "a\\b"],
    ["backslash parent", "..\\x"],
    ["NUL", "a\u0000b"],
    ["newline", "a\nb"],
    ["DEL", "a\u007fb"],
    ["_system/", "_system/keys"],
    ["_system alone", "_system"],
    ["./_system/", "./_system/x"],
    ["over 1024 chars", "x".repeat(1025)],
    ["long path of short segments", "ab/".repeat(400) + "c"],
  ];
  for (const [name, input] of rejected) {
    const r = normalizeWorkspacePath(input);
    t.equal(r.ok, false, `${name} rejected`);
    if (!r.ok) t.type(r.reason, "string");
  }
  t.end();
});

const segment = fc.oneof(
  fc.constantFrom("a", "b.bam", "data", "..", ".", "", "_system", "x y", "\\", "\u0000", "%2e%2e", "...", "._system", "_system_"),
  fc.string({ maxLength: 6 }),
);
const pathLike = fc.oneof(
  fc.array(segment, { maxLength: 6 }).map((s) => s.join("/")),
  fc.array(segment, { maxLength: 6 }).map((s) => "./" + s.join("/")),
  fc.array(segment, { maxLength: 6 }).map((s) => "/" + s.join("/")),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "binary", maxLength: 40 }),
);

t.test("property: an accepted path is safe and already normalized", (t) => {
  fc.assert(fc.property(pathLike, (input) => {
    const r = normalizeWorkspacePath(input);
    if (!r.ok) return true;
    const segs = r.path.split("/");
    return !segs.includes("..") && !segs.includes(".") && !segs.includes("")
      && !r.path.startsWith("/") && !r.path.startsWith("_system/") && r.path !== "_system"
      && !r.path.includes("\\") && r.path.length <= 1024
      && normalizeWorkspacePath(r.path).ok && (normalizeWorkspacePath(r.path) as { path: string }).path === r.path;
  }), { numRuns: 2000 });
  t.pass("property held");
  t.end();
});

/* ------------------------------------------------------------------ resolveStepParameters */

const outputs: OutputLookup = (stepId, output) => {
  const table: Record<string, string> = {
    "index.outputFile": "pipelines/2026-11-21T22-40-05Z/ref.fa",
    "trim.outputFile": "pipelines/2026-11-21T22-40-05Z/s1_R1.paired.fastq.gz",
    "trim.outputFile2": "pipelines/2026-11-21T22-40-05Z/s1_R2.paired.fastq.gz",
  };
  return table[`${stepId}.${output}`];
};
const values = { reads: "data/s1_R1.fastq", sampleName: "s1", threads: "8", readGroup: "@RG\\tID:s1\\tSM:s1" };

t.test("resolveStepParameters substitutes inputs and outputs, deep", (t) => {
  const step = {
    parameters: {
      command: "mem",
      inputFile: "${trim.outputFile}",
      inputFile2: "${trim.outputFile2}",
      reference: "${index.outputFile}",
      outputFile: "${sampleName}.sam",
      threads: "${threads}",
      markShorterSplits: true,
      args: ["-R", "${readGroup}", "-K", "100000000", "--tag=${sampleName}:${index.outputFile}"],
      nested: { deeper: ["${reads}", { x: "${sampleName}" }] },
      literal: "$${HOME}/x and cost $5",
    },
  };
  const r = resolveStepParameters(step, values, outputs);
  t.same(r, {
    ok: true,
    parameters: {
      command: "mem",
      inputFile: "pipelines/2026-11-21T22-40-05Z/s1_R1.paired.fastq.gz",
      inputFile2: "pipelines/2026-11-21T22-40-05Z/s1_R2.paired.fastq.gz",
      reference: "pipelines/2026-11-21T22-40-05Z/ref.fa",
      outputFile: "s1.sam",
      threads: "8",
      markShorterSplits: true,
      args: ["-R", "@RG\\tID:s1\\tSM:s1", "-K", "100000000", "--tag=s1:pipelines/2026-11-21T22-40-05Z/ref.fa"],
      nested: { deeper: ["data/s1_R1.fastq", { x: "s1" }] },
      literal: "${HOME}/x and cost $5",
    },
  });
  t.equal(step.parameters.inputFile, "${trim.outputFile}", "the step is not modified");
  t.same(resolveStepParameters({}, values, outputs), { ok: true, parameters: {} }, "no parameters");
  t.end();
});

t.test("resolveStepParameters: a substituted value is not interpolated again", (t) => {
  const r = resolveStepParameters({ parameters: { outputFile: "${sampleName}.bam" } }, { sampleName: "${reads}" }, outputs);
  t.same(r, { ok: true, parameters: { outputFile: "${reads}.bam" } });
  t.end();
});

t.test("resolveStepParameters reports unresolved_reference", (t) => {
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ["unknown input", { inputFile: "${readz}" }, "${readz}"],
    ["unknown step", { inputFile: "${align.outputFile}" }, "${align.outputFile}"],
    ["output the step does not have", { inputFile: "${index.outputFile2}" }, "${index.outputFile2}"],
    ["in args", { args: ["-R", "${missingGroup}"] }, "${missingGroup}"],
    ["deep in an object", { nested: { a: [{ b: "x-${nope}" }] } }, "${nope}"],
    ["malformed property", { inputFile: "${index.bam}" }, "${index.bam}"],
    ["unterminated", { inputFile: "${reads" }, "${reads"],
    ["inherited property is not an input", { outputFile: "${constructor}.bam" }, "${constructor}"],
  ];
  for (const [name, parameters, raw] of cases) {
    const r = resolveStepParameters({ parameters: { command: "sort", ...parameters } }, values, outputs);
    t.equal(r.ok, false, `${name}: refused`);
    if (!r.ok) {
      t.same(codes(r.errors), ["unresolved_reference"], name);
      t.match(r.errors[0]?.message, raw, `${name}: the message names ${raw}`);
    }
  }
  const many = resolveStepParameters({ parameters: { a: "${x}", b: ["${y}", "${reads}"] } }, values, outputs);
  t.ok(!many.ok && many.errors.length === 2, "every unresolved reference is reported");
  t.end();
});
