import { readFileSync } from "node:fs";
import path from "node:path";
import { SHARED } from "./cli.js";

/** The first `count` GSM8K rows of `split` as "question\nanswer": the words a rollout meets, most of them many times. */
export function gsm8kTexts(count: number, split: "train" | "test" = "train"): string[] {
  const lines = readFileSync(path.join(SHARED, "datasets", "gsm8k", `${split}.jsonl`), "utf8").split("\n");
  return lines.slice(0, count).filter(Boolean).map((line) => {
    const row = JSON.parse(line) as { question: string; answer: string };
    return `${row.question}\n${row.answer}`;
  });
}
