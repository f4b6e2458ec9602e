/**
 * The OpenAI gateway's faults and edges end to end, through `agentrl rollout` against the fake SGLang server and the
 * real Qwen3 tokenizer: an agent that crashes, one that never calls the model, one that summarises its history (a new
 * segment), raw requests the gateway must refuse with OpenAI's error body, a request to a trajectory already
 * recorded, an agent past its deadline (killed with its process group), and trajectories of many rows at once that
 * must never mix. Each fault fails only its own trajectory and the run goes on.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { REPO_ROOT, VENV_PYTHON, runCli } from "./helpers/cli.js";
import { IM_END, QWEN3_DIR } from "./helpers/qwen3.js";
import { GSM8K_TOOLS, readAllTrajectories, tempDir } from "./helpers/rollout-run.js";
import { startFakeSglang, type FakeSglang, type RespondFn } from "./fake-sglang/index.js";
import { gsm8kArrowSchema, makeGsm8kRow } from "../src/data/gsm8k.js";
import { writeParquetRows } from "../src/data/parquet.js";
import { loadChatModel, type ChatModel } from "../src/chat/index.js";
import type { Trajectory } from "../src/data/trajectory.js";

const AGENTS = path.join(REPO_ROOT, "test/fixtures/openai-agents");
const dir = tempDir("openai-gateway-faults");
const f = (name: string) => path.join(dir, name);

let model: ChatModel;
let fake: FakeSglang;

/** Row i asks "What is i + 10?": every row has its own question and answer, so a mixed-up trajectory shows. */
const question = (i: number) => `What is ${i} + 10?`;
const answerOf = (i: number) => String(i + 10);
/** The fake model's tool call for `value`. */
const toolCall = (value: string) => `<tool_call>\n{"name": "calc_gsm8k_reward", "arguments": {"answer": "${value}"}}\n</tool_call>`;

async function writeRows(file: string, names: string[]): Promise<string> {
  const rows = names.map((name, i) => ({ ...makeGsm8kRow({ question: question(i), answer: `#### ${answerOf(i)}` }, answerOf(i), "train", i, "tool"), agent_name: name }));
  await writeParquetRows(file, rows, gsm8kArrowSchema("tool"));
  return file;
}

/**
 * A model that calls the GSM8K tool with the sum the conversation asks for, then answers it once it has seen a tool
 * response. A summarised history holds no question: it answers the number the summary names. Under a JSON-schema
 * grammar it answers `{"answer": sum}`.
 */
function sumThenAnswer(chat: ChatModel): RespondFn {
  const toolResponse = chat.tokenToId("<tool_response>")!;
  const encode = (text: string) => [...chat.encode(text), IM_END];
  return (ids, params) => {
    const text = chat.decode(ids);
    const asked = /What is (\d+) \+ (\d+)\?/.exec(text);
    const value = asked ? String(Number(asked[1]) + Number(asked[2])) : (/checked the answer (\S+) with/.exec(text)?.[1] ?? "0");
    // A grammar (SGLang's json_schema) is honoured the way the real engine would: the answer as the object it asks for.
    if (params.json_schema !== undefined) return encode(JSON.stringify({ answer: value }));
    // Asked to think, it thinks first.
    const think = text.includes("Think first.") ? `<think>\nI add ${value}.\n</think>\n\n` : "";
    return encode(think + (ids.includes(toolResponse) ? `#### ${value}` : toolCall(value)));
  };
}

describe("request options: max_tokens, tool_choice none, stop, and max_assistant_turns across requests", () => {
  let run: Awaited<ReturnType<typeof rollout>>;
  let generates: Array<{ sampling_params: Record<string, unknown> }>;
  beforeAll(async () => {
    const before = fake.stats.log.length;
    run = await rollout("options", await writeRows(f("options.parquet"), ["options"]), { options: jsAgent("requestOptions") }, [
      "multi_turn: {max_assistant_turns: 3}",
    ]);
    generates = fake.stats.log.slice(before).filter((e) => e.path === "/generate").map((e) => e.body as (typeof generates)[number]);
  });

  it("a max_tokens cut is finish_reason length, and the trajectory goes on", () => {
    expect(run.result.code, run.result.stderr).toBe(0);
    for (const t of run.trajectories) {
      const { capped } = extra(t);
      expect(capped).toMatchObject({ finish_reason: "length", tool_calls: 0, usage: { completion_tokens: 3 } });
      expect(toolCall(answerOf(0)).startsWith(capped.content)).toBe(true);
    }
    expect(generates.map((g) => g.sampling_params["max_new_tokens"]).slice(0, 2)).toEqual([3, 3]);
  });

  it("tool_choice none returns the call the model wrote as text, unparsed", () => {
    for (const t of run.trajectories) expect(extra(t).unparsed).toMatchObject({ finish_reason: "stop", tool_calls: 0, content: toolCall(answerOf(0)) });
  });

  it("stop strings go to the engine with the turn's own cap", () => {
    const stopped = generates.filter((g) => g.sampling_params["stop"] !== undefined);
    expect(stopped.map((g) => [g.sampling_params["stop"], g.sampling_params["max_new_tokens"]])).toEqual([[["\n"], 50], [["\n"], 50]]);
  });

  it("a request past max_assistant_turns is a 409 and the trajectory ends completed, max_assistant_turns", () => {
    for (const t of run.trajectories) {
      expect(extra(t).over).toEqual({ status: 409, code: "trajectory_ended" });
      expect([t.status, t.finish_reason, t.assistant_turns]).toEqual(["completed", "max_assistant_turns", 3]);
      // The cut turn was closed with the end-of-turn token (mask 0) before the next user message.
      expect(t.response_mask.filter((m) => m === 1).length).toBe(t.segments.filter((s) => s.kind === "assistant").reduce((n, s) => n + s.end - s.start, 0));
    }
  });
});

