/**
 * Validation issues: the one shape every check in Operon reports, so that the HTTP API,
 * the CLI and the operator all say "what, where, why" the same way.
 */

/** One error or warning. `path` is a JSON pointer (RFC 6901) into the checked document. */
export interface Issue {
  code: string;
  path: string;
  message: string;
  /** For enumerable fields (e.g. an unknown tool): every value that would have been accepted. */
  valid_values?: string[];
}

export interface ValidationResult {
  valid: boolean;
  errors: Issue[];
  warnings: Issue[];
}

/** Builds a JSON pointer from path segments, escaping `~` and `/` as RFC 6901 requires. */
export function pointer(...segments: ReadonlyArray<string | number | symbol>): string {
  let out = "";
  for (const seg of segments) {
    const s = String(seg);
    out += "/" + (s.includes("~") || s.includes("/") ? s.replace(/~/g, "~0").replace(/\//g, "~1") : s);
  }
  return out;
}

/** Collects issues in the order found; `result()` freezes them into a ValidationResult. */
export class IssueList {
  readonly errors: Issue[] = [];
  readonly warnings: Issue[] = [];

  error(code: string, path: string, message: string, extra?: Partial<Issue>): void {
    this.errors.push({ code, path, message, ...extra });
  }

  warn(code: string, path: string, message: string): void {
    this.warnings.push({ code, path, message });
  }

  result(): ValidationResult {
    return { valid: this.errors.length === 0, errors: this.errors, warnings: this.warnings };
  }
}

/** A short "did you mean" hint: the closest candidate by edit distance, if it is close. */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDist = Infinity;
  for (const c of candidates) {
    const d = editDistance(word.toLowerCase(), c.toLowerCase());
    if (d < bestDist) { best = c; bestDist = d; }
  }
  return best !== undefined && bestDist <= Math.max(2, Math.floor(word.length / 3)) ? best : undefined;
}

function editDistance(a: string, b: string): number {
  if (a.length > 64 || b.length > 64) return Math.abs(a.length - b.length) + (a === b ? 0 : 64);
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min((prev[j] ?? 0) + 1, (cur[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length] ?? 0;
}
