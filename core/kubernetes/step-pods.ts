/**
 * Step pods (cluster mode, docs/kubernetes.md "Step pods"): the one configuration document of
 * what a step's pod asks for and where it may run — the file `OPERON_STEP_POD_CONFIG` names,
 * which the Helm chart renders from its `steps` values — and the pure decisions made from it:
 * the tool container's requests and limits, its image (a registry mirror, a per-tool
 * override), and the thread count given to the tool, so that the argv and the pod agree.
 *
 * Resources, lowest precedence first: the catalogue's defaults (DEFAULT_TOOL_RESOURCES, the
 * tool's, its command's), the configuration's `resources`, its `tools.<id>.resources`, then the
 * step's own `resources` from the pipeline spec. A step's memory and ephemeral storage become
 * request and limit alike (a step that runs over them fails the same way on every node); its
 * CPU is a request (no CPU limit unless the configuration sets one). `maxResources` caps
 * everything: a step that asks for more is refused (at submission, and by the operator), and a
 * default above it is lowered to it.
 *
 * Threads, for commands that take a thread count (CommandDefinition.threaded): a step that sets
 * `threads` and no CPU asks for that many CPUs (capped at maxResources.cpu); one that sets CPU
 * and no `threads` runs the tool with max(1, floor(cpu)) threads; one that sets neither gets
 * the default CPU and, when that is more than one CPU, floor(cpu) threads. Embedded mode has no
 * pod and no reservation: there only a step's own `resources.cpu` sets threads (stepCompute
 * without a configuration).
 */
import { z } from "zod";
import type { Issue } from "../issues.js";
import { pointer } from "../issues.js";
import { QUANTITY, QUANTITY_MESSAGE, compareQuantities, quantityValue } from "../quantity.js";
import type { PipelineSpec, StepResources } from "../spec/schema.js";
import { defaultCatalogue, resolveCommand, type ToolCatalogue, type ToolDefinition, type ToolResources } from "../tools/index.js";
import { messageOf } from "../errors.js";

/* ------------------------------------------------------------------ the configuration */

const Quantity = z.string().regex(QUANTITY, QUANTITY_MESSAGE);
const ResourceListSchema = z.strictObject({ cpu: Quantity.optional(), memory: Quantity.optional(), "ephemeral-storage": Quantity.optional() });
export const ResourceRequirementsSchema = z.strictObject({ requests: ResourceListSchema.optional(), limits: ResourceListSchema.optional() });

/** A DNS label: a reference volume's name (its pod volume is `ref-<name>`, so at most 59 characters). */
export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** A name of a Kubernetes object (priority class, service account, runtime class, Secret); "" = not set. */
const ObjectName = z.string().max(253).regex(new RegExp(`^$|${DNS_SUBDOMAIN.source}`), "must be a Kubernetes object name (lowercase letters, digits, - and .) or empty");

// The image reference grammar of the distribution project (docker/distribution reference.go), simplified.
const HOST = "[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*(:[0-9]+)?";
const COMPONENT = "[a-z0-9]+((\\.|_|__|-+)[a-z0-9]+)*";
/** A full image reference: `[host[:port]/]path[:tag][@digest]`. */
export const IMAGE_REF = new RegExp(`^(${HOST}/)?${COMPONENT}(/${COMPONENT})*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@[a-z0-9]+([+._-][a-z0-9]+)*:[0-9a-fA-F]{32,})?$`);
/** A registry mirror: a host with an optional path prefix, e.g. `harbor.lab/quay-proxy`. */
export const REGISTRY_PREFIX = new RegExp(`^${HOST}(/${COMPONENT})*$`);

const LABEL_KEY = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/;

const TolerationSchema = z.strictObject({
  key: z.string().regex(new RegExp(`^$|${LABEL_KEY.source}`), "must be a label key").optional(),
  operator: z.enum(["Exists", "Equal"]).optional(),
  value: z.string().regex(LABEL_VALUE, "must be a label value").optional(),
  effect: z.enum(["", "NoSchedule", "PreferNoSchedule", "NoExecute"]).optional(),
  tolerationSeconds: z.number().int().optional(),
});

