import t from "tap";
import { parseConfig } from "../../core/config.js";
import { isSecretName } from "../../core/redact.js";

t.test("defaults: embedded, local storage, loopback", async (t) => {
  const c = parseConfig({});
  if (!c.ok) throw new Error(c.message);
  t.match(c.config, { PORT: 8080, host: "127.0.0.1", OPERON_MODE: "embedded", storage: "local", OPERON_KEY_CACHE_TTL_SECONDS: 30, OPERON_ORG_CONCURRENCY: 5, publicUrl: "http://127.0.0.1:8080" });
});

t.test("rate limits (per key, per address) and S3 deadlines: defaults and overrides", async (t) => {
  const d = parseConfig({});
  if (!d.ok) throw new Error(d.message);
  t.match(d.config, { OPERON_RATE_LIMIT_PER_MINUTE: 6000, OPERON_RATE_LIMIT_PER_IP_PER_MINUTE: 12_000, OPERON_S3_REQUEST_TIMEOUT_SECONDS: 10, OPERON_S3_MAX_ATTEMPTS: 2 });
  const c = parseConfig({ OPERON_RATE_LIMIT_PER_IP_PER_MINUTE: "300", OPERON_S3_REQUEST_TIMEOUT_SECONDS: "2.5", OPERON_S3_MAX_ATTEMPTS: "3" });
  if (!c.ok) throw new Error(c.message);
  t.match(c.config, { OPERON_RATE_LIMIT_PER_IP_PER_MINUTE: 300, OPERON_S3_REQUEST_TIMEOUT_SECONDS: 2.5, OPERON_S3_MAX_ATTEMPTS: 3 });
});

t.test("cluster mode listens on all interfaces and uses S3", async (t) => {
  const c = parseConfig({ OPERON_MODE: "cluster", S3_BUCKET: "b", S3_FORCE_PATH_STYLE: "true", OPERON_PUBLIC_URL: "https://operon.example.org/" });
  if (!c.ok) throw new Error(c.message);
  t.match(c.config, { host: "0.0.0.0", storage: "s3", S3_FORCE_PATH_STYLE: true, publicUrl: "https://operon.example.org" });
});

