/**
 * `operon pipelines ls|show|validate`: the pipeline definitions through the HTTP API
 * (GET /v1/pipeline-definitions[/{id}]; docs/api.md), and spec validation: a local FILE is
 * checked here with exactly the checks a run applies (the `validate` command, kept as an
 * alias), a spec file in the workspace (--spec-file) by the server (POST /v1/pipelines/validate).
 */
import { Command } from "commander";
import type { Ctx } from "./program.js";
import { UsageError } from "./program.js";
import { apiAction, apiPath, clientOf, query, type Page } from "./client.js";
import { json, withCommon, table, type CommonOptions } from "./output.js";
import { printValidation, validateCommand } from "./validate.js";
import type { ValidationResult } from "../core/issues.js";

interface DefinitionView {
  id: string | null; name: string | null; description: string | null; category: string | null; tags: string[]; estimated_duration: string | null;
  origin: "builtin" | "workspace"; spec_file?: string;
  inputs: Array<{ name: string; type: string; description: string | null; default: string | null; options: string[] | null; required: boolean }>;
  steps: Array<{ step_id: string; tool: string; depends_on: string[]; description: string | null }>;
}

export function pipelinesCli(ctx: Ctx): Command {
  const pipelines = new Command("pipelines").summary("List and show pipeline definitions; validate specs")
    .description("The built-in pipelines and a workspace's saved specs through the HTTP API, and spec validation.");

  const ls = withCommon(new Command("ls").description("List the built-in pipelines, then the workspace's saved specs (id, origin, steps, name)")
    .addHelpText("after", "\nExample:\n  operon pipelines ls --json"), { json: "print the API's answer as JSON: {data: [definition], has_more, next_cursor}" });
  ls.action(apiAction(ls, ctx, async (opts: CommonOptions) => {
    const page = await clientOf(ctx, opts).json<Page<DefinitionView>>("GET", "/v1/pipeline-definitions" + query({ workspace_id: opts.workspace }));
    if (opts.json) { ctx.io.out(json(page)); return 0; }
    for (const l of table(["ID", "ORIGIN", "STEPS", "NAME"], page.data.map((d) => [d.id ?? d.spec_file ?? "-", d.origin, String(d.steps.length), d.name ?? ""]))) ctx.io.out(l);
    return 0;
  }));

  const show = withCommon(new Command("show").description("Show a built-in pipeline: its inputs and steps")
    .argument("<ID>", "the pipeline id, as pipelines ls lists it (e.g. bwa-align)")
    .addHelpText("after", "\nExample:\n  operon pipelines show bwa-align"), { workspace: false, json: "print the API's definition, with its spec, as JSON" });
  show.action(apiAction(show, ctx, async (id: string, opts: CommonOptions) => {
    const d = await clientOf(ctx, opts).data<DefinitionView>("GET", apiPath`/v1/pipeline-definitions/${id}`);
    if (opts.json) { ctx.io.out(json(d)); return 0; }
    ctx.io.out(`${d.id ?? id}: ${d.name ?? ""}`);
    if (d.description) ctx.io.out(d.description);
    const facts = [d.category ? `category ${d.category}` : "", d.tags.length ? `tags ${d.tags.join(", ")}` : "", d.estimated_duration ? `about ${d.estimated_duration}` : ""].filter(Boolean);
    if (facts.length) ctx.io.out(facts.join("; "));
    ctx.io.out("");
    ctx.io.out("Inputs (operon run … --input NAME=VALUE):");
    for (const l of table(["NAME", "TYPE", "REQUIRED", "DEFAULT", "DESCRIPTION"], d.inputs.map((i) => [i.name, i.options ? `${i.type} (${i.options.join("|")})` : i.type, i.required ? "yes" : "no", i.default ?? "-", i.description ?? ""]))) ctx.io.out(`  ${l}`);
    ctx.io.out("");
    ctx.io.out("Steps:");
    for (const l of table(["STEP", "TOOL", "AFTER", "DESCRIPTION"], d.steps.map((s) => [s.step_id, s.tool, s.depends_on.join(",") || "-", s.description ?? ""]))) ctx.io.out(`  ${l}`);
    return 0;
  }));

  const validate = withCommon(new Command("validate").description("Check a pipeline spec: a local FILE here with exactly the checks a run applies (as operon validate), or a spec file in the workspace (--spec-file) by the server")
    .argument("[FILE]", "a pipeline spec on this machine, JSON, at most 1 MB")
    .option("--spec-file <path>", "instead of FILE: a spec file's path in the workspace, checked by the server")
    .addHelpText("after", "\nExit codes: 0 valid (warnings allowed), 1 invalid or refused by the API (no such spec file),\n2 unreadable file, usage error or server unreachable.\n\nExamples:\n  operon pipelines validate my-pipeline.json\n  operon pipelines validate --spec-file pipelines/specs/my-alignment.pipeline.json --json"), { json: "print the result as JSON: {valid, errors, warnings}" });
  validate.action(apiAction(validate, ctx, async (file: string | undefined, opts: CommonOptions & { specFile?: string }) => {
    if ((file === undefined) === (opts.specFile === undefined)) throw new UsageError("give exactly one of FILE or --spec-file");
    if (file !== undefined) return validateCommand(file, opts.json === true, ctx.io, "operon pipelines validate");
    const result = await clientOf(ctx, opts).data<ValidationResult>("POST", "/v1/pipelines/validate", { body: { workspace_id: opts.workspace, spec_file: opts.specFile } });
    return printValidation(`${opts.workspace}:${opts.specFile ?? ""}`, result, opts.json === true, ctx.io);
  }));

  for (const c of [ls, show, validate]) pipelines.addCommand(c);
  return pipelines;
}
