/**
 * Tool lifetime as in verl's SGLang rollout (multi_turn.tool_lifetime: trajectory, the default): one instance per
 * tool per trajectory, created at the start for the tools in the row's tools_kwargs, executed on by every call,
 * scored with calc_reward at the end, and released exactly once whichever way the trajectory ends. Driven through
 * runTrajectory against the fake SGLang server with the real Qwen3 tokenizer; a counter tool holds the state and
 * spies on every lifecycle call.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { loadChatModel, type ChatModel } from "../src/chat/index.js";
import { SglangClient } from "../src/engine/index.js";
import { getParser } from "../src/parsers/index.js";
import { rolloutSchema } from "../src/rollout/config.js";
import { OverSampleAbort } from "../src/rollout/over-sample.js";
import { runTrajectory, type TrajectoryContext } from "../src/rollout/run-trajectory.js";
import { buildShowView, renderShow } from "../src/inspect/show.js";
import type { Sample } from "../src/rollout/sample.js";
import { BaseTool, ToolRegistry, type ToolContext, type ToolExecuteResult, type ToolResponse } from "../src/tools/index.js";
import { startFakeSglang, type FakeSglangOptions } from "./fake-sglang/index.js";
import { IM_END, QWEN3_DIR } from "./helpers/qwen3.js";

let model: ChatModel;
let toolResponseId: number;
beforeAll(async () => {
  model = await loadChatModel(QWEN3_DIR);
  toolResponseId = model.tokenToId("<tool_response>")!;
});

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

type Event =
  | { op: "create"; id: string; kwargs: Record<string, unknown> }
  | { op: "execute"; id: string; count: number; ctx: ToolContext }
  | { op: "calc_reward"; id: string; kwargs: Record<string, unknown> | undefined }
  | { op: "release"; id: string; kwargs: Record<string, unknown> | undefined };

/** Counts its calls per instance; calc_reward is the count. Logs every lifecycle call. */
class CounterTool extends BaseTool {
  readonly events: Event[] = [];
  private readonly counts = new Map<string, number>();
  private next = 0;
  /** Runs inside execute, e.g. to abort the run while the trajectory is mid-flight. */
  onExecute: (() => void) | undefined;

  constructor(name: string) {
    super({ type: "native" }, { type: "function", function: { name, description: "counts", parameters: { type: "object", properties: {}, required: [] } } });
  }

  override async create(_instanceId: string | undefined, kwargs: Record<string, unknown>): Promise<{ instanceId: string; response: ToolResponse }> {
    const id = `${this.name}-${this.next++}`;
    this.counts.set(id, 0);
    this.events.push({ op: "create", id, kwargs });
    return { instanceId: id, response: {} };
  }

  override async execute(instanceId: string, _parameters: Record<string, unknown>, ctx: ToolContext): Promise<ToolExecuteResult> {
    const count = this.counts.get(instanceId)! + 1;
    this.counts.set(instanceId, count);
    this.events.push({ op: "execute", id: instanceId, count, ctx });
    this.onExecute?.();
    return { response: { text: `count=${count}` }, reward: 0.5, metrics: {} };
  }

  override async calcReward(instanceId: string, kwargs?: Record<string, unknown>): Promise<number> {
    this.events.push({ op: "calc_reward", id: instanceId, kwargs });
    return this.counts.get(instanceId)!;
  }

  override async release(instanceId: string, kwargs?: Record<string, unknown>): Promise<void> {
    this.events.push({ op: "release", id: instanceId, kwargs });
    this.counts.delete(instanceId);
  }

  of(op: Event["op"]): Event[] {
    return this.events.filter((e) => e.op === op);
  }
}

const KWARGS = {
  counter: {
    create_kwargs: { start: "c" },
    execute_kwargs: { mode: "e" },
    calc_reward_kwargs: { weight: "r" },
    release_kwargs: { why: "x" },
  },
};

function sampleOf(sampleIndex: number, toolsKwargs: Record<string, unknown> = KWARGS): Sample {
  return {
    dataIndex: 0,
    sampleIndex,
    groupId: "0",
    dataSource: "openai/gsm8k",
    messages: [{ role: "user", content: "Count to three." }],
    groundTruth: "3",
    toolsKwargs,
    interactionKwargs: {},
    extraInfo: {},
  };
}

const callTurn = (name: string) => [...model.encode(`<tool_call>\n{"name": "${name}", "arguments": {}}\n</tool_call>`), IM_END];
const answerTurn = () => [...model.encode("#### 3"), IM_END];
/** How many tool responses the prompt holds: which turn the model is on. */
const toolTurns = (ids: number[]) => ids.filter((x) => x === toolResponseId).length;

interface Setup {
  ctx: TrajectoryContext;
  tool: CounterTool;
  other: CounterTool;
  abort: AbortController;
}

