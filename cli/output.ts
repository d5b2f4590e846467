/**
 * What the resource commands (runs, pipelines, files, tools, viewer, render) share besides
 * the HTTP client: their common options, tables for people, and `name=value` arguments.
 */
import { InvalidArgumentError, type Command } from "commander";
import { UsageError } from "./program.js";
import { withConnection } from "./client.js";

/** The workspace a command acts in when --workspace is not given. */
export const DEFAULT_WORKSPACE = "default";

export interface CommonOptions { workspace?: string; json?: boolean; url?: string; key?: string }

/**
 * The options every API command ends with: `--workspace` (default "default"; or, for a run's
 * commands, none: the run's own; or no option at all), --json, --url, --key.
 */
export function withCommon(cmd: Command, opts: { workspace?: "default" | "the run's" | false; json: string }): Command {
  if (opts.workspace === "default" || opts.workspace === undefined) cmd.option("--workspace <id>", "the workspace", DEFAULT_WORKSPACE);
  else if (opts.workspace === "the run's") cmd.option("--workspace <id>", "the run's workspace (default: found from the run id)");
  cmd.option("--json", opts.json);
  return withConnection(cmd);
}

/** Lines of a table: columns padded to their widest cell, the last one not padded. */
export function table(headers: string[], rows: string[][]): string[] {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join("  ").trimEnd();
  return [line(headers), ...rows.map(line)];
}

export { humanSize } from "../core/sizes.js";

/** `2026-11-27T19:54:29.123Z` → `2026-11-27 19:54:29`; null → `-`. */
export function shortTime(iso: string | null | undefined): string {
  return iso ? iso.replace("T", " ").replace(/(\.\d+)?Z$/, "") : "-";
}

/** The first non-empty line of a message, at most `max` characters. */
export function firstLine(s: string | null | undefined, max = 120): string {
  if (!s) return "";
  const l = s.split("\n").find((x) => x.trim()) ?? "";
  return l.length > max ? `${l.slice(0, max - 1)}…` : l;
}

/** Collects a repeatable option's values. */
export const repeatable = (v: string, prev: string[] | undefined): string[] => [...(prev ?? []), v];

/** A positive integer option value, at most `max`. */
export function positiveInt(max: number): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (!/^\d+$/.test(v) || n < 1 || n > max) throw new InvalidArgumentError(`expected an integer from 1 to ${max}`);
    return n;
  };
}

/**
 * `name=value` arguments of `option` as an object. A value that is JSON (a number, true,
 * false, null, a list, an object, a quoted string) is sent as that; anything else as the
 * string it is: `threads=4` is 4, `title=Treated` is "Treated", `title='"2024"'` is "2024".
 */
export function parseValues(option: string, pairs: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const p of pairs) {
    const i = p.indexOf("=");
    if (i <= 0) throw new UsageError(`${option} ${JSON.stringify(p)}: expected NAME=VALUE`);
    const k = p.slice(0, i);
    if (Object.hasOwn(out, k)) throw new UsageError(`${option} ${k} given twice`);
    const raw = p.slice(i + 1);
    let v: unknown = raw;
    try { v = JSON.parse(raw); } catch { /* not JSON: the string itself */ }
    out[k] = v;
  }
  return out;
}

/** JSON for --json output. */
export const json = (v: unknown) => JSON.stringify(v, null, 2);
