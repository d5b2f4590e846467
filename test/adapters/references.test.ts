/**
 * Reading reference data on real files (adapters/references.ts), as embedded mode's executor
 * and the cluster's stage-in helper do: a temporary directory stands in for a volume
 * (/ref/<volume> in a pod). Checksums equal sha256 of the bytes; a directory gets its listing
 * digest; a symbolic link out of the volume is refused (file or inside a directory), one
 * within it is followed; the cache keys on (real path, size, mtime). Then `operon stage-in`
 * itself (the CLI's function, in process) with OPERON_REF_VOLUMES mapping the volume, as the
 * test kubelet will: its termination message holds the checksums, and a refusal fails it.
 */
import t from "tap";
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, symlink, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ChecksumCache, checksumReferences, locateReference } from "../../adapters/references.js";
import { parseStepPlan } from "../../adapters/staging.js";
import { buildJob, STAGE_CONTAINER_IN } from "../../core/kubernetes/jobs.js";
import { listingText, parseReferencesReport } from "../../core/references.js";
import { buildInvocation, defaultCatalogue } from "../../core/tools/index.js";
import { stageInCommand } from "../../cli/stage.js";

const root = await mkdtemp(join(tmpdir(), "operon-refs-"));
t.teardown(() => rm(root, { recursive: true, force: true }));
const vol = join(root, "volumes", "refs");
const outside = join(root, "outside");
await mkdir(join(vol, "bwa"), { recursive: true });
await mkdir(join(vol, "humandb", "sub"), { recursive: true });
await mkdir(outside, { recursive: true });
const genome = Buffer.from(">chr1\n" + "ACGT".repeat(5000) + "\n");
await writeFile(join(vol, "bwa", "genome.fa"), genome);
await writeFile(join(vol, "humandb", "hg38_refGene.txt"), "gene\tdata\n");
await writeFile(join(vol, "humandb", "sub", "x.idx"), "12345");
await writeFile(join(outside, "secret.txt"), "not reference data\n");
await symlink("bwa/genome.fa", join(vol, "alias.fa"));
await symlink(join(outside, "secret.txt"), join(vol, "escape.fa"));
await symlink("../..", join(vol, "up"));
await mkdir(join(vol, "leaky"));
await symlink(join(outside, "secret.txt"), join(vol, "leaky", "secret.txt"));
// The volume's directory itself may be a link (a mount point elsewhere).
await symlink(vol, join(root, "linked-volume"));

const sha = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");
const roots = (name: string) => (name === "refs" ? vol : undefined);
const ref = (uri: string) => ({ uri, path: `/ref/${uri.slice("ref://".length)}` });

t.test("a file: its sha256 and size; a link within the volume is followed", async (t) => {
  const r = await checksumReferences([ref("ref://refs/bwa/genome.fa"), ref("ref://refs/alias.fa")], roots);
  t.same(r.checksums, [
    { uri: "ref://refs/bwa/genome.fa", sha256: sha(genome), size: genome.length },
    { uri: "ref://refs/alias.fa", sha256: sha(genome), size: genome.length },
  ]);
  t.same([...r.volumes.keys()], ["refs"]);
  const viaLink = await checksumReferences([ref("ref://refs/bwa/genome.fa")], (n) => (n === "refs" ? join(root, "linked-volume") : undefined));
  t.equal(viaLink.checksums[0]?.sha256, sha(genome), "the volume's directory may itself be a link");
});

t.test("a directory (an ANNOVAR database): the digest of its listing, its files' total size", async (t) => {
  const r = await checksumReferences([ref("ref://refs/humandb")], roots);
  t.same(r.checksums, [{ uri: "ref://refs/humandb", kind: "directory", size: 10 + 5, sha256: sha(listingText([{ path: "hg38_refGene.txt", size: 10 }, { path: "sub/x.idx", size: 5 }])) }]);
});

