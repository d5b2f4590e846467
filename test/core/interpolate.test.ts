import t from "tap";
import fc from "fast-check";
import { escapeLiteral, findReferences, hasReferences, interpolate, parseTemplate } from "../../core/interpolate.js";
import type { Reference, Resolver, Segment } from "../../core/interpolate.js";

const text = (s: string): Segment => ({ kind: "text", text: s });
const input = (name: string): Segment => ({ kind: "ref", ref: { kind: "input", name, raw: `\${${name}}` } });
const output = (stepId: string, out: "outputFile" | "outputFile2"): Segment =>
  ({ kind: "ref", ref: { kind: "output", stepId, output: out, raw: `\${${stepId}.${out}}` } });
/** An invalid segment; `reason` is matched against the actual reason. */
const invalid = (raw: string, reason: RegExp) => ({ kind: "invalid" as const, raw, reason });

type Expected = Segment | ReturnType<typeof invalid>;

const parseCases: Array<{ name: string; s: string; expect: Expected[] }> = [
  { name: "empty string", s: "", expect: [] },
  { name: "plain text", s: "samtools sort -o out.bam", expect: [text("samtools sort -o out.bam")] },
  { name: "input reference", s: "${input}", expect: [input("input")] },
  { name: "input with underscore and digits", s: "${_ref_9}", expect: [input("_ref_9")] },
  { name: "step outputFile", s: "${step.outputFile}", expect: [output("step", "outputFile")] },
  { name: "dashed step outputFile2", s: "${step-with-dash.outputFile2}", expect: [output("step-with-dash", "outputFile2")] },
  { name: "several references mixed with text", s: "cp ${src} ${s1.outputFile}>${s2.outputFile2} done",
    expect: [text("cp "), input("src"), text(" "), output("s1", "outputFile"), text(">"), output("s2", "outputFile2"), text(" done")] },
  { name: "adjacent references", s: "${a}${b}", expect: [input("a"), input("b")] },
  { name: "escaped $${x} is text", s: "$${x}", expect: [text("${x}")] },
  { name: "escape merges with surrounding text", s: "echo $${HOME} ${a}", expect: [text("echo ${HOME} "), input("a")] },
  { name: "$$${x} is a lone $ then an escape", s: "$$${x}", expect: [text("$${x}")] },
  { name: "lone $ and $x stay text", s: "cost $5, $x and $", expect: [text("cost $5, $x and $")] },
  { name: "braces without $ stay text", s: "{a} }{", expect: [text("{a} }{")] },
  { name: "stray closing brace after a reference", s: "${x}}", expect: [input("x"), text("}")] },
  { name: "unterminated ${abc", s: "${abc", expect: [invalid("${abc", /unterminated/)] },
  { name: "unterminated after text", s: "pre ${abc def", expect: [text("pre "), invalid("${abc def", /unterminated/)] },
  { name: "empty ${}", s: "${}", expect: [invalid("${}", /empty/)] },
  { name: "unknown property ${a.b}", s: "x ${a.b} y", expect: [text("x "), invalid("${a.b}", /unknown step property "b"/), text(" y")] },
  { name: "space inside ${a b}", s: "${a b}", expect: [invalid("${a b}", /malformed/)] },
  // `1abc` fails the input pattern (leading digit) and has no `.property`: malformed, not a reference.
  { name: "leading digit ${1abc}", s: "${1abc}", expect: [invalid("${1abc}", /malformed/)] },
  // Step ids may start with a digit, so this one is a valid output reference.
  { name: "digit-led step id ${1abc.outputFile}", s: "${1abc.outputFile}", expect: [output("1abc", "outputFile")] },
  { name: "dashed input name is malformed", s: "${my-input}", expect: [invalid("${my-input}", /malformed/)] },
  { name: "two dots is malformed", s: "${a.outputFile.x}", expect: [invalid("${a.outputFile.x}", /malformed/)] },
  { name: "nested ${ stops at the first }", s: "${${a}}", expect: [invalid("${${a}", /malformed/), text("}")] },
];

for (const c of parseCases) {
  t.test(`parseTemplate: ${c.name}`, async (t) => {
    const got = parseTemplate(c.s);
    t.equal(got.length, c.expect.length, "segment count");
    c.expect.forEach((e, i) => {
      const g = got[i];
      if (e.kind === "invalid") {
        t.equal(g?.kind, "invalid", `segment ${i} kind`);
        if (g?.kind === "invalid") { t.equal(g.raw, e.raw, `segment ${i} raw`); t.match(g.reason, e.reason, `segment ${i} reason`); }
      } else t.strictSame(g, e, `segment ${i}`);
    });
    t.equal(hasReferences(c.s), c.expect.some((e) => e.kind !== "text"), "hasReferences agrees");
  });
}

t.test("findReferences gives JSON-pointer paths in nested arrays and objects", async (t) => {
  const value = {
    cmd: "run ${a}",
    args: ["x", "--in", "${s1.outputFile}", ["${b} and ${c.d}"]],
    opts: { deep: { k: "${}" }, esc: "$${HOME}", n: 5, nul: null, yes: true },
  };
  const found = findReferences(value).map((f) => [f.path, f.segment.kind === "ref" ? f.segment.ref.raw : f.segment.raw]);
  t.strictSame(found, [
    [["cmd"], "${a}"],
    [["args", 2], "${s1.outputFile}"],
    [["args", 3, 0], "${b}"],
    [["args", 3, 0], "${c.d}"],
    [["opts", "deep", "k"], "${}"],
  ]);
  t.strictSame(findReferences("${x}", ["params"]).map((f) => f.path), [["params"]], "starts from the given path");
  t.strictSame(findReferences([1, null, true, { a: "plain" }]), [], "no strings with references");
});

