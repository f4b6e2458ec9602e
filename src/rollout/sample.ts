/**
 * What one trajectory starts from: a dataset row in verl's schema, plus which of the n samples it is. Reading
 * validates each row with zod and names the file and row on error.
 */
import { InputError } from "../errors.js";
import { streamParquetRows } from "../data/parquet.js";
import { verlRowSchema, type VerlRow } from "../data/verl-rows.js";
import { formatIssues } from "../zod-issues.js";
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
  /** verl's agent_name column: the agent loop that runs this sample; absent or null = agent.default_agent_loop. */
  agentName?: string | null;
}

export interface Prompt {
  dataIndex: number;
  row: VerlRow;
  /** GRPO group of this prompt's samples; defaults to the row index (training gives each use of a row its own). */
  groupId?: string;
}

const VERL_SCHEMA_HINT =
  "rows need verl's schema: data_source, prompt (list of {role, content}), reward_model.ground_truth; see `agentrl preprocess`";

/**
 * Streams the validated rows of a dataset parquet, the first `limit` only when given. A file without rows is an
 * error: a run on it would do nothing and still look like a success.
 */
export async function* readPrompts(file: string, limit?: number | null): AsyncGenerator<Prompt> {
  let count = 0;
  for await (const { index, row } of streamParquetRows(file)) {
    if (limit != null && count >= limit) return;
    const parsed = verlRowSchema.safeParse(row);
    if (!parsed.success) {
      throw new InputError(`${file}: row ${index}: ${formatIssues(parsed.error)}`, { hint: VERL_SCHEMA_HINT });
    }
    count += 1;
    yield { dataIndex: index, row: parsed.data };
  }
  if (count === 0) {
    throw new InputError(`${file}: the dataset has no rows`, { hint: "give a dataset with at least one prompt (`agentrl preprocess` writes them)" });
  }
}

/**
 * Reads and validates every row a run will use (the first `limit`) and counts them, without keeping them. Commands
 * call it before they create any output, so a missing, empty or wrong-schema dataset fails with nothing written;
 * `check` sees each row too (agent_name against the registered loops).
 */
export async function countPrompts(file: string, limit?: number | null, check?: (prompt: Prompt) => void): Promise<number> {
  let count = 0;
  for await (const prompt of readPrompts(file, limit)) {
    check?.(prompt);
    count += 1;
  }
  return count;
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
    agentName: row.agent_name ?? null,
  };
}
