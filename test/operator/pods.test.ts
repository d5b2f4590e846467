/**
 * Step pods run for real, as far as this machine allows: the operator (in this process, on a
 * real control plane) creates Jobs; the real Job controller creates their pods and the real
 * scheduler binds them to the test kubelet's node (test/support/pod-runner.ts), which runs
 * each pod's containers as local processes — `operon stage-in` and `operon stage-out` from a
 * tree built like the container image (production dependencies only), the tool through the
 * Job's fixed entry script with Debian's build of the same tool, all as uid 1000 with the
 * credentials from the Secret the chart references — and reports the pod's status as a kubelet
 * does; the Job controller turns that into the Job's conditions. Covers: a built-in pipeline on
 * real data end to end (inputs and outputs through MinIO, outputs with sha256 reported in the
 * termination message), a tool that fails, an input gone at stage-in, a cancel (the Job
 * suspended: the Job controller deletes the pod, the kubelet stops the tool), and that the
 * image's layout matches the Dockerfile.
 */
import t from "tap";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseConfig, type Config } from "../../core/config.js";
import type { ObjectStore, RunRecord } from "../../core/ports.js";
import { RunManifestSchema } from "../../core/manifest.js";
import type { JobObject } from "../../core/kubernetes/jobs.js";
import { createStore } from "../../wiring/runtime.js";
import { startOperator } from "../../operator/cluster.js";
import { createApiServerClusterEngine } from "../../wiring/runtime.js";
import { createKubeClient, paths } from "../../adapters/kubernetes/client.js";
import { startTestEnv } from "../support/k8s-env.js";
import { buildImageTree, REPRODUCED_COPIES, runtimeCopies, runtimeEnv } from "../support/image-tree.js";
import { startNode, type Pod } from "../support/pod-runner.js";
import { record } from "../support/recorder.js";
import { until } from "../support/wait.js";

const NS = "pods";
const IMAGE = "operon:pods-test";
const work = mkdtempSync(join(tmpdir(), "operon-pods-"));
chmodSync(work, 0o755); // the pod's user (uid 1000) reads the image tree under it
t.teardown(() => rmSync(work, { recursive: true, force: true }));

const [env, tree] = await Promise.all([startTestEnv(), buildImageTree(join(work, "image"))]);
t.teardown(() => env.stop());
await env.createNamespace(NS);
const s3 = env.s3;
if (!s3) throw new Error("the test environment has no S3");
const client = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: NS });
t.teardown(() => client.close());
/** Every state of every step Job, also of those the operator deletes. */
const jobsSeen = await record<Job>(client, paths.jobs(NS), "operon.dev/run");
t.teardown(() => jobsSeen.stop());
// The S3 credentials Secret the chart's existingSecret names: the helpers get them only from here.
await client.request("POST", `/api/v1/namespaces/${NS}/secrets`, {
  body: { apiVersion: "v1", kind: "Secret", metadata: { name: "operon-s3" }, stringData: { AWS_ACCESS_KEY_ID: s3.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.secretAccessKey } },
});
const parsed = parseConfig({ ...env.env, OPERON_MODE: "cluster", OPERON_NAMESPACE: NS, OPERON_SIGNING_SECRET: "s".repeat(40), PORT: "0", OPERON_IMAGE: IMAGE, OPERON_S3_CREDENTIALS_SECRET: "operon-s3", OPERON_LEADER_ELECTION: "false" });
if (!parsed.ok) throw new Error(parsed.message);
const config: Config = parsed.config;
const store: ObjectStore = await createStore(config, "");
const logs: string[] = [];
const operator = await startOperator(config, store, { kubeconfig: env.kubeconfigPath, log: (m) => logs.push(m), listen: false, identity: "pods-test" });
t.teardown(() => operator.stop());
const api = await createApiServerClusterEngine(config, store, { kubeconfig: env.kubeconfigPath, log: (m) => logs.push(m) });
t.teardown(() => api.stop());

