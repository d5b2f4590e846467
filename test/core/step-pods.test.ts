/**
 * The step-pod configuration (core/kubernetes/step-pods.ts) as table tests: parsing (every
 * error names its JSON path), what a step's pod asks for (catalogue defaults, the
 * configuration's, a tool's, the step's own, maxResources), the thread count the tool gets in
 * both directions, image mirrors and per-tool images, and the catalogue's `threaded` marks
 * checked against what each command's argv really does with `threads`.
 */
import t from "tap";
import { DEFAULT_TOOL_RESOURCES, mirrorImage, parseStepPodConfig, stepCompute, stepPodIssues, toolImage, type StepPodConfig } from "../../core/kubernetes/step-pods.js";
import { compareQuantities, quantityValue } from "../../core/quantity.js";
import type { StepResources } from "../../core/spec/schema.js";
import { buildInvocation, defaultCatalogue, type ToolDefinition } from "../../core/tools/index.js";

const tool = (id: string): ToolDefinition => {
  const found = defaultCatalogue.get(id);
  if (!found) throw new Error(`no tool ${id}`);
  return found;
};

t.test("quantities", async (t) => {
  const cases: Array<[string, number | undefined]> = [
    ["500m", 0.5], ["4", 4], ["2.5", 2.5], [".5", 0.5], ["16Gi", 16 * 2 ** 30], ["1Mi", 2 ** 20], ["10G", 1e10], ["1k", 1000], ["1e3", 1000], ["1E3", 1000], ["2E", 2e18],
    ["", undefined], ["-1", undefined], ["16GB", undefined], ["16 Gi", undefined], ["gi", undefined], ["1.2.3", undefined], ["0x10", undefined],
  ];
  for (const [q, v] of cases) t.equal(quantityValue(q), v, JSON.stringify(q));
  t.ok(compareQuantities("1Gi", "1024Mi") === 0 && compareQuantities("1500m", "1") > 0 && compareQuantities("128Gi", "129Gi") < 0);
});

