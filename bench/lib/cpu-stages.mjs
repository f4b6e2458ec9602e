/**
 * Where the rollout client's CPU goes, by stage of a turn: runs a function under V8's sampling profiler (in this
 * process, through node:inspector) and files every sample under the innermost stage function on its stack. The
 * stages are agentrl's own functions, matched by name and file in dist/. A sample under none of them goes by the
 * code it was in: undici and Node's internals (sockets, timers, promises), agentrl's scheduling between stages, or
 * another library; the garbage collector is its own row.
 */
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";

/** Stage name, then the [function, file] pairs whose samples it takes (innermost stage on the stack wins). */
export const STAGES = [
  ["HTTP request (body, send, response validation)", [["generate", "engine/client.js"]]],
  ["prompt (template render, encode)", [["openConversation", "rollout/conversation-start.js"]]],
  ["append sampled tokens, turn text", [["appendSampled", "rollout/assistant-turn.js"], ["generateTurn", "rollout/agent-loop.js"]]],
  ["parse tool calls", [["parseToolCalls", "rollout/assistant-turn.js"]]],
  ["tool call", [["executeCalls", "rollout/tool-calls.js"]]],
  ["environment delta (render, encode)", [["appendEnvironment", "chat/conversation.js"]]],
  ["drift check", [["driftCheck", "chat/conversation.js"]]],
  ["reward", [["scoreResponse", "rollout/trajectory-record.js"]]],
  ["record (export, segments, stats)", [["finishTrajectory", "rollout/trajectory-record.js"], ["add", "rollout/stats.js"]]],
  ["trajectory writer (journal, parquet parts, merge)", [["write", "data/trajectory-store.js"], ["flushPart", "data/trajectory-store.js"], ["close", "data/trajectory-store.js"], ["mergeParts", "data/trajectory-store.js"]]],
  ["start and end of a trajectory (tools session, scheduling)", [["runTrajectory", "rollout/run-trajectory.js"], ["work", "rollout/run-rollout.js"]]],
];
const GC = "garbage collector";
const NODE = "undici, sockets, timers, promises (outside any stage)";
const OURS = "agentrl between stages (slots, agent loop, scheduling)";
const LIBS = "other libraries (outside any stage)";

/** Where a sample under no stage was, by the file of its innermost frame. */
function restOf(frame) {
  if (frame.url.includes("/dist/")) return OURS;
  if (frame.url === "" || frame.url.startsWith("node:") || frame.url.includes("/undici/")) return NODE;
  return LIBS;
}

/** Runs `fn` under the profiler; resolves to { result, shares: Map(stage → fraction of the samples) }. */
export async function profileStages(fn) {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 200 });
  await session.post("Profiler.start");
  let result;
  let profile;
  try {
    result = await fn();
  } finally {
    ({ profile } = await session.post("Profiler.stop"));
    session.disconnect();
  }
  // BENCH_CPU_PROFILE=FILE keeps the raw profile (.cpuprofile: Chrome DevTools and speedscope open it).
  if (process.env.BENCH_CPU_PROFILE) writeFileSync(process.env.BENCH_CPU_PROFILE, JSON.stringify(profile));
  return { result, shares: stageShares(profile) };
}

function stageShares(profile) {
  const parent = new Map();
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const stageOfFrame = (frame) => {
    for (const [name, matchers] of STAGES) {
      if (matchers.some(([fn, file]) => frame.functionName === fn && frame.url.endsWith(`dist/${file}`))) return name;
    }
    return undefined;
  };
  const stageOfNode = new Map();
  /** The innermost stage on the node's stack, or undefined. */
  const stageOf = (id) => {
    if (stageOfNode.has(id)) return stageOfNode.get(id);
    const stage = stageOfFrame(byId.get(id).callFrame) ?? (parent.has(id) ? stageOf(parent.get(id)) : undefined);
    stageOfNode.set(id, stage);
    return stage;
  };
  const sampleStage = (id) => {
    const frame = byId.get(id).callFrame;
    if (frame.functionName === "(garbage collector)") return GC;
    if (frame.functionName === "(idle)") return null;
    return stageOf(id) ?? restOf(frame);
  };
  const counts = new Map();
  let total = 0;
  for (const id of profile.samples) {
    const stage = sampleStage(id);
    if (stage === null) continue;
    counts.set(stage, (counts.get(stage) ?? 0) + 1);
    total += 1;
  }
  const shares = new Map();
  for (const name of [...STAGES.map(([name]) => name), GC, NODE, OURS, LIBS]) shares.set(name, (counts.get(name) ?? 0) / Math.max(1, total));
  return shares;
}
