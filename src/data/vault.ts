/**
 * The "vault" task of the CPU demo (docs/cpu-demo.md): every row is a vault with a hidden one-digit code. The prompt
 * names the vault but not the code; the only way to learn it is the `open_vault` tool, which reads the code from the
 * row's tools_kwargs. So calling the tool pays, and the answer can only come from the tool's response.
 *
 * Rows follow verl's schema (data_source, prompt, ability, reward_model, extra_info with tools_kwargs), like the GSM8K
 * tool rows, and are a pure function of (split, index, seed): the same command always writes the same files.
 */
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { Bool, Field, Int64, List, Schema, Struct, Utf8 } from "apache-arrow";
import { refuseExisting, writeFileAtomic } from "./atomic.js";
import { checkOutputPath } from "./output-path.js";
import { seededRandom } from "./random.js";
import { huggingfaceMetadata } from "./hf-features.js";
import { writeParquetRows } from "./parquet.js";

export const VAULT_DATA_SOURCE = "agentrl/vault";
export const VAULT_TOOL_NAME = "open_vault";
/** Letters only: digits in the prompt would look like codes, and the demo tokenizer has only lowercase letters. */
const NAME_LETTERS = "abcdefghijklmnopqrstuvwxyz";

export type VaultSplit = "train" | "test";

/** mulberry32 over a seed mixed from (seed, split, index): each row is independent of how many rows are written. */
function rowRandom(seed: number, split: VaultSplit, index: number): () => number {
  return seededRandom(Math.imul(seed ^ 0x5bd1e995, 0x9e3779b1) ^ Math.imul(index + 1, 0x85ebca6b) ^ (split === "train" ? 0 : 0x27d4eb2f));
}

export interface VaultRow {
  name: string;
  code: string;
}

export function vaultOf(seed: number, split: VaultSplit, index: number): VaultRow {
  const rand = rowRandom(seed, split, index);
  const letter = () => NAME_LETTERS[Math.floor(rand() * NAME_LETTERS.length)]!;
  const name = letter() + letter();
  const code = String(Math.floor(rand() * 10));
  return { name, code };
}

export function vaultPrompt(name: string): string {
  return `what is the code of vault ${name}?`;
}

export function makeVaultRow(split: VaultSplit, index: number, seed: number): Record<string, unknown> {
  const { name, code } = vaultOf(seed, split, index);
  return {
    data_source: VAULT_DATA_SOURCE,
    prompt: [{ role: "user", content: vaultPrompt(name) }],
    ability: "tool",
    reward_model: { style: "rule", ground_truth: code },
    extra_info: {
      split,
      index,
      vault: name,
      need_tools_kwargs: true,
      tools_kwargs: { [VAULT_TOOL_NAME]: { create_kwargs: { code } } },
    },
  };
}

const str = (name: string) => new Field(name, new Utf8(), true);
const struct = (name: string, children: Field[]) => new Field(name, new Struct(children), true);

export function vaultArrowSchema(): Schema {
  return new Schema([
    str("data_source"),
    new Field("prompt", new List(new Field("element", new Struct([str("role"), str("content")]), true)), true),
    str("ability"),
    struct("reward_model", [str("style"), str("ground_truth")]),
    struct("extra_info", [
      str("split"),
      new Field("index", new Int64(), true),
      str("vault"),
      new Field("need_tools_kwargs", new Bool(), true),
      struct("tools_kwargs", [struct(VAULT_TOOL_NAME, [struct("create_kwargs", [str("code")])])]),
    ]),
  ]);
}

/**
 * The open_vault tool schema, as examples/cpu-demo/vault_tool_config.yaml declares it (a test keeps the two equal):
 * demonstrations carry it so the SFT prompt renders exactly as the RL prompt does.
 */
export const VAULT_TOOL_SCHEMA = {
  type: "function",
  function: {
    name: VAULT_TOOL_NAME,
    description: "open the vault and read its code",
    parameters: { type: "object", properties: {}, required: [] },
  },
};

/**
 * Whether the demonstrator misreads this row's code. A draw of its own, so the vault (name, code) does not depend on
 * the demonstrator's accuracy, and the same (seed, index, accuracy) always gives the same answer.
 */
function demonstratorMisreads(seed: number, index: number, accuracy: number): boolean {
  return rowRandom(seed ^ 0x6d697372, "train", index)() >= accuracy;
}

/**
 * A demonstration as a chat conversation for `agentrl sft`: the prompt, the call, the tool's answer, then the
 * demonstrator's answer. With `accuracy` 1 that is the code; below 1 the demonstrator is an imperfect teacher that
 * answers the code with that probability and otherwise misreads it as the next digit (4 -> 5, 9 -> 0): a systematic
 * error that SFT copies and that RL with the correctness reward has to remove (docs/cpu-demo.md). The SFT loss covers
 * the two assistant turns only.
 */
export function vaultDemonstration(split: VaultSplit, index: number, seed: number, accuracy = 1): { messages: unknown[]; tools: unknown[] } {
  const { name, code } = vaultOf(seed, split, index);
  const answer = demonstratorMisreads(seed, index, accuracy) ? String((Number(code) + 1) % 10) : code;
  return {
    messages: [
      { role: "user", content: vaultPrompt(name) },
      { role: "assistant", content: "", tool_calls: [{ type: "function", function: { name: VAULT_TOOL_NAME, arguments: {} } }] },
      { role: "tool", content: code },
      { role: "assistant", content: answer },
    ],
    tools: [VAULT_TOOL_SCHEMA],
  };
}

export interface PreprocessVaultOptions {
  out: string;
  trainRows: number;
  testRows: number;
  seed: number;
  /** Also write sft.jsonl with this many demonstrations (the first train rows). */
  demos?: number;
  /** The demonstrator's accuracy in sft.jsonl (vaultDemonstration); 1 = every answer is the code. */
  demoAccuracy?: number;
  force?: boolean;
}

export interface VaultSplitResult {
  split: VaultSplit | "sft";
  output: string;
  rows: number;
  bytes: number;
}

/** Writes train.parquet and test.parquet under `out`; refuses to overwrite unless `force`. */
export async function preprocessVault(options: PreprocessVaultOptions): Promise<VaultSplitResult[]> {
  const plan: Array<[VaultSplit, number]> = [
    ["train", options.trainRows],
    ["test", options.testRows],
  ];
  const outputs = plan.map(([split]) => path.join(options.out, `${split}.parquet`));
  const demoFile = path.join(options.out, "sft.jsonl");
  if (!options.force) await refuseExisting(options.demos ? [...outputs, demoFile] : outputs);
  await checkOutputPath(options.out, "folder");
  await mkdir(options.out, { recursive: true });
  const schema = vaultArrowSchema();
  const metadata = { huggingface: huggingfaceMetadata(schema) };
  const results: VaultSplitResult[] = [];
  for (const [i, [split, count]] of plan.entries()) {
    const rows = Array.from({ length: count }, (_, index) => makeVaultRow(split, index, options.seed));
    const bytes = await writeParquetRows(outputs[i]!, rows, schema, { compression: "snappy", metadata });
    results.push({ split, output: outputs[i]!, rows: count, bytes });
  }
  if (options.demos) {
    const lines = Array.from({ length: options.demos }, (_, index) => JSON.stringify(vaultDemonstration("train", index, options.seed, options.demoAccuracy)));
    const text = `${lines.join("\n")}\n`;
    await writeFileAtomic(demoFile, text);
    results.push({ split: "sft", output: demoFile, rows: options.demos, bytes: Buffer.byteLength(text) });
  }
  return results;
}
