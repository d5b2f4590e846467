/**
 * The ObjectStore contract against the filesystem adapter. Its presigned URLs are served by
 * the api-server, so a real app listens on loopback and the contract fetches through it.
 */
import t from "tap";
import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLocalObjectStore, type LocalStoreConfig } from "../../adapters/local/object-store.js";
import { buildApp } from "../../api-server/app.js";
import { ServiceStore } from "../../services/store.js";
import { objectStoreContract } from "../support/object-store-contract.js";

const SECRET = "contract-secret-0123456789abcdef0123";

await objectStoreContract(t, "local filesystem", async () => {
  const root = mkdtempSync(join(tmpdir(), "operon-store-"));
  const config: LocalStoreConfig = { root, publicUrl: "http://127.0.0.1:0", signingSecret: SECRET };
  const store = createLocalObjectStore(config);
  const app = await buildApp({
    config: { publicUrl: config.publicUrl, OPERON_KEY_CACHE_TTL_SECONDS: 30, OPERON_RATE_LIMIT_PER_MINUTE: 100_000, storage: "local", signingSecret: SECRET },
    store, service: new ServiceStore(store),
  });
  await app.listen({ port: 0, host: "127.0.0.1" });
  // The store reads publicUrl when it signs, so the real port can be filled in now.
  config.publicUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  return { store, cleanup: async () => { await app.close(); rmSync(root, { recursive: true, force: true }); } };
});
