/**
 * The CLI's conventions on top of commander, shared by every command and subcommand:
 * - all output goes through the caller's `io` (help and --version to `io.out`), nothing calls
 *   process.exit (commander's exitOverride turns its exits into exceptions handled here);
 * - usage errors (unknown command or option, missing or bad option or argument) print one line
 *   on stderr, `operon <command>: <problem> (see operon <command> --help)`, and exit 2;
 * - an error thrown by an action prints `operon <command>: <message>` and exits 2 (actions
 *   return their own exit codes for everything they handle themselves);
 * - help marks required options `(required)` and shows them in the usage line.
 */
import { Help, type Command, type CommanderError, type Option } from "commander";
import { messageOf } from "../core/errors.js";

export interface CliIO { out(s: string): void; err(s: string): void }

/**
 * What an action needs: the output, the environment, and where it leaves its exit code;
 * `fetch` replaces the global fetch for the commands that call the API (tests use it).
 */
export interface Ctx<IO extends CliIO = CliIO> { io: IO; env: NodeJS.ProcessEnv; code: number; fetch?: typeof fetch }

/** A usage problem an action finds after parsing (a bad value): exit 2, one line with the --help hint. */
export class UsageError extends Error {}

/** Help text is laid out for this width whatever the terminal, so docs/cli.md can hold it verbatim. */
export const HELP_WIDTH = 100;

/** `operon keys create` for the `create` subcommand of `keys` (a command parsed on its own gets the `operon` prefix too). */
export function commandPath(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  if (names[0] !== "operon") names.unshift("operon");
  return names.join(" ");
}

const usageHooks = new WeakMap<Command, (problem: string) => Promise<void>>();

/** Runs `hook` (after the stderr line) when `cmd` stops on a usage error; stage-in/out write their termination log with it. */
export function onUsageError(cmd: Command, hook: (problem: string) => Promise<void>): Command {
  usageHooks.set(cmd, hook);
  return cmd;
}

/** An `<a,b,c>` option value as a list (trimmed, empty items dropped). */
export function commaList(value: string): string[] {
  return value.split(",").map((s) => s.trim()).filter(Boolean);
}

/** Help whose option lists mark required options and whose usage lines show them. */
class OperonHelp extends Help {
  override optionDescription(option: Option): string {
    const d = super.optionDescription(option);
    return option.mandatory ? `${d} (required)` : d;
  }

  override commandUsage(cmd: Command): string {
    return `${commandPath(cmd)} ${cmd.usage()}`;
  }

  /** `run <SPEC_OR_PIPELINE_ID>`, `keys <command>`: the name and what must follow it (options are in its own help). */
  override subcommandTerm(cmd: Command): string {
    const args = cmd.registeredArguments.map((a) => (a.required ? `<${a.name()}>` : `[${a.name()}]`));
    return [cmd.name(), ...(cmd.commands.length ? ["<command>"] : []), ...args].join(" ");
  }
}

/** `<FILE> --org <org> [options]`: the arguments, then the required options, then the rest. */
function usageOf(cmd: Command): string {
  if (cmd.commands.length > 0) return "<command> [options]";
  const args = cmd.registeredArguments.map((a) => (a.required ? `<${a.name()}>` : `[${a.name()}]`) + (a.variadic ? "..." : ""));
  const required = cmd.options.filter((o) => o.mandatory).map((o) => o.flags.replace(/^-\w, /, ""));
  return [...args, ...required, "[options]"].join(" ");
}

class Exit extends Error {
  constructor(readonly cmd: Command, readonly error: CommanderError) { super(error.message); }
}

interface ParseState { errHelp: boolean; active: Command | undefined }

/** Applies the conventions to `cmd` and every subcommand (addCommand does not copy settings). */
function configure(cmd: Command, io: CliIO, state: ParseState): void {
  cmd.createHelp = () => Object.assign(new OperonHelp(), cmd.configureHelp());
  cmd.exitOverride((error) => { throw new Exit(cmd, error); });
  cmd.configureOutput({
    writeOut: (s) => io.out(s.replace(/\n$/, "")),
    // Only commander's help-on-error reaches writeErr (outputError is silenced): replaced by one line in parseCli.
    writeErr: () => { state.errHelp = true; },
    outputError: () => undefined,
    getOutHelpWidth: () => HELP_WIDTH,
    getErrHelpWidth: () => HELP_WIDTH,
    getOutHasColors: () => false,
    getErrHasColors: () => false,
  });
  cmd.helpOption("-h, --help", "show this help");
  if (cmd.commands.length > 0) cmd.helpCommand("help [command]", "show help for a command");
  cmd.showSuggestionAfterError(true);
  cmd.usage(usageOf(cmd));
  for (const sub of cmd.commands) configure(sub, io, state);
}

