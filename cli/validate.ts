/**
 * `operon validate FILE [--json]` (also `operon pipelines validate FILE`, cli/pipelines.ts):
 * checks a pipeline spec file with exactly the checks a run applies. Exit 0 when valid, 1
 * when invalid, 2 when the file cannot be read or parsed.
 */
import { open } from "node:fs/promises";
import { Command } from "commander";
import { MAX_SPEC_BYTES } from "../core/spec/schema.js";
import { validateSpec } from "../core/spec/validate.js";
import type { Issue, ValidationResult } from "../core/issues.js";
import type { CliIO, Ctx } from "./program.js";
import { messageOf } from "../core/errors.js";

export type { CliIO } from "./program.js";

/** Reads at most MAX_SPEC_BYTES (+1 to detect larger files) and parses JSON. */
export async function readSpecFile(path: string): Promise<{ ok: true; spec: unknown } | { ok: false; message: string }> {
  let text: string;
  try {
    const fh = await open(path, "r");
    try {
      const st = await fh.stat();
      if (!st.isFile()) return { ok: false, message: `${path}: not a regular file` };
      if (st.size > MAX_SPEC_BYTES) return { ok: false, message: `${path}: ${st.size} bytes; spec files larger than 1 MB (${MAX_SPEC_BYTES} bytes) are not read` };
      const buf = Buffer.alloc(MAX_SPEC_BYTES + 1);
      const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
      if (bytesRead > MAX_SPEC_BYTES) return { ok: false, message: `${path}: spec files larger than 1 MB (${MAX_SPEC_BYTES} bytes) are not read` };
      text = buf.subarray(0, bytesRead).toString("utf8");
    } finally {
      await fh.close();
    }
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return { ok: false, message: `${path}: cannot read (${code === "ENOENT" ? "no such file" : code === "EACCES" ? "permission denied" : code ?? String(e)})` };
  }
  try {
    return { ok: true, spec: JSON.parse(text.replace(/^\uFEFF/, "")) };
  } catch (e) {
    return { ok: false, message: `${path}: not valid JSON (${messageOf(e)})` };
  }
}

/** The `validate` command's definition; its action leaves the exit code in `ctx.code`. */
export function validateCli(ctx: Ctx): Command {
  return new Command("validate")
    .summary("Check a pipeline spec file (exit 0 valid, 1 invalid, 2 unreadable)")
    .description("Check a pipeline spec file with exactly the checks a run applies; print its errors and warnings. The same as operon pipelines validate FILE.")
    .argument("<FILE>", "the pipeline spec, JSON, at most 1 MB")
    .option("--json", "print the result as JSON: {valid, errors, warnings}")
    .addHelpText("after", `
Exit codes: 0 valid (warnings allowed), 1 invalid, 2 unreadable file or usage error.

Example:
  operon validate my-pipeline.json --json`)
    .action(async (file: string, opts: { json?: boolean }) => { ctx.code = await validateCommand(file, opts.json === true, ctx.io); });
}

/** Checks `file` and prints the result; the exit code. `name` is the command, for messages. */
export async function validateCommand(file: string | undefined, json: boolean, io: CliIO, name = "operon validate"): Promise<number> {
  if (!file) { io.err(`${name}: missing argument FILE (see ${name} --help)`); return 2; }
  const read = await readSpecFile(file);
  if (!read.ok) { io.err(`${name}: ${read.message}`); return 2; }
  return printValidation(file, validateSpec(read.spec), json, io);
}

/** Prints a validation result (as JSON, or a summary line and one line per issue); 0 valid, 1 invalid. */
export function printValidation(file: string, result: ValidationResult, json: boolean, io: CliIO): number {
  if (json) {
    io.out(JSON.stringify(result, null, 2));
  } else {
    const line = (kind: string, i: Issue) => `  ${kind} ${i.path || "/"}: ${i.message} [${i.code}]`;
    io.out(`${file}: ${result.valid ? "valid" : "invalid"} (${result.errors.length} error${result.errors.length === 1 ? "" : "s"}, ${result.warnings.length} warning${result.warnings.length === 1 ? "" : "s"})`);
    for (const e of result.errors) io.out(line("error  ", e));
    for (const w of result.warnings) io.out(line("warning", w));
  }
  return result.valid ? 0 : 1;
}
