/**
 * One exit-code contract (issue 15, item 4), as a table of bad inputs run through every command as a user runs it:
 * 2 for bad input (the message names the file, and the line, row or field where there is one), 1 for a failure at
 * run time, 0 only for success. For every case: the exit code, the message, no stack trace, and nothing left behind
 * (the output path the command was given does not exist, the case's working folder is as empty as before).
 *
 * Every case fails before a server, an engine or a worker starts (the commands check their inputs and outputs
 * first), so the table runs in seconds. Permission cases need a user that file modes apply to: as root they run
 * under setpriv without root's override of file permissions, and are skipped where neither is possible.
 * docs/fault-suite.md ("Bad input") lists the categories.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, mkdirSync, readdirSync, statSync, writeFileSync, existsSync } from "node:fs";
import path from "node:path";
import { Field, Schema, Utf8 } from "apache-arrow";
import { beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT, runCli } from "./helpers/cli.js";
import { describeError } from "../src/errors.js";
import { gsm8kArrowSchema, makeGsm8kRow } from "../src/data/gsm8k.js";
import { writeParquetRows } from "../src/data/parquet.js";
import { tempDir } from "./helpers/tmp.js";

const scratch = tempDir("exit-codes");
/** Inputs shared by the cases; never written by a command (checked at the end). */
const fx = path.join(scratch, "fixtures");
/** One empty working folder per case: the command's cwd, where its outputs go. */
const cases = path.join(scratch, "cases");


const DEMO = path.join(REPO_ROOT, "examples", "cpu-demo");
/**
 * The valid model of the cases whose bad input is elsewhere: the demo's (a 64-token tokenizer) rather than a real
 * Qwen3's, whose 150k-token tokenizer costs up to ~1 s of CPU per case that loads it before it fails.
 */
const DEMO_MODEL = path.join(DEMO, "model");
const NO_SERVER = "http://127.0.0.1:9";

/**
 * `text` as UTF-8, with each U+FFFD replaced by a byte that is not UTF-8 (0xFF) and each U+0001 by a 3-byte lead
 * whose second byte is not a continuation (0xE2 0x28 0xA1): the two ways a file in another encoding breaks.
 */
const notUtf8 = (text: string): Buffer =>
  Buffer.concat(
    text.split(/([\uFFFD\u0001])/).map((part) =>
      part === "\uFFFD" ? Buffer.from([0xff]) : part === "\u0001" ? Buffer.from([0xe2, 0x28, 0xa1]) : Buffer.from(part),
    ),
  );

/** Paths of the fixtures, by name. */
const f = (name: string): string => path.join(fx, name);

const gsm8kLine = (q: string) => JSON.stringify({ question: q, answer: "2 + 2 = 4\n#### 4" });
const sftLine = (content: string) =>
  JSON.stringify({ messages: [{ role: "user", content }, { role: "assistant", content: "4" }] });

