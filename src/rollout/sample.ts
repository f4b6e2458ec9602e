/**
 * What one trajectory starts from: a dataset row in verl's schema, plus which of the n samples it is. Reading
 * validates each row with zod and names the file and row on error.
 */
import { InputError } from "../errors.js";
import { streamParquetRows } from "../data/parquet.js";
import { formatIssues, verlRowSchema, type VerlRow } from "../data/verl-rows.js";
import type { ChatMessage } from "../chat/index.js";

export interface Sample {
  dataIndex: number;
  sampleIndex: number;
  /** Shared by the n samples of one prompt. */
  groupId: string;
  dataSource: string;
  messages: ChatMessage[];
  /** reward_model.ground_truth as text. */
  groundTruth: string;
  toolsKwargs: Record<string, unknown>;
  interactionKwargs: Record<string, unknown>;
  extraInfo: Record<string, unknown>;
}

export interface Prompt {
  dataIndex: number;
  row: VerlRow;
  /** GRPO group of this prompt's samples; defaults to the row index (training gives each use of a row its own). */
  groupId?: string;
}

/** Streams the validated rows of a dataset parquet, the first `limit` only when given. */
export async function* readPrompts(file: string, limit?: number | null): AsyncGenerator<Prompt> {
  let count = 0;
  for await (const { index, row } of streamParquetRows(file)) {
    if (limit != null && count >= limit) return;
    const parsed = verlRowSchema.safeParse(row);
    if (!parsed.success) {
      throw new InputError(`${file}: row ${index}: ${formatIssues(parsed.error)}`, {
        hint: "rows need verl's schema: data_source, prompt (list of {role, content}), reward_model.ground_truth; see `agentrl preprocess`",
      });
    }
    count += 1;
    yield { dataIndex: index, row: parsed.data };
  }
}

function groundTruthText(value: unknown): string {
  if (value === null || value === undefined) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** The sample for the `sampleIndex`-th rollout of a prompt. */
export function sampleOf(prompt: Prompt, sampleIndex: number): Sample {
  const { row } = prompt;
  const extraInfo = (row.extra_info ?? {}) as Record<string, unknown>;
  return {
    dataIndex: prompt.dataIndex,
    sampleIndex,
    groupId: prompt.groupId ?? String(prompt.dataIndex),
    dataSource: row.data_source,
    messages: row.prompt.map((m) => ({ ...m, content: m.content ?? "" })) as ChatMessage[],
    groundTruth: groundTruthText(row.reward_model?.ground_truth),
    toolsKwargs: (row.extra_info?.tools_kwargs ?? {}) as Record<string, unknown>,
    interactionKwargs: (row.extra_info?.interaction_kwargs ?? {}) as Record<string, unknown>,
    extraInfo,
  };
}
