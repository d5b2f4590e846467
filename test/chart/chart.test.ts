/**
 * The Helm chart (charts/operon), checked with the real helm (v4.3.1, and v3.19.0 where Helm 3
 * and 4 could differ; both built by `make test-deps`) and the real kubectl against a real
 * kube-apiserver (test/support/k8s-env.ts):
 *  - `helm lint --strict` and `helm template` with no values at all (the chart's defaults) and
 *    with every option on, with Helm 4 and Helm 3; NOTES.txt of a first install without a
 *    bucket (NOT READY, naming s3.bucket and the upgrade line); the api-server and operator
 *    started with that install's environment stop at once with one line naming s3.bucket;
 *  - the values schema refusing wrong values with the key named (Helm 4 and 3), and checking the
 *    step-pod values (`steps`) as the operator does; `steps` rendered into steps.json, mounted
 *    in both Deployments; a step Job with every steps value created under the chart's RBAC;
 *  - renders (no values, defaults, every option on, existing Secrets) accepted by a server-side dry-run
 *    apply in a namespace that enforces the restricted Pod Security Standard, without a warning;
 *  - least privilege and pod security read from the rendered objects, and the RBAC checked
 *    with `kubectl auth can-i` after a real apply;
 *  - step pods (selected by the labels core/kubernetes/jobs.ts gives them, as the API server selects):
 *    a NetworkPolicy with no ingress and egress only to DNS and the object store;
 *  - the chart's CRD is crds/pipelinerun.yaml (no drift);
 *  - an install: the rendered chart applied for real, then the api-server and the operator run
 *    out of cluster with exactly the args and environment of their Deployments, each as its
 *    own ServiceAccount, as the image would run them (`operon` from a tree built like the
 *    image, production dependencies only, the image's ENV under the pod's), and a pipeline
 *    submitted through the HTTP API completes.
 */
import t from "tap";
import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse, parseAllDocuments } from "yaml";
import { parseConfig } from "../../core/config.js";
import { buildJob, type JobObject } from "../../core/kubernetes/jobs.js";
import { LABEL } from "../../core/kubernetes/pipelinerun.js";
import { IMAGE_REF, REGISTRY_PREFIX, StepPodConfigSchema } from "../../core/kubernetes/step-pods.js";
import { QUANTITY } from "../../core/quantity.js";
import { HELM_VALUE_OF } from "../../core/helm-values.js";
import { defaultCatalogue } from "../../core/tools/index.js";
import type { StepTask } from "../../core/ports.js";
import { createStore } from "../../wiring/runtime.js";
import { createKubeClient, paths } from "../../adapters/kubernetes/client.js";
import { buildImageTree, runtimeEnv } from "../support/image-tree.js";
import { startStageOut } from "../support/job-sim.js";
import { run as runIn, startTestEnv } from "../support/k8s-env.js";
import { until } from "../support/wait.js";
import { freePorts } from "../support/minio.js";

const repo = fileURLToPath(new URL("../../", import.meta.url));
const chartDir = join(repo, "charts", "operon");
const fixtures = fileURLToPath(new URL("./", import.meta.url));
const cacheDir = process.env.OPERON_CACHE_DIR ?? join(homedir(), ".cache", "operon");
/** Helm 4 (most of the tests) and Helm 3 (the chart is checked with both: lint, template, NOTES), as `make test-deps` builds them. */
const HELM = join(cacheDir, "helm-v4.3.1", "helm");
const HELM3 = join(cacheDir, "helm-v3.19.0", "helm");
for (const [binary, version] of [[HELM, "v4.3.1"], [HELM3, "v3.19.0"]] as const) {
  try {
    accessSync(binary, constants.X_OK);
  } catch {
    throw new Error(`helm ${version} is missing (${binary}): run \`make test-deps\` to build it from its Go module`);
  }
}

// ---------------------------------------------------------------------------------------------
// Helpers

/** A command run from the repository unless told otherwise. */
const run = (command: string, args: string[], opts: { input?: string; env?: NodeJS.ProcessEnv; cwd?: string } = {}) => runIn(command, args, { cwd: repo, ...opts });

// helm keeps its cache and configuration in a throwaway folder, not in the user's home.
const helmHome = await mkdtemp(join(tmpdir(), "operon-helm-"));
t.teardown(() => rm(helmHome, { recursive: true, force: true }));
const helmEnv = {
  PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: helmHome,
  HELM_CACHE_HOME: join(helmHome, "cache"), HELM_CONFIG_HOME: join(helmHome, "config"), HELM_DATA_HOME: join(helmHome, "data"),
};
const helmAt = (binary: string, extra: NodeJS.ProcessEnv = {}) => (args: string[]) => run(binary, args, { env: { ...helmEnv, ...extra } });
const helm = helmAt(HELM);

interface Meta { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> }
interface K8sObject { apiVersion: string; kind: string; metadata: Meta; [k: string]: unknown }
interface Rule { apiGroups?: string[]; resources?: string[]; resourceNames?: string[]; verbs?: string[] }
interface EnvVar { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string }; fieldRef?: { fieldPath: string }; configMapKeyRef?: unknown } }
interface EnvFrom { configMapRef?: { name: string }; secretRef?: { name: string } }
interface Probe { httpGet?: { path: string; port: string | number } }
interface SecurityContext {
  runAsNonRoot?: boolean; runAsUser?: number; readOnlyRootFilesystem?: boolean; allowPrivilegeEscalation?: boolean; privileged?: boolean;
  capabilities?: { drop?: string[]; add?: string[] }; seccompProfile?: { type: string };
}
interface Container {
  name: string; image: string; imagePullPolicy?: string; command?: string[]; args?: string[]; env?: EnvVar[]; envFrom?: EnvFrom[];
  ports?: Array<{ name?: string; containerPort: number }>; readinessProbe?: Probe; livenessProbe?: Probe; startupProbe?: Probe;
  resources?: { requests?: Record<string, string | number>; limits?: Record<string, string | number> }; securityContext?: SecurityContext;
}
interface PodSpec {
  serviceAccountName?: string; securityContext?: SecurityContext; containers: Container[]; initContainers?: Container[];
  hostNetwork?: boolean; hostPID?: boolean; hostIPC?: boolean; volumes?: Array<{ name: string; hostPath?: unknown }>;
  nodeSelector?: Record<string, string>; tolerations?: unknown[]; affinity?: unknown; imagePullSecrets?: Array<{ name: string }>;
}
interface Deployment extends K8sObject { spec: { replicas: number; template: { metadata: Meta; spec: PodSpec } } }
interface LabelSelector { matchLabels?: Record<string, string>; matchExpressions?: Array<{ key: string; operator: string; values?: string[] }> }
interface PolicyPeer { ipBlock?: { cidr: string; except?: string[] }; namespaceSelector?: LabelSelector; podSelector?: LabelSelector }
interface PolicyPort { port?: number | string; protocol?: string; endPort?: number }
interface NetworkPolicy extends K8sObject {
  spec: { podSelector: LabelSelector; policyTypes?: string[]; ingress?: Array<{ from?: PolicyPeer[]; ports?: PolicyPort[] }>; egress?: Array<{ to?: PolicyPeer[]; ports?: PolicyPort[] }> };
}

/** `helm template` with the given flags (Helm 4 unless told); throws when helm fails. */
async function render(release: string, namespace: string, flags: string[], h = helm): Promise<{ text: string; docs: K8sObject[] }> {
  const r = await h(["template", release, chartDir, "--namespace", namespace, ...flags]);
  if (r.code !== 0) throw new Error(`helm template ${flags.join(" ")} failed: ${r.stderr}`);
  const docs = parseAllDocuments(r.stdout).map((d) => d.toJS() as K8sObject | null).filter((d): d is K8sObject => d !== null);
  return { text: r.stdout, docs };
}

const ofKind = <T extends K8sObject = K8sObject>(docs: K8sObject[], kind: string) => docs.filter((d) => d.kind === kind) as T[];
function deployment(docs: K8sObject[], component: string): Deployment {
  const d = ofKind<Deployment>(docs, "Deployment").find((x) => x.metadata.labels?.["app.kubernetes.io/component"] === component);
  if (!d) throw new Error(`no ${component} Deployment rendered`);
  return d;
}
const containersOf = (d: Deployment) => [...(d.spec.template.spec.initContainers ?? []), ...d.spec.template.spec.containers];
const mainContainer = (d: Deployment): Container => {
  const c = d.spec.template.spec.containers[0];
  if (!c) throw new Error(`${d.metadata.name}: no container`);
  return c;
};