t.test("parsing the configuration", async (t) => {
  const full = {
    resources: { requests: { cpu: "1", memory: "2Gi", "ephemeral-storage": "10Gi" }, limits: { memory: "8Gi" } },
    tools: { bwa: { resources: { requests: { cpu: "16" }, limits: { memory: "64Gi" } }, image: "registry.example.org/bwa:0.7.18" }, annovar: { image: "registry.lab/annovar:2020-06-08" } },
    maxResources: { cpu: "32", memory: "128Gi", ephemeralStorage: "500Gi" },
    imageRegistry: "harbor.lab/quay-proxy",
    nodeSelector: { "node.kubernetes.io/instance-type": "m6i.8xlarge" },
    tolerations: [{ key: "dedicated", operator: "Equal", value: "genomics", effect: "NoSchedule" }, { operator: "Exists" }],
    affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: {} } },
    priorityClassName: "", serviceAccountName: "operon-steps", imagePullSecrets: [{ name: "regcred" }], runtimeClassName: "",
    referenceVolumes: [{ name: "grch38", volume: { persistentVolumeClaim: { claimName: "ref-grch38" } } }, { name: "annovar", volume: { hostPath: { path: "/srv/annovar" } } }],
  };
  const r = parseStepPodConfig(JSON.stringify(full));
  t.same(r, { ok: true, config: full }, "the contract's example, whole");
  for (const empty of ["", "  \n", "null", "{}"]) t.same(parseStepPodConfig(empty), { ok: true, config: {} }, `${JSON.stringify(empty)} is the empty configuration`);

  const bad: Array<[unknown, string]> = [
    [{ tools: { bwa: { resources: { requests: { cpu: "x" } } } } }, "tools.bwa.resources.requests.cpu: must be a Kubernetes quantity"],
    [{ tools: { bwaa: {} } }, "tools.bwaa: unknown key: expected a tool of the catalogue (annovar, "],
    [{ tools: { bwa: { imag: "x" } } }, "tools.bwa.imag: unknown key"],
    [{ tools: { bwa: { image: "Not An Image" } } }, "tools.bwa.image: must be an image reference"],
    [{ resources: { requests: { gpu: "1" } } }, "resources.requests.gpu: unknown key"],
    [{ resources: { limits: { memory: 8 } } }, "resources.limits.memory: "],
    [{ maxResources: { memory: "lots" } }, "maxResources.memory: must be a Kubernetes quantity"],
    [{ maxResources: { "ephemeral-storage": "1Gi" } }, "maxResources.ephemeral-storage: unknown key"],
    [{ imageRegistry: "https://harbor.lab" }, "imageRegistry: must be a registry host"],
    [{ nodeSelector: { pool: 3 } }, "nodeSelector.pool: "],
    [{ tolerations: [{ key: "a", operator: "Sometimes" }] }, "tolerations[0].operator: "],
    [{ affinity: { nodeAfinity: {} } }, "affinity.nodeAfinity: unknown key"],
    [{ priorityClassName: "High Priority" }, "priorityClassName: must be a Kubernetes object name"],
    [{ imagePullSecrets: [{ name: "" }] }, "imagePullSecrets[0].name: must name a Secret"],
    [{ imagePullSecrets: ["regcred"] }, "imagePullSecrets[0]: "],
    [{ referenceVolumes: [{ name: "GRCh38", volume: { nfs: { server: "x", path: "/" } } }] }, "referenceVolumes[0].name: must be a DNS label"],
    [{ referenceVolumes: [{ name: "a".repeat(60), volume: { nfs: {} } }] }, "referenceVolumes[0].name: must be at most 59 characters"],
    [{ referenceVolumes: [{ name: "g", volume: {} }] }, "referenceVolumes[0].volume: must be exactly one Kubernetes volume source"],
    [{ referenceVolumes: [{ name: "g", volume: { nfs: {}, hostPath: {} } }] }, "referenceVolumes[0].volume: must be exactly one"],
    [{ referenceVolumes: [{ name: "g", volume: { persistentVolumeClam: { claimName: "x" } } }] }, "referenceVolumes[0].volume.persistentVolumeClam: unknown key: expected one Kubernetes volume source"],
    [{ referenceVolumes: [{ name: "g", volume: { nfs: {} } }, { name: "g", volume: { nfs: {} } }] }, "referenceVolumes[1].name: \"g\" is used by an earlier reference volume"],
    [{ referenceVolumes: [{ name: "g" }] }, "referenceVolumes[0].volume: "],
    [{ steps: {} }, "steps: unknown key"],
    [[], "must be a JSON object"],
    ["text", "must be a JSON object"],
  ];
  for (const [doc, message] of bad) {
    const res = parseStepPodConfig(JSON.stringify(doc));
    t.equal(res.ok, false, JSON.stringify(doc));
    if (!res.ok) t.ok(res.message.startsWith(message), `${JSON.stringify(doc)} → ${res.message}`);
  }
  const broken = parseStepPodConfig("{\"resources\": ");
  t.match(broken, { ok: false, message: /^not valid JSON: / });
});

/** The tool container's resources for `params` of `toolId`, or the refusal. */
function resolve(toolId: string, params: Record<string, unknown>, own?: StepResources, config: StepPodConfig = {}) {
  return stepCompute({ tool: tool(toolId), params, resources: own, config });
}

