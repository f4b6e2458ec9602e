/**
 * verl's launch scripts as agentrl input (issue 17, item 5). test/fixtures/verl-scripts/ holds the Hydra overrides of
 * verl's multi-turn GSM8K script, three GSM8K GRPO scripts and two SFT scripts, verbatim, with their source and commit.
 * Each override is run through the config loader as `--set` and must be one of three things:
 *
 * - honoured: the resolved config holds the value (at the key, or its agentrl name), or the loader reports it as
 *   agentrl's own behaviour (use_kl_in_reward=False);
 * - noted: accepted, and named by exactly one note (what --dry-run and a run print once);
 * - refused: the load fails (exit 2) with a line naming the key and why.
 *
 * The lists below are the checked trial: which override of which script falls in which class. The end-to-end cases
 * run the built CLI's --dry-run on whole scripts; the last ones check invalid values of enum keys and Hydra's syntax.
 */
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { load as loadYaml } from "js-yaml";
import type { z } from "zod";
import { describe, expect, it } from "vitest";
import { REPO_ROOT, runCli } from "./helpers/cli.js";
import { applySets, getPath, resolveConfig, type ConfigTree, type ResolvedConfig } from "../src/config/tree.js";
import { VERL_KEYS } from "../src/config/verl-keys.js";
import { AgentrlError } from "../src/errors.js";
import { rolloutConfigSchema } from "../src/rollout/config.js";
import { sftConfigSchema, sftWorkerConfig, type SftConfig } from "../src/sft/config.js";
import { trainConfigSchema, type TrainConfig } from "../src/train/config.js";
import { grpoWorkerConfig } from "../src/train/worker-config.js";
import { tempDir } from "./helpers/tmp.js";

const FIXTURES = path.join(REPO_ROOT, "test", "fixtures", "verl-scripts");
const VERL_COMMIT = "b178a3cd56f58b2d502255daba591e92833930a7";

interface Override {
  /** As the script passes it, after the shell: `data.truncation=error`. */
  assignment: string;
  key: string;
  /** The value as `--set` reads it (a YAML scalar). */
  value: unknown;
}

interface Script {
  name: string;
  source: string;
  command: "train" | "sft";
  overrides: Override[];
}

/**
 * The words of one shell line as bash would pass them: quotes removed, `$VAR` and `${VAR}` expanded from `vars`,
 * `$@` (no extra arguments) dropped, the trailing line continuation ignored.
 */
function shellWords(line: string, vars: Record<string, string>): string[] {
  const words: string[] = [];
  let word: string | null = null;
  const text = line.replace(/\\\s*$/, "");
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (/\s/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
    } else if (c === "'") {
      const end = text.indexOf("'", i + 1);
      word = (word ?? "") + text.slice(i + 1, end);
      i = end;
    } else if (c === '"') {
      const end = text.indexOf('"', i + 1);
      word = (word ?? "") + expand(text.slice(i + 1, end), vars);
      i = end;
    } else if (c === "$" && text[i + 1] === "@") {
      i++;
    } else if (c === "$") {
      const match = /^\$(?:\{(\w+)\}|(\w+))/.exec(text.slice(i))!;
      word = (word ?? "") + expand(match[0], vars);
      i += match[0].length - 1;
    } else word = (word ?? "") + c;
  }
  if (word !== null) words.push(word);
  return words;
}

function expand(text: string, vars: Record<string, string>): string {
  return text.replace(/\$(?:\{(\w+)\}|(\w+))/g, (_, braced: string | undefined, bare: string | undefined) => {
    const name = (braced ?? bare)!;
    if (vars[name] === undefined) throw new Error(`the fixture uses $${name} but sets no '# var: ${name}=...'`);
    return vars[name];
  });
}

