/**
 * The PipelineRun run store against a real kube-apiserver: create/get/list/watch, and
 * read-modify-write updates from two stores (two processes) at once — a conflict is
 * retried on a fresh read, so neither change is lost.
 */
import t from "tap";
import { createKubeClient } from "../../adapters/kubernetes/client.js";
import { createKubeRunStore } from "../../adapters/kubernetes/run-store.js";
import type { RunRecord } from "../../core/ports.js";
import { startTestEnv } from "../support/k8s-env.js";

// No Jobs or pods here: the API server alone (no controllers, scheduler or kwok) starts faster.
const env = await startTestEnv({ minio: false, controlPlane: "apiserver" });
t.teardown(() => env.stop());
const NS = "runs";
await env.createNamespace(NS);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const run = (id: string, org = "acme"): RunRecord => ({
  id, organization: org, workspace: "ws1", pipelineId: "p", name: "P", source: { kind: "inline" },
  spec: { id: "p", steps: [{ stepId: "a", toolName: "samtools", parameters: { command: "depth", inputFile: "in.bam", outputFile: "a.tsv" } }, { stepId: "b", toolName: "samtools", dependsOn: ["a"] }] },
  parameters: {}, inputChecksums: {}, outputFolder: "pipelines/2026-11-22T01-00-00Z", createdAt: new Date().toISOString(),
  startedAt: null, completedAt: null, status: "queued", progressPct: 0, error: null, cancelRequested: false,
  steps: [
    { stepId: "a", toolName: "samtools", status: "pending", startedAt: null, completedAt: null, exitCode: null, error: null, attempt: 0, outputs: [] },
    { stepId: "b", toolName: "samtools", status: "pending", startedAt: null, completedAt: null, exitCode: null, error: null, attempt: 0, outputs: [] },
  ],
  submittedBy: "key_1",
});

const c1 = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: NS });
const c2 = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: NS });
const s1 = createKubeRunStore({ client: c1, namespace: NS });
const s2 = createKubeRunStore({ client: c2, namespace: NS });
await Promise.all([s1.start(), s2.start()]);
t.teardown(() => { s1.stop(); s2.stop(); c1.close(); c2.close(); });

t.test("create, get (even before the cache has it), list, watch", async (t) => {
  const seen: string[] = [];
  const unwatch = s2.watch((id) => seen.push(id));
  const r = run("run-01jz0000000000000000000001");
  await s1.create(r);
  t.same(await s1.get(r.id), r, "read back from the cache as written");
  const fresh = createKubeRunStore({ client: c2, namespace: NS }); // not started: no cache at all
  t.same(await fresh.get(r.id), r, "a miss in the cache is read from the API");
  t.equal(await s1.get("run-01jz00000000000000000000zz"), undefined);
  for (let i = 0; i < 100 && !seen.includes(r.id); i++) await sleep(20);
  t.ok(seen.includes(r.id), "the other store's watch heard of it");
  unwatch();
  await s1.create(run("run-01jz0000000000000000000002", "other"));
  for (let i = 0; i < 100 && (await s2.list({})).length < 2; i++) await sleep(20);
  t.same((await s2.list({ organization: "other" })).map((x) => x.id), ["run-01jz0000000000000000000002"]);
  t.equal((await s2.list({})).length, 2);
});

t.test("concurrent updates from two stores both land (conflicts are retried)", async (t) => {
  const id = "run-01jz0000000000000000000001";
  const rounds = 10;
  await Promise.all(Array.from({ length: rounds }, (_, i) => [
    s1.update(id, (r) => ({ ...r, steps: r.steps.map((st) => (st.stepId === "a" ? { ...st, attempt: st.attempt + 1 } : st)) })),
    s2.update(id, (r) => ({ ...r, steps: r.steps.map((st) => (st.stepId === "b" ? { ...st, attempt: st.attempt + 1 } : st)), ...(i === rounds - 1 ? { cancelRequested: true } : {}) })),
  ]).flat());
  const direct = createKubeRunStore({ client: c1, namespace: NS });
  const after = await direct.get(id);
  t.equal(after?.steps[0]?.attempt, rounds, "every increment of a landed");
  t.equal(after?.steps[1]?.attempt, rounds, "every increment of b landed");
  t.equal(after?.cancelRequested, true, "the desired state (spec) changed too");
});

t.test("a field that goes away goes away (the status is replaced, not merged)", async (t) => {
  const id = "run-01jz0000000000000000000002";
  await s1.update(id, (r) => ({ ...r, status: "failed", error: "boom" }));
  t.equal((await s1.get(id))?.error, "boom");
  await s1.update(id, (r) => ({ ...r, status: "running", error: null }));
  t.equal((await s1.get(id))?.error, null);
  const unchanged = await s1.update(id, () => undefined);
  t.equal(unchanged?.status, "running", "no change: the current record, nothing written");
});