describe("an agent on its own SDK client, with the SDK's default retries", () => {
  it("is refused once, not retried, past max_assistant_turns: the refusal says x-should-retry false", async () => {
    const run = await rollout("own-client", await writeRows(f("own-client.parquet"), ["own"]), { own: jsAgent("ownClientPastTheEnd") }, [
      "multi_turn: {max_assistant_turns: 1}",
    ]);
    expect(run.result.code, run.result.stderr).toBe(0);
    expect(run.trajectories).toHaveLength(2);
    for (const t of run.trajectories) {
      expect(extra(t).refused).toEqual({ status: 409, code: "trajectory_ended", requests: 1, shouldRetry: "false" });
      expect([t.status, t.finish_reason, t.assistant_turns]).toEqual(["completed", "max_assistant_turns", 1]);
    }
  });
});

describe("agents that take their settings from the environment, under a stale OPENAI_API_BASE and a proxy", () => {
  // Values left in the user's shell: another server (here a closed port) and a cluster's HTTP proxy (a closed port too).
  const proxy = "http://127.0.0.1:9";
  const names = ["langchain", "python_command", "python_function", "no_reward"];
  let run: Awaited<ReturnType<typeof rollout>>;
  beforeAll(async () => {
    run = await rollout("environment", await writeRows(f("environment.parquet"), names), {
      langchain: { kind: "openai", command: ["node", `${AGENTS}/langchain-agent.mjs`, "--from-environment"] },
      python_command: { kind: "openai", command: [VENV_PYTHON, `${AGENTS}/chat_agent.py`] },
      python_function: { kind: "openai", function: `${AGENTS}/chat_agent.py#agent`, python: VENV_PYTHON },
      no_reward: jsAgent("noRewardReported"),
    }, [], [], { OPENAI_API_BASE: "http://127.0.0.1:9/v1", HTTP_PROXY: proxy, HTTPS_PROXY: proxy, ALL_PROXY: proxy, http_proxy: proxy, NO_PROXY: "example.com" });
  });

  it("LangChain's ChatOpenAI reads OPENAI_API_BASE before OPENAI_BASE_URL: both name the gateway", () => {
    expect(run.result.code, run.result.stderr).toBe(0);
    const langchain = run.trajectories.filter((t) => t.data_index === names.indexOf("langchain"));
    expect(langchain.map((t) => [t.status, t.assistant_turns, t.reward])).toEqual([["completed", 2, 1], ["completed", 2, 1]]);
  });

  it("a result without a reward is scored by the reward function, and the run says so once", () => {
    const own = run.trajectories.filter((t) => t.data_index === names.indexOf("no_reward"));
    // The reward function's own extra (acc), none of the agent's keys (answer): its one turn was a tool call, no answer.
    expect(own.map((t) => [t.status, t.reward, extra(t)])).toEqual([["completed", 0, { acc: false }], ["completed", 0, { acc: false }]]);
    const notes = run.result.stderr.split("\n").filter((line) => line.includes("is not a reward"));
    expect(notes).toEqual([expect.stringMatching(/^note: agent no_reward's last stdout line \(or return value\) is not a reward: "\{\\"answer\\":.*the reward function scores its trajectories/)]);
  });

  it("the Python SDK's client (httpx) goes through HTTP_PROXY unless NO_PROXY names loopback: agents and hosts get it added", () => {
    for (const name of ["python_command", "python_function"]) {
      const own = run.trajectories.filter((t) => t.data_index === names.indexOf(name));
      expect(own.map((t) => [t.status, t.assistant_turns, t.reward]), name).toEqual([["completed", 2, 1], ["completed", 2, 1]]);
    }
  });
});

describe("a trajectory whose model server fails", () => {
  it("answers the request that failed 502 and every later one 409 trajectory_ended, so no client retries it", async () => {
    fake.setFaults({ random: { seed: 1, rate: 1, faults: [{ type: "status", status: 500 }] } });
    try {
      const run = await rollout("server-down", await writeRows(f("server-down.parquet"), ["down"]), { down: jsAgent("pastAFailedServer") }, ["server: {max_attempts: 1}"]);
      for (const t of run.trajectories) {
        expect([t.status, t.finish_reason, t.error]).toEqual(["failed", "error", expect.stringMatching(/^\/generate failed after 1 attempts .*HTTP 500/)]);
        expect(extra(t)).toEqual({ first: { status: 502, code: "trajectory_ended" }, again: { status: 409, code: "trajectory_ended" } });
      }
      expect(run.trajectories).toHaveLength(2);
    } finally {
      fake.setFaults({});
    }
  });
});

describe("structured output: response_format and text.format", () => {
  let run: Awaited<ReturnType<typeof rollout>>;
  let generates: Array<{ sampling_params: Record<string, unknown> }>;
  beforeAll(async () => {
    const before = fake.stats.log.length;
    run = await rollout("structured", await writeRows(f("structured.parquet"), ["structured", "tools_format", "langchain"]), {
      structured: { kind: "openai", function: `${AGENTS}/structured_agent.py#structured`, python: VENV_PYTHON },
      tools_format: jsAgent("formatWithTools"),
      langchain: jsAgent("langchainStructured"),
    });
    generates = fake.stats.log.slice(before).filter((e) => e.path === "/generate").map((e) => e.body as (typeof generates)[number]);
  });

  it("the SDK's parse() gets its typed answer: each format's schema goes to the engine as json_schema, the record goes on", () => {
    expect(run.result.code, run.result.stderr).toBe(0);
    const structured = run.trajectories.filter((t) => t.data_index === 0);
    expect(structured).toHaveLength(2);
    for (const t of structured) {
      expect(extra(t)).toMatchObject({ chat: answerOf(0), responses: answerOf(0) });
      // One record (no new segment); Qwen3's template re-renders the first turn without its empty think block once a
      // user message follows, the only difference the drift check finds.
      expect([t.status, t.assistant_turns, t.drift, t.context_segments ?? []]).toEqual(["completed", 2, "reasoning_only", []]);
    }
    // Both turns of both samples carried pydantic's schema of Answer, as SGLang's json_schema sampling parameter.
    const schemas = generates.filter((g) => g.sampling_params["json_schema"] !== undefined).map((g) => JSON.parse(g.sampling_params["json_schema"] as string));
    expect(schemas.filter((schema) => schema.title === "Answer" && schema.properties.answer.title === "Answer")).toHaveLength(4);
    for (const schema of schemas) expect(schema).toMatchObject({ type: "object", properties: { answer: { type: "string" } }, required: ["answer"] });
  });

  it("with tools the format is not enforced (the call goes through, noted once); with tool_choice none it is", () => {
    const withTools = run.trajectories.filter((t) => t.data_index === 1);
    expect(withTools).toHaveLength(2);
    for (const t of withTools) {
      expect(extra(t).withTools).toMatchObject({ finish_reason: "tool_calls", tool_calls: 1 });
      expect(extra(t).noTools).toMatchObject({ finish_reason: "stop", content: JSON.stringify({ answer: answerOf(1) }) });
    }
    // Two samples × one grammar turn each (tool_choice none), plus the structured agent's four and LangChain's two.
    expect(generates.filter((g) => g.sampling_params["json_schema"] !== undefined)).toHaveLength(8);
    expect(run.result.stderr.match(/response_format with tools is sampled without its grammar/g)).toHaveLength(1);
  });

  it("LangChain's withStructuredOutput (json_schema mode) gets its parsed answer", () => {
    const langchain = run.trajectories.filter((t) => t.data_index === 2);
    expect(langchain).toHaveLength(2);
    for (const t of langchain) expect([t.status, extra(t).langchain]).toEqual(["completed", answerOf(2)]);
    const schemas = generates.map((g) => g.sampling_params["json_schema"]).filter((schema) => typeof schema === "string").map((schema) => JSON.parse(schema as string));
    // Its own schema, as given (pydantic's, above, titles the property too).
    expect(schemas.filter((schema) => schema.title === "Answer" && schema.properties.answer.title === undefined)).toHaveLength(2);
  });
});

describe("log-probs: logprobs true, top_logprobs, streamed, and the Responses API's include", () => {
  let run: Awaited<ReturnType<typeof rollout>>;
  beforeAll(async () => {
    run = await rollout("logprobs", await writeRows(f("logprobs.parquet"), ["chat", "responses"]), { chat: jsAgent("withLogprobs"), responses: jsAgent("responsesLogprobs") });
  });
  /** The record's log-probs and ids of assistant segment `n` (its end-of-turn token left out, as the reply leaves it). */
  const sampled = (t: Trajectory, n: number, segments = t.segments) => {
    const segment = segments.filter((s) => s.kind === "assistant")[n]!;
    return { logprobs: t.response_logprobs!.slice(segment.start, segment.end - 1), ids: t.response_ids.slice(segment.start, segment.end - 1) };
  };
  type Alternative = { token: string; logprob: number; bytes: number[] };
  type Entry = Alternative & { top_logprobs: Alternative[] };
  /**
   * `top` alternatives a token, as the fake SGLang server makes them (test/fake-sglang's topAlternatives): the sampled
   * token, then the ids 7 and 14 past it, each half a nat less likely, as OpenAI writes them (text and bytes).
   */
  const alternatives = (id: number, logprob: number, top: number): Alternative[] =>
    Array.from({ length: top }, (_, j) => {
      const alt = (id + 7 * j) % 151_936; // the fake's default vocabulary
      return { token: model.decode([alt]), logprob: logprob - 0.5 * j, bytes: model.tokenBytes(alt) };
    });
  const check = (tokens: Entry[], expected: { logprobs: number[]; ids: number[] }, text: string, top = 0) => {
    expect(tokens.map((e) => e.logprob)).toEqual(expected.logprobs);
    expect(tokens.map((e) => e.token).join("")).toBe(text);
    expect(Buffer.from(tokens.flatMap((e) => e.bytes)).toString("utf8")).toBe(text);
    expect(tokens.map((e) => e.token)).toEqual(expected.ids.map((id) => model.decode([id])));
    expect(tokens.map((e) => e.top_logprobs)).toEqual(expected.ids.map((id, i) => alternatives(id, expected.logprobs[i]!, top)));
  };

  it("each sampled token's text, bytes and log-prob, as the record holds them, the end-of-turn token left out", () => {
    expect(run.result.code, run.result.stderr).toBe(0);
    const chat = run.trajectories.filter((t) => t.data_index === 0);
    expect(chat).toHaveLength(2);
    for (const t of chat) {
      const { first, streamed } = extra(t);
      expect(first.tokens).toHaveLength(first.completion_tokens - 1);
      check(first.tokens, sampled(t, 0), toolCall(answerOf(0)));
      check(streamed.tokens, sampled(t, 1), streamed.content, 3);
      expect(streamed.content).toBe(`#### ${answerOf(0)}`);
    }
  });

  it("on the Responses API with include message.output_text.logprobs and top_logprobs", () => {
    const responses = run.trajectories.filter((t) => t.data_index === 1);
    expect(responses).toHaveLength(2);
    for (const t of responses) {
      const { text, tokens, completion_tokens } = extra(t);
      expect(tokens).toHaveLength(completion_tokens - 1);
      check(tokens, sampled(t, 0), text, 2);
    }
  });
});

describe("chat-template variables: data.apply_chat_template_kwargs and a request's chat_template_kwargs", () => {
  const THINK_OFF = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  let run: Awaited<ReturnType<typeof rollout>>;
  beforeAll(async () => {
    const data = await writeRows(f("kwargs.parquet"), ["tool_agent", "kwargs"]);
    run = await rollout("kwargs", data, { kwargs: jsAgent("templateKwargs") }, [], ["--set", "data.apply_chat_template_kwargs.enable_thinking=false"]);
  });

  it("the run's variables render every prompt and delta of the built-in loop, and its drift check", () => {
    expect(run.result.code, run.result.stderr).toBe(0);
    const builtin = run.trajectories.filter((t) => t.data_index === 0);
    expect(builtin).toHaveLength(2);
    for (const t of builtin) {
      // Qwen3's template with enable_thinking false closes an empty think block in the generation prompt.
      expect(model.decode(t.prompt_ids).endsWith(THINK_OFF)).toBe(true);
      expect(model.decode(t.response_ids)).toContain(`</tool_response><|im_end|>\n${THINK_OFF}`);
      // The re-render drops the first turn's empty think block (Qwen3 keeps one for the last turn only): reasoning only.
      expect([t.status, t.assistant_turns, t.drift]).toEqual(["completed", 2, "reasoning_only"]);
    }
  });

  it("an agent's own variables win for its trajectory; other ones start a new segment", () => {
    const agent = run.trajectories.filter((t) => t.data_index === 1);
    expect(agent).toHaveLength(2);
    for (const t of agent) {
      expect(t.context_segments?.map((segment) => segment.reason)).toEqual(["chat_template_kwargs_changed"]);
      const first = t.context_segments![0]!;
      // Thinking on: the generation prompt has no think block, in the prompt and after the tool's answer.
      expect(model.decode(first.prompt_ids).endsWith("<|im_start|>assistant\n")).toBe(true);
      expect(model.decode(first.response_ids)).not.toContain("<think>");
      expect(first.drift).toBe("reasoning_only");
      // The third request, thinking off: the record from there on is rendered with it.
      expect(model.decode(t.prompt_ids).endsWith(THINK_OFF)).toBe(true);
    }
  });
});

describe("a thinking model: the think block apart from the answer", () => {
  let run: Awaited<ReturnType<typeof rollout>>;
  beforeAll(async () => {
    run = await rollout("thinking", await writeRows(f("thinking.parquet"), ["thinking"]), { thinking: jsAgent("thinkingAgent") });
  });

  it("reasoning_content holds it, content the answer; a history with or without it extends the record", () => {
    expect(run.result.code, run.result.stderr).toBe(0);
    expect(run.trajectories).toHaveLength(2);
    for (const t of run.trajectories) {
      const { first, second, streamed } = extra(t);
      const reasoning = `I add ${answerOf(0)}.`;
      expect(first).toEqual({ content: null, reasoning, calls: 1 });
      expect(second).toEqual({ content: `#### ${answerOf(0)}`, reasoning, calls: 0 });
      expect(streamed).toEqual({ content: `#### ${answerOf(0)}`, reasoning });
      expect([t.status, t.assistant_turns, t.context_segments ?? []]).toEqual(["completed", 3, []]);
      // The record keeps every think block as sampled.
      expect(model.decode(t.response_ids).match(/<think>/g)).toHaveLength(3);
    }
  });
});

describe("a row whose own prompt is over data.max_prompt_length", () => {
  it("runs: the agent's first request is the prompt, and its short one fits", async () => {
    const run = await rollout("short", await writeRows(f("short.parquet"), ["short"]), { short: jsAgent("shortPrompt") }, [], ["--set", "data.max_prompt_length=64"]);
    expect(run.result.code, run.result.stderr).toBe(0);
    expect(run.trajectories).toHaveLength(2);
    for (const t of run.trajectories) {
      expect([t.status, t.finish_reason, t.assistant_turns, t.reward]).toEqual(["completed", "stop", 1, 1]);
      expect(messagesOf(t)[0]).toEqual({ role: "user", content: question(0) });
      expect(t.prompt_ids.length).toBeLessThanOrEqual(64);
    }
  });
});

describe("tools resent with every request", () => {
  it("the same tools in another key order extend the record; other tools start a new segment", async () => {
    const run = await rollout("tools", await writeRows(f("tools.parquet"), ["tools"]), { tools: jsAgent("toolsChange") });
    expect(run.result.code, run.result.stderr).toBe(0);
    for (const t of run.trajectories) {
      expect([t.status, t.finish_reason]).toEqual(["completed", "stop"]);
      expect(t.context_segments?.map((segment) => segment.reason)).toEqual(["tools_changed"]);
      expect((t.context_segments![0]!.messages as Array<{ role: string }>).filter((m) => m.role === "assistant")).toHaveLength(2);
      expect(t.assistant_turns).toBe(1);
    }
  });
});

/** `agentrl rollout --n 2` with `loops` registered under actor_rollout_ref.rollout.agent.agent_loops. */
async function rollout(name: string, data: string, loops: Record<string, Record<string, unknown>>, rolloutLines: string[] = [], flags: string[] = [], env: NodeJS.ProcessEnv = {}) {
  const config = f(`${name}.yaml`);
  writeFileSync(config, ["actor_rollout_ref:", "  rollout:", ...rolloutLines.map((line) => `    ${line}`), "    agent:", `      agent_loops: ${JSON.stringify(loops)}`, ""].join("\n"));
  const out = f(`${name}.jsonl`);
  const result = await runCli([
    "rollout", "--config", config, "--data", data, "--model", QWEN3_DIR, "--server", fake.url,
    "--tools", GSM8K_TOOLS, "--n", "2", "--out", out, "--json", ...flags,
  ], { env });
  const trajectories = existsSync(out) ? await readAllTrajectories(out) : [];
  trajectories.sort((a, b) => a.data_index - b.data_index || a.sample_index - b.sample_index);
  return { result, trajectories };
}

const chatAgent = (mode: string) => ({ kind: "openai", command: ["node", `${AGENTS}/chat-agent.mjs`], env: { AGENT_MODE: mode } });
const jsAgent = (name: string) => ({ kind: "openai", function: `${AGENTS}/js-agents.mjs#${name}` });
const extra = (t: Trajectory) => (t.reward_extra ?? null) as Record<string, any>;
const messagesOf = (t: Trajectory) => t.messages as Array<{ role: string; content: string }>;

beforeAll(async () => {
  model = await loadChatModel(QWEN3_DIR);
  // A little latency, so that the trajectories of a run are in flight together.
  fake = await startFakeSglang({ respond: sumThenAnswer(model), latencyMs: 20 });
});
afterAll(async () => fake?.close());

describe("one run with crashing, silent, summarising and probing agents beside ordinary ones", () => {
  // One row per misbehaving agent, then four rows of the ordinary chat agent.
  const names = ["crash", "exit", "crash_py", "silent", "summarise", "raw", "save", "probe", "chat", "chat", "chat", "chat", "jailed", "unjailed"];
  const at = (name: string) => names.indexOf(name);
  let run: Awaited<ReturnType<typeof rollout>>;
  /** The two samples of the row that runs agent `name`. */
  const row = (name: string) => {
    const samples = run.trajectories.filter((t) => t.data_index === at(name));
    expect(samples).toHaveLength(2);
    return samples;
  };

  beforeAll(async () => {
    const data = await writeRows(f("faults.parquet"), names);
    run = await rollout("faults", data, {
      crash: chatAgent("crash"),
      exit: chatAgent("exit"),
      crash_py: { kind: "openai", function: `${AGENTS}/chat_agent.py#crash`, python: VENV_PYTHON },
      silent: chatAgent("no-model"),
      summarise: chatAgent("summarise"),
      raw: { kind: "openai", command: ["node", `${AGENTS}/raw-requests.mjs`] },
      save: jsAgent("saveUrl"),
      probe: jsAgent("finishedProbe"),
      chat: chatAgent("normal"),
      jailed: { ...chatAgent("sandbox-probe"), sandbox: "bwrap" },
      unjailed: { ...chatAgent("sandbox-probe"), env: { AGENT_MODE: "sandbox-probe", OPENAI_AGENTS_DISABLE_TRACING: "false" } },
    });
  });

  it("records every trajectory, fails only the faulty ones, and exits 1 for them", () => {
    expect(run.result.code, run.result.stderr).toBe(1);
    // The raw agent's one real turn asks for temperature 0.3 and sends frequency_penalty: one note each, once per run.
    expect(run.result.stderr.split("\n")).toEqual([
      "note: gateway: the agent asks for temperature 0.3; the trainer's 1 samples (actor_rollout_ref.rollout.temperature)",
      "note: gateway: the request field frequency_penalty is ignored (docs/openai-gateway.md)",
      expect.stringMatching(/^error: 8 of 28 trajectories failed \(see their error field: agentrl inspect /),
      "",
    ]);
    expect(run.trajectories).toHaveLength(28);
    expect(run.trajectories.map((t) => [t.data_index, t.status, t.finish_reason])).toEqual(
      names.flatMap((name, i) => {
        const outcome = name.startsWith("crash") || name === "exit" ? ["failed", "agent_error"] : name === "silent" ? ["failed", "no_model_call"] : ["completed", "stop"];
        return [[i, ...outcome], [i, ...outcome]];
      }),
    );
  });

  it("sandbox: bwrap keeps the agent from writing to the working folder; without it the same agent can", () => {
    expect(row("jailed").map((t) => [t.status, extra(t).wroteWorkingFolder])).toEqual([0, 1].map(() => ["completed", "EROFS"]));
    expect(row("unjailed").map((t) => [t.status, extra(t).wroteWorkingFolder])).toEqual([0, 1].map(() => ["completed", true]));
  });

  it("turns the Agents SDK's trace upload off for command agents, unless the agent's env says otherwise", () => {
    expect(row("jailed").map((t) => extra(t).agentsTracingOff)).toEqual(["true", "true"]);
    expect(row("unjailed").map((t) => extra(t).agentsTracingOff)).toEqual(["false", "false"]);
  });

  it("an agent that exits non-zero mid-conversation fails with its exit code and last stderr line; its turn stays", () => {
    expect(row("exit").map((t) => [t.error, t.assistant_turns])).toEqual([0, 1].map(() => [
      "agent exit failed: exit code 3: agent: giving up after the first turn", 1,
    ]));
    for (const t of row("exit")) expectMaskOnSampled(t.response_ids, t.response_mask, [toolCall(answerOf(at("exit")))]);
  });

  it("an agent that dies of an uncaught exception fails naming the exception, not Node's version line after it", () => {
    for (const t of row("crash")) {
      expect(t.error).toMatch(/^agent crash failed: exit code 1: /);
      expect(t.error).toContain("Error: the agent crashed on purpose");
      expect(t.assistant_turns).toBe(1);
    }
  });

  it("a Python function agent that raises fails naming the exception; its turn stays", () => {
    expect(row("crash_py").map((t) => [t.error, t.assistant_turns])).toEqual([0, 1].map(() => [
      "agent crash_py failed: raised RuntimeError: the agent crashed on purpose", 1,
    ]));
    for (const t of row("crash_py")) expectMaskOnSampled(t.response_ids, t.response_mask, [toolCall(answerOf(at("crash_py")))]);
  });

  it("an agent that never calls the model fails with no_model_call", () => {
    expect(row("silent").map((t) => [t.error, t.assistant_turns, t.response_ids.length])).toEqual([0, 1].map(() => [
      "agent silent ended without calling the model: there is nothing to train on", 0, 0,
    ]));
  });

  it("a summarised history starts a new segment: the first kept in context_segments, the record from the summary on", () => {
    const answer = answerOf(at("summarise"));
    const summary = `Earlier you checked the answer ${answer} with the tool. Give the final answer.`;
    for (const t of row("summarise")) {
      expect(t.reward).toBe(1);
      expect(t.context_segments).toHaveLength(1);
      const [segment] = t.context_segments!;
      expect(segment!.reason).toBe("message 1 (user) differs from the record's");
      // The closed segment: the row's prompt and the tool call (mask 1); the tool's answer never reached the gateway,
      // since the summary replaced it before the next request.
      const segmentMessages = segment!.messages as Array<{ role: string; content: string }>;
      expect(segmentMessages.map((m) => m.role)).toEqual(["system", "user", "assistant"]);
      expect(segmentMessages[1]!.content).toContain(question(at("summarise")));
      expectMaskOnSampled(segment!.response_ids, segment!.response_mask, [toolCall(answer)]);
      expect(model.decode(segment!.prompt_ids)).toContain(question(at("summarise")));
      // Qwen3's template renders an empty think block into the last assistant turn, which was sampled without one.
      expect(segment!.drift).toBe("reasoning_only");
      // The main sequence starts from the summary, then a call, its answer and the final answer.
      const main = messagesOf(t);
      expect(main.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "assistant"]);
      expect(main[1]!.content).toBe(summary);
      expect(model.decode(t.prompt_ids)).toContain(summary);
      expect(model.decode(t.prompt_ids)).not.toContain(question(at("summarise")));
      expectMaskOnSampled(t.response_ids, t.response_mask, [toolCall(answer), `#### ${answer}`]);
      expect(t.assistant_turns).toBe(2);
      expect(t.drift).toBe("reasoning_only");
    }
  });

  it("raw requests the gateway refuses get OpenAI's error body, and change nothing in the record", () => {
    for (const t of row("raw")) {
      const { probes, turn } = extra(t);
      const error = (status: number, code: string, param: string | null = null, type = "invalid_request_error") =>
        ({ status, body: { error: { message: expect.any(String), type, param, code } } });
      expect(probes.too_long).toEqual(error(400, "context_length_exceeded", "messages"));
      expect(probes.n2).toEqual(error(400, "unsupported_parameter", "n"));
      expect(probes.top_logprobs_alone).toEqual(error(400, "invalid_request", "top_logprobs"));
      expect(probes.top_logprobs_21).toEqual(error(400, "invalid_request", "top_logprobs"));
      expect(probes.responses_top_logprobs).toEqual(error(400, "invalid_request", "top_logprobs"));
      // The row's system prompt, then the user message whose second part is an image.
      expect(probes.image_part).toEqual(error(400, "unsupported_parameter", "messages.1.content.1.type"));
      expect(probes.format_unknown).toEqual(error(400, "unsupported_parameter", "response_format"));
      expect(probes.format_no_schema).toEqual(error(400, "invalid_request", "response_format.json_schema.schema"));
      expect(probes.not_json).toEqual(error(400, "invalid_json"));
      expect(probes.json_array).toEqual(error(400, "invalid_json"));
      expect(probes.no_messages).toEqual(error(400, "invalid_request", "messages"));
      expect(probes.prefill).toEqual(error(400, "unsupported_prefill", "messages"));
      expect(probes.unknown_key).toEqual(error(404, "trajectory_not_found"));
      expect(probes.malformed_key).toEqual(error(404, "trajectory_not_found"));
      expect(probes.unknown_bearer).toEqual(error(404, "trajectory_not_found"));
      expect(probes.no_key).toEqual(error(401, "invalid_api_key", null, "authentication_error"));
      expect(probes.no_key_models).toEqual(error(401, "invalid_api_key", null, "authentication_error"));
      expect(probes.get_completions).toEqual(error(405, "method_not_allowed"));
      expect(probes.unknown_route).toEqual(error(404, "unknown_url"));
      expect(probes.outside_v1).toEqual(error(404, "unknown_url"));
      expect(probes.responses_previous).toEqual(error(400, "previous_response_not_found", "previous_response_id"));
      expect(probes.responses_hosted_tool).toEqual(error(400, "unsupported_parameter", "tools.0.type"));
      expect(probes.responses_image).toEqual(error(400, "unsupported_parameter", "input.0.content.0.type"));
      expect(probes.responses_format_unknown).toEqual(error(400, "unsupported_parameter", "text.format"));
      expect(probes.responses_no_schema).toEqual(error(400, "invalid_request", "response_format.json_schema.schema"));
      expect(probes.responses_bad_item).toEqual(error(400, "unsupported_parameter", "input.0.type"));
      expect(probes.responses_no_input).toEqual(error(400, "invalid_request", "input"));
      expect(probes.get_responses).toEqual(error(405, "method_not_allowed"));
      const list = { status: 200, body: { object: "list", data: [{ id: path.basename(QWEN3_DIR), object: "model", created: 0, owned_by: "agentrl" }] } };
      expect(probes.models).toEqual(list);
      expect(probes.scoped_models).toEqual(list);
      expect(probes.one_model).toEqual({ status: 200, body: list.body.data[0] });
      expect(probes.other_model).toEqual(error(404, "model_not_found", "model"));
      expect(probes.n2.body.error.message).toContain("n=2");
      // The refused requests left nothing: the record is the one turn on the bearer route, from the row's prompt.
      expect(turn).toEqual({ status: 200, finish_reason: "tool_calls" });
      expect(t.assistant_turns).toBe(1);
      expect(t.context_segments ?? []).toEqual([]);
      expect(messagesOf(t)[1]!.content).toContain(question(at("raw")));
      expect(messagesOf(t).map((m) => m.role)).toEqual(["system", "user", "assistant"]);
    }
  });

  it("a request for a trajectory already recorded is a 404 trajectory_finished", () => {
    for (const t of row("probe")) {
      const { models, completion } = extra(t);
      const finished = { error: { message: expect.stringMatching(new RegExp(`^trajectory ${at("save")}:[01] is finished and recorded`)), type: "invalid_request_error", param: null, code: "trajectory_finished" } };
      expect(models).toEqual({ status: 404, body: finished });
      expect(completion).toEqual({ status: 404, body: finished });
    }
    // The saving trajectories themselves are untouched by the late requests.
    expect(row("save").map((t) => [t.status, t.assistant_turns])).toEqual([["completed", 1], ["completed", 1]]);
  });

  it("trajectories in flight together never mix: each record is its own row's conversation", () => {
    const chats = run.trajectories.filter((t) => names[t.data_index] === "chat");
    expect(chats.map((t) => t.data_index)).toEqual([8, 8, 9, 9, 10, 10, 11, 11]);
    for (const t of chats) {
      const i = t.data_index;
      const messages = messagesOf(t);
      expect(messages[1]!.content).toContain(question(i));
      expect(model.decode(t.prompt_ids)).toContain(question(i));
      expect(messages.at(-1)!.content).toBe(`#### ${answerOf(i)}`);
      expect([t.reward, extra(t)]).toEqual([1, { answer: answerOf(i) }]);
      expectMaskOnSampled(t.response_ids, t.response_mask, [toolCall(answerOf(i)), `#### ${answerOf(i)}`]);
      expect(t.drift).toBe("reasoning_only");
    }
  });
});

describe("agents past trajectory_timeout", () => {
  const pidDir = f("pids");
  let run: Awaited<ReturnType<typeof rollout>>;

  beforeAll(async () => {
    mkdirSync(pidDir);
    const data = await writeRows(f("deadline.parquet"), ["sleepy", "late", "report"]);
    // Rows start in order, 4 at a time: the report trajectories start when the first four reach their deadline.
    // lateCaller calls again 3.5 s in.
    run = await rollout("deadline", data, {
      sleepy: { kind: "openai", command: ["node", `${AGENTS}/sleepy-agent.mjs`], env: { PID_DIR: pidDir } },
      late: jsAgent("lateCaller"),
      report: jsAgent("lateReport"),
    }, ["trajectory_timeout: 3", "max_concurrency: 4"]);
  });
  // Whatever the gateway failed to kill goes now, so a failing test leaves no process behind.
  afterAll(() => {
    for (const pid of pidsLeft()) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  });

  /** The pids the sleepy agents wrote (each agent and its sleeping child) that are still running. */
  function pidsLeft(): number[] {
    if (!existsSync(pidDir)) return [];
    return readdirSync(pidDir).flatMap((file) => Object.values(JSON.parse(readFileSync(path.join(pidDir, file), "utf8")) as Record<string, number>)).filter(running);
  }

  it("are aborted at the deadline with what they sampled; the run goes on", () => {
    expect(run.result.stderr).toBe("");
    expect(run.trajectories.map((t) => [t.data_index, t.status, t.finish_reason, t.assistant_turns])).toEqual([
      [0, "aborted", "deadline", 1],
      [0, "aborted", "deadline", 1],
      [1, "aborted", "deadline", 1],
      [1, "aborted", "deadline", 1],
      [2, "completed", "stop", 1],
      [2, "completed", "stop", 1],
    ]);
    expect(run.result.code).toBe(0);
  });

  it("a command agent's whole process group is killed at the deadline, its grandchild too", () => {
    expect(readdirSync(pidDir).sort()).toEqual(["0:0.json", "0:1.json"]);
    expect(pidsLeft()).toEqual([]);
  });

  it("a JS function agent left behind at its deadline gets 409 trajectory_ended for its later requests", () => {
    const reports = run.trajectories.filter((t) => t.data_index === 2);
    expect(reports).toHaveLength(2);
    for (const t of reports) {
      expect(extra(t).late).toEqual({
        status: 409,
        error: { message: expect.stringMatching(/^trajectory 1:[01] has ended: aborted \(deadline/), type: "invalid_request_error", param: null, code: "trajectory_ended" },
      });
    }
  });
});

/**
 * Checks mask 1 is exactly on the sampled turns: the runs of 1s are, in order, the ids the fake model sent for
 * `turns` (each the turn's text and <|im_end|>), and every other token is 0.
 */
function expectMaskOnSampled(ids: number[], mask: number[], turns: string[]) {
  expect(mask).toHaveLength(ids.length);
  expect(mask.every((m) => m === 0 || m === 1)).toBe(true);
  const runs: number[][] = [];
  mask.forEach((m, i) => {
    if (m === 1 && mask[i - 1] !== 1) runs.push([]);
    if (m === 1) runs.at(-1)!.push(ids[i]!);
  });
  expect(runs).toEqual(turns.map((text) => [...model.encode(text), IM_END]));
}

/** A process is running when /proc has it and it is not a zombie waiting for its parent. */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}
