/**
 * Cluster mode under faults, on a real control plane (etcd, kube-apiserver, the real Job
 * controller, garbage collector and scheduler, kwok nodes; the stage-out stand-in of
 * test/support/job-sim.ts uploads each step's outputs and lets its pod succeed, fail or wait
 * as the test says) and a real S3:
 *  - deadlines: a request over a frozen connection (a TCP proxy that stops forwarding) fails
 *    within its deadline instead of hanging;
 *  - the Lease: renewal runs on its own timer beside a slow start-up; a renewal that hangs
 *    counts as failed, so leadership is given up after the renew deadline, and taken again
 *    when the connection comes back; the operator itself gives up leading without exiting
 *    and resumes (relisting) once the API answers again;
 *  - leaks: a cancelled run's suspended Job is deleted once the run's status records the
 *    cancel; a finished PipelineRun past OPERON_RUN_TTL_DAYS is deleted (its files stay), a
 *    running one is not; after many finished runs nothing is kept per run in memory;
 *  - the object store down (MinIO killed) while a run's last step ends: the run is not marked
 *    finished without its run.json, and finishes once, with it, when the store is back.
 */
import t from "tap";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseConfig, type Config } from "../../core/config.js";
import type { JobObject } from "../../core/kubernetes/jobs.js";
import { ANNOTATION } from "../../core/kubernetes/pipelinerun.js";
import type { ObjectStore, RunRecord } from "../../core/ports.js";
import { createStore } from "../../wiring/runtime.js";
import { startOperator, type Operator } from "../../operator/cluster.js";
import { createApiServerClusterEngine } from "../../wiring/runtime.js";
import { createKubeClient, isNotFound, KubeTimeoutError, paths } from "../../adapters/kubernetes/client.js";
import { LeaderElector } from "../../adapters/kubernetes/leader.js";
import type { KubeObject } from "../../adapters/kubernetes/informer.js";
import { startStageOut, type StageOutDecision } from "../support/job-sim.js";
import { startTestEnv } from "../support/k8s-env.js";
import { record } from "../support/recorder.js";
import { startTcpProxy } from "../support/tcp-proxy.js";
import { sleep, until } from "../support/wait.js";

const env = await startTestEnv({ kwokNodes: 1 });
t.teardown(() => env.stop());
const proxy = await startTcpProxy(env.server);
t.teardown(() => proxy.close());
/** A kubeconfig that reaches the API server through the proxy. */
const proxied = join(env.dir, "proxied-kubeconfig");
writeFileSync(proxied, env.kubeconfig.replace(env.server, proxy.url));

type Job = JobObject & KubeObject;
const DAY = 86_400_000;