/** One line naming what is wrong, from a commander error raised by `cmd`. */
function problemOf(cmd: Command, error: CommanderError): string {
  const message = error.message.replace(/^error: /, "");
  const didYouMean = /\n\(Did you mean (.+)\?\)$/.exec(message);
  const suggestion = didYouMean ? ` (did you mean ${didYouMean[1]}?)` : "";
  const quoted = /'([^']*)'/.exec(message)?.[1];
  switch (error.code) {
    case "commander.unknownCommand": return `unknown command "${quoted ?? cmd.args[0] ?? ""}"${suggestion}`;
    case "commander.unknownOption": return `unknown option "${quoted ?? ""}"${suggestion}`;
    case "commander.missingMandatoryOptionValue": {
      const option = cmd.options.find((o) => o.mandatory && cmd.getOptionValue(o.attributeName()) === undefined);
      return `${option?.long ?? quoted ?? "an option"} is required`;
    }
    case "commander.missingArgument": return `missing argument ${quoted ?? ""}`.trimEnd();
    case "commander.optionMissingArgument": return `${quoted?.split(/[ ,]/).find((f) => f.startsWith("--")) ?? quoted ?? "an option"} needs a value`;
    case "commander.excessArguments": {
      const extra = cmd.args.slice(cmd.registeredArguments.length);
      return `unexpected argument${extra.length === 1 ? "" : "s"} ${extra.map((a) => JSON.stringify(a)).join(" ")}`;
    }
    case "commander.invalidArgument": {
      const option = /^option '(\S+)[^']*' argument '(.*)' is invalid\. (.*)$/s.exec(message);
      if (option) return `${option[1]} ${JSON.stringify(option[2])}: ${option[3]}`;
      const argument = /^command-argument value '(.*)' is invalid for argument '(.*)'\. (.*)$/s.exec(message);
      if (argument) return `${argument[2]} ${JSON.stringify(argument[1])}: ${argument[3]}`;
      return message.replace(/\s*\n\s*/g, " ");
    }
    default: return message.replace(/\s*\n\s*/g, " ");
  }
}

/** `operon keys` alone: which subcommands there are. */
function missingCommand(cmd: Command): string {
  const names = cmd.commands.map((c) => c.name());
  const [helpWord, wanted] = cmd.args;
  if (helpWord === "help" && wanted !== undefined && !names.includes(wanted)) return `unknown command "${wanted}"`;
  return `missing command: one of ${names.join(", ")}`;
}

async function usageError(cmd: Command, problem: string, io: CliIO): Promise<number> {
  const path = commandPath(cmd);
  io.err(`${path}: ${problem} (see ${path} --help)`);
  await usageHooks.get(cmd)?.(problem);
  return 2;
}

/**
 * Parses `args` (the words after `operon`, or after the command when `program` is a single
 * command) and runs the chosen action. Returns the exit code: the action's (`ctx.code`), 0 for
 * help and --version, 2 for usage errors and errors thrown by the action.
 */
export async function parseCli(program: Command, args: readonly string[], ctx: Ctx): Promise<number> {
  const state: ParseState = { errHelp: false, active: undefined };
  configure(program, ctx.io, state);
  program.hook("preAction", (_root, action) => { state.active = action; });
  try {
    await program.parseAsync([...args], { from: "user" });
    return ctx.code;
  } catch (e) {
    if (e instanceof Exit) {
      switch (e.error.code) {
        case "commander.helpDisplayed":
        case "commander.version":
          return 0;
        case "commander.help":
          return state.errHelp ? usageError(e.cmd, missingCommand(e.cmd), ctx.io) : 0;
        default:
          return usageError(e.cmd, problemOf(e.cmd, e.error), ctx.io);
      }
    }
    const cmd = state.active ?? program;
    const message = messageOf(e).replace(/\s*\n\s*/g, " ");
    if (e instanceof UsageError) return usageError(cmd, message, ctx.io);
    ctx.io.err(`${commandPath(cmd)}: ${message}`);
    return 2;
  }
}
