/**
 * Render jobs with two api-server replicas over one S3 store (a real MinIO), as in cluster
 * mode: a job submitted to one replica is read, listed and previewed from the other; jobs of
 * the same file submitted to both at once never take the same output name.
 */
import t from "tap";
import { readFileSync } from "node:fs";
import { createS3ObjectStore } from "../../adapters/s3/object-store.js";
import { startMinio } from "../support/minio.js";
import { testApp, type TestApp } from "../support/app.js";
import { decodePng } from "../support/images.js";
import { until } from "../support/wait.js";

const minio = await startMinio();
t.teardown(() => minio.stop());
const store = createS3ObjectStore({
  endpoint: minio.endpoint, bucket: minio.bucket, region: minio.region, forcePathStyle: true,
  credentials: { accessKeyId: minio.accessKeyId, secretAccessKey: minio.secretAccessKey },
});
const one = await testApp({ store, engine: {} });
const two = await testApp({ store, engine: {} });
t.teardown(async () => { await one.close(); await two.close(); });
await one.service.createWorkspace("acme", "ws1");
const h = { authorization: `Bearer ${await one.key("acme", ["files"])}` };
await store.put("orgs/acme/workspaces/ws1/de/results.csv", readFileSync(new URL("../fixtures/viewers/deseq2-results.csv", import.meta.url)));

const submit = async (a: TestApp, body: Record<string, unknown> = {}) => {
  const r = await a.app.inject({ method: "POST", url: "/v1/visualizations/render", headers: h, payload: { type: "volcano_plot", file_path: "de/results.csv", workspace_id: "ws1", ...body } });
  t.equal(r.statusCode, 202, r.body);
  return r.json().data.job_id as string;
};
const status = async (a: TestApp, id: string) => (await a.app.inject({ method: "GET", url: `/v1/visualizations/${id}?workspace_id=ws1`, headers: h })).json().data;
const finished = async (a: TestApp, id: string) => {
  let last: { status: string; output_path: string; data_path: string; preview_url: string; image: { width: number; height: number }; error: string | null } | undefined;
  await until(`job ${id}`, async () => { last = await status(a, id); return last!.status === "completed" || last!.status === "failed"; }, 60_000);
  return last!;
};

t.test("submitted to one replica, read from the other", async (t) => {
  const id = await submit(one);
  const seen = await status(two, id);
  t.equal(seen.job_id, id, "the other replica knows the job at once");
  t.ok(["queued", "running", "completed"].includes(seen.status), `and its state (${seen.status})`);
  const done = await finished(two, id);
  t.equal(done.status, "completed", done.error ?? "");
  const { body } = await store.get(`orgs/acme/workspaces/ws1/${done.output_path}`);
  const parts: Buffer[] = [];
  for await (const c of body) parts.push(Buffer.from(c));
  const png = decodePng(Buffer.concat(parts));
  t.same([png.width, png.height], [done.image.width, done.image.height], "the image in S3 is the one reported");
  const listed = (await two.app.inject({ method: "GET", url: "/v1/visualizations?workspace_id=ws1", headers: h })).json().data as Array<{ job_id: string }>;
  t.ok(listed.some((j) => j.job_id === id), "listed by the other replica");
  const preview = await two.app.inject({ method: "GET", url: `${new URL(done.preview_url).pathname}/data/primary` });
  t.equal(preview.statusCode, 200, "the preview link works on the other replica");
  t.equal(preview.headers["content-type"], "image/png");
});

t.test("the same file rendered on both replicas at once: distinct names, nothing overwritten", async (t) => {
  const ids = await Promise.all([submit(one, { output_path: "race/" }), submit(two, { output_path: "race/" }), submit(one, { output_path: "race/" }), submit(two, { output_path: "race/" })]);
  const done = await Promise.all(ids.map((id, i) => finished(i % 2 ? one : two, id)));
  t.ok(done.every((d) => d.status === "completed"), done.map((d) => d.error).join("; "));
  t.equal(new Set(done.map((d) => d.output_path)).size, 4, `four images: ${done.map((d) => d.output_path).join(", ")}`);
  t.same(done.map((d) => d.data_path.replace(/\.tsv$/, "")), done.map((d) => d.output_path.replace(/\.png$/, "")), "each TSV beside its own image");
  const keys = (await store.list("orgs/acme/workspaces/ws1/race/", { limit: 100 })).items.map((i) => i.key);
  t.equal(keys.length, 8, "four images and four tables in the folder");
});
