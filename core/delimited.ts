/**
 * Delimited text tables (CSV, TSV, whitespace-separated TXT) for the table viewer. The server
 * parses, types, sorts and filters a file with these functions and sends the browser one page;
 * the browser never receives the whole file. Pure: the caller reads the bytes.
 * - `detectDelimiter`: which separator a sample uses.
 * - `DelimitedParser`: an incremental RFC 4180 parser (chunks may split anywhere).
 * - `parseTable`: records plus a header (found, taken from a `#` line, or generated).
 * - `columnTypes`, `compareCells`, `sortRows`, `filterRows`: typing, sorting and the filter box.
 */

export type Delimiter = "," | "\t" | ";" | "|" | " ";
export type ColumnType = "number" | "text";
export type SortDirection = "asc" | "desc";

export interface ParsedTable {
  delimiter: Delimiter;
  /** One name per column; as long as the widest row. */
  header: string[];
  /** True when the header came from the file, false when it is `column_1..column_n`. */
  headerDetected: boolean;
  /** Data rows, each padded with "" to the header's length. */
  rows: string[][];
  /** Leading `#` lines that are not the header. */
  comments: number;
}

/** Candidates in tie-breaking order: tab wins ties, whitespace only when nothing else fits. */
const CANDIDATES: readonly Delimiter[] = ["\t", ",", ";", "|", " "];
/** How many records of a sample `detectDelimiter` looks at. */
const DETECT_RECORDS = 50;
/** How much of a text `parseTable` hands to `detectDelimiter`. */
const DETECT_SAMPLE_CHARS = 64 * 1024;
/** How many data rows header detection looks at. */
const HEADER_SAMPLE_ROWS = 1000;

const QUOTE = 0x22;
const LF = 0x0a;
const CR = 0x0d;
const BOM = "\ufeff";

/** Parser states: at a field's start, in an unquoted field, in a quoted one, just after a quote in a quoted one. */
const State = { FieldStart: 0, Unquoted: 1, Quoted: 2, QuoteInQuoted: 3 } as const;
type State = (typeof State)[keyof typeof State];

/**
 * Incremental RFC 4180 parser. `push` returns the records completed so far; `end` flushes the
 * last one. Quotes open a quoted field only at a field's start (elsewhere they are literal);
 * text after a closing quote is kept as it is. CRLF, LF and a lone CR end a record; a UTF-8
 * BOM at the very start is dropped; empty lines are skipped. With the delimiter " " a run of
 * spaces and tabs separates fields, leading and trailing blanks are ignored and nothing is quoted.
 */
export class DelimitedParser {
  readonly delimiter: Delimiter;
  private readonly delimCode: number;
  private started = false;
  private state: State = State.FieldStart;
  private field = "";
  private record: string[] = [];
  /** Whether the current record has any content (a delimiter, a character or a quote). */
  private any = false;
  /** A CR ended the last record: a following LF belongs to it. */
  private skipLF = false;
  /** Whitespace mode: the unfinished last line. */
  private rest = "";
  /** Characters of the unfinished record's completed fields. */
  private recordChars = 0;

  constructor(delimiter: Delimiter) {
    this.delimiter = delimiter;
    this.delimCode = delimiter.charCodeAt(0);
  }

  push(chunk: string): string[][] {
    if (!this.started && chunk.length > 0) {
      this.started = true;
      if (chunk.startsWith(BOM)) chunk = chunk.slice(1);
    }
    return this.delimiter === " " ? this.pushWhitespace(chunk) : this.pushQuoted(chunk);
  }

  /** Characters held for the record not yet complete (a caller bounds a record's length with it). */
  get pendingChars(): number {
    return this.recordChars + this.field.length + this.rest.length;
  }

  end(): string[][] {
    const out: string[][] = [];
    if (this.delimiter === " ") {
      const fields = splitWhitespace(this.rest.endsWith("\r") ? this.rest.slice(0, -1) : this.rest);
      this.rest = "";
      if (fields) out.push(fields);
      return out;
    }
    this.endRecord(out);
    this.state = State.FieldStart;
    this.skipLF = false;
    return out;
  }

  private pushWhitespace(chunk: string): string[][] {
    const out: string[][] = [];
    if (!chunk.includes("\n")) { this.rest += chunk; return out; }
    const lines = (this.rest + chunk).split("\n");
    this.rest = lines.pop() as string;
    for (const line of lines) {
      const fields = splitWhitespace(line.endsWith("\r") ? line.slice(0, -1) : line);
      if (fields) out.push(fields);
    }
    return out;
  }