async function makeFixtures(): Promise<void> {
  mkdirSync(fx, { recursive: true });
  mkdirSync(cases);
  const write = (name: string, data: string | Buffer) => {
    mkdirSync(path.dirname(f(name)), { recursive: true });
    writeFileSync(f(name), data);
  };
  // GSM8K sources (preprocess gsm8k).
  write("gsm8k/not-utf8/train.jsonl", notUtf8(`${gsm8kLine("what is 2 + \uFFFD 2?")}\n`));
  write("gsm8k/not-utf8-line3/train.jsonl", Buffer.concat([Buffer.from(`${gsm8kLine("a")}\n${gsm8kLine("b")}\n`), notUtf8(`${gsm8kLine("c\uFFFD")}\n`)]));
  write("gsm8k/empty/train.jsonl", "");
  write("gsm8k/blank/train.jsonl", "\n  \n\n");
  write("gsm8k/all-invalid/train.jsonl", '{"question": "no answer"}\n{"question": "none either"}\n');
  write("gsm8k/malformed/train.jsonl", `${gsm8kLine("a")}\n{"question": "b", "answer": \n`);
  write("gsm8k/bad-test-split/train.jsonl", `${gsm8kLine("a")}\n`);
  write("gsm8k/bad-test-split/test.jsonl", `${gsm8kLine("b")}\n{"question": "c"}\n`);
  write("gsm8k/no-answer/train.jsonl", '{"question": "2 + 2?"}\n');
  write("gsm8k/no-hashes/train.jsonl", '{"question": "2 + 2?", "answer": "it is 4"}\n');
  write("gsm8k/not-parquet/train.parquet", "this is not parquet\n");
  write("gsm8k/unreadable/train.jsonl", `${gsm8kLine("a")}\n`);
  mkdirSync(f("gsm8k/no-splits"));
  write("a-file", "a file, not a folder\n");
  mkdirSync(f("a-folder"));
  mkdirSync(f("read-only"));
  // Configs.
  write("config/not-utf8.yaml", notUtf8("data:\n  limit: 2 # café \u0001\n"));
  write("config/empty.yaml", "");
  write("config/list.yaml", "- data\n- limit\n");
  write("config/unknown-key.yaml", "data:\n  limt: 2\n");
  write("config/doctor-wrong-type.yaml", "data:\n  max_prompt_length: -1\n");
  write("config/unreadable.yaml", "data: {}\n");
  write("tools/not-utf8.yaml", notUtf8("tools:\n  - class_name: \"agentrl.tools.VaultTool\uFFFD\"\n"));
  write("tools/unknown-class.yaml", [
    "tools:", '  - class_name: "verl.tools.NoSuchTool"', "    config: {type: native}",
    "    tool_schema: {type: function, function: {name: x, description: y, parameters: {type: object, properties: {}, required: []}}}", "",
  ].join("\n"));
  write("interaction/not-utf8.yaml", notUtf8("interaction:\n  - name: gsm8k\uFFFD\n"));
  write("api-key/not-utf8", notUtf8("sk-\uFFFD\n"));
  // Datasets (rollout, train).
  const rows = [makeGsm8kRow({ question: "2 + 2?", answer: "#### 4" }, "4", "train", 0, "tool")];
  await writeParquetRows(f("data/ok.parquet"), rows, gsm8kArrowSchema("tool"));
  await writeParquetRows(f("data/empty.parquet"), [], gsm8kArrowSchema("tool"));
  const raw = new Schema([new Field("question", new Utf8(), true), new Field("answer", new Utf8(), true)]);
  await writeParquetRows(f("data/wrong-schema.parquet"), [{ question: "2 + 2?", answer: "#### 4" }], raw);
  write("data/not-parquet.parquet", "PAR1 this is text\n");
  copyFileSync(f("data/ok.parquet"), f("data/unreadable.parquet"));
  // SFT data.
  write("sft/ok.jsonl", `${sftLine("2 + 2?")}\n`);
  write("sft/not-utf8.jsonl", Buffer.concat([Buffer.from(`${sftLine("a")}\n`), notUtf8(`${sftLine("b\uFFFD")}\n`)]));
  write("sft/empty.jsonl", "");
  write("sft/no-messages.jsonl", '{"conversation": []}\n');
  write("sft/bad-content.jsonl", '{"messages": [{"role": "user", "content": 4}, {"role": "assistant", "content": "4"}]}\n');
  copyFileSync(f("sft/ok.jsonl"), f("sft/unreadable.jsonl"));
  write("sft.yaml", [
    "data:", `  train_files: ${f("sft/ok.jsonl")}`, "  train_batch_size: 1", "  max_length: 256",
    "model:", `  partial_pretrain: ${DEMO_MODEL}`, "trainer:", "  experiment_name: exit-codes", "  total_training_steps: 1", "",
  ].join("\n"));
  write("train.yaml", [
    "data:", `  train_files: ${f("data/ok.parquet")}`, "  train_batch_size: 1",
    "actor_rollout_ref:", "  model:", `    path: ${DEMO_MODEL}`,
    "  rollout:", "    name: embedded", "    multi_turn:", "      format: qwen25", `      tool_config_path: ${path.join(DEMO, "vault_tool_config.yaml")}`,
    "trainer:", "  experiment_name: exit-codes", "  total_training_steps: 1", "",
  ].join("\n"));
  // Chat messages (template), model folders (parse).
  write("messages/not-utf8.json", notUtf8('[{"role": "user", "content": "naïve \u0001"}]'));
  write("messages/empty.json", "");
  write("messages/none.json", "[]");
  write("messages/no-role.json", '[{"content": "hi"}]');
  write("messages/ok.json", '[{"role": "user", "content": "hi"}]');
  write("messages/tools-not-utf8.json", notUtf8('[{"type": "function", "function": {"name": "x\uFFFD"}}]'));
  copyFileSync(f("messages/ok.json"), f("messages/unreadable.json"));
  write("model-not-utf8/tokenizer_config.json", notUtf8('{\n  "chat_template": "{{ x }}\uFFFD"\n}\n'));
  write("model-not-utf8/tokenizer.json", '{"added_tokens": []}\n');
  // Trajectories and run folders (inspect).
  write("traj/not-utf8.jsonl", notUtf8('{"id": "0:0\uFFFD"}\n'));
  write("traj/malformed.jsonl", '{"id": "0:0", \n');
  write("traj/not-parquet.parquet", "not parquet\n");
  write("traj/unreadable.jsonl", "{}\n");
  write("run-not-utf8/metrics.jsonl", Buffer.concat([Buffer.from('{"step": 1, "reward": 0.5}\n'), notUtf8('{"step": 2, "note": "\uFFFD"}\n')]));
  mkdirSync(f("run-not-utf8/rollouts"));

  for (const name of ["gsm8k/unreadable/train.jsonl", "config/unreadable.yaml", "data/unreadable.parquet", "sft/unreadable.jsonl", "messages/unreadable.json", "traj/unreadable.jsonl"]) {
    chmodSync(f(name), 0o000);
  }
  chmodSync(f("read-only"), 0o555);
}

/**
 * How to run a case without root's override of file permissions: as root, setpriv drops CAP_DAC_OVERRIDE and
 * CAP_DAC_READ_SEARCH from the bounding set (the uid stays 0, so the root-owned temp folders stay reachable).
 * Undefined when permissions cannot be made to apply here.
 */
function permissionPrefix(): readonly string[] | undefined {
  if (process.getuid?.() !== 0) return [];
  const prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"];
  const probe = spawnSync(prefix[0]!, [...prefix.slice(1), "true"]);
  return probe.status === 0 ? prefix : undefined;
}
const DENY = permissionPrefix();

type Category =
  | "not UTF-8"
  | "empty dataset"
  | "missing or wrong kind of input path"
  | "output path"
  | "permission"
  | "bad row or field"
  | "bad config"
  | "bad flag"
  | "run-time failure";

interface Case {
  command: string;
  what: string;
  category: Category;
  /** Arguments after `agentrl`; `work` is the case's own empty folder (also the cwd). */
  args: (work: string) => string[];
  code: 1 | 2;
  /** What the message must say: the file, with its line, row or field where there is one. */
  message: (work: string) => RegExp;
  /** The output path the command was given: it must not exist afterwards. */
  output?: (work: string) => string;
  stdin?: Buffer;
  env?: Record<string, string>;
  /** The stream the message is on (doctor prints its report on stdout). */
  stream?: "stdout" | "stderr";
}

/** A path in a message: the regex-escaped text. */
const p = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const NOT_UTF8 = ":\\d+: not valid UTF-8 \\(byte 0x(ff|e2)\\)";
const NOT_A_FOLDER = "a part of the path is not a folder";
const FILE_NOT_FOLDER = (parent: string) => `cannot create it: ${p(parent)} is a file, not a folder`;

const gsm8k = (input: string, ...extra: string[]) => (work: string) => ["preprocess", "gsm8k", "-i", input, "-o", path.join(work, "out"), "--split", "train", ...extra];
const vault = (...extra: string[]) => () => ["preprocess", "vault", "--train-rows", "2", "--test-rows", "1", ...extra];
const rollout = (over: Record<string, string> = {}, ...extra: string[]) => (work: string) => {
  const flags = { "--data": f("data/ok.parquet"), "--model": DEMO_MODEL, "--server": NO_SERVER, "--out": path.join(work, "out.jsonl"), ...over };
  return ["rollout", ...Object.entries(flags).flatMap(([k, v]) => (v === "" ? [] : [k, v])), ...extra];
};
const sft = (...sets: string[]) => (work: string) =>
  ["sft", "--config", f("sft.yaml"), "--set", `trainer.default_local_dir=${path.join(work, "run")}`, ...sets.flatMap((s) => ["--set", s])];
