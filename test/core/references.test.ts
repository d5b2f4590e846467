/**
 * Reference URIs (`ref://<volume>/<path>`) from parsing to run.json, as pure functions: the
 * parser and its normalizer (tables and properties), the volume check with the configured
 * names, the tool builds (not staged, read in place at /ref/…, refused where a command writes
 * beside its input), ANNOVAR's database names, validation and submission errors at the field,
 * OPERON_REF_VOLUMES, the stage-in report within the termination message's 4 KiB, and the
 * records: merged by URI or position, and written to run.json.
 */
import t from "tap";
import fc from "fast-check";
import { posix } from "node:path";
import { parseConfig } from "../../core/config.js";
import { resourceToRun, runToResource, runToStatus } from "../../core/kubernetes/pipelinerun.js";
import { buildManifest, RunManifestSchema } from "../../core/manifest.js";
import { isReferenceUri, normalizeFileValue, normalizeWorkspacePath, parseReferenceUri } from "../../core/paths.js";
import { planRun } from "../../core/plan.js";
import type { ObservedStepState, RunRecord, StepRecord } from "../../core/ports.js";
import {
  checkReference, listingText, MAX_REFERENCES_PER_STEP, mergeReferences, parseReferencesReport, referenceMountPath, referencesReport, TERMINATION_MESSAGE_MAX, type ReferenceChecksum,
} from "../../core/references.js";
import { dryBuildSteps, resolveInputs } from "../../core/spec/resolve.js";
import type { PipelineSpec } from "../../core/spec/schema.js";
import { validateSpec } from "../../core/spec/validate.js";
import { mergeStepRecords, observedForPlan } from "../../core/step-records.js";
import { buildInvocation, defaultCatalogue } from "../../core/tools/index.js";

const SHA = "a".repeat(64);
const SHA2 = "b".repeat(64);
const tool = (id: string) => defaultCatalogue.get(id)!;

/* ------------------------------------------------------------------ the parser */

t.test("parseReferenceUri: accepted and normalized", async (t) => {
  const cases: Array<[string, string, string, string]> = [
    ["ref://refs/genome.fa", "ref://refs/genome.fa", "refs", "genome.fa"],
    ["ref://grch38/bwa/GRCh38.fa", "ref://grch38/bwa/GRCh38.fa", "grch38", "bwa/GRCh38.fa"],
    ["ref://a/./x.vcf.gz", "ref://a/x.vcf.gz", "a", "x.vcf.gz"],
    ["ref://ref-2/_system/x", "ref://ref-2/_system/x", "ref-2", "_system/x"],
    ["ref://0/-x.fa", "ref://0/-x.fa", "0", "-x.fa"],
    [`ref://${"v".repeat(63)}/x`, `ref://${"v".repeat(63)}/x`, "v".repeat(63), "x"],
    ["ref://refs/génome.fa", "ref://refs/génome.fa", "refs", "génome.fa"],
  ];
  for (const [input, uri, volume, path] of cases) t.same(parseReferenceUri(input), { ok: true, uri, volume, path }, input);
});

