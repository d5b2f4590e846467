/**
 * Interpolation of `${...}` references in step parameters.
 *
 * A string parameter may contain `${inputName}` (a declared input, default applied),
 * `${stepId.outputFile}` or `${stepId.outputFile2}` (an output of an earlier step).
 * References are resolved in every string, including strings inside arrays such as `args`
 * and inside nested objects. A literal `${` is written `$${` (as in Terraform): `$${HOME}`
 * becomes the text `${HOME}` and is not a reference. A lone `$` needs no escaping.
 */

export type OutputName = "outputFile" | "outputFile2";
/** A step's outputs as references name them, in position order (`outputFile` is position 0). */
export const OUTPUT_NAMES: readonly OutputName[] = ["outputFile", "outputFile2"];
const isOutputName = (s: string): s is OutputName => (OUTPUT_NAMES as readonly string[]).includes(s);
/** The position of a named output (0 for `outputFile`, 1 for `outputFile2`). */
export const outputPosition = (name: OutputName): number => OUTPUT_NAMES.indexOf(name);

export type Reference =
  | { kind: "input"; name: string; raw: string }
  | { kind: "output"; stepId: string; output: OutputName; raw: string };

export type Segment =
  | { kind: "text"; text: string }
  | { kind: "ref"; ref: Reference }
  | { kind: "invalid"; raw: string; reason: string };

/** Parameters nested deeper than this are refused rather than walked. */
export const MAX_DEPTH = 32;

const INPUT_REF = /^[A-Za-z_][A-Za-z0-9_]*$/;
const STEP_REF = /^([A-Za-z0-9_-]+)\.([A-Za-z0-9_]+)$/;

/** Splits one string into text and reference segments. Never throws. */
export function parseTemplate(s: string): Segment[] {
  const out: Segment[] = [];
  let text = "";
  let i = 0;
  while (i < s.length) {
    const j = s.indexOf("${", i);
    if (j < 0) { text += s.slice(i); break; }
    if (j > i && s.charCodeAt(j - 1) === 36 /* $ */) {
      // `$${` is an escaped literal `${`.
      text += s.slice(i, j - 1) + "${";
      i = j + 2;
      continue;
    }
    text += s.slice(i, j);
    if (text) { out.push({ kind: "text", text }); text = ""; }
    const end = s.indexOf("}", j + 2);
    if (end < 0) {
      out.push({ kind: "invalid", raw: s.slice(j), reason: "unterminated reference: `${` without a closing `}` (write `$${` for a literal `${`)" });
      return out;
    }
    out.push(parseBody(s.slice(j + 2, end), s.slice(j, end + 1)));
    i = end + 1;
  }
  if (text) out.push({ kind: "text", text });
  return out;
}

/** Like parseTemplate, but reports only the references (and malformed ones), building no text. */
function scanReferences(s: string, emit: (seg: Exclude<Segment, { kind: "text" }>) => void): void {
  let i = 0;
  for (;;) {
    const j = s.indexOf("${", i);
    if (j < 0) return;
    if (j > i && s.charCodeAt(j - 1) === 36 /* $ */) { i = j + 2; continue; }
    const end = s.indexOf("}", j + 2);
    if (end < 0) {
      emit({ kind: "invalid", raw: s.slice(j), reason: "unterminated reference: `${` without a closing `}` (write `$${` for a literal `${`)" });
      return;
    }
    emit(parseBody(s.slice(j + 2, end), s.slice(j, end + 1)) as Exclude<Segment, { kind: "text" }>);
    i = end + 1;
  }
}

function parseBody(body: string, raw: string): Segment {
  if (INPUT_REF.test(body)) return { kind: "ref", ref: { kind: "input", name: body, raw } };
  const m = STEP_REF.exec(body);
  if (m) {
    const [, stepId, prop] = m as unknown as [string, string, string];
    if (isOutputName(prop)) {
      return { kind: "ref", ref: { kind: "output", stepId, output: prop, raw } };
    }
    return { kind: "invalid", raw, reason: `unknown step property "${prop}" in ${raw}: a step reference ends in .outputFile or .outputFile2` };
  }
  if (body === "") return { kind: "invalid", raw, reason: "empty reference `${}`" };
  return { kind: "invalid", raw, reason: `malformed reference ${raw}: use \${inputName} or \${stepId.outputFile}` };
}

/** True when the string contains at least one `${` that is not escaped. */
export function hasReferences(s: string): boolean {
  return parseTemplate(s).some((seg) => seg.kind !== "text");
}

/** A segment found while walking a parameter value, with the JSON-pointer suffix where it sits. */
export interface FoundSegment { path: Array<string | number>; segment: Exclude<Segment, { kind: "text" }> }

/** Walks strings in a value (arrays and objects included) and returns every reference or malformed one. */
export function findReferences(value: unknown, path: Array<string | number> = []): FoundSegment[] {
  const found: FoundSegment[] = [];
  const walk = (v: unknown, depth: number): void => {
    if (depth > MAX_DEPTH) {
      found.push({ path: path.slice(), segment: { kind: "invalid", raw: "", reason: `parameters are nested deeper than ${MAX_DEPTH} levels` } });
      return;
    }
    if (typeof v === "string") {
      if (v.includes("${")) scanReferences(v, (segment) => found.push({ path: path.slice(), segment }));
    } else if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) { path.push(i); walk(v[i], depth + 1); path.pop(); }
    } else if (v !== null && typeof v === "object") {
      for (const k of Object.keys(v)) { path.push(k); walk((v as Record<string, unknown>)[k], depth + 1); path.pop(); }
    }
  };
  walk(value, 0);
  return found;
}

/** Resolves a reference to its value, or undefined when it cannot be resolved. */
export type Resolver = (ref: Reference) => string | undefined;

export interface InterpolationResult<T> { value: T; unresolved: string[] }

/**
 * Replaces every reference in every string of `value` (deep) using `resolve`.
 * Unresolvable and malformed references are left as written and listed in `unresolved`.
 */
export function interpolate<T>(value: T, resolve: Resolver): InterpolationResult<T> {
  const unresolved: string[] = [];
  const walk = (v: unknown, depth: number): unknown => {
    if (depth > MAX_DEPTH) { unresolved.push(`(nested deeper than ${MAX_DEPTH} levels)`); return v; }
    if (typeof v === "string") return interpolateString(v, resolve, unresolved);
    if (Array.isArray(v)) return v.map((x) => walk(x, depth + 1));
    if (v !== null && typeof v === "object") {
      return Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, walk(x, depth + 1)]));
    }
    return v;
  };
  return { value: walk(value, 0) as T, unresolved };
}

function interpolateString(s: string, resolve: Resolver, unresolved: string[]): string {
  if (!s.includes("${")) return s;
  let out = "";
  for (const seg of parseTemplate(s)) {
    if (seg.kind === "text") out += seg.text;
    else if (seg.kind === "invalid") { out += seg.raw; unresolved.push(seg.raw); }
    else {
      const v = resolve(seg.ref);
      if (v === undefined) { out += seg.ref.raw; unresolved.push(seg.ref.raw); }
      else out += v;
    }
  }
  return out;
}

/** Escapes a literal so that interpolation leaves it unchanged (`${` becomes `$${`). */
export function escapeLiteral(s: string): string {
  return s.replace(/\$\{/g, () => "$${");
}