function readScript(name: string): Script {
  const lines = readFileSync(path.join(FIXTURES, `${name}.txt`), "utf8").split("\n");
  const header = (field: string) => lines.find((line) => line.startsWith(`# ${field}: `))?.slice(field.length + 4);
  const vars: Record<string, string> = {};
  for (const line of lines.filter((l) => l.startsWith("# var: "))) {
    const [, varName, value] = /^# var: (\w+)=(\S+)/.exec(line)!;
    vars[varName!] = value!;
  }
  const overrides = lines
    .filter((line) => line.trim() !== "" && !line.startsWith("#"))
    .flatMap((line) => shellWords(line, vars))
    .map((assignment) => {
      const eq = assignment.indexOf("=");
      const raw = assignment.slice(eq + 1);
      return { assignment, key: assignment.slice(0, eq).replace(/^\+\+?/, ""), value: raw === "" ? "" : loadYaml(raw) };
    });
  return { name, source: header("source")!, command: header("command")!.replace("agentrl ", "") as Script["command"], overrides };
}

const SCHEMAS = { train: trainConfigSchema, sft: sftConfigSchema } satisfies Record<Script["command"], z.ZodType>;

function load(command: Script["command"], sets: readonly string[]): ResolvedConfig<unknown> {
  const tree: ConfigTree = {};
  applySets(tree, sets);
  return resolveConfig(SCHEMAS[command], command, tree, "script");
}

/** The error lines of a load that must fail. */
function refusal(command: Script["command"], sets: readonly string[]): string[] {
  try {
    load(command, sets);
  } catch (err) {
    expect(err).toBeInstanceOf(AgentrlError);
    expect((err as AgentrlError).exitCode).toBe(2);
    return (err as Error).message.split("\n").slice(1).map((line) => line.trim());
  }
  throw new Error("the load did not fail");
}

/** Noted in every GSM8K GRPO script: memory and server knobs, micro-batch counts. Their wandb logger is honoured. */
const GRPO_NOTED = [
  "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
  "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
  "actor_rollout_ref.rollout.tensor_model_parallel_size",
  "actor_rollout_ref.rollout.gpu_memory_utilization",
  "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
];
const SFT_NOTED = ["data.micro_batch_size", "ulysses_sequence_parallel_size"];

/** The checked trial: per script, the overrides noted and refused; every other override is honoured. */
const TRIAL: Record<string, { noted: string[]; refused: string[] }> = {
  "run_qwen2.5-3b_gsm8k_multiturn": {
    noted: [
      ...GRPO_NOTED,
      "global_profiler.tool",
      "global_profiler.save_path",
      "global_profiler.global_tool_config.torch_memory.trace_alloc_max_entries",
      "global_profiler.global_tool_config.torch_memory.stack_depth",
    ],
    refused: [],
  },
  "run_qwen2-7b": { noted: GRPO_NOTED, refused: ["actor_rollout_ref.rollout.name"] },
  "run_qwen2_5-3b_gsm8k_grpo_lora": {
    noted: [...GRPO_NOTED, "actor_rollout_ref.rollout.load_format", "actor_rollout_ref.rollout.layered_summon"],
    refused: ["actor_rollout_ref.rollout.name"],
  },
  // sglang, async mode and dynamic batch size: micro-batch counts are not set, so fewer notes.
  "run_qwen2-7b_seq_balance": {
    noted: GRPO_NOTED.filter((key) => !key.includes("micro_batch_size")),
    refused: [],
  },
  sft_multiturn_run_qwen_05_sp2: { noted: SFT_NOTED, refused: [] },
  sft_gsm8k_run_qwen_05_sp2: {
    noted: SFT_NOTED,
    refused: ["data.prompt_key", "data.response_key", "data.prompt_dict_keys", "data.response_dict_keys"],
  },
};

/** Where an honoured override's value went: its key, its agentrl name, or agentrl's behaviour (the report). */
function expectHonoured(resolved: ResolvedConfig<unknown>, override: Override): void {
  const reported = resolved.verl.honoured.find((h) => h.key === override.key);
  if (reported?.to) {
    expect(getPath(resolved.config, reported.to), `${override.assignment} → ${reported.to}`).toEqual(override.value);
    return;
  }
  const held = getPath(resolved.config, override.key);
  if (held === undefined) {
    expect(reported, `${override.assignment}: neither in the config nor reported as agentrl's behaviour`).toBeDefined();
    expect(reported!.value).toEqual(override.value);
    return;
  }
  // trainer.logger=console is read as the list [console]; everything else is held as given.
  const expected = override.key === "trainer.logger" && typeof override.value === "string" ? [override.value] : override.value;
  expect(held, override.assignment).toEqual(expected);
}