  private pushQuoted(chunk: string): string[][] {
    const out: string[][] = [];
    const n = chunk.length;
    const d = this.delimCode;
    let i = 0;
    while (i < n) {
      const c = chunk.charCodeAt(i);
      if (this.skipLF) {
        this.skipLF = false;
        if (c === LF) { i++; continue; }
      }
      if (this.state === State.Quoted) {
        const q = chunk.indexOf("\"", i);
        if (q < 0) { this.field += chunk.slice(i); i = n; } else {
          this.field += chunk.slice(i, q);
          i = q + 1;
          this.state = State.QuoteInQuoted;
        }
        continue;
      }
      if (this.state === State.QuoteInQuoted) {
        if (c === QUOTE) { this.field += "\""; this.state = State.Quoted; i++; continue; }
        this.state = State.Unquoted; // the quoted part is over; what follows is handled as plain text
      }
      if (c === d) {
        this.record.push(this.field);
        this.recordChars += this.field.length + 1;
        this.field = "";
        this.any = true;
        this.state = State.FieldStart;
        i++;
      } else if (c === LF || c === CR) {
        this.endRecord(out);
        this.state = State.FieldStart;
        if (c === CR) this.skipLF = true;
        i++;
      } else if (c === QUOTE && this.state === State.FieldStart) {
        this.state = State.Quoted;
        this.any = true;
        i++;
      } else {
        let j = i + 1;
        while (j < n) {
          const e = chunk.charCodeAt(j);
          if (e === d || e === LF || e === CR) break;
          j++;
        }
        this.field += chunk.slice(i, j);
        this.any = true;
        this.state = State.Unquoted;
        i = j;
      }
    }
    return out;
  }

  private endRecord(out: string[][]): void {
    if (this.any) {
      this.record.push(this.field);
      out.push(this.record);
    }
    this.record = [];
    this.recordChars = 0;
    this.field = "";
    this.any = false;
  }
}

/** A whitespace-separated line's fields; undefined for a blank line. */
function splitWhitespace(line: string): string[] | undefined {
  const trimmed = line.replace(/^[ \t]+|[ \t]+$/g, "");
  return trimmed === "" ? undefined : trimmed.split(/[ \t]+/);
}

/** Parses a whole text with one delimiter. */
function parseAll(text: string, delimiter: Delimiter): string[][] {
  const p = new DelimitedParser(delimiter);
  const records = p.push(text);
  for (const r of p.end()) records.push(r);
  return records;
}

/** Splits off the leading lines that start with `#` (blank lines among them are dropped). */
function splitLeadingComments(text: string): { comments: string[]; rest: string } {
  if (text.startsWith(BOM)) text = text.slice(1);
  const comments: string[] = [];
  let pos = 0;
  while (pos < text.length) {
    let eol = text.indexOf("\n", pos);
    if (eol < 0) eol = text.length;
    let line = text.slice(pos, eol);
    if (line.endsWith("\r")) line = line.slice(0, -1);
    if (line.startsWith("#")) comments.push(line);
    else if (line.trim() !== "") break;
    pos = eol + 1;
  }
  return { comments, rest: text.slice(Math.min(pos, text.length)) };
}

/** The most frequent value (ties: the larger value) and how often it occurs. */
function mode(values: readonly number[]): { value: number; count: number } {
  const counts = new Map<number, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  let best = { value: 0, count: 0 };
  for (const [value, count] of counts) {
    if (count > best.count || (count === best.count && value > best.value)) best = { value, count };
  }
  return best;
}

/**
 * The delimiter that splits the sample's first records into the most consistent number of
 * columns (more than one). Lines starting with `#` are ignored unless nothing else is there;
 * a last line cut off by the end of the sample is ignored when there are others. Tab wins ties,
 * then `,`, `;`, `|` and last whitespace; a single-column sample gives ",".
 */