t.test("what a step's pod asks for", async (t) => {
  const cases: Array<{ name: string; tool: string; params: Record<string, unknown>; own?: StepResources; config?: StepPodConfig; requests: Record<string, string>; limits: Record<string, string>; threads?: number }> = [
    { name: "bwa mem: several CPUs and GiB, threads from the CPUs", tool: "bwa", params: { command: "mem" },
      requests: { cpu: "4", memory: "10Gi", "ephemeral-storage": "50Gi" }, limits: { memory: "16Gi" }, threads: 4 },
    { name: "samtools index needs little", tool: "samtools", params: { command: "index" },
      requests: { cpu: "250m", memory: "256Mi", "ephemeral-storage": "10Gi" }, limits: { memory: "1Gi" } },
    { name: "samtools flagstat needs little", tool: "samtools", params: { command: "flagstat" },
      requests: { cpu: "250m", memory: "256Mi", "ephemeral-storage": "10Gi" }, limits: { memory: "1Gi" } },
    { name: "GATK HaplotypeCaller: memory for the JVM, two pair-HMM threads", tool: "gatk", params: { command: "HaplotypeCaller" },
      requests: { cpu: "2", memory: "8Gi", "ephemeral-storage": "50Gi" }, limits: { memory: "8Gi" }, threads: 2 },
    { name: "Picard MarkDuplicates: CPUs (not a thread option) and GiB", tool: "picard", params: { command: "MarkDuplicates" },
      requests: { cpu: "2", memory: "8Gi", "ephemeral-storage": "50Gi" }, limits: { memory: "12Gi" } },
    { name: "a tool without defaults of its own: the built-in ones", tool: "tabix", params: { command: "query" },
      requests: DEFAULT_TOOL_RESOURCES.requests as Record<string, string>, limits: DEFAULT_TOOL_RESOURCES.limits as Record<string, string> },
    { name: "the configuration's resources override the catalogue's, for every tool", tool: "bwa", params: { command: "mem" },
      config: { resources: { requests: { cpu: "2", memory: "3Gi" }, limits: { memory: "6Gi" } } },
      requests: { cpu: "2", memory: "3Gi", "ephemeral-storage": "50Gi" }, limits: { memory: "6Gi" }, threads: 2 },
    { name: "a tool's own wins over the configuration's", tool: "bwa", params: { command: "mem" },
      config: { resources: { requests: { cpu: "2" } }, tools: { bwa: { resources: { requests: { cpu: "16" }, limits: { memory: "64Gi" } } } } },
      requests: { cpu: "16", memory: "10Gi", "ephemeral-storage": "50Gi" }, limits: { memory: "64Gi" }, threads: 16 },
    { name: "the step's own win over both: memory and storage as request and limit, CPU as a request", tool: "bwa", params: { command: "mem" },
      own: { cpu: "12", memory: "24Gi", ephemeralStorage: "300Gi" }, config: { tools: { bwa: { resources: { requests: { cpu: "16" } } } } },
      requests: { cpu: "12", memory: "24Gi", "ephemeral-storage": "300Gi" }, limits: { memory: "24Gi", "ephemeral-storage": "300Gi" }, threads: 12 },
    { name: "a step's CPU above a configured CPU limit raises it", tool: "samtools", params: { command: "view" }, own: { cpu: "6" },
      config: { resources: { limits: { cpu: "2" } } }, requests: { cpu: "6", memory: "1Gi", "ephemeral-storage": "10Gi" }, limits: { memory: "4Gi", cpu: "6" }, threads: 6 },
    { name: "a default request above a configured limit is lowered to it", tool: "bwa", params: { command: "mem" },
      config: { resources: { limits: { memory: "8Gi" } } }, requests: { cpu: "4", memory: "8Gi", "ephemeral-storage": "50Gi" }, limits: { memory: "8Gi" }, threads: 4 },
    { name: "defaults above maxResources are lowered to it", tool: "bwa", params: { command: "mem" },
      config: { maxResources: { cpu: "2", memory: "12Gi", ephemeralStorage: "20Gi" } },
      requests: { cpu: "2", memory: "10Gi", "ephemeral-storage": "20Gi" }, limits: { memory: "12Gi" }, threads: 2 },
    { name: "a step at exactly the maximum is fine", tool: "bwa", params: { command: "mem" }, own: { memory: "128Gi" }, config: { maxResources: { memory: "128Gi" } },
      requests: { cpu: "4", memory: "128Gi", "ephemeral-storage": "50Gi" }, limits: { memory: "128Gi" }, threads: 4 },
    // threads ↔ CPU
    { name: "threads set, no CPU: CPU request = threads", tool: "bwa", params: { command: "mem", threads: 6 },
      requests: { cpu: "6", memory: "10Gi", "ephemeral-storage": "50Gi" }, limits: { memory: "16Gi" } },
    { name: "threads from a resolved reference (a string of digits)", tool: "minimap2", params: { command: "align", threads: "8" },
      requests: { cpu: "8", memory: "10Gi", "ephemeral-storage": "50Gi" }, limits: { memory: "16Gi" } },
    { name: "threads above maxResources.cpu: the CPU request stops at the maximum", tool: "bwa", params: { command: "mem", threads: 64 }, config: { maxResources: { cpu: "32" } },
      requests: { cpu: "32", memory: "10Gi", "ephemeral-storage": "50Gi" }, limits: { memory: "16Gi" } },
    { name: "CPU set, no threads: threads = floor(cpu)", tool: "bowtie2", params: { command: "align" }, own: { cpu: "2500m" },
      requests: { cpu: "2500m", memory: "6Gi", "ephemeral-storage": "50Gi" }, limits: { memory: "8Gi" }, threads: 2 },
    { name: "CPU below one: one thread", tool: "samtools", params: { command: "sort" }, own: { cpu: "500m" },
      requests: { cpu: "500m", memory: "4Gi", "ephemeral-storage": "50Gi" }, limits: { memory: "8Gi" }, threads: 1 },
    { name: "both set: each as given", tool: "bwa", params: { command: "mem", threads: 3 }, own: { cpu: "8" },
      requests: { cpu: "8", memory: "10Gi", "ephemeral-storage": "50Gi" }, limits: { memory: "16Gi" } },
    { name: "a default of one CPU adds no threads", tool: "samtools", params: { command: "view" },
      requests: { cpu: "1", memory: "1Gi", "ephemeral-storage": "10Gi" }, limits: { memory: "4Gi" } },
    { name: "a command without a thread count: CPU only", tool: "picard", params: { command: "SortSam", threads: 8 }, own: { cpu: "4" },
      requests: { cpu: "4", memory: "8Gi", "ephemeral-storage": "50Gi" }, limits: { memory: "12Gi" } },
    { name: "a command without a thread count ignores threads for the CPU", tool: "bedtools", params: { command: "genomecov", threads: 8 },
      requests: { cpu: "1", memory: "2Gi", "ephemeral-storage": "10Gi" }, limits: { memory: "8Gi" } },
  ];
  for (const c of cases) {
    const r = resolve(c.tool, c.params, c.own, c.config);
    if (!r.ok) { t.fail(`${c.name}: refused: ${r.message}`); continue; }
    t.same(r.resources, { requests: c.requests, limits: c.limits }, `${c.name}: resources`);
    t.equal(r.threads, c.threads, `${c.name}: threads added`);
    t.same(r.params, c.threads === undefined ? c.params : { ...c.params, threads: c.threads }, `${c.name}: the parameters the argv is built from`);
  }
});