async function setup(
  fake: FakeSglangOptions,
  multiTurn: Record<string, unknown> = {},
  extra: { trajectory_timeout?: number; maxResponseLength?: number } = {},
): Promise<Setup> {
  const server = await startFakeSglang(fake);
  cleanups.push(() => server.close());
  const client = new SglangClient({ servers: [server.url], maxRetries: 0, retryBaseDelayMs: 1, retryMaxDelayMs: 5 });
  cleanups.push(() => client.close());
  const tool = new CounterTool("counter");
  const other = new CounterTool("other");
  const tools = new ToolRegistry();
  tools.add(tool);
  tools.add(other);
  const abort = new AbortController();
  const ctx: TrajectoryContext = {
    model,
    client,
    parser: getParser("hermes"),
    tools,
    toolSchemas: tools.schemas(),
    interactions: undefined,
    rewardFunction: undefined,
    rollout: rolloutSchema.parse({ multi_turn: multiTurn, trajectory_timeout: extra.trajectory_timeout ?? 60 }),
    maxPromptLength: 1024,
    maxResponseLength: extra.maxResponseLength ?? 1024,
    signal: abort.signal,
  };
  return { ctx, tool, other, abort };
}

/** Three counter calls, then the answer. */
const threeCalls: FakeSglangOptions = { respond: (ids) => (toolTurns(ids) < 3 ? callTurn("counter") : answerTurn()) };

/** Every instance created was released exactly once, with its release_kwargs, and nothing else was released. */
function expectReleasedOnce(tool: CounterTool, releaseKwargs: Record<string, unknown> | undefined = KWARGS.counter.release_kwargs): void {
  const created = tool.of("create").map((e) => e.id).sort();
  const released = tool.of("release").map((e) => e.id).sort();
  expect(released).toEqual(created);
  for (const e of tool.of("release")) expect(e.kwargs).toEqual(tool.name === "counter" ? releaseKwargs : {});
}

describe("tool_lifetime: trajectory (the default)", () => {
  it("keeps one instance across the calls of a trajectory and records calc_reward", async () => {
    const { ctx, tool, other } = await setup(threeCalls);
    const t = await runTrajectory(sampleOf(0), ctx);
    expect([t.status, t.finish_reason]).toEqual(["completed", "stop"]);
    expect(t.calls.map((c) => c.response)).toEqual(["count=1", "count=2", "count=3"]);
    expect(tool.of("create")).toHaveLength(1);
    expect(other.of("create")).toHaveLength(0); // not in tools_kwargs and never called
    expect(t.tool_scores).toEqual({ counter: 3 });
    expect(t.reward).toBe(t.score); // tool_score_reward: none, as in verl
    expectReleasedOnce(tool);
    // calc_reward runs before release.
    expect(tool.events.map((e) => e.op)).toEqual(["create", "execute", "execute", "execute", "calc_reward", "release"]);
  });

  it("passes each step its kwargs from tools_kwargs, and the agent data to execute", async () => {
    const { ctx, tool } = await setup(threeCalls);
    await runTrajectory(sampleOf(0), ctx);
    // Spread, as verl's SGLang rollout calls it: create(request_id, **create_kwargs).
    expect(tool.of("create")[0]!.kwargs).toEqual({ start: "c" });
    expect(tool.of("calc_reward")[0]!.kwargs).toEqual({ weight: "r" });
    expect(tool.of("release")[0]!.kwargs).toEqual({ why: "x" });
    const executes = tool.of("execute") as Array<Extract<Event, { op: "execute" }>>;
    for (const [i, e] of executes.entries()) {
      expect(e.ctx.kwargs).toEqual({ mode: "e" });
      expect(e.ctx.agentData!.trajectoryId).toBe("0:0");
      expect(e.ctx.agentData!.turn).toBe(i);
      const messages = e.ctx.agentData!.messages as Array<{ role: string }>;
      expect(messages.at(-1)!.role).toBe("assistant"); // the calling turn
      expect(messages.filter((m) => m.role === "tool")).toHaveLength(i);
    }
  });

  it("gives each trajectory its own instance", async () => {
    const { ctx, tool } = await setup(threeCalls);
    const [a, b] = await Promise.all([runTrajectory(sampleOf(0), ctx), runTrajectory(sampleOf(1), ctx)]);
    for (const t of [a!, b!]) {
      expect(t.calls.map((c) => c.response)).toEqual(["count=1", "count=2", "count=3"]);
      expect(t.tool_scores).toEqual({ counter: 3 });
    }
    expect(tool.of("create")).toHaveLength(2);
    const trajectoriesOf = (id: string) =>
      new Set((tool.of("execute") as Array<Extract<Event, { op: "execute" }>>).filter((e) => e.id === id).map((e) => e.ctx.agentData!.trajectoryId));
    const [first, second] = tool.of("create").map((e) => e.id);
    expect(trajectoriesOf(first!).size).toBe(1);
    expect(trajectoriesOf(second!).size).toBe(1);
    expectReleasedOnce(tool);
  });

  it("creates a tool missing from tools_kwargs at its first call, with empty kwargs", async () => {
    const { ctx, other } = await setup({ respond: (ids) => (toolTurns(ids) < 2 ? callTurn("other") : answerTurn()) });
    const t = await runTrajectory(sampleOf(0), ctx);
    expect(t.calls.map((c) => c.response)).toEqual(["count=1", "count=2"]);
    expect(other.of("create")).toEqual([{ op: "create", id: "other-0", kwargs: {} }]);
    expect(t.tool_scores).toEqual({ counter: 0, other: 2 });
    expectReleasedOnce(other);
  });

  it("shows the tool scores in agentrl inspect", async () => {
    const { ctx } = await setup(threeCalls);
    const view = buildShowView(await runTrajectory(sampleOf(0), ctx));
    expect(view.reward.tool_scores).toEqual({ counter: 3 });
    const text = renderShow(view, { color: false, width: 200 }, { full: true, maxChars: 1000 });
    expect(text).toContain("tool scores {counter 3}");
  });

  it("adds the tool scores to the reward with tool_score_reward: sum", async () => {
    const { ctx } = await setup(threeCalls, { tool_score_reward: "sum" });
    const t = await runTrajectory(sampleOf(0), ctx);
    expect(t.score).toBe(1); // "#### 3" is right
    expect(t.reward).toBe(4);
  });
});

