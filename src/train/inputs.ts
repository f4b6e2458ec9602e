/**
 * Inputs before outputs: `agentrl train` reads its prompts and loads the model's tokenizer and template, the parser,
 * tools, interactions, reward module and agent loops first, so a missing, empty or wrong-schema dataset (or a row's
 * unknown agent_name), a bad model folder, tool or interaction config, reward module or agent loop module fails here, naming the file, before the run folder is made and before the
 * engine and the worker spend seconds starting.
 */
import { customChatTemplate } from "../chat/index.js";
import { InputError } from "../errors.js";
import { readPrompts, type Prompt } from "../rollout/sample.js";
import { loadRolloutParts, type RolloutParts } from "../rollout/setup.js";
import { agentLoopNames, checkAgentName } from "../rollout/agent-loops.js";
import { asList, type TrainConfig } from "./config.js";

export interface TrainInputs {
  trainPrompts: Prompt[];
  valPrompts: Prompt[];
  /** Closed by the command when the run ends. */
  parts: RolloutParts;
}

export async function loadTrainInputs(config: TrainConfig, configFile: string | undefined): Promise<TrainInputs> {
  if (config.trainer.val_only && asList(config.data.val_files).length === 0) {
    throw new InputError(`${configFile}: trainer.val_only needs data.val_files (the prompts to validate on)`, {
      hint: "set data.val_files, e.g. --set data.val_files=data/test.parquet",
    });
  }
  const overlong = config.reward_model.overlong_buffer;
  if (overlong.enable && overlong.len > config.data.max_response_length) {
    throw new InputError(`${configFile}: reward_model.overlong_buffer.len (${overlong.len}) is over data.max_response_length (${config.data.max_response_length})`, {
      hint: "the penalty starts len tokens before the response budget: len must fit inside it",
    });
  }
  // Each row's agent_name must name a registered agent loop (docs/agent-loops.md).
  const loopNames = await agentLoopNames(config.actor_rollout_ref.rollout.agent);
  const trainPrompts = await loadAll(asList(config.data.train_files), null, loopNames);
  const valPrompts = await loadAll(asList(config.data.val_files), config.data.val_max_samples, loopNames);
  const parts = await loadRolloutParts({
    modelPath: config.actor_rollout_ref.model.path,
    rollout: config.actor_rollout_ref.rollout,
    rewardModulePath: config.custom_reward_function.path,
    rewardName: config.custom_reward_function.name,
    rewardKwargs: config.custom_reward_function.reward_kwargs,
    overlongBuffer: config.reward_model.overlong_buffer,
    rewardPython: config.custom_reward_function.python,
    templateKwargs: config.data.apply_chat_template_kwargs,
    chatTemplate: await customChatTemplate(config.actor_rollout_ref.model, "actor_rollout_ref.model"),
  });
  return { trainPrompts, valPrompts, parts };
}

async function loadAll(files: string[], limit: number | null, loopNames: readonly string[]): Promise<Prompt[]> {
  const prompts: Prompt[] = [];
  for (const file of files) {
    for await (const prompt of readPrompts(file)) {
      if (limit !== null && prompts.length >= limit) return prompts;
      checkAgentName(prompt.row.agent_name, loopNames, `${file}: row ${prompt.dataIndex}`);
      // Indices run on across files, so every prompt of the run has its own data_index.
      prompts.push({ ...prompt, dataIndex: prompts.length });
    }
  }
  return prompts;
}
