/**
 * The assistant tool registry: every tool an external agent (MCP) or Operon's own agent may
 * call, defined once (assistant/registry.ts says what a tool is). 16 coarse tools: clients
 * cap how many they show a model.
 */
import { pipelineTools } from "./tools-pipelines.js";
import { fileTools } from "./tools-files.js";
import { computeTools } from "./tools-compute.js";
import type { AssistantTool } from "./registry.js";

export const ASSISTANT_TOOLS: readonly AssistantTool[] = [...fileTools, ...pipelineTools, ...computeTools];
export { callTool, jsonSchemaOf, toolsFor, type AssistantDeps, type AssistantTool, type ToolContext, type ToolOutcome } from "./registry.js";
