/**
 * With data.filter_overlong_prompts off, a prompt over data.max_prompt_length stops the run (exit 2). It is found
 * here, before the output file exists, like every other input error: a run that stopped on row 900 used to leave a
 * partial --out file behind, which then blocked the corrected re-run. Rows run by an OpenAI-API agent are not
 * checked: the agent's own first request is its prompt, and the gateway refuses one that is too long.
 */
import { InputError } from "../errors.js";
import type { ChatModel, ToolSchema } from "../chat/index.js";
import type { AgentSection } from "./config.js";
import { readPrompts, sampleOf } from "./sample.js";

export async function checkPromptLengths(options: {
  dataPath: string;
  limit: number | null | undefined;
  model: ChatModel;
  toolSchemas: readonly ToolSchema[];
  maxPromptLength: number;
  agent: AgentSection;
}): Promise<void> {
  const { model, maxPromptLength } = options;
  const gatewayLoops = new Set(Object.entries(options.agent.agent_loops).filter(([, loop]) => typeof loop !== "string").map(([name]) => name));
  for await (const prompt of readPrompts(options.dataPath, options.limit)) {
    if (gatewayLoops.has(prompt.row.agent_name ?? options.agent.default_agent_loop)) continue;
    const length = model.renderTokens(sampleOf(prompt, 0).messages, { tools: options.toolSchemas, addGenerationPrompt: true }).ids.length;
    if (length > maxPromptLength) {
      throw new InputError(`${options.dataPath}: row ${prompt.dataIndex}: the rendered prompt has ${length} tokens, over data.max_prompt_length=${maxPromptLength}`, {
        hint: "raise data.max_prompt_length, or set data.filter_overlong_prompts: true to skip such rows",
      });
    }
  }
}