/** Affinity as Kubernetes takes it; below its three kinds the API server checks the rest. */
const AffinitySchema = z.strictObject({
  nodeAffinity: z.record(z.string(), z.unknown()).optional(),
  podAffinity: z.record(z.string(), z.unknown()).optional(),
  podAntiAffinity: z.record(z.string(), z.unknown()).optional(),
});

/** The fields of a Kubernetes VolumeSource (core/v1): a reference volume is exactly one of them. */
export const VOLUME_SOURCES = [
  "awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
  "fc", "flexVolume", "flocker", "gcePersistentDisk", "gitRepo", "glusterfs", "hostPath", "image", "iscsi", "nfs", "persistentVolumeClaim",
  "photonPersistentDisk", "portworxVolume", "projected", "quobyte", "rbd", "scaleIO", "secret", "storageos", "vsphereVolume",
] as const;
const VolumeSourceSchema = z.partialRecord(z.enum(VOLUME_SOURCES), z.record(z.string(), z.unknown()))
  .refine((v) => Object.keys(v).length === 1, "must be exactly one Kubernetes volume source, such as {\"persistentVolumeClaim\": {\"claimName\": \"ref-grch38\"}}");

const ReferenceVolumeSchema = z.strictObject({
  name: z.string().max(59, "must be at most 59 characters (the pod volume is named ref-<name>)")
    .regex(DNS_LABEL, "must be a DNS label: lowercase letters, digits and -, starting and ending with a letter or digit"),
  volume: VolumeSourceSchema,
});

const ToolSettingsSchema = z.strictObject({
  resources: ResourceRequirementsSchema.optional(),
  /** The tool's image, used as is (the mirror does not rewrite it). */
  image: z.string().regex(IMAGE_REF, "must be an image reference such as registry.example.org/bwa:0.7.18").optional(),
});

const toolsSchema = (tools: ToolCatalogue) =>
  z.strictObject(Object.fromEntries(tools.ids.map((id) => [id, ToolSettingsSchema.optional()])) as Record<string, z.ZodOptional<typeof ToolSettingsSchema>>);

export const MaxResourcesSchema = z.strictObject({ cpu: Quantity.optional(), memory: Quantity.optional(), ephemeralStorage: Quantity.optional() });

const configSchema = (tools: ToolCatalogue) => z.strictObject({
  /** Over the catalogue's defaults, for every tool. */
  resources: ResourceRequirementsSchema.optional(),
  /** Per tool (by catalogue id): resources over `resources`, and the image. */
  tools: toolsSchema(tools).optional(),
  /** The most a step may ask for: more is refused, a default above it is lowered to it. */
  maxResources: MaxResourcesSchema.optional(),
  /** A registry mirror every tool image is pulled through (not `tools.<id>.image`). */
  imageRegistry: z.string().regex(REGISTRY_PREFIX, "must be a registry host with an optional path, such as harbor.lab/quay-proxy").optional(),
  nodeSelector: z.record(z.string().regex(LABEL_KEY, "must be a label key"), z.string().regex(LABEL_VALUE, "must be a label value")).optional(),
  tolerations: z.array(TolerationSchema).optional(),
  affinity: AffinitySchema.optional(),
  priorityClassName: ObjectName.optional(),
  serviceAccountName: ObjectName.optional(),
  imagePullSecrets: z.array(z.strictObject({ name: ObjectName.min(1, "must name a Secret") })).optional(),
  runtimeClassName: ObjectName.optional(),
  /** Read-only data (references, annotation databases), mounted at /ref/<name> in step pods. */
  referenceVolumes: z.array(ReferenceVolumeSchema).superRefine((list, ctx) => {
    const seen = new Set<string>();
    list.forEach((v, i) => {
      if (seen.has(v.name)) ctx.addIssue({ code: "custom", path: [i, "name"], message: `"${v.name}" is used by an earlier reference volume: names must be unique` });
      seen.add(v.name);
    });
  }).optional(),
});

/** The step-pod configuration (docs/kubernetes.md "Step pods"); every key optional. */
export const StepPodConfigSchema = configSchema(defaultCatalogue);
export type StepPodConfig = z.infer<typeof StepPodConfigSchema>;
export type ResourceList = z.infer<typeof ResourceListSchema>;
export type MaxResources = z.infer<typeof MaxResourcesSchema>;
export type ReferenceVolume = z.infer<typeof ReferenceVolumeSchema>;
export type Toleration = z.infer<typeof TolerationSchema>;