/** Settles with the promise's outcome, or "hung" after `ms` (a bound for a failure message, never for correctness). */
async function within<T>(p: Promise<T>, ms: number): Promise<{ value?: T; error?: unknown; hung?: true; ms: number }> {
  const t0 = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<"hung">((r) => { timer = setTimeout(() => r("hung"), ms); });
  try {
    const v = await Promise.race([p.then((value) => ({ value })), hung]);
    return v === "hung" ? { hung: true, ms: Date.now() - t0 } : { ...v, ms: Date.now() - t0 };
  } catch (error) {
    return { error, ms: Date.now() - t0 };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A namespace with its api-server engine, and the stage-out stand-in for its step pods: a pod
 * with no verdict is held (its step runs) until `finish` (or `autoFinish` for a whole run).
 * `upload: false`: the stand-in uploads nothing (the test puts the outputs itself).
 */
async function cluster(ns: string, extra: Record<string, string> = {}, opts: { upload?: boolean } = {}) {
  await env.createNamespace(ns);
  const parsed = parseConfig({ ...env.env, OPERON_MODE: "cluster", OPERON_NAMESPACE: ns, OPERON_SIGNING_SECRET: "s".repeat(40), PORT: "0", OPERON_LEASE_DURATION_SECONDS: "3", ...extra });
  if (!parsed.ok) throw new Error(parsed.message);
  const config: Config = parsed.config;
  const store: ObjectStore = await createStore(config, "");
  const client = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: ns });
  const api = await createApiServerClusterEngine(config, store, { kubeconfig: env.kubeconfigPath, log: () => undefined });
  for (const o of ["acme", "beta"]) await store.put(`orgs/${o}/workspaces/ws1/in.bam`, "bam");
  const step = (stepId: string, input: string, dependsOn?: string[]) => ({ stepId, toolName: "samtools", ...(dependsOn ? { dependsOn } : {}), parameters: { command: "depth", inputFile: input, outputFile: `${stepId}.tsv` } });
  const submit = async (organization: string, steps: unknown[]) => {
    const r = await api.engine.submit({ organization, workspace: "ws1", keyId: "k", source: { kind: "inline" }, input: { bam: "in.bam" }, spec: { id: "p", inputs: [{ name: "bam", type: "file" }], steps } });
    if (!r.ok) throw new Error(r.error.message);
    return r.run;
  };
  const run = (id: string) => api.engine.runs.get(id);
  const jobsOf = async (runId: string) => (await client.request<{ items: Job[] }>("GET", paths.jobs(ns), { query: { labelSelector: `operon.dev/run=${runId}` } })).items;
  const exists = async (path: string) => { try { await client.request("GET", path); return true; } catch (e) { if (isNotFound(e)) return false; throw e; } };
  const verdicts = new Map<string, StageOutDecision>();
  const autoRuns = new Set<string>();
  const stageOut = await startStageOut({
    client, namespace: ns, ...(opts.upload === false ? {} : { store }),
    decide: (_pod, job) => verdicts.get(job.metadata.name) ?? (autoRuns.has(job.metadata.labels?.["operon.dev/run"] ?? "") ? { action: "succeed" } : { action: "hold" }),
  });
  /** The step's pod ends as `d` says (default: outputs uploaded, then Succeeded), now or once it exists. */
  const finish = (job: Job, d: StageOutDecision = { action: "succeed" }) => {
    verdicts.set(job.metadata.name, d);
    stageOut.release((p) => p.metadata.labels?.["batch.kubernetes.io/job-name"] === job.metadata.name);
  };
  /** Every step pod of the run succeeds (outputs uploaded), those waiting now and those to come. */
  const autoFinish = (runId: string) => {
    autoRuns.add(runId);
    stageOut.release((p) => p.metadata.labels?.["operon.dev/run"] === runId);
  };
  /** The Job controller's word on the Job (Complete or Failed), read from the API server. */
  const ended = (job: Job, type: "Complete" | "Failed") => until(`${job.metadata.name} ${type}`, async () => {
    const cur = await client.request<Job>("GET", `${paths.jobs(ns)}/${job.metadata.name}`);
    return cur.status?.conditions?.some((c) => c.type === type && c.status === "True") ? cur : undefined;
  }, 60_000);
  return { ns, config, store, client, api, step, submit, run, jobsOf, exists, finish, autoFinish, ended, close: async () => { await stageOut.stop(); await api.stop(); client.close(); } };
}

t.test("a request over a frozen connection fails within its deadline instead of hanging", async (t) => {
  const client = await createKubeClient({ kubeconfig: proxied, namespace: "default", timeoutMs: 1500 });
  t.teardown(() => client.close());
  await client.request("GET", "/api/v1/namespaces/default"); // a keep-alive connection now exists
  proxy.pause();
  t.teardown(() => proxy.resume());
  // The open (idle, kept-alive) connection is frozen; a new one would be held.
  const get = await within(client.request("GET", "/api/v1/namespaces/default"), 15_000);
  t.notOk(get.hung, `the GET ended (${get.ms} ms)`);
  t.ok(get.error instanceof KubeTimeoutError, `it failed with a timeout: ${String(get.error)}`);
  t.ok(get.ms >= 1400 && get.ms < 4500, `within its deadline of 1.5 s (${get.ms} ms)`);
  const write = await within(client.request("POST", "/api/v1/namespaces/default/configmaps", { body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "frozen" } }, timeoutMs: 800 }), 15_000);
  t.ok(write.error instanceof KubeTimeoutError && write.ms < 3500, `a write with its own deadline (0.8 s) too (${write.ms} ms)`);
  const watch = await within(client.stream("/api/v1/namespaces/default/configmaps", { query: { watch: 1 } }), 15_000);
  t.ok(watch.error instanceof KubeTimeoutError && watch.ms < 4500, `a watch that never starts answering too (${watch.ms} ms)`);
  proxy.resume();
  const again = await within(client.request<{ metadata: { name: string } }>("GET", "/api/v1/namespaces/default"), 15_000);
  t.equal(again.value?.metadata.name, "default", "once the connection flows again, requests succeed (on a fresh socket)");
});