t.test("an update that changes nothing writes nothing (the API server's key order does not matter)", async (t) => {
  const id = "run-01jz0000000000000000000002";
  await s1.update(id, (r) => ({ ...r, status: "running", progressPct: 50 }));
  // Read back from the API server (its key order), then "change" it to the same record.
  const fresh = createKubeRunStore({ client: c1, namespace: NS });
  const before = c1.writes();
  await fresh.update(id, (r) => ({ ...r }));
  t.equal(c1.writes(), before, "no write for an identical record");
});

t.test("a store that does not own the status only changes the spec", async (t) => {
  const apiSide = createKubeRunStore({ client: c2, namespace: NS, writeStatus: false });
  const id = "run-01jz0000000000000000000003";
  await apiSide.create(run(id));
  const before = c2.writes();
  const after = await apiSide.update(id, (r) => ({ ...r, cancelRequested: true, status: "cancelled" }));
  t.equal(c2.writes(), before + 1, "one write: the spec patch");
  t.equal(after?.cancelRequested, true);
  t.equal(after?.status, "queued", "the status stays the operator's to write");
});

t.test("list: one workspace through the informer's index, newest first, keyset pages, status; deleted runs leave it", async (t) => {
  const NS2 = "runs-list";
  await env.createNamespace(NS2);
  const c = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: NS2 });
  const writer = createKubeRunStore({ client: c, namespace: NS2 });
  const reader = createKubeRunStore({ client: c, namespace: NS2 });
  await Promise.all([writer.start(), reader.start()]);
  t.teardown(() => { writer.stop(); reader.stop(); c.close(); });
  const at = (i: number) => new Date(Date.UTC(2026, 10, 1) + Math.floor(i / 3) * 1000).toISOString(); // three per ms: ties by id
  const id = (n: number) => `run-01jz${String(n).padStart(22, "0")}`;
  const mine: RunRecord[] = [];
  for (let i = 0; i < 30; i++) mine.push({ ...run(id(100 + i)), createdAt: at(i), status: i % 2 ? "failed" : "queued" });
  const others = [
    { ...run(id(200), "other"), createdAt: at(5) }, // same workspace name, other organization
    { ...run(id(201)), workspace: "ws2", createdAt: at(6) },
  ];
  await Promise.all([...mine, ...others].map((r) => writer.create(r)));
  // The status is written through the status subresource, after the create.
  await Promise.all(mine.filter((r) => r.status === "failed").map((r) => writer.update(r.id, (cur) => ({ ...cur, status: "failed" }))));
  for (let i = 0; i < 200 && (await reader.list({ organization: "acme", workspace: "ws1", status: "failed" })).length < 15; i++) await sleep(20);
  for (let i = 0; i < 200 && (await reader.list({})).length < 32; i++) await sleep(20);
  const expected = [...mine].sort((a, b) => (a.createdAt !== b.createdAt ? (a.createdAt < b.createdAt ? 1 : -1) : a.id < b.id ? 1 : -1)).map((r) => r.id);
  const seen: string[] = [];
  let after: { createdAt: string; id: string } | undefined;
  for (let pages = 0; pages < 10; pages++) {
    const page = await reader.list({ organization: "acme", workspace: "ws1", limit: 7, ...(after ? { after } : {}) });
    seen.push(...page.map((r) => r.id));
    const last = page[page.length - 1];
    if (page.length < 7 || !last) break;
    after = { createdAt: last.createdAt, id: last.id };
  }
  t.same(seen, expected, "pages of 7: every run of acme/ws1 once, newest first");
  t.same((await reader.list({ organization: "acme", workspace: "ws1", status: "failed" })).map((r) => r.id), expected.filter((x) => mine.find((r) => r.id === x)?.status === "failed"), "by status");
  t.same((await reader.list({ organization: "other", workspace: "ws1" })).map((r) => r.id), [id(200)], "another organization's workspace of the same name");
  t.equal((await reader.list({ organization: "acme" })).length, 31, "the organization's workspaces");
  const page = await reader.list({ organization: "acme", workspace: "ws1", limit: 1 });
  page[0]!.name = "changed by the caller";
  t.not((await reader.list({ organization: "acme", workspace: "ws1", limit: 1 }))[0]?.name, "changed by the caller", "callers get copies");
  await c.request("DELETE", `/apis/operon.dev/v1alpha1/namespaces/${NS2}/pipelineruns/${expected[0]}`);
  for (let i = 0; i < 200 && (await reader.list({ organization: "acme", workspace: "ws1" })).length === 30; i++) await sleep(20);
  t.same((await reader.list({ organization: "acme", workspace: "ws1", limit: 2 })).map((r) => r.id), expected.slice(1, 3), "a deleted run leaves the index");
});
