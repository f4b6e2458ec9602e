import { TRAJECTORY_FORMAT_VERSION, trajectoryKey, type Trajectory } from "../../src/data/trajectory.js";

/** A small, valid trajectory record whose fields vary with `i`, for store and viewer tests. */
export function makeTrajectory(i: number, overrides: Partial<Trajectory> = {}): Trajectory {
  const dataIndex = Math.floor(i / 2);
  const sampleIndex = i % 2;
  return {
    format_version: TRAJECTORY_FORMAT_VERSION,
    id: trajectoryKey(dataIndex, sampleIndex),
    data_index: dataIndex,
    sample_index: sampleIndex,
    group_id: String(dataIndex),
    data_source: "openai/gsm8k",
    ground_truth: String(i),
    status: "completed",
    finish_reason: "stop",
    error: null,
    prompt_ids: [1, 2, 3, i],
    response_ids: [10, 11, 12, 13, 14],
    response_mask: [1, 1, 0, 0, 1],
    response_logprobs: [-0.5, -0.25, 0, 0, -1],
    trainer_logprobs: null,
    segments: [
      { kind: "assistant", turn: 0, start: 0, end: 2, text: "hi", tool_name: null, arguments: null, latency_ms: null, error: null, finish_reason: "stop" },
      { kind: "tool", turn: 0, start: 2, end: 4, text: "result", tool_name: "calc", arguments: { x: 1 }, latency_ms: 3.5, error: null, finish_reason: null },
      { kind: "assistant", turn: 1, start: 4, end: 5, text: "bye", tool_name: null, arguments: null, latency_ms: null, error: null, finish_reason: "stop" },
    ],
    calls: [{ turn: 0, name: "calc", arguments: { x: 1 }, response: "result", latency_ms: 3.5, step_reward: -0.05, error_kind: null, error: null }],
    messages: [
      { role: "user", content: `q${i}` },
      { role: "assistant", content: "hi", tool_calls: [{ type: "function", function: { name: "calc", arguments: { x: 1 } } }] },
      { role: "tool", content: "result" },
      { role: "assistant", content: "bye" },
    ],
    reward: i % 3 === 0 ? 1 : 0,
    score: i % 3 === 0 ? 1 : 0,
    tool_rewards: [-0.05],
    turn_scores: [],
    // Every other one had a tool with a trajectory lifetime; every third one's scorer reported extras (acc as score).
    tool_scores: i % 2 === 0 ? { calc: 1, other: 0.5 } : null,
    agent_loop: i % 2 === 0 ? "tool_agent" : "plan_then_act",
    reward_extra: i % 3 === 0 ? { acc: true, answer: String(i), parts: [1, "x"] } : null,
    advantage: null,
    num_turns: 3,
    assistant_turns: 2,
    user_turns: 1,
    tool_calls: 1,
    tool_errors: 0,
    parse_errors: 0,
    drift: "match",
    drift_detail: null,
    server: "http://127.0.0.1:1",
    weight_version: i % 4 === 3 ? "2" : "default",
    // Every fourth one continued across a weight update (a partial rollout): versions change mid-turn.
    version_spans:
      i % 4 === 3
        ? [{ start: 0, end: 1, weight_version: "1" }, { start: 1, end: 2, weight_version: "2" }, { start: 4, end: 5, weight_version: "2" }]
        : [{ start: 0, end: 2, weight_version: "default" }, { start: 4, end: 5, weight_version: "default" }],
    // Every fifth one is an episode whose agent rewrote its history (the OpenAI gateway): an earlier sequence too.
    context_segments:
      i % 5 === 4
        ? [{ prompt_ids: [1, 2, 3], response_ids: [4, 5, 6], response_mask: [1, 1, 0], response_logprobs: [-0.5, -0.25, 0], messages: [{ role: "user", content: "first try" }], reason: "message 1 (user) differs from the record's", drift: "match" }]
        : [],
    step: null,
    started_at: 1_700_000_000_000 + i,
    gen_ms: 10,
    tool_ms: 3.5,
    total_ms: 14,
    retries: 0,
    ...overrides,
  };
}
