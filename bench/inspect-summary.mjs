#!/usr/bin/env node
// `agentrl inspect FILE` (the summary) on synthetic trajectory files of 1k, 10k and 100k trajectories, measured side
// by side in one run: wall time of the whole CLI process and its peak RSS. Streaming shows as time growing with
// the file while peak memory stays flat. Issue 8 asks for 100k trajectories in under 10 s with bounded memory.
// Needs `npm run build` first. BENCH_SIZES=1000,10000 to run fewer. Prints a markdown section.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { openTrajectoryWriter } = await import(path.join(root, "dist/data/trajectory-store.js"));
const sizes = (process.env.BENCH_SIZES ?? "1000,10000,100000").split(",").map(Number);

/** A plausible GSM8K tool trajectory: ~150 prompt tokens, ~300 response tokens, 3 segments, one tool call. */
function synthetic(i) {
  const promptLength = 120 + (i % 60);
  const first = 80 + (i % 120);
  const tool = 40;
  const last = 60 + ((i * 7) % 200);
  const length = first + tool + last;
  const mask = Array.from({ length }, (_, k) => (k >= first && k < first + tool ? 0 : 1));
  const failed = i % 17 === 0;
  return {
    format_version: 1,
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
      { kind: "tool", turn: 1, start: first, end: first + tool, text: `<tool_response>${i * 3}</tool_response>`, tool_name: "calculator", arguments: `{"expression":"${i}*3"}`, latency_ms: 1 + (i % 50) / 10 },
      { kind: "assistant", turn: 1, start: first + tool, end: length, text: `So the answer is #### ${i % 100}`, finish_reason: "stop" },
    ],
    calls: [
      {
        turn: 0, name: "calculator", arguments: `{"expression":"${i}*3"}`, response: failed ? "Error: boom" : String(i * 3),
        latency_ms: 1 + (i % 50) / 10, step_reward: null, error_kind: failed ? "exception" : null, error: failed ? "boom" : null,
      },
    ],
    messages: JSON.stringify([
      { role: "system", content: "You are a math expert. Use the calculator tool." },
      { role: "user", content: `Question ${i}: a farmer has ${i} eggs and ... how many are left?` },
    ]),
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

function measure(file) {
  // Peak RSS of the CLI process itself, reported from inside it at exit.
  const hook = "data:text/javascript," + encodeURIComponent(
    "process.on('exit', () => { const u = process.resourceUsage(); process.stderr.write('\\nRSS ' + u.maxRSS + ' CPU ' + (u.userCPUTime + u.systemCPUTime) + '\\n'); });",
  );
  const started = process.hrtime.bigint();
  const result = spawnSync(process.execPath, ["--import", hook, path.join(root, "bin/agentrl.js"), "inspect", file, "--json"], {
    cwd: root,
    encoding: "utf8",
    maxBuffer: 1 << 26,
    env: { ...process.env, NO_COLOR: "1" },
  });
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  if (result.status !== 0) throw new Error(`inspect failed on ${file}:\n${result.stderr}`);
  const [, rssKb, cpuUs] = /RSS (\d+) CPU (\d+)/.exec(result.stderr) ?? [];
  const count = JSON.parse(result.stdout).summary.overall.count;
  return { ms, cpuMs: Number(cpuUs) / 1000, rssMb: Number(rssKb) / 1024, count };
}

// BENCH_KEEP_DIR=/some/dir keeps the generated files there (for profiling).
const keep = process.env.BENCH_KEEP_DIR;
const dir = keep ?? mkdtempSync(path.join(os.tmpdir(), "bench-inspect-"));
const rows = [];
try {
  for (const n of sizes) {
    const file = path.join(dir, `traj-${n}.parquet`);
    const writer = await openTrajectoryWriter(file, { rowGroupSize: 1024 });
    for (let i = 0; i < n; i++) await writer.write(synthetic(i));
    await writer.close();
    process.stderr.write(`wrote ${n} trajectories (${(statSync(file).size / 1e6).toFixed(1)} MB)\n`);
    const m = measure(file);
    if (m.count !== n) throw new Error(`inspect counted ${m.count}, expected ${n}`);
    rows.push({ n, mb: statSync(file).size / 1e6, ...m });
    if (!keep) rmSync(file, { force: true });
  }
} finally {
  if (!keep) rmSync(dir, { recursive: true, force: true });
}

const base = rows[0];
const lines = rows.map(
  (r) =>
    `| ${r.n.toLocaleString("en")} | ${r.mb.toFixed(1)} MB | ${(r.ms / 1000).toFixed(2)} s | ${(r.cpuMs / 1000).toFixed(2)} s | ${((r.ms * 1000) / r.n).toFixed(0)} µs | ` +
    `${r.rssMb.toFixed(0)} MB | ${(r.ms / base.ms).toFixed(2)}× | ${(r.n / base.n).toFixed(0)}× | ${(r.rssMb / base.rssMb).toFixed(2)}× |`,
);
console.log(`## Inspect: summary of a trajectory file (parquet, row groups of 1024)

Whole \`agentrl inspect FILE --json\` process (start-up included); synthetic GSM8K-like trajectories of ~300 response
tokens. CPU time (user + system) is the steadier number on a shared machine.

| trajectories | file | wall time | CPU time | wall per trajectory | peak RSS | time vs ${base.n.toLocaleString("en")} | size vs ${base.n.toLocaleString("en")} | peak RSS vs ${base.n.toLocaleString("en")} |
|---|---|---|---|---|---|---|---|---|
${lines.join("\n")}
`);
