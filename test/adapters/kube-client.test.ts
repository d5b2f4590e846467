/**
 * The Kubernetes client names itself: every request carries a User-Agent (`operon-operator`,
 * `operon-api-server`, …), as client-go's `<binary>/<version>`, so that the apiserver's audit log
 * and logs can tell Operon's writes from the Job controller's (the peer bench counts them so).
 * An HTTP endpoint on loopback records what the client sends.
 */
import t from "tap";
import { createServer, type IncomingHttpHeaders } from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createKubeClient } from "../../adapters/kubernetes/client.js";

const seen: Array<{ method: string; url: string; headers: IncomingHttpHeaders }> = [];
const server = createServer((req, res) => {
  seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers });
  req.resume();
  req.on("end", () => { res.setHeader("content-type", "application/json"); res.end(JSON.stringify({ kind: "Status", status: "Success" })); });
});
await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
t.teardown(() => server.close());
const port = (server.address() as { port: number }).port;
const dir = mkdtempSync(join(tmpdir(), "operon-kube-client-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const kubeconfig = join(dir, "kubeconfig");
writeFileSync(kubeconfig, `apiVersion: v1
kind: Config
clusters: [{ name: c, cluster: { server: "http://127.0.0.1:${port}", insecure-skip-tls-verify: true } }]
users: [{ name: u, user: { token: not-a-real-token } }]
contexts: [{ name: x, context: { cluster: c, user: u, namespace: ns1 } }]
current-context: x
`);

t.test("every request, read or write, carries the User-Agent the caller chose", async (t) => {
  const client = await createKubeClient({ kubeconfig, userAgent: "operon-operator" });
  t.teardown(() => client.close());
  seen.length = 0;
  await client.request("GET", "/api/v1/namespaces/ns1/pods");
  await client.request("POST", "/apis/batch/v1/namespaces/ns1/jobs", { body: { kind: "Job" } });
  t.equal(seen.length, 2);
  for (const r of seen) t.match(r.headers["user-agent"], /^operon-operator \(linux\/[a-z0-9_]+\) node\/\d+\.\d+\.\d+$/, `${r.method} ${r.url}`);
  t.equal(seen[1]?.headers.authorization, "Bearer not-a-real-token", "the credentials still go with it");
});

t.test("without one, the client calls itself operon", async (t) => {
  const client = await createKubeClient({ kubeconfig });
  t.teardown(() => client.close());
  seen.length = 0;
  await client.request("GET", "/version");
  t.match(seen[0]?.headers["user-agent"], /^operon \(/);
});
