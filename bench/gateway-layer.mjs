#!/usr/bin/env node
/**
 * The OpenAI gateway's own CPU per request, without the rest of a rollout: the real Gateway (node:http, the body,
 * validation, the reply) and GatewaySession (history match, keys, tools, completion) from dist/, over a stub
 * trajectory (no tokenizer, no engine, no tools: its primitives append to a plain message list), driven by a client
 * process that plays bench/gateway-overhead.mjs's conversation with its agent (bench/lib/gateway-agent.mjs: a GSM8K
 * question, the calc_gsm8k_reward tool, a call then an answer; a kept-alive connection per trajectory), 16 at a time. The CPU is
 * this process's (process.cpuUsage: every thread) and its main thread's (/proc), per request, after a warm-up round;
 * medians over rounds. bench/gateway-overhead.mjs measures the whole CLI, where this layer is one part among the
 * tokenizer, the template, the engine client and the record, and where the machine's load moves every number; this
 * one isolates what a change to src/gateway/ does to it.
 *
 *   npm run build && node bench/gateway-layer.mjs [--rounds 6] [--trajectories 800]
 *   node bench/gateway-layer.mjs --compare OTHER_CHECKOUT    # the two builds alternately, OTHER's dist/ first
 */
import { fork, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { cliNodeFlags } from "./lib/cli-node-flags.mjs";
import { converse } from "./lib/gateway-agent.mjs";
import { median } from "./lib/table-format.mjs";
import { mainThreadCpuUs } from "./lib/thread-cpu.mjs";

const self = fileURLToPath(import.meta.url);
const root = path.resolve(path.dirname(self), "..");
const { values: options } = parseArgs({
  options: {
    rounds: { type: "string", default: "6" },
    trajectories: { type: "string", default: "800" },
    compare: { type: "string" },
    // Internal: the agents' process, and one measurement of one build.
    client: { type: "boolean", default: false },
    measure: { type: "string" },
  },
});
const TOOL = {
  type: "function",
  function: {
    name: "calc_gsm8k_reward",
    description: "A tool for calculating the reward of gsm8k. (1.0 if parsed answer is correct, 0.0 if parsed answer is incorrect or not correctly parsed)",
    parameters: { type: "object", properties: { answer: { type: "string", description: "The model's answer to the GSM8K math problem, must be a digits" } }, required: ["answer"] },
  },
};
const SYSTEM =
  "You are a math expert. You are given a question and you need to solve it step by step. Reasoning step by step before any tool call. You should use the `calc_gsm8k_reward` tool after step by step solving the question, before generate final answer at least once and refine your answer if necessary. Put your final answer in the format of `#### <answer>`.";
const ANSWER = "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18 every day at the farmer's market.\n#### 18";
const CONCURRENCY = 16;

if (options.client) {
  // The agents: each key is one trajectory's conversation on its own connection.
  const questions = readFileSync(path.join(root, "../shared/datasets/gsm8k/test.jsonl"), "utf8").trim().split("\n").map((line) => JSON.parse(line).question);
  process.on("message", async ({ keys, port }) => {
    const row = (i) => ({
      messages: [{ role: "system", content: SYSTEM }, { role: "user", content: `${questions[i % questions.length]} Let's think step by step and output the final answer after \`####\`.` }],
      tools: [TOOL],
      ground_truth: "18",
    });
    let next = 0;
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (next < keys.length) {
        const i = next++;
        await converse(`http://127.0.0.1:${port}/t/${keys[i]}/v1`, keys[i], row(i));
      }
    }));
    process.send("done");
  });
} else if (options.measure) {
  console.log(JSON.stringify(await measure(options.measure, Number(options.rounds), Number(options.trajectories))));
  process.exit(0);
} else {
  const other = options.compare;
  const trees = other ? [path.resolve(other), root] : [root];
  const results = new Map(trees.map((tree) => [tree, []]));
  for (let pass = 0; pass < (other ? 3 : 1); pass++) {
    for (const tree of trees) {
      // A fresh process per measurement, under the CLI's V8 flags, so that neither build warms the other's code.
      const run = spawnSync(process.execPath, [...cliNodeFlags(), self, "--measure", tree, "--rounds", options.rounds, "--trajectories", options.trajectories], { encoding: "utf8" });
      if (run.status !== 0) throw new Error(run.stderr);
      const result = JSON.parse(run.stdout);
      results.get(tree).push(result);
      process.stderr.write(`gateway-layer: ${tree}: ${result.usPerRequest.toFixed(0)} µs per request (main thread ${result.mainUsPerRequest.toFixed(0)})\n`);
    }
  }
  console.log("| build | µs per request, every thread (runs) | main thread |");
  console.log("|---|---|---|");
  for (const [tree, runs] of results) {
    const all = runs.map((r) => r.usPerRequest);
    console.log(`| ${tree} | ${median(all).toFixed(0)} (${all.map((x) => x.toFixed(0)).join(", ")}) | ${median(runs.map((r) => r.mainUsPerRequest)).toFixed(0)} |`);
  }
}

