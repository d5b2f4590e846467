import t from "tap";
import { ESLint } from "eslint";

// The purity rule of eslint.config.js: core/ and plots/ may not import I/O modules or read the clock.
const eslint = new ESLint();

async function lint(code: string, filePath: string) {
  const [res] = await eslint.lintText(code, { filePath });
  return (res?.messages ?? []).map((m) => m.ruleId);
}

for (const [what, code] of [
  ["node:fs", `import { readFileSync } from "node:fs";\nexport const x = readFileSync;\n`],
  ["child_process", `import { spawn } from "child_process";\nexport const x = spawn;\n`],
  ["node:http", `import http from "node:http";\nexport const x = http;\n`],
  ["@aws-sdk/client-s3", `import { S3Client } from "@aws-sdk/client-s3";\nexport const x = S3Client;\n`],
  ["@kubernetes/client-node", `import * as k8s from "@kubernetes/client-node";\nexport const x = k8s;\n`],
  ["an adapter", `import { x as y } from "../adapters/local/store.js";\nexport const x = y;\n`],
] as const) {
  t.test(`core/ and plots/ may not import ${what}`, async (t) => {
    t.ok((await lint(code, "core/example.ts")).includes("no-restricted-imports"));
    t.ok((await lint(code, "plots/example.ts")).includes("no-restricted-imports"), "plots/ is pure too");
    t.notOk((await lint(code, "adapters/example.ts")).includes("no-restricted-imports"), "allowed outside core/");
  });
}

t.test("core/ may not read the clock, randomness or the process", async (t) => {
  t.ok((await lint(`export const now = Date.now();\n`, "core/example.ts")).includes("no-restricted-properties"));
  t.ok((await lint(`export const r = Math.random();\n`, "core/example.ts")).includes("no-restricted-properties"));
  t.ok((await lint(`export const e = process.env;\n`, "core/example.ts")).includes("no-restricted-globals"));
  t.ok((await lint(`export const now = Date.now();\n`, "plots/example.ts")).includes("no-restricted-properties"), "plots/ too");
});

t.test("pure imports are fine in core/", async (t) => {
  t.same(await lint(`import { z } from "zod";\nexport const s = z.string();\n`, "core/example.ts"), []);
});
