/**
 * verl keys as agentrl reads them. People come from verl with shell scripts of Hydra overrides (`key=value ...`);
 * passed as `--set` flags, every override a script sets is one of three things:
 *
 * - honoured: agentrl does what it asks. Most keys are agentrl's own (same name, same meaning; the schema validates
 *   them). The others are here: an agentrl equivalent (`to`), or agentrl's fixed behaviour (use_kl_in_reward=false:
 *   agentrl never puts KL in the reward).
 * - noted: meaningless here (vLLM and SGLang server knobs, micro-batch counts, profilers, mlflow): accepted,
 *   dropped, and said in one line by --dry-run and at run start.
 * - refused: agentrl cannot do it (use_kl_in_reward=true, LoRA, vLLM): an error naming the key and why, exit 2.
 *
 * Values matter: one key can be honoured at one value and refused at another. A key that is neither in a command's
 * schema nor here stays an error with the nearest valid key suggested. docs/from-verl.md explains the classes;
 * docs/config.md lists this table (src/cli/config-doc.ts renders it).
 */

export type VerlCommand = "train" | "rollout" | "sft";

export type VerlVerdict =
  /** `value`: what agentrl reads instead (logger=console → [console]); `to`: the agentrl key that holds it. */
  | { class: "honoured"; value?: unknown; to?: string }
  /** `value`: for a key in agentrl's schema, what is kept of it (logger [console, mlflow] → [console]). */
  | { class: "noted"; note: string; value?: unknown }
  | { class: "refused"; why: string };

export interface VerlKey {
  /** verl's dotted key. */
  key: string;
  commands: readonly VerlCommand[];
  /** The entry covers every key below `key` (global_profiler.*). */
  subtree?: boolean;
  /** verl's own values; any other is refused with this list, as verl would refuse it. */
  values?: readonly unknown[];
  /** What happens to a value; for docs, `summary` says it in words. */
  verdict: (value: unknown) => VerlVerdict;
  summary: string;
}

const honoured = (value?: unknown): VerlVerdict => (value === undefined ? { class: "honoured" } : { class: "honoured", value });
const noted = (note: string, value?: unknown): VerlVerdict => (value === undefined ? { class: "noted", note } : { class: "noted", note, value });
const refused = (why: string): VerlVerdict => ({ class: "refused", why });

const ENGINE_GPUS = "the engine runs on servers of its own (agentrl train --server URL, or the embedded engine), apart from the trainer's GPUs";

const TRAIN = ["train"] as const;
const SFT = ["sft"] as const;
const ROLLOUT_AND_TRAIN = ["rollout", "train"] as const;
const BOOLEANS = [true, false] as const;

/** A key agentrl has no use for: noted at every value. */
function ignored(key: string, commands: readonly VerlCommand[], note: string, extra: Partial<VerlKey> = {}): VerlKey {
  return { key, commands, verdict: () => noted(note), summary: `noted: ${note}`, ...extra };
}

/**
 * A key whose value `own` is what agentrl always does: honoured there; any other value is noted (`otherwise` is a
 * note: the result is the same, only speed or memory differ) or refused (`refuse`: the result would differ).
 */
function fixed(
  key: string,
  commands: readonly VerlCommand[],
  own: unknown,
  because: string,
  otherwise: { note: string } | { refuse: string },
  values?: readonly unknown[],
): VerlKey {
  const other = "note" in otherwise ? `noted: ${otherwise.note}` : `refused: ${otherwise.refuse}`;
  return {
    key,
    commands,
    ...(values ? { values } : {}),
    verdict: (value) => (value === own ? honoured() : "note" in otherwise ? noted(otherwise.note) : refused(otherwise.refuse)),
    summary: `${String(own)}: honoured (${because}); other values ${other}`,
  };
}

/** A verl name of an agentrl key. */
function renamed(key: string, commands: readonly VerlCommand[], to: string): VerlKey {
  return { key, commands, verdict: () => ({ class: "honoured", to }), summary: `honoured as ${to}` };
}

