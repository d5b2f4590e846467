// `operon stage-in` / `operon stage-out` (the operon-image containers of a cluster-mode step
// pod) as real child processes against a real S3 server (MinIO), configured the way a pod is:
// cluster mode, S3 from the environment, no signing secret, the plan in OPERON_STEP_PLAN.
import t from "tap";
import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { createS3ObjectStore } from "../../adapters/s3/object-store.js";
import { publishOutputs, stageInputs } from "../../adapters/staging.js";
import type { StepPlan } from "../../adapters/staging.js";
import { startMinio } from "../support/minio.js";

const minio = await startMinio();
t.teardown(() => minio.stop());
const credentials = { accessKeyId: minio.accessKeyId, secretAccessKey: minio.secretAccessKey };
const s3 = new S3Client({ endpoint: minio.endpoint, region: minio.region, forcePathStyle: true, credentials });
t.teardown(() => s3.destroy());
const store = createS3ObjectStore({ endpoint: minio.endpoint, bucket: minio.bucket, region: minio.region, forcePathStyle: true, credentials });

const root = await mkdtemp(join(tmpdir(), "operon-stage-"));
t.teardown(() => rm(root, { recursive: true, force: true }));

const WS = "orgs/acme/workspaces/ws1/";
let runs = 0;
const freshRunRoot = () => `${WS}runs/run_${++runs}/`;
let dirs = 0;
async function freshDir(): Promise<{ work: string; log: string; base: string }> {
  const base = join(root, `case${++dirs}`);
  await mkdir(join(base, "work"), { recursive: true });
  return { base, work: join(base, "work"), log: join(base, "termination-log") };
}

const sha256 = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");

async function put(key: string, body: Buffer | string): Promise<void> {
  await s3.send(new PutObjectCommand({ Bucket: minio.bucket, Key: key, Body: body }));
}
async function getBytes(key: string): Promise<Buffer> {
  const r = await s3.send(new GetObjectCommand({ Bucket: minio.bucket, Key: key }));
  return Buffer.from(await (r.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray());
}
async function keysUnder(prefix: string): Promise<string[]> {
  const keys: string[] = [];
  let token: string | undefined;
  do {
    const r = await s3.send(new ListObjectsV2Command({ Bucket: minio.bucket, Prefix: prefix, ContinuationToken: token }));
    for (const o of r.Contents ?? []) keys.push(o.Key ?? "");
    token = r.NextContinuationToken;
  } while (token);
  return keys.sort();
}

interface Result { status: number | null; stdout: string; stderr: string }

/** Node's own process warnings (the AWS SDK warns about Node 20) are not the CLI's output. */
const withoutNodeWarnings = (s: string) => s.replace(/\(node:\d+\) [\s\S]*?to show where the warning was created\)\n?/g, "");

/** The real CLI, as a pod runs it: S3 from the environment, cluster mode, no signing secret. */
function operon(args: string[], plan: unknown, extraEnv: Record<string, string> = {}): Promise<Result> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: root,
    OPERON_MODE: "cluster",
    OPERON_STORAGE: "s3",
    S3_ENDPOINT: minio.endpoint,
    S3_BUCKET: minio.bucket,
    S3_REGION: minio.region,
    S3_FORCE_PATH_STYLE: "true",
    AWS_ACCESS_KEY_ID: minio.accessKeyId,
    AWS_SECRET_ACCESS_KEY: minio.secretAccessKey,
    ...(plan === undefined ? {} : { OPERON_STEP_PLAN: typeof plan === "string" ? plan : JSON.stringify(plan) }),
    ...extraEnv,
  };
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "cli/main.ts", ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => { stdout += d.toString(); });
    child.stderr.on("data", (d: Buffer) => { stderr += d.toString(); });
    const timer = setTimeout(() => { child.kill("SIGKILL"); reject(new Error(`operon ${args.join(" ")} did not exit within 60 s (stderr: ${stderr})`)); }, 60_000);
    child.on("error", reject);
    child.on("close", (status) => { clearTimeout(timer); resolve({ status, stdout, stderr: withoutNodeWarnings(stderr) }); });
  });
}

const plan = (p: Partial<StepPlan>): StepPlan => ({ workspaceRoot: WS, runRoot: freshRunRoot(), inputs: [], outputs: [], mkdirs: [], ...p });

