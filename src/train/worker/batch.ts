/**
 * Builds the batch tensor file the worker reads (docs/worker-protocol.md, "Batch file") from per-trajectory arrays.
 * Rows are right-padded; every [B, T] tensor is aligned with input_ids over the full sequence (prompt + response).
 */
import { writeSafetensors, type TensorData } from "./safetensors.js";

export interface TrajectoryRow {
  /** Prompt and response token ids, in order. */
  ids: number[];
  /** 1 on tokens the policy sampled (the loss mask), 0 on prompt, tool and user tokens. Same length as ids. */
  responseMask: number[];
  /** The outcome reward of the trajectory. */
  reward: number;
  /** Rows with the same group id answer the same prompt (the GRPO group). */
  groupId: number;
  /** The rollout engine's log-prob of each sampled token (0 elsewhere); optional, for truncated IS. */
  rolloutLogProbs?: number[];
  /**
   * Rows with the same episode id are sequences of one episode (an agent that rewrote its history): the worker gives
   * them one advantage, counting the episode once in its group. Without one a row is its own episode.
   */
  episodeId?: number;
}

export function batchTensors(rows: TrajectoryRow[], padTokenId: number): Record<string, TensorData> {
  if (rows.length === 0) throw new Error("a batch needs at least one row");
  const width = Math.max(...rows.map((r) => r.ids.length));
  const count = rows.length * width;
  const inputIds = new BigInt64Array(count).fill(BigInt(padTokenId));
  const attention = new BigInt64Array(count);
  const response = new BigInt64Array(count);
  const withRollout = rows.every((r) => r.rolloutLogProbs !== undefined);
  const rollout = new Float32Array(withRollout ? count : 0);
  rows.forEach((row, i) => {
    if (row.responseMask.length !== row.ids.length) {
      throw new Error(`row ${i}: responseMask has ${row.responseMask.length} entries for ${row.ids.length} ids`);
    }
    row.ids.forEach((id, t) => {
      inputIds[i * width + t] = BigInt(id);
      attention[i * width + t] = 1n;
      response[i * width + t] = row.responseMask[t] ? 1n : 0n;
      if (withRollout) rollout[i * width + t] = row.rolloutLogProbs![t] ?? 0;
    });
  });
  const shape = [rows.length, width];
  const tensors: Record<string, TensorData> = {
    input_ids: { dtype: "I64", shape, data: inputIds },
    attention_mask: { dtype: "I64", shape, data: attention },
    response_mask: { dtype: "I64", shape, data: response },
    rewards: { dtype: "F32", shape: [rows.length], data: Float32Array.from(rows.map((r) => r.reward)) },
    group_ids: { dtype: "I64", shape: [rows.length], data: BigInt64Array.from(rows.map((r) => BigInt(r.groupId))) },
  };
  if (withRollout) tensors.rollout_log_probs = { dtype: "F32", shape, data: rollout };
  const episodes = episodeIds(rows);
  if (episodes) tensors.episode_ids = { dtype: "I64", shape: [rows.length], data: episodes };
  return tensors;
}

/**
 * The episode_ids tensor, or undefined when no row names an episode: then every row is its own episode and the file is
 * what it was before episodes existed. A row without an id gets a fresh one above every given id, so it joins no one.
 */
function episodeIds(rows: readonly TrajectoryRow[]): BigInt64Array | undefined {
  const given = rows.flatMap((r) => (r.episodeId === undefined ? [] : [r.episodeId]));
  if (given.length === 0) return undefined;
  let next = Math.max(...given) + 1;
  return BigInt64Array.from(rows.map((r) => BigInt(r.episodeId ?? next++)));
}

export async function writeBatch(path: string, rows: TrajectoryRow[], padTokenId: number): Promise<void> {
  await writeSafetensors(path, batchTensors(rows, padTokenId));
}
