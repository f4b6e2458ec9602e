/**
 * The command lines agentrl launches inference servers with, built as argument arrays (never a shell string, so a
 * model path with spaces or quotes is passed through untouched). Pure functions: the unit tests pin every flag.
 */
import path from "node:path";
import { UsageError } from "../errors.js";

/** Which inference server: the `--engine` flag's value (the embedded server or SGLang). */
export type InferenceServerKind = "embedded" | "sglang";

export interface ServerLaunchOptions {
  engine: InferenceServerKind;
  /** Model folder (or, for SGLang, a Hugging Face id). */
  model: string;
  host: string;
  port: number;
  /** GPU ids to run on; they become CUDA_VISIBLE_DEVICES. Empty: the server's default device. */
  gpus?: readonly number[];
  /** SGLang tensor-parallel size; defaults to the number of GPUs divided by dpSize. */
  tpSize?: number;
  /** SGLang data-parallel replicas inside one server. */
  dpSize?: number;
  /** Training shares these GPUs: SGLang must be able to release its memory (`--enable-memory-saver`). */
  colocated?: boolean;
  apiKey?: string;
  /** Flags appended verbatim after agentrl's own (what the user wrote after `--`). */
  extraArgs?: readonly string[];
  /** LoRA adapters per request (a LoRA run without lora.merge): --enable-lora with these limits. */
  lora?: LoraServing;
}

export interface LoraServing {
  /** --max-lora-rank: the adapter's rank (actor_rollout_ref.model.lora_rank). */
  maxRank: number;
  /** --lora-target-modules: all-linear, or the module names (actor_rollout_ref.model.target_modules). */
  targetModules: "all-linear" | readonly string[];
}

/** SGLang's LoRA flags, which the embedded engine takes too. */
export function loraServerFlags(lora: LoraServing | undefined): string[] {
  if (!lora) return [];
  const modules = lora.targetModules === "all-linear" ? ["all-linear"] : [...lora.targetModules];
  return ["--enable-lora", "--max-lora-rank", String(lora.maxRank), "--lora-target-modules", ...modules];
}

export interface LaunchCommand {
  /** Arguments after the Python interpreter. */
  args: string[];
  /** Variables added to the child's environment. */
  env: Record<string, string>;
}

/**
 * Flags agentrl decides itself; the same flag after `--` would contradict it. `--tool-call-parser` is refused because
 * agentrl parses tool calls on its side from the sampled token ids; a server-side parser only matters for the
 * OpenAI chat endpoint, which agentrl does not use, and would make the two disagree silently.
 */
const OWNED_FLAGS = ["--model-path", "--model", "--host", "--port", "--api-key"];
const REFUSED_FLAGS: Record<string, string> = {
  "--tool-call-parser": "agentrl parses tool calls itself from the sampled tokens; a server-side parser is not used for /generate",
  "--skip-tokenizer-init": "agentrl's drift and doctor checks need the server's tokenizer; /generate works with input_ids either way",
};

function flagName(arg: string): string {
  return arg.split("=", 1)[0]!;
}

function checkExtraArgs(extra: readonly string[]): void {
  for (const arg of extra) {
    const name = flagName(arg);
    if (OWNED_FLAGS.includes(name)) {
      throw new UsageError(`'${name}' after -- clashes with agentrl serve's own flag`, {
        hint: "use agentrl serve's --model, --host, --port and --api-key instead",
      });
    }
    const why = REFUSED_FLAGS[name];
    if (why !== undefined) throw new UsageError(`'${name}' is not allowed: ${why}`);
  }
}

function gpuEnv(gpus: readonly number[] | undefined): Record<string, string> {
  return gpus && gpus.length > 0 ? { CUDA_VISIBLE_DEVICES: gpus.join(",") } : {};
}

/** `python -m sglang.launch_server ...` with the flags RL needs. */
export function sglangLaunchCommand(options: ServerLaunchOptions): LaunchCommand {
  const extra = options.extraArgs ?? [];
  checkExtraArgs(extra);
  const gpuCount = options.gpus?.length ?? 0;
  const dp = options.dpSize ?? 1;
  let tp = options.tpSize;
  if (tp === undefined && gpuCount > 0) {
    if (gpuCount % dp !== 0) {
      throw new UsageError(`--gpus lists ${gpuCount} GPUs, which --dp ${dp} does not divide`);
    }
    tp = gpuCount / dp;
  }
  if (tp !== undefined && gpuCount > 0 && tp * dp !== gpuCount) {
    throw new UsageError(`--tp ${tp} × --dp ${dp} = ${tp * dp} GPUs, but --gpus lists ${gpuCount}`);
  }
  const args = ["-m", "sglang.launch_server", "--model-path", options.model, "--host", options.host, "--port", String(options.port)];
  if (tp !== undefined && tp > 1) args.push("--tp-size", String(tp));
  if (dp > 1) args.push("--dp-size", String(dp));
  // /release_memory_occupation and /resume_memory_occupation, which hand the GPU to the trainer, need it.
  if (options.colocated) args.push("--enable-memory-saver");
  if (options.apiKey) args.push("--api-key", options.apiKey);
  args.push(...loraServerFlags(options.lora), ...extra);
  return { args, env: gpuEnv(options.gpus) };
}

/** `python -m agentrl_worker.embedded_server ...`; `workerDir` goes first on PYTHONPATH. */
export function embeddedLaunchCommand(options: ServerLaunchOptions, workerDir: string): LaunchCommand {
  const extra = options.extraArgs ?? [];
  checkExtraArgs(extra);
  if ((options.tpSize ?? 1) > 1 || (options.dpSize ?? 1) > 1) {
    throw new UsageError("the embedded engine runs on one device: --tp and --dp are for --engine sglang");
  }
  if (options.colocated) {
    throw new UsageError("--colocated is for --engine sglang (the embedded engine cannot release its memory)");
  }
  const gpus = options.gpus ?? [];
  if (gpus.length > 1) throw new UsageError(`the embedded engine runs on one device; --gpus lists ${gpus.length}`);
  const args = ["-m", "agentrl_worker.embedded_server", "--model", options.model, "--host", options.host, "--port", String(options.port)];
  if (gpus.length === 1) args.push("--device", "cuda");
  if (options.apiKey) args.push("--api-key", options.apiKey);
  args.push(...loraServerFlags(options.lora), ...extra);
  return { args, env: { ...gpuEnv(gpus), PYTHONPATH: prependPath(workerDir, process.env.PYTHONPATH) } };
}

/** `python -m sglang_router.launch_router --worker-urls ...` in front of several servers. */
export function routerLaunchCommand(options: {
  workerUrls: readonly string[];
  host: string;
  port: number;
  policy?: string;
  apiKey?: string;
}): LaunchCommand {
  if (options.workerUrls.length === 0) throw new UsageError("the router needs at least one worker URL");
  const args = [
    "-m",
    "sglang_router.launch_router",
    "--worker-urls",
    ...options.workerUrls,
    "--policy",
    options.policy ?? "cache_aware",
    "--host",
    options.host,
    "--port",
    String(options.port),
  ];
  if (options.apiKey) args.push("--api-key", options.apiKey);
  return { args, env: {} };
}

function prependPath(dir: string, existing: string | undefined): string {
  return existing ? `${dir}${path.delimiter}${existing}` : dir;
}

/** The command as a user may see it in a log: the API key replaced. */
export function redactArgs(args: readonly string[]): string[] {
  return args.map((arg, i) => (args[i - 1] === "--api-key" ? "<redacted>" : arg.startsWith("--api-key=") ? "--api-key=<redacted>" : arg));
}
