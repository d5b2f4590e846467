import t from "tap";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseConfig } from "../../core/config.js";
import { bootstrap, createRuntime } from "../../wiring/runtime.js";
import { hashKey } from "../../services/store.js";

const dir = mkdtempSync(join(tmpdir(), "operon-admin-"));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const env = { ...process.env, OPERON_DATA_DIR: dir };
const operon = (...args: string[]) => spawnSync(process.execPath, ["--import", "tsx", "cli/main.ts", ...args], { encoding: "utf8", env });

t.test("workspaces create and keys create/list/revoke act on the configured store", async (t) => {
  const ws = operon("workspaces", "create", "--org", "acme", "--id", "rnaseq", "--name", "RNA-seq", "--json");
  t.equal(ws.status, 0, ws.stderr);
  t.match(JSON.parse(ws.stdout), { id: "rnaseq", organization: "acme", name: "RNA-seq" });
  const dup = operon("workspaces", "create", "--org", "acme", "--id", "rnaseq");
  t.not(dup.status, 0, "a second create of the same workspace fails");
  t.match(dup.stderr, /already exists/);
  t.equal(dup.stderr.trim().split("\n").length, 1, "one line, no stack trace");

  const made = operon("keys", "create", "--org", "acme", "--scopes", "files,tools", "--workspaces", "rnaseq", "--name", "ci", "--json");
  t.equal(made.status, 0, made.stderr);
  const { id, key } = JSON.parse(made.stdout) as { id: string; key: string };
  t.match(key, /^sk_live_[A-Za-z0-9]{32}$/);
  t.match(id, /^key_[0-9a-f]{16}$/);

  const listed = operon("keys", "list", "--org", "acme", "--json");
  t.equal(listed.status, 0);
  const keys = JSON.parse(listed.stdout) as Array<Record<string, unknown>>;
  t.equal(keys.length, 1);
  t.match(keys[0], { id, organization: "acme", scopes: ["files", "tools"], workspaces: ["rnaseq"], name: "ci", revoked_at: null });
  t.notOk("hash" in (keys[0] ?? {}), "the hash is not printed");
  t.notOk(listed.stdout.includes(key), "the key itself is never shown again");

  const rt = await createRuntime((parseConfig({ OPERON_DATA_DIR: dir }) as { ok: true; config: never }).config);
  t.equal((await rt.service.findKeyByHash(hashKey(key)))?.id, id, "stored by its hash");

  const revoked = operon("keys", "revoke", id, "--json");
  t.equal(revoked.status, 0, revoked.stderr);
  t.ok(JSON.parse(revoked.stdout).revoked_at);
  t.ok((await rt.service.getKey(id))?.revoked_at, "revocation recorded");
  t.equal(operon("keys", "revoke", "key_0000000000000000").status, 1, "unknown key id");

  for (const [args, pattern] of [
    [["keys", "create", "--org", "acme", "--scopes", "files,admin"], /unknown scope "admin"/],
    [["keys", "create", "--org", "acme", "--scopes", "files", "--workspaces", "nope"], /workspace acme\/nope does not exist/],
    [["keys", "create", "--org", "acme"], /^operon keys create: --scopes is required \(see operon keys create --help\)$/m],
    [["workspaces", "create", "--org", "acme", "--id", "../x"], /id "..\/x"/],
  ] as const) {
    const r = operon(...args);
    t.not(r.status, 0, args.join(" "));
    t.match(r.stderr, pattern);
    t.notMatch(r.stderr, /\n\s+at /, "no stack trace");
  }
});

t.test("a bad environment stops with one line naming the variable", async (t) => {
  const r = spawnSync(process.execPath, ["--import", "tsx", "cli/main.ts", "keys", "list", "--org", "acme"], { encoding: "utf8", env: { ...env, PORT: "eighty" } });
  t.equal(r.status, 2);
  t.match(r.stderr, /PORT/);
  t.equal(r.stderr.trim().split("\n").length, 1);
});

t.test("embedded first start bootstraps org, workspace and one all-scope key, once", async (t) => {
  const d = mkdtempSync(join(tmpdir(), "operon-boot-"));
  t.teardown(() => rmSync(d, { recursive: true, force: true }));
  const c = parseConfig({ OPERON_DATA_DIR: d });
  if (!c.ok) throw new Error(c.message);
  const rt = await createRuntime(c.config);
  const key = await bootstrap(rt);
  t.match(key, /^sk_live_[A-Za-z0-9]{32}$/);
  const file = join(d, "bootstrap-key");
  t.equal(readFileSync(file, "utf8").trim(), key);
  t.equal(statSync(file).mode & 0o777, 0o600, "bootstrap-key is 0600");
  t.equal(statSync(join(d, "signing-secret")).mode & 0o777, 0o600, "signing-secret is 0600");
  t.same((await rt.service.listWorkspaces("default")).map((w) => w.id), ["default"]);
  const keys = await rt.service.listKeys("default");
  t.equal(keys.length, 1);
  t.same(keys[0]?.scopes, ["query", "tools", "conversations", "files"]);
  t.equal(keys[0]?.workspaces, null);
  t.equal(await bootstrap(await createRuntime(c.config)), undefined, "a second start creates nothing");
  t.equal((await rt.service.listKeys("default")).length, 1);
});
