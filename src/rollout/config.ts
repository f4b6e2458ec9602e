/**
 * The rollout's configuration, with verl's key names and meanings (verl.md §5, §8) so verl users feel at home.
 * `agentrl rollout` validates the whole tree below; `agentrl train` embeds `actor_rollout_ref.rollout` unchanged.
 * Every key has a default and a description; docs/config.md is generated from the same descriptions.
 */
import { z } from "zod";
import { applyChatTemplateKwargs, customChatTemplateKeys } from "../config/chat-template-keys.js";
import { toolHostConfigSchema } from "../tools/python-host.js";
import { PARSER_FORMATS } from "../parsers/index.js";
import { TOOL_LIFETIMES } from "../tools/index.js";
import { builtinRewardKwargsSchema, DEFAULT_REWARD_NAME } from "../rewards/reward.js";

const seconds = (description: string, value: number) => z.number().positive().default(value).describe(`${description} (seconds)`);

export const multiTurnSchema = z
  .strictObject({
    enable: z.boolean().default(true).describe("multi-turn rollouts (tools and interactions); false = one assistant turn"),
    max_assistant_turns: z
      .number().int().positive().nullable().default(null)
      .describe("most engine generations per trajectory; null = no limit (verl agent loop)"),
    max_user_turns: z
      .number().int().nonnegative().nullable().default(null)
      .describe("most tool or interaction turns per trajectory, counted together; null = no limit"),
    max_parallel_calls: z
      .number().int().positive().default(1)
      .describe("tool calls executed per assistant turn; extra calls get an error observation (verl drops them silently)"),
    max_tool_response_length: z
      .number().int().positive().default(256)
      .describe("characters of tool text kept (verl counts characters, not tokens)"),
    tool_response_truncate_side: z
      .enum(["left", "right", "middle"]).default("middle")
      .describe("which part of a long tool response is kept: left = the start, right = the end, middle = both ends"),
    tool_config_path: z.string().nullable().default(null).describe("tool YAML in verl's format"),
    interaction_config_path: z.string().nullable().default(null).describe("interaction YAML in verl's format"),
    format: z
      .enum(PARSER_FORMATS as [string, ...string[]]).default("auto")
      .describe("function-call parser; auto picks by the model's chat template (verl's hermes is the qwen25 format)"),
    tokenization_sanity_check_mode: z
      .enum(["strict", "ignore_strippable", "disable"]).default("strict")
      .describe("drift check of the token record against a full template render at the end of each trajectory"),
    tool_timeout: seconds("default wall-clock limit of one tool call", 30),
    tool_lifetime: z
      .enum(TOOL_LIFETIMES).default("trajectory")
      .describe(
        "trajectory = one instance per tool per trajectory: create at the start for the tools the row's tools_kwargs " +
          "names (others at their first call), calc_reward at the end, release on every exit (verl's SGLang rollout); " +
          "call = create, execute, release per call, no calc_reward (verl's agent loop)",
      ),
    tool_score_reward: z
      .enum(["none", "sum"]).default("none")
      .describe("what the tools' calc_reward values (the record's tool_scores) do to the reward: none = recorded only, as in verl; sum = added to it"),
  })
  .describe("actor_rollout_ref.rollout.multi_turn");

export const serverSchema = z
  .strictObject({
    urls: z.array(z.string()).default([]).describe("SGLang server URLs, or one sglang router URL"),
    worker_urls: z
      .array(z.string()).nullable().default(null)
      .describe("every worker URL behind a router, for weight updates and aborts (the router does not route them)"),
    api_key_env: z.string().default("SGLANG_API_KEY").describe("environment variable holding the server's API key, if any"),
    timeout: seconds("one /generate request, headers and body", 600),
    connect_timeout: seconds("TCP connect", 10),
    admin_timeout: seconds("one admin call (weight load, pause, continue, memory release): a weight sync that does not answer in time counts as failed, and the run goes on with the served weights", 600),
    max_attempts: z.number().int().min(1).default(8).describe("tries per request (1 + retries) on connection errors, timeouts, 429, 5xx, cut bodies and malformed JSON; 8 keeps a 20% fault rate from failing 1 request in 100 000"),
    retry_delay: z.number().nonnegative().default(0.5).describe("first backoff delay, doubled per retry, capped at 8 s (seconds)"),
    adaptive_concurrency: z
      .boolean().default(true)
      .describe(
        "send fewer than max_concurrency requests at once while the server shows overload (429, 503, timeouts while " +
          "answers are slow), so a slow server cannot turn timeouts into a retry storm; false = always max_concurrency",
      ),
  })
  .describe("actor_rollout_ref.rollout.server");

