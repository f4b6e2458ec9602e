// The synthetic trajectory the data-path benchmarks write and read (bench/inspect-summary.mjs,
// bench/trajectory-io.mjs): one shared copy, so their numbers describe the same records. Deterministic in `i`, and
// valid against src/data/trajectory.ts's schema (readTrajectories validates every record it reads back).

/** A plausible GSM8K tool trajectory: ~150 prompt tokens, ~300 response tokens, 3 segments, one tool call. */
export function synthetic(i) {
  const promptLength = 120 + (i % 60);
  const first = 80 + (i % 120);
  const tool = 40;
  const last = 60 + ((i * 7) % 200);
  const length = first + tool + last;
  const mask = Array.from({ length }, (_, k) => (k >= first && k < first + tool ? 0 : 1));
  const failed = i % 17 === 0;
  return {
    format_version: 2,
    id: `${Math.floor(i / 4)}:${i % 4}`,
    data_index: Math.floor(i / 4),
    sample_index: i % 4,
    group_id: String(Math.floor(i / 4)),
    data_source: i % 10 === 0 ? "other/source" : "openai/gsm8k",
    ground_truth: String(i % 100),
    status: i % 9 === 0 ? "truncated" : "completed",
    finish_reason: i % 9 === 0 ? "length" : "stop",
    error: null,
    prompt_ids: Array.from({ length: promptLength }, (_, k) => (k * 31 + i) % 150000),
    response_ids: Array.from({ length }, (_, k) => (k * 17 + i) % 150000),
    response_mask: mask,
    response_logprobs: mask.map((m, k) => (m ? -((k % 13) / 7) : 0)),
    trainer_logprobs: null,
    segments: [
      { kind: "assistant", turn: 0, start: 0, end: first, text: `Let me compute step ${i}. <tool_call>{"name":"calculator"}</tool_call>`, finish_reason: "stop" },
      { kind: "tool", turn: 1, start: first, end: first + tool, text: `<tool_response>${i * 3}</tool_response>`, tool_name: "calculator", arguments: { expression: `${i}*3` }, latency_ms: 1 + (i % 50) / 10 },
      { kind: "assistant", turn: 1, start: first + tool, end: length, text: `So the answer is #### ${i % 100}`, finish_reason: "stop" },
    ],
    calls: [
      {
        turn: 0, name: "calculator", arguments: { expression: `${i}*3` }, response: failed ? "Error: boom" : String(i * 3),
        latency_ms: 1 + (i % 50) / 10, step_reward: null, error_kind: failed ? "exception" : null, error: failed ? "boom" : null,
      },
    ],
    messages: [
      { role: "system", content: "You are a math expert. Use the calculator tool." },
      { role: "user", content: `Question ${i}: a farmer has ${i} eggs and ... how many are left?` },
      { role: "assistant", content: `Let me compute step ${i}.`, tool_calls: [{ type: "function", function: { name: "calculator", arguments: { expression: `${i}*3` } } }] },
      { role: "tool", content: String(i * 3) },
      { role: "assistant", content: `So the answer is #### ${i % 100}` },
    ],
    reward: i % 3 === 0 ? 1 : 0,
    score: i % 3 === 0 ? 1 : 0,
    tool_rewards: [],
    turn_scores: [],
    reward_extra: null,
    advantage: null,
    num_turns: 4,
    assistant_turns: 2,
    user_turns: 1,
    tool_calls: 1,
    tool_errors: failed ? 1 : 0,
    parse_errors: 0,
    drift: i % 101 === 0 ? "drift" : "match",
    drift_detail: null,
    server: "http://127.0.0.1:30000",
    weight_version: "1",
    step: null,
    started_at: 1_700_000_000_000 + i,
    gen_ms: 200,
    tool_ms: 2,
    total_ms: 210,
    retries: 0,
  };
}
