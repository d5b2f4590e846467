// Lint rules. The one that matters most: core/ is pure domain logic and may not import
// anything that performs I/O, so the engine stays testable and identical in both modes.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

const ioModules = [
  "fs", "fs/promises", "child_process", "net", "http", "https", "http2", "dgram", "dns",
  "tls", "os", "cluster", "worker_threads", "readline", "process", "stream", "inspector", "vm",
];

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", ".tap/**", "coverage/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["scripts/**/*.mjs", "bench/**/*.mjs", "*.js"],
    languageOptions: { globals: { process: "readonly", console: "readonly", Buffer: "readonly", URL: "readonly" } },
  },
  {
    // The viewer pages' own scripts run in the browser, as plain scripts (no build step).
    files: ["web/**/*.js"],
    languageOptions: {
      sourceType: "script",
      globals: {
        window: "readonly", document: "readonly", location: "readonly", fetch: "readonly", URL: "readonly", performance: "readonly",
        requestAnimationFrame: "readonly", setTimeout: "readonly", clearTimeout: "readonly", getComputedStyle: "readonly",
        igv: "readonly", $3Dmol: "readonly",
      },
    },
  },
  {
    files: ["**/*.ts"],
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
    },
  },
  {
    files: ["core/**/*.ts", "plots/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", {
        paths: [
          ...ioModules.flatMap((m) => [
            { name: m, message: "core/ is pure: no I/O imports (put it in adapters/)." },
            { name: `node:${m}`, message: "core/ is pure: no I/O imports (put it in adapters/)." },
          ]),
        ],
        patterns: [
          { group: ["@kubernetes/*", "@aws-sdk/*", "fastify", "fastify*", "@fastify/*", "prom-client", "pino"],
            message: "core/ is pure: no I/O libraries (put it in adapters/)." },
          { group: ["**/adapters/**", "**/engine/**", "**/media/**", "**/services/**", "**/wiring/**", "**/assistant/**", "**/api-server/**", "**/operator/**", "**/cli/**"],
            message: "core/ and plots/ may not depend on the outer layers." },
        ],
      }],
      "no-restricted-globals": ["error",
        { name: "fetch", message: "core/ is pure: no network access." },
        { name: "process", message: "core/ is pure: no process access." },
        { name: "setTimeout", message: "core/ is pure: time comes from the Clock port." },
        { name: "setInterval", message: "core/ is pure: time comes from the Clock port." },
      ],
      "no-restricted-properties": ["error",
        { object: "Date", property: "now", message: "core/ is pure: time comes from the Clock port." },
        { object: "Math", property: "random", message: "core/ is pure: randomness comes from the caller." },
      ],
    },
  },
);