// The node: the scheduler binds every step pod to it; it runs them and its kubelet endpoint serves their logs.
type Job = JobObject & { metadata: { name: string; uid?: string } };
/** Containers started, as "<job>/<container>". */
const startedContainers = new Set<string>();
/** Organizations whose pods wait (the node does not start them) until released. */
const held = new Map<string, { released: Promise<void>; release: () => void }>();
function hold(org: string): () => void {
  let release!: () => void;
  const released = new Promise<void>((r) => { release = r; });
  held.set(org, { released, release });
  return () => { held.delete(org); release(); };
}
const node = await startNode(client, {
  operonImage: IMAGE,
  operon: [tree.node, tree.main],
  onContainerStart: (j, c) => startedContainers.add(`${j}/${c}`),
  beforeStart: (pod: Pod) => held.get(pod.metadata.labels?.["operon.dev/org"] ?? "")?.released,
  onError: (e) => logs.push(`test kubelet: ${String(e)}`),
});
t.teardown(() => node.stop());

const WS = "orgs/lab/workspaces/ws1/";
async function read(key: string): Promise<Buffer> {
  const { body } = await store.get(key);
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(Buffer.from(c));
  return Buffer.concat(chunks);
}
async function submit(spec: unknown, input: Record<string, unknown>, organization = "lab"): Promise<string> {
  const r = await api.engine.submit({ organization, workspace: "ws1", keyId: "key_test", source: { kind: "inline" }, input, spec });
  if (!r.ok) throw new Error(`submit: ${r.error.message} ${JSON.stringify(r.error.details)}`);
  return r.run.id;
}
const finished = (id: string) => until(`run ${id} to end`, async () => {
  const r = await api.engine.runs.get(id);
  return r && ["completed", "failed", "cancelled"].includes(r.status) ? r : undefined;
}, 120_000) as Promise<RunRecord>;
/** What the node ran for the run's step pods (their names start with the run id, as their Jobs'). */
const podsOf = (runId: string) => node.runsOf(runId);

// Real data: a random 20 kb reference and 1,000 simulated read pairs.
const data = join(work, "data");
spawnSync("mkdir", ["-p", data]);
let seed = 7;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
writeFileSync(join(data, "ref.fa"), `>chr1\n${Array.from({ length: 20_000 }, () => "ACGT"[Math.floor(rand() * 4)]).join("").match(/.{1,60}/g)?.join("\n")}\n`);
const sim = spawnSync("wgsim", ["-N", "1000", "-1", "100", "-2", "100", "-S", "7", "ref.fa", "r1.fastq", "r2.fastq"], { cwd: data });
if (sim.status !== 0) throw new Error(`wgsim: ${sim.stderr}`);
for (const f of ["ref.fa", "r1.fastq", "r2.fastq"]) await store.put(`${WS}data/${f}`, readFileSync(join(data, f)));