/** An agent written against the OpenAI API, run once per trajectory against the gateway (docs/openai-gateway.md). */
export const openaiAgentSchema = z
  .strictObject({
    kind: z.literal("openai").describe("an agent that talks to agentrl's OpenAI-compatible gateway"),
    command: z
      .union([z.string().min(1), z.array(z.string().min(1)).min(1)]).optional()
      .describe("the agent as a command, in any language: a string runs under /bin/sh -c, a list runs as argv; it gets OPENAI_BASE_URL (also as OPENAI_API_BASE), OPENAI_API_KEY and the row as JSON on stdin"),
    function: z
      .string().min(1).optional()
      .describe("the agent as a function called with a ready OpenAI client and the row: file.py#name (Python, sync or async) or file.mjs#name (JS; default export without #)"),
    reward: z
      .enum(["auto", "agent", "reward_function"]).default("auto")
      .describe("auto: the agent's last stdout line or return value when it holds {\"reward\": x}, else the reward function; agent: the agent must report one; reward_function: ignore what the agent reports"),
    sandbox: z
      .enum(["none", "bwrap"]).default("none")
      .describe("none: a plain child process in its own process group; bwrap: bubblewrap, the working folder read-only, a private /tmp, the network shared (the gateway is on loopback)"),
    env: z.record(z.string(), z.string()).default({}).describe("extra environment variables for the agent"),
    python: z.string().min(1).nullable().default(null).describe("the interpreter of a Python function agent (default: agentrl's .venv, else python3)"),
    workers: z
      .number().int().positive().max(64).nullable().default(null)
      .describe("a Python function agent's host processes, which share its trajectories (each runs many at once, its Python on one core); default: one per 4 CPU cores, at most 8"),
    response_format: z
      .enum(["constrain", "sample"]).default("constrain")
      .describe("a request's response_format json_object/json_schema (Responses: text.format): constrain = the engine's grammar-constrained decoding (SGLang's json_schema; not on the embedded engine), in turns without tools; sample = sampled as without one"),
  })
  .refine((agent) => (agent.command === undefined) !== (agent.function === undefined), { message: "give exactly one of command and function" })
  .refine((agent) => agent.workers === null || /\.py(#|$)/.test(agent.function ?? ""), {
    message: "workers is for Python function agents (function: file.py#name): a command runs a process per trajectory, a JS function runs in agentrl",
    path: ["workers"],
  });
export type OpenaiAgentSpec = z.infer<typeof openaiAgentSchema>;

export const agentSchema = z
  .strictObject({
    default_agent_loop: z
      .string().min(1).default("tool_agent")
      .describe("agent loop of rows without agent_name: tool_agent (built-in: tools, simulated user, multi_turn limits), single_turn_agent (one turn) or a name of agent_loops (verl's default_agent_loop)"),
    agent_loops: z
      .record(z.string().min(1), z.union([z.string().min(1), openaiAgentSchema])).default({})
      .describe("custom agent loops: name -> module, relative to the working folder: JS (.js/.mjs, its default export) or Python (file.py for its agent_loop, file.py#name, pkg.mod.name); or an agent on the OpenAI API, {kind: openai, command | function} (docs/openai-gateway.md); a row's agent_name picks one (docs/agent-loops.md)"),
    agent_loop_config_path: z
      .string().min(1).nullable().default(null)
      .describe("verl's agent loop file: a YAML list of {name, _target_, ...kwargs}, _target_ a Python loop (pkg.mod.name, file.py#name; other keys go to a loop class) or a JS module; verl's ToolAgentLoop and SingleTurnAgentLoop are the built-ins (docs/agent-loops.md)"),
    python_host: toolHostConfigSchema
      .prefault({})
      .describe("how Python agent loops run: the Python tool host's keys (python, sandbox: bwrap | none, bwrap, allow_network, startup_timeout_s)"),
  })
  .describe("actor_rollout_ref.rollout.agent");

export const rolloutSchema = z
  .strictObject({
    n: z.number().int().positive().default(1).describe("samples per prompt (GRPO group size)"),
    temperature: z.number().nonnegative().default(1.0).describe("sampling temperature; 0 = greedy"),
    top_p: z.number().gt(0).lte(1).default(1.0).describe("nucleus sampling"),
    top_k: z.number().int().default(-1).describe("top-k sampling; -1 = all"),
    max_concurrency: z
      .number().int().positive().default(256)
      .describe("trajectories in flight at once across all servers (each has at most one request in flight)"),
    threads: z
      .number().int().positive().default(1)
      .describe(
        "worker threads that run the trajectories of `agentrl rollout`; 1 = all in the main thread. Raise it when the " +
          "client's one core is the limit (top shows agentrl near 100% CPU while the servers wait): the main thread " +
          "keeps the one scheduler (max_concurrency across all threads) and the one output file; each thread loads " +
          "its own tokenizer, tools, reward and server client with its share of max_concurrency; the clients balance " +
          "as one server pool (shared loads and cool-downs, docs/architecture.md). " +
          "agentrl train runs in one thread",
      ),
    trajectory_timeout: seconds("wall-clock deadline of one whole trajectory; then it is aborted and recorded as such", 1800),
    over_sample_rate: z
      .number().min(0).lt(1).default(0)
      .describe(
        "abort a batch's running trajectories once (1 - rate) of them have finished; they are recorded as aborted " +
          "(finish_reason over_sample) and not trained on. 0 = off (verl's over_sample_rate; docs/scheduling.md)",
      ),
    seed: z.number().int().nullable().default(null).describe("per-request sampling seeds derive from it when set"),
    multi_turn: multiTurnSchema.prefault({}),
    agent: agentSchema.prefault({}),
    server: serverSchema.prefault({}),
  })
  .describe("actor_rollout_ref.rollout");

