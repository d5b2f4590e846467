/**
 * `kill -9` of the embedded server while a real tool runs (`bwa index` on a reference the
 * test makes), then a restart: no process of the old attempt survives the server, the step
 * runs again as attempt 2 (recorded in the API and in run.json), the run completes once. And
 * at the executor level, for unsandboxed steps (which do not die with the server): a restart
 * kills the old attempt's whole process group before anything runs again.
 */
import t from "tap";
import { existsSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLocalObjectStore } from "../../adapters/local/object-store.js";
import { createProcessExecutor } from "../../adapters/local/process-executor.js";
import { serveProcess } from "../support/serve.js";
import { until } from "../support/wait.js";

const dir = mkdtempSync(join(tmpdir(), "operon-crash-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

/** Processes whose working directory is under `root`, as [pid, command]. */
function processesUnder(root: string): Array<[number, string]> {
  const out: Array<[number, string]> = [];
  for (const p of readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const cwd = readlinkSync(`/proc/${p}/cwd`);
      if (cwd.startsWith(root)) out.push([Number(p), readFileSync(`/proc/${p}/cmdline`, "utf8").split("\0").join(" ").trim()]);
    } catch { /* gone, or not ours to read */ }
  }
  return out;
}

/** Every live descendant of `root`, as [pid, command] (sandboxed tools included: their cwd is not the host's path). */
function descendants(root: number): Array<[number, string]> {
  const parent = new Map<number, number>();
  for (const p of readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const stat = readFileSync(`/proc/${p}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (fields[0] !== "Z") parent.set(Number(p), Number(fields[1]));
    } catch { /* gone */ }
  }
  const out: Array<[number, string]> = [];
  for (const pid of parent.keys()) {
    for (let p: number | undefined = parent.get(pid); p !== undefined && p > 1; p = parent.get(p)) {
      if (p === root) {
        try { out.push([pid, readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim()]); } catch { /* gone */ }
        break;
      }
    }
  }
  return out;
}
const alive = (pid: number) => { try { return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8")); } catch { return false; } };
const isTool = ([, cmd]: [number, string]) => /^\/usr\/bin\/bwa index/.test(cmd);

t.test("kill -9 during bwa index: the tool dies with the server, the restart runs attempt 2 once", async (t) => {
  const data = join(dir, "data");
  // A 16 MB random reference: bwa index takes seconds, long enough to be caught running.
  const store = createLocalObjectStore({ root: data, publicUrl: "http://localhost", signingSecret: "x".repeat(40) });
  let seed = 7;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const lines: string[] = [">chr1"];
  for (let i = 0; i < 16 * 1024 * 1024 / 64; i++) lines.push(Array.from({ length: 64 }, () => "ACGT"[Math.floor(rand() * 4)]).join(""));
  await store.put("orgs/default/workspaces/default/refs/big.fa", lines.join("\n") + "\n");

  const server = await serveProcess(t, data);
  await server.start();
  const api = async (method: string, path: string, body?: unknown) => (await server.api(method, path, body)).body;
  const spec = { steps: [{ stepId: "index", toolName: "bwa", parameters: { command: "index", inputFile: "refs/big.fa" } }] };
  const run = (await api("POST", "/v1/pipelines", { workspace_id: "default", spec })).data as { id: string; output_folder: string };
  t.match(run.id, /^run-/);

  const work = join(data, "work", run.id);
  const tree = await until("bwa index to run under the server", () => { const d = descendants(server.pid() as number); return d.some(isTool) ? d : undefined; }, 60_000);
  await server.stop("SIGKILL");
  await until("every process of the old attempt to be gone", () => tree.every(([pid]) => !alive(pid)), 15_000);
  t.pass(`none of the ${tree.length} processes under the killed server survives it (bwa among them)`);

  await server.start();
  let most = 0;
  const done = await until("the run to finish after the restart", async () => {
    most = Math.max(most, descendants(server.pid() as number).filter(isTool).length);
    const r = (await api("GET", `/v1/pipelines/${run.id}?workspace_id=default`)).data as { status: string; steps: Array<{ status: string; attempt: number; error: string | null }> };
    return ["completed", "failed", "cancelled"].includes(r.status) ? r : undefined;
  }, 180_000, 100);
  t.equal(done.status, "completed", JSON.stringify(done.steps));
  t.equal(done.steps[0]?.attempt, 2, "the API records attempt 2");
  t.equal(most, 1, "one bwa process of the step at a time, seen running");
  const manifest = JSON.parse(readFileSync(join(data, "objects/orgs/default/workspaces/default", run.output_folder, "run.json"), "utf8")) as { status: string; steps: Array<{ attempt: number; outputFiles: unknown[] }> };
  t.equal(manifest.status, "completed");
  t.equal(manifest.steps[0]?.attempt, 2, "run.json records attempt 2");
  t.strictSame(manifest.steps[0]?.outputFiles.map((o) => (o as { filename: string }).filename).sort(), ["big.fa", "big.fa.amb", "big.fa.ann", "big.fa.bwt", "big.fa.pac", "big.fa.sa"], "the indexed reference and its index, published once");
  t.notOk(existsSync(join(work, "index-1", "work")), "the lost attempt's working directory is gone");

  // The organization at its limit when the server dies: 2 runs × 3 parallel bwa index steps
  // (5 slots); killed with 5 running; never more than 5 tool processes, before or after.
  const wide = { steps: ["x", "y", "z"].map((stepId) => ({ stepId, toolName: "bwa", parameters: { command: "index", inputFile: "refs/big.fa", outputFile: `${stepId}.fa` } })) };
  const runs = await Promise.all([0, 1].map(async () => ((await api("POST", "/v1/pipelines", { workspace_id: "default", spec: wide })).data as { id: string }).id));
  let peak = 0;
  const tree5 = await until("5 bwa processes (the organization's limit)", () => {
    const d = descendants(server.pid() as number);
    peak = Math.max(peak, d.filter(isTool).length);
    return d.filter(isTool).length === 5 ? d : undefined;
  }, 120_000, 50);
  await server.stop("SIGKILL");
  await until("every process of the 5 lost attempts to be gone", () => tree5.every(([pid]) => !alive(pid)), 15_000);
  await server.start();
  const finished = await until("both runs to finish after the restart", async () => {
    peak = Math.max(peak, descendants(server.pid() as number).filter(isTool).length);
    const rs = await Promise.all(runs.map(async (id) => (await api("GET", `/v1/pipelines/${id}?workspace_id=default`)).data as { status: string; steps: Array<{ attempt: number }> }));
    return rs.every((r) => ["completed", "failed", "cancelled"].includes(r.status)) ? rs : undefined;
  }, 300_000, 100);
  t.strictSame(finished.map((r) => r.status), ["completed", "completed"]);
  t.equal(peak, 5, "at most 5 bwa processes of the organization at any moment, before and after the crash");
  const attempts = finished.flatMap((r) => r.steps.map((st) => st.attempt)).sort();
  t.strictSame(attempts, [1, 2, 2, 2, 2, 2], "the 5 lost steps ran again as attempt 2, the waiting one once");
  await server.stop("SIGTERM");
});

t.test("unsandboxed steps: a restart kills the lost attempt's whole process group", async (t) => {
  const data = join(dir, "off");
  const store = createLocalObjectStore({ root: data, publicUrl: "http://localhost", signingSecret: "x".repeat(40) });
  const crashed = createProcessExecutor({ dataDir: data, store, sandbox: "off" });
  const marker = `operon-crash-${process.pid}`;
  await crashed.submit({
    runId: "run-crash", organization: "o", stepId: "s", attempt: 1, toolName: "sh",
    invocation: { argv: ["bash", "-c", `sleep 300 & sleep 301 & echo started > started.txt; wait # ${marker}`], inputs: [], outputs: [], mkdirs: [] },
    workspaceRoot: "orgs/o/workspaces/w/", runRoot: "orgs/o/workspaces/w/pipelines/x/", timeoutMs: 600_000,
  });
  const work = join(data, "work", "run-crash");
  await until("the step and its children to run", () => existsSync(join(work, "s-1", "work", "started.txt")) && processesUnder(work).length >= 3, 30_000);
  // The server "crashes": nothing of the first executor is stopped. A new one recovers.
  const restarted = createProcessExecutor({ dataDir: data, store, sandbox: "off" });
  t.teardown(() => restarted.shutdown());
  await restarted.recover();
  await until("the old attempt's processes to be gone", () => processesUnder(work).length === 0, 10_000);
  t.match((await restarted.observe("run-crash")).get("s"), { phase: "lost", attempt: 1, message: /the server stopped/ }, "recorded as lost, to be run again as attempt 2");
  await crashed.shutdown();
});