t.test("bwa-align runs in real step pods: staged in from S3, the tool as uid 1000, outputs staged out with sha256", async (t) => {
  const spec = api.engine.builtins.get("bwa-align");
  t.ok(spec, "the built-in pipeline is there");
  const id = await submit(spec, { reads1: "data/r1.fastq", reads2: "data/r2.fastq", reference: "data/ref.fa", sampleName: "s1" });
  const run = await finished(id);
  t.equal(run.status, "completed", `${run.error ?? ""} ${JSON.stringify(run.steps.map((s) => [s.stepId, s.status, s.error]))}\n${logs.join("\n")}`);
  const ran = await podsOf(id);
  t.equal(ran.length, run.steps.length, "one pod per step");
  for (const p of ran) {
    t.same(p.containers.map((c) => [c.name, c.exitCode]), [["stage-in", 0], ["tool", 0], ["stage-out", 0]], `${p.pod}: stage-in, tool, stage-out, in order, each exit 0`);
  }
  const flagstat = run.steps.find((s) => s.stepId === "flagstat")?.outputs?.[0];
  t.ok(flagstat, "flagstat has an output");
  t.match((await read(flagstat?.key ?? "")).toString(), /2000 \+ 0 in total/, "every simulated read reached the last step through four pods and S3");

  // Outputs: what stage-out reported in its termination message is what S3 holds.
  for (const p of ran) {
    const out = p.containers.find((c) => c.name === "stage-out");
    const report = JSON.parse(out?.message ?? "{}") as { outputs?: Array<{ key: string; sha256: string; size: number }> };
    t.ok(report.outputs?.length, `${p.pod}: stage-out reported its outputs`);
    for (const o of report.outputs ?? []) {
      const bytes = await read(o.key);
      t.equal(createHash("sha256").update(bytes).digest("hex"), o.sha256, `${o.key}: sha256 as reported`);
      t.equal(bytes.length, o.size);
    }
  }
  // The Pod the operator read those from is in the API, with the termination message.
  const podList = await client.request<{ items: Array<{ status: { containerStatuses: Array<{ state: { terminated?: { message?: string } } }> } }> }>("GET", paths.pods(NS), { query: { labelSelector: `operon.dev/run=${id}` } });
  t.equal(podList.items.length, run.steps.length);
  t.ok(podList.items.every((p) => /"sha256":"[0-9a-f]{64}"/.test(p.status.containerStatuses[0]?.state.terminated?.message ?? "")), "each Pod's stage-out status carries the report");

  // Step logs: the operator copies each tool's log (pods/log, proxied by the API server to the
  // node's kubelet) into the run folder, the last step's too.
  for (const s of run.steps) {
    const key = `${WS}${run.outputFolder}/logs/${s.stepId}.log`;
    const text = await until(`${s.stepId}'s log in S3`, async () => (await store.head(key)) ? (await read(key)).toString() : undefined);
    const pod = ran.find((p) => p.pod.startsWith(`${s.jobName ?? "?"}-`));
    t.equal(text, pod?.containers.find((c) => c.name === "tool")?.log, `${s.stepId}: the tool container's own output, copied whole`);
  }
  t.match(await read(`${WS}${run.outputFolder}/logs/align.log`).then(String), /\[M::/, "bwa mem's progress lines are in the align log");
  t.ok(node.requests.some((r) => /\/containerLogs\/pods\/.*-flagstat-1-[a-z0-9]+\/tool$/.test(r)), "read through pods/log, from the kubelet of the pod's node");

  // run.json: every output's checksum matches the stored file.
  const manifest = RunManifestSchema.parse(JSON.parse((await read(`${WS}${run.outputFolder}/run.json`)).toString()));
  t.equal(manifest.status, "completed");
  for (const s of manifest.steps) {
    t.equal(s.toolVersion !== null, true, `${s.stepId}: tool version`);
    for (const o of s.outputFiles) t.equal(createHash("sha256").update(await read(o.s3Key)).digest("hex"), o.checksum, `${s.stepId} ${o.filename}: checksum`);
  }
});

t.test("a tool that fails: the step's error is the tool's exit code, read from the pod", async (t) => {
  await store.put(`${WS}data/not-a.bam`, "this is not a BAM file\n");
  const id = await submit({ steps: [{ stepId: "stats", toolName: "samtools", parameters: { command: "flagstat", inputFile: "${bam}", outputFile: "stats.txt" } }], inputs: [{ name: "bam", type: "file" }] }, { bam: "data/not-a.bam" });
  const run = await finished(id);
  t.equal(run.status, "failed");
  const [p] = await podsOf(id);
  t.same(p?.containers.map((c) => c.name), ["stage-in", "tool"], "the pod stopped after the tool");
  const code = p?.containers[1]?.exitCode;
  t.ok(code !== undefined && code !== 0, `samtools exited with ${code}`);
  t.match(p?.containers[1]?.log, /samtools|fail|format/i, "the tool's own complaint is in its log");
  t.equal(run.steps[0]?.error, `the tool exited with code ${code}`, "the step says so, not just that the Job failed");
  t.equal(run.steps[0]?.exitCode, code);
});

t.test("an input gone before the pod runs: stage-in fails and says which", async (t) => {
  // The node holds this organization's pods back until the input is gone: the Job exists,
  // its pod has not run yet.
  const release = hold("lab2");
  await store.put("orgs/lab2/workspaces/ws1/data/vanishing.bam", "bytes");
  const id = await submit({ steps: [{ stepId: "stats", toolName: "samtools", parameters: { command: "flagstat", inputFile: "${bam}", outputFile: "stats.txt" } }], inputs: [{ name: "bam", type: "file" }] }, { bam: "data/vanishing.bam" }, "lab2");
  const jobName = await until("the Job", async () => (await client.request<{ items: Job[] }>("GET", paths.jobs(NS), { query: { labelSelector: `operon.dev/run=${id}` } })).items[0]?.metadata.name);
  await until("its pod on the node", () => [...node.runs.keys()].some((k) => k.startsWith(`${NS}/${jobName}-`)) || undefined);
  t.notOk([...startedContainers].some((c) => c.startsWith(`${jobName}/`)), "its pod is on the node, not started");
  await store.delete("orgs/lab2/workspaces/ws1/data/vanishing.bam");
  release();
  const run = await finished(id);
  t.equal(run.status, "failed");
  const [p] = await podsOf(id);
  t.same(p?.containers.map((c) => [c.name, c.exitCode]), [["stage-in", 1]], "only stage-in ran, and failed");
  t.match(run.steps[0]?.error, /stage-in helper exited with code 1: .*data\/vanishing\.bam.*not found/, `the step names the missing input: ${run.steps[0]?.error}`);
});

t.test("cancel while the tool runs: the Job is suspended, the tool gets SIGTERM, the run is cancelled", async (t) => {
  // A 20 Mbp reference: bwa index takes seconds, long enough to be stopped midway.
  const n = 20_000_000;
  const fasta = Buffer.alloc(6 + n + Math.ceil(n / 60));
  fasta.write(">chr1\n");
  let at = 6;
  for (let i = 0; i < n; i++) {
    fasta[at++] = "ACGT".charCodeAt(Math.floor(rand() * 4));
    if (i % 60 === 59 || i === n - 1) fasta[at++] = 10;
  }
  await store.put(`${WS}data/big.fa`, fasta.subarray(0, at));
  const id = await submit({ steps: [{ stepId: "index", toolName: "bwa", parameters: { command: "index", inputFile: "${ref}", outputFile: "big.fa" } }], inputs: [{ name: "ref", type: "file" }] }, { ref: "data/big.fa" });
  const jobName = await until("the Job", async () => (await client.request<{ items: Job[] }>("GET", paths.jobs(NS), { query: { labelSelector: `operon.dev/run=${id}` } })).items[0]?.metadata.name);
  await until("bwa index running", () => startedContainers.has(`${jobName}/tool`) || undefined, 60_000);
  const cancelled = await api.engine.cancel((await api.engine.runs.get(id)) as RunRecord);
  t.ok(cancelled.cancelRequested, "cancel requested");
  const run = await finished(id);
  t.equal(run.status, "cancelled");
  t.equal(run.steps[0]?.status, "cancelled");
  const [p, ...more] = await node.runsOf(`${jobName}-`);
  t.same(more, [], "one pod");
  t.ok(p?.deleted, "the pod was deleted (the Job controller, on the Job's suspension) while the tool ran");
  t.equal(p?.phase, "Failed");
  t.match(jobsSeen.history(jobName).find((j) => j.status?.conditions?.some((c) => c.type === "Suspended" && c.status === "True")), {}, "the Job controller reported the Job Suspended");
  t.same(p?.containers.map((c) => [c.name, c.exitCode]), [["stage-in", 0], ["tool", 143]], "bwa index got SIGTERM; stage-out never ran");
  // Once the run's status records the cancel, the operator deletes the suspended Job: its last state says why.
  const job = await until("the stopped Job", () => jobsSeen.history(jobName).find((j) => j.metadata.annotations?.["operon.dev/stopped"]));
  t.equal((job.spec as { suspend?: boolean } | undefined)?.suspend, true);
  t.equal(job.metadata.annotations?.["operon.dev/stopped"], "cancelled", "the Job says why it was stopped");
  await until("the stopped Job deleted", () => jobsSeen.deletedAt(jobName));
  t.notOk(await store.head(`${WS}${run.outputFolder}/big.fa.bwt`), "no output was published");
});

t.test("the image tree is the Dockerfile's: same COPY lines, production dependencies only, the entry runs", async (t) => {
  t.same(runtimeCopies(), REPRODUCED_COPIES.map((c) => [...c]), "the runtime stage copies exactly what the tree builder reproduces");
  t.notOk(existsSync(join(tree.app, "node_modules/tap")), "no dev dependency (tap) in the image");
  t.notOk(existsSync(join(tree.app, "node_modules/typescript")), "no dev dependency (typescript) in the image");
  t.match(runtimeEnv(), { NODE_ENV: "production", OPERON_MODE: "cluster" }, "the image's ENV lines are read");
  const help = spawnSync(tree.node, [tree.main, "--help"], { cwd: tree.app, env: runtimeEnv(), encoding: "utf8" });
  t.equal(help.status, 0, help.stderr);
  t.match(help.stdout, /operon operator/);
});