// Workspace files shared by the stage-in cases.
const bam = randomBytes(3000);
const bai = randomBytes(200);
const fasta = ">chr1\nACGTACGTNNACGT\n";
const fai = "chr1\t14\t6\t14\t15\n";
const dict = "@HD\tVN:1.6\n@SQ\tSN:chr1\tLN:14\n";
await put(`${WS}aln/x.bam`, bam);
await put(`${WS}aln/x.bam.bai`, bai);
await put(`${WS}refs/ref.fa`, fasta);
await put(`${WS}refs/ref.fa.fai`, fai);
await put(`${WS}refs/ref.dict`, dict);

t.test("stage-in downloads the inputs with their secondary files and creates the directories", async (t) => {
  const d = await freshDir();
  const p = plan({
    inputs: [
      { param: "inputFile", source: "aln/x.bam", local: "in/1/x.bam" },
      { param: "reference", source: "refs/ref.fa", local: "in/2/genome.fa" },
    ],
    mkdirs: ["qc", "out/deep"],
  });
  const r = await operon(["stage-in", "--workdir", d.work, "--termination-log", d.log], p);
  t.equal(r.status, 0, r.stderr);
  t.equal(r.stderr, "");
  t.same(await readFile(join(d.work, "in/1/x.bam")), bam, "primary, byte for byte");
  t.same(await readFile(join(d.work, "in/1/x.bam.bai")), bai, "its index lands beside it under the local name");
  t.equal(await readFile(join(d.work, "in/2/genome.fa"), "utf8"), fasta);
  t.equal(await readFile(join(d.work, "in/2/genome.fa.fai"), "utf8"), fai, "suffix secondary follows the local name");
  t.equal(await readFile(join(d.work, "in/2/genome.dict"), "utf8"), dict, "replaced-extension secondary follows the local name");
  t.notOk(existsSync(join(d.work, "in/1/x.bai")), "absent candidates are not created");
  t.notOk(existsSync(join(d.work, "in/1/x.bam.csi")));
  t.ok((await stat(join(d.work, "qc"))).isDirectory(), "mkdir qc");
  t.ok((await stat(join(d.work, "out/deep"))).isDirectory(), "mkdir out/deep");
  t.notOk(existsSync(d.log), "nothing written to the termination log on success");
});

t.test("stage-in: a missing input fails with the input named on stderr and in the termination log", async (t) => {
  const d = await freshDir();
  const p = plan({ inputs: [
    { param: "inputFile", source: "aln/x.bam", local: "in/1/x.bam" },
    { param: "reads2", source: "reads/missing_R2.fastq", local: "in/2/r2.fastq" },
  ] });
  const r = await operon(["stage-in", "--workdir", d.work, "--termination-log", d.log], p);
  t.equal(r.status, 1);
  const line = "stage-in: input reads2: reads/missing_R2.fastq not found in the workspace";
  t.equal(r.stderr, line + "\n", "one line, no stack trace");
  t.equal(await readFile(d.log, "utf8"), line);

  const quiet = await operon(["stage-in", "--workdir", d.work, "--termination-log", join(d.base, "no/such/dir/log")], p);
  t.equal(quiet.status, 1, "an unwritable termination log is ignored, the failure still reported");
  t.equal(quiet.stderr, line + "\n");
});

t.test("stage-out uploads primary and secondary outputs with their sha256 and reports them in the termination log", async (t) => {
  const d = await freshDir();
  const runRoot = freshRunRoot();
  const outBam = randomBytes(5000);
  const outBai = randomBytes(300);
  const vcf = "##fileformat=VCFv4.2\n#CHROM\tPOS\n";
  await mkdir(join(d.work, "calls"), { recursive: true });
  await writeFile(join(d.work, "sorted.bam"), outBam);
  await writeFile(join(d.work, "sorted.bam.bai"), outBai);
  await writeFile(join(d.work, "calls/out.vcf.gz"), vcf);
  await writeFile(join(d.work, "scratch.tmp"), "not declared");
  const p = plan({
    runRoot,
    outputs: [
      { path: "sorted.bam", secondary: ["sorted.bam.bai"] },
      { path: "calls/out.vcf.gz", secondary: ["calls/out.vcf.gz.tbi"] }, // the index was not produced: skipped
    ],
  });
  const r = await operon(["stage-out", "--workdir", d.work, "--termination-log", d.log], p);
  t.equal(r.status, 0, r.stderr);
  t.equal(r.stderr, "");
  const expected = [
    { filename: "sorted.bam", position: 0, key: `${runRoot}sorted.bam`, size: outBam.length, sha256: sha256(outBam) },
    { filename: "sorted.bam.bai", key: `${runRoot}sorted.bam.bai`, size: outBai.length, sha256: sha256(outBai) },
    { filename: "calls/out.vcf.gz", position: 1, key: `${runRoot}calls/out.vcf.gz`, size: Buffer.byteLength(vcf), sha256: sha256(vcf) },
  ];
  const text = await readFile(d.log, "utf8");
  t.same(JSON.parse(text), { outputs: expected });
  t.equal(text, JSON.stringify({ outputs: expected }), "compact JSON, fields in order, no position on secondaries");
  t.same(await keysUnder(runRoot), expected.map((o) => o.key).sort(), "exactly the declared files that exist");
  for (const o of expected) {
    const bytes = await getBytes(o.key);
    t.equal(sha256(bytes), o.sha256, `${o.filename}: stored bytes match`);
    t.equal((await store.head(o.key))?.sha256, o.sha256, `${o.filename}: sha256 recorded on the object`);
  }
  t.same(await keysUnder("_system/tmp/"), [], "no temporary upload left behind");

  const quiet = await operon(["stage-out", "--workdir", d.work, "--termination-log", join(d.base, "no/such/dir/log")], plan({ outputs: [{ path: "sorted.bam", secondary: [] }] }));
  t.equal(quiet.status, 0, "an unwritable termination log (not in a pod) is ignored");
  t.equal(quiet.stderr, "");
});

