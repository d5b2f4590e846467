/**
 * `kill -9` of the embedded server while a render job runs in its worker, then a restart on
 * the same data directory: the job reads `failed` with the reason (never stuck `running`),
 * its slot is free again, and a new job on the restarted server completes.
 */
import t from "tap";
import { createReadStream, createWriteStream, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serveProcess } from "../support/serve.js";
import { until } from "../support/wait.js";
import { createLocalObjectStore } from "../../adapters/local/object-store.js";

const dir = mkdtempSync(join(tmpdir(), "operon-render-restart-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

/** GWAS-like summary statistics, big enough that rendering takes seconds (so the kill lands mid-job). */
async function writeGwas(path: string, rows: number): Promise<void> {
  const out = createWriteStream(path);
  out.write("SNP\tCHR\tBP\tP\n");
  let seed = 11;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  let buf = "";
  for (let i = 0; i < rows; i++) {
    buf += `rs${i + 1}\t${1 + (i % 22)}\t${1000 + Math.floor(i / 22) * 97}\t${rand().toPrecision(6)}\n`;
    if (buf.length > 1 << 20) { if (!out.write(buf)) await new Promise<void>((r) => out.once("drain", () => r())); buf = ""; }
  }
  out.end(buf);
  await new Promise<void>((r) => out.once("finish", () => r()));
}

t.test("kill -9 mid-render: the job is failed with its reason after the restart", async (t) => {
  const data = join(dir, "data");
  const server = await serveProcess(t, data);
  await server.start();
  const api = server.api;
  const store = createLocalObjectStore({ root: data, publicUrl: "http://localhost", signingSecret: "x".repeat(40) });
  const big = join(dir, "big.tsv");
  await writeGwas(big, 3_000_000);
  await store.put("orgs/default/workspaces/default/gwas/big.tsv", createReadStream(big));

  const sub = await api("POST", "/v1/visualizations/render", { type: "manhattan_plot", file_path: "gwas/big.tsv", workspace_id: "default" });
  t.equal(sub.status, 202, JSON.stringify(sub.body));
  const id = sub.body.data.job_id as string;
  await until("the job to be running", async () => (await api("GET", `/v1/visualizations/${id}?workspace_id=default`)).body.data.status === "running", 60_000, 20);
  await server.stop("SIGKILL");

  await server.start();
  const after = (await api("GET", `/v1/visualizations/${id}?workspace_id=default`)).body.data;
  t.equal(after.status, "failed", "the job its server was running when it died is failed");
  t.match(after.error as string, /server restarted while this job was rendering/);
  t.ok(after.completed_at, "with the time it was found so");

  await store.put("orgs/default/workspaces/default/gwas/small.tsv", "SNP\tCHR\tBP\tP\nrs1\t1\t100\t0.5\nrs2\t1\t200\t1e-9\nrs3\t2\t100\t0.01\n");
  const next = await api("POST", "/v1/visualizations/render", { type: "manhattan_plot", file_path: "gwas/small.tsv", workspace_id: "default", output_format: "svg" });
  const nid = next.body.data.job_id as string;
  const done = await until("the new job to finish", async () => { const d = (await api("GET", `/v1/visualizations/${nid}?workspace_id=default`)).body.data; return d.status === "completed" || d.status === "failed" ? d : undefined; }, 60_000);
  t.equal(done.status, "completed", `a new job completes after the restart ${done.error ?? ""}`);
  await server.stop("SIGTERM");
});
