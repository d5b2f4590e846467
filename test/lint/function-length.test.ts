/**
 * No function in plots/ is longer than 80 lines (issue 29, item 4): every `.ts` file is parsed
 * with the TypeScript compiler API and every function-like node with a body is measured —
 * function declarations and expressions, arrow functions (also those assigned to consts),
 * methods, constructors and accessors — from its first line to its last, nested functions
 * included in their parent's length. A function over the limit is named with its file, line
 * and length.
 */
import t from "tap";
import ts from "typescript";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const repo = fileURLToPath(new URL("../../", import.meta.url));
const MAX_LINES = 80;

interface Measured { name: string; line: number; lines: number }

/** The name a function is known by: its own, else the variable, property or parameter it is assigned to. */
function nameOf(node: ts.FunctionLikeDeclaration, sf: ts.SourceFile): string {
  if (node.name) return node.name.getText(sf);
  if (ts.isConstructorDeclaration(node)) return "constructor";
  const p = node.parent;
  if ((ts.isVariableDeclaration(p) || ts.isPropertyAssignment(p) || ts.isPropertyDeclaration(p) || ts.isParameter(p)) && p.name) return p.name.getText(sf);
  return "(anonymous)";
}

/** Every function-like node with a body in `source`, with its length in lines (first to last, inclusive). */
function functionLengths(source: string, fileName: string): Measured[] {
  const sf = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const out: Measured[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && (node as ts.FunctionLikeDeclaration).body) {
      const fn = node as ts.FunctionLikeDeclaration;
      const first = sf.getLineAndCharacterOfPosition(fn.getStart(sf)).line;
      const last = sf.getLineAndCharacterOfPosition(fn.getEnd()).line;
      out.push({ name: nameOf(fn, sf), line: first + 1, lines: last - first + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

const tooLong = (source: string, fileName: string) => functionLengths(source, fileName).filter((f) => f.lines > MAX_LINES);

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    return e.isDirectory() ? tsFiles(p) : e.name.endsWith(".ts") ? [p] : [];
  });
}

/** A function whose body has `bodyLines` lines, so `bodyLines + 2` in all. */
const body = (bodyLines: number) => Array.from({ length: bodyLines }, (_, i) => `  const v${i} = ${i};`).join("\n");

t.test("the measure catches an 81-line function, and lets an 80-line one pass", async (t) => {
  const scratch = [
    `export function long(): void {\n${body(79)}\n}`,
    `export function fits(): void {\n${body(78)}\n}`,
    `const arrow = (): void => {\n${body(79)}\n};`,
    `class K {\n  method(): void {\n${body(79)}\n  }\n  get short(): number { return 1; }\n}`,
    `export const obj = { inner() {\n${body(79)}\n} };`,
  ].join("\n\n");
  const all = functionLengths(scratch, "scratch.ts");
  t.same(all.find((f) => f.name === "long"), { name: "long", line: 1, lines: 81 }, "a function declaration of 81 lines is measured as 81");
  t.equal(all.find((f) => f.name === "fits")?.lines, 80, "one of 80 lines as 80");
  t.same(tooLong(scratch, "scratch.ts").map((f) => `${f.name} ${f.lines}`), ["long 81", "arrow 81", "method 81", "inner 81"],
    "declarations, arrow functions assigned to consts, methods and object methods over 80 lines are caught; 80 lines and a one-line getter pass");
});

t.test(`no function in plots/ is longer than ${MAX_LINES} lines`, async (t) => {
  const files = tsFiles(join(repo, "plots"));
  t.ok(files.length > 20, `the scan sees plots/ (${files.length} files)`);
  let measured = 0;
  const long: string[] = [];
  for (const f of files) {
    const fns = functionLengths(readFileSync(f, "utf8"), f);
    measured += fns.length;
    for (const fn of fns) if (fn.lines > MAX_LINES) long.push(`${relative(repo, f)}:${fn.line} ${fn.name} (${fn.lines} lines)`);
  }
  t.ok(measured > 200, `functions measured: ${measured}`);
  t.same(long, [], long.length ? `functions over ${MAX_LINES} lines:\n${long.join("\n")}` : `none over ${MAX_LINES} lines`);
});