t.test("leader election: a slow start-up does not hold back renewals; the Lease never lapses meanwhile", async (t) => {
  const ns = "le-slow";
  await env.createNamespace(ns);
  const client = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: ns });
  t.teardown(() => client.close());
  let finishStartUp!: () => void;
  const startUp = new Promise<void>((r) => { finishStartUp = r; });
  const stops: string[] = [];
  const opts = { client, namespace: ns, name: "slow", leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 400 };
  const a = new LeaderElector({ ...opts, identity: "a", onStartedLeading: () => startUp, onStoppedLeading: (why) => { stops.push(why); } });
  t.teardown(() => { finishStartUp(); return a.stop(); });
  a.start();
  await until("a leads", () => a.isLeader());
  const acquired = Date.now();
  const b = new LeaderElector({ ...opts, identity: "b", onStartedLeading: () => undefined, onStoppedLeading: () => undefined });
  t.teardown(() => b.stop());
  b.start();
  const renewTimes = new Set<string>();
  await until("renewals spanning twice the lease duration, while a's start-up has not finished", async () => {
    const lease = await client.request<{ spec: { holderIdentity: string; renewTime: string } }>("GET", `${paths.leases(ns)}/slow`);
    if (lease.spec.holderIdentity === "a") renewTimes.add(lease.spec.renewTime);
    return renewTimes.size >= 5 && Date.now() - acquired > 6000;
  }, 30_000, 100);
  t.ok(a.isLeader(), "a still leads");
  t.notOk(b.isLeader(), "b never took the Lease: it never lapsed");
  t.same(stops, [], "a never gave up leading");
  finishStartUp();
  await a.stop();
  await until("b takes over once a releases", () => b.isLeader());
});

t.test("leader election: a hung renewal counts as failed; leadership is given up, then taken again", async (t) => {
  const ns = "le-hung";
  await env.createNamespace(ns);
  const client = await createKubeClient({ kubeconfig: proxied, namespace: ns });
  t.teardown(() => client.close());
  const events: Array<[string, number]> = [];
  const e = new LeaderElector({
    client, namespace: ns, name: "hung", identity: "e", leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 400,
    onStartedLeading: () => { events.push(["start", Date.now()]); },
    onStoppedLeading: () => { events.push(["stop", Date.now()]); },
  });
  t.teardown(() => e.stop());
  e.start();
  await until("e leads", () => e.isLeader());
  await sleep(500); // a renewal or two over live connections first (not needed for correctness)
  proxy.pause(); // renewals now hang: no answer, no error
  t.teardown(() => proxy.resume());
  const pausedAt = Date.now();
  await until("e gives up leading", () => !e.isLeader(), 20_000);
  const stoppedAt = events.find(([k]) => k === "stop")?.[1] ?? Infinity;
  t.ok(stoppedAt - pausedAt < 2000 + 400 + 1500, `given up within the renew deadline (${stoppedAt - pausedAt} ms after the freeze)`);
  proxy.resume();
  await until("e leads again once the API answers", () => e.isLeader(), 20_000);
  t.same(events.map(([k]) => k), ["start", "stop", "start"], "a new term started");
  t.equal(e.terms, 2);
});

