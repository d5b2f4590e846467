/**
 * The top-level folders form layers (docs/architecture.md): every import between them goes
 * down this table, so there is no cycle between folders, `api-server/` (HTTP) and
 * `operator/` (controller process) never reach into each other, the control loop (`engine/`)
 * and the pure layers (`core/`, `plots/`) import no I/O layer, and the application services
 * reach media preparation only through the ports wiring hands them. Inside plots/, files
 * import one way (data/ → layout/ → paint/, composed by plots/<type>.ts) and form no cycle.
 * Static imports, dynamic `import()` and `export … from` all count.
 */
import t from "tap";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const repo = fileURLToPath(new URL("../../", import.meta.url));

/** Which folders each folder may import from (besides itself). */
const ALLOWED: Record<string, string[]> = {
  core: [],
  plots: ["core"],
  adapters: ["core"],
  engine: ["core"],
  media: ["core", "plots", "adapters"],
  services: ["core", "plots", "adapters", "engine"],
  wiring: ["core", "plots", "adapters", "engine", "media", "services"],
  assistant: ["core", "plots", "engine", "services"],
  "api-server": ["core", "plots", "adapters", "engine", "media", "services", "wiring", "assistant"],
  operator: ["core", "adapters", "engine", "wiring"],
  cli: ["core", "plots", "adapters", "engine", "media", "services", "wiring", "assistant", "api-server", "operator"],
};

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    return e.isDirectory() ? tsFiles(p) : e.name.endsWith(".ts") ? [p] : [];
  });
}

const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)["'](\.{1,2}\/[^"']+)["']/g;

/** Folder → folder edges of the repository, each with one file that makes it. */
function folderEdges(): Map<string, Map<string, string>> {
  const edges = new Map<string, Map<string, string>>();
  for (const folder of Object.keys(ALLOWED)) {
    for (const file of tsFiles(join(repo, folder))) {
      for (const m of readFileSync(file, "utf8").matchAll(SPECIFIER)) {
        const target = relative(repo, resolve(dirname(file), m[1] as string)).split("/")[0] as string;
        if (target === folder || !(target in ALLOWED)) continue;
        const out = edges.get(folder) ?? new Map<string, string>();
        if (!out.has(target)) out.set(target, relative(repo, file));
        edges.set(folder, out);
      }
    }
  }
  return edges;
}

/** The first cycle found in a graph, as a path that returns to its start, or undefined. */
export function findCycle(graph: Map<string, Iterable<string>>): string[] | undefined {
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (n: string): string[] | undefined => {
    if (state.get(n) === "done") return undefined;
    if (state.get(n) === "open") return [...stack.slice(stack.indexOf(n)), n];
    state.set(n, "open");
    stack.push(n);
    for (const m of graph.get(n) ?? []) {
      const c = visit(m);
      if (c) return c;
    }
    stack.pop();
    state.set(n, "done");
    return undefined;
  };
  for (const n of graph.keys()) {
    const c = visit(n);
    if (c) return c;
  }
  return undefined;
}

t.test("the cycle finder finds a cycle, and only a cycle", async (t) => {
  t.same(findCycle(new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a"]]])), ["a", "b", "c", "a"]);
  t.same(findCycle(new Map([["x", ["y"]], ["y", ["z"]], ["z", ["y"]]])), ["y", "z", "y"]);
  t.equal(findCycle(new Map([["a", ["b", "c"]], ["b", ["c"]], ["c", []]])), undefined);
});

t.test("imports between top-level folders go down the layers; no cycle", async (t) => {
  const edges = folderEdges();
  t.ok((edges.get("cli")?.size ?? 0) > 0 && (edges.get("engine")?.size ?? 0) > 0, "the scan sees imports between folders");
  for (const [from, out] of edges) {
    for (const [to, file] of out) t.ok(ALLOWED[from]?.includes(to), `${from}/ → ${to}/ (${file})`);
  }
  const graph = new Map([...edges].map(([k, v]) => [k, [...v.keys()]]));
  const cycle = findCycle(graph);
  t.equal(cycle, undefined, cycle ? `a cycle between folders: ${cycle.join(" → ")}` : "no cycle between folders");
});

/**
 * Inside plots/ (a renderer is data/ → layout/ → paint/, composed by plots/<type>.ts): file →
 * file imports, each with the specifier that makes it.
 */
function plotsFileEdges(): Map<string, Map<string, string>> {
  const root = join(repo, "plots");
  const edges = new Map<string, Map<string, string>>();
  for (const file of tsFiles(root)) {
    const from = relative(repo, file);
    const out = new Map<string, string>();
    for (const m of readFileSync(file, "utf8").matchAll(SPECIFIER)) {
      const target = relative(repo, resolve(dirname(file), (m[1] as string).replace(/\.js$/, ".ts")));
      if (target.startsWith("plots/")) out.set(target, m[1] as string);
    }
    edges.set(from, out);
  }
  return edges;
}

t.test("no import cycle between the files of plots/ (volcano and Manhattan included)", async (t) => {
  const edges = plotsFileEdges();
  t.ok((edges.get("plots/manhattan.ts")?.size ?? 0) > 3, "the scan sees imports inside plots/");
  const graph = new Map([...edges].map(([k, v]) => [k, [...v.keys()]]));
  const cycle = findCycle(graph);
  t.equal(cycle, undefined, cycle ? `an import cycle inside plots/: ${cycle.join(" → ")}` : "no cycle inside plots/");
});

t.test("inside plots/, data/ imports neither layout/ nor paint/, and layout/ does not import paint/", async (t) => {
  const rank = (f: string) => (f.startsWith("plots/data/") ? 0 : f.startsWith("plots/layout/") ? 1 : f.startsWith("plots/paint/") ? 2 : undefined);
  let checked = 0;
  for (const [from, out] of plotsFileEdges()) {
    const rf = rank(from);
    if (rf === undefined) continue;
    for (const [to, spec] of out) {
      const rt = rank(to);
      if (rt === undefined) continue;
      checked++;
      if (rt > rf) t.fail(`${from} imports ${spec}: ${["data", "layout", "paint"][rf]}/ may not import ${["data", "layout", "paint"][rt]}/`);
    }
  }
  t.ok(checked > 50, `imports between data/, layout/ and paint/ checked: ${checked}`);
});