/** The tool container's requests and limits, as a pod spec takes them. */
export interface ResourceRequirements { requests: ResourceList; limits: ResourceList }

export type StepPodConfigResult = { ok: true; config: StepPodConfig } | { ok: false; message: string };

/** `tools.bwa.resources.requests.cpu`, `referenceVolumes[0].name`: a JSON path as a user reads it. */
export function jsonPath(path: ReadonlyArray<PropertyKey>): string {
  let out = "";
  for (const seg of path) out += typeof seg === "number" ? `[${seg}]` : `${out ? "." : ""}${String(seg)}`;
  return out || "(the document)";
}

/**
 * The configuration in `text` (JSON; empty or `null` is the empty configuration), or why not,
 * naming the JSON path of the first problem.
 */
export function parseStepPodConfig(text: string, tools: ToolCatalogue = defaultCatalogue): StepPodConfigResult {
  let raw: unknown;
  try {
    raw = text.trim() === "" ? null : JSON.parse(text);
  } catch (e) {
    return { ok: false, message: `not valid JSON: ${messageOf(e)}` };
  }
  const schema = tools === defaultCatalogue ? StepPodConfigSchema : configSchema(tools);
  const r = schema.safeParse(raw ?? {});
  if (r.success) return { ok: true, config: r.data as StepPodConfig };
  const issue = r.error.issues[0] as z.core.$ZodIssue;
  if (issue.code === "unrecognized_keys") {
    const [key] = issue.keys;
    const parent = issue.path[issue.path.length - 1];
    const known = issue.path.length === 1 && parent === "tools" ? `a tool of the catalogue (${tools.ids.join(", ")})`
      : parent === "volume" ? "one Kubernetes volume source (persistentVolumeClaim, nfs, hostPath, csi, …)" : undefined;
    return { ok: false, message: `${jsonPath([...issue.path, key ?? ""])}: unknown key${known ? `: expected ${known}` : ""}` };
  }
  if (issue.code === "invalid_type" && issue.path.length === 0) return { ok: false, message: "must be a JSON object" };
  return { ok: false, message: `${jsonPath(issue.path)}: ${issue.message}` };
}

/* ------------------------------------------------------------------ images */

/**
 * `image` pulled through the mirror `registry`: its registry host (the first path component
 * when it has a `.` or `:` or is `localhost`; else Docker Hub, whose one-component names are
 * `library/<name>`) replaced, the rest — path, tag, digest — kept.
 */
export function mirrorImage(image: string, registry: string): string {
  const slash = image.indexOf("/");
  const first = slash < 0 ? "" : image.slice(0, slash);
  const hasHost = slash >= 0 && (first.includes(".") || first.includes(":") || first === "localhost");
  let rest = hasHost ? image.slice(slash + 1) : image;
  const dockerHub = !hasHost || first === "docker.io" || first === "index.docker.io" || first === "registry-1.docker.io";
  if (dockerHub && !rest.includes("/")) rest = `library/${rest}`;
  return `${registry.replace(/\/+$/, "")}/${rest}`;
}

/** Where to set a tool's image, in the chart and in the file. */
export const imageSetting = (toolId: string) => `steps.tools.${toolId}.image in the Helm chart's values (tools.${toolId}.image in the file OPERON_STEP_POD_CONFIG names)`;

/** The image a tool's step pods run, or why there is none (a user-supplied image not configured). */
export function toolImage(tool: ToolDefinition, config: StepPodConfig = {}): { ok: true; image: string } | { ok: false; message: string } {
  const own = config.tools?.[tool.id]?.image;
  if (own) return { ok: true, image: own };
  if (tool.userSuppliedImage) return { ok: false, message: `${tool.id} has no image: its licence forbids a public one, so set ${imageSetting(tool.id)}` };
  return { ok: true, image: config.imageRegistry ? mirrorImage(tool.image, config.imageRegistry) : tool.image };
}