const train = (...sets: string[]) => (work: string) =>
  ["train", "--config", f("train.yaml"), "--set", `trainer.default_local_dir=${path.join(work, "run")}`, ...sets.flatMap((s) => ["--set", s])];
const template = (messages: string, ...extra: string[]) => () => ["template", "--model", DEMO_MODEL, "--messages", messages, ...extra];
const doctor = (...extra: string[]) => () => ["doctor", "--model", DEMO_MODEL, "--server", NO_SERVER, "--timeout", "2", ...extra];
/** serve cases use /bin/false as Python: a missing check would fail later, never start an engine. */
const serve = (...extra: string[]) => () => ["serve", "--engine", "embedded", "--model", DEMO_MODEL, "--port", "0", "--python", "/bin/false", ...extra];
const run = (work: string) => path.join(work, "run");
const out = (name: string) => (work: string) => path.join(work, name);

const TABLE: Case[] = [
  // ---- preprocess gsm8k ----
  { command: "preprocess gsm8k", what: "a source line that is not UTF-8", category: "not UTF-8", args: gsm8k(f("gsm8k/not-utf8/train.jsonl")), code: 2, message: () => new RegExp(`${p(f("gsm8k/not-utf8/train.jsonl"))}:1${NOT_UTF8}`), output: out("out") },
  { command: "preprocess gsm8k", what: "line 3 not UTF-8 after two good lines", category: "not UTF-8", args: gsm8k(f("gsm8k/not-utf8-line3/train.jsonl")), code: 2, message: () => new RegExp(`train\\.jsonl:3${NOT_UTF8}`), output: out("out") },
  { command: "preprocess gsm8k", what: "not UTF-8 is not skipped by --skip-invalid", category: "not UTF-8", args: gsm8k(f("gsm8k/not-utf8/train.jsonl"), "--skip-invalid"), code: 2, message: () => new RegExp(`train\\.jsonl:1${NOT_UTF8}`), output: out("out") },
  { command: "preprocess gsm8k", what: "an empty source file", category: "empty dataset", args: gsm8k(f("gsm8k/empty/train.jsonl")), code: 2, message: () => new RegExp(`${p(f("gsm8k/empty/train.jsonl"))}: no rows`), output: out("out") },
  { command: "preprocess gsm8k", what: "a source of blank lines", category: "empty dataset", args: gsm8k(f("gsm8k/blank/train.jsonl")), code: 2, message: () => /blank\/train\.jsonl: no rows/, output: out("out") },
  { command: "preprocess gsm8k", what: "every record skipped as invalid", category: "empty dataset", args: gsm8k(f("gsm8k/all-invalid/train.jsonl"), "--skip-invalid"), code: 2, message: () => /all-invalid\/train\.jsonl: no valid rows \(all 2 skipped as invalid\)/, output: out("out") },
  { command: "preprocess gsm8k", what: "malformed JSON on line 2", category: "bad row or field", args: gsm8k(f("gsm8k/malformed/train.jsonl")), code: 2, message: () => /malformed\/train\.jsonl:2: malformed JSON/, output: out("out") },
  { command: "preprocess gsm8k", what: "a bad test record after train.parquet is written", category: "bad row or field", args: (w) => ["preprocess", "gsm8k", "-i", f("gsm8k/bad-test-split"), "-o", path.join(w, "out", "gsm8k")], code: 2, message: () => /bad-test-split\/test\.jsonl:2: answer: /, output: out("out") },
  { command: "preprocess gsm8k", what: "a record without answer", category: "bad row or field", args: gsm8k(f("gsm8k/no-answer/train.jsonl")), code: 2, message: () => /no-answer\/train\.jsonl:1: answer: /, output: out("out") },
  { command: "preprocess gsm8k", what: "an answer without '####'", category: "bad row or field", args: gsm8k(f("gsm8k/no-hashes/train.jsonl")), code: 2, message: () => /no-hashes\/train\.jsonl:1: answer: no '#### <number>'/, output: out("out") },
  { command: "preprocess gsm8k", what: "--input a .parquet that is not parquet", category: "bad row or field", args: gsm8k(f("gsm8k/not-parquet/train.parquet")), code: 2, message: () => /not-parquet\/train\.parquet: not a readable parquet file/, output: out("out") },
  { command: "preprocess gsm8k", what: "--input below a file", category: "missing or wrong kind of input path", args: gsm8k(f("a-file/train.jsonl")), code: 2, message: () => new RegExp(`${p(f("a-file/train.jsonl"))}: ${NOT_A_FOLDER}`), output: out("out") },
  { command: "preprocess gsm8k", what: "--input a folder without splits", category: "missing or wrong kind of input path", args: gsm8k(f("gsm8k/no-splits")), code: 2, message: () => new RegExp(`--input ${p(f("gsm8k/no-splits"))}: no train split found`), output: out("out") },
  { command: "preprocess gsm8k", what: "--input missing", category: "missing or wrong kind of input path", args: gsm8k(f("gsm8k/nothing-here")), code: 2, message: () => /nothing-here: no such file or folder/, output: out("out") },
  { command: "preprocess gsm8k", what: "--out below a file", category: "output path", args: () => ["preprocess", "gsm8k", "-i", f("gsm8k/malformed/train.jsonl"), "-o", f("a-file/out"), "--split", "train", "--skip-invalid"], code: 2, message: () => new RegExp(`${p(f("a-file/out"))}: ${FILE_NOT_FOLDER(f("a-file"))}`), output: () => f("a-file/out") },
  { command: "preprocess gsm8k", what: "--out an existing file", category: "output path", args: () => ["preprocess", "gsm8k", "-i", f("gsm8k/malformed/train.jsonl"), "-o", f("a-file"), "--split", "train", "--skip-invalid"], code: 2, message: () => new RegExp(`${p(f("a-file"))}: is a file, expected a folder`) },
  { command: "preprocess gsm8k", what: "--limit 0", category: "bad flag", args: gsm8k(f("gsm8k/malformed/train.jsonl"), "--limit", "0"), code: 2, message: () => /--limit/, output: out("out") },
  { command: "preprocess gsm8k", what: "--variant unknown", category: "bad flag", args: gsm8k(f("gsm8k/malformed/train.jsonl"), "--variant", "chat"), code: 2, message: () => /--variant/, output: out("out") },
  { command: "preprocess gsm8k", what: "--input unreadable", category: "permission", args: gsm8k(f("gsm8k/unreadable/train.jsonl")), code: 2, message: () => /unreadable\/train\.jsonl: permission denied/, output: out("out") },
  { command: "preprocess gsm8k", what: "--out in a read-only folder", category: "permission", args: () => ["preprocess", "gsm8k", "-i", f("gsm8k/malformed/train.jsonl"), "-o", f("read-only/out"), "--split", "train", "--skip-invalid"], code: 2, message: () => new RegExp(`${p(f("read-only/out"))}: cannot write in ${p(f("read-only"))}: permission denied`), output: () => f("read-only/out") },

  // ---- preprocess vault ----
  { command: "preprocess vault", what: "--out below a file", category: "output path", args: () => [...vault()(), "--out", f("a-file/vault")], code: 2, message: () => new RegExp(`${p(f("a-file/vault"))}: ${FILE_NOT_FOLDER(f("a-file"))}`), output: () => f("a-file/vault") },
  { command: "preprocess vault", what: "--out an existing file", category: "output path", args: () => [...vault()(), "--out", f("a-file")], code: 2, message: () => new RegExp(`${p(f("a-file"))}: is a file, expected a folder`) },
  { command: "preprocess vault", what: "--train-rows 0", category: "bad flag", args: (w) => [...vault()(), "--out", out("vault")(w), "--train-rows", "0"], code: 2, message: () => /--train-rows/, output: out("vault") },
  { command: "preprocess vault", what: "--demo-accuracy 1.5", category: "bad flag", args: (w) => [...vault()(), "--out", out("vault")(w), "--demos", "2", "--demo-accuracy", "1.5"], code: 2, message: () => /--demo-accuracy/, output: out("vault") },
  { command: "preprocess vault", what: "--seed not a number", category: "bad flag", args: (w) => [...vault()(), "--out", out("vault")(w), "--seed", "abc"], code: 2, message: () => /--seed/, output: out("vault") },
  { command: "preprocess vault", what: "--out in a read-only folder", category: "permission", args: () => [...vault()(), "--out", f("read-only/vault")], code: 2, message: () => new RegExp(`${p(f("read-only/vault"))}: cannot write in ${p(f("read-only"))}: permission denied`), output: () => f("read-only/vault") },

  // ---- rollout ----
  { command: "rollout", what: "--config not UTF-8", category: "not UTF-8", args: (w) => [...rollout()(w), "--config", f("config/not-utf8.yaml")], code: 2, message: () => new RegExp(`${p(f("config/not-utf8.yaml"))}:2:19: not valid UTF-8 \\(byte 0xe2\\)`), output: out("out.jsonl") },
  { command: "rollout", what: "--tools not UTF-8", category: "not UTF-8", args: rollout({ "--tools": f("tools/not-utf8.yaml") }), code: 2, message: () => new RegExp(`${p(f("tools/not-utf8.yaml"))}:2${NOT_UTF8}`), output: out("out.jsonl") },
  { command: "rollout", what: "--interaction not UTF-8", category: "not UTF-8", args: rollout({ "--interaction": f("interaction/not-utf8.yaml") }), code: 2, message: () => new RegExp(`${p(f("interaction/not-utf8.yaml"))}:2${NOT_UTF8}`), output: out("out.jsonl") },
  { command: "rollout", what: "the API key file not UTF-8", category: "not UTF-8", args: rollout(), env: { SGLANG_API_KEY: "", SGLANG_API_KEY_FILE: f("api-key/not-utf8") }, code: 2, message: () => new RegExp(`${p(f("api-key/not-utf8"))}:1${NOT_UTF8}`), output: out("out.jsonl") },
  { command: "rollout", what: "--data without rows", category: "empty dataset", args: rollout({ "--data": f("data/empty.parquet") }), code: 2, message: () => new RegExp(`${p(f("data/empty.parquet"))}: the dataset has no rows`), output: out("out.jsonl") },
  { command: "rollout", what: "--config a folder", category: "missing or wrong kind of input path", args: (w) => [...rollout()(w), "--config", f("a-folder")], code: 2, message: () => new RegExp(`${p(f("a-folder"))}: is a folder`), output: out("out.jsonl") },
  { command: "rollout", what: "--config below a file", category: "missing or wrong kind of input path", args: (w) => [...rollout()(w), "--config", f("a-file/rollout.yaml")], code: 2, message: () => new RegExp(`${p(f("a-file/rollout.yaml"))}: ${NOT_A_FOLDER}`), output: out("out.jsonl") },
  { command: "rollout", what: "--data a folder", category: "missing or wrong kind of input path", args: rollout({ "--data": f("a-folder") }), code: 2, message: () => new RegExp(`${p(f("a-folder"))}: is a folder, expected a \\.parquet file`), output: out("out.jsonl") },
  { command: "rollout", what: "--data below a file", category: "missing or wrong kind of input path", args: rollout({ "--data": f("a-file/data.parquet") }), code: 2, message: () => new RegExp(`${p(f("a-file/data.parquet"))}: ${NOT_A_FOLDER}`), output: out("out.jsonl") },
  { command: "rollout", what: "--data missing", category: "missing or wrong kind of input path", args: rollout({ "--data": f("data/missing.parquet") }), code: 2, message: () => /data\/missing\.parquet: no such file/, output: out("out.jsonl") },
  { command: "rollout", what: "--tools missing", category: "missing or wrong kind of input path", args: rollout({ "--tools": f("tools/missing.yaml") }), code: 2, message: () => /tools\/missing\.yaml: no such file/, output: out("out.jsonl") },
  { command: "rollout", what: "--model missing", category: "missing or wrong kind of input path", args: rollout({ "--model": f("no-model") }), code: 2, message: () => new RegExp(`${p(f("no-model/tokenizer.json"))}: no such file`), output: out("out.jsonl") },
  { command: "rollout", what: "--config empty", category: "bad config", args: (w) => [...rollout()(w), "--config", f("config/empty.yaml")], code: 2, message: () => new RegExp(`${p(f("config/empty.yaml"))}: `), output: out("out.jsonl") },
  { command: "rollout", what: "--config a YAML list", category: "bad config", args: (w) => [...rollout()(w), "--config", f("config/list.yaml")], code: 2, message: () => new RegExp(`${p(f("config/list.yaml"))}: the config must be a YAML mapping`), output: out("out.jsonl") },
  { command: "rollout", what: "--config with a misspelled key", category: "bad config", args: (w) => [...rollout()(w), "--config", f("config/unknown-key.yaml")], code: 2, message: () => /unknown-key\.yaml: invalid config\n\s+data\.limt: unknown key \(did you mean data\.limit\?\)/, output: out("out.jsonl") },
  { command: "rollout", what: "--data of the wrong schema", category: "bad row or field", args: rollout({ "--data": f("data/wrong-schema.parquet") }), code: 2, message: () => /wrong-schema\.parquet: row 0: data_source/, output: out("out.jsonl") },
  { command: "rollout", what: "--out below a file", category: "output path", args: rollout({ "--out": f("a-file/out.jsonl") }), code: 2, message: () => new RegExp(`${p(f("a-file/out.jsonl"))}: ${FILE_NOT_FOLDER(f("a-file"))}`), output: () => f("a-file/out.jsonl") },
  { command: "rollout", what: "--out a folder", category: "output path", args: rollout({ "--out": f("a-folder") }), code: 2, message: () => new RegExp(`${p(f("a-folder"))}: is a folder, expected a file`) },
  { command: "rollout", what: "--n 0", category: "bad flag", args: rollout({}, "--n", "0"), code: 2, message: () => /--n/, output: out("out.jsonl") },
  { command: "rollout", what: "no --data", category: "bad flag", args: rollout({ "--data": "" }), code: 2, message: () => /no dataset given[\s\S]*--data/, output: out("out.jsonl") },
  { command: "rollout", what: "--data unreadable", category: "permission", args: rollout({ "--data": f("data/unreadable.parquet") }), code: 2, message: () => /data\/unreadable\.parquet: permission denied/, output: out("out.jsonl") },
  { command: "rollout", what: "--out in a read-only folder", category: "permission", args: rollout({ "--out": f("read-only/out.jsonl") }), code: 2, message: () => new RegExp(`${p(f("read-only/out.jsonl"))}: cannot write in ${p(f("read-only"))}: permission denied`), output: () => f("read-only/out.jsonl") },

  // ---- sft (no --dry-run: each would start the worker if its input were not checked first) ----
  { command: "sft", what: "--config not UTF-8", category: "not UTF-8", args: () => ["sft", "--config", f("config/not-utf8.yaml")], code: 2, message: () => new RegExp(`not-utf8\\.yaml:2${NOT_UTF8}`) },
  { command: "sft", what: "data.train_files line 2 not UTF-8", category: "not UTF-8", args: sft(`data.train_files=${f("sft/not-utf8.jsonl")}`), code: 2, message: () => new RegExp(`${p(f("sft/not-utf8.jsonl"))}:2${NOT_UTF8}`), output: run },
  { command: "sft", what: "data.train_files empty", category: "empty dataset", args: sft(`data.train_files=${f("sft/empty.jsonl")}`), code: 2, message: () => new RegExp(`${p(f("sft/empty.jsonl"))}: no conversation to train on`), output: run },
  { command: "sft", what: "data.val_files empty", category: "empty dataset", args: sft(`data.val_files=${f("sft/empty.jsonl")}`), code: 2, message: () => new RegExp(`${p(f("sft/empty.jsonl"))}: no conversation to validate on`), output: run },
  { command: "sft", what: "data.train_files a folder", category: "missing or wrong kind of input path", args: sft(`data.train_files=${f("a-folder")}`), code: 2, message: () => new RegExp(`${p(f("a-folder"))}: is a folder`), output: run },
  { command: "sft", what: "data.train_files below a file", category: "missing or wrong kind of input path", args: sft(`data.train_files=${f("a-file/sft.jsonl")}`), code: 2, message: () => new RegExp(`${p(f("a-file/sft.jsonl"))}: ${NOT_A_FOLDER}`), output: run },
  { command: "sft", what: "data.train_files missing", category: "missing or wrong kind of input path", args: sft(`data.train_files=${f("sft/missing.jsonl")}`), code: 2, message: () => /sft\/missing\.jsonl: no such file/, output: run },
  { command: "sft", what: "model.partial_pretrain missing", category: "missing or wrong kind of input path", args: sft(`model.partial_pretrain=${f("no-model")}`), code: 2, message: () => /no-model\/tokenizer\.json: no such file/, output: run },
  { command: "sft", what: "a row without messages", category: "bad row or field", args: sft(`data.train_files=${f("sft/no-messages.jsonl")}`), code: 2, message: () => /no-messages\.jsonl: line 1: no messages column/, output: run },
  { command: "sft", what: "a message whose content is a number", category: "bad row or field", args: sft(`data.train_files=${f("sft/bad-content.jsonl")}`), code: 2, message: () => /bad-content\.jsonl: line 1: messages\[0\]\.content: /, output: run },
  { command: "sft", what: "a misspelled key", category: "bad config", args: sft("optim.learning_rate=1"), code: 2, message: () => /sft\.yaml: invalid config\n\s+optim\.learning_rate: unknown key/, output: run },
  { command: "sft", what: "trainer.default_local_dir below a file", category: "output path", args: (w) => [...sft()(w), "--set", `trainer.default_local_dir=${f("a-file/run")}`], code: 2, message: () => new RegExp(`${p(f("a-file/run"))}: ${FILE_NOT_FOLDER(f("a-file"))}`), output: () => f("a-file/run") },
  { command: "sft", what: "data.train_files unreadable", category: "permission", args: sft(`data.train_files=${f("sft/unreadable.jsonl")}`), code: 2, message: () => /sft\/unreadable\.jsonl: permission denied/, output: run },

  // ---- train (no --dry-run: each would start the engine and the worker if its input were not checked first) ----
  { command: "train", what: "--config not UTF-8", category: "not UTF-8", args: () => ["train", "--config", f("config/not-utf8.yaml")], code: 2, message: () => new RegExp(`not-utf8\\.yaml:2${NOT_UTF8}`) },
  { command: "train", what: "the tool config not UTF-8", category: "not UTF-8", args: train(`actor_rollout_ref.rollout.multi_turn.tool_config_path=${f("tools/not-utf8.yaml")}`), code: 2, message: () => new RegExp(`${p(f("tools/not-utf8.yaml"))}:2${NOT_UTF8}`), output: run },
  { command: "train", what: "the interaction config not UTF-8", category: "not UTF-8", args: train(`actor_rollout_ref.rollout.multi_turn.interaction_config_path=${f("interaction/not-utf8.yaml")}`), code: 2, message: () => new RegExp(`${p(f("interaction/not-utf8.yaml"))}:2${NOT_UTF8}`), output: run },
  { command: "train", what: "data.train_files without rows", category: "empty dataset", args: train(`data.train_files=${f("data/empty.parquet")}`), code: 2, message: () => new RegExp(`${p(f("data/empty.parquet"))}: the dataset has no rows`), output: run },
  { command: "train", what: "data.val_files without rows", category: "empty dataset", args: train(`data.val_files=${f("data/empty.parquet")}`), code: 2, message: () => new RegExp(`${p(f("data/empty.parquet"))}: the dataset has no rows`), output: run },
  { command: "train", what: "data.train_files a folder", category: "missing or wrong kind of input path", args: train(`data.train_files=${f("a-folder")}`), code: 2, message: () => new RegExp(`${p(f("a-folder"))}: is a folder`), output: run },
  { command: "train", what: "data.val_files below a file", category: "missing or wrong kind of input path", args: train(`data.val_files=${f("a-file/val.parquet")}`), code: 2, message: () => new RegExp(`${p(f("a-file/val.parquet"))}: ${NOT_A_FOLDER}`), output: run },
  { command: "train", what: "actor_rollout_ref.model.path missing", category: "missing or wrong kind of input path", args: train(`actor_rollout_ref.model.path=${f("no-model")}`), code: 2, message: () => /no-model\/tokenizer\.json: no such file/, output: run },
  { command: "train", what: "data.train_files not parquet", category: "bad row or field", args: train(`data.train_files=${f("data/not-parquet.parquet")}`), code: 2, message: () => /not-parquet\.parquet: not a readable parquet file/, output: run },
  { command: "train", what: "data.train_files of the wrong schema", category: "bad row or field", args: train(`data.train_files=${f("data/wrong-schema.parquet")}`), code: 2, message: () => /wrong-schema\.parquet: row 0: data_source/, output: run },
  { command: "train", what: "trainer.default_local_dir below a file", category: "output path", args: (w) => [...train()(w), "--set", `trainer.default_local_dir=${f("a-file/run")}`], code: 2, message: () => new RegExp(`${p(f("a-file/run"))}: ${FILE_NOT_FOLDER(f("a-file"))}`), output: () => f("a-file/run") },
  { command: "train", what: "a tool config naming an unknown class (found before the run folder is made)", category: "bad config", args: train(`actor_rollout_ref.rollout.multi_turn.tool_config_path=${f("tools/unknown-class.yaml")}`), code: 2, message: () => /unknown-class\.yaml: tools\.0\.class_name: unknown tool class "verl\.tools\.NoSuchTool"/, output: run },
  { command: "train", what: "no --config", category: "bad flag", args: () => ["train"], code: 2, message: () => /no config given[\s\S]*--config/ },
  { command: "train", what: "data.train_files unreadable", category: "permission", args: train(`data.train_files=${f("data/unreadable.parquet")}`), code: 2, message: () => /data\/unreadable\.parquet: permission denied/, output: run },
  { command: "train", what: "--config unreadable", category: "permission", args: () => ["train", "--config", f("config/unreadable.yaml")], code: 2, message: () => /config\/unreadable\.yaml: permission denied/ },

  // ---- inspect ----
  { command: "inspect", what: "a trajectory file not UTF-8", category: "not UTF-8", args: () => ["inspect", f("traj/not-utf8.jsonl")], code: 2, message: () => new RegExp(`${p(f("traj/not-utf8.jsonl"))}:1${NOT_UTF8}`) },
  { command: "inspect", what: "a run folder's metrics.jsonl not UTF-8 on line 2", category: "not UTF-8", args: () => ["inspect", f("run-not-utf8")], code: 2, message: () => new RegExp(`${p(f("run-not-utf8/metrics.jsonl"))}:2${NOT_UTF8}`) },
  { command: "inspect", what: "a trajectory file of malformed JSON", category: "bad row or field", args: () => ["inspect", f("traj/malformed.jsonl")], code: 2, message: () => /malformed\.jsonl: not a trajectory file \(.*malformed\.jsonl:1: malformed JSON/ },
  { command: "inspect", what: "a .parquet that is not parquet", category: "bad row or field", args: () => ["inspect", f("traj/not-parquet.parquet")], code: 2, message: () => /not-parquet\.parquet: not a (trajectory|readable parquet) file/ },
  { command: "inspect", what: "a missing path", category: "missing or wrong kind of input path", args: () => ["inspect", f("traj/missing.jsonl")], code: 2, message: () => /traj\/missing\.jsonl: no such file/ },
  { command: "inspect", what: "a path below a file", category: "missing or wrong kind of input path", args: () => ["inspect", f("a-file/x.jsonl")], code: 2, message: () => new RegExp(`${p(f("a-file/x.jsonl"))}: ${NOT_A_FOLDER}`) },
  { command: "inspect", what: "a folder that is not a run folder", category: "missing or wrong kind of input path", args: () => ["inspect", f("a-folder")], code: 2, message: () => /a-folder: a folder that is neither a run folder/ },
  { command: "inspect", what: "--where without an operator", category: "bad flag", args: () => ["inspect", f("traj/malformed.jsonl"), "--where", "reward"], code: 2, message: () => /--where|reward/ },
  { command: "inspect", what: "an unreadable trajectory file", category: "permission", args: () => ["inspect", f("traj/unreadable.jsonl")], code: 2, message: () => /traj\/unreadable\.jsonl: permission denied/ },

  // ---- serve ----
  { command: "serve", what: "--model missing", category: "missing or wrong kind of input path", args: () => [...serve()(), "--model", f("no-model")], code: 2, message: () => /no-model: not a model folder/ },
  { command: "serve", what: "--model a file", category: "missing or wrong kind of input path", args: () => [...serve()(), "--model", f("a-file")], code: 2, message: () => /a-file: not a model folder/ },
  { command: "serve", what: "--log-file below a file", category: "output path", args: () => [...serve()(), "--log-file", f("a-file/engine.log")], code: 2, message: () => new RegExp(`${p(f("a-file/engine.log"))}: ${FILE_NOT_FOLDER(f("a-file"))}`), output: () => f("a-file/engine.log") },
  { command: "serve", what: "--log-file a folder", category: "output path", args: () => [...serve()(), "--log-file", f("a-folder")], code: 2, message: () => new RegExp(`${p(f("a-folder"))}: is a folder, expected a file`) },
  { command: "serve", what: "--engine unknown", category: "bad flag", args: () => ["serve", "--engine", "vllm", "--model", DEMO_MODEL], code: 2, message: () => /--engine must be embedded or sglang, got 'vllm'/ },
  { command: "serve", what: "--port 70000", category: "bad flag", args: () => [...serve()(), "--port", "70000"], code: 2, message: () => /--port/ },
  { command: "serve", what: "--log-file in a read-only folder", category: "permission", args: () => [...serve()(), "--log-file", f("read-only/engine.log")], code: 2, message: () => new RegExp(`${p(f("read-only/engine.log"))}: cannot write in ${p(f("read-only"))}: permission denied`), output: () => f("read-only/engine.log") },
  { command: "serve", what: "--python missing", category: "missing or wrong kind of input path", args: () => [...serve()(), "--python", f("no-python/bin/python")], code: 2, message: () => new RegExp(`${p(f("no-python/bin/python"))}: no such file`) },
  { command: "serve", what: "--python a folder", category: "missing or wrong kind of input path", args: () => [...serve()(), "--python", f("a-folder")], code: 2, message: () => new RegExp(`${p(f("a-folder"))}: is a folder, expected an executable file`) },
  { command: "serve", what: "an engine that exits during start-up", category: "run-time failure", args: serve(), code: 1, message: () => /the embedded engine exited during start-up/ },

  // ---- doctor ----
  { command: "doctor", what: "--config not UTF-8", category: "not UTF-8", args: () => [...doctor()(), "--config", f("config/not-utf8.yaml")], code: 2, message: () => new RegExp(`not-utf8\\.yaml:2${NOT_UTF8}`) },
  { command: "doctor", what: "--tools not UTF-8", category: "not UTF-8", args: () => [...doctor()(), "--tools", f("tools/not-utf8.yaml")], code: 2, message: () => new RegExp(`${p(f("tools/not-utf8.yaml"))}:2${NOT_UTF8}`) },
  { command: "doctor", what: "--model missing", category: "missing or wrong kind of input path", args: () => [...doctor()(), "--model", f("no-model")], code: 2, message: () => /no-model\/tokenizer\.json: no such file/ },
  { command: "doctor", what: "--model a file", category: "missing or wrong kind of input path", args: () => [...doctor()(), "--model", f("a-file")], code: 2, message: () => new RegExp(`${p(f("a-file/tokenizer.json"))}: ${NOT_A_FOLDER}`) },
  { command: "doctor", what: "--config with a value out of range", category: "bad config", args: () => [...doctor()(), "--config", f("config/doctor-wrong-type.yaml")], code: 2, message: () => /doctor-wrong-type\.yaml: data\.max_prompt_length: / },
  { command: "doctor", what: "--kwargs not JSON", category: "bad flag", args: () => [...doctor()(), "--kwargs", "{enable_thinking"], code: 2, message: () => /--kwargs must be a JSON object/ },
  { command: "doctor", what: "--server not a URL", category: "bad flag", args: () => [...doctor()(), "--server", "localhost:30000"], code: 2, message: () => /--server must be an http\(s\) URL/ },
  { command: "doctor", what: "a server that does not answer", category: "run-time failure", args: doctor(), code: 1, message: () => /fail[\s\S]*not ready/, stream: "stdout" },

  // ---- template ----
  { command: "template", what: "--messages not UTF-8", category: "not UTF-8", args: template(f("messages/not-utf8.json")), code: 2, message: () => new RegExp(`${p(f("messages/not-utf8.json"))}:1${NOT_UTF8}`) },
  { command: "template", what: "--tools not UTF-8", category: "not UTF-8", args: template(f("messages/ok.json"), "--tools", f("messages/tools-not-utf8.json")), code: 2, message: () => new RegExp(`tools-not-utf8\\.json:1${NOT_UTF8}`) },
  { command: "template", what: "--messages an empty file", category: "empty dataset", args: template(f("messages/empty.json")), code: 2, message: () => /messages\/empty\.json: not valid JSON/ },
  { command: "template", what: "--messages an empty list", category: "empty dataset", args: template(f("messages/none.json")), code: 2, message: () => /none\.json: \(top level\): expected at least one message/ },
  { command: "template", what: "--messages a folder", category: "missing or wrong kind of input path", args: template(f("a-folder")), code: 2, message: () => new RegExp(`${p(f("a-folder"))}: is a folder`) },
  { command: "template", what: "--messages below a file", category: "missing or wrong kind of input path", args: template(f("a-file/chat.json")), code: 2, message: () => new RegExp(`${p(f("a-file/chat.json"))}: ${NOT_A_FOLDER}`) },
  { command: "template", what: "--model missing", category: "missing or wrong kind of input path", args: () => [...template(f("messages/ok.json"))(), "--model", f("no-model")], code: 2, message: () => /no-model\/tokenizer\.json: no such file/ },
  { command: "template", what: "a message without role", category: "bad row or field", args: template(f("messages/no-role.json")), code: 2, message: () => /no-role\.json: \[0\]\.role/ },
  { command: "template", what: "--drift unknown", category: "bad flag", args: template(f("messages/ok.json"), "--drift", "loose"), code: 2, message: () => /--drift must be one of/ },
  { command: "template", what: "--messages unreadable", category: "permission", args: template(f("messages/unreadable.json")), code: 2, message: () => /messages\/unreadable\.json: permission denied/ },

  // ---- parse ----
  { command: "parse", what: "stdin not UTF-8 on line 2", category: "not UTF-8", args: () => ["parse", "--format", "qwen25"], stdin: notUtf8("hello\n<tool_call>\uFFFD</tool_call>\n"), code: 2, message: () => new RegExp(`stdin:2${NOT_UTF8}`) },
  { command: "parse", what: "--model whose tokenizer_config.json is not UTF-8", category: "not UTF-8", args: () => ["parse", "--format", "auto", "--model", f("model-not-utf8")], stdin: Buffer.from("hi"), code: 2, message: () => new RegExp(`${p(f("model-not-utf8/tokenizer_config.json"))}:2${NOT_UTF8}`) },
  { command: "parse", what: "--model missing", category: "missing or wrong kind of input path", args: () => ["parse", "--format", "auto", "--model", f("no-model")], stdin: Buffer.from("hi"), code: 2, message: () => /no-model: no tokenizer_config\.json or tokenizer\.json/ },
  { command: "parse", what: "--model a file", category: "missing or wrong kind of input path", args: () => ["parse", "--format", "auto", "--model", f("a-file")], stdin: Buffer.from("hi"), code: 2, message: () => new RegExp(`${p(f("a-file/tokenizer_config.json"))}: ${NOT_A_FOLDER}`) },
  { command: "parse", what: "--format unknown", category: "bad flag", args: () => ["parse", "--format", "xml"], stdin: Buffer.from("hi"), code: 2, message: () => /unknown --format 'xml'/ },
  { command: "parse", what: "--format auto without --model", category: "bad flag", args: () => ["parse", "--format", "auto"], stdin: Buffer.from("hi"), code: 2, message: () => /--format auto needs --model/ },
];

/** Every file and folder under `dir`, relative, sorted (with sizes: a rewritten file shows). */
function listTree(dir: string): string[] {
  const entries: string[] = [];
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const full = path.join(entry.parentPath, entry.name);
    entries.push(`${path.relative(dir, full)}${entry.isDirectory() ? "/" : ` ${statSync(full).size}`}`);
  }
  return entries.sort();
}