const values: Record<string, string> = { a: "A", b: "B", empty: "", "s1.outputFile": "/data/s1.bam", "s1.outputFile2": "/data/s1.bai" };
const resolver: Resolver = (ref: Reference) => values[ref.kind === "input" ? ref.name : `${ref.stepId}.${ref.output}`];

t.test("interpolate resolves deep, leaves non-strings untouched, lists unresolved", async (t) => {
  const params = {
    image: "img:${a}",
    args: ["--in", "${s1.outputFile}", "--idx=${s1.outputFile2}", 3, null, false, ["${b}-${b}"]],
    nested: { path: { to: "${a}/${missing}/${s9.outputFile}" }, bad: "${a.b} ${}", open: "x ${oops" },
    esc: "$${a} stays",
    empty: "[${empty}]",
    n: 42,
    flag: true,
    nul: null,
  };
  const before = JSON.stringify(params);
  const { value, unresolved } = interpolate(params, resolver);
  t.strictSame(value, {
    image: "img:A",
    args: ["--in", "/data/s1.bam", "--idx=/data/s1.bai", 3, null, false, ["B-B"]],
    nested: { path: { to: "A/${missing}/${s9.outputFile}" }, bad: "${a.b} ${}", open: "x ${oops" },
    esc: "${a} stays",
    empty: "[]",
    n: 42,
    flag: true,
    nul: null,
  });
  t.strictSame(unresolved, ["${missing}", "${s9.outputFile}", "${a.b}", "${}", "${oops"]);
  t.equal(JSON.stringify(params), before, "input not mutated");
});

const scalarCases: Array<{ name: string; v: unknown; expect: unknown; unresolved: string[] }> = [
  { name: "plain string", v: "${a}", expect: "A", unresolved: [] },
  { name: "number", v: 7, expect: 7, unresolved: [] },
  { name: "undefined", v: undefined, expect: undefined, unresolved: [] },
  { name: "escaped literal", v: "$${x}", expect: "${x}", unresolved: [] },
  { name: "escape next to reference", v: "$${a}${a}", expect: "${a}A", unresolved: [] },
  { name: "unresolved input kept as written", v: ["${nope}"], expect: ["${nope}"], unresolved: ["${nope}"] },
];

for (const c of scalarCases) {
  t.test(`interpolate: ${c.name}`, async (t) => {
    const r = interpolate(c.v, resolver);
    t.strictSame(r.value, c.expect);
    t.strictSame(r.unresolved, c.unresolved);
  });
}

t.test("resolved values are not re-interpolated", async (t) => {
  const r = interpolate({ x: "${a}" }, (ref) => (ref.kind === "input" && ref.name === "a" ? "${b} $${c}" : "WRONG"));
  t.strictSame(r.value, { x: "${b} $${c}" });
  t.strictSame(r.unresolved, []);
});

t.test("resolver receives the parsed reference", async (t) => {
  const seen: Reference[] = [];
  interpolate(["${in1}", "${st-1.outputFile2}"], (ref) => { seen.push(ref); return "v"; });
  t.strictSame(seen, [
    { kind: "input", name: "in1", raw: "${in1}" },
    { kind: "output", stepId: "st-1", output: "outputFile2", raw: "${st-1.outputFile2}" },
  ]);
});

const templateChars = fc.string({ unit: fc.constantFrom("$", "$", "{", "}", "a", "b", ".", " ", "_", "1", "-"), maxLength: 40 });

t.test("property: escapeLiteral round-trips through interpolate and hides references", async (t) => {
  fc.assert(fc.property(templateChars, (s) => {
    const escaped = escapeLiteral(s);
    const r = interpolate(escaped, () => "X");
    return r.value === s && r.unresolved.length === 0 && findReferences(escaped).length === 0 && !hasReferences(escaped);
  }), { numRuns: 500 });
  t.equal(escapeLiteral("a${b}$c"), "a$${b}$c", "only `${` is escaped");
  t.equal(escapeLiteral("$$"), "$$", "no `$$` replacement-pattern surprises");
});

const dangerous = ["x; rm -rf /", "$(id)", "`id`", "a && b || c", "'quoted' \"double\"", "$HOME $$ $", "a\nb\\c", "|> < &"];

t.test("property: shell metacharacters in resolved values pass through unchanged", async (t) => {
  fc.assert(fc.property(fc.oneof(fc.constantFrom(...dangerous), fc.string()), fc.string(), fc.string(), (v, pre, post) => {
    fc.pre(!pre.includes("$") && !post.includes("$"));
    const r = interpolate({ args: [`${pre}\${a}${post}`] }, () => v);
    return r.value.args[0] === pre + v + post && r.unresolved.length === 0;
  }), { numRuns: 200 });
  t.pass("held");
});

t.test("property: literal strings without `{` are never changed", async (t) => {
  const shell = fc.string({ unit: fc.constantFrom(";", "|", "`", "$", "(", ")", "&", "'", "\"", "\\", " ", "r", "m", "/", "-", "}", "\n"), maxLength: 30 });
  fc.assert(fc.property(fc.oneof(fc.constantFrom(...dangerous), shell), (s) => {
    const r = interpolate<[string, { k: string }]>([s, { k: s }], () => "X");
    return r.value[0] === s && r.value[1].k === s && r.unresolved.length === 0;
  }), { numRuns: 200 });
  t.pass("held");
});