t.test("stage-out: a missing primary output fails, names it, and uploads nothing", async (t) => {
  const d = await freshDir();
  const runRoot = freshRunRoot();
  await writeFile(join(d.work, "first.txt"), "produced");
  await writeFile(join(d.work, "first.txt.tbi"), "produced index");
  const p = plan({ runRoot, outputs: [{ path: "first.txt", secondary: ["first.txt.tbi"] }, { path: "second.txt", secondary: [] }] });
  const r = await operon(["stage-out", "--workdir", d.work, "--termination-log", d.log], p);
  t.equal(r.status, 1);
  t.equal(r.stderr, "stage-out: declared output second.txt was not produced\n");
  t.equal(await readFile(d.log, "utf8"), JSON.stringify({ error: "declared output second.txt was not produced" }));
  t.same(await keysUnder(runRoot), [], "not even the outputs that were produced");
  t.same(await keysUnder("_system/tmp/"), []);
});

t.test("an invalid OPERON_STEP_PLAN exits 2 naming the field", async (t) => {
  const d = await freshDir();
  const cases: Array<[string, string[], unknown, RegExp]> = [
    ["inputs not an array", ["stage-in"], { ...plan({}), inputs: { param: "a", source: "b", local: "c" } }, /^stage-in: OPERON_STEP_PLAN: inputs: .*expected array/],
    ["input local climbs out", ["stage-in"], plan({ inputs: [{ param: "inputFile", source: "aln/x.bam", local: "../etc/passwd" }] }), /^stage-in: OPERON_STEP_PLAN: inputs\[0\]\.local: "\.\.\/etc\/passwd" is outside the working directory$/],
    ["absolute mkdir", ["stage-in"], plan({ mkdirs: ["ok", "/tmp/x"] }), /^stage-in: OPERON_STEP_PLAN: mkdirs\[1\]: "\/tmp\/x" is outside the working directory$/],
    ["runRoot without its slash", ["stage-out"], { ...plan({}), runRoot: "orgs/acme/runs/r1" }, /^stage-out: OPERON_STEP_PLAN: runRoot: must end in \/$/],
    ["absolute output", ["stage-out"], plan({ outputs: [{ path: "a.txt", secondary: ["/etc/shadow"] }] }), /^stage-out: OPERON_STEP_PLAN: outputs\[0\]\.secondary\[0\]: "\/etc\/shadow" is outside the working directory$/],
    ["not JSON", ["stage-in"], "{inputs:", /^stage-in: OPERON_STEP_PLAN is not JSON/],
    ["not set", ["stage-out"], undefined, /^stage-out: OPERON_STEP_PLAN is not set$/],
  ];
  for (const [what, args, p, pattern] of cases) {
    const r = await operon([...args, "--workdir", d.work, "--termination-log", d.log], p);
    t.equal(r.status, 2, what);
    t.match(r.stderr.trimEnd(), pattern, what);
    t.equal(r.stderr.trim().split("\n").length, 1, `${what}: one line`);
    const message = r.stderr.trimEnd().slice(`${args[0]}: `.length);
    t.equal(await readFile(d.log, "utf8"), args[0] === "stage-in" ? r.stderr.trimEnd() : JSON.stringify({ error: message }), `${what}: termination log`);
    await rm(d.log, { force: true });
  }
  t.notOk(existsSync(join(d.base, "etc")), "nothing was written outside the working directory");
  t.notOk(existsSync(join(d.work, "ok")), "nothing staged from a refused plan");
  const usage = await operon(["stage-in", "--termination-log", d.log], plan({}));
  t.equal(usage.status, 2, "--workdir is required");
  t.equal(usage.stderr, "operon stage-in: --workdir is required (see operon stage-in --help)\n");
  t.equal(await readFile(d.log, "utf8"), "stage-in: --workdir is required", "a usage error reaches the termination log too");
  await rm(d.log, { force: true });
  const usageOut = await operon(["stage-out", "--workdir", d.work, "--termination-log", d.log, "--bogus"], plan({}));
  t.equal(usageOut.status, 2, "unknown option");
  t.equal(usageOut.stderr, "operon stage-out: unknown option \"--bogus\" (see operon stage-out --help)\n");
  t.equal(await readFile(d.log, "utf8"), JSON.stringify({ error: 'unknown option "--bogus"' }));
});