const PROMPTS_IN_PROCESS = "agentrl reads, renders and filters the prompts in its own process, as it needs them";
const ENGINE_FLAG = "an engine setting: set where SGLang starts (agentrl serve --engine sglang ... -- <sglang flags>)";
const NO_SEQUENCE_PARALLEL = "sequence parallelism is not built in: agentrl's worker shards the model with FSDP and keeps each sequence on one GPU";
const MICRO_BATCH_BY_TOKENS =
  "a memory setting: agentrl's worker packs micro-batches by tokens (actor_rollout_ref.actor.ppo_max_token_len_per_gpu), not by count";
const SFT_MICRO_BATCH_BY_TOKENS = "a memory setting: agentrl sft packs micro-batches by tokens (data.max_token_len_per_gpu), not by count";
const LOGITS_IN_CHUNKS =
  "agentrl's worker always runs the lm_head, log-softmax and entropy in chunks of actor_rollout_ref.actor.logprob_chunk_tokens tokens, " +
  "each recomputed in the backward pass; same values, less memory";
const LORA_GATHER = "the worker gathers the adapter (or the merged weights) whole for each sync; there is no layer-by-layer summon";
const NO_CRITIC = "agentrl has no critic (grpo and rloo need none)";
const KL_ONLY_IN_LOSS =
  "only used with algorithm.use_kl_in_reward, and agentrl never puts KL in the reward; the KL loss's estimator is actor_rollout_ref.actor.kl_loss_type";
/** verl's trackers agentrl has no logger for (wandb and tensorboard it has): noted and dropped. */
const VERL_TRACKERS = ["mlflow", "swanlab", "vemlp_wandb", "clearml", "trackio", "file"];
const VERL_ROLLOUT_NAMES = ["vllm", "sglang", "trtllm"];
const NOT_SGLANG = "agentrl generates with SGLang servers (name=sglang with server.urls) or its embedded engine (name=embedded)";

/** trainer.logger of `agentrl train`: console, tensorboard and wandb are honoured; verl's other trackers are dropped with a note. */
function trainLogger(value: unknown): VerlVerdict {
  const list = typeof value === "string" ? [value] : value;
  if (!Array.isArray(list)) return honoured();
  const dropped = list.filter((name) => VERL_TRACKERS.includes(name));
  if (dropped.length === 0) return honoured(list);
  const kept = list.filter((name) => !VERL_TRACKERS.includes(name));
  return noted(
    `${dropped.join(", ")} not built into agentrl: metrics go to the console and runs/<name>/metrics.jsonl ` +
      "(and to tensorboard or wandb when trainer.logger names them)",
    kept.length ? kept : ["console"],
  );
}

function advEstimator(value: unknown): VerlVerdict {
  if (value === "grpo_vectorized") return honoured("grpo");
  if (value === "rloo_vectorized") return honoured("rloo");
  if (value === "gae") return refused(`gae trains a value model (PPO); ${NO_CRITIC}: use grpo or rloo`);
  const others = ["reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax", "opo", "grpo_passk", "gpg", "optimal_token_baseline", "tir_optimal_token_baseline"];
  if (typeof value === "string" && others.includes(value)) return refused(`agentrl implements grpo and rloo, not ${value}`);
  return honoured();
}