t.test("refused, naming the URI and never a host path", async (t) => {
  const cases: Array<[{ uri: string; path: string }, RegExp]> = [
    [ref("ref://refs/escape.fa"), /ref:\/\/refs\/escape\.fa resolves outside reference volume "refs" \(a symbolic link leading out of it\): refused/],
    [ref("ref://refs/up/outside/secret.txt"), /resolves outside reference volume "refs"/],
    [ref("ref://refs/leaky"), /ref:\/\/refs\/leaky: secret\.txt resolves outside reference volume "refs"/],
    [ref("ref://refs/missing.fa"), /ref:\/\/refs\/missing\.fa: not found on reference volume "refs"/],
    [ref("ref://other/x.fa"), /reference volume "other" is not configured here/],
    [ref("ref://refs/../outside/secret.txt"), /"\.\." segments/],
    [{ uri: "ref://refs/bwa/genome.fa", path: "/etc/passwd" }, /its path "\/etc\/passwd" is not \/ref\/refs\/bwa\/genome\.fa/],
    [{ uri: "ref://refs/./bwa/genome.fa", path: "/ref/refs/bwa/genome.fa" }, /is not \/ref\/refs\/bwa\/genome\.fa|not normalized/],
  ];
  for (const [r, why] of cases) {
    const err = await checksumReferences([r], roots).then(() => undefined, (e: Error) => e);
    t.match(err?.message, why, r.uri);
    t.notOk(err?.message.includes(root), `${r.uri}: no host path in the message`);
  }
  const none = await checksumReferences([ref("ref://refs/bwa/genome.fa"), ref("ref://refs/escape.fa")], roots).then(() => "read", (e: Error) => e.message);
  t.match(none, /escape\.fa/, "all are located before any is read");
});

t.test("the cache: one read per (real path, size, mtime)", async (t) => {
  const f = join(vol, "cached.fa");
  await writeFile(f, "AAAA");
  const when = new Date("2026-01-01T00:00:00Z");
  await utimes(f, when, when);
  const cache = new ChecksumCache();
  const first = await checksumReferences([ref("ref://refs/cached.fa")], roots, cache);
  t.equal(first.checksums[0]?.sha256, sha("AAAA"));
  // Same size and mtime: the cached digest stands (the file is not read again).
  await writeFile(f, "CCCC");
  await utimes(f, when, when);
  t.equal((await checksumReferences([ref("ref://refs/cached.fa")], roots, cache)).checksums[0]?.sha256, sha("AAAA"), "cached");
  t.equal(cache.size, 1);
  // A new mtime: read again.
  const later = new Date("2026-01-02T00:00:00Z");
  await utimes(f, later, later);
  t.equal((await checksumReferences([ref("ref://refs/cached.fa")], roots, cache)).checksums[0]?.sha256, sha("CCCC"), "changed: read again");
  const located = await locateReference(ref("ref://refs/alias.fa"), roots);
  t.equal(located.real, join(await import("node:fs/promises").then((m) => m.realpath(vol)), "bwa", "genome.fa"), "keyed by the real path");
});

/* ------------------------------------------------------------------ operon stage-in */

async function stageIn(plan: unknown, env: Record<string, string> = {}) {
  const dir = await mkdtemp(join(root, "pod-"));
  await mkdir(join(dir, "work"));
  const log = join(dir, "termination-log");
  await writeFile(log, "");
  const err: string[] = [];
  const code = await stageInCommand(["--workdir", join(dir, "work"), "--termination-log", log], { out: () => undefined, err: (s) => err.push(s) }, {
    OPERON_DATA_DIR: join(dir, "data"),
    OPERON_STEP_PLAN: JSON.stringify(plan),
    OPERON_REF_VOLUMES: JSON.stringify({ refs: vol }),
    ...env,
  });
  return { code, message: await readFile(log, "utf8"), err: err.join("\n") };
}
const plan = (references: unknown) => ({ workspaceRoot: "orgs/acme/workspaces/ws1/", runRoot: "orgs/acme/workspaces/ws1/pipelines/x/", inputs: [], outputs: [], mkdirs: [], references });

