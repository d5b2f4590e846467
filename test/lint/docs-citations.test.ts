/**
 * Comments cite the repository's own docs (docs/testing.md#lint-tests): no source file (`*.ts`,
 * `*.mjs`, `*.sh`, Makefiles) points at the design document that lives outside the repository,
 * which whoever clones the repository cannot read; and every `docs/<file>.md` a source file
 * names exists, with a heading that produces the `#anchor` it gives (GitHub's slugs).
 */
import t from "tap";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const repo = fileURLToPath(new URL("../../", import.meta.url));
const SKIP_DIRS = new Set(["node_modules", "dist", ".git", ".tap"]);

/** The outside document, spelled so that this file does not cite it itself. */
const OUTSIDE = [["DESIGN", "§"].join(" "), ["DESIGN", "md"].join(".")];

/** `docs/<name>.md`, optionally `#<anchor>`, wherever it appears in a source file. */
const CITATION = /(?<![\w/.-])(?:\.\.\/)*docs\/([\w.-]+(?:\/[\w.-]+)*)\.md(?:#([\w-]+))?/g;

function isSource(name: string): boolean {
  return name === "Makefile" || name.endsWith(".ts") || name.endsWith(".mjs") || name.endsWith(".sh");
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return SKIP_DIRS.has(e.name) ? [] : sourceFiles(p);
    return e.isFile() && isSource(e.name) ? [p] : [];
  });
}

/**
 * The anchor GitHub gives a heading: its text as rendered (inline code, emphasis and link
 * markup removed), lower-cased, every character that is not a letter, digit, space, `-` or `_`
 * dropped, and each space made a `-`.
 */
export function slug(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/[`*]/g, "")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M} _-]/gu, "")
    .replace(/ /g, "-");
}

/** Every anchor a markdown file's headings produce (outside code fences; repeats get -1, -2, …). */
export function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fence: string | undefined;
  for (const line of markdown.split("\n")) {
    const f = /^\s*(`{3,}|~{3,})/.exec(line);
    if (f) {
      const mark = f[1] as string;
      if (fence === undefined) fence = mark[0];
      else if (mark[0] === fence) fence = undefined;
      continue;
    }
    if (fence !== undefined) continue;
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!h) continue;
    const base = slug(h[1] as string);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

t.test("slugs and anchors are GitHub's", async (t) => {
  t.equal(slug("Run folders"), "run-folders");
  t.equal(slug("Why `core/kubernetes/`"), "why-corekubernetes");
  t.equal(slug("`operon keys create`"), "operon-keys-create");
  t.equal(slug("Leader election"), "leader-election");
  t.equal(slug("The run manifest (run.json)"), "the-run-manifest-runjson");
  t.equal(slug("Parameters, values & files"), "parameters-values--files");
  t.equal(slug("See [the API](api.md) here"), "see-the-api-here");
  t.equal(slug("service_list_files"), "service_list_files");
  const a = anchors("# Title\n\n## Tests\n\n```sh\n# not a heading\n```\n\n## Tests\n### Step pods ##\n");
  t.same([...a].sort(), ["step-pods", "tests", "tests-1", "title"]);
});

const files = sourceFiles(repo);
const docsDir = join(repo, "docs");
const anchorCache = new Map<string, Set<string> | undefined>();
function anchorsOf(doc: string): Set<string> | undefined {
  if (!anchorCache.has(doc)) {
    const path = join(docsDir, `${doc}.md`);
    anchorCache.set(doc, existsSync(path) ? anchors(readFileSync(path, "utf8")) : undefined);
  }
  return anchorCache.get(doc);
}

t.test("the scan sees the source files", async (t) => {
  const rel = new Set(files.map((f) => relative(repo, f)));
  for (const f of ["Makefile", "core/layout.ts", "scripts/test-deps.sh", "scripts/test.mjs", "test/lint/docs-citations.test.ts"]) t.ok(rel.has(f), `scanned: ${f}`);
  t.notOk([...rel].some((f) => f.split("/").some((s) => SKIP_DIRS.has(s))), "nothing under node_modules, dist or .git");
});

t.test("no source file cites the design document outside the repository", async (t) => {
  const found: string[] = [];
  for (const file of files) {
    readFileSync(file, "utf8").split("\n").forEach((line, i) => {
      if (OUTSIDE.some((s) => line.includes(s))) found.push(`${relative(repo, file)}:${i + 1}: ${line.trim()}`);
    });
  }
  t.same(found, [], found.length ? `cite docs/ instead (${found.length}):\n${found.join("\n")}` : "none");
});

t.test("every docs/….md#anchor cited in a source file exists", async (t) => {
  let cited = 0;
  const broken: string[] = [];
  for (const file of files) {
    readFileSync(file, "utf8").split("\n").forEach((line, i) => {
      for (const m of line.matchAll(CITATION)) {
        cited++;
        const doc = m[1] as string;
        const anchor = m[2];
        const where = `${relative(repo, file)}:${i + 1}: ${m[0]}`;
        const known = anchorsOf(doc);
        if (!known) broken.push(`${where}: no file docs/${doc}.md`);
        else if (anchor !== undefined && !known.has(anchor)) broken.push(`${where}: no heading of docs/${doc}.md makes #${anchor}`);
      }
    });
  }
  t.ok(cited > 20, `citations found (${cited})`);
  t.same(broken, [], broken.length ? `broken citations (${broken.length}):\n${broken.join("\n")}` : "all resolve");
});