t.test("the argv and the pod agree", async (t) => {
  for (const [own, threads] of [[{ cpu: "6" }, "6"], [undefined, "4"], [{ cpu: "1500m" }, "1"]] as const) {
    const r = resolve("bwa", { command: "mem", inputFile: "r1.fq", reference: "ref.fa" }, own);
    if (!r.ok) { t.fail(r.message); continue; }
    const built = buildInvocation(tool("bwa"), r.params, { runtime: "container" });
    if (!built.ok) { t.fail(JSON.stringify(built.errors)); continue; }
    const argv = built.invocation.argv;
    t.equal(argv[argv.indexOf("-t") + 1], threads, `bwa mem -t ${threads} for ${JSON.stringify(own)}`);
    t.equal(r.resources?.requests.cpu, own?.cpu ?? "4");
  }
});

t.test("maxResources refuses a step that asks for more", async (t) => {
  const config: StepPodConfig = { maxResources: { cpu: "32", memory: "128Gi", ephemeralStorage: "500Gi" } };
  const r = resolve("bwa", { command: "mem" }, { memory: "256Gi", cpu: "64" }, config);
  t.same(r, { ok: false, message: "resources.cpu \"64\" is more than a step may ask for here (at most \"32\", maxResources.cpu); resources.memory \"256Gi\" is more than a step may ask for here (at most \"128Gi\", maxResources.memory)" });
  t.match(resolve("bwa", { command: "mem" }, { ephemeralStorage: "1Ti" }, config), { ok: false, message: /^resources\.ephemeralStorage "1Ti" .*at most "500Gi"/ });
  t.match(resolve("bwa", { command: "mem" }, { memory: "129Gi" }, {}), { ok: true }, "no maximum: anything goes");

  const spec = { steps: [
    { stepId: "align", toolName: "bwa", resources: { memory: "64Gi" } },
    { stepId: "call", toolName: "gatk", resources: { memory: "256Gi", cpu: "8" } },
    { stepId: "annotate", toolName: "annovar" },
  ] };
  t.same(stepPodIssues(spec, config), [
    { code: "resources_above_maximum", path: "/steps/1/resources/memory", message: "steps[1].resources.memory: \"256Gi\" is more than a step may ask for here (at most \"128Gi\", maxResources.memory)" },
    { code: "tool_image_missing", path: "/steps/2/toolName", message: "steps[2].toolName: annovar has no image: its licence forbids a public one, so set steps.tools.annovar.image in the Helm chart's values (tools.annovar.image in the file OPERON_STEP_POD_CONFIG names)" },
  ]);
  t.same(stepPodIssues(spec, { ...config, tools: { annovar: { image: "registry.lab/annovar:2020-06-08" } }, maxResources: { memory: "256Gi" } }), [], "within the maximum, ANNOVAR's image set");
});