const noteOf = (notes: string[], key: string) => notes.filter((line) => line.startsWith(`${key}=`) || line.includes(`, ${key}=`));

describe("verl launch scripts through the config loader", () => {
  for (const name of Object.keys(TRIAL)) {
    const script = readScript(name);
    const trial = TRIAL[name]!;
    const counts = `${script.overrides.length - trial.noted.length - trial.refused.length} honoured, ${trial.noted.length} noted, ${trial.refused.length} refused`;

    it(`${name} (agentrl ${script.command}): ${counts}`, () => {
      expect(script.source).toContain(`/volcengine/verl/blob/${VERL_COMMIT}/examples/`);
      const keys = script.overrides.map((o) => o.key);
      for (const key of [...trial.noted, ...trial.refused]) expect(keys, `${key} is in the script`).toContain(key);

      const sets = script.overrides.map((o) => o.assignment);
      if (trial.refused.length > 0) {
        const lines = refusal(script.command, sets);
        // Exactly the refused overrides fail, each on its own line naming it; nothing else is wrong with the script.
        expect(lines).toHaveLength(trial.refused.length);
        for (const key of trial.refused) expect(lines.filter((line) => line.startsWith(`${key}=`)), key).toHaveLength(1);
      }

      const accepted = script.overrides.filter((o) => !trial.refused.includes(o.key));
      const resolved = load(script.command, accepted.map((o) => o.assignment));
      for (const override of accepted) {
        const notes = noteOf(resolved.verl.notes, override.key);
        if (trial.noted.includes(override.key)) expect(notes, `${override.assignment} is noted once`).toHaveLength(1);
        else {
          expect(notes, `${override.assignment} is not noted`).toEqual([]);
          expectHonoured(resolved, override);
        }
      }
    });
  }
});

describe("agentrl train/sft --dry-run on whole verl scripts (built CLI)", () => {
  const dir = tempDir("verl-overrides");
  const empty = path.join(dir, "empty.yaml");
  writeFileSync(empty, "{}\n");
  const dryRun = (script: Script) =>
    runCli([script.command, "--config", empty, "--dry-run", "--json", ...script.overrides.flatMap((o) => ["--set", o.assignment])]);

  it("the multi-turn GSM8K script: exit 0, its values in the effective config, each noted key in one note on stderr", async () => {
    const script = readScript("run_qwen2.5-3b_gsm8k_multiturn");
    const result = await dryRun(script);
    expect(result.code, result.stderr).toBe(0);
    const { config } = JSON.parse(result.stdout);
    expect(config.algorithm.adv_estimator).toBe("grpo");
    expect(config.actor_rollout_ref.rollout).toMatchObject({ name: "sglang", n: 16, over_sample_rate: 0.1 });
    expect(config.actor_rollout_ref.rollout.multi_turn.tool_config_path).toBe(
      "/home/user/verl/examples/sglang_multiturn/config/tool_config/gsm8k_tool_config.yaml",
    );
    expect(config.actor_rollout_ref.actor).toMatchObject({ use_kl_loss: true, kl_loss_coef: 0.001, kl_loss_type: "low_var_kl", ppo_mini_batch_size: 256 });
    expect(config.trainer).toMatchObject({ logger: ["console", "wandb"], test_freq: 20, val_before_train: true, total_epochs: 15, n_gpus_per_node: 8 });
    const notes = result.stderr.split("\n").filter((line) => line.startsWith("note: "));
    for (const key of TRIAL["run_qwen2.5-3b_gsm8k_multiturn"]!.noted) {
      expect(notes.filter((line) => line.includes(` ${key}=`) || line.includes(`, ${key}=`)), key).toHaveLength(1);
    }
    expect(notes.find((line) => line.includes("trainer.logger="))).toBeUndefined();
    expect(result.stderr).not.toContain("use_kl_in_reward");
  });

  it("a GRPO script with vllm: exit 2 naming actor_rollout_ref.rollout.name and why; with sglang it passes", async () => {
    const script = readScript("run_qwen2-7b");
    const result = await dryRun(script);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("actor_rollout_ref.rollout.name=vllm: agentrl generates with SGLang servers");
    const sglang = await runCli([
      "train", "--config", empty, "--dry-run", "--json",
      ...script.overrides.flatMap((o) => ["--set", o.key === "actor_rollout_ref.rollout.name" ? `${o.key}=sglang` : o.assignment]),
    ]);
    expect(sglang.code, sglang.stderr).toBe(0);
  });

  it("verl's multi-turn SFT script through agentrl sft: exit 0 with its two notes", async () => {
    // sft --dry-run reads the conversations with the model's tokenizer: the demo's stand in for the script's paths.
    const script = readScript("sft_multiturn_run_qwen_05_sp2");
    const result = await runCli([
      "sft", "--config", empty, "--dry-run", "--json", ...script.overrides.flatMap((o) => ["--set", o.assignment]),
      "--set", "data.train_files=examples/cpu-demo/data/sft.jsonl", "--set", "data.val_files=null", "--set", "model.partial_pretrain=examples/cpu-demo/model",
    ]);
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout).config.trainer).toMatchObject({ total_training_steps: 1, default_local_dir: "/home/user/sft-out" });
    expect(result.stderr.split("\n").filter((line) => line.startsWith("note: "))).toHaveLength(2);
  });

  it("an invalid multi_turn.format fails --dry-run with exit 2, naming the key and the formats", async () => {
    const result = await runCli(["train", "--config", empty, "--dry-run", "--set", "data.train_files=t.parquet", "--set", "actor_rollout_ref.model.path=m",
      "--set", "actor_rollout_ref.rollout.multi_turn.format=kimi_k2"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/actor_rollout_ref\.rollout\.multi_turn\.format: .*"qwen25"\|"hermes"\|"llama3"/);
    const rollout = await runCli(["rollout", "--dry-run", "--set", "actor_rollout_ref.rollout.multi_turn.format=hermez"]);
    expect(rollout.code).toBe(2);
    expect(rollout.stderr).toContain("actor_rollout_ref.rollout.multi_turn.format: ");
  });
});

