/**
 * A run the agent starts records the conversation and the model in its run record and its
 * run.json (`startedBy`); a run started through the API has none.
 */
import t from "tap";
import { manifestKey } from "../../core/layout.js";
import { RunManifestSchema } from "../../core/manifest.js";
import { testApp, type TestApp } from "../support/app.js";
import { startFakeLlm, type FakeLlm } from "../support/fake-llm.js";

const oa: FakeLlm = await startFakeLlm("openai");
t.teardown(() => oa.close());
const a: TestApp = await testApp({ engine: {}, llm: { settings: { provider: "openai", model: "gpt-test", baseUrl: oa.baseUrl, apiKey: "sk-test", maxRetries: 0 } } });
t.teardown(() => a.close());
await a.service.createWorkspace("acme", "ws1");
await a.store.put("orgs/acme/workspaces/ws1/data/ok.txt", "hello\n");
const spec = { steps: [{ stepId: "zip", toolName: "tabix", parameters: { command: "bgzip", inputFile: "data/ok.txt" } }] };
await a.store.put("orgs/acme/workspaces/ws1/pipelines/specs/zip.pipeline.json", JSON.stringify(spec));
const key = { authorization: `Bearer ${await a.key("acme", ["query", "tools", "files"])}` };

type Run = { id: string; status: string };
const waitRun = async (id: string): Promise<Run> => {
  for (const end = Date.now() + 60_000; Date.now() < end;) {
    const run = (await a.app.inject({ method: "GET", url: `/v1/pipelines/${id}?workspace_id=ws1`, headers: key })).json() as { data: Run };
    if (["completed", "failed", "cancelled"].includes(run.data.status)) return run.data;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("the run did not end");
};
const manifestOf = async (id: string) => {
  const run = await a.engine?.runs.get(id);
  if (!run) throw new Error(`no run ${id}`);
  const chunks: Uint8Array[] = [];
  for await (const c of (await a.store.get(manifestKey(run))).body as AsyncIterable<Uint8Array>) chunks.push(c);
  return RunManifestSchema.parse(JSON.parse(Buffer.concat(chunks).toString("utf8")));
};

t.test("the agent's run records its conversation and model in run.json", async (t) => {
  let runId = "";
  oa.script((r) => {
    if (r.n === 0) return { calls: [{ name: "service_run_pipeline", arguments: { workspace_id: "ws1", spec_file: "pipelines/specs/zip.pipeline.json" } }] };
    runId = String((JSON.parse(r.results[0]?.content ?? "{}") as { run?: { id?: string } }).run?.id);
    return { text: `Started ${runId}.` };
  });
  const res = await a.app.inject({ method: "POST", url: "/v1/query", headers: key, payload: { prompt: "zip it", workspace_id: "ws1" } });
  t.equal(res.statusCode, 200, res.body);
  const conv = (res.json() as { data: { conversation_id: string } }).data.conversation_id;
  t.equal((await waitRun(runId)).status, "completed");
  t.same((await manifestOf(runId)).startedBy, { conversationId: conv, model: "gpt-test" });
  t.same((await a.engine?.runs.get(runId))?.startedBy, { conversationId: conv, model: "gpt-test" }, "on the run record");

  const direct = await a.app.inject({ method: "POST", url: "/v1/pipelines", headers: key, payload: { workspace_id: "ws1", spec } });
  t.equal(direct.statusCode, 201, direct.body);
  const id = (direct.json() as { data: { id: string } }).data.id;
  await waitRun(id);
  t.equal((await manifestOf(id)).startedBy, undefined, "a run started through the API has no startedBy");
});
