/**
 * `agentrl sft` reads and tokenizes every conversation before anything starts, so bad data fails in a second, naming
 * the row, and a data set with nothing left to train on (or to validate on, when val_files are given) fails too.
 */
import { InputError } from "../errors.js";
import { customChatTemplate, loadChatModel } from "../chat/index.js";
import { asList } from "../train/config.js";
import type { SftConfig } from "./config.js";
import { loadExamples, type ExampleCounts, type LoadedExamples } from "./examples.js";

export interface SftInputs {
  train: LoadedExamples;
  val: LoadedExamples;
  /** Pads the batch files: the model's first end-of-sequence token. */
  padTokenId: number;
}

export async function loadSftInputs(config: SftConfig): Promise<SftInputs> {
  const model = await loadChatModel(config.model.partial_pretrain, {
    templateKwargs: config.data.apply_chat_template_kwargs,
    chatTemplate: await customChatTemplate(config.model, "model"),
  });
  const trainFiles = asList(config.data.train_files);
  const train = await loadExamples(model, trainFiles, config);
  const val = await loadExamples(model, asList(config.data.val_files), config);
  if (train.examples.length === 0) {
    throw new InputError(`${trainFiles.join(", ")}: no conversation to train on (${describeCounts(train.counts)})`, {
      hint: "check data.train_files, data.min_reward and data.max_length",
    });
  }
  const valFiles = asList(config.data.val_files);
  if (valFiles.length > 0 && val.examples.length === 0) {
    // Validation on nothing would log no val/loss and still look like a validated run.
    throw new InputError(`${valFiles.join(", ")}: no conversation to validate on (${describeCounts(val.counts)})`, {
      hint: "check data.val_files, data.min_reward and data.max_length, or leave data.val_files unset",
    });
  }
  return { train, val, padTokenId: model.eosTokenIds[0] ?? 0 };
}

export function describeCounts(counts: ExampleCounts): string {
  const parts = [`${counts.kept} of ${counts.rows} rows kept`];
  if (counts.truncated) parts.push(`${counts.truncated} truncated to data.max_length`);
  if (counts.dropped) parts.push(`${counts.dropped} dropped (over data.max_length)`);
  if (counts.filtered) parts.push(`${counts.filtered} trajectories filtered (not completed or under data.min_reward)`);
  if (counts.empty) parts.push(`${counts.empty} without an assistant token`);
  return parts.join(", ");
}

/** What the run's log shows about its data: rows kept, cut and dropped, for training and validation. */
export function describeData(config: SftConfig, inputs: SftInputs): { train: string; val: string } {
  return { train: describeCounts(inputs.train.counts), val: config.data.val_files === null ? "none" : describeCounts(inputs.val.counts) };
}