t.test("images: the mirror, a tool's own, ANNOVAR's", async (t) => {
  const mirror = "harbor.lab/quay-proxy";
  const cases: Array<[string, string]> = [
    ["quay.io/biocontainers/samtools:1.21--h50ea8bc_0", "harbor.lab/quay-proxy/biocontainers/samtools:1.21--h50ea8bc_0"],
    ["broadinstitute/gatk:4.6.1.0", "harbor.lab/quay-proxy/broadinstitute/gatk:4.6.1.0"],
    ["ubuntu:24.04", "harbor.lab/quay-proxy/library/ubuntu:24.04"],
    ["docker.io/ubuntu:24.04", "harbor.lab/quay-proxy/library/ubuntu:24.04"],
    ["docker.io/library/ubuntu:24.04", "harbor.lab/quay-proxy/library/ubuntu:24.04"],
    ["localhost/tools/bwa:1", "harbor.lab/quay-proxy/tools/bwa:1"],
    ["localhost:5000/bwa:1", "harbor.lab/quay-proxy/bwa:1"],
    [`quay.io/biocontainers/bwa@sha256:${"ab".repeat(32)}`, `harbor.lab/quay-proxy/biocontainers/bwa@sha256:${"ab".repeat(32)}`],
    [`quay.io/biocontainers/bwa:0.7.18@sha256:${"ab".repeat(32)}`, `harbor.lab/quay-proxy/biocontainers/bwa:0.7.18@sha256:${"ab".repeat(32)}`],
    ["ghcr.io/org/tool:1.0", "harbor.lab/quay-proxy/org/tool:1.0"],
  ];
  for (const [image, want] of cases) t.equal(mirrorImage(image, mirror), want, image);
  t.equal(mirrorImage("quay.io/x/y:1", "harbor.lab/"), "harbor.lab/x/y:1", "a trailing slash of the mirror");

  t.same(toolImage(tool("samtools")), { ok: true, image: tool("samtools").image }, "no configuration: the pinned image");
  t.same(toolImage(tool("samtools"), { imageRegistry: mirror }), { ok: true, image: "harbor.lab/quay-proxy/biocontainers/samtools:1.21--h50ea8bc_0" });
  t.same(toolImage(tool("gatk"), { imageRegistry: mirror, tools: { gatk: { image: "registry.lab/gatk:4.6.1.0" } } }), { ok: true, image: "registry.lab/gatk:4.6.1.0" }, "a tool's own image is not rewritten");
  t.match(toolImage(tool("annovar"), { imageRegistry: mirror }), { ok: false, message: /steps\.tools\.annovar\.image/ }, "ANNOVAR's placeholder is never pulled, mirrored or not");
  t.same(toolImage(tool("annovar"), { tools: { annovar: { image: "registry.lab/annovar:2020-06-08" } } }), { ok: true, image: "registry.lab/annovar:2020-06-08" });
  t.match(tool("annovar").imageNote, /steps\.tools\.annovar\.image/, "ANNOVAR's note names the chart's setting");
  t.match(tool("annovar").imageNote, /`tools\.annovar\.image` in the file OPERON_STEP_POD_CONFIG/, "and the file's");

  const r = resolve("annovar", { command: "convert2annovar" }, undefined, {});
  t.match(r, { ok: false, message: /^annovar has no image/ }, "the operator refuses an ANNOVAR step without an image");
  const withImage = resolve("samtools", { command: "view" }, undefined, { imageRegistry: mirror });
  t.equal(withImage.ok && withImage.image, "harbor.lab/quay-proxy/biocontainers/samtools:1.21--h50ea8bc_0");
});

