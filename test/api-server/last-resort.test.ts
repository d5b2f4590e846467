import t from "tap";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describeUncaught } from "../../api-server/last-resort.js";
import { testApp } from "../support/app.js";

const here = fileURLToPath(new URL(".", import.meta.url));
const moduleUrl = (p: string) => pathToFileURL(fileURLToPath(new URL(p, import.meta.url))).href;

// tap wraps each test in a domain that takes uncaught errors for itself, so the handlers are
// exercised where they will run: in a plain Node process of their own.
const child = `
import { installLastResortHandlers } from ${JSON.stringify(moduleUrl("../../api-server/last-resort.ts"))};
import { createMetrics } from ${JSON.stringify(moduleUrl("../../api-server/metrics.ts"))};
const metrics = createMetrics();
const lines = [];
installLastResortHandlers((l) => lines.push(l), metrics.uncaughtErrors);
Promise.reject(new Error("ENOENT: no such file or directory, open '/srv/operon/.operon/tmp/x.json'"));
setTimeout(() => { throw new Error("boom in a timer, key sk_live_${"Q".repeat(32)}"); }, 10);
setTimeout(async () => {
  const counter = await metrics.registry.getSingleMetric("operon_uncaught_errors_total").get();
  const text = await metrics.registry.metrics();
  process.stdout.write(JSON.stringify({ alive: true, values: counter.values, lines, exposed: text.includes("operon_uncaught_errors_total") }));
}, 200);
`;

t.test("an unhandled rejection and an uncaught exception are logged, counted, and the process lives on", async (t) => {
  const r = spawnSync(process.execPath, ["--import=tsx", "--input-type=module", "-e", child], { cwd: here, encoding: "utf8", timeout: 60_000 });
  t.equal(r.status, 0, `exit status (stderr: ${r.stderr})`);
  const out = JSON.parse(r.stdout) as { alive: boolean; values: Array<{ value: number; labels: { kind: string } }>; lines: string[]; exposed: boolean };
  t.ok(out.alive, "the process kept running after both");
  t.same(out.values.map((v) => [v.labels.kind, v.value]).sort(), [["uncaught_exception", 1], ["unhandled_rejection", 1]], "operon_uncaught_errors_total counted each");
  t.ok(out.exposed, "the counter is on the /metrics registry");
  t.equal(out.lines.length, 2, "one line each");
  const text = out.lines.join("\n");
  t.match(text, /unhandled promise rejection.*ENOENT: no such file or directory, open '<path>'/);
  t.match(text, /uncaught exception.*boom in a timer/);
  t.notOk(text.includes("/srv/operon"), "no server path");
  t.notOk(text.includes("Q".repeat(32)), "no key");
  t.notOk(/\n\s+at /.test(text) || text.includes(" at file:"), "no stack");
});

t.test("startServer installs the handlers: a stray rejection is counted on its /metrics", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "operon-last-resort-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const script = `
import { parseConfig } from ${JSON.stringify(moduleUrl("../../core/config.ts"))};
import { startServer } from ${JSON.stringify(moduleUrl("../../api-server/server.ts"))};
const c = parseConfig({ PORT: "0", OPERON_DATA_DIR: ${JSON.stringify(dir)} });
const app = await startServer(c.config, () => undefined);
Promise.reject(new Error("stray at ${dir}/tmp/x"));
await new Promise((r) => setTimeout(r, 100));
const m = await app.inject({ method: "GET", url: "/metrics" });
const line = m.body.split("\\n").find((l) => l.startsWith("operon_uncaught_errors_total"));
await app.close();
process.stdout.write("RESULT " + JSON.stringify({ line }) + "\\n");
process.exit(0);
`;
  const r = spawnSync(process.execPath, ["--import=tsx", "--input-type=module", "-e", script], { cwd: here, encoding: "utf8", timeout: 60_000, env: { ...process.env, LOG_LEVEL: "info" } });
  t.equal(r.status, 0, `exit status (stderr: ${r.stderr})`);
  const result = r.stdout.split("\n").find((l) => l.startsWith("RESULT "));
  t.ok(result, r.stdout);
  t.equal(JSON.parse(result?.slice(7) ?? "{}").line, 'operon_uncaught_errors_total{kind="unhandled_rejection"} 1');
  const logged = r.stdout.split("\n").filter((l) => l.includes("unhandled promise rejection"));
  t.equal(logged.length, 1, "one log line");
  t.notOk(logged.join("").includes(dir), "without the server path");
});

t.test("describeUncaught: one line, no stack, whatever was thrown", async (t) => {
  const e = new TypeError("bad thing at /home/op/app/x.ts\nsecond line");
  t.equal(describeUncaught(e), "TypeError: bad thing at <path> second line");
  t.equal(describeUncaught("plain string"), "plain string");
  t.equal(describeUncaught({ code: 7 }), '{"code":7}');
  t.equal(describeUncaught(undefined), "undefined");
  t.ok(describeUncaught("x".repeat(2000)).length <= 501);
});

t.test("the app's /metrics exposes operon_uncaught_errors_total", async (t) => {
  const a = await testApp();
  t.teardown(() => a.close());
  const m = await a.app.inject({ method: "GET", url: "/metrics" });
  t.match(m.body, /# TYPE operon_uncaught_errors_total counter/);
});