t.test("OPERON_CONTENT_URL: an http(s) URL on another host than OPERON_PUBLIC_URL, local storage only", async (t) => {
  const c = parseConfig({ OPERON_PUBLIC_URL: "https://operon.example/", OPERON_CONTENT_URL: "https://content.operon.example/" });
  if (!c.ok) throw new Error(c.message);
  t.match(c.config, { publicUrl: "https://operon.example", contentUrl: "https://content.operon.example" }, "trailing slash stripped");
  t.notOk("contentUrl" in (parseConfig({}) as { config: object }).config, "unset: no content URL");
  t.ok(parseConfig({ OPERON_CONTENT_URL: "http://127.0.0.1:8081" }).ok, "another port of the same host is another origin");
  for (const [env, why] of [
    [{ OPERON_CONTENT_URL: "ftp://content.example" }, /must be an http or https URL.*\(got "ftp:\/\/content\.example"\)$/],
    [{ OPERON_CONTENT_URL: "content.example" }, /must be an http or https URL/],
    [{ OPERON_CONTENT_URL: "http://127.0.0.1:8080/" }, /must name another host \(or port\) than OPERON_PUBLIC_URL \(127\.0\.0\.1:8080\)/],
    [{ OPERON_PUBLIC_URL: "https://Operon.example", OPERON_CONTENT_URL: "https://operon.example/files" }, /must name another host/],
    [{ OPERON_CONTENT_URL: "https://content.example", S3_BUCKET: "b" }, /only for local storage.*S3 endpoint/],
  ] as const) {
    const r = parseConfig(env);
    t.equal(r.ok, false, JSON.stringify(env));
    if (!r.ok) {
      t.match(r.message, /^invalid configuration: OPERON_CONTENT_URL: /);
      t.match(r.message, why);
    }
  }
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
  [{ OPERON_RATE_LIMIT_PER_IP_PER_MINUTE: "0" }, "OPERON_RATE_LIMIT_PER_IP_PER_MINUTE"],
  [{ OPERON_S3_REQUEST_TIMEOUT_SECONDS: "0" }, "OPERON_S3_REQUEST_TIMEOUT_SECONDS"],
  [{ OPERON_S3_MAX_ATTEMPTS: "1.5" }, "OPERON_S3_MAX_ATTEMPTS"],
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

// Start-up errors end up in logs and CI output: a secret's value is never echoed, even a wrong one.
t.test("a too-short OPERON_SIGNING_SECRET: the line names it, the value is not shown", async (t) => {
  const c = parseConfig({ OPERON_SIGNING_SECRET: "s3cr3t-value" });
  t.equal(c.ok, false);
  if (c.ok) return;
  t.match(c.message, /^invalid configuration: OPERON_SIGNING_SECRET: must be at least 32 characters/);
  t.notOk(c.message.includes("s3cr3t"), c.message);
  t.notOk(c.message.includes("\n"));
});

t.test("secret variables are recognized by name", async (t) => {
  for (const name of ["OPERON_SIGNING_SECRET", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "OPERON_LLM_API_KEY", "OPERON_S3_CREDENTIALS_SECRET", "DB_PASSWORD", "GITHUB_TOKEN", "OPERON_KEY_CACHE_TTL_SECONDS"]) {
    t.ok(isSecretName(name), name);
  }
  for (const name of ["PORT", "HOST", "OPERON_MODE", "S3_ENDPOINT", "OPERON_LLM_BASE_URL"]) t.notOk(isSecretName(name), name);
});

t.test("any variable whose name contains KEY (or SECRET, PASSWORD, TOKEN) is not echoed", async (t) => {
  const c = parseConfig({ OPERON_KEY_CACHE_TTL_SECONDS: "987654" });
  t.equal(c.ok, false);
  if (c.ok) return;
  t.match(c.message, /^invalid configuration: OPERON_KEY_CACHE_TTL_SECONDS:/);
  t.notOk(c.message.includes("987654"), c.message);
});

t.test("a harmless variable's value is still shown (PORT=abc), credentials in it redacted", async (t) => {
  const c = parseConfig({ PORT: "abc" });
  if (c.ok) throw new Error("PORT=abc accepted");
  t.match(c.message, /^invalid configuration: PORT: .*\(got "abc"\)$/);
  const u = parseConfig({ OPERON_LLM_BASE_URL: "not a url https://user:pa55word@llm.example.org/?api_key=abc123" });
  if (u.ok) throw new Error("bad URL accepted");
  t.match(u.message, /^invalid configuration: OPERON_LLM_BASE_URL:/);
  t.notOk(u.message.includes("pa55word"), u.message);
  t.notOk(u.message.includes("abc123"), u.message);
});

t.test("the agent's LLM: a provider needs a model, and a key unless a base URL names a self-hosted server; limits have defaults", async (t) => {
  const none = parseConfig({});
  if (!none.ok) throw new Error(none.message);
  t.equal(none.config.OPERON_LLM_PROVIDER, undefined, "no provider by default");
  t.same([none.config.OPERON_LLM_MAX_TOOL_ROUNDS, none.config.OPERON_LLM_TURN_TIMEOUT_SECONDS, none.config.OPERON_LLM_MAX_OUTPUT_TOKENS], [12, 600, 16_384]);
  const noModel = parseConfig({ OPERON_LLM_PROVIDER: "openai", OPERON_LLM_API_KEY: "sk-x" });
  t.match(noModel.ok ? "" : noModel.message, /^invalid configuration: OPERON_LLM_MODEL: required when OPERON_LLM_PROVIDER is set/);
  const noKey = parseConfig({ OPERON_LLM_PROVIDER: "anthropic", OPERON_LLM_MODEL: "claude-sonnet-4-5" });
  t.match(noKey.ok ? "" : noKey.message, /^invalid configuration: OPERON_LLM_API_KEY: required for Anthropic's own API/);
  const ollama = parseConfig({ OPERON_LLM_PROVIDER: "openai", OPERON_LLM_MODEL: "qwen3", OPERON_LLM_BASE_URL: "http://127.0.0.1:11434/v1", OPERON_LLM_MAX_TOOL_ROUNDS: "5" });
  t.ok(ollama.ok, "Ollama: a base URL and no key");
  if (ollama.ok) t.equal(ollama.config.OPERON_LLM_MAX_TOOL_ROUNDS, 5);
  const bad = parseConfig({ OPERON_LLM_PROVIDER: "gemini" });
  t.match(bad.ok ? "" : bad.message, /^invalid configuration: OPERON_LLM_PROVIDER:/);
  const rounds = parseConfig({ OPERON_LLM_MAX_TOOL_ROUNDS: "0" });
  t.match(rounds.ok ? "" : rounds.message, /^invalid configuration: OPERON_LLM_MAX_TOOL_ROUNDS:/);
});
