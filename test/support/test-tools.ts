/**
 * Two tools only tests register: `sleep` (a step that takes a known time) and `ls` (a step
 * that fails on a missing path), beside the built-in catalogue.
 */
import { z } from "zod";
import { BUILTIN_TOOLS, createCatalogue, type ToolDefinition } from "../../core/tools/index.js";

export const sleepTool: ToolDefinition = {
  id: "sleep", description: "Sleeps (test tool)", version: "1", image: "busybox:1.36", localExecutables: ["sleep"], fileParams: [], defaultCommand: "sleep",
  inputSchema: z.strictObject({ command: z.literal("sleep").optional(), seconds: z.union([z.number(), z.string()]) }),
  commands: { sleep: { description: "sleep", required: ["seconds"], build: (p) => ({ argv: ["sleep", String(p.seconds)], inputs: [], outputs: [], mkdirs: [] }) } },
};

export const lsTool: ToolDefinition = {
  id: "ls", description: "Lists a path (test tool; fails on a missing one)", version: "1", image: "busybox:1.36", localExecutables: ["ls"], fileParams: [], defaultCommand: "ls",
  inputSchema: z.strictObject({ command: z.literal("ls").optional(), path: z.string() }),
  commands: { ls: { description: "ls", required: ["path"], build: (p) => ({ argv: ["ls", String(p.path)], inputs: [], outputs: [], mkdirs: [] }) } },
};

/** The built-in catalogue plus `sleep` and `ls`. */
export const testCatalogue = () => createCatalogue([...BUILTIN_TOOLS, sleepTool, lsTool]);