/** A stack trace line as Node prints them, or a Python/wasm error that escaped: a CLI error never shows one. */
const STACK = /^\s+at .+|RuntimeError|Traceback \(most recent call last\)/m;

let fixturesBefore: string[] = [];
beforeAll(async () => {
  await makeFixtures();
  fixturesBefore = listTree(fx);
});

describe.concurrent("exit codes: every command, bad input exits 2 naming the place, run-time failures 1, nothing left behind", () => {
  TABLE.forEach((c, index) => {
    const needsPermissions = c.category === "permission";
    const test = needsPermissions ? it.skipIf(DENY === undefined) : it;
    test(`${c.command}: ${c.what} -> exit ${c.code} (${c.category})`, async () => {
      const work = path.join(cases, String(index));
      mkdirSync(work);
      const result = await runCli(c.args(work), {
        cwd: work,
        ...(c.stdin ? { input: c.stdin } : {}),
        ...(c.env ? { env: c.env } : {}),
        ...(needsPermissions ? { prefix: DENY } : {}),
      });
      const shown = `exit ${result.code}\nstderr:\n${result.stderr}\nstdout:\n${result.stdout.slice(0, 2000)}`;
      expect(result.code, shown).toBe(c.code);
      expect(c.stream === "stdout" ? result.stdout : result.stderr, shown).toMatch(c.message(work));
      expect(result.stderr, shown).not.toMatch(STACK);
      expect(listTree(work), "the case's folder is left as empty as it was").toEqual([]);
      expect(c.output === undefined || !existsSync(c.output(work)), `${c.output?.(work)} must not exist`).toBe(true);
    });
  });
});