t.test("the operator under a frozen API: gives up the Lease without exiting, and resumes when it answers", async (t) => {
  const s = await cluster("frozen");
  t.teardown(() => s.close());
  const logs: string[] = [];
  // No onLostLease: the default must not end the process.
  const op: Operator = await startOperator(s.config, s.store, {
    kubeconfig: proxied, log: (m) => logs.push(m), listen: false, identity: "op-frozen",
    tuning: { requestTimeoutMs: 2000, watchQuietMs: 4000 },
  });
  t.teardown(() => op.stop());
  await until("the operator leads", () => op.engine());
  const run = await s.submit("acme", [s.step("a", "${bam}"), s.step("b", "${a.outputFile}", ["a"])]);
  const a = await until("job a", async () => (await s.jobsOf(run.id))[0]);

  proxy.pause();
  t.teardown(() => proxy.resume());
  const pausedAt = Date.now();
  await until("the operator gives up leading", () => !op.isLeader(), 20_000);
  const lostAfter = Date.now() - pausedAt;
  t.ok(lostAfter < 2000 + 400 + 2000, `within the renew deadline (2 s) and a retry (${lostAfter} ms)`);
  t.equal(op.engine(), undefined, "its engine stopped");
  t.match(logs.join("\n"), /stopped leading \(not renewed within 2000 ms\)/);
  await until("a request failed by its deadline, not hung", () => logs.some((l) => /no answer within \d+ ms/.test(l)));
  // Meanwhile step a finishes (the Job controller, on its own connection, marks it Complete);
  // nobody can see it through the frozen connection.
  s.finish(a);
  await s.ended(a, "Complete");
  t.notOk(op.isLeader(), "still not leading while frozen");

  proxy.resume();
  await until("the operator leads again", () => op.engine(), 30_000);
  t.equal(op.terms(), 2, "a second term");
  const b = await until("job b, created from the relisted caches", async () => (await s.jobsOf(run.id)).find((j) => j.metadata.annotations?.["operon.dev/step-id"] === "b"), 30_000);
  s.finish(b);
  await until("the run completes", async () => (await s.run(run.id))?.status === "completed");
  t.same((await s.jobsOf(run.id)).length, 2, "one Job per step, none twice");
});

