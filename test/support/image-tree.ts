/**
 * The operon container image's file tree, built without Docker (this machine has no engine):
 * the three stages of the repository's Dockerfile done by hand — `tsc -p tsconfig.build.json`
 * (build stage), `npm ci --omit=dev` (deps stage), then the runtime stage's COPY lines — into
 * a directory. Running `node <tree>/dist/cli/main.js` then shows whether the image's layout
 * and its production dependencies alone are enough for each process. `runtimeCopies` reads
 * the Dockerfile's last stage, so a test notices when the Dockerfile and this drift apart.
 */
import { execFile } from "node:child_process";
import { chmodSync, cpSync, mkdirSync, readFileSync, renameSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const repo = fileURLToPath(new URL("../..", import.meta.url));

/** The runtime stage's COPY lines this builder reproduces: [--from stage or "", source, destination]. */
export const REPRODUCED_COPIES: ReadonlyArray<readonly [string, string, string]> = [
  ["deps", "/app/node_modules", "node_modules"],
  ["build", "/src/dist", "dist"],
  ["", "package.json", "./"],
  ["", "pipelines", "pipelines"],
  ["", "web", "web"],
  ["", "data", "data"],
  ["", "crds", "crds"],
];

/** The instructions of the Dockerfile's last stage, continuation lines joined. */
function runtimeStage(dockerfile: string): string[] {
  const last = dockerfile.split(/^FROM\s/m).at(-1) ?? "";
  return last.replace(/\\\n/g, " ").split("\n").filter((l) => l.trim() && !l.trim().startsWith("#"));
}

/** The COPY lines of the Dockerfile's last stage, as [--from stage or "", source, destination]. */
export function runtimeCopies(dockerfile = readFileSync(join(repo, "Dockerfile"), "utf8")): Array<[string, string, string]> {
  const out: Array<[string, string, string]> = [];
  for (const line of runtimeStage(dockerfile)) {
    const m = /^COPY\s+(?:--from=(\S+)\s+)?(\S+)\s+(\S+)\s*$/.exec(line.trim());
    if (m) out.push([m[1] ?? "", m[2] as string, m[3] as string]);
  }
  return out;
}

/** The environment the image sets (its last stage's ENV lines), under the pod's own env. */
export function runtimeEnv(dockerfile = readFileSync(join(repo, "Dockerfile"), "utf8")): Record<string, string> {
  const out: Record<string, string> = { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" };
  for (const line of runtimeStage(dockerfile)) {
    const m = /^ENV\s+(.*)$/.exec(line.trim());
    if (!m) continue;
    for (const kv of (m[1] as string).trim().split(/\s+/)) {
      const eq = kv.indexOf("=");
      if (eq > 0) out[kv.slice(0, eq)] = kv.slice(eq + 1);
    }
  }
  return out;
}

export interface ImageTree {
  /** The image's /app. */
  app: string;
  /** The `operon` entry point (/usr/local/bin/operon in the image). */
  main: string;
  /**
   * The image's Node.js (/usr/local/bin/node of its base image): this process's own binary,
   * copied beside the tree so that the pod's user (uid 1000) can run it wherever this one
   * lives (e.g. a pinned Node under root's home).
   */
  node: string;
}

/** Builds the runtime image's /app under `dir` (about half a minute: npm ci and tsc). */
export async function buildImageTree(dir: string): Promise<ImageTree> {
  const app = join(dir, "app");
  const deps = join(dir, "deps");
  mkdirSync(app, { recursive: true });
  mkdirSync(deps, { recursive: true });
  // deps stage: production dependencies only, from the lock file (the npm cache of `make
  // install` serves them; the registry is asked only for what it lacks).
  for (const f of ["package.json", "package-lock.json"]) cpSync(join(repo, f), join(deps, f));
  const npm = run("npm", ["ci", "--omit=dev", "--no-audit", "--no-fund", "--ignore-scripts", "--prefer-offline"], { cwd: deps, maxBuffer: 16 * 1024 * 1024 });
  // build stage: the TypeScript of the six source folders, compiled as the Dockerfile does.
  const tsc = run(process.execPath, [join(repo, "node_modules/typescript/bin/tsc"), "-p", join(repo, "tsconfig.build.json"), "--outDir", join(app, "dist")], { cwd: repo, maxBuffer: 16 * 1024 * 1024 });
  await Promise.all([npm, tsc]);
  // runtime stage.
  renameSync(join(deps, "node_modules"), join(app, "node_modules"));
  cpSync(join(repo, "package.json"), join(app, "package.json"));
  cpSync(join(repo, "pipelines"), join(app, "pipelines"), { recursive: true });
  cpSync(join(repo, "web"), join(app, "web"), { recursive: true });
  cpSync(join(repo, "data"), join(app, "data"), { recursive: true });
  cpSync(join(repo, "crds"), join(app, "crds"), { recursive: true });
  const main = join(app, "dist/cli/main.js");
  chmodSync(main, 0o755);
  const node = join(dir, "bin/node");
  mkdirSync(join(dir, "bin"), { recursive: true });
  cpSync(process.execPath, node);
  chmodSync(node, 0o755);
  return { app, main, node };
}
