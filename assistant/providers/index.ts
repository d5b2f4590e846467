/** The configured provider (OPERON_LLM_PROVIDER) from its settings; one place that knows both. */
import { createAnthropicProvider } from "./anthropic.js";
import { createOpenAIProvider } from "./openai.js";
import type { LlmProvider, LlmSettings } from "./types.js";

export function createProvider(settings: LlmSettings): LlmProvider {
  return settings.provider === "anthropic" ? createAnthropicProvider(settings) : createOpenAIProvider(settings);
}

export * from "./types.js";