/** The gateway layer of `tree`'s dist/, driven `rounds` times by `trajectories` conversations after one warm-up round. */
async function measure(tree, rounds, trajectories) {
  const { Gateway } = await import(pathToFileURL(path.join(tree, "dist/gateway/server.js")).href);
  const { GatewaySession } = await import(pathToFileURL(path.join(tree, "dist/gateway/session.js")).href);
  const gateway = await Gateway.start("model");
  const client = fork(self, ["--client"]);
  let count = 0;
  const round = async () => {
    const sessions = Array.from({ length: trajectories }, () => {
      const { api, run } = stubTrajectory(String(count++));
      const session = new GatewaySession(Gateway.newKey(), api, run, () => undefined);
      gateway.open(session);
      return session;
    });
    await new Promise((resolve) => {
      client.once("message", resolve);
      client.send({ keys: sessions.map((session) => session.key), port: gateway.port });
    });
    for (const session of sessions) gateway.close(session);
  };
  await round();
  const runs = [];
  for (let r = 0; r < rounds; r++) {
    const cpu = process.cpuUsage();
    const main = mainThreadCpuUs();
    await round();
    const used = process.cpuUsage(cpu);
    runs.push({ all: (used.user + used.system) / (2 * trajectories), main: (mainThreadCpuUs() - main) / (2 * trajectories) });
  }
  client.kill();
  await gateway.stop();
  return { tree, usPerRequest: median(runs.map((r) => r.all)), mainUsPerRequest: median(runs.map((r) => r.main)) };
}

/** A trajectory whose primitives keep a message list: turn 1 calls the tool, turn 2 answers. */
function stubTrajectory(id) {
  const conversation = {
    messages: [],
    assistantTurns: 0,
    totalLength: 0,
    get lastMessage() {
      return this.messages[this.messages.length - 1];
    },
  };
  const run = { id, ctx: { rollout: { temperature: 1, top_p: 1, multi_turn: { max_assistant_turns: null } }, greedy: false }, conversation, log: { assistantFinish: [], versionSpans: [], toolSegments: [], calls: [] } };
  const api = {
    ended: undefined,
    endWith(finish) {
      return (this.ended ??= finish);
    },
    openSequence(messages) {
      conversation.messages = [...messages];
      conversation.totalLength = 400;
      return {};
    },
    append(messages) {
      conversation.messages.push(...messages);
      conversation.totalLength += 30;
      return undefined;
    },
    async generate() {
      const call = { type: "function", function: { name: "calc_gsm8k_reward", arguments: { answer: "18" } } };
      conversation.messages.push(conversation.assistantTurns === 0 ? { role: "assistant", content: "Janet sells 9 eggs.", tool_calls: [call] } : { role: "assistant", content: ANSWER });
      conversation.assistantTurns += 1;
      conversation.totalLength += 60;
      return { ids: new Array(60).fill(7), text: "", finishReason: "stop" };
    },
    parseToolCallsOf() {
      const calls = conversation.lastMessage.tool_calls;
      return calls ? { calls: calls.map((c) => ({ name: c.function.name, arguments: c.function.arguments })), errors: [], normalText: "" } : undefined;
    },
    recordAgentCalls() {},
  };
  return { api, run };
}
