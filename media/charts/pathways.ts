/**
 * The shipped WikiPathways collection (data/wikipathways/: pathways.json + ids.json, CC0),
 * read once per process. Found from this module's own location, so it works from the source
 * tree (media/charts/) and from the build (dist/media/charts/) alike.
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { IdMap, Pathway, PathwayCollection } from "../../plots/data/pathways.js";

let cached: Promise<PathwayCollection> | undefined;

/** The folder holding pathways.json: the first `data/wikipathways` above this module. */
export function pathwaysDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const d = join(dir, "data", "wikipathways");
    if (existsSync(join(d, "pathways.json"))) return d;
    dir = dirname(dir);
  }
  throw new Error("the WikiPathways data (data/wikipathways/pathways.json) is not installed next to the server");
}

async function load(): Promise<PathwayCollection> {
  const dir = pathwaysDir();
  const [p, i] = await Promise.all([readFile(join(dir, "pathways.json"), "utf8"), readFile(join(dir, "ids.json"), "utf8")]);
  const meta = JSON.parse(p) as { release: string; source: string; licence: string; pathways: Pathway[] };
  const ids = JSON.parse(i) as { human: IdMap; mouse: IdMap };
  return { release: meta.release, source: meta.source, licence: meta.licence, pathways: meta.pathways, ids };
}

/** The collection, loaded on first use and kept for the life of the process. */
export function loadPathways(): Promise<PathwayCollection> {
  cached ??= load().catch((e: unknown) => { cached = undefined; throw e; });
  return cached;
}