t.test("stage-in reports each reference's checksum in its termination message", async (t) => {
  const r = await stageIn(plan([{ uri: "ref://refs/bwa/genome.fa", path: "/ref/refs/bwa/genome.fa" }, { uri: "ref://refs/humandb", path: "/ref/refs/humandb" }]));
  t.equal(r.code, 0, r.err);
  const reported = parseReferencesReport(r.message);
  t.same(reported?.map((x) => [x.uri, x.sha256, x.size, x.kind]), [
    ["ref://refs/bwa/genome.fa", sha(genome), genome.length, undefined],
    ["ref://refs/humandb", sha(listingText([{ path: "hg38_refGene.txt", size: 10 }, { path: "sub/x.idx", size: 5 }])), 15, "directory"],
  ]);
  const none = await stageIn(plan(undefined));
  t.equal(none.code, 0);
  t.equal(none.message, "", "no references: nothing on success, as before");
});

t.test("stage-in refuses a reference that leaves its volume, or a volume not mounted", async (t) => {
  const escape = await stageIn(plan([{ uri: "ref://refs/escape.fa", path: "/ref/refs/escape.fa" }]));
  t.equal(escape.code, 1);
  t.match(escape.message, /^stage-in: reference ref:\/\/refs\/escape\.fa resolves outside reference volume "refs"/);
  // Without OPERON_REF_VOLUMES the volumes are at /ref/<name>, which this machine has none of.
  const unmounted = await stageIn(plan([{ uri: "ref://refs/bwa/genome.fa", path: "/ref/refs/bwa/genome.fa" }]), { OPERON_REF_VOLUMES: "" });
  t.equal(unmounted.code, 1);
  t.match(unmounted.message, /reference volume "refs" is not available/);
  const bad = await stageIn(plan([{ uri: "ref://refs/../x", path: "/ref/x" }]));
  t.equal(bad.code, 2, "a plan with a malformed reference is a bad plan");
  t.match(bad.message, /^stage-in: OPERON_STEP_PLAN: references\[0\]\.uri: must be a normalized ref:\/\/<volume>\/<path>/);
});

t.test("the step Job hands stage-in the references its tool reads (OPERON_STEP_PLAN), which stage-in accepts", async (t) => {
  const built = buildInvocation(defaultCatalogue.get("bwa")!, { command: "mem", reference: "ref://refs/bwa/genome.fa", inputFile: "r1.fq" }, { runtime: "container", referenceVolumes: ["refs"] });
  if (!built.ok) throw new Error(JSON.stringify(built.errors));
  const job = buildJob({ runId: "run-1", organization: "acme", stepId: "align", attempt: 1, toolName: "bwa", invocation: built.invocation, workspaceRoot: "orgs/acme/workspaces/ws1/", runRoot: "orgs/acme/workspaces/ws1/pipelines/x/", timeoutMs: 60_000 },
    { namespace: "ops", image: "operon:test", toolImage: "bwa:test", storageEnv: {} }) as unknown as { spec: { template: { spec: { initContainers: Array<{ name: string; args?: string[]; env?: Array<{ name: string; value?: string }> }> } } } };
  const helper = job.spec.template.spec.initContainers.find((c) => c.name === STAGE_CONTAINER_IN);
  const parsed = parseStepPlan(helper?.env?.find((e) => e.name === "OPERON_STEP_PLAN")?.value);
  t.ok(parsed.ok, JSON.stringify(parsed));
  t.same(parsed.ok && parsed.plan.references, [{ uri: "ref://refs/bwa/genome.fa", path: "/ref/refs/bwa/genome.fa" }]);
  t.same(parsed.ok && parsed.plan.inputs.map((i) => i.param), ["inputFile"], "the reference is not staged");
  const tool = job.spec.template.spec.initContainers.find((c) => c.name === "tool");
  t.ok(tool?.args?.includes("/ref/refs/bwa/genome.fa"), "the tool reads it at /ref/refs/…");
  // Its workspace input is not in this test's store: stage-in runs the plan's references alone.
  const r = await stageIn(parsed.ok ? { ...parsed.plan, inputs: [] } : undefined);
  t.equal(r.code, 0, r.err);
  t.same(parseReferencesReport(r.message), [{ uri: "ref://refs/bwa/genome.fa", sha256: sha(genome), size: genome.length }]);
});