t.test("clean-up: stopped Jobs after the stop is recorded, PipelineRuns past their TTL, nothing kept per finished run", async (t) => {
  const s = await cluster("gc", { OPERON_ORG_CONCURRENCY: "2" });
  t.teardown(() => s.close());
  let offset = 0;
  const logs: string[] = [];
  const op = await startOperator(s.config, s.store, {
    kubeconfig: env.kubeconfigPath, log: (m) => logs.push(m), listen: false, identity: "op-gc",
    tuning: { sweepIntervalMs: 200, ttlNow: () => Date.now() + offset },
  });
  t.teardown(() => op.stop());
  await until("the operator leads", () => op.engine());
  const jobs = await record<Job>(s.client, paths.jobs(s.ns), "operon.dev/run");
  t.teardown(() => jobs.stop());
  const prs = await record<KubeObject & { status?: { phase?: string } }>(s.client, paths.pipelineRuns(s.ns));
  t.teardown(() => prs.stop());
  const sweeps = async (n: number) => { const from = op.janitor()?.sweeps() ?? 0; await until(`${n} clean-up sweeps`, () => (op.janitor()?.sweeps() ?? 0) >= from + n); };

  await t.test("a cancelled run's suspended Job is deleted once its status records the cancel", async (t) => {
    const run = await s.submit("acme", [s.step("a", "${bam}"), s.step("b", "${a.outputFile}", ["a"])]);
    const job = await until("job a", async () => (await s.jobsOf(run.id))[0]);
    await s.api.engine.cancel((await s.run(run.id)) as RunRecord);
    await until("run cancelled", async () => (await s.run(run.id))?.status === "cancelled");
    const deletedAt = await until("job a deleted", () => jobs.deletedAt(job.metadata.name));
    t.notOk(await s.exists(`${paths.jobs(s.ns)}/${job.metadata.name}`), "the Job is gone");
    const last = jobs.last(job.metadata.name);
    t.equal(last?.metadata.annotations?.["operon.dev/stopped"], "cancelled", "it had been stopped (cancelled)…");
    t.equal(last?.spec?.suspend, true, "…and suspended");
    const recorded = prs.history(run.id).find((p) => p.status?.phase === "cancelled");
    t.ok(recorded, "the run's status recorded the cancel");
    t.ok(Number(recorded?.metadata.resourceVersion) < deletedAt, `before the Job was deleted (revision ${recorded?.metadata.resourceVersion} < ${deletedAt})`);
    const r = await s.run(run.id);
    t.same(r?.steps.map((x) => x.status), ["cancelled", "cancelled"], "the run's record stands without the Job");
    t.equal(r?.steps[0]?.jobName, job.metadata.name);
  });

  await t.test("a finished PipelineRun older than the TTL is deleted; a running one is not; its files stay", async (t) => {
    const done = await s.submit("beta", [s.step("a", "${bam}")]);
    const dj = await until("the finished run's Job", async () => (await s.jobsOf(done.id))[0]);
    s.finish(dj);
    await until("completed", async () => (await s.run(done.id))?.status === "completed");
    const running = await s.submit("beta", [s.step("a", "${bam}")]);
    await until("the running run's Job", async () => (await s.jobsOf(running.id))[0]);
    await until("running", async () => (await s.run(running.id))?.status === "running");
    const prPath = (id: string) => `${paths.pipelineRuns(s.ns)}/${id}`;

    offset = 29 * DAY;
    await sweeps(3);
    t.ok(await s.exists(prPath(done.id)), "29 days after it finished: kept");
    offset = 30 * DAY + 60_000;
    await until("the finished run deleted", async () => !(await s.exists(prPath(done.id))));
    await sweeps(3);
    t.ok(await s.exists(prPath(running.id)), "the running run (created 30 days ago on this clock) is kept");
    t.equal((await s.jobsOf(running.id)).length, 1, "and its Job");
    t.ok(await s.store.head(`orgs/beta/workspaces/ws1/${done.outputFolder}/run.json`), "the deleted run's run.json stays in object storage");
    t.ok(await s.store.head(`orgs/beta/workspaces/ws1/${done.outputFolder}/a.tsv`), "and its outputs");
    t.match(logs.join("\n"), new RegExp(`deleted PipelineRun ${done.id}: finished more than`));
    offset = 0;
    s.finish((await s.jobsOf(running.id))[0] as Job);
    await until("the other run completes", async () => (await s.run(running.id))?.status === "completed");
  });

  await t.test("after many finished runs, nothing is kept per run", async (t) => {
    const ids: string[] = [];
    // Two organizations at 2 slots each: steps wait (queue positions are written), chains and fans.
    for (let i = 0; i < 6; i++) {
      for (const org of ["acme", "beta"]) {
        const id = (await s.submit(org, i % 2 ? [s.step("a", "${bam}"), s.step("b", "${a.outputFile}", ["a"])] : [s.step("x", "${bam}"), s.step("y", "${bam}"), s.step("z", "${bam}")])).id;
        s.autoFinish(id);
        ids.push(id);
      }
    }
    for (const id of ids) await until(`run ${id}`, async () => (await s.run(id))?.status === "completed", 90_000);
    // One whose tool fails and one that is cancelled.
    const failing = await s.submit("acme", [s.step("a", "${bam}")]);
    s.finish(await until("job to fail", async () => (await s.jobsOf(failing.id))[0]), { action: "fail", exitCode: 1 });
    await until("failed", async () => (await s.run(failing.id))?.status === "failed");
    const cancelled = await s.submit("beta", [s.step("a", "${bam}")]);
    const cj = await until("job to cancel", async () => (await s.jobsOf(cancelled.id))[0]);
    await s.api.engine.cancel((await s.run(cancelled.id)) as RunRecord);
    await until("cancelled", async () => (await s.run(cancelled.id))?.status === "cancelled");
    await until("the cancelled Job deleted", () => jobs.deletedAt(cj.metadata.name));

    const perRun = () => Object.fromEntries(Object.entries(op.cacheSizes() ?? { unavailable: 1 }).filter(([k]) => k !== "runStore.parsed"));
    const empty = await until("every per-run cache empty", () => { const c = perRun(); return Object.values(c).every((v) => v === 0) ? c : undefined; }, 30_000).catch(() => undefined);
    t.ok(empty, `nothing kept per finished run: ${JSON.stringify(perRun())}`);
    t.ok(Object.keys(empty ?? {}).length >= 10, "the executor's, the controller's and the reconciler's caches are all reported");
    // Finished runs leave the operator's cache: each is labelled with its final phase.
    const all = [...ids, failing.id, cancelled.id];
    await until("the finished runs out of the operator's cache", () => (op.runs()?.resources().length ?? 1) === 0, 30_000);
    t.equal(op.cacheSizes()?.["runStore.parsed"], 0, "and out of its parse cache");
    const labelled = async () => (await s.client.request<{ items: KubeObject[] }>("GET", paths.pipelineRuns(s.ns), { query: { labelSelector: "operon.dev/finished" } })).items;
    const phases = new Map((await labelled()).map((r) => [r.metadata.name, r.metadata.labels?.["operon.dev/finished"]]));
    t.ok(all.every((id) => phases.has(id)), "every finished run is labelled finished");
    t.equal(phases.get(failing.id), "failed");
    t.equal(phases.get(cancelled.id), "cancelled");
    t.equal(phases.get(ids[0] as string), "completed");
    t.equal((await op.runs()?.get(failing.id))?.status, "failed", "a finished run is still read by the operator's store (from the API server)");
    t.equal(op.runs()?.resources().length, 0, "without coming back into its cache");
    // Past the TTL every finished run goes (the janitor lists them from the API server).
    offset = 31 * DAY;
    await until("every finished run deleted", async () => (await labelled()).length === 0, 30_000);
    // (The deletions' answers may arrive after their watch events: wait for them to settle.)
    const after = await until("deletions settled", () => { const c = perRun(); return Object.values(c).every((v) => v === 0) ? c : undefined; }).catch(() => perRun());
    t.same(after, Object.fromEntries(Object.keys(after).map((k) => [k, 0])), "still nothing kept per run");
  });
});