/* ------------------------------------------------------------------ resources */

/** Any step pod whose tool and command have no defaults of their own. */
export const DEFAULT_TOOL_RESOURCES: ToolResources = { requests: { cpu: "1", memory: "1Gi", "ephemeral-storage": "10Gi" }, limits: { memory: "4Gi" } };

type Key = keyof ResourceList;
const KEYS: readonly Key[] = ["cpu", "memory", "ephemeral-storage"];
/** A step's (and maxResources') name of each resource. */
const SPEC_KEY = { cpu: "cpu", memory: "memory", "ephemeral-storage": "ephemeralStorage" } as const satisfies Record<Key, keyof StepResources & keyof MaxResources>;

/** A step asked for more than maxResources allows. */
export interface OverMax { key: keyof StepResources; value: string; max: string }
export const overMaxText = (o: OverMax) => `${JSON.stringify(o.value)} is more than a step may ask for here (at most ${JSON.stringify(o.max)}, maxResources.${o.key})`;

function layer(into: ResourceRequirements, r: ToolResources | undefined): void {
  if (!r) return;
  Object.assign(into.requests, r.requests);
  Object.assign(into.limits, r.limits);
}

/** The pod resources of a tool's command before the step's own: catalogue, then configuration. */
export function defaultResources(tool: ToolDefinition, command: string | undefined, config: StepPodConfig = {}): ResourceRequirements {
  const r: ResourceRequirements = { requests: {}, limits: {} };
  layer(r, DEFAULT_TOOL_RESOURCES);
  layer(r, tool.resources);
  if (command !== undefined) layer(r, tool.commands[command]?.resources);
  layer(r, config.resources);
  layer(r, config.tools?.[tool.id]?.resources);
  return r;
}

/** Parts of a step's resources above maxResources (what submission and the operator refuse). */
export function overMax(resources: StepResources | undefined, max: MaxResources | undefined): OverMax[] {
  const out: OverMax[] = [];
  for (const key of ["cpu", "memory", "ephemeralStorage"] as const) {
    const value = resources?.[key];
    const limit = max?.[key];
    if (value !== undefined && limit !== undefined && compareQuantities(value, limit) > 0) out.push({ key, value, max: limit });
  }
  return out;
}

/** Reads `threads` of resolved parameters (a number or a string of digits); undefined when absent or unreadable. */
function threadsParam(params: Readonly<Record<string, unknown>>): number | undefined {
  const v = params["threads"];
  const n = typeof v === "number" ? v : typeof v === "string" && /^\d+$/.test(v) ? Number(v) : NaN;
  return Number.isSafeInteger(n) && n >= 1 ? n : undefined;
}

/** The most threads `threads` accepts (core/tools/params.ts commonParams). */
const MAX_THREADS = 256;
const threadsOf = (cpu: number) => Math.min(MAX_THREADS, Math.max(1, Math.floor(cpu)));

export interface StepComputeInput {
  tool: ToolDefinition;
  /** The step's parameters with every reference resolved. */
  params: Readonly<Record<string, unknown>>;
  /** The step's own `resources` (pipeline spec). */
  resources?: StepResources | undefined;
  /** Cluster mode's step-pod configuration; absent in embedded mode (no pod). */
  config?: StepPodConfig | undefined;
}

export type StepCompute =
  | {
    ok: true;
    /** The parameters to build the argv from: `threads` added when the rule sets it. */
    params: Readonly<Record<string, unknown>>;
    /** The thread count added to the parameters, if any. */
    threads?: number;
    /** Cluster mode: the tool container's requests and limits. */
    resources?: ResourceRequirements;
    /** Cluster mode: the tool's image. */
    image?: string;
  }
  | { ok: false; message: string };

/**
 * What a step about to start runs with: the thread count the tool gets and, in cluster mode
 * (`config` given), its pod's resources and image. Refused (the step fails, nothing created)
 * when the step asks for more than maxResources or its tool has no image.
 */