t.test("a large output list is reported in the truncated form", async (t) => {
  const d = await freshDir();
  const runRoot = freshRunRoot();
  const outputs = Array.from({ length: 40 }, (_, i) => ({ path: `chunks/part-${String(i).padStart(3, "0")}.txt`, secondary: [] }));
  await mkdir(join(d.work, "chunks"));
  for (const [i, o] of outputs.entries()) await writeFile(join(d.work, o.path), `chunk ${i}\n`);
  const r = await operon(["stage-out", "--workdir", d.work, "--termination-log", d.log], plan({ runRoot, outputs }));
  t.equal(r.status, 0, r.stderr);
  // Check the premise: the full list would not fit in 4096 bytes.
  const full = JSON.stringify({ outputs: outputs.map((o, i) => ({ filename: o.path, position: i, key: runRoot + o.path, size: 10, sha256: "0".repeat(64) })) });
  t.ok(Buffer.byteLength(full) > 4096, `the full list is ${Buffer.byteLength(full)} bytes`);
  t.equal(await readFile(d.log, "utf8"), JSON.stringify({ outputs: null, truncated: true }));
  t.same(await keysUnder(runRoot), outputs.map((o) => runRoot + o.path), "every output is still uploaded (the operator HEADs them)");
});

t.test("the library refuses paths outside the working directory before writing anything", async (t) => {
  const d = await freshDir();
  await t.rejects(stageInputs(store, { workspaceRoot: WS, inputs: [{ param: "inputFile", source: "aln/x.bam", local: "in/x.bam" }, { param: "reference", source: "refs/ref.fa", local: "../ref.fa" }], mkdirs: [] }, d.work),
    { message: 'input reference: local path "../ref.fa" is outside the working directory' });
  t.notOk(existsSync(join(d.work, "in")), "the valid input was not staged either");
  t.notOk(existsSync(join(d.base, "ref.fa")));
  await t.rejects(stageInputs(store, { workspaceRoot: WS, inputs: [], mkdirs: ["a/../../up"] }, d.work), { message: 'directory "a/../../up" is outside the working directory' });
  t.notOk(existsSync(join(d.base, "up")));
  await t.rejects(stageInputs(store, { workspaceRoot: WS, inputs: [{ param: "inputFile", source: "aln/x.bam", local: "/tmp/x.bam" }], mkdirs: [] }, d.work), { message: /"\/tmp\/x\.bam" is outside/ });

  const runRoot = freshRunRoot();
  await t.rejects(publishOutputs(store, { runRoot, outputs: [{ path: "../secret", secondary: [] }] }, d.work), { message: 'declared output "../secret" is outside the working directory' });
  // A tool image could leave a symlink pointing at the stager's own files.
  await writeFile(join(d.base, "secret"), "service account token");
  await symlink(join(d.base, "secret"), join(d.work, "result.txt"));
  await t.rejects(publishOutputs(store, { runRoot, outputs: [{ path: "result.txt", secondary: [] }] }, d.work), { message: "declared output result.txt resolves outside the working directory" });
  await writeFile(join(d.work, "real.txt"), "ok");
  await symlink("real.txt", join(d.work, "link.txt"));
  const ok = await publishOutputs(store, { runRoot, outputs: [{ path: "link.txt", secondary: [] }] }, d.work);
  t.equal(ok[0]?.sha256, sha256("ok"), "a symlink inside the working directory is fine");
  t.same(await keysUnder(runRoot), [`${runRoot}link.txt`], "nothing from outside was uploaded");
});