t.test("MinIO down while a run's last step ends: no finished status without run.json; it finishes once when the store is back", async (t) => {
  const minio = env.minio;
  if (!minio) throw new Error("the test env has no MinIO");
  // The stand-in uploads nothing here: the test puts each step's outputs before the store goes away.
  const s = await cluster("outage", {}, { upload: false });
  t.teardown(() => s.close());
  const op = await startOperator(s.config, s.store, { kubeconfig: env.kubeconfigPath, log: () => undefined, listen: false, identity: "op-outage" });
  t.teardown(() => op.stop());
  await until("the operator leads", () => op.engine());
  const r = await s.submit("acme", [s.step("a", "${bam}"), s.step("b", "${a.outputFile}", ["a"])]);
  const stageOutputs = async (job: Job) => {
    const ann = job.metadata.annotations ?? {};
    for (const o of JSON.parse(ann[ANNOTATION.outputs] ?? "[]") as Array<{ path: string }>) await s.store.put(`${ann[ANNOTATION.runRoot] ?? ""}${o.path}`, "out\n");
  };
  const a = await until("job a", async () => (await s.jobsOf(r.id))[0]);
  await stageOutputs(a);
  s.finish(a);
  const b = await until("job b", async () => (await s.jobsOf(r.id)).find((j) => j.metadata.name !== a.metadata.name));
  // b's stage-out wrote its outputs; then the store goes away before the Job is seen complete.
  await stageOutputs(b);
  await minio.kill();
  t.teardown(() => minio.restart().catch(() => undefined));
  s.finish(b);
  await s.ended(b, "Complete");
  const downFor = Date.now() + 10_000;
  const seen = new Set<string>();
  while (Date.now() < downFor) {
    seen.add((await s.run(r.id))?.status ?? "?");
    await sleep(500);
  }
  t.strictSame([...seen], ["running"], "while its run.json cannot be written (10 s), the run is never marked finished");
  await minio.restart();
  const done = await until("the run to finish after the outage", async () => { const cur = await s.run(r.id); return cur && ["completed", "failed"].includes(cur.status) ? cur : undefined; }, 120_000);
  t.equal(done.status, "completed", JSON.stringify(done.steps));
  t.same(done.steps.map((st) => [st.stepId, st.status, st.attempt]), [["a", "completed", 1], ["b", "completed", 1]], "each step once");
  const { body } = await s.store.get(`orgs/acme/workspaces/ws1/${done.outputFolder}/run.json`);
  let text = "";
  for await (const c of body) text += Buffer.from(c).toString();
  t.equal((JSON.parse(text) as { status: string }).status, "completed", "run.json says completed");
  t.equal((await s.jobsOf(r.id)).length <= 2, true, "no Job created twice");
});
