/**
 * Finding a table's columns: the one an option names, else the first of the common names a
 * tool writes (DESeq2's `log2FoldChange`, PLINK's `BP`, …). A renderer reads its cells by
 * these indices; a name that is not there is the user's mistake and says so.
 */
import { ChartError } from "../chart.js";

/**
 * The index of a column: the one an option names (exactly, then case-insensitively), else
 * the first of the common names present. A name that is not there is the user's mistake:
 * the message names the option and lists the file's columns.
 */
export function findColumn(header: readonly string[], requested: string | undefined, candidates: readonly string[], option: string, what: string): number {
  const list = () => header.map((h) => JSON.stringify(h)).join(", ");
  if (requested !== undefined) {
    let i = header.indexOf(requested);
    if (i < 0) i = header.findIndex((h) => h.toLowerCase() === requested.toLowerCase());
    if (i < 0) throw new ChartError(`column "${requested}" (option ${option}) is not in the file; its columns are: ${list()}`);
    return i;
  }
  for (const c of candidates) { const i = header.indexOf(c); if (i >= 0) return i; }
  for (const c of candidates) { const i = header.findIndex((h) => h.toLowerCase() === c.toLowerCase()); if (i >= 0) return i; }
  throw new ChartError(`no ${what} column found (looked for ${candidates.join(", ")}); name it with option ${option}; the file's columns are: ${list()}`);
}

/** The first common name present (exactly, then case-insensitively), or undefined. */
export function optionalColumn(header: readonly string[], candidates: readonly string[]): number | undefined {
  for (const c of candidates) { const i = header.indexOf(c); if (i >= 0) return i; }
  for (const c of candidates) { const i = header.findIndex((h) => h.toLowerCase() === c.toLowerCase()); if (i >= 0) return i; }
  return undefined;
}