t.test("parseReferenceUri: refused, with the reason", async (t) => {
  const cases: Array<[string, RegExp]> = [
    ["refs/genome.fa", /ref:\/\/<volume>\/<path>/],
    ["REF://refs/x", /ref:\/\/<volume>\/<path>/],
    ["ref://refs", /names no file/],
    ["ref://refs/", /names no file/],
    ["ref:///etc/passwd", /not a valid volume name/],
    ["ref://Refs/x", /not a valid volume name/],
    ["ref://-refs/x", /not a valid volume name/],
    ["ref://refs-/x", /not a valid volume name/],
    ["ref://re_fs/x", /not a valid volume name/],
    [`ref://${"v".repeat(64)}/x`, /not a valid volume name/],
    ["ref://refs/../x", /may not contain "\.\." segments/],
    ["ref://refs/a/../../x", /may not contain "\.\." segments/],
    ["ref://refs/a/./x", /may not contain "\." segments/],
    ["ref://refs//etc/passwd", /relative to its volume/],
    ["ref://refs/a//b", /empty segment/],
    ["ref://refs/a\\..\\x", /backslash/],
    ["ref://refs/%2e%2e/x", /percent-encoded/],
    ["ref://refs/a%2fb", /percent-encoded/],
    ["ref://refs/a\u0000b", /control/],
    ["ref://refs/a\nb", /control/],
    ["ref://refs/\u202egenome.fa", /control or invisible/],
    ["ref://refs/a\uff0f..\uff0fx", /look-alike/],
    [`ref://refs/${"x".repeat(251)}`, /longer than 250 bytes/],
    [`ref://refs/${"x/".repeat(600)}x`, /longer than 1024 characters/],
  ];
  for (const [input, reason] of cases) {
    const r = parseReferenceUri(input);
    t.equal(r.ok, false, JSON.stringify(input));
    if (!r.ok) t.match(r.reason, reason, JSON.stringify(input));
  }
});

t.test("properties: whatever parses stays under /ref/<volume>/, is normalized, and is never a workspace path", async (t) => {
  const unit = fc.constantFrom("a", "b", ".", "/", "\\", "%", "2", "e", "f", "\u0000", "\n", "\uff0f", "\u2024", "-", "_", " ", "é");
  const tail = fc.string({ unit, maxLength: 30 });
  const volume = fc.oneof(fc.constantFrom("refs", "r", "ref-1"), fc.string({ unit: fc.constantFrom("a", "Z", "-", "_", "0", "."), minLength: 0, maxLength: 5 }));
  fc.assert(fc.property(volume, tail, (v, rest) => {
    const r = parseReferenceUri(`ref://${v}/${rest}`);
    if (!r.ok) return;
    const mount = referenceMountPath(r.volume, r.path);
    // The mount path is already normal, and inside the volume's mount.
    t.equal(posix.normalize(mount), mount);
    t.ok(mount.startsWith(`/ref/${r.volume}/`) && mount.length > `/ref/${r.volume}/`.length);
    t.notOk(r.path.split("/").some((s) => s === "" || s === "." || s === ".."), `${JSON.stringify(rest)}: no empty or dot segment`);
    // Parsing the normalized URI gives it back (idempotent).
    t.same(parseReferenceUri(r.uri), r);
    t.equal(normalizeFileValue(`ref://${v}/${rest}`).ok && (normalizeFileValue(`ref://${v}/${rest}`) as { path: string }).path, r.uri);
  }), { numRuns: 2000 });
  // A workspace path can never be read as a reference, and the other way round.
  fc.assert(fc.property(tail, (p) => {
    const n = normalizeWorkspacePath(`ref://${p}`);
    t.notOk(n.ok && isReferenceUri(n.path), JSON.stringify(p));
    const w = normalizeWorkspacePath(p);
    if (w.ok) t.notOk(isReferenceUri(w.path));
  }), { numRuns: 1000 });
});