t.test("embedded mode: no pod, only a step's own CPU sets threads", async (t) => {
  const embedded = (toolId: string, params: Record<string, unknown>, own?: StepResources) => stepCompute({ tool: tool(toolId), params, resources: own });
  t.same(embedded("bwa", { command: "mem" }), { ok: true, params: { command: "mem" } }, "no defaults: the machine is shared, nothing reserved");
  t.same(embedded("bwa", { command: "mem" }, { cpu: "3" }), { ok: true, params: { command: "mem", threads: 3 }, threads: 3 });
  t.same(embedded("bwa", { command: "mem", threads: 2 }, { cpu: "3" }), { ok: true, params: { command: "mem", threads: 2 } }, "the step's threads win");
  t.same(embedded("picard", { command: "SortSam" }, { cpu: "3" }), { ok: true, params: { command: "SortSam" } }, "no thread option");
  t.same(embedded("bwa", { command: "mem", threads: "many" }, { cpu: "3" }), { ok: true, params: { command: "mem", threads: "many" } }, "a bad threads is left for the build to refuse, never replaced");
  const bad = resolve("bwa", { command: "mem", threads: "many" });
  t.same(bad.ok && [bad.params, bad.resources?.requests.cpu], [{ command: "mem", threads: "many" }, "4"], "cluster mode too: the default CPUs, the bad value kept");
  t.notOk(buildInvocation(tool("bwa"), { command: "mem", inputFile: "r.fq", reference: "ref.fa", threads: "many" }, { runtime: "container" }).ok, "and the build refuses it");
  t.same(embedded("annovar", { command: "convert2annovar" }), { ok: true, params: { command: "convert2annovar" } }, "ANNOVAR runs from PATH: no image needed");
  t.same(embedded("bwa", { command: "mem" }, { memory: "999Gi" }), { ok: true, params: { command: "mem" } }, "no maximum without a pod");
});

// Plausible values of each command's required parameters (as test/core/tools.test.ts builds them).
const FILLERS: Record<string, unknown> = {
  inputFile: "data/in.bam", inputFile2: "data/in2.bam", reference: "data/ref.fa", inputFiles: ["a.bam", "b.bam"], format: "%CHROM\n",
  database: "humandb", protocol: "refGene", operation: "g", readGroupSample: "s1", region: "chr1:1-100", knownSites: "data/known.vcf.gz",
};

t.test("the catalogue's `threaded` marks are what each command's argv does with threads", async (t) => {
  let threaded = 0;
  for (const id of defaultCatalogue.ids) {
    const def = tool(id);
    for (const [name, cmd] of Object.entries(def.commands)) {
      const params: Record<string, unknown> = { command: name };
      for (const r of [...cmd.required, ...(cmd.requiredAnyOf?.[0] ?? [])]) params[r] = FILLERS[r] ?? `data/${r}.txt`;
      const without = buildInvocation(def, params, { runtime: "container" });
      const withThreads = buildInvocation(def, { ...params, threads: 7 }, { runtime: "container" });
      if (!without.ok || !withThreads.ok) { t.fail(`${id} ${name} does not build`); continue; }
      const takes = withThreads.invocation.argv.includes("7") && JSON.stringify(without.invocation.argv) !== JSON.stringify(withThreads.invocation.argv);
      t.equal(cmd.threaded === true, takes, `${id} ${name}: ${takes ? "takes" : "takes no"} thread count`);
      if (takes) threaded++;
      // Every command's defaults are valid quantities with requests within limits.
      const r = stepCompute({ tool: def, params, config: {} });
      if (id === "annovar") continue;
      if (!r.ok || !r.resources) { t.fail(`${id} ${name}: ${r.ok ? "no resources" : r.message}`); continue; }
      for (const k of ["cpu", "memory", "ephemeral-storage"] as const) {
        const req = r.resources.requests[k];
        const lim = r.resources.limits[k];
        t.ok(req !== undefined && quantityValue(req) !== undefined, `${id} ${name}: a ${k} request`);
        if (req !== undefined && lim !== undefined) t.ok(compareQuantities(req, lim) <= 0, `${id} ${name}: ${k} request ${req} within its limit ${lim}`);
      }
      t.ok(r.resources.limits.memory !== undefined, `${id} ${name}: a memory limit`);
    }
  }
  t.ok(threaded >= 20, `${threaded} commands take a thread count`);
});