export const VERL_KEYS: readonly VerlKey[] = [
  // data
  fixed("data.return_raw_chat", ROLLOUT_AND_TRAIN, true, "agentrl always renders prompts from the chat messages", {
    note: "agentrl always renders prompts from the chat messages with the model's chat template; there is no pre-tokenized prompt",
  }, BOOLEANS),
  fixed("data.truncation", ROLLOUT_AND_TRAIN, "error", "a prompt over max_prompt_length is never cut", {
    refuse: "agentrl never cuts a prompt: data.filter_overlong_prompts=true skips prompts over max_prompt_length, false fails on them",
  }, ["error", "left", "right", "middle"]),

  ignored("data.filter_overlong_prompts_workers", ROLLOUT_AND_TRAIN, PROMPTS_IN_PROCESS),
  ignored("data.dataloader_num_workers", ROLLOUT_AND_TRAIN, PROMPTS_IN_PROCESS),
  fixed("data.reward_fn_key", ROLLOUT_AND_TRAIN, "data_source", "the reward function gets each row's data_source", {
    refuse: "agentrl passes each row's data_source column to the reward function; put the key your function dispatches on in data_source",
  }),

  // reward_model: agentrl scores with custom_reward_function (or the agent's own reward), per trajectory
  fixed("reward_model.enable", TRAIN, false, "rewards come from custom_reward_function, the tools or the agent", {
    refuse: "agentrl has no reward-model worker: score with custom_reward_function, a Python or JS function of the trajectory (which may call a model server of yours)",
  }, BOOLEANS),
  {
    key: "reward_model.reward_manager",
    commands: TRAIN,
    values: ["naive", "prime", "dapo", "batch"],
    verdict: (value) =>
      value === "naive"
        ? honoured()
        : value === "batch"
          ? refused("agentrl calls the reward function once per trajectory, as the naive manager does; a batch function takes lists")
          : noted(`agentrl scores each trajectory as it finishes, concurrently, with the same compute_score per sample as ${String(value)}'s manager` +
              (value === "dapo" ? "; DAPO's overlong penalty is reward_model.overlong_buffer, which agentrl applies to every reward" : "")),
    summary: "naive: honoured; prime, dapo: noted (the same compute_score per trajectory, scored concurrently); batch: refused (a function of lists)",
  },
  ignored("reward_model.launch_reward_fn_async", TRAIN, "agentrl scores each trajectory as it finishes, during the rollout", { values: BOOLEANS }),

  // actor_rollout_ref.model
  ignored("actor_rollout_ref.model.use_shm", TRAIN, "the worker and the engine read the model folder from disk", { values: BOOLEANS }),
  ignored("actor_rollout_ref.model.trust_remote_code", TRAIN,
    "the worker loads the model with transformers' own classes (no code from the model folder); a model that needs its own code fails to load, naming it",
    { values: BOOLEANS }),
  fixed("actor_rollout_ref.hybrid_engine", TRAIN, true, "the actor and the rollout share one model, synced every step", {
    refuse: "agentrl always syncs the trained weights into the engine every step",
  }, BOOLEANS),

  // actor_rollout_ref.actor
  renamed("actor_rollout_ref.actor.optim.clip_grad", TRAIN, "actor_rollout_ref.actor.grad_clip"),
  ignored("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", TRAIN, MICRO_BATCH_BY_TOKENS),
  ignored("actor_rollout_ref.actor.ppo_micro_batch_size", TRAIN, MICRO_BATCH_BY_TOKENS),
  fixed("actor_rollout_ref.actor.use_dynamic_bsz", TRAIN, true, "micro-batches are packed by tokens", { note: MICRO_BATCH_BY_TOKENS }, BOOLEANS),
  fixed("actor_rollout_ref.actor.entropy_from_logits_with_chunking", TRAIN, true, "log-probs and entropy are computed in chunks of tokens", {
    note: LOGITS_IN_CHUNKS,
  }, BOOLEANS),
  fixed("actor_rollout_ref.actor.entropy_checkpointing", TRAIN, true, "each chunk is recomputed in the backward pass", { note: LOGITS_IN_CHUNKS }, BOOLEANS),

  fixed("actor_rollout_ref.actor.ulysses_sequence_parallel_size", TRAIN, 1, "each sequence on one GPU", { note: NO_SEQUENCE_PARALLEL }),
  fixed("actor_rollout_ref.ref.ulysses_sequence_parallel_size", TRAIN, 1, "each sequence on one GPU", { note: NO_SEQUENCE_PARALLEL }),
  ...["actor_rollout_ref.actor.checkpoint.save_contents", "actor_rollout_ref.actor.checkpoint.load_contents"].map((key) =>
    ignored(key, TRAIN, "a checkpoint holds the model, the optimizer and the run's state, and the run's end writes a Hugging Face model folder")),

  fixed("actor_rollout_ref.actor.use_torch_compile", TRAIN, false, "the worker runs eager PyTorch", { note: "the worker runs eager PyTorch: torch.compile is not built in" }, BOOLEANS),
  fixed("actor_rollout_ref.model.use_fused_kernels", TRAIN, false, "log-probs come from chunks of the lm_head", { note: LOGITS_IN_CHUNKS }, BOOLEANS),
  fixed("actor_rollout_ref.model.use_liger", TRAIN, false, "transformers' own modules", { note: "Liger kernels are not built in: the worker runs transformers' own modules" }, BOOLEANS),
  fixed("actor_rollout_ref.model.enable_activation_offload", TRAIN, false, "activations stay on the GPU", {
    note: "activation offload is not built in: actor_rollout_ref.model.enable_gradient_checkpointing saves activation memory",
  }, BOOLEANS),
  ...["actor_rollout_ref.actor.strategy", "actor_rollout_ref.ref.strategy"].map((key): VerlKey => ({
    key,
    commands: TRAIN,
    values: ["fsdp", "fsdp2", "megatron"],
    verdict: (value) => (value === "megatron" ? refused("the worker shards with FSDP (FSDP2 where torch has it); Megatron is not built in") : honoured()),
    summary: "fsdp, fsdp2: honoured (FSDP2 where torch has it, FSDP1 otherwise); megatron: refused",
  })),
  ...["actor_rollout_ref.actor.fsdp_config", "actor_rollout_ref.ref.fsdp_config"].flatMap((prefix) => [
    ignored(`${prefix}.wrap_policy`, TRAIN, "FSDP wraps every decoder layer, then the whole model", { subtree: true }),
    ignored(`${prefix}.forward_prefetch`, TRAIN, "a speed setting of FSDP1; the worker's FSDP2 prefetches on its own", { values: BOOLEANS }),
    ignored(`${prefix}.fsdp_size`, TRAIN, "the worker shards over all its ranks"),
    ignored(`${prefix}.offload_policy`, TRAIN, "offload is param_offload and optimizer_offload", { values: BOOLEANS }),
    ignored(`${prefix}.model_dtype`, TRAIN, "the master weights' dtype is actor_rollout_ref.actor.fsdp_config.dtype (float32 by default; compute is bf16 on GPU)"),
  ]),

  // actor_rollout_ref.ref: the reference model lives in the worker next to the actor
  ignored("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", TRAIN, MICRO_BATCH_BY_TOKENS),
  ignored("actor_rollout_ref.ref.log_prob_micro_batch_size", TRAIN, MICRO_BATCH_BY_TOKENS),

  // actor_rollout_ref.rollout
  {
    key: "actor_rollout_ref.rollout.name",
    commands: TRAIN,
    verdict: (value) => (typeof value === "string" && value !== "sglang" && VERL_ROLLOUT_NAMES.includes(value) ? refused(`${NOT_SGLANG}; ${value} is not supported`) : honoured()),
    summary: `sglang: honoured; vllm, trtllm: refused (${NOT_SGLANG})`,
  },
  {
    key: "actor_rollout_ref.rollout.name",
    commands: ["rollout"],
    values: VERL_ROLLOUT_NAMES,
    verdict: (value) =>
      value === "sglang" ? noted("agentrl rollout generates with the SGLang servers given by --server (or --engine embedded)") : refused(`${NOT_SGLANG}; ${String(value)} is not supported`),
    summary: `sglang: noted (agentrl rollout takes --server or --engine); vllm, trtllm: refused`,
  },
  fixed("actor_rollout_ref.rollout.mode", ROLLOUT_AND_TRAIN, "async", "agentrl's rollouts are asynchronous, per request", {
    refuse: "agentrl's rollouts are always asynchronous, per request (verl removed sync mode too)",
  }, ["async", "sync"]),
  ignored("actor_rollout_ref.rollout.gpu_memory_utilization", ROLLOUT_AND_TRAIN,
    "SGLang's memory share is set where the server starts: agentrl serve --engine sglang ... -- --mem-fraction-static F"),
  ignored("actor_rollout_ref.rollout.tensor_model_parallel_size", ROLLOUT_AND_TRAIN,
    "SGLang's tensor parallelism is set where the server starts: agentrl serve --engine sglang --tp N"),
  fixed("actor_rollout_ref.rollout.multi_stage_wake_up", ROLLOUT_AND_TRAIN, true, "with trainer.colocate the engine wakes weights first, then its KV cache", {
    note: "with trainer.colocate agentrl always wakes the engine in two stages (weights, then KV cache)",
  }, BOOLEANS),
  ignored("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", TRAIN, MICRO_BATCH_BY_TOKENS),
  ignored("actor_rollout_ref.rollout.log_prob_micro_batch_size", TRAIN, MICRO_BATCH_BY_TOKENS),
  ignored("actor_rollout_ref.rollout.load_format", ROLLOUT_AND_TRAIN,
    "the engine loads actor_rollout_ref.model.path itself and gets the trained weights every step"),
  ignored("actor_rollout_ref.rollout.agent.num_workers", ROLLOUT_AND_TRAIN,
    "no agent-loop worker processes: every trajectory runs in agentrl's own event loop, actor_rollout_ref.rollout.max_concurrency at once"),
  ignored("actor_rollout_ref.rollout.layered_summon", TRAIN, LORA_GATHER, { values: BOOLEANS }),
  ignored("actor_rollout_ref.rollout.engine_kwargs", ROLLOUT_AND_TRAIN, ENGINE_FLAG, { subtree: true }),
  ignored("actor_rollout_ref.rollout.trace", ROLLOUT_AND_TRAIN, "a rollout's trace is its trajectory file: agentrl inspect shows every turn, call and token", { subtree: true }),
  ...["prompt_length", "response_length"].map((name) =>
    ignored(`actor_rollout_ref.rollout.${name}`, ROLLOUT_AND_TRAIN, "the budgets are data.max_prompt_length and data.max_response_length")),
  fixed("actor_rollout_ref.rollout.ignore_eos", ROLLOUT_AND_TRAIN, false, "a turn ends at the model's end of turn", {
    refuse: "a turn must end at the model's end-of-turn token for the next message to follow it",
  }, BOOLEANS),
  {
    key: "actor_rollout_ref.rollout.do_sample",
    commands: ROLLOUT_AND_TRAIN,
    values: BOOLEANS,
    verdict: (value) => (value === true ? honoured() : noted("greedy decoding is actor_rollout_ref.rollout.temperature=0")),
    summary: "true: honoured (samples at rollout.temperature); false: noted (greedy is temperature 0)",
  },
  ...["enable_chunked_prefill", "max_num_batched_tokens", "max_num_seqs", "enforce_eager", "free_cache_engine", "swap_space", "disable_log_stats", "max_model_len", "dtype"].map((name) =>
    ignored(`actor_rollout_ref.rollout.${name}`, ROLLOUT_AND_TRAIN, ENGINE_FLAG)),
  fixed("actor_rollout_ref.rollout.calculate_log_probs", TRAIN, true, "the engine's log-prob of every sampled token is recorded", {
    note: "the engine's log-prob of every sampled token is always recorded (the trajectory's response_logprobs)",
  }, BOOLEANS),
  {
    key: "actor_rollout_ref.rollout.val_kwargs.do_sample",
    commands: TRAIN,
    values: BOOLEANS,
    verdict: (value) =>
      value === true ? honoured() : noted("validation is greedy at val_kwargs.temperature 0, agentrl's default; a temperature set beside do_sample=False still samples"),
    summary: "true: honoured (validation samples at val_kwargs.temperature); false: noted (greedy is val_kwargs.temperature 0, the default)",
  },

  // algorithm
  {
    key: "algorithm.adv_estimator",
    commands: TRAIN,
    verdict: advEstimator,
    summary: "grpo, rloo: honoured (grpo_vectorized, rloo_vectorized as grpo, rloo); gae and verl's other estimators refused",
  },
  fixed("algorithm.use_kl_in_reward", TRAIN, false, "agentrl never puts KL in the reward", {
    refuse: "agentrl does not put KL in the reward; for a KL penalty use actor_rollout_ref.actor.use_kl_loss=true (with kl_loss_coef, kl_loss_type)",
  }, BOOLEANS),
  ignored("algorithm.kl_penalty", TRAIN, KL_ONLY_IN_LOSS, { values: ["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "full"] }),
  ignored("algorithm.kl_ctrl", TRAIN, KL_ONLY_IN_LOSS, { subtree: true }),

  // async_training (verl's fully_async_policy recipe; agentrl's own keys there are mode, staleness_threshold,
  // trigger_parameter_sync_step and partial_rollout)
  ignored("async_training.require_batches", TRAIN,
    "a fully_async step trains on data.train_batch_size groups (verl: require_batches × ppo_mini_batch_size samples)"),
  fixed("async_training.compute_prox_log_prob", TRAIN, true, "the worker always recomputes old log-probs with the weights being trained", {
    note: "the worker always recomputes old log-probs with the weights being trained (the proximal policy); algorithm.rollout_is_threshold corrects for the engine's",
  }, BOOLEANS),
  fixed("async_training.use_rollout_log_probs", TRAIN, false, "PPO's old log-probs come from the trainer", {
    note: "PPO's old log-probs come from the trainer; the engine's behaviour log-probs enter through algorithm.rollout_is_threshold",
  }, BOOLEANS),

  ignored("data.gen_batch_size", TRAIN,
    "agentrl draws prompts as it needs them: a dynamic-sampling round takes the groups still missing, fully_async one prompt at a time"),
  ignored("rollout.nnodes", TRAIN, ENGINE_GPUS),
  ignored("rollout.n_gpus_per_node", TRAIN, ENGINE_GPUS),
  ignored("rollout.total_rollout_steps", TRAIN, "the run's length is trainer.total_training_steps (or total_epochs) steps of data.train_batch_size prompts"),
  ignored("rollout.total_epochs", TRAIN, "the run's length is trainer.total_epochs (or total_training_steps)"),
  ignored("rollout.test_freq", TRAIN, "validation runs every trainer.test_freq steps"),

  // trainer
  fixed("trainer.critic_warmup", TRAIN, 0, "the actor trains from the first step", {
    refuse: `${NO_CRITIC}, so there is nothing to warm up; the actor trains from the first step`,
  }),
  fixed("data.validation_shuffle", TRAIN, false, "validation prompts in file order", { note: "validation runs on the prompts in file order (data.val_max_samples takes the first ones)" }, BOOLEANS),
  ...["trainer.rollout_data_dir", "trainer.validation_data_dir"].map((key) =>
    ignored(key, TRAIN, "every step's trajectories are written to the run folder: rollouts/step-NNNNNN.parquet and val-NNNNNN.parquet (agentrl inspect reads them)")),
  {
    key: "trainer.device",
    commands: TRAIN,
    values: ["cuda", "cpu", "npu"],
    verdict: (value) => (value === "npu" ? refused("the worker runs on CUDA GPUs or the CPU") : honoured()),
    summary: "cuda, cpu: honoured (the worker uses CUDA when torch sees a GPU, else the CPU); npu: refused",
  },
  ignored("ray_init", TRAIN, "agentrl runs without Ray: the CLI, a torchrun worker and the engine servers", { subtree: true }),
  ignored("critic", TRAIN, NO_CRITIC, { subtree: true }),
  ...["algorithm.gamma", "algorithm.lam"].map((key) => ignored(key, TRAIN, "only GAE reads it; agentrl's grpo and rloo do not")),
  ignored("trainer.balance_batch", TRAIN, "a speed setting: the worker splits each batch over its ranks by tokens", { values: BOOLEANS }),
  {
    key: "trainer.resume_mode",
    commands: TRAIN,
    values: ["auto", "disable", "resume_path"],
    verdict: (value) => (value === "disable" ? honoured() : noted("a run resumes with agentrl train --resume (the run folder's last checkpoint); without it, it starts fresh")),
    summary: "disable: honoured (a run starts fresh); auto, resume_path: noted (resume with agentrl train --resume)",
  },
  ignored("trainer.resume_from_path", TRAIN, "a run resumes from its own folder's last checkpoint with agentrl train --resume"),
  ignored("trainer.default_hdfs_dir", TRAIN, "checkpoints and the model go to trainer.default_local_dir (runs/<experiment_name>)"),
  ignored("trainer.del_local_ckpt_after_load", TRAIN, "a checkpoint stays in the run folder after a resume", { values: BOOLEANS }),
  { key: "trainer.logger", commands: TRAIN, verdict: trainLogger, summary: "console, tensorboard, wandb: honoured (a single name as a list); verl's other trackers (mlflow, swanlab, vemlp_wandb, clearml, trackio, file) noted and dropped" },
  {
    key: "trainer.logger",
    commands: SFT,
    verdict: (value) => {
      const list = typeof value === "string" ? [value] : Array.isArray(value) ? value : [];
      return list.every((name) => name === "console") ? honoured() : noted("agentrl sft logs to the console and runs/<name>/metrics.jsonl only");
    },
    summary: "console: honoured; other trackers noted (agentrl sft logs to the console and the run folder)",
  },
  ignored("global_profiler", TRAIN, "verl's profilers (nsys, torch, torch_memory) are not built in; step timings are the timing_s/* metrics", { subtree: true }),

  // verl's SFT trainer (verl/trainer/config/sft_trainer.yaml)
  ignored("data.micro_batch_size", SFT, SFT_MICRO_BATCH_BY_TOKENS),
  ignored("data.micro_batch_size_per_gpu", SFT, SFT_MICRO_BATCH_BY_TOKENS),
  ...["data.prompt_key", "data.response_key", "data.prompt_dict_keys", "data.response_dict_keys"].map((key) => ({
    key,
    commands: SFT,
    verdict: () => refused("agentrl sft trains on conversations (a messages column, data.multiturn.messages_key), not on prompt/response columns"),
    summary: "refused: agentrl sft reads conversations, not single-turn prompt/response columns",
  })),
  renamed("optim.lr_warmup_steps_ratio", SFT, "optim.warmup_steps_ratio"),
  fixed("ulysses_sequence_parallel_size", SFT, 1, "each sequence on one GPU", { note: NO_SEQUENCE_PARALLEL }),
];

/** The entry for a dotted key under `command`: its own, or a subtree's it sits in. */
export function verlKeyFor(key: string, command: VerlCommand): VerlKey | undefined {
  return VERL_KEYS.find((entry) => entry.commands.includes(command) && (entry.key === key || (entry.subtree && key.startsWith(`${entry.key}.`))));
}

/** The names of the command's verl keys right below dotted `path` ("" = the top level), for "did you mean". */
export function verlNamesUnder(path: string, command: VerlCommand): string[] {
  const prefix = path ? `${path}.` : "";
  const below = VERL_KEYS.filter((entry) => entry.commands.includes(command) && entry.key.startsWith(prefix));
  return [...new Set(below.map((entry) => entry.key.slice(prefix.length).split(".")[0]!))];
}

/** A value as a Hydra override writes it: `true`, `0.85`, `text`, `[console,wandb]`. */
export function showValue(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(showValue).join(",")}]`;
  if (value !== null && typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** The verdict on one value, checking it against verl's own values first. */
export function judgeVerlValue(entry: VerlKey, value: unknown): VerlVerdict {
  if (entry.values && !entry.values.includes(value)) {
    return refused(`not one of verl's values: ${entry.values.map(showValue).join(", ")}`);
  }
  return entry.verdict(value);
}