t.test("checkReference: the configured volumes are named in the message", async (t) => {
  t.equal(checkReference("ref://refs/genome.fa", ["refs"]), undefined);
  t.equal(checkReference("ref://refs/genome.fa", undefined), undefined, "volumes not known here: the form only");
  t.match(checkReference("ref://nope/genome.fa", ["refs", "annovar"]), /reference volume "nope" is not configured; configured volumes: annovar, refs/);
  t.match(checkReference("ref://nope/genome.fa", []), /no reference volumes are configured \(OPERON_REF_VOLUMES .*steps\.referenceVolumes/);
  t.match(checkReference("ref://refs/../x", ["refs"]), /"\.\." segments/);
});

/* ------------------------------------------------------------------ tools */

t.test("a reference is read in place: argv names /ref/<volume>/<path>, nothing is staged", async (t) => {
  const built = buildInvocation(tool("bwa"), { command: "mem", reference: "ref://refs/genome.fa", inputFile: "data/r1.fq", inputFile2: "data/r2.fq" }, { runtime: "local", referenceVolumes: ["refs"] });
  t.ok(built.ok, JSON.stringify(built));
  if (!built.ok) return;
  const inv = built.invocation;
  t.same(inv.argv, ["bwa", "mem", "/ref/refs/genome.fa", "in/1/r1.fq", "in/2/r2.fq"]);
  t.same(inv.inputs.map((i) => i.param), ["inputFile", "inputFile2"], "only the workspace files are staged");
  t.same(inv.references, [{ param: "reference", uri: "ref://refs/genome.fa", path: "/ref/refs/genome.fa" }]);

  const merged = buildInvocation(tool("samtools"), { command: "merge", inputFiles: ["a.bam", "ref://refs/./b.bam"], outputFile: "m.bam" }, { runtime: "container", referenceVolumes: ["refs"] });
  t.ok(merged.ok && merged.invocation.argv.includes("/ref/refs/b.bam"), "a list element too, normalized");
  t.same(merged.ok && merged.invocation.references, [{ param: "inputFiles/1", uri: "ref://refs/b.bam", path: "/ref/refs/b.bam" }]);

  const gatk = buildInvocation(tool("gatk"), { command: "BaseRecalibrator", inputFile: "s.bam", reference: "ref://grch38/GRCh38.fa", knownSites: "ref://grch38/dbsnp.vcf.gz" }, { runtime: "local", referenceVolumes: ["grch38"] });
  t.same(gatk.ok && gatk.invocation.references?.map((r) => r.param), ["reference", "knownSites"]);
  t.notOk(buildInvocation(tool("samtools"), { command: "view", inputFile: "s.bam" }, { runtime: "local" }).ok && false, "no reference: no references field");
  const plain = buildInvocation(tool("samtools"), { command: "view", inputFile: "s.bam" }, { runtime: "local" });
  t.equal(plain.ok && plain.invocation.references, undefined);
});

t.test("refused at the field: an unknown volume (naming the configured ones), a bad path, an index command, too many", async (t) => {
  const unknown = buildInvocation(tool("bwa"), { command: "mem", reference: "ref://nope/genome.fa", inputFile: "r1.fq" }, { runtime: "local", referenceVolumes: ["refs", "grch38"] });
  t.match(unknown, { ok: false, errors: [{ code: "unknown_reference_volume", path: "/reference", message: /reference volume "nope" is not configured; configured volumes: grch38, refs/ }] });
  const bad = buildInvocation(tool("bwa"), { command: "mem", reference: "ref://refs/../etc/passwd", inputFile: "r1.fq" }, { runtime: "local", referenceVolumes: ["refs"] });
  t.match(bad, { ok: false, errors: [{ path: "/reference", message: /"\.\." segments/ }] });
  const abs = buildInvocation(tool("bwa"), { command: "mem", reference: "/etc/passwd", inputFile: "r1.fq" }, { runtime: "local", referenceVolumes: ["refs"] });
  t.match(abs, { ok: false, errors: [{ path: "/reference", message: /relative to the workspace/ }] });
  for (const [id, params] of [
    ["bwa", { command: "index", inputFile: "ref://refs/genome.fa" }],
    ["bcftools", { command: "index", inputFile: "ref://refs/c.vcf.gz" }],
    ["samtools", { command: "index", inputFile: "ref://refs/s.bam" }],
    ["tabix", { command: "index", inputFile: "ref://refs/x.vcf.gz" }],
  ] as const) {
    const r = buildInvocation(tool(id), params, { runtime: "local", referenceVolumes: ["refs"] });
    t.match(r, { ok: false, errors: [{ code: "invalid_reference", path: "/inputFile", message: /read-only reference volume.*writes its output beside its input/ }] }, `${id} ${params.command}`);
  }
  const many = Array.from({ length: MAX_REFERENCES_PER_STEP + 1 }, (_, i) => `ref://refs/${i}.bam`);
  t.match(buildInvocation(tool("samtools"), { command: "merge", inputFiles: many }, { runtime: "local", referenceVolumes: ["refs"] }),
    { ok: false, errors: [{ code: "invalid_reference", message: new RegExp(`at most ${MAX_REFERENCES_PER_STEP} reference files`) }] });
  t.ok(buildInvocation(tool("samtools"), { command: "merge", inputFiles: many.slice(1) }, { runtime: "local", referenceVolumes: ["refs"] }).ok, `${MAX_REFERENCES_PER_STEP} are fine`);
});

t.test("ANNOVAR's database: a bare name is on the annovar volume; ref:// names another", async (t) => {
  const base = { command: "table_annovar", inputFile: "x.vcf", protocol: "refGene", operation: "g" };
  const bare = buildInvocation(tool("annovar"), { ...base, database: "humandb" }, { runtime: "local", referenceVolumes: ["annovar"] });
  t.ok(bare.ok && bare.invocation.argv.includes("/ref/annovar/humandb"), JSON.stringify(bare));
  t.same(bare.ok && bare.invocation.references, [{ param: "database", uri: "ref://annovar/humandb", path: "/ref/annovar/humandb" }]);
  const other = buildInvocation(tool("annovar"), { ...base, database: "ref://dbs/hg38/humandb" }, { runtime: "local", referenceVolumes: ["dbs"] });
  t.ok(other.ok && other.invocation.argv.includes("/ref/dbs/hg38/humandb"));
  t.match(buildInvocation(tool("annovar"), { ...base, database: "humandb" }, { runtime: "local", referenceVolumes: [] }),
    { ok: false, errors: [{ code: "unknown_reference_volume", path: "/database", message: /reference volume "annovar" is not configured/ }] }, "the bare form needs the annovar volume");
  for (const database of ["../etc", "/data/annovar/humandb", "a/b", "ref://dbs/../x", ".hidden"]) {
    t.notOk(tool("annovar").inputSchema.safeParse({ ...base, database }).success, `schema refuses ${database}`);
    t.notOk(buildInvocation(tool("annovar"), { ...base, database }, { runtime: "local", referenceVolumes: ["annovar", "dbs"] }).ok, `build refuses ${database}`);
  }
});

/* ------------------------------------------------------------------ validation and submission */

const alignSpec = (reference: string, extra: Partial<PipelineSpec> = {}): PipelineSpec => ({
  inputs: [{ name: "reads", type: "file" }, { name: "reference", type: "file", default: "ref://refs/genome.fa" }],
  steps: [
    { stepId: "sort", toolName: "samtools", parameters: { command: "sort", inputFile: "${reads}" } },
    { stepId: "align", toolName: "bwa", parameters: { command: "mem", reference, inputFile: "${reads}" } },
  ],
  ...extra,
});

t.test("validateSpec: a literal reference names a configured volume (when they are known)", async (t) => {
  const ok = validateSpec(alignSpec("ref://refs/genome.fa"), { tools: defaultCatalogue, referenceVolumes: ["refs"] });
  t.same(ok.errors, []);
  const unknown = validateSpec(alignSpec("ref://nope/genome.fa"), { tools: defaultCatalogue, referenceVolumes: ["refs"] });
  t.match(unknown.errors, [{ code: "unknown_reference_volume", path: "/steps/1/parameters/reference", message: /"nope" is not configured; configured volumes: refs/ }]);
  t.same(validateSpec(alignSpec("ref://nope/genome.fa"), { tools: defaultCatalogue }).errors, [], "offline (volumes not known): the form only");
  const bad = validateSpec(alignSpec("ref://refs/../genome.fa"), { tools: defaultCatalogue });
  t.match(bad.errors, [{ path: "/steps/1/parameters/reference", message: /"\.\." segments/ }]);
  const index = validateSpec({ steps: [{ stepId: "i", toolName: "bwa", parameters: { command: "index", inputFile: "ref://refs/genome.fa" } }] }, { tools: defaultCatalogue });
  t.match(index.errors, [{ code: "invalid_reference", path: "/steps/0/parameters/inputFile" }], "an index command on a reference");
  const dflt = validateSpec(alignSpec("${reference}", { inputs: [{ name: "reads", type: "file" }, { name: "reference", type: "file", default: "ref://refs/../x" }] }), { tools: defaultCatalogue });
  t.match(dflt.errors, [{ code: "invalid_default", path: "/inputs/1/default", message: /"\.\." segments/ }], "a file input's default may be a reference, checked");
});

t.test("resolveInputs and dryBuildSteps: a run parameter names a configured volume, refused at /input/<name>", async (t) => {
  const spec = alignSpec("${reference}");
  const ok = resolveInputs(spec, { reads: "data/r1.fq", reference: "ref://refs/./genome.fa" }, ["refs"]);
  t.same(ok, { ok: true, values: { reads: "data/r1.fq", reference: "ref://refs/genome.fa" } }, "normalized");
  t.same(resolveInputs(spec, { reads: "data/r1.fq" }, ["refs"]), { ok: true, values: { reads: "data/r1.fq", reference: "ref://refs/genome.fa" } }, "the default");
  t.match(resolveInputs(spec, { reads: "data/r1.fq", reference: "ref://nope/genome.fa" }, ["refs"]),
    { ok: false, errors: [{ code: "unknown_reference_volume", path: "/input/reference", message: /input "reference": ref:\/\/nope\/genome.fa: reference volume "nope" is not configured; configured volumes: refs/ }] });
  t.match(resolveInputs(spec, { reads: "ref://refs/../../etc/passwd" }, ["refs"]), { ok: false, errors: [{ code: "invalid_input_value", path: "/input/reads" }] });
  // The volume of a reference reaching a step through a string input is checked when the steps are built.
  const viaString: PipelineSpec = { inputs: [{ name: "ref", type: "string" }], steps: [{ stepId: "align", toolName: "bwa", parameters: { command: "mem", reference: "${ref}", inputFile: "r1.fq" } }] };
  t.match(dryBuildSteps(viaString, { ref: "ref://nope/x.fa" }, defaultCatalogue, ["refs"]), [{ code: "unknown_reference_volume", path: "/steps/0/parameters/reference" }]);
  t.same(dryBuildSteps(viaString, { ref: "ref://refs/x.fa" }, defaultCatalogue, ["refs"]), []);
});

t.test("OPERON_REF_VOLUMES: a JSON object of DNS-label names and absolute directories", async (t) => {
  const ok = parseConfig({ OPERON_REF_VOLUMES: '{"refs": "/srv/ref", "grch38": "/mnt/g"}' });
  t.same(ok.ok && ok.config.OPERON_REF_VOLUMES, { refs: "/srv/ref", grch38: "/mnt/g" });
  t.equal(parseConfig({}).ok && (parseConfig({}) as { config: { OPERON_REF_VOLUMES?: unknown } }).config.OPERON_REF_VOLUMES, undefined, "unset: none");
  for (const [value, why] of [
    ["not json", /must be a JSON object/],
    ['["/srv/ref"]', /must be a JSON object/],
    ['{"Refs": "/srv"}', /volume "Refs" is not a valid volume name/],
    ['{"refs": "srv/ref"}', /volume "refs" must name an absolute directory/],
    ['{"refs": 3}', /must name an absolute directory/],
  ] as const) {
    const r = parseConfig({ OPERON_REF_VOLUMES: value });
    t.match(r, { ok: false, message: /^invalid configuration: OPERON_REF_VOLUMES: / }, value);
    if (!r.ok) t.match(r.message, why, value);
  }
});

/* ------------------------------------------------------------------ the stage-in report */

t.test("referencesReport: URIs when they fit, by position when not, always within 4 KiB for the most a step names", async (t) => {
  const refs: ReferenceChecksum[] = [{ uri: "ref://refs/genome.fa", sha256: SHA, size: 12 }, { uri: "ref://annovar/humandb", sha256: SHA2, size: 7, kind: "directory" }];
  const text = referencesReport(refs);
  t.same(JSON.parse(text), { references: refs });
  t.same(parseReferencesReport(text), refs, "round trip");
  const long = Array.from({ length: MAX_REFERENCES_PER_STEP }, (_, i) => ({ uri: `ref://${"v".repeat(63)}/${"p".repeat(1000)}${i}`, sha256: SHA, size: Number.MAX_SAFE_INTEGER, kind: "directory" as const }));
  const short = referencesReport(long);
  t.ok(Buffer.byteLength(short) <= TERMINATION_MESSAGE_MAX, `${Buffer.byteLength(short)} bytes`);
  t.same(parseReferencesReport(short), long.map(({ uri: _uri, ...r }) => r), "without URIs, in order");
  for (const bad of [undefined, "", "stage-in: boom", "{", '{"references":[{"sha256":"x","size":1}]}', '{"references":[{"sha256":"' + SHA + '","size":-1}]}', '{"outputs":[]}']) {
    t.equal(parseReferencesReport(bad), undefined, String(bad));
  }
  t.same(parseReferencesReport(`{"references":[{"uri":"ref://refs/../x","sha256":"${SHA}","size":1}]}`), [{ sha256: SHA, size: 1 }], "a malformed URI is dropped, not trusted");
});

t.test("mergeReferences: by URI, else by position; a step started now has no checksum yet", async (t) => {
  const planned = ["ref://refs/a.fa", "ref://refs/b.vcf.gz"];
  t.same(mergeReferences(planned, undefined), [{ uri: planned[0] }, { uri: planned[1] }]);
  t.same(mergeReferences(planned, [{ uri: planned[1], sha256: SHA2, size: 2 }, { uri: planned[0], sha256: SHA, size: 1 }]),
    [{ uri: planned[0], sha256: SHA, size: 1 }, { uri: planned[1], sha256: SHA2, size: 2 }], "by URI");
  t.same(mergeReferences(planned, [{ sha256: SHA, size: 1 }, { sha256: SHA2, size: 2, kind: "directory" }]),
    [{ uri: planned[0], sha256: SHA, size: 1 }, { uri: planned[1], sha256: SHA2, size: 2, kind: "directory" }], "by position (the short report)");
  t.same(mergeReferences([], [{ sha256: SHA, size: 1 }]), undefined, "none planned: none");
  t.same(mergeReferences(undefined, [{ uri: planned[0], sha256: SHA, size: 1 }, { sha256: SHA2, size: 2 }]), [{ uri: planned[0], sha256: SHA, size: 1 }], "no plan: only what names its URI");
});

t.test("listingText: sorted lines of path and size", async (t) => {
  t.equal(listingText([{ path: "b/x.txt", size: 2 }, { path: "a.txt", size: 10 }, { path: "b/a.txt", size: 0 }]), "a.txt\t10\nb/a.txt\t0\nb/x.txt\t2\n");
  t.equal(listingText([]), "");
});

/* ------------------------------------------------------------------ records and run.json */

const rec = (stepId: string, over: Partial<StepRecord> = {}): StepRecord => ({
  stepId, toolName: "bwa", status: "pending", startedAt: null, completedAt: null, exitCode: null, error: null, attempt: 0, outputs: [], ...over,
});

t.test("mergeStepRecords: the URIs when the step starts, the checksums once observed, kept when the executor forgets the step", async (t) => {
  const steps = [{ stepId: "a" }];
  const uri = "ref://refs/genome.fa";
  const plan = (records: StepRecord[], seen: Map<string, ObservedStepState>) =>
    planRun({ steps, observed: observedForPlan(records, seen), cancelRequested: false, now: 0, admission: { admitted: new Set(["a"]) } });
  const running: ObservedStepState = { phase: "running", attempt: 1, startedAt: 1 };
  const started = mergeStepRecords({ records: [rec("a")], plan: plan([rec("a")], new Map()), fresh: new Map([["a", running]]), seen: new Map(), started: new Map([["a", { command: "mem", argv: ["bwa"], references: [uri] }]]) });
  t.same(started[0]?.references, [{ uri }], "started: the URI, no checksum yet");
  const seen = new Map<string, ObservedStepState>([["a", { ...running, references: [{ uri, sha256: SHA, size: 9 }] }]]);
  const read = mergeStepRecords({ records: started, plan: plan(started, seen), fresh: seen, seen, started: new Map() });
  t.same(read[0]?.references, [{ uri, sha256: SHA, size: 9 }], "observed: with its checksum");
  const gone = mergeStepRecords({ records: read, plan: plan(read, new Map()), fresh: new Map(), seen: new Map(), started: new Map() });
  t.same(gone[0]?.references, [{ uri, sha256: SHA, size: 9 }], "the executor forgot the step: the record stands");
  const again = mergeStepRecords({ records: read, plan: plan(read, new Map()), fresh: new Map([["a", { ...running, attempt: 2 }]]), seen: new Map(), started: new Map([["a", { command: "mem", argv: ["bwa"], references: [uri] }]]) });
  t.same(again[0]?.references, [{ uri }], "a new attempt: the earlier attempt's checksum does not stand for it");
  const none = mergeStepRecords({ records: [rec("a")], plan: plan([rec("a")], new Map()), fresh: new Map([["a", running]]), seen: new Map(), started: new Map([["a", { command: "view", argv: ["samtools"], references: [] }]]) });
  t.notOk("references" in (none[0] ?? {}), "a step without references records none");
});

t.test("run.json: each step's references with sha256 and size, schema-valid", async (t) => {
  const run: RunRecord = {
    id: "run-1", organization: "acme", workspace: "ws1", pipelineId: "p", name: "p", source: { kind: "inline" },
    spec: alignSpec("${reference}"), parameters: { reads: "r1.fq", reference: "ref://refs/genome.fa" }, inputChecksums: {},
    outputFolder: "pipelines/x", createdAt: "2026-11-24T10:00:00.000Z", startedAt: "2026-11-24T10:00:00.000Z", completedAt: null, status: "running", progressPct: 0,
    error: null, cancelRequested: false, submittedBy: "k",
    steps: [rec("sort"), rec("align", { status: "running", attempt: 1, references: [{ uri: "ref://refs/genome.fa", sha256: SHA, size: 12 }, { uri: "ref://annovar/humandb", sha256: SHA2, size: 3, kind: "directory" }] })],
  };
  const m = buildManifest(run, Date.parse("2026-11-24T10:00:01.000Z"));
  t.ok(RunManifestSchema.safeParse(m).success, JSON.stringify(RunManifestSchema.safeParse(m).error?.issues));
  t.same(m.steps[1]?.references, [{ uri: "ref://refs/genome.fa", sha256: SHA, size: 12 }, { uri: "ref://annovar/humandb", sha256: SHA2, size: 3, kind: "directory" }]);
  t.notOk("references" in (m.steps[0] ?? {}), "a step without references has no field");
  t.notOk(RunManifestSchema.safeParse({ ...m, steps: [{ ...m.steps[1], references: [{ uri: "refs/genome.fa" }] }] }).success, "a reference in run.json is a ref:// URI");
  // Cluster mode keeps step records in the PipelineRun's status: the references survive it.
  const res = runToResource(run, "ns1");
  const back = resourceToRun({ ...res, status: runToStatus(run, undefined, "2026-11-24T10:00:01.000Z") });
  t.same(back.steps[1]?.references, run.steps[1]?.references, "through the PipelineRun status");
  t.notOk("references" in (back.steps[0] ?? {}));
});
