/**
 * The AgentLoopApi's primitives, driven through runTrajectory with in-process loops against the fake SGLang server
 * (real Qwen3 tokenizer): calls a loop makes itself and their error observations, the first Finish ending the
 * trajectory whatever the loop does next, copies that cannot touch the record, single_turn_agent, and the errors.
 */
import { beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { loadChatModel, type ChatModel } from "../src/chat/index.js";
import { SglangClient } from "../src/engine/index.js";
import { InputError } from "../src/errors.js";
import { getParser } from "../src/parsers/index.js";
import { rolloutSchema } from "../src/rollout/config.js";
import type { AgentLoop } from "../src/rollout/agent-loop.js";
import { AgentLoopRegistry } from "../src/rollout/agent-loops.js";
import { runTrajectory, type TrajectoryContext } from "../src/rollout/run-trajectory.js";
import type { Sample } from "../src/rollout/sample.js";
import type { Trajectory } from "../src/data/trajectory.js";
import { BaseTool, ToolRegistry, type ToolExecuteResult } from "../src/tools/index.js";
import { startFakeSglang } from "./fake-sglang/index.js";
import { IM_END, QWEN3_DIR } from "./helpers/qwen3.js";

let model: ChatModel;
beforeAll(async () => void (model = await loadChatModel(QWEN3_DIR)));

class EchoTool extends BaseTool {
  constructor() {
    super({ type: "native" }, { type: "function", function: { name: "echo", description: "echoes", parameters: { type: "object", properties: {}, required: [] } } });
  }
  override async execute(_id: string, parameters: Record<string, unknown>): Promise<ToolExecuteResult> {
    return { response: { text: `echo ${JSON.stringify(parameters)}` }, reward: 0.25, metrics: {} };
  }
}

const encode = (text: string) => [...model.encode(text), IM_END];
const CALL = () => encode('<tool_call>\n{"name": "echo", "arguments": {"x": 1}}\n</tool_call>');

/** A model that calls echo until it has seen a tool response, then answers. */
async function context(loops: Record<string, AgentLoop>, maxResponseLength = 1024): Promise<TrajectoryContext> {
  const toolResponse = model.tokenToId("<tool_response>")!;
  const server = await startFakeSglang({ respond: (ids) => (ids.includes(toolResponse) ? encode("#### 3") : CALL()) });
  const client = new SglangClient({ servers: [server.url], maxRetries: 0, retryBaseDelayMs: 1, retryMaxDelayMs: 5 });
  // Closed when the test ends, client first.
  onTestFinished(() => server.close());
  onTestFinished(() => client.close());
  const tools = new ToolRegistry();
  tools.add(new EchoTool());
  return {
    model, client, parser: getParser("hermes"), tools, toolSchemas: tools.schemas(), interactions: undefined,
    rewardFunction: undefined, rollout: rolloutSchema.parse({}), maxPromptLength: 1024, maxResponseLength,
    signal: new AbortController().signal, agentLoops: AgentLoopRegistry.withLoops(loops),
  };
}

function sample(agentName: string | null): Sample {
  return {
    dataIndex: 7, sampleIndex: 0, groupId: "7", dataSource: "openai/gsm8k", messages: [{ role: "user", content: "1 + 2?" }],
    groundTruth: "3", toolsKwargs: {}, interactionKwargs: {}, extraInfo: {}, agentName,
  };
}

function expectMaskOnSampledOnly(t: Trajectory): void {
  const expected = new Array<number>(t.response_ids.length).fill(0);
  for (const s of t.segments) if (s.kind === "assistant") expected.fill(1, s.start, s.end);
  expect(t.response_mask).toEqual(expected);
}

const kinds = (t: Trajectory) => t.segments.filter((s) => s.kind !== "prompt").map((s) => s.kind);

describe("AgentLoopApi", () => {
  it("rows without agent_name run tool_agent; single_turn_agent samples once and runs no call", async () => {
    const ctx = await context({});
    const tool = await runTrajectory(sample(null), ctx);
    expect([kinds(tool), tool.tool_calls, tool.reward]).toEqual([["assistant", "tool", "assistant"], 1, 1]);
    const single = await runTrajectory(sample("single_turn_agent"), ctx);
    expect([kinds(single), single.tool_calls, single.status, single.finish_reason]).toEqual([["assistant"], 0, "completed", "stop"]);
    expect(single.response_ids).toEqual(CALL());
  });

  it("callTools runs calls the loop names, with error observations; tokens() are copies", async () => {
    let seen: { ids: number[]; mask: number[] } | undefined;
    const ctx = await context({
      own: async (agent) => {
        const first = await agent.generate();
        expect(first.ids).toEqual(CALL());
        expect(first.text).toContain('"name": "echo"');
        const ended = await agent.callTools([{ name: "echo", arguments: { y: 2 } }, { name: "nope", arguments: {} }]);
        expect(ended).toBeUndefined();
        seen = agent.tokens();
        seen.mask.fill(1);
        return (await agent.generate()).finish;
      },
    });
    const t = await runTrajectory(sample("own"), ctx);
    expect(kinds(t)).toEqual(["assistant", "tool", "assistant"]);
    expect(t.calls.map((c) => [c.name, c.response.slice(0, 14), c.error_kind !== null])).toEqual([
      ["echo", 'echo {"y":2}', false],
      ["nope", "Error when exe", true],
    ]);
    expect(t.tool_rewards).toEqual([0.25]);
    expectMaskOnSampledOnly(t);
    expect(seen!.ids).toEqual([...t.prompt_ids, ...t.response_ids.slice(0, seen!.ids.length - t.prompt_ids.length)]);
  });

  it("the first Finish ends the trajectory: later primitives do nothing and the loop's return is overruled", async () => {
    let after: unknown[] = [];
    const ctx = await context({
      stubborn: async (agent) => {
        const first = await agent.generate();
        const second = await agent.generate();
        after = [first.finish, second.finish, agent.append([{ role: "user", content: "more" }]), await agent.callTools([{ name: "echo", arguments: {} }])];
        return { status: "completed", reason: "stop" };
      },
    }, CALL().length + 2);
    const t = await runTrajectory(sample("stubborn"), ctx);
    expect([t.status, t.finish_reason]).toEqual(["truncated", "length"]);
    expect(after).toEqual([undefined, { status: "truncated", reason: "length" }, { status: "truncated", reason: "length" }, { status: "truncated", reason: "length" }]);
    expect(t.calls).toEqual([]);
    expectMaskOnSampledOnly(t);
  });

  it("generate({ maxNewTokens }) cuts the turn at the loop's cap and the trajectory goes on; the next message closes the turn (mask 0)", async () => {
    let cut: unknown;
    const ctx = await context({
      short: async (agent) => {
        const first = await agent.generate({ maxNewTokens: 3 });
        cut = [first.ids.length, first.finishReason, first.finish];
        agent.append([{ role: "user", content: "go on" }]);
        const second = await agent.generate();
        return second.finish;
      },
    });
    const t = await runTrajectory(sample("short"), ctx);
    expect(cut).toEqual([3, "length", undefined]);
    expect([t.status, t.finish_reason, t.assistant_turns]).toEqual(["completed", "stop", 2]);
    // The render of the record's messages gives the same tokens, up to Qwen3's think block on past turns.
    expect(["match", "reasoning_only"]).toContain(t.drift);
    const user = t.segments.find((s) => s.kind === "user")!;
    expect(t.response_ids[user.start]).toBe(IM_END); // the cut turn closed by the template's end-of-turn, not sampled
    expect(t.response_ids.slice(0, 3)).toEqual(CALL().slice(0, 3));
    expectMaskOnSampledOnly(t);
    await expect(runTrajectory(sample("zero"), await context({ zero: (agent) => agent.generate({ maxNewTokens: 0 }).then(() => undefined) }))).resolves.toMatchObject({
      status: "failed", error: "agent loop zero failed: generate(): maxNewTokens must be a positive integer, not 0",
    });
  });

  it("a loop that hangs past trajectory_timeout is left behind: the trajectory ends at its deadline, and later primitives change nothing", async () => {
    let sawAbort = false;
    let release: () => void = () => undefined;
    let late: unknown;
    const ctx = await context({
      hang: async (agent) => {
        await agent.generate();
        agent.signal.addEventListener("abort", () => void (sawAbort = true));
        await new Promise<void>((resolve) => (release = resolve)); // ignores its signal
        late = agent.append([{ role: "user", content: "too late" }]);
      },
    });
    ctx.rollout = rolloutSchema.parse({ trajectory_timeout: 0.3 });
    const t = await runTrajectory(sample("hang"), ctx);
    expect([t.status, t.finish_reason, sawAbort]).toEqual(["aborted", "deadline", true]);
    expect(kinds(t)).toEqual(["assistant"]);
    const recorded = t.response_ids.length;
    release();
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(late).toEqual({ status: "aborted", reason: "deadline" });
    expect(t.response_ids).toHaveLength(recorded);
  });

  it("a loop that returns something other than a Finish fails its trajectory, naming the loop", async () => {
    const ctx = await context({ odd: () => "done" as never });
    const t = await runTrajectory(sample("odd"), ctx);
    expect([t.status, t.finish_reason]).toEqual(["failed", "agent_loop_error"]);
    expect(t.error).toMatch(/^agent loop odd returned "done"/);
  });

  it("an unknown agent_name is an InputError naming the row and the registered loops", async () => {
    const ctx = await context({ mine: () => undefined });
    await expect(runTrajectory(sample("theirs"), ctx)).rejects.toThrow(InputError);
    await expect(runTrajectory(sample("theirs"), ctx)).rejects.toThrow('row 7: agent_name "theirs" is not a registered agent loop (registered: tool_agent, single_turn_agent, mine)');
  });

  it("a default_agent_loop that is not registered is refused", () => {
    expect(() => AgentLoopRegistry.withLoops({}, "missing")).toThrow(/default_agent_loop: agent_name "missing"/);
  });
});
