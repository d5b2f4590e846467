/**
 * The supervised informer against a real kube-apiserver, reached through a TCP proxy that
 * can cut or freeze connections (a network fault the test controls): a watch that errors is
 * restarted with a relist, a watch that goes quiet is abandoned and relisted, and changes
 * made meanwhile reach the cache and the handler. Also: the Lease leader elector hands over.
 */
import t from "tap";
import { writeFileSync } from "node:fs";
import { createServer, connect, type Socket } from "node:net";
import { join } from "node:path";
import { createKubeClient, paths } from "../../adapters/kubernetes/client.js";
import { Informer, type KubeObject } from "../../adapters/kubernetes/informer.js";
import { LeaderElector } from "../../adapters/kubernetes/leader.js";
import { startTestEnv } from "../support/k8s-env.js";
import { sleep, until } from "../support/wait.js";

// No Jobs or pods here: the API server alone (no controllers, scheduler or kwok) starts faster.
const env = await startTestEnv({ minio: false, controlPlane: "apiserver" });
t.teardown(() => env.stop());
const NS = "inf";
await env.createNamespace(NS);

/** A TCP proxy to the API server whose live connections can be cut or frozen. */
const target = new URL(env.server);
const live = new Set<{ client: Socket; upstream: Socket }>();
/** While set, the proxy drops every connection (a partition). */
let blackhole = false;
const proxy = createServer((client) => {
  if (blackhole) { client.destroy(); return; }
  const upstream = connect(Number(target.port), target.hostname);
  const pair = { client, upstream };
  live.add(pair);
  client.pipe(upstream);
  upstream.pipe(client);
  const end = () => { live.delete(pair); client.destroy(); upstream.destroy(); };
  client.on("close", end); upstream.on("close", end); client.on("error", end); upstream.on("error", end);
});
await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
t.teardown(() => { for (const p of live) { p.client.destroy(); p.upstream.destroy(); } proxy.close(); });
const proxyPort = (proxy.address() as { port: number }).port;
const kubeconfig = join(env.dir, "proxied-kubeconfig");
writeFileSync(kubeconfig, env.kubeconfig.replace(env.server, `https://127.0.0.1:${proxyPort}`));

const direct = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: NS });
t.teardown(() => direct.close());
const cm = (name: string) => direct.request("POST", `/api/v1/namespaces/${NS}/configmaps`, { body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name, labels: { test: "inf" } }, data: { a: "1" } } });

t.test("a watch that errors or goes quiet is restarted with a relist", async (t) => {
  const client = await createKubeClient({ kubeconfig, namespace: NS });
  t.teardown(() => client.close());
  const changed: string[] = [];
  const errors: string[] = [];
  const inf = new Informer<KubeObject>({ client, path: `/api/v1/namespaces/${NS}/configmaps`, labelSelector: "test=inf", quietMs: 3000, onChange: (o) => changed.push(o.metadata.name), onError: (e) => errors.push(String(e)) });
  t.teardown(() => inf.stop());
  await cm("before");
  await inf.start();
  t.ok(inf.get("before"), "the first list fills the cache");
  t.equal(inf.relists, 1);
  await cm("live");
  await until("a watched change", () => inf.get("live"));
  t.equal(inf.relists, 1, "a healthy watch needs no relist");

  // Cut every connection: the watch errors; the informer relists and sees what happened.
  for (const p of live) { p.client.destroy(); p.upstream.destroy(); }
  await cm("after-cut");
  await until("the change made while the watch was cut", () => inf.get("after-cut"));
  t.ok(inf.relists >= 2, `relisted after the error (relists: ${inf.relists})`);

  // Freeze the open connections (no bytes, no close, no error): the watch has gone quiet.
  // New connections still flow.
  const relists = inf.relists;
  for (const p of live) { p.client.unpipe(); p.upstream.unpipe(); p.client.pause(); p.upstream.pause(); }
  await cm("while-quiet");
  await until("a relist after the quiet watch", () => inf.relists > relists && inf.get("while-quiet"), 20_000);
  t.ok(errors.some((e) => /went quiet/.test(e)), "the quiet watch was abandoned as quiet");
  t.ok(changed.includes("while-quiet"), "the handler heard of the change");

  // Deletions made while it could not see are noticed by the relist too.
  await direct.request("DELETE", `/api/v1/namespaces/${NS}/configmaps/before`);
  await until("the deletion", () => !inf.get("before"));
  t.pass("deleted objects leave the cache");
});

