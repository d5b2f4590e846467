import t from "tap";
import { parseConfig } from "../../core/config.js";

t.test("defaults: embedded, local storage, loopback", async (t) => {
  const c = parseConfig({});
  if (!c.ok) throw new Error(c.message);
  t.match(c.config, { PORT: 8080, host: "127.0.0.1", OPERON_MODE: "embedded", storage: "local", OPERON_KEY_CACHE_TTL_SECONDS: 30, OPERON_ORG_CONCURRENCY: 5, publicUrl: "http://127.0.0.1:8080" });
});

t.test("cluster mode listens on all interfaces and uses S3", async (t) => {
  const c = parseConfig({ OPERON_MODE: "cluster", S3_BUCKET: "b", S3_FORCE_PATH_STYLE: "true", OPERON_PUBLIC_URL: "https://operon.example.org/" });
  if (!c.ok) throw new Error(c.message);
  t.match(c.config, { host: "0.0.0.0", storage: "s3", S3_FORCE_PATH_STYLE: true, publicUrl: "https://operon.example.org" });
});

for (const [env, name] of [
  [{ PORT: "eighty" }, "PORT"],
  [{ PORT: "70000" }, "PORT"],
  [{ OPERON_MODE: "cloud" }, "OPERON_MODE"],
  [{ OPERON_KEY_CACHE_TTL_SECONDS: "60" }, "OPERON_KEY_CACHE_TTL_SECONDS"],
  [{ OPERON_SIGNING_SECRET: "short" }, "OPERON_SIGNING_SECRET"],
  [{ S3_ENDPOINT: "not a url" }, "S3_ENDPOINT"],
  [{ S3_FORCE_PATH_STYLE: "yes" }, "S3_FORCE_PATH_STYLE"],
  [{ OPERON_MODE: "cluster" }, "S3_BUCKET"],
] as const) {
  t.test(`bad ${Object.keys(env)[0]}: one line naming ${name}`, async (t) => {
    const c = parseConfig(env);
    t.equal(c.ok, false);
    if (!c.ok) {
      t.match(c.message, new RegExp(`^invalid configuration: ${name}:`));
      t.notOk(c.message.includes("\n"));
    }
  });
}