describe("the table", () => {
  it("has at least 60 cases, over every command and category", () => {
    expect(TABLE.length).toBeGreaterThanOrEqual(60);
    expect(new Set(TABLE.map((c) => c.command.split(" ")[0]))).toEqual(
      new Set(["preprocess", "rollout", "sft", "train", "inspect", "serve", "doctor", "template", "parse"]),
    );
    expect(new Set(TABLE.map((c) => c.command))).toContain("preprocess vault");
    expect(new Set(TABLE.map((c) => c.category)).size).toBe(9);
  });

  it("no command wrote into the shared fixtures", () => {
    // Runs after the concurrent table (describe blocks run in order).
    expect(listTree(fx)).toEqual(fixturesBefore);
  });
});

describe("an OS error no command expected (the disk filling up mid-write) is said in words, not Node's text", () => {
  const fsError = (code: string, syscall: string, file: string, text: string) =>
    Object.assign(new Error(`${code}: ${text}, ${syscall} '${file}'`), { code, syscall, path: file });
  it.each([
    [fsError("ENOSPC", "write", "/data/out.parquet", "no space left on device"), "error: /data/out.parquet: cannot write it: no space left on the device"],
    [fsError("EROFS", "mkdir", "/mnt/ro/run", "read-only file system"), "error: /mnt/ro/run: cannot create the folder: read-only file system"],
    [fsError("EISDIR", "open", "/data/out", "illegal operation on a directory"), "error: /data/out: cannot open it: is a folder"],
    [fsError("EWHATEVER", "open", "/data/x", "something new"), "error: /data/x: cannot open it: EWHATEVER"],
  ])("%s", (err, line) => {
    expect(describeError(err)).toBe(line);
  });
});