export function stepCompute(input: StepComputeInput): StepCompute {
  const { tool, params, resources: own, config } = input;
  const choice = resolveCommand(tool, params);
  // A step without a valid command is refused when its argv is built: nothing to add here.
  const command = choice.ok ? choice.command : undefined;
  const threaded = command !== undefined && tool.commands[command]?.threaded === true;
  const given = threadsParam(params);
  // A `threads` the step gives is never replaced (one that is not a number fails when the argv is built).
  const present = params["threads"] !== undefined && params["threads"] !== null;
  const withThreads = (n: number | undefined) => (n === undefined ? { params } : { params: { ...params, threads: n }, threads: n });
  const ownCpu = own?.cpu !== undefined ? quantityValue(own.cpu) : undefined;

  if (!config) {
    // Embedded mode: no pod reserves CPUs, so only the step's own CPU sets threads.
    return { ok: true, ...withThreads(threaded && !present && ownCpu !== undefined ? threadsOf(ownCpu) : undefined) };
  }

  const image = toolImage(tool, config);
  if (!image.ok) return { ok: false, message: image.message };
  const over = overMax(own, config.maxResources);
  if (over.length) return { ok: false, message: over.map((o) => `resources.${o.key} ${overMaxText(o)}`).join("; ") };

  const max = config.maxResources ?? {};
  const r = defaultResources(tool, command, config);
  // Defaults above the maximum are lowered to it.
  for (const list of [r.requests, r.limits]) {
    for (const k of KEYS) {
      const m = max[SPEC_KEY[k]];
      if (list[k] !== undefined && m !== undefined && compareQuantities(list[k], m) > 0) list[k] = m;
    }
  }
  // The step's own: memory and ephemeral storage as request and limit; CPU as a request.
  const explicit = new Set<Key>();
  if (own?.memory !== undefined) { r.requests.memory = own.memory; r.limits.memory = own.memory; explicit.add("memory"); }
  if (own?.ephemeralStorage !== undefined) { r.requests["ephemeral-storage"] = own.ephemeralStorage; r.limits["ephemeral-storage"] = own.ephemeralStorage; explicit.add("ephemeral-storage"); }
  let threads: number | undefined;
  if (own?.cpu !== undefined) {
    r.requests.cpu = own.cpu;
    explicit.add("cpu");
    if (threaded && !present && ownCpu !== undefined) threads = threadsOf(ownCpu);
  } else if (threaded && given !== undefined) {
    // As many CPUs as threads, within the maximum.
    const cap = max.cpu !== undefined ? quantityValue(max.cpu) : undefined;
    r.requests.cpu = String(cap !== undefined && given > cap ? max.cpu : given);
    explicit.add("cpu");
  } else if (threaded && !present) {
    const cpu = r.requests.cpu !== undefined ? quantityValue(r.requests.cpu) : undefined;
    if (cpu !== undefined && cpu > 1) threads = threadsOf(cpu);
  }
  // A request is never above its limit: an explicit request raises the limit, a default is lowered to it.
  for (const k of KEYS) {
    const req = r.requests[k];
    const lim = r.limits[k];
    if (req === undefined || lim === undefined || compareQuantities(req, lim) <= 0) continue;
    if (explicit.has(k)) r.limits[k] = req; else r.requests[k] = lim;
  }
  return { ok: true, ...withThreads(threads), resources: r, image: image.image };
}

/**
 * Why a spec cannot run under this configuration, checked at submission in cluster mode
 * (invalid_request, nothing created): a step asking for more than maxResources, a tool without an image.
 * Paths are JSON pointers; messages name the field as `steps[i].resources.memory`.
 */
export function stepPodIssues(spec: Pick<PipelineSpec, "steps">, config: StepPodConfig, tools: ToolCatalogue = defaultCatalogue): Issue[] {
  const issues: Issue[] = [];
  spec.steps.forEach((step, i) => {
    for (const o of overMax(step.resources, config.maxResources)) {
      issues.push({ code: "resources_above_maximum", path: pointer("steps", i, "resources", o.key), message: `steps[${i}].resources.${o.key}: ${overMaxText(o)}` });
    }
    const tool = tools.get(step.toolName);
    const image = tool ? toolImage(tool, config) : undefined;
    if (image && !image.ok) issues.push({ code: "tool_image_missing", path: pointer("steps", i, "toolName"), message: `steps[${i}].toolName: ${image.message}` });
  });
  return issues;
}