describe("release runs exactly once per instance on every exit path", () => {
  it("truncated by length", async () => {
    const long = Array(400).fill(model.encode("a")[0]!);
    const { ctx, tool } = await setup({ respond: (ids) => (toolTurns(ids) < 1 ? callTurn("counter") : long) }, {}, { maxResponseLength: 128 });
    const t = await runTrajectory(sampleOf(0), ctx);
    expect([t.status, t.finish_reason]).toEqual(["truncated", "length"]);
    expect(t.tool_scores).toEqual({ counter: 1 });
    expectReleasedOnce(tool);
  });

  it("failed: the server errors", async () => {
    const { ctx, tool } = await setup({ ...threeCalls, faults: { queue: [null, { type: "status", status: 500 }] } });
    const t = await runTrajectory(sampleOf(0), ctx);
    expect([t.status, t.finish_reason]).toEqual(["failed", "error"]);
    expect(t.calls).toHaveLength(1);
    expectReleasedOnce(tool);
  });

  it("failed before any call: the instance from tools_kwargs is still released", async () => {
    const { ctx, tool } = await setup({ ...threeCalls, faults: { queue: [{ type: "status", status: 500 }] } });
    const t = await runTrajectory(sampleOf(0), ctx);
    expect(t.status).toBe("failed");
    expect(tool.of("create")).toHaveLength(1);
    expectReleasedOnce(tool);
  });

  it("aborted by trajectory_timeout", async () => {
    const { ctx, tool } = await setup({ ...threeCalls, faults: { queue: [null, { type: "hang" }] } }, {}, { trajectory_timeout: 0.5 });
    const t = await runTrajectory(sampleOf(0), ctx);
    expect([t.status, t.finish_reason]).toEqual(["aborted", "deadline"]);
    expect(t.tool_scores).toEqual({ counter: 1 });
    expectReleasedOnce(tool);
  });

  it("aborted by over-sampling", async () => {
    const { ctx, tool, abort } = await setup({ ...threeCalls, faults: { queue: [null, { type: "hang" }] } });
    tool.onExecute = () => setTimeout(() => abort.abort(new OverSampleAbort(1, 2)), 50);
    const t = await runTrajectory(sampleOf(0), ctx);
    expect([t.status, t.finish_reason]).toEqual(["aborted", "over_sample"]);
    expectReleasedOnce(tool);
  });

  it("cancelled (Ctrl-C)", async () => {
    const { ctx, tool, abort } = await setup({ ...threeCalls, faults: { queue: [null, { type: "hang" }] } });
    tool.onExecute = () => setTimeout(() => abort.abort(new Error("SIGINT")), 50);
    const t = await runTrajectory(sampleOf(0), ctx);
    expect([t.status, t.finish_reason]).toEqual(["aborted", "cancelled"]);
    expectReleasedOnce(tool);
  });

  it("cancelled before the trajectory starts", async () => {
    const { ctx, tool, abort } = await setup(threeCalls);
    abort.abort(new Error("SIGINT"));
    const t = await runTrajectory(sampleOf(0), ctx);
    expect(t.status).toBe("aborted");
    expectReleasedOnce(tool);
  });
});

describe("tool_lifetime: call", () => {
  it("runs every call on a fresh instance with its kwargs, and takes no calc_reward", async () => {
    const { ctx, tool } = await setup(threeCalls, { tool_lifetime: "call" });
    const t = await runTrajectory(sampleOf(0), ctx);
    expect(t.calls.map((c) => c.response)).toEqual(["count=1", "count=1", "count=1"]);
    expect(tool.of("create")).toHaveLength(3);
    expect(tool.of("calc_reward")).toHaveLength(0);
    expect(t.tool_scores).toBeNull();
    for (const e of tool.of("create")) expect(e.kwargs).toEqual({ create_kwargs: { start: "c" } });
    for (const e of tool.of("execute") as Array<Extract<Event, { op: "execute" }>>) expect(e.ctx.kwargs).toEqual({ mode: "e" });
    expectReleasedOnce(tool);
  });
});