export function detectDelimiter(sample: string): Delimiter {
  const { comments, rest } = splitLeadingComments(sample);
  let best: { delimiter: Delimiter; score: number } = { delimiter: ",", score: 0 };
  for (const delimiter of CANDIDATES) {
    const p = new DelimitedParser(delimiter);
    let records = p.push(rest);
    if (records.length < 2) records = records.concat(p.end());
    records = records.filter((r) => !(r[0] ?? "").startsWith("#")).slice(0, DETECT_RECORDS);
    if (records.length === 0 && comments.length > 0) {
      records = comments.map((c) => parseAll(c.replace(/^#+/, ""), delimiter)[0] ?? []);
    }
    if (records.length === 0) continue;
    const m = mode(records.map((r) => r.length));
    if (m.value <= 1) continue;
    const score = m.count / records.length;
    if (score > best.score) best = { delimiter, score };
  }
  return best.delimiter;
}

const NUMBER = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;
const MISSING = new Set(["", "na", "nan", "n/a", ".", "-"]);

/** Whether a cell is empty or a missing-value marker (`NA`, `NaN`, `N/A`, `.`, `-`). */
export function isMissing(cell: string): boolean {
  return MISSING.has(cell.trim().toLowerCase());
}

/** The cell as a number when it is written in plain JS number syntax; undefined otherwise. */
export function parseNumber(cell: string): number | undefined {
  const s = cell.trim();
  if (!NUMBER.test(s)) return undefined;
  const n = Number(s);
  return Number.isFinite(n) ? n : undefined;
}

/**
 * Each column's type: "number" when at least 90% of its non-missing cells are numbers (and it
 * has any), "text" otherwise.
 */
export function columnTypes(rows: readonly (readonly string[])[], nCols: number): ColumnType[] {
  const types: ColumnType[] = [];
  for (let c = 0; c < nCols; c++) {
    let present = 0;
    let numeric = 0;
    for (const row of rows) {
      const cell = row[c] ?? "";
      if (isMissing(cell)) continue;
      present++;
      if (parseNumber(cell) !== undefined) numeric++;
    }
    types.push(present > 0 && numeric >= 0.9 * present ? "number" : "text");
  }
  return types;
}

/**
 * Splits a text into a header and rows. Leading `##` lines are comments. The last leading
 * `#` line is the header when, with the `#` stripped, it has the data's column count and no
 * numeric cell (`#chrom\tstart\tend`). Otherwise the first record is the header when it has no
 * numeric cell and some column below is numeric, or when every row is text and its values are
 * unique and non-empty; failing both, the columns are named `column_1..column_n`.
 */
export function parseTable(text: string, opts: { delimiter?: Delimiter } = {}): ParsedTable {
  const { comments: commentLines, rest } = splitLeadingComments(text);
  const delimiter = opts.delimiter ?? detectDelimiter(text.slice(0, DETECT_SAMPLE_CHARS));
  const records = parseAll(rest, delimiter);
  const dataCols = mode(records.slice(0, HEADER_SAMPLE_ROWS).map((r) => r.length)).value;

  let header: string[] | undefined;
  let rows = records;
  let comments = commentLines.length;
  const last = commentLines.at(-1);
  if (last !== undefined && !last.startsWith("##")) {
    const fields = parseAll(last.slice(1).replace(/^[ \t]+/, ""), delimiter)[0] ?? [];
    if (fields.length === dataCols && dataCols > 0 && fields.every((f) => f.trim() !== "" && parseNumber(f) === undefined)) {
      header = fields;
      comments--;
    }
  }
  if (header === undefined && records.length > 0) {
    const first = records[0] as string[];
    const below = records.slice(1, HEADER_SAMPLE_ROWS + 1);
    const firstIsText = first.every((f) => parseNumber(f) === undefined);
    const width = below.reduce((w, r) => Math.max(w, r.length), first.length);
    const anyNumeric = columnTypes(below, width).includes("number");
    const unique = new Set(first.map((f) => f.trim())).size === first.length && first.every((f) => f.trim() !== "");
    if (firstIsText && (anyNumeric || unique)) {
      header = first;
      rows = records.slice(1);
    }
  }

  let nCols = header?.length ?? 0;
  for (const row of rows) if (row.length > nCols) nCols = row.length;
  const names: string[] = [];
  for (let c = 0; c < nCols; c++) {
    const name = header?.[c]?.trim() ?? "";
    names.push(name === "" ? `column_${c + 1}` : name);
  }
  for (const row of rows) while (row.length < nCols) row.push("");
  return { delimiter, header: names, headerDetected: header !== undefined, rows, comments };
}

const collator = new Intl.Collator("en", { numeric: true, sensitivity: "base" });

/**
 * Orders two cells for an ascending sort: missing cells (empty, `NA`, …) last; numbers
 * numerically (in a number column, text that is not a number after the numbers); text with a
 * case-insensitive natural order (`chr2` before `chr10`), ties broken by code units.
 */
export function compareCells(a: string, b: string, type: ColumnType): number {
  const ma = isMissing(a);
  const mb = isMissing(b);
  if (ma || mb) return ma === mb ? 0 : ma ? 1 : -1;
  if (type === "number") {
    const na = parseNumber(a);
    const nb = parseNumber(b);
    if (na !== undefined && nb !== undefined) return na < nb ? -1 : na > nb ? 1 : 0;
    if (na !== undefined) return -1;
    if (nb !== undefined) return 1;
  }
  return collator.compare(a, b) || (a < b ? -1 : a > b ? 1 : 0);
}

/**
 * A sorted copy of the rows by one column. Stable; missing cells stay last in both directions.
 */
export function sortRows<R extends readonly string[]>(rows: readonly R[], col: number, type: ColumnType, dir: SortDirection): R[] {
  const sign = dir === "desc" ? -1 : 1;
  const keyed = rows.map((row) => {
    const cell = row[col] ?? "";
    return { row, cell, missing: isMissing(cell), num: type === "number" ? parseNumber(cell) : undefined };
  });
  keyed.sort((x, y) => {
    if (x.missing || y.missing) return x.missing === y.missing ? 0 : x.missing ? 1 : -1;
    if (x.num !== undefined && y.num !== undefined) return sign * (x.num - y.num);
    return sign * compareCells(x.cell, y.cell, type);
  });
  return keyed.map((k) => k.row);
}

/** Splits a filter query into terms at blanks outside double quotes; the quotes are removed. */
function filterTerms(query: string): string[] {
  const terms: string[] = [];
  let current = "";
  let quoted = false;
  let started = false;
  for (const ch of query) {
    if (ch === "\"") { quoted = !quoted; started = true; } else if (!quoted && /\s/.test(ch)) {
      if (started) terms.push(current);
      current = "";
      started = false;
    } else { current += ch; started = true; }
  }
  if (started) terms.push(current);
  return terms.filter((t) => t !== "");
}

type RowTest = (row: readonly string[]) => boolean;

const TERM = /^(.+?)(<=|>=|!=|:|<|>|=)(.*)$/s;

/** One term's test: a column term when its left side names a column, a plain substring otherwise. */
function termTest(term: string, header: readonly string[]): RowTest {
  const m = TERM.exec(term);
  if (m) {
    const [, name = "", op = "", raw = ""] = m;
    const col = header.findIndex((h) => h.trim().toLowerCase() === name.trim().toLowerCase());
    const value = raw.trim();
    const lower = value.toLowerCase();
    const num = parseNumber(value);
    if (col >= 0) {
      switch (op) {
        case ":": return (row) => (row[col] ?? "").toLowerCase().includes(lower);
        case "=":
        case "!=": {
          const eq: RowTest = num !== undefined
            ? (row) => parseNumber(row[col] ?? "") === num || (row[col] ?? "").trim().toLowerCase() === lower
            : (row) => (row[col] ?? "").trim().toLowerCase() === lower;
          return op === "=" ? eq : (row) => !eq(row);
        }
        default: {
          if (num === undefined) break;
          const cmp = op === "<" ? (x: number) => x < num : op === "<=" ? (x: number) => x <= num
            : op === ">" ? (x: number) => x > num : (x: number) => x >= num;
          return (row) => {
            const x = parseNumber(row[col] ?? "");
            return x !== undefined && cmp(x);
          };
        }
      }
    }
  }
  const needle = term.toLowerCase();
  return (row) => row.some((cell) => cell.toLowerCase().includes(needle));
}

/**
 * Compiles a filter query into a row test. Terms are separated by blanks (double quotes group)
 * and must all match. A term is `column:value` (substring in that column), `column=value` /
 * `column!=value` (equal as a number or case-insensitively as text), `column<3`, `column<=0.05`,
 * `column>3`, `column>=3` (numeric; cells that are not numbers never match), where `column` is a
 * header name (case-insensitive); any other term is a case-insensitive substring of any cell.
 */
export function compileFilter(query: string, header: readonly string[] = []): RowTest {
  const tests = filterTerms(query).map((t) => termTest(t, header));
  return (row) => tests.every((test) => test(row));
}

/** The rows matching a filter query (see `compileFilter`); all rows for an empty query. */
export function filterRows<R extends readonly string[]>(rows: readonly R[], query: string, header: readonly string[] = []): R[] {
  const test = compileFilter(query, header);
  return rows.filter(test);
}