t.test("the cache keeps what the transform keeps, never managedFields: from the list, the watch and assume", async (t) => {
  type CM = KubeObject & { data?: Record<string, string> };
  const path = `/api/v1/namespaces/${NS}/configmaps`;
  const make = (name: string) => direct.request<CM>("POST", path, { body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name, labels: { test: "slim" } }, data: { keep: "1", drop: "x".repeat(1000) } } });
  const raw = await make("slim-listed");
  t.ok((raw.metadata as { managedFields?: unknown }).managedFields, "the API server sends managedFields");
  const seen: CM[] = [];
  const inf = new Informer<CM>({
    client: direct, path, labelSelector: "test=slim",
    transform: (o) => ({ ...o, data: { keep: o.data?.keep ?? "" } }),
    onChange: (o) => seen.push(o),
  });
  t.teardown(() => inf.stop());
  await inf.start();
  await make("slim-watched");
  await until("the watched one", () => inf.get("slim-watched"));
  const assumed = await direct.request<CM>("PUT", `${path}/slim-listed`, { body: { ...raw, data: { keep: "2", drop: "y" } } });
  inf.assume(assumed);
  for (const name of ["slim-listed", "slim-watched"]) {
    const o = inf.get(name) as CM;
    t.same(o.data, { keep: name === "slim-listed" ? "2" : "1" }, `${name}: only what the transform keeps`);
    t.notOk("managedFields" in o.metadata, `${name}: no managedFields in the cache`);
    t.equal(o.metadata.labels?.test, "slim", "the rest of the metadata stays");
  }
  t.ok(seen.length >= 2 && seen.every((o) => !("drop" in (o.data ?? {})) && !("managedFields" in o.metadata)), "handlers get the kept part too");
});

t.test("leader election: one holder; the Lease passes on release and on expiry", async (t) => {
  const client = await createKubeClient({ kubeconfig: env.kubeconfigPath, namespace: NS });
  t.teardown(() => client.close());
  const events: string[] = [];
  const mk = (id: string) => new LeaderElector({
    client, namespace: NS, name: "le-test", identity: id, leaseDurationMs: 2000, renewDeadlineMs: 1300, retryPeriodMs: 250,
    onStartedLeading: () => { events.push(`${id}:start`); }, onStoppedLeading: () => { events.push(`${id}:stop`); },
  });
  const a = mk("a");
  const b = mk("b");
  a.start();
  await until("a leads", () => a.isLeader());
  b.start();
  await sleep(1500);
  t.notOk(b.isLeader(), "b waits while a renews");
  t.same(events, ["a:start"]);
  await a.stop(); // releases the Lease
  const released = Date.now();
  await until("b takes over", () => b.isLeader());
  t.ok(Date.now() - released < 1500, "a released Lease is taken at once, not after it expires");
  const lease = await client.request<{ spec: { holderIdentity: string; leaseTransitions: number } }>("GET", `${paths.leases(NS)}/le-test`);
  t.equal(lease.spec.holderIdentity, "b");
  t.ok(lease.spec.leaseTransitions >= 1);
  await b.stop();
  // A partitioned leader: d reaches the API server through the proxy, which then drops
  // everything. d must give up leading (renew deadline) before e takes the expired Lease.
  const partitioned = await createKubeClient({ kubeconfig, namespace: NS });
  t.teardown(() => partitioned.close());
  const d = new LeaderElector({ client: partitioned, namespace: NS, name: "le-test", identity: "d", leaseDurationMs: 2000, renewDeadlineMs: 1300, retryPeriodMs: 250, onStartedLeading: () => { events.push("d:start"); }, onStoppedLeading: () => { events.push("d:stop"); } });
  d.start();
  await until("d leads", () => d.isLeader());
  const e = mk("e");
  e.start();
  await sleep(600);
  t.notOk(e.isLeader(), "e waits while d renews");
  blackhole = true;
  for (const p of live) { p.client.destroy(); p.upstream.destroy(); }
  await until("e takes over after the Lease expires", () => e.isLeader(), 10_000);
  blackhole = false;
  t.ok(events.indexOf("d:stop") >= 0 && events.indexOf("d:stop") < events.indexOf("e:start"), `d stopped leading before e started (${events.join(", ")})`);
  await e.stop();
  await d.stop();
});
