/**
 * `npx tsx scripts/openapi.ts [--yaml]`: prints the OpenAPI document, the same one a server
 * serves at GET /v1/openapi.json, without starting one: an app with every route (a pipeline
 * engine that never runs anything, over an empty temporary store) that never listens.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLocalObjectStore } from "../adapters/local/object-store.js";
import { createLocalRunStore } from "../adapters/local/run-store.js";
import type { StepExecutor } from "../core/ports.js";
import { buildApp } from "../api-server/app.js";
import { createEngine } from "../engine/engine.js";
import { ServiceStore } from "../services/store.js";

/** An executor that is never asked anything: the document needs the routes, not runs. */
const idle: StepExecutor = {
  runtime: "container",
  submit: () => Promise.reject(new Error("scripts/openapi.ts runs no steps")),
  observe: () => Promise.resolve(new Map()),
  kill: () => Promise.resolve(),
  watch: () => () => undefined,
  logs: () => Promise.resolve(undefined),
};

export async function openapiDocument(format: "json" | "yaml" = "json"): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "operon-openapi-"));
  const publicUrl = "http://localhost:8080";
  const signingSecret = "openapi-document-only";
  const clock = { now: () => Date.now() };
  const store = createLocalObjectStore({ root: dir, publicUrl, signingSecret, clock });
  const engine = createEngine({ runs: createLocalRunStore(dir), executor: idle, store, clock, orgConcurrency: () => 1, controller: false });
  const app = await buildApp({
    config: { publicUrl, signingSecret, storage: "local", OPERON_KEY_CACHE_TTL_SECONDS: 30, OPERON_RATE_LIMIT_PER_MINUTE: 600 },
    store, service: new ServiceStore(store), clock, logger: false, engine,
  });
  try {
    await app.ready();
    return format === "yaml" ? app.swagger({ yaml: true }) : JSON.stringify(app.swagger(), null, 2) + "\n";
  } finally {
    await app.close();
    await engine.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].replace(/^.*\//, "/"))) {
  process.stdout.write(await openapiDocument(process.argv.includes("--yaml") ? "yaml" : "json"));
}