describe("values decide the class", () => {
  const base = ["data.train_files=t.parquet", "actor_rollout_ref.model.path=m"];
  const train = (...sets: string[]) => load("train", [...base, ...sets]);
  const trainRefusal = (...sets: string[]) => refusal("train", [...base, ...sets]);

  it("use_kl_in_reward=false is agentrl's behaviour; true is refused, pointing at use_kl_loss", () => {
    expect(train("algorithm.use_kl_in_reward=false").verl.honoured).toContainEqual({ key: "algorithm.use_kl_in_reward", value: false });
    expect(trainRefusal("algorithm.use_kl_in_reward=true")).toEqual([
      "algorithm.use_kl_in_reward=true: agentrl does not put KL in the reward; for a KL penalty use actor_rollout_ref.actor.use_kl_loss=true (with kl_loss_coef, kl_loss_type)",
    ]);
  });

  it("the same key is honoured, noted or refused by its value", () => {
    expect(train("actor_rollout_ref.actor.use_dynamic_bsz=true").verl.notes).toEqual([]);
    expect(train("actor_rollout_ref.actor.use_dynamic_bsz=false").verl.notes).toHaveLength(1);
    expect(train("actor_rollout_ref.model.lora_rank=64").verl.notes).toEqual([]); // LoRA is agentrl's own key now
    expect(trainRefusal("data.truncation=left")[0]).toMatch(/^data\.truncation=left: agentrl never cuts a prompt/);
    expect(trainRefusal("trainer.critic_warmup=5")[0]).toMatch(/^trainer\.critic_warmup=5: agentrl has no critic/);
    expect(trainRefusal("actor_rollout_ref.rollout.mode=sync")[0]).toMatch(/^actor_rollout_ref\.rollout\.mode=sync: agentrl's rollouts are always asynchronous/);
  });

  it("the reward keys of verl's GRPO and DAPO scripts: naive and the overlong buffer honoured, dapo and prime noted, batch and what agentrl cannot do refused", () => {
    const dapo = train(
      "reward_model.reward_manager=dapo", "reward_model.enable=False", "reward_model.overlong_buffer.enable=False", "reward_model.overlong_buffer.len=4096",
      "data.reward_fn_key=data_source", "+data.apply_chat_template_kwargs.enable_thinking=False", "actor_rollout_ref.model.trust_remote_code=True",
      "actor_rollout_ref.rollout.val_kwargs.do_sample=True", "actor_rollout_ref.rollout.calculate_log_probs=True", "trainer.balance_batch=True",
      "trainer.resume_mode=auto", "actor_rollout_ref.rollout.enable_chunked_prefill=True", "actor_rollout_ref.actor.ulysses_sequence_parallel_size=1",
    );
    expect(dapo.verl.notes.map((line) => line.split("=")[0]).sort()).toEqual([
      "actor_rollout_ref.model.trust_remote_code", "actor_rollout_ref.rollout.enable_chunked_prefill",
      "reward_model.reward_manager", "trainer.balance_batch", "trainer.resume_mode",
    ]);
    // DAPO's overlong shaping is agentrl's own key (src/rewards/overlong.ts).
    const overlong = train("reward_model.overlong_buffer.enable=True", "reward_model.overlong_buffer.len=512", "reward_model.overlong_buffer.penalty_factor=1.0");
    expect(overlong.verl.notes).toEqual([]);
    expect((overlong.config as { reward_model: unknown }).reward_model).toEqual({ overlong_buffer: { enable: true, len: 512, penalty_factor: 1, log: false } });
    expect((dapo.config as { data: { apply_chat_template_kwargs: unknown } }).data.apply_chat_template_kwargs).toEqual({ enable_thinking: false });
    expect(train("reward_model.reward_manager=naive").verl.notes).toEqual([]);
    expect(trainRefusal("reward_model.reward_manager=batch")[0]).toMatch(/^reward_model\.reward_manager=batch: agentrl calls the reward function once per trajectory/);
    expect(trainRefusal("reward_model.enable=True")[0]).toMatch(/^reward_model\.enable=true: agentrl has no reward-model worker/);
    expect(trainRefusal("data.reward_fn_key=task")[0]).toMatch(/^data\.reward_fn_key=task: agentrl passes each row's data_source/);
  });

  it("model, FSDP, engine, loss and trainer keys verl scripts carry: speed and framework settings noted, GSPO honoured, what would change the result refused", () => {
    const script = train(
      "actor_rollout_ref.actor.strategy=fsdp2", "actor_rollout_ref.actor.use_torch_compile=False", "actor_rollout_ref.model.use_fused_kernels=True",
      "actor_rollout_ref.actor.fsdp_config.wrap_policy.min_num_params=0", "actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend=fa3",
      "critic.optim.lr=1e-5", "ray_init.num_cpus=null", "trainer.device=cuda", "actor_rollout_ref.actor.policy_loss.loss_mode=vanilla",
    );
    expect(script.verl.notes.map((line) => line.split("=")[0]).sort()).toEqual([
      "actor_rollout_ref.actor.fsdp_config.wrap_policy.min_num_params", "actor_rollout_ref.model.use_fused_kernels",
      "actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend", "critic.optim.lr", "ray_init.num_cpus",
    ]);
    const gspo = train("actor_rollout_ref.actor.policy_loss.loss_mode=gspo");
    expect(gspo.verl.notes).toEqual([]);
    expect((gspo.config as { actor_rollout_ref: { actor: { policy_loss: unknown } } }).actor_rollout_ref.actor.policy_loss).toEqual({ loss_mode: "gspo" });
    expect(trainRefusal("actor_rollout_ref.actor.policy_loss.loss_mode=gpg")[0]).toMatch(/^actor_rollout_ref\.actor\.policy_loss\.loss_mode: .*"vanilla"\|"gspo"/);
    expect(trainRefusal("actor_rollout_ref.actor.strategy=megatron")[0]).toMatch(/^actor_rollout_ref\.actor\.strategy=megatron: the worker shards with FSDP/);
    expect(trainRefusal("actor_rollout_ref.rollout.ignore_eos=True")[0]).toMatch(/^actor_rollout_ref\.rollout\.ignore_eos=true: a turn must end/);
  });

  it("verl's names of agentrl keys land on the agentrl key; both set differently is an error", () => {
    const resolved = train("actor_rollout_ref.actor.optim.clip_grad=0.5", "algorithm.adv_estimator=grpo_vectorized");
    const config = resolved.config as { actor_rollout_ref: { actor: { grad_clip: number } }; algorithm: { adv_estimator: string } };
    expect(config.actor_rollout_ref.actor.grad_clip).toBe(0.5);
    expect(config.algorithm.adv_estimator).toBe("grpo");
    expect(trainRefusal("actor_rollout_ref.actor.optim.clip_grad=0.5", "actor_rollout_ref.actor.grad_clip=2")[0]).toContain(
      "actor_rollout_ref.actor.optim.clip_grad=0.5: verl's name of actor_rollout_ref.actor.grad_clip, which is set too (2)",
    );
  });

  it("agentrl rollout reads the rollout's verl keys too", () => {
    const resolved = resolveConfig(rolloutConfigSchema, "rollout", tree("actor_rollout_ref.rollout.gpu_memory_utilization=0.85", "actor_rollout_ref.rollout.mode=async", "actor_rollout_ref.rollout.name=sglang"), "rollout");
    expect(resolved.verl.notes.map((line) => line.split("=")[0])).toEqual(["actor_rollout_ref.rollout.gpu_memory_utilization", "actor_rollout_ref.rollout.name"]);
    expect(() => resolveConfig(rolloutConfigSchema, "rollout", tree("actor_rollout_ref.rollout.name=vllm"), "rollout")).toThrow(/actor_rollout_ref\.rollout\.name=vllm: agentrl generates with SGLang/);
    // Training keys stay unknown to the rollout command, with today's message.
    expect(() => resolveConfig(rolloutConfigSchema, "rollout", tree("algorithm.use_kl_in_reward=false"), "rollout")).toThrow(/algorithm: unknown key/);
  });

  it("an unknown key keeps its 'did you mean', verl keys among the suggestions", () => {
    expect(trainRefusal("trainer.save_freqq=5")).toEqual(["trainer.save_freqq: unknown key (did you mean trainer.save_freq?)"]);
    expect(trainRefusal("algorithm.use_kl_in_rewards=false")).toEqual(["algorithm.use_kl_in_rewards: unknown key (did you mean algorithm.use_kl_in_reward?)"]);
  });
});

function tree(...sets: string[]): ConfigTree {
  const t: ConfigTree = {};
  applySets(t, sets);
  return t;
}

describe("invalid values of enum keys fail, naming the key and the allowed values", () => {
  const base = ["data.train_files=t.parquet", "actor_rollout_ref.model.path=m"];
  const cases: [string, RegExp][] = [
    ["actor_rollout_ref.rollout.multi_turn.format=kimi_k2", /^actor_rollout_ref\.rollout\.multi_turn\.format: .*"qwen25"\|"hermes"\|"llama3"\|"mistral"\|"deepseekv3"\|"pythonic"\|"gpt-oss"\|"auto"/],
    ["actor_rollout_ref.actor.loss_agg_mode=seq-mean", /^actor_rollout_ref\.actor\.loss_agg_mode: .*"token-mean"\|"seq-mean-token-sum"\|"seq-mean-token-mean"\|"seq-mean-token-sum-norm"/],
    ["algorithm.adv_estimator=ppo", /^algorithm\.adv_estimator: .*"grpo"\|"rloo"/],
    ["algorithm.adv_estimator=gae", /^algorithm\.adv_estimator=gae: gae trains a value model \(PPO\); agentrl has no critic .*: use grpo or rloo/],
    ["actor_rollout_ref.actor.kl_loss_type=k4", /^actor_rollout_ref\.actor\.kl_loss_type: .*"k1"\|"kl"\|"abs"\|"k2"\|"mse"\|"k3"\|"low_var_kl"/],
    ["algorithm.kl_penalty=k4", /^algorithm\.kl_penalty=k4: not one of verl's values: kl, k1, abs, mse, k2, low_var_kl, k3, full/],
    ["actor_rollout_ref.rollout.mode=batch", /^actor_rollout_ref\.rollout\.mode=batch: not one of verl's values: async, sync/],
    ["actor_rollout_ref.rollout.multi_turn.tool_response_truncate_side=both", /^actor_rollout_ref\.rollout\.multi_turn\.tool_response_truncate_side: .*"left"\|"right"\|"middle"/],
    ["trainer.logger=[console,neptune]", /^trainer\.logger\.1: expected "console", "tensorboard" or "wandb", got "neptune"/],
  ];
  for (const [set, message] of cases) {
    it(set, () => {
      const lines = refusal("train", [...base, set]);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(message);
    });
  }
});

describe("Hydra's override syntax", () => {
  it("+key=value and ++key=value set the key, ~key removes it", () => {
    const t: ConfigTree = { data: { shuffle: false } };
    applySets(t, ["+data.seed=3", "++data.max_prompt_length=64", "data.train_batch_size=4", "~data.shuffle"]);
    expect(t).toEqual({ data: { seed: 3, max_prompt_length: 64, train_batch_size: 4 } });
  });
});

describe("verl's memory keys reach the training worker", () => {
  const base = ["data.train_files=t.parquet", "actor_rollout_ref.model.path=m"];

  it("packing, log-prob chunks, offload and checkpointing: defaults, then each set", () => {
    const worker = (...sets: string[]) => grpoWorkerConfig(load("train", [...base, ...sets]).config as TrainConfig, 8);
    expect(worker()).toMatchObject({
      use_remove_padding: true, logprob_chunk_tokens: 1024, param_offload: false, optimizer_offload: false, ref_offload: false, gradient_checkpointing: false,
    });
    expect(worker(
      "actor_rollout_ref.model.use_remove_padding=False", "actor_rollout_ref.actor.logprob_chunk_tokens=512",
      "actor_rollout_ref.actor.fsdp_config.param_offload=True", "actor_rollout_ref.actor.fsdp_config.optimizer_offload=True",
      "actor_rollout_ref.ref.fsdp_config.param_offload=True", "actor_rollout_ref.model.enable_gradient_checkpointing=True",
    )).toMatchObject({
      use_remove_padding: false, logprob_chunk_tokens: 512, param_offload: true, optimizer_offload: true, ref_offload: true, gradient_checkpointing: true,
    });
    const sft = (...sets: string[]) => sftWorkerConfig(load("sft", ["data.train_files=t.jsonl", "model.partial_pretrain=m", ...sets]).config as SftConfig, 4);
    expect(sft().use_remove_padding).toBe(true);
    expect(sft("use_remove_padding=false").use_remove_padding).toBe(false);
  });
});

describe("the verl key table", () => {
  it("declares each key once per command, and only keys agentrl's own schema lacks or judges by value", () => {
    const seen = VERL_KEYS.flatMap((entry) => entry.commands.map((command) => `${command} ${entry.key}`));
    expect(seen.length).toBe(new Set(seen).size);
    const inSchema = VERL_KEYS.filter((entry) => entry.commands.includes("train") && getPath(trainConfigSchema.parse({ data: { train_files: "t" }, actor_rollout_ref: { model: { path: "m" } } }), entry.key) !== undefined);
    expect(inSchema.map((entry) => entry.key).sort()).toEqual(["actor_rollout_ref.rollout.name", "algorithm.adv_estimator", "trainer.logger"]);
  });

  it("the fixtures hold every override of their script (47 in the multi-turn GSM8K one), and only overrides", () => {
    const sizes = Object.fromEntries(Object.keys(TRIAL).map((name) => [name, readScript(name).overrides.length]));
    expect(sizes).toEqual({
      "run_qwen2.5-3b_gsm8k_multiturn": 47,
      "run_qwen2-7b": 37,
      "run_qwen2_5-3b_gsm8k_grpo_lora": 43,
      "run_qwen2-7b_seq_balance": 40,
      sft_multiturn_run_qwen_05_sp2: 13,
      sft_gsm8k_run_qwen_05_sp2: 16,
    });
    for (const name of Object.keys(TRIAL)) {
      for (const o of readScript(name).overrides) expect(o.key, `${name}: ${o.assignment}`).toMatch(/^[a-z_][\w.]*$/);
    }
  });
});