/**
 * verl's custom_reward_function, shared by `agentrl rollout` and `agentrl train`. Without a module, reward_kwargs are
 * the built-in scorers' options and are checked here, so a misspelled one fails before any rollout.
 */
export const customRewardFunctionSchema = z
  .strictObject({
    path: z.string().nullable().default(null).describe("JS module (.js/.mjs) or Python file (.py) with the reward function (verl's custom_reward_function.path); null = the built-in reward of each data_source"),
    name: z
      .string().min(1).default(DEFAULT_REWARD_NAME)
      .describe("the module's exported function; at the default, compute_score, the JS spelling computeScore or a default export is taken too"),
    reward_kwargs: z
      .record(z.string(), z.unknown()).default({})
      .describe("extra arguments of the reward function (verl's reward_kwargs); built-in: shaped (agentrl/vault: the shaped reward instead of correctness only)"),
    python: z
      .strictObject({
        executable: z.string().min(1).nullable().default(null).describe("interpreter for a .py reward file; null = the repository's .venv/bin/python when it exists, else python3"),
        workers: z.number().int().positive().nullable().default(null).describe("processes scoring a .py reward file in parallel; null = min(4, CPU count)"),
        timeout: z.number().positive().default(60).describe("seconds one call of a .py reward function may take; past it the trajectory fails and the process is restarted"),
      })
      .optional()
      .describe("how a .py reward file runs (agentrl's; absent = the defaults of its keys)"),
  })
  .superRefine((value, ctx) => {
    if (value.path !== null) return;
    const parsed = builtinRewardKwargsSchema.safeParse(value.reward_kwargs);
    if (parsed.success) return;
    for (const issue of parsed.error.issues) {
      const keys = issue.code === "unrecognized_keys" ? issue.keys : [undefined];
      for (const key of keys) {
        ctx.addIssue({
          code: "custom",
          path: ["reward_kwargs", ...issue.path, ...(key === undefined ? [] : [key])],
          message:
            issue.code === "unrecognized_keys"
              ? `not an option of the built-in rewards (they take: ${Object.keys(builtinRewardKwargsSchema.shape).join(", ")}); a reward module (path) gets any`
              : issue.message,
        });
      }
    }
  });

export const rolloutConfigSchema = z.strictObject({
  data: z
    .strictObject({
      path: z.string().nullable().default(null).describe("dataset parquet in verl's schema (agentrl preprocess writes one)"),
      max_prompt_length: z.number().int().positive().default(1024).describe("tokens of the rendered prompt"),
      max_response_length: z
        .number().int().positive().default(1024)
        .describe("tokens of the whole response: every assistant turn and every tool/user turn between them"),
      filter_overlong_prompts: z.boolean().default(true).describe("skip prompts longer than max_prompt_length instead of failing"),
      limit: z.number().int().positive().nullable().default(null).describe("use only the first N prompts"),
      apply_chat_template_kwargs: applyChatTemplateKwargs("every render (prompts, tool and user turns, the drift check)"),
    })
    .prefault({}),
  actor_rollout_ref: z
    .strictObject({
      model: z
        .strictObject({
          path: z.string().nullable().default(null).describe("model folder: tokenizer and chat template"),
          ...customChatTemplateKeys,
        })
        .prefault({}),
      rollout: rolloutSchema.prefault({}),
    })
    .prefault({}),
  custom_reward_function: customRewardFunctionSchema.prefault({}),
  output: z
    .strictObject({
      path: z.string().default("out/rollout.parquet").describe("trajectory file: .parquet or .jsonl"),
      row_group_size: z.number().int().positive().default(256).describe("trajectories per parquet row group"),
      order: z
        .enum(["completion", "sample"])
        .default("completion")
        .describe(
          "completion: trajectories in the order they finished (nothing waits on the slowest); sample: the file is " +
            "rewritten at the end in data_index, sample_index order, so any concurrency or --threads gives the same " +
            "file (it reads the whole file into memory once)",
        ),
    })
    .prefault({}),
});

export type RolloutConfig = z.infer<typeof rolloutConfigSchema>;
export type RolloutSection = z.infer<typeof rolloutSchema>;
export type MultiTurnConfig = z.infer<typeof multiTurnSchema>;
export type AgentSection = z.infer<typeof agentSchema>;
