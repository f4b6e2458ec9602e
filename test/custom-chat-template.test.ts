/**
 * verl's actor_rollout_ref.model.custom_chat_template and custom_chat_template_file: a template used in place of the
 * model folder's for every render. `agentrl rollout` against the fake SGLang server with the Qwen3 template behind a
 * marker line (from a file) records the marker in every prompt and nothing else changes (the same response ids, drift
 * and reward as with the folder's template); inline, the key's text is the template; both keys at once, or a file
 * that is not there, exit 2 naming the key.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { dump as dumpYaml } from "js-yaml";
import { runCli } from "./helpers/cli.js";
import { QWEN3_DIR } from "./helpers/qwen3.js";
import { writeAgentRows } from "./helpers/agent-loop-run.js";
import { GSM8K_TOOLS, readAllTrajectories, tempDir, toolThenAnswer } from "./helpers/rollout-run.js";
import { startFakeSglang, type FakeSglang } from "./fake-sglang/index.js";
import { customChatTemplate, loadChatModel, type ChatModel } from "../src/chat/index.js";
import type { Trajectory } from "../src/data/trajectory.js";

const dir = tempDir("custom-chat-template");
const f = (name: string) => path.join(dir, name);
const MARKER = "A custom template.\n";

let model: ChatModel;
let fake: FakeSglang;
let data: string;
let custom: string;

beforeAll(async () => {
  model = await loadChatModel(QWEN3_DIR);
  fake = await startFakeSglang({ respond: toolThenAnswer(model, () => "4") });
  data = await writeAgentRows(f("rows.parquet"), [null]);
  custom = `{{- ${JSON.stringify(MARKER)} }}${model.chatTemplate}`;
  writeFileSync(f("custom.jinja"), custom);
});
afterAll(async () => fake?.close());

async function rollout(name: string, modelKeys: Record<string, unknown>) {
  const config = f(`${name}.yaml`);
  writeFileSync(config, dumpYaml({ actor_rollout_ref: { model: modelKeys } }));
  const out = f(`${name}.jsonl`);
  const result = await runCli(["rollout", "--config", config, "--data", data, "--model", QWEN3_DIR, "--server", fake.url, "--tools", GSM8K_TOOLS, "--n", "2", "--out", out, "--json"]);
  const trajectories: Trajectory[] = result.code === 0 ? await readAllTrajectories(out) : [];
  return { result, trajectories: trajectories.sort((a, b) => a.sample_index - b.sample_index) };
}

describe("a custom chat template", () => {
  it("renders every prompt from the file; the conversation is otherwise the folder template's", async () => {
    const plain = await rollout("plain", {});
    expect(plain.result.code, plain.result.stderr).toBe(0);
    const run = await rollout("file", { custom_chat_template_file: f("custom.jinja") });
    expect(run.result.code, run.result.stderr).toBe(0);
    expect(run.trajectories).toHaveLength(2);
    run.trajectories.forEach((t, i) => {
      const before = plain.trajectories[i]!;
      expect(model.decode(t.prompt_ids)).toBe(MARKER + model.decode(before.prompt_ids));
      expect([t.response_ids, t.response_mask, t.drift, t.reward]).toEqual([before.response_ids, before.response_mask, before.drift, before.reward]);
    });
  });

  it("inline, the text itself is the template, named by its key in errors", async () => {
    expect(await customChatTemplate({ custom_chat_template: custom, custom_chat_template_file: null }, "actor_rollout_ref.model")).toEqual({ source: custom, file: "actor_rollout_ref.model.custom_chat_template" });
    expect(await customChatTemplate({ custom_chat_template: null, custom_chat_template_file: null }, "model")).toBeUndefined();
    const inline = await loadChatModel(QWEN3_DIR, { chatTemplate: { source: "{{ broken", file: "model.custom_chat_template" } }).catch((err: Error) => err);
    expect(String(inline)).toContain("model.custom_chat_template");
  });

  it("both keys, or a file that is not there: exit 2 naming the key", async () => {
    const both = await rollout("both", { custom_chat_template: custom, custom_chat_template_file: f("custom.jinja") });
    expect(both.result.code).toBe(2);
    expect(both.result.stderr).toContain("actor_rollout_ref.model.custom_chat_template and actor_rollout_ref.model.custom_chat_template_file are both set");
    const missing = await rollout("missing", { custom_chat_template_file: f("nowhere.jinja") });
    expect(missing.result.code).toBe(2);
    expect(missing.result.stderr).toContain("nowhere.jinja");
    expect(missing.result.stderr).toContain("custom_chat_template_file");
  });
});