/** Whether a label selector selects a pod with these labels (Kubernetes' rules; the test cross-checks them with the API server). */
function selects(selector: LabelSelector, labels: Record<string, string>): boolean {
  const labelsOk = Object.entries(selector.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
  return labelsOk && (selector.matchExpressions ?? []).every((e) => {
    const value = labels[e.key];
    switch (e.operator) {
      case "Exists": return value !== undefined;
      case "DoesNotExist": return value === undefined;
      case "In": return value !== undefined && (e.values ?? []).includes(value);
      case "NotIn": return value === undefined || !(e.values ?? []).includes(value);
      default: throw new Error(`unknown selector operator ${e.operator}`);
    }
  });
}
/** A label selector as `kubectl get -l` takes it. */
function selectorString(selector: LabelSelector): string {
  const parts = [
    ...Object.entries(selector.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`),
    ...(selector.matchExpressions ?? []).map((e) => {
      switch (e.operator) {
        case "Exists": return e.key;
        case "DoesNotExist": return `!${e.key}`;
        case "In": return `${e.key} in (${(e.values ?? []).join(",")})`;
        case "NotIn": return `${e.key} notin (${(e.values ?? []).join(",")})`;
        default: throw new Error(`unknown selector operator ${e.operator}`);
      }
    }),
  ];
  if (parts.length === 0) throw new Error("an empty selector selects every pod");
  return parts.join(",");
}

/** A step pod template as the operator makes it (core/kubernetes/jobs.ts), for a run of organization acme. */
const stepTask: StepTask = {
  runId: "run-01jz0000000000000000000000", organization: "acme", stepId: "align", attempt: 1, toolName: "bwa",
  invocation: { argv: ["bwa", "mem", "ref.fa", "r1.fq"], stdout: "out.sam", inputs: [{ param: "inputFile", source: "reads/r1.fq", local: "r1.fq" }], outputs: [{ path: "out.sam", secondary: [] }], mkdirs: [] },
  workspaceRoot: "orgs/acme/workspaces/default/", runRoot: "orgs/acme/workspaces/default/pipelines/2026-11-22T01-00-00Z/", timeoutMs: 60_000,
};
const stepPodLabels = (job: JobObject): Record<string, string> => {
  const labels = (job.spec as { template?: { metadata?: { labels?: Record<string, string> } } } | undefined)?.template?.metadata?.labels;
  if (!labels) throw new Error(`${job.metadata.name}: no pod template labels`);
  return labels;
};
const stepLabels = stepPodLabels(buildJob(stepTask, { namespace: "ns", image: "operon:test", toolImage: "quay.io/biocontainers/bwa:0.7.18", storageEnv: { OPERON_STORAGE: "s3", S3_BUCKET: "b" } }));
/** The NetworkPolicies of a render that apply to step pods. */
const stepPolicies = (docs: K8sObject[]) => ofKind<NetworkPolicy>(docs, "NetworkPolicy").filter((p) => selects(p.spec.podSelector, stepLabels));

/** A warning from the API server as kubectl prints it (PodSecurity's `would violate …` among them). */
const WARNING = /Warning:|would violate PodSecurity/i;

// ---------------------------------------------------------------------------------------------

const imageDir = await mkdtemp(join(tmpdir(), "operon-chart-image-"));
t.teardown(() => rm(imageDir, { recursive: true, force: true }));
const [env, image] = await Promise.all([startTestEnv(), buildImageTree(imageDir)]);
t.teardown(() => env.stop());
const s3 = env.s3;
if (!s3) throw new Error("the test environment started without MinIO");

async function kubectlOk(args: string[], input?: string): Promise<string> {
  const r = await env.kubectl(args, input === undefined ? {} : { input });
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")} failed (exit ${r.code}): ${r.stderr}`);
  return r.stdout;
}

/** A namespace whose Pod Security admission enforces (and warns about) the restricted level. */
async function restrictedNamespace(name: string): Promise<void> {
  await kubectlOk(["apply", "--server-side", "-f", "-"], JSON.stringify({
    apiVersion: "v1", kind: "Namespace",
    metadata: { name, labels: { "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest", "pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/warn-version": "latest" } },
  }));
}

const BUCKET_FLAG = ["--set", "s3.bucket=operon-data"];
const DRY_NS = "chart-dry-run";
/** A first `helm install` with no values at all: the chart's own defaults (no bucket). */
const noValues = await render("operon", DRY_NS, []);
const defaults = await render("operon", DRY_NS, BUCKET_FLAG);
const allOn = await render("operon", DRY_NS, ["-f", join(fixtures, "all-on.values.yaml")]);
const existingSecrets = await render("operon", DRY_NS, ["-f", join(fixtures, "all-on.values.yaml"),
  "--set", "s3.existingSecret=my-s3-credentials", "--set", "signing.existingSecret=my-signing-secret"]);
const renders = { "no values": noValues, defaults, "all-on": allOn, "existing Secrets": existingSecrets };

type ConfigMap = K8sObject & { data: Record<string, string> };
function configMap(docs: K8sObject[], name: string): ConfigMap {
  const cm = ofKind<ConfigMap>(docs, "ConfigMap").find((c) => c.metadata.name === name);
  if (!cm) throw new Error(`no ConfigMap ${name} rendered`);
  return cm;
}
/** A rendered object without what differs between two renders by design (the random signing secret). */
const comparable = (d: K8sObject): K8sObject => (d.kind === "Secret" && d.metadata.name === "operon-signing" ? { ...d, data: "(random)" } : d);

const HELMS = [["Helm 4", HELM, "v4.3.1"], ["Helm 3", HELM3, "v3.19.0"]] as const;

t.test("Helm 4 and Helm 3: lint --strict and template pass with the chart's own defaults (no values) and with every option on", async (t) => {
  for (const [name, binary, version] of HELMS) {
    t.test(name, async (t) => {
      const h = helmAt(binary);
      t.equal((await h(["version", "--template", "{{ .Version }}"])).stdout.trim(), version, `this is helm ${version}`);
      for (const [what, flags] of [["no values", []], ["s3.bucket set", BUCKET_FLAG], ["every option on", ["-f", join(fixtures, "all-on.values.yaml")]]] as const) {
        const lint = await h(["lint", "--strict", chartDir, ...flags]);
        t.equal(lint.code, 0, `${what}: lint --strict: ${lint.stdout}${lint.stderr}`);
        t.match(lint.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/, `${what}: linted`);
      }
      const { docs } = await render("operon", DRY_NS, [], h);
      t.strictSame(docs.map(comparable), noValues.docs.map(comparable), "helm template with no values: the same objects as Helm 4 renders");
      const all = await render("operon", DRY_NS, ["-f", join(fixtures, "all-on.values.yaml")], h);
      t.strictSame(all.docs, allOn.docs, "every option on: the same objects as Helm 4 renders");
    });
  }
  t.test("no values: every object, without S3_BUCKET; the pods are told they run under the chart", async (t) => {
    t.same(noValues.docs.map((d) => `${d.kind}/${d.metadata.name}`), defaults.docs.map((d) => `${d.kind}/${d.metadata.name}`), "the same objects as with a bucket");
    const cm = configMap(noValues.docs, "operon-config");
    t.equal(cm.data.S3_BUCKET, undefined, "no S3_BUCKET: the processes refuse to start, naming s3.bucket");
    t.equal(cm.data.OPERON_CONFIG_SOURCE, "helm");
    t.equal(configMap(defaults.docs, "operon-config").data.S3_BUCKET, "operon-data");
  });
});

t.test("NOTES.txt: with no values it starts NOT READY, naming s3.bucket, credentials and the upgrade line; with a bucket, none of it", async (t) => {
  // `helm install --dry-run=client` prints NOTES.txt (helm template does not); Helm 3 asks the
  // cluster's version even so, hence the test cluster's kubeconfig. Nothing is installed.
  for (const [name, binary] of HELMS) {
    t.test(name, async (t) => {
      const h = helmAt(binary, { KUBECONFIG: env.kubeconfigPath });
      const notes = async (flags: string[]) => {
        const r = await h(["install", "first", chartDir, "--namespace", "lab", "--dry-run=client", ...flags]);
        if (r.code !== 0) throw new Error(`helm install --dry-run=client ${flags.join(" ")}: ${r.stderr}`);
        const at = r.stdout.indexOf("\nNOTES:\n");
        t.ok(at >= 0, "NOTES printed");
        return r.stdout.slice(at + "\nNOTES:\n".length);
      };
      const first = await notes([]);
      t.match(first, /^NOT READY: set the Helm value s3\.bucket\./, "it starts with NOT READY naming s3.bucket");
      t.ok(first.includes("\n    helm upgrade first charts/operon -n lab --reuse-values --set s3.bucket=<bucket>\n"), "the exact upgrade command");
      for (const value of ["s3.existingSecret=", "s3.accessKeyId=", "s3.secretAccessKey=", "serviceAccount.annotations", "s3.endpoint=", "s3.forcePathStyle=true"]) {
        t.ok(first.includes(value), `credentials and store: ${value}`);
      }
      t.match(first, /bundles no object store/);
      t.ok(first.includes("kubectl -n lab get pods -l app.kubernetes.io/instance=first -o jsonpath='{range .items[*]}{.metadata.name}: {.status.containerStatuses[0].lastState.terminated.message}"), "how to read the pods' termination message");
      t.match(first, /Once the pods are ready:\n\nOperon \S+ is installed in namespace lab\./, "then the usual notes");
      const ready = await notes(BUCKET_FLAG);
      t.match(ready, /^Operon \S+ is installed in namespace lab\./, "with a bucket: the usual notes");
      t.notMatch(ready, /NOT READY|s3\.bucket|helm upgrade/, "and nothing about the bucket");
    });
  }
});

/** Wrong step-pod values and how the refusal names them (checked with Helm 4 and Helm 3). */
const refVolume = (name: string, volume: unknown = { persistentVolumeClaim: { claimName: "ref" } }) => ({ name, volume });
const STEP_REFUSALS: Array<[string[], RegExp]> = [
  [["--set-string", "steps.resources.requests.cpu=lots"], /\/steps\/resources\/requests\/cpu'?: 'lots' does not match pattern/],
  [["--set-string", "steps.tools.bwa.resources.limits.memory=16GB"], /\/steps\/tools\/bwa\/resources\/limits\/memory'?: '16GB' does not match pattern/],
  [["--set-string", "steps.maxResources.ephemeralStorage=-1Gi"], /\/steps\/maxResources\/ephemeralStorage'?: '-1Gi' does not match pattern/],
  [["--set", "steps.maxResources.memory=16"], /\/steps\/maxResources\/memory'?: got number, want string/],
  [["--set-string", "steps.resources.requests.gpu=1"], /\/steps\/resources\/requests'?: additional properties 'gpu' not allowed/],
  [["--set", "steps.tools.bwa-mem.image=registry.lab/bwa:1"], /\/steps\/tools'?: additional properties 'bwa-mem' not allowed/],
  [["--set", "steps.tools.annovar.image=https://registry.lab/annovar"], /\/steps\/tools\/annovar\/image'?: .* does not match pattern/],
  [["--set", "steps.imageRegistry=https://harbor.lab"], /\/steps\/imageRegistry'?: .* does not match pattern/],
  [["--set", "steps.serviceAccountName=Step_Runner"], /\/steps\/serviceAccountName'?: .* does not match pattern/],
  [["--set", "steps.tolerations[0].operator=Maybe"], /\/steps\/tolerations\/0\/operator/],
  [["--set", "steps.nodeselector.pool=genomics"], /\/steps'?: additional properties 'nodeselector' not allowed/],
  [["--set-json", 'steps.nodeSelector={"Bad Key":"x"}'], /\/steps\/nodeSelector'?: additional properties 'Bad Key' not allowed/],
  [["--set", "steps.imageRegistry="], /\/steps\/imageRegistry'?: '' does not match pattern/],
  [["--set-json", `steps.referenceVolumes=${JSON.stringify([refVolume("GRCh38")])}`], /\/steps\/referenceVolumes\/0\/name'?: 'GRCh38' does not match pattern/],
  [["--set-json", `steps.referenceVolumes=${JSON.stringify([refVolume("a".repeat(60))])}`], /\/steps\/referenceVolumes\/0\/name'?: 'a{60}' does not match pattern/],
  [["--set-json", `steps.referenceVolumes=${JSON.stringify([refVolume("grch38", { persistentVolumeclaim: { claimName: "ref" } })])}`], /\/steps\/referenceVolumes\/0\/volume'?: additional properties 'persistentVolumeclaim' not allowed/],
  [["--set-json", `steps.referenceVolumes=${JSON.stringify([refVolume("grch38", { persistentVolumeClaim: {} })])}`], /\/steps\/referenceVolumes\/0\/volume\/persistentVolumeClaim'?: missing property 'claimName'/],
  [["--set-json", `steps.referenceVolumes=${JSON.stringify([refVolume("grch38", { nfs: { server: "nfs", path: "/a" }, hostPath: { path: "/a" } })])}`], /\/steps\/referenceVolumes\/0\/volume'?: maxProperties/],
  [["--set-json", `steps.referenceVolumes=${JSON.stringify([refVolume("grch38")])}`, "--set-json", "steps.referenceVolumes[0].volume={}"], /\/steps\/referenceVolumes\/0\/volume'?: minProperties/],
  [["--set-json", `steps.referenceVolumes=${JSON.stringify([refVolume("grch38")])}`, "--set", "steps.referenceVolumes[0].mountPath=/data"], /\/steps\/referenceVolumes\/0'?: additional properties 'mountPath' not allowed/],
  // A guard of the template (uniqueness by name is not expressible in the schema):
  [["--set-json", `steps.referenceVolumes=${JSON.stringify([refVolume("grch38"), refVolume("hg19"), refVolume("grch38")])}`], /steps\.referenceVolumes\[2\]\.name: "grch38" is used twice/],
];

t.test("the values schema refuses wrong values, naming the key", async (t) => {
  const cases: Array<[string[], RegExp]> = [
    [["--set", "orgConcurrency=lots"], /\/orgConcurrency'?: got string, want integer/],
    [["--set", "apiServer.replicas=two"], /\/apiServer\/replicas'?: got string, want integer/],
    [["--set", "operator.replica=2"], /\/operator'?: additional properties 'replica' not allowed/],
    [["--set", "orgConcurrency=0"], /\/orgConcurrency'?: minimum/],
    [["--set", "s3.endpoint=minio:9000"], /\/s3\/endpoint/],
    [["--set", "signing.secret=too-short"], /\/signing\/secret/],
    [["--set", "logLevel=verbose"], /\/logLevel/],
    [["--set", "serviceMonitor.interval=soon"], /\/serviceMonitor\/interval/],
    [["--set", "stepNetworkPolicy.enabled=yes"], /\/stepNetworkPolicy\/enabled'?: got string, want boolean/],
    [["--set", "stepNetworkPolicy.objectStore.to[0].ipblock.cidr=10.0.0.0/8"], /\/stepNetworkPolicy\/objectStore\/to\/0'?: additional properties 'ipblock' not allowed/],
    [["--set", "stepNetworkPolicy.objectStore.to[0].ipBlock.cidr=10.0.0.0"], /\/stepNetworkPolicy\/objectStore\/to\/0\/ipBlock\/cidr/],
    [["--set", "stepNetworkPolicy.objectStore.ports[0].protocol=TCP"], /\/stepNetworkPolicy\/objectStore\/ports\/0'?: missing property 'port'/],
    [["--set", "stepNetworkPolicy.objectStore.ports[0].port=9000", "--set", "stepNetworkPolicy.objectStore.ports[0].protocol=HTTP"], /\/stepNetworkPolicy\/objectStore\/ports\/0\/protocol/],
    [["--set-json", "stepNetworkPolicy.dns.ports=[]"], /\/stepNetworkPolicy\/dns\/ports'?: minItems/],
    [["--set-json", 'stepNetworkPolicy.extraEgress=[{"to":[{"ipBlock":{"cidr":"169.254.169.254/32"}}]}]'], /\/stepNetworkPolicy\/extraEgress\/0'?: missing property 'ports'/],
    ...STEP_REFUSALS,
    // Guards of the templates themselves (not expressible in the schema):
    [["--set", "ingress.enabled=true", "--set", "ingress.tls.enabled=true"], /ingress\.tls\.secretName is required/],
    [["--set", "s3.accessKeyId=AKIA"], /s3\.secretAccessKey is required with s3\.accessKeyId/],
  ];
  for (const [flags, message] of cases) {
    const r = await helm(["template", "operon", chartDir, ...BUCKET_FLAG, ...flags]);
    t.not(r.code, 0, `${flags.join(" ")}: refused`);
    t.match(r.stderr, message, `${flags.join(" ")}: the message names the key`);
  }
  // Helm 3 checks the same schema: the step-pod values, and one of the others.
  const helm3 = helmAt(HELM3);
  for (const [flags, message] of [...STEP_REFUSALS, [["--set", "orgConcurrency=lots"], /\/orgConcurrency'?: got string, want integer/] as const]) {
    const r = await helm3(["template", "operon", chartDir, ...BUCKET_FLAG, ...flags]);
    t.not(r.code, 0, `Helm 3, ${flags.join(" ")}: refused`);
    t.match(r.stderr, message, `Helm 3, ${flags.join(" ")}: the message names the key`);
  }
  // The same keys with good values render, so the refusals above are about the values.
  const good = await render("operon", "ns", [...BUCKET_FLAG, "--set", "orgConcurrency=7", "--set", "apiServer.replicas=4", "--set", "operator.replicas=1",
    "--set", "s3.endpoint=http://minio:9000", "--set", "logLevel=debug", "--set", "serviceMonitor.interval=1m"]);
  const cm = configMap(good.docs, "operon-config");
  t.equal(cm.data.OPERON_ORG_CONCURRENCY, "7");
  t.equal(cm.data.S3_ENDPOINT, "http://minio:9000");
  t.equal(deployment(good.docs, "api-server").spec.replicas, 4);
  t.equal(deployment(good.docs, "operator").spec.replicas, 1);
});

interface JsonSchema { type?: string; pattern?: string; properties?: Record<string, JsonSchema>; definitions?: Record<string, JsonSchema> }
const valuesSchema = JSON.parse(await readFile(join(chartDir, "values.schema.json"), "utf8")) as JsonSchema;
const allOnValues = parse(await readFile(join(fixtures, "all-on.values.yaml"), "utf8")) as { steps: Record<string, unknown> };
const chartValues = parse(await readFile(join(chartDir, "values.yaml"), "utf8")) as { steps: Record<string, unknown> };

t.test("steps: the values become steps.json, mounted read-only at /etc/operon/steps.json in the api-server and the operator", async (t) => {
  const stepKeys = Object.keys(valuesSchema.properties?.steps?.properties ?? {});
  t.same(stepKeys.sort(), Object.keys(StepPodConfigSchema.shape).sort(), "the chart's steps keys are the configuration's (core/kubernetes/step-pods.ts)");
  t.same(Object.keys(allOnValues.steps).sort(), stepKeys, "all-on.values.yaml sets every one of them");
  for (const [name, { docs }, expected] of [["no values", noValues, chartValues.steps], ["all-on", allOn, allOnValues.steps]] as const) {
    t.test(name, async (t) => {
      const text = configMap(docs, "operon-steps").data["steps.json"] ?? "";
      const json = JSON.parse(text) as unknown;
      t.strictSame(json, expected, "steps.json is the steps values, as given");
      const parsed = StepPodConfigSchema.safeParse(json);
      t.ok(parsed.success, `it is a valid step-pod configuration${parsed.success ? "" : `: ${JSON.stringify(parsed.error.issues)}`}`);
      for (const component of ["api-server", "operator"]) {
        const d = deployment(docs, component);
        const c = mainContainer(d) as Container & { volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }> };
        const file = c.env?.find((e) => e.name === "OPERON_STEP_POD_CONFIG")?.value;
        t.equal(file, "/etc/operon/steps.json", `${component}: OPERON_STEP_POD_CONFIG`);
        const mount = c.volumeMounts?.find((m) => m.mountPath === "/etc/operon");
        t.equal(mount?.readOnly, true, `${component}: mounted read-only`);
        const volume = (d.spec.template.spec.volumes as Array<{ name: string; configMap?: { name: string; items?: Array<{ key: string; path: string }> } }> | undefined)?.find((v) => v.name === mount?.name);
        t.strictSame(volume?.configMap, { name: "operon-steps", items: [{ key: "steps.json", path: "steps.json" }] }, `${component}: the file is the ConfigMap's steps.json`);
        t.notOk(c.envFrom?.some((e) => e.configMapRef?.name === "operon-steps"), `${component}: not as environment variables`);
      }
    });
  }
  // Pods roll when the step configuration changes (the operator reads it at start).
  const changed = await render("operon", DRY_NS, ["--set", "steps.priorityClassName=genomics-batch"]);
  for (const component of ["api-server", "operator"]) {
    const checksum = (docs: K8sObject[]) => deployment(docs, component).spec.template.metadata.annotations?.["checksum/config"];
    t.ok(checksum(noValues.docs), `${component}: a checksum annotation`);
    t.not(checksum(changed.docs), checksum(noValues.docs), `${component}: it changes with steps.priorityClassName`);
  }
});

t.test("steps: the schema checks what the operator checks (core/kubernetes/step-pods.ts), with the same patterns", async (t) => {
  const steps = valuesSchema.properties?.steps?.properties ?? {};
  const same = (pattern: string | undefined, re: RegExp, what: string) => t.equal(new RegExp(pattern ?? "(none)").source, re.source, `${what}: the operator's pattern`);
  same(valuesSchema.definitions?.quantity?.pattern, QUANTITY, "quantities");
  same(valuesSchema.definitions?.image?.pattern, IMAGE_REF, "tool images");
  same(steps.imageRegistry?.pattern, REGISTRY_PREFIX, "imageRegistry");
  t.same(Object.keys(steps.tools?.properties ?? {}).sort(), [...defaultCatalogue.ids], "steps.tools takes exactly the catalogue's tool ids");
  // The same documents, both ways: what the schema refuses, the operator refuses too.
  const docs: Array<[string, Record<string, unknown>]> = [
    ["a quantity", { resources: { requests: { cpu: "lots" } } }],
    ["a resource name", { resources: { requests: { gpu: "1" } } }],
    ["a tool", { tools: { "bwa-mem": { image: "registry.lab/bwa:1" } } }],
    ["an image", { tools: { annovar: { image: "https://registry.lab/annovar" } } }],
    ["an empty image", { tools: { annovar: { image: "" } } }],
    ["a mirror", { imageRegistry: "https://harbor.lab" }],
    ["a label key", { nodeSelector: { "Bad Key": "x" } }],
    ["a label value", { nodeSelector: { pool: "a b" } }],
    ["a toleration", { tolerations: [{ operator: "Maybe" }] }],
    ["a service account", { serviceAccountName: "Step_Runner" }],
    ["a pull secret", { imagePullSecrets: [{ name: "" }] }],
    ["a volume name", { referenceVolumes: [{ name: "GRCh38", volume: { nfs: { server: "nfs", path: "/ref" } } }] }],
    ["a 60-character volume name", { referenceVolumes: [{ name: "a".repeat(60), volume: { nfs: { server: "nfs", path: "/ref" } } }] }],
    ["a volume source", { referenceVolumes: [{ name: "grch38", volume: { persistentVolumeclaim: { claimName: "ref" } } }] }],
    ["two volume sources", { referenceVolumes: [{ name: "grch38", volume: { nfs: { server: "nfs", path: "/a" }, hostPath: { path: "/a" } } }] }],
    ["an unknown key", { nodeselector: {} }],
  ];
  for (const [what, doc] of docs) {
    t.notOk(StepPodConfigSchema.safeParse(doc).success, `${what}: the operator refuses it`);
    const r = await helm(["template", "operon", chartDir, "--set-json", `steps=${JSON.stringify(doc)}`]);
    t.not(r.code, 0, `${what}: the chart refuses it`);
  }
});

t.test("the chart's CRD is crds/pipelinerun.yaml", async (t) => {
  const [inChart, generated] = await Promise.all([readFile(join(chartDir, "crds", "pipelinerun.yaml"), "utf8"), readFile(join(repo, "crds", "pipelinerun.yaml"), "utf8")]);
  t.equal(inChart, generated, "charts/operon/crds/pipelinerun.yaml differs from crds/pipelinerun.yaml: run `make crds`");
  const withCrds = await render("operon", "ns", [...BUCKET_FLAG, "--include-crds"]);
  t.same(ofKind(withCrds.docs, "CustomResourceDefinition"), [parse(generated) as unknown], "helm installs exactly that CRD");
});

t.test("least privilege and pod security, read from the rendered objects", async (t) => {
  for (const [name, { docs }] of Object.entries(renders)) {
    t.test(name, async (t) => {
      t.same(docs.filter((d) => d.kind === "ClusterRole" || d.kind === "ClusterRoleBinding").map((d) => d.metadata.name), [], "no ClusterRole or ClusterRoleBinding");
      const roles = ofKind<K8sObject & { rules: Rule[] }>(docs, "Role");
      t.equal(roles.length, 2, "a Role for the api-server and one for the operator");
      for (const role of roles) {
        for (const [i, rule] of role.rules.entries()) {
          for (const field of ["apiGroups", "resources", "verbs"] as const) t.notOk(rule[field]?.includes("*"), `${role.metadata.name} rule ${i}: no * in ${field}`);
          t.ok(rule.resources?.length && rule.verbs?.length, `${role.metadata.name} rule ${i}: resources and verbs listed`);
        }
      }
      const bindings = ofKind<K8sObject & { roleRef: { kind: string; name: string }; subjects: Array<{ kind: string; name: string; namespace?: string }> }>(docs, "RoleBinding");
      const accounts = ofKind(docs, "ServiceAccount").map((s) => s.metadata.name);
      const deployments = ofKind<Deployment>(docs, "Deployment");
      t.same(deployments.map((d) => d.metadata.labels?.["app.kubernetes.io/component"]).sort(), ["api-server", "operator"]);
      for (const d of deployments) {
        const pod = d.spec.template.spec;
        const sa = pod.serviceAccountName ?? "";
        t.ok(accounts.includes(sa), `${d.metadata.name}: its ServiceAccount ${sa} is rendered`);
        const binding = bindings.find((b) => b.subjects.some((s) => s.kind === "ServiceAccount" && s.name === sa && s.namespace === DRY_NS));
        t.ok(binding && binding.roleRef.kind === "Role" && roles.some((r) => r.metadata.name === binding.roleRef.name), `${d.metadata.name}: ${sa} is bound to a rendered Role`);
        t.notOk(pod.hostNetwork || pod.hostPID || pod.hostIPC, `${d.metadata.name}: no host namespaces`);
        t.notOk(pod.volumes?.some((v) => v.hostPath), `${d.metadata.name}: no hostPath volume`);
        for (const c of containersOf(d)) {
          const where = `${d.metadata.name}/${c.name}`;
          const sc = c.securityContext ?? {};
          t.equal(sc.runAsNonRoot ?? pod.securityContext?.runAsNonRoot, true, `${where}: runAsNonRoot`);
          t.not(sc.runAsUser ?? pod.securityContext?.runAsUser, 0, `${where}: not uid 0`);
          t.equal(sc.readOnlyRootFilesystem, true, `${where}: readOnlyRootFilesystem`);
          t.equal(sc.allowPrivilegeEscalation, false, `${where}: allowPrivilegeEscalation false`);
          t.notOk(sc.privileged, `${where}: not privileged`);
          t.same(sc.capabilities?.drop, ["ALL"], `${where}: drops ALL capabilities`);
          t.same(sc.capabilities?.add ?? [], [], `${where}: adds none`);
          t.equal((sc.seccompProfile ?? pod.securityContext?.seccompProfile)?.type, "RuntimeDefault", `${where}: seccomp RuntimeDefault`);
          t.ok(c.resources?.requests?.cpu, `${where}: a cpu request`);
          t.ok(c.resources?.requests?.memory, `${where}: a memory request`);
          t.ok(c.resources?.limits?.memory, `${where}: a memory limit`);
        }
      }
      for (const component of ["api-server", "operator"]) {
        const d = deployment(docs, component);
        const c = mainContainer(d);
        t.equal(c.command, undefined, `${component}: the image's entry (operon) runs`);
        t.same(c.args, [component], `${component}: args`);
        t.equal(c.readinessProbe?.httpGet?.path, "/readyz", `${component}: readiness on /readyz`);
        t.equal(c.livenessProbe?.httpGet?.path, "/healthz", `${component}: liveness on /healthz`);
        for (const probe of [c.readinessProbe, c.livenessProbe, c.startupProbe]) {
          if (!probe) continue;
          t.ok(c.ports?.some((p) => p.name === probe.httpGet?.port || p.containerPort === probe.httpGet?.port), `${component}: probe port ${String(probe.httpGet?.port)} is a container port`);
        }
        const port = c.env?.find((e) => e.name === "PORT")?.value;
        t.equal(Number(port), c.ports?.[0]?.containerPort, `${component}: PORT is the container port`);
      }
    });
  }

  t.test("defaults: no credentials Secret (the pod's cloud identity), optional objects off", async (t) => {
    const kinds = defaults.docs.map((d) => d.kind);
    for (const k of ["Ingress", "ServiceMonitor"]) t.notOk(kinds.includes(k), `no ${k}`);
    t.same(ofKind(defaults.docs, "NetworkPolicy").map((p) => p.metadata.name), ["operon-steps"], "only the step pods' NetworkPolicy (on by default)");
    t.same(ofKind(defaults.docs, "Secret").map((s) => s.metadata.name), ["operon-signing"], "only the generated signing Secret");
    const api = mainContainer(deployment(defaults.docs, "api-server"));
    t.notOk(api.envFrom?.some((e) => e.secretRef), "no S3 credentials Secret in envFrom");
    const cm = configMap(defaults.docs, "operon-config");
    t.equal(cm.data.OPERON_S3_CREDENTIALS_SECRET, undefined, "step Jobs get no credentials Secret either");
    t.equal(ofKind(defaults.docs, "PodDisruptionBudget").length, 2, "PodDisruptionBudgets on by default");
  });

  t.test("all-on: every option shows in the objects", async (t) => {
    const docs = allOn.docs;
    const ingress = ofKind<K8sObject & { spec: { ingressClassName?: string; tls?: Array<{ hosts: string[]; secretName: string }>; rules: Array<{ host: string }> } }>(docs, "Ingress");
    t.equal(ingress.length, 1);
    t.equal(ingress[0]?.spec.ingressClassName, "nginx");
    t.same(ingress[0]?.spec.tls, [{ hosts: ["operon.example.org"], secretName: "operon-tls" }]);
    t.equal(ingress[0]?.metadata.annotations?.["cert-manager.io/cluster-issuer"], "letsencrypt");
    // The API, the viewer links (/view/…) and MCP (/mcp) all reach the api-server through it.
    const paths = (ingress[0]?.spec as unknown as { rules: Array<{ http: { paths: Array<{ path: string; pathType: string; backend: { service: { name: string } } }> } }> }).rules[0]?.http.paths ?? [];
    for (const p of ["/v1/workspaces", "/view/x", "/mcp"]) {
      t.ok(paths.some((r) => r.pathType === "Prefix" && p.startsWith(r.path) && r.backend.service.name === "operon-api"), `${p} is routed to the api-server`);
    }
    const policies = ofKind<K8sObject & { spec: { ingress: Array<{ from?: unknown[] }> } }>(docs, "NetworkPolicy");
    t.equal(policies.length, 3, "a NetworkPolicy for each Deployment, and the step pods' one");
    t.equal(policies.find((p) => p.metadata.name === "operon-api")?.spec.ingress[0]?.from?.length, 2, "the API only from the two namespace selectors");
    const monitors = ofKind(docs, "ServiceMonitor");
    t.equal(monitors.length, 1);
    t.equal(monitors[0]?.metadata.labels?.release, "prometheus");
    t.same(ofKind<K8sObject & { spec: { minAvailable: number } }>(docs, "PodDisruptionBudget").map((p) => p.spec.minAvailable), [2, 2]);
    t.same(ofKind(docs, "Secret").map((s) => s.metadata.name).sort(), ["operon-s3", "operon-signing"]);
    for (const sa of ofKind(docs, "ServiceAccount")) t.equal(sa.metadata.annotations?.["eks.amazonaws.com/role-arn"], "arn:aws:iam::123456789012:role/operon");
    const apiSvc = ofKind<K8sObject & { spec: { type: string; ports: Array<{ port: number }> } }>(docs, "Service").find((s) => s.metadata.name === "operon-api");
    t.equal(apiSvc?.spec.type, "LoadBalancer");
    t.equal(apiSvc?.spec.ports[0]?.port, 443);
    for (const component of ["api-server", "operator"]) {
      const d = deployment(docs, component);
      const pod = d.spec.template.spec;
      t.equal(d.spec.replicas, 3);
      t.equal(pod.nodeSelector?.["kubernetes.io/os"], "linux", `${component}: nodeSelector`);
      t.equal(pod.tolerations?.length, 1, `${component}: tolerations`);
      t.ok(pod.affinity, `${component}: affinity`);
      t.same(pod.imagePullSecrets, [{ name: "regcred" }]);
      t.equal(d.spec.template.metadata.annotations?.["example.org/team"], "genomics", `${component}: pod annotations`);
      const c = mainContainer(d);
      t.equal(c.image, "registry.example.org/genomics/operon:0.1.0-test");
      t.equal(c.imagePullPolicy, "Always");
      t.same(c.envFrom?.map((e) => e.secretRef?.name ?? e.configMapRef?.name), ["operon-config", "operon-s3"]);
    }
    t.equal(mainContainer(deployment(docs, "api-server")).ports?.[0]?.containerPort, 9090);
    t.equal(mainContainer(deployment(docs, "operator")).ports?.[0]?.containerPort, 9091);
    const cm = configMap(docs, "operon-config");
    t.match(cm.data, {
      S3_BUCKET: "operon-data", S3_REGION: "eu-west-1", S3_ENDPOINT: "https://s3.eu-west-1.example.org", S3_FORCE_PATH_STYLE: "true",
      OPERON_STEP_S3_ENDPOINT: "http://minio.storage.svc.cluster.local:9000", OPERON_S3_CREDENTIALS_SECRET: "operon-s3",
      OPERON_IMAGE: "registry.example.org/genomics/operon:0.1.0-test", OPERON_ORG_CONCURRENCY: "12", OPERON_KEY_CACHE_TTL_SECONDS: "10",
      OPERON_RATE_LIMIT_PER_MINUTE: "1200", OPERON_PUBLIC_URL: "https://operon.example.org", OPERON_LEASE_DURATION_SECONDS: "20",
      OPERON_OPERATOR_WORKERS: "16", OPERON_JOB_TTL_SECONDS: "3600", LOG_LEVEL: "debug",
    });
    const parsed = parseConfig({ ...cm.data, OPERON_SIGNING_SECRET: "x".repeat(32) });
    t.ok(parsed.ok, `the ConfigMap is a valid Operon configuration${parsed.ok ? "" : `: ${parsed.message}`}`);
  });

  t.test("existing Secrets: none rendered, the Deployments use the named ones", async (t) => {
    const docs = existingSecrets.docs;
    t.same(ofKind(docs, "Secret"), [], "no Secret rendered");
    for (const component of ["api-server", "operator"]) {
      const c = mainContainer(deployment(docs, component));
      t.same(c.envFrom?.map((e) => e.secretRef?.name ?? e.configMapRef?.name), ["operon-config", "my-s3-credentials"]);
      t.same(c.env?.find((e) => e.name === "OPERON_SIGNING_SECRET")?.valueFrom?.secretKeyRef, { name: "my-signing-secret", key: "OPERON_SIGNING_SECRET" });
    }
    const cm = configMap(docs, "operon-config");
    t.equal(cm.data.OPERON_S3_CREDENTIALS_SECRET, "my-s3-credentials", "step Jobs read the same Secret");
  });
});

t.test("step pods: a NetworkPolicy, on by default, lets them reach only DNS and the object store", async (t) => {
  const tcp = (...ports: number[]) => ports.map((port) => ({ port, protocol: "TCP" }));
  const kubeDns = {
    ports: [{ port: 53, protocol: "UDP" }, { port: 53, protocol: "TCP" }],
    to: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } }, podSelector: { matchLabels: { "k8s-app": "kube-dns" } } }],
  };
  type Egress = NonNullable<NetworkPolicy["spec"]["egress"]>;
  const fixture = parse(await readFile(join(fixtures, "all-on.values.yaml"), "utf8")) as {
    stepNetworkPolicy: { objectStore: { to: PolicyPeer[]; ports: PolicyPort[] }; dns: { to: PolicyPeer[]; ports: PolicyPort[] }; extraEgress: Egress };
  };
  const configured = fixture.stepNetworkPolicy;
  const allOnEgress: Egress = [{ ports: configured.dns.ports, to: configured.dns.to }, { ports: configured.objectStore.ports, to: configured.objectStore.to }, ...configured.extraEgress];
  // Defaults: the cluster DNS, and the object store at any address on 443 and 9000 only.
  const byDefault: Egress = [kubeDns, { ports: tcp(443, 9000) }];
  const expected: Record<string, Egress> = { "no values": byDefault, defaults: byDefault, "all-on": allOnEgress, "existing Secrets": allOnEgress };
  const otherStep = stepPodLabels(buildJob({ ...stepTask, runId: "run-01jz9999999999999999999999", organization: "Globex Corporation", stepId: "Sort_BAM", attempt: 3 },
    { namespace: "ns", image: "operon:test", toolImage: "quay.io/biocontainers/samtools:1.21", storageEnv: {}, credentialsSecret: "s3" }));
  const { [LABEL.step]: _step, ...notAStep } = stepLabels;

  for (const [name, { docs }] of Object.entries(renders)) {
    t.test(name, async (t) => {
      const policies = stepPolicies(docs);
      t.equal(policies.length, 1, "exactly one NetworkPolicy applies to step pods");
      const policy = policies[0];
      if (!policy) return;
      const { spec } = policy;
      t.strictSame(spec.podSelector, { matchExpressions: [{ key: LABEL.run, operator: "Exists" }, { key: LABEL.step, operator: "Exists" }] },
        "it selects pods by the labels core/kubernetes/jobs.ts puts on every step pod, whatever their values");
      t.ok(selects(spec.podSelector, otherStep), "the step pod of another run, organization, step and attempt too");
      for (const d of ofKind<Deployment>(docs, "Deployment")) t.notOk(selects(spec.podSelector, d.spec.template.metadata.labels ?? {}), `not the ${d.metadata.name} pods`);
      t.notOk(selects(spec.podSelector, notAStep), `not a pod without ${LABEL.step}`);
      t.strictSame(spec.policyTypes, ["Ingress", "Egress"], "isolated for ingress and egress");
      t.equal(spec.ingress, undefined, "no ingress rule: nothing may connect to a step pod");
      t.strictSame(spec.egress, expected[name], "egress to DNS and the object store only (and the configured extra rule)");
      t.ok(spec.egress?.every((rule) => rule.ports?.length && rule.ports.every((p) => p.port !== undefined)), "every egress rule names its ports");
    });
  }

  t.test("object-store ports: 443 and 9000, plus the port of the endpoint step pods use; exactly the given ones otherwise", async (t) => {
    const cases: Array<[string[], number[]]> = [
      [["--set", "s3.endpoint=https://minio.example.org"], [443, 9000]],
      [["--set", "s3.endpoint=http://minio.storage.svc:9000"], [443, 9000]],
      [["--set", "s3.endpoint=http://store.example.org"], [443, 9000, 80]],
      [["--set", "s3.endpoint=https://store.example.org:8443"], [443, 9000, 8443]],
      [["--set", "s3.endpoint=https://s3.example.org:8443", "--set", "s3.stepEndpoint=http://seaweedfs.storage.svc.cluster.local:8333"], [443, 9000, 8333]],
      [["--set", "s3.stepEndpoint=http://[fd00::10]:7480"], [443, 9000, 7480]],
      [["--set", "s3.endpoint=http://minio:9000", "--set-json", 'stepNetworkPolicy.objectStore.ports=[{"port":9000,"protocol":"TCP"}]'], [9000]],
    ];
    for (const [flags, ports] of cases) {
      const { docs } = await render("operon", "ns", [...BUCKET_FLAG, ...flags]);
      const egress = stepPolicies(docs)[0]?.spec.egress;
      t.equal(egress?.length, 2, `${flags.join(" ")}: DNS and the object store`);
      t.strictSame(egress?.[1], { ports: tcp(...ports) }, `${flags.join(" ")}: the object store at any address on ${ports.join(", ")}`);
    }
  });

  t.test("stepNetworkPolicy.enabled=false removes it", async (t) => {
    const off = await render("operon", DRY_NS, [...BUCKET_FLAG, "--set", "stepNetworkPolicy.enabled=false"]);
    t.same(ofKind(off.docs, "NetworkPolicy"), [], "no NetworkPolicy");
    t.same(off.docs.map((d) => `${d.kind}/${d.metadata.name}`), defaults.docs.filter((d) => d.kind !== "NetworkPolicy").map((d) => `${d.kind}/${d.metadata.name}`), "every other object still rendered");
    const allOnOff = await render("operon", DRY_NS, ["-f", join(fixtures, "all-on.values.yaml"), "--set", "stepNetworkPolicy.enabled=false"]);
    t.same(stepPolicies(allOnOff.docs), [], "none for step pods with every other option on");
    t.same(ofKind(allOnOff.docs, "NetworkPolicy").map((p) => p.metadata.name).sort(), ["operon-api", "operon-operator"], "the Deployments' NetworkPolicies stay");
  });
});

t.test("every render is accepted by the API server in a restricted namespace, without a warning", async (t) => {
  await restrictedNamespace(DRY_NS);
  // The ServiceMonitor kind belongs to the Prometheus Operator, which the test cluster does
  // not have: a minimal stand-in CRD (test/chart/servicemonitor-crd.yaml) makes it known.
  await kubectlOk(["apply", "--server-side", "-f", join(fixtures, "servicemonitor-crd.yaml")]);
  await kubectlOk(["wait", "--for=condition=Established", "--timeout=30s", "crd/servicemonitors.monitoring.coreos.com"]);
  for (const [name, { text, docs }] of Object.entries(renders)) {
    const r = await env.kubectl(["apply", "--server-side", "--dry-run=server", "--field-manager=helm", "-n", DRY_NS, "-f", "-"], { input: text });
    t.equal(r.code, 0, `${name}: accepted (${r.stderr.trim()})`);
    t.notMatch(r.stderr, WARNING, `${name}: no warning`);
    const applied = r.stdout.trim().split("\n").filter((l) => / serverside-applied \(server dry run\)$/.test(l));
    t.equal(applied.length, docs.length, `${name}: all ${docs.length} objects applied`);
    const policy = stepPolicies(docs)[0]?.metadata.name ?? "(none rendered)";
    t.ok(applied.includes(`networkpolicy.networking.k8s.io/${policy} serverside-applied (server dry run)`), `${name}: the step pods' NetworkPolicy ${policy} among them`);
  }
  // The same apply does warn about a pod that is not restricted (the check above can fail).
  const insecure = structuredClone(deployment(defaults.docs, "api-server"));
  delete insecure.spec.template.spec.securityContext;
  delete mainContainer(insecure).securityContext;
  const r = await env.kubectl(["apply", "--server-side", "--dry-run=server", "-n", DRY_NS, "-f", "-"], { input: JSON.stringify(insecure) });
  t.match(r.stderr, /would violate PodSecurity "restricted:latest"/, "a Deployment without the security settings is warned about");
});

// ---------------------------------------------------------------------------------------------
// Install: a real apply, RBAC through `kubectl auth can-i`, then the two processes.

const NS = "operon-install";
const install = await render("operon", NS, [
  "--set", `s3.bucket=${s3.bucket}`, "--set", `s3.endpoint=${s3.endpoint}`, "--set", "s3.forcePathStyle=true",
  "--set", `s3.region=${s3.region}`, "--set", `s3.accessKeyId=${s3.accessKeyId}`, "--set", `s3.secretAccessKey=${s3.secretAccessKey}`,
]);
const apiDeployment = deployment(install.docs, "api-server");
const operatorDeployment = deployment(install.docs, "operator");
const apiSa = apiDeployment.spec.template.spec.serviceAccountName ?? "";
const operatorSa = operatorDeployment.spec.template.spec.serviceAccountName ?? "";

t.test("install: a real apply, and the ServiceAccounts may do what they need and no more", async (t) => {
  await restrictedNamespace(NS);
  // The chart's CRDs (already installed by the test environment from crds/: the same file).
  const crds = await env.kubectl(["apply", "--server-side", "--field-manager=helm", "-f", join(chartDir, "crds")]);
  t.equal(crds.code, 0, crds.stderr);
  const r = await env.kubectl(["apply", "--server-side", "--field-manager=helm", "-n", NS, "-f", "-"], { input: install.text });
  t.equal(r.code, 0, r.stderr);
  t.notMatch(r.stderr, WARNING, "no warning");
  t.equal(r.stdout.trim().split("\n").filter((l) => / serverside-applied$/.test(l)).length, install.docs.length, "every object applied");
  const stepPolicy = stepPolicies(install.docs)[0];
  const stored = JSON.parse(await kubectlOk(["get", "networkpolicy", stepPolicy?.metadata.name ?? "(none rendered)", "-n", NS, "-o", "json"])) as NetworkPolicy;
  t.strictSame(stored.spec, stepPolicy?.spec, "the step pods' NetworkPolicy is stored as rendered");

  const canI = async (sa: string, verb: string, resource: string, extra: string[] = []) => {
    const res = await env.kubectl(["auth", "can-i", `--as=system:serviceaccount:${NS}:${sa}`, verb, resource, "-n", NS, ...extra]);
    return res.stdout.trim();
  };
  const expect: Array<[string, string, string, string[], "yes" | "no"]> = [
    [apiSa, "create", "jobs.batch", [], "no"],
    [apiSa, "create", "pipelineruns.operon.dev", [], "yes"],
    [apiSa, "watch", "pipelineruns.operon.dev", [], "yes"],
    [apiSa, "patch", "pipelineruns.operon.dev", [], "yes"],
    [apiSa, "delete", "pipelineruns.operon.dev", [], "no"],
    [apiSa, "get", "secrets", [], "no"],
    [apiSa, "get", "pods", ["--subresource=log"], "no"],
    // Compute claims: Leases a replica creates, renews (patch), watches and deletes; never replaces.
    [apiSa, "create", "leases.coordination.k8s.io", [], "yes"],
    [apiSa, "watch", "leases.coordination.k8s.io", [], "yes"],
    [apiSa, "update", "leases.coordination.k8s.io/operon-operator", [], "no"],
    [operatorSa, "create", "jobs.batch", [], "yes"],
    [operatorSa, "patch", "pipelineruns.operon.dev", ["--subresource=status"], "yes"],
    [operatorSa, "update", "pipelineruns.operon.dev", ["--subresource=status"], "yes"],
    // Jobs are created with an owner reference that blocks the PipelineRun's deletion; with
    // the OwnerReferencesPermissionEnforcement admission plugin that needs this permission.
    [operatorSa, "update", "pipelineruns.operon.dev", ["--subresource=finalizers"], "yes"],
    [operatorSa, "create", "pipelineruns.operon.dev", [], "no"],
    // Finished runs past OPERON_RUN_TTL_DAYS, and Jobs stopped by cancel or timeout, are deleted.
    [operatorSa, "delete", "pipelineruns.operon.dev", [], "yes"],
    [operatorSa, "delete", "jobs.batch", [], "yes"],
    [operatorSa, "get", "secrets", [], "no"],
    [operatorSa, "get", "pods", ["--subresource=log"], "yes"],
    [operatorSa, "update", "leases.coordination.k8s.io/operon-operator", [], "yes"],
    [operatorSa, "update", "leases.coordination.k8s.io/someone-else", [], "no"],
    [operatorSa, "patch", "leases.coordination.k8s.io/operon-claim-x", [], "yes"],
    [operatorSa, "create", "leases.coordination.k8s.io/operon-claim-x", [], "yes"],
  ];
  for (const [sa, verb, resource, extra, answer] of expect) {
    t.equal(await canI(sa, verb, resource, extra), answer, `${sa}: ${verb} ${resource} ${extra.join(" ")} → ${answer}`);
  }
  // Namespaced only: nothing in another namespace.
  for (const sa of [apiSa, operatorSa]) {
    const res = await env.kubectl(["auth", "can-i", `--as=system:serviceaccount:${NS}:${sa}`, "list", "pipelineruns.operon.dev", "-n", "default"]);
    t.equal(res.stdout.trim(), "no", `${sa}: nothing in namespace default`);
  }
});

t.test("install: a step Job with every steps value (its own ServiceAccount among them) needs no permission beyond the chart's", async (t) => {
  // The operator creates Jobs, never pods: the Job controller creates the pods, with the
  // template's serviceAccountName, priorityClassName and runtimeClassName (which must exist by
  // then). So the operator's Role is enough, whatever the step pods run as.
  const parsed = StepPodConfigSchema.safeParse(allOnValues.steps);
  if (!parsed.success) throw new Error(`all-on steps: ${parsed.error.message}`);
  // The restricted Pod Security Standard admits these volume sources only (no nfs, no hostPath).
  const restrictedVolumes = ["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"];
  const stepPods = { ...parsed.data, referenceVolumes: (parsed.data.referenceVolumes ?? []).filter((v) => Object.keys(v.volume).every((k) => restrictedVolumes.includes(k))) };
  t.ok(stepPods.referenceVolumes.length >= 2 && stepPods.serviceAccountName && stepPods.priorityClassName && stepPods.runtimeClassName && stepPods.imagePullSecrets?.length, "the Job carries them");
  const job = buildJob(stepTask, { namespace: NS, image: "operon:test", toolImage: "quay.io/biocontainers/bwa:0.7.18", storageEnv: { OPERON_STORAGE: "s3", S3_BUCKET: "b" }, credentialsSecret: "operon-s3", stepPods });
  const spec = (job.spec as { template: { spec: PodSpec & { priorityClassName?: string; runtimeClassName?: string } } }).template.spec;
  t.equal(spec.serviceAccountName, "operon-steps");
  t.equal(spec.priorityClassName, "genomics-batch");
  const create = (sa: string, body: unknown) => env.kubectl(["create", "--dry-run=server", `--as=system:serviceaccount:${NS}:${sa}`, "-n", NS, "-f", "-"], { input: JSON.stringify(body) });
  const asOperator = await create(operatorSa, job);
  t.equal(asOperator.code, 0, `the operator's ServiceAccount may create it: ${asOperator.stderr}`);
  t.notMatch(asOperator.stderr, WARNING, "and its pod template is restricted-compliant");
  const asApi = await create(apiSa, job);
  t.match(asApi.stderr, /forbidden/i, "the api-server's may not (the check can fail)");
  // An nfs reference volume is not admitted where the restricted level is enforced (values.yaml says so).
  const withNfs = buildJob(stepTask, { namespace: NS, image: "operon:test", toolImage: "quay.io/biocontainers/bwa:0.7.18", storageEnv: {}, stepPods: parsed.data });
  t.match((await create(operatorSa, withNfs)).stderr, /would violate PodSecurity "restricted:latest": restricted volume types/, "an nfs volume: warned as not restricted");
});

interface Proc { name: string; child: ChildProcess; port: number; output: () => string; exited: Promise<number | null> }
const procs: Proc[] = [];
t.teardown(() => { for (const p of procs) if (p.child.exitCode === null) p.child.kill("SIGKILL"); });

async function portFree(port: number, host: string): Promise<boolean> {
  const s = createServer();
  return new Promise((resolve) => {
    s.once("error", () => resolve(false));
    s.listen(port, host, () => s.close(() => resolve(true)));
  });
}

async function readSecret(name: string): Promise<Record<string, string>> {
  const secret = JSON.parse(await kubectlOk(["get", "secret", name, "-n", NS, "-o", "json"])) as { data?: Record<string, string> };
  return Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, "base64").toString("utf8")]));
}

/** Where a Deployment was rendered for: its objects, namespace, and where its Secrets are read. */
interface Rendering { docs: K8sObject[]; namespace: string; secrets: "cluster" | "render" }

/** A Secret's keys: as stored in the API server, or as rendered (a render that is not applied). */
async function secretOf(name: string, from: Rendering): Promise<Record<string, string>> {
  if (from.secrets === "cluster") return readSecret(name);
  const secret = ofKind<K8sObject & { data?: Record<string, string>; stringData?: Record<string, string> }>(from.docs, "Secret").find((x) => x.metadata.name === name);
  if (!secret) throw new Error(`Secret ${name} is not rendered`);
  return { ...Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, "base64").toString("utf8")])), ...secret.stringData };
}

type Volume = { name: string; configMap?: { name: string; items?: Array<{ key: string; path: string }> }; emptyDir?: unknown };
type Mount = { name: string; mountPath: string; readOnly?: boolean };

/**
 * The environment the kubelet would give the Deployment's container: `envFrom` (the rendered
 * ConfigMap; Secrets as stored in the API server, or as rendered), then `env` (values, Secret
 * keys, the downward API), later entries winning as in Kubernetes. Its ConfigMap volumes are
 * written under `filesDir` as the kubelet would mount them, and a value naming a file in such a
 * mount (OPERON_STEP_POD_CONFIG=/etc/operon/steps.json) names that copy: the only change
 * being out of cluster needs.
 */
async function podEnvironment(d: Deployment, podName: string, filesDir: string, from: Rendering = { docs: install.docs, namespace: NS, secrets: "cluster" }): Promise<Record<string, string>> {
  const c = mainContainer(d);
  const out: Record<string, string> = {};
  for (const e of c.envFrom ?? []) {
    if (e.configMapRef) {
      Object.assign(out, configMap(from.docs, e.configMapRef.name).data);
    } else if (e.secretRef) {
      Object.assign(out, await secretOf(e.secretRef.name, from));
    } else {
      throw new Error(`${d.metadata.name}: unsupported envFrom ${JSON.stringify(e)}`);
    }
  }
  for (const e of c.env ?? []) {
    if (e.value !== undefined) out[e.name] = e.value;
    else if (e.valueFrom?.secretKeyRef) {
      const { name, key } = e.valueFrom.secretKeyRef;
      const value = (await secretOf(name, from))[key];
      if (value === undefined) throw new Error(`${d.metadata.name}: Secret ${name} has no key ${key}`);
      out[e.name] = value;
    } else if (e.valueFrom?.fieldRef?.fieldPath === "metadata.name") out[e.name] = podName;
    else if (e.valueFrom?.fieldRef?.fieldPath === "metadata.namespace") out[e.name] = from.namespace;
    else throw new Error(`${d.metadata.name}: unsupported env ${JSON.stringify(e)}`);
  }
  const volumes = (d.spec.template.spec.volumes ?? []) as Volume[];
  for (const m of (c as Container & { volumeMounts?: Mount[] }).volumeMounts ?? []) {
    const source = volumes.find((v) => v.name === m.name)?.configMap;
    if (!source) continue;
    const dir = join(filesDir, podName, m.mountPath);
    await mkdir(dir, { recursive: true });
    const data = configMap(from.docs, source.name).data;
    for (const { key, path } of source.items ?? Object.keys(data).map((k) => ({ key: k, path: k }))) {
      const text = data[key];
      if (text === undefined) throw new Error(`${d.metadata.name}: ConfigMap ${source.name} has no key ${key}`);
      await writeFile(join(dir, path), text);
    }
    for (const [k, v] of Object.entries(out)) if (v.startsWith(`${m.mountPath}/`)) out[k] = join(dir, v.slice(m.mountPath.length + 1));
  }
  return out;
}

/** A kubeconfig that authenticates as the ServiceAccount, with a token from the TokenRequest API. */
async function kubeconfigFor(sa: string): Promise<string> {
  const token = (await kubectlOk(["create", "token", sa, "-n", NS, "--duration=1h"])).trim();
  const path = join(env.dir, `kubeconfig-${sa}`);
  await writeFile(path, `apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: ${env.server}
    certificate-authority-data: ${Buffer.from(env.ca).toString("base64")}
users:
- name: ${sa}
  user:
    token: ${token}
contexts:
- name: ${sa}
  context:
    cluster: test
    user: ${sa}
    namespace: ${NS}
current-context: ${sa}
`, { mode: 0o600 });
  return path;
}

/**
 * The Deployment's container, out of cluster: its args as `operon` arguments, its environment,
 * plus only what being out of cluster needs — KUBECONFIG (the in-cluster service-account token
 * mount does not exist here) and, only when the rendered PORT is taken on this machine,
 * HOST=127.0.0.1 with a free port instead (the rendered PORT and HOST are kept otherwise).
 */
async function runDeployment(d: Deployment, podName: string): Promise<{ proc: Proc; env: Record<string, string>; renderedPort: boolean }> {
  const container = mainContainer(d);
  const podEnv = await podEnvironment(d, podName, env.dir);
  const childEnv: Record<string, string> = { ...runtimeEnv(), ...podEnv, KUBECONFIG: await kubeconfigFor(d.spec.template.spec.serviceAccountName ?? "") };
  const renderedPort = await portFree(Number(podEnv.PORT), podEnv.HOST ?? "0.0.0.0");
  if (!renderedPort) {
    childEnv.HOST = "127.0.0.1";
    childEnv.PORT = String((await freePorts(1))[0] as number);
  }
  const child = spawn(process.execPath, [image.main, ...(container.args ?? [])], { cwd: image.app, env: childEnv, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout?.on("data", (c: Buffer) => { out += c.toString(); });
  child.stderr?.on("data", (c: Buffer) => { out += c.toString(); });
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  const proc: Proc = { name: d.metadata.name, child, port: Number(childEnv.PORT), output: () => out, exited };
  procs.push(proc);
  const health = d === apiDeployment ? "/readyz" : "/healthz";
  await until(`${proc.name} answering ${health}`, async () => {
    if (child.exitCode !== null) throw new Error(`${proc.name} exited (${child.exitCode}):\n${out}`);
    return (await httpStatus(`http://127.0.0.1:${proc.port}${health}`)) === 200;
  });
  return { proc, env: childEnv, renderedPort };
}

async function httpStatus(url: string): Promise<number | undefined> {
  try { return (await fetch(url)).status; } catch { return undefined; }
}

/** `operon <args>` with the api-server's environment, as `kubectl exec deploy/<api> -- operon …` would. */
async function operonCli(args: string[], childEnv: Record<string, string>): Promise<string> {
  const r = await run(process.execPath, [image.main, ...args], { env: childEnv, cwd: image.app });
  if (r.code !== 0) throw new Error(`operon ${args.join(" ")} failed (exit ${r.code}): ${r.stderr}`);
  return r.stdout;
}

/** A command run to its end, killed (and failed) if it outlives `ms`. */
function runToEnd(command: string, args: string[], opts: { env: NodeJS.ProcessEnv; cwd: string }, ms: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...opts, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => { stdout += c; });
    child.stderr.setEncoding("utf8").on("data", (c: string) => { stderr += c; });
    const timer = setTimeout(() => { child.kill("SIGKILL"); reject(new Error(`${args.join(" ")} still running after ${ms} ms:\n${stdout}${stderr}`)); }, ms);
    child.on("error", (err) => { clearTimeout(timer); reject(err); });
    child.on("close", (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }); });
  });
}

t.test("a first install with no values: the api-server and the operator stop at start naming s3.bucket, as their pod status shows", async (t) => {
  for (const component of ["api-server", "operator"]) {
    const d = deployment(noValues.docs, component);
    const c = mainContainer(d) as Container & { terminationMessagePolicy?: string };
    // The kubelet makes the end of the log the container's termination message (the last 80
    // lines or 2048 bytes), shown in `kubectl describe pod` and .status.containerStatuses[].lastState.terminated.message.
    t.equal(c.terminationMessagePolicy, "FallbackToLogsOnError", `${component}: its log becomes the termination message`);
    const podEnv = await podEnvironment(d, `operon-${component}-first`, env.dir, { docs: noValues.docs, namespace: DRY_NS, secrets: "render" });
    t.equal(podEnv.S3_BUCKET, undefined, `${component}: no bucket in its environment`);
    const r = await runToEnd(process.execPath, [image.main, ...(c.args ?? [])], { env: { ...runtimeEnv(), ...podEnv }, cwd: image.app }, 60_000);
    t.equal(r.code, 2, `${component}: exits 2 (invalid configuration)`);
    t.equal(r.stdout, "", `${component}: nothing else in its log`);
    t.equal(r.stderr, `operon ${component}: invalid configuration: S3_BUCKET: required when storage is S3 (cluster mode) — set the Helm value s3.bucket; `
      + "and S3 credentials: s3.existingSecret, or s3.accessKeyId and s3.secretAccessKey, or the pods' cloud identity (serviceAccount.annotations)\n",
    `${component}: one line naming the chart value`);
    t.ok(Buffer.byteLength(r.stderr) <= 2048, `${component}: all of it fits in the termination message`);
  }
});

t.test("core/helm-values.ts maps every variable the chart sets from a value, to a value values.yaml has", async (t) => {
  const set = new Set<string>();
  for (const { docs } of [allOn, existingSecrets]) {
    for (const k of Object.keys(configMap(docs, "operon-config").data)) set.add(k);
    for (const component of ["api-server", "operator"]) for (const e of mainContainer(deployment(docs, component)).env ?? []) set.add(e.name);
    for (const secret of ofKind<K8sObject & { stringData?: Record<string, string> }>(docs, "Secret")) if (secret.metadata.name === "operon-s3") for (const k of Object.keys(secret.stringData ?? {})) set.add(k);
  }
  // Set by the chart whatever the values (nothing a user sets), or from the downward API.
  const fixed = ["OPERON_MODE", "OPERON_CONFIG_SOURCE", "OPERON_STORAGE", "HOST", "AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED", "OPERON_POD_NAME", "OPERON_NAMESPACE", "OPERON_LEADER_ELECTION"];
  t.same([...set].filter((v) => !fixed.includes(v)).sort(), Object.keys(HELM_VALUE_OF).sort(), "the table has exactly the variables the chart sets from values");
  const has = (path: string) => path.split(".").reduce<unknown>((o, k) => (o !== null && typeof o === "object" && k in o ? (o as Record<string, unknown>)[k] : undefined), chartValues) !== undefined;
  for (const [variable, values] of Object.entries(HELM_VALUE_OF)) for (const v of values) t.ok(has(v), `${variable}: ${v} is a value of values.yaml`);
});

type Job = JobObject & { metadata: { name: string } };
interface RunView { id: string; status: string; steps: Array<{ step_id: string; status: string }> }

t.test("install: the api-server and the operator, with the rendered args and environment, run a pipeline", async (t) => {
  const api = await runDeployment(apiDeployment, "operon-api-7d9f8b6c5-abcde");
  const apiUrl = `http://127.0.0.1:${api.proc.port}`;
  if (api.renderedPort) t.equal(api.proc.port, mainContainer(apiDeployment).ports?.[0]?.containerPort, "the api-server listens on its rendered port");
  t.equal(await httpStatus(`${apiUrl}/readyz`), 200, "api-server /readyz (object storage reachable)");
  t.equal(await httpStatus(`${apiUrl}/healthz`), 200, "api-server /healthz");

  // What NOTES.txt tells the cluster's administrator to run first.
  t.match(await operonCli(["workspaces", "create", "--org", "acme", "--id", "default"], api.env), /created workspace acme\/default/);
  const { key } = JSON.parse(await operonCli(["keys", "create", "--org", "acme", "--scopes", "query,tools,conversations,files", "--json"], api.env)) as { key: string };
  t.match(key, /^sk_live_/);
  const auth = { authorization: `Bearer ${key}` };

  const form = new FormData();
  form.append("workspace_id", "default");
  form.append("path", "data");
  form.append("file", new Blob(["not really a BAM: the Job simulator does not read it\n"]), "in.bam");
  const up = await fetch(`${apiUrl}/v1/files/upload`, { method: "POST", headers: auth, body: form });
  t.equal(up.status, 201, "upload");
  const uploaded = ((await up.json()) as { data: { key: string } }).data.key;
  t.equal(uploaded, "data/in.bam");

  const step = (stepId: string, input: string, outputFile: string, dependsOn?: string[]) => ({
    stepId, toolName: "samtools", ...(dependsOn ? { dependsOn } : {}), parameters: { command: "depth", inputFile: input, outputFile },
  });
  const oneStep = { specVersion: "1.0", id: "depth", name: "Depth", inputs: [{ name: "bam", type: "file" }], steps: [step("depth", "${bam}", "d.tsv")] };
  const twoSteps = { ...oneStep, id: "depth2", steps: [step("depth", "${bam}", "d.tsv"), step("again", "${depth.outputFile}", "e.tsv", ["depth"])] };
  const submit = async (spec: unknown): Promise<string> => {
    const res = await fetch(`${apiUrl}/v1/pipelines`, {
      method: "POST", headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ workspace_id: "default", spec, input: { bam: uploaded } }),
    });
    const body = await res.text();
    if (res.status !== 201) throw new Error(`POST /v1/pipelines: ${res.status} ${body}`);
    return (JSON.parse(body) as { data: { id: string } }).data.id;
  };
  const getRun = async (id: string): Promise<RunView> => {
    const res = await fetch(`${apiUrl}/v1/pipelines/${id}?workspace_id=default`, { headers: auth });
    return ((await res.json()) as { data: RunView }).data;
  };
  const cancel = async (id: string) => {
    const res = await fetch(`${apiUrl}/v1/pipelines/${id}?workspace_id=default`, { method: "DELETE", headers: auth });
    return { status: res.status, body: await res.text() };
  };
  const untilStatus = (id: string, status: string) => until(`run ${id} ${status}`, async () => {
    const r = await getRun(id);
    if (r.status !== status && ["completed", "failed", "cancelled"].includes(r.status)) throw new Error(`run ${id} ended ${r.status}, not ${status}: ${JSON.stringify(r)}`);
    return r.status === status ? r : undefined;
  });

  // Cancelled before any operator has seen it (no status yet): the api-server's own permissions.
  const early = await submit(oneStep);
  const earlyCancel = await cancel(early);
  t.equal(earlyCancel.status, 200, `cancel before the operator saw the run: ${earlyCancel.body}`);

  const op = await runDeployment(operatorDeployment, "operon-operator-5c6d7e8f9-vwxyz");
  const opUrl = `http://127.0.0.1:${op.proc.port}`;
  if (op.renderedPort) t.equal(op.proc.port, mainContainer(operatorDeployment).ports?.[0]?.containerPort, "the operator listens on its rendered port");
  t.equal(await httpStatus(`${opUrl}/healthz`), 200, "operator /healthz");
  t.equal(await httpStatus(`${opUrl}/readyz`), 200, "operator /readyz");
  await until("the operator leads", async () => /^operon_operator_leader 1$/m.test(await (await fetch(`${opUrl}/metrics`)).text()), 20_000);

  const client = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: NS });
  t.teardown(() => client.close());
  const jobsOf = async (runId: string) => (await client.request<{ items: Job[] }>("GET", paths.jobs(NS), { query: { labelSelector: `operon.dev/run=${runId}` } })).items;
  await untilStatus(early, "cancelled");
  t.same(await jobsOf(early), [], "the run cancelled early never got a Job");

  const parsed = parseConfig(api.env);
  if (!parsed.ok) throw new Error(parsed.message);
  const store = await createStore(parsed.config, "");
  // The real Job controller makes the step's pod, the scheduler binds it to a kwok node, and the
  // stage-out stand-in uploads its outputs (nothing runs on a kwok node); kwok ends it.
  await env.addKwokNodes(1);
  const sim = await startStageOut({ client, namespace: NS, store });
  t.teardown(() => sim.stop());

  const runId = await submit(oneStep);
  const done = await untilStatus(runId, "completed");
  t.same(done.steps.map((s) => s.status), ["completed"]);
  const listed = await kubectlOk(["get", "pipelineruns", "-n", NS, runId, "--no-headers"]);
  t.match(listed, new RegExp(`^${runId}\\s+acme\\s+default\\s+depth\\s+completed\\s+1/1\\s`), "kubectl get pipelineruns shows it completed");
  await sim.stop();

  // The step Job: made by this operator process, with the rendered image and credentials
  // Secret, and a pod template that the restricted namespace admits.
  const jobs = await jobsOf(runId);
  t.equal(jobs.length, 1, "one Job");
  const job = jobs[0];
  const cm = configMap(install.docs, "operon-config");
  t.equal(job?.metadata.annotations?.["operon.dev/created-by"], op.env.OPERON_POD_NAME, "created by the operator process (its downward-API pod name)");
  const template = (job?.spec as { template: { metadata: Meta; spec: PodSpec } } | undefined)?.template;
  const helper = template?.spec.containers[0];
  t.equal(helper?.image, cm.data.OPERON_IMAGE, "the step helpers run the chart's image");
  t.same(helper?.envFrom, [{ secretRef: { name: cm.data.OPERON_S3_CREDENTIALS_SECRET } }], "and read the chart's S3 Secret");
  const pod = await env.kubectl(["create", "--dry-run=server", "-n", NS, "-f", "-"], {
    input: JSON.stringify({ apiVersion: "v1", kind: "Pod", metadata: { name: "step-pod-check", labels: template?.metadata.labels }, spec: template?.spec }),
  });
  t.equal(pod.code, 0, `a step pod is admitted in the restricted namespace: ${pod.stderr}`);
  t.notMatch(pod.stderr, WARNING);

  // The pods the step NetworkPolicy applies to, as the API server selects them: this step pod
  // (made by the operator), not the chart's own pods. In a namespace of their own, so the
  // running operator never sees them.
  const selection = "chart-step-selection";
  await restrictedNamespace(selection);
  const podOf = (name: string, tpl: { metadata: Meta; spec: PodSpec } | undefined) => ({ apiVersion: "v1", kind: "Pod", metadata: { name, labels: tpl?.metadata.labels }, spec: tpl?.spec });
  await kubectlOk(["create", "-n", selection, "-f", "-"], JSON.stringify({
    apiVersion: "v1", kind: "List",
    items: [podOf("step", template), podOf("api-server", apiDeployment.spec.template), podOf("operator", operatorDeployment.spec.template)],
  }));
  const stepPolicy = stepPolicies(install.docs)[0];
  t.ok(stepPolicy && selects(stepPolicy.spec.podSelector, template?.metadata.labels ?? {}), "the step NetworkPolicy applies to the operator's step pod");
  const selected = await kubectlOk(["get", "pods", "-n", selection, "-l", selectorString(stepPolicy?.spec.podSelector ?? {}), "-o", "jsonpath={.items[*].metadata.name}"]);
  t.equal(selected.trim(), "step", "the API server selects the step pod and only it");

  // Cancelled while its first step runs: the operator stops the Job with its own permissions.
  const running = await submit(twoSteps);
  const first = await until("the running run's Job", async () => (await jobsOf(running))[0]);
  await until("the run running", async () => (await getRun(running)).status === "running");
  const runningCancel = await cancel(running);
  t.equal(runningCancel.status, 200, `cancel a running run: ${runningCancel.body}`);
  const cancelled = await untilStatus(running, "cancelled");
  t.same(cancelled.steps.map((s) => s.status), ["cancelled", "cancelled"]);
  // Stopped (suspended), then deleted once the cancel is recorded: both with the operator's own permissions.
  await until("the stopped Job to be deleted", async () => !(await jobsOf(running)).some((j) => j.metadata.name === first.metadata.name));
  t.pass("the operator stopped and then deleted the Job");

  for (const p of [api.proc, op.proc]) {
    t.notMatch(p.output(), /forbidden/i, `${p.name}: never refused by the API server`);
    p.child.kill("SIGTERM");
    t.equal(await p.exited, 0, `${p.name}: SIGTERM stops it cleanly`);
  }
});
