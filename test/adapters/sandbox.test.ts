/**
 * The step sandbox as the last layer: argv that no catalogue command would build (they go
 * straight to the process executor, past every check above it) tries to read the data
 * directory, another run's working directory and the host's /tmp, to write outside its own
 * working directory, to change its (mounted) input, and to open a TCP connection to a server
 * this test listens with. Each gets nothing; the same steps without the sandbox do get
 * through, so the assertions are about the sandbox and not about a broken step.
 */
import t from "tap";
import { createServer } from "node:net";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLocalObjectStore } from "../../adapters/local/object-store.js";
import { createProcessExecutor } from "../../adapters/local/process-executor.js";
import type { ObservedStepState, StepTask } from "../../core/ports.js";
import { chooseSandbox } from "../../wiring/runtime.js";
import type { Invocation } from "../../core/tools/index.js";
import { until } from "../support/wait.js";

const dir = mkdtempSync(join(tmpdir(), "operon-sandbox-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const CANARY = `canary-${Math.random().toString(36).slice(2)}`;
writeFileSync(join(dir, "planted.txt"), `${CANARY} in the data directory\n`);
const hostTmp = join(tmpdir(), `operon-canary-${process.pid}.txt`);
writeFileSync(hostTmp, `${CANARY} in the host's /tmp\n`);
t.teardown(() => rmSync(hostTmp, { force: true }));

const store = createLocalObjectStore({ root: dir, publicUrl: "http://localhost", signingSecret: "x".repeat(40) });
const WS = "orgs/o/workspaces/w/";
await store.put(`${WS}data/in.txt`, `${CANARY} input\n`);

// A TCP server on loopback: a sandboxed step must not reach it.
let connections = 0;
const server = createServer((s) => { connections++; s.destroy(); });
await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
t.teardown(() => server.close());
const port = (server.address() as { port: number }).port;

function executor(sandbox: "bwrap" | "off", mountInputs = true) {
  const ex = createProcessExecutor({ dataDir: dir, store, sandbox, mountInputs, keepWorkdirs: true });
  t.teardown(() => ex.shutdown());
  return ex;
}

let n = 0;
async function runStep(ex: ReturnType<typeof executor>, argv: string[], extra: Partial<Invocation> = {}): Promise<{ state: ObservedStepState; log: string; runId: string }> {
  const runId = `run-sbx${++n}`;
  const task: StepTask = {
    runId, organization: "o", stepId: "s", attempt: 1, toolName: "test",
    invocation: { argv, inputs: [], outputs: [], mkdirs: [], ...extra },
    workspaceRoot: WS, runRoot: `${WS}pipelines/${runId}/`, timeoutMs: 60_000,
  };
  await ex.submit(task);
  let state: ObservedStepState | undefined;
  await until(`step ${runId} to end`, async () => { state = (await ex.observe(runId)).get("s"); return state !== undefined && state.phase !== "running"; });
  return { state: state as ObservedStepState, log: (await ex.logs(runId, "s")) ?? "", runId };
}

const sh = (script: string) => ["bash", "-c", script];
const sandboxed = executor("bwrap");
const unsandboxed = executor("off");

t.test("the data directory is not there for a step", async (t) => {
  const r = await runStep(sandboxed, sh(`cat ${join(dir, "planted.txt")} && ls ${dir}`));
  t.equal(r.state.phase, "failed", "the read failed");
  t.notMatch(r.log, CANARY, "nothing of the file in the log");
  t.notMatch(r.state.message ?? "", dir, "no server path in the step's message");
  const control = await runStep(unsandboxed, sh(`cat ${join(dir, "planted.txt")}`));
  t.equal(control.state.phase, "completed", "without the sandbox the same step reads it (the test can fail)");
  t.match(control.log, CANARY);
});

t.test("another run's working directory and the host's /tmp are not there", async (t) => {
  const victim = await runStep(sandboxed, sh(`echo ${CANARY} > mine.txt`));
  t.equal(victim.state.phase, "completed");
  const victimFile = join(dir, "work", victim.runId, "s-1", "work", "mine.txt");
  t.ok(existsSync(victimFile), "the other run's file exists on the host");
  const r = await runStep(sandboxed, sh(`cat ${victimFile}; cat ${hostTmp}; cat /tmp/*; ls -a /tmp /work`));
  t.notMatch(r.log, CANARY, "neither file is readable");
  t.match(r.log, /No such file or directory/);
});

t.test("writes outside the step's own working directory land nowhere on the host", async (t) => {
  const escapes = [join(tmpdir(), `operon-escape-${process.pid}`), join(dir, "escape.txt"), "/root/operon-escape", "/usr/operon-escape"];
  const r = await runStep(sandboxed, sh(escapes.map((p) => `echo x > ${p}`).join("; ") + "; echo inside > /work/ok.txt; true"));
  t.equal(r.state.phase, "completed");
  for (const p of escapes) t.notOk(existsSync(p), `${p} was not created`);
  t.equal(readFileSync(join(dir, "work", r.runId, "s-1", "work", "ok.txt"), "utf8"), "inside\n", "its own working directory is writable");
});

t.test("no network: a TCP connection to a loopback server fails", async (t) => {
  const before = connections;
  const r = await runStep(sandboxed, sh(`echo hello > /dev/tcp/127.0.0.1/${port}`));
  t.equal(r.state.phase, "failed", "the connection failed");
  t.equal(connections, before, "the server saw no connection");
  const control = await runStep(unsandboxed, sh(`echo hello > /dev/tcp/127.0.0.1/${port}`));
  t.equal(control.state.phase, "completed", "without the sandbox it connects (the test can fail)");
  await until("the control connection", () => connections > before, 5000);
});

t.test("a mounted input is read-only and readable; a copied one gives the same result", async (t) => {
  const inputs = [{ param: "inputFile", source: "data/in.txt", local: "in/1/in.txt" }];
  const outputs = [{ path: "out.txt", secondary: [] }];
  const mounted = await runStep(sandboxed, sh("cat in/1/in.txt > out.txt; echo tampered > in/1/in.txt && echo WROTE; true"), { inputs, outputs });
  t.equal(mounted.state.phase, "completed");
  t.notMatch(mounted.log, "WROTE", "the input could not be written");
  t.match(mounted.log, /Read-only file system/);
  const { body } = await store.get(`${WS}data/in.txt`);
  let stored = "";
  for await (const c of body) stored += Buffer.from(c).toString();
  t.equal(stored, `${CANARY} input\n`, "the stored input is unchanged");
  const copied = await runStep(executor("bwrap", false), sh("cat in/1/in.txt > out.txt"), { inputs, outputs });
  t.equal(copied.state.phase, "completed");
  t.equal(mounted.state.outputs?.[0]?.sha256, copied.state.outputs?.[0]?.sha256, "mounted and copied inputs give the same output");
});

t.test("a missing tool fails its step with a clear message, and the process stays up", async (t) => {
  const r = await runStep(sandboxed, ["operon-no-such-tool", "x"]);
  t.equal(r.state.phase, "failed");
  t.match(r.state.message ?? "", /operon-no-such-tool is not installed/);
});

t.test("where the sandbox cannot start, steps are refused with the reason", async (t) => {
  const ex = createProcessExecutor({ dataDir: dir, store, sandbox: { unavailable: "bwrap is not installed" } });
  t.teardown(() => ex.shutdown());
  const r = await runStep(ex, ["true"]);
  t.equal(r.state.phase, "failed");
  t.match(r.state.message ?? "", /sandbox cannot start here \(bwrap is not installed\).*OPERON_UNSAFE_NO_SANDBOX=1/);
});

t.test("start-up: the sandbox where it starts; else steps refused, or unsandboxed with OPERON_UNSAFE_NO_SANDBOX=1, loudly", async (t) => {
  const logs: string[] = [];
  const log = (m: string) => logs.push(m);
  t.equal(await chooseSandbox(dir, false, log), "bwrap", "bwrap works on this machine");
  t.equal(await chooseSandbox(dir, true, log), "bwrap", "the variable never turns a working sandbox off");
  t.strictSame(logs, [], "nothing to warn about");
  const missing = join(dir, "no-such-bwrap");
  t.match(await chooseSandbox(dir, false, log, missing), { unavailable: /bwrap is not installed/ });
  t.match(logs.pop(), /^WARNING: steps will not run: .*OPERON_UNSAFE_NO_SANDBOX=1/);
  t.equal(await chooseSandbox(dir, true, log, missing), "off");
  t.match(logs.pop(), /^WARNING: the sandbox cannot start .*WITHOUT the sandbox/);
});
