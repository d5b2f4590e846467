/**
 * Run folders (docs/storage.md#run-folders): a UTC timestamp, unique per workspace even for a burst of
 * submissions in the same second, concurrent or not, found without re-listing every
 * earlier folder of that second; a folder already in storage is never reused; and two
 * api-server processes (two engines sharing only the store) never share a folder, on the
 * filesystem store and on a real S3 server.
 */
import t from "tap";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLocalObjectStore } from "../../adapters/local/object-store.js";
import { createLocalRunStore } from "../../adapters/local/run-store.js";
import { createEngine } from "../../engine/engine.js";
import { createS3ObjectStore } from "../../adapters/s3/object-store.js";
import type { ObjectStore, StepExecutor } from "../../core/ports.js";
import { startMinio } from "../support/minio.js";

const dir = mkdtempSync(join(tmpdir(), "operon-folders-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const fixed = Date.parse("2026-11-22T02:00:00.250Z");
const base = createLocalObjectStore({ root: dir, publicUrl: "http://localhost", signingSecret: "x".repeat(40) });
let lists = 0;
const store: ObjectStore = { ...base, list: (prefix, o) => { lists++; return base.list(prefix, o); } };
// Nothing runs: the engine's loop is off, only submission is exercised.
const idle: StepExecutor = { submit: async () => undefined, observe: async () => new Map(), kill: async () => undefined, watch: () => () => undefined, logs: async () => undefined };
const engine = createEngine({ runs: createLocalRunStore(dir), executor: idle, store, clock: { now: () => fixed }, orgConcurrency: () => 5, controller: false });
const spec = { steps: [{ stepId: "a", toolName: "samtools", parameters: { command: "flagstat", inputFile: "x.bam" } }] };
const submit = async () => {
  const r = await engine.submit({ organization: "acme", workspace: "ws", keyId: "k", spec, source: { kind: "inline" }, input: {} });
  if (!r.ok) throw new Error(r.error.message);
  return r.run.outputFolder;
};

t.test("a burst in one second: unique folders, a bounded number of listings", async (t) => {
  // A folder of this second already holds files (an earlier server's run): never reused.
  await base.put("orgs/acme/workspaces/ws/pipelines/2026-11-22T02-00-00Z/run.json", "{}");
  lists = 0;
  const sequential: string[] = [];
  for (let i = 0; i < 40; i++) sequential.push(await submit());
  const concurrent = await Promise.all(Array.from({ length: 40 }, () => submit()));
  const all = [...sequential, ...concurrent];
  t.equal(new Set(all).size, 80, "80 distinct folders");
  t.notOk(all.includes("pipelines/2026-11-22T02-00-00Z"), "the stored folder is not reused");
  t.equal(sequential[0], "pipelines/2026-11-22T02-00-00Z-2");
  t.equal(sequential[39], "pipelines/2026-11-22T02-00-00Z-41");
  t.ok(lists < 80 * 3, `listings stay linear in the submissions (${lists} for 80)`);
});

for (const kind of ["filesystem", "S3 (MinIO)"] as const) {
  t.test(`two api-servers, 200 runs in the same second, one workspace (${kind}): no shared folder`, async (t) => {
    let shared: ObjectStore;
    if (kind === "filesystem") shared = createLocalObjectStore({ root: mkdtempSync(join(tmpdir(), "operon-folders-")), publicUrl: "http://localhost", signingSecret: "x".repeat(40) });
    else {
      const minio = await startMinio();
      t.teardown(() => minio.stop());
      shared = createS3ObjectStore({ endpoint: minio.endpoint, bucket: minio.bucket, region: minio.region, forcePathStyle: true, credentials: { accessKeyId: minio.accessKeyId, secretAccessKey: minio.secretAccessKey } });
    }
    // Separate engines: separate in-process reservations, as two replicas have.
    const replicas = [0, 1].map(() => createEngine({ runs: createLocalRunStore(mkdtempSync(join(tmpdir(), "operon-folders-"))), executor: idle, store: shared, clock: { now: () => fixed }, orgConcurrency: () => 5, controller: false }));
    const folders = await Promise.all(Array.from({ length: 200 }, async (_, i) => {
      const r = await (replicas[i % 2] as typeof engine).submit({ organization: "acme", workspace: "ws", keyId: "k", spec, source: { kind: "inline" }, input: {} });
      if (!r.ok) throw new Error(r.error.message);
      return r.run.outputFolder;
    }));
    t.equal(new Set(folders).size, 200, "200 distinct folders");
    t.ok(folders.every((f) => f.startsWith("pipelines/2026-11-22T02-00-00Z")), "all of the same second");
  });
}
