import type { Command } from "commander";
import { UsageError } from "../../errors.js";
import { integerAtLeast } from "../flag-values.js";
import type { ServeFlags } from "../../serve/command.js";

const gpuList = (value: string) => {
  const ids = value.split(",").map((part) => part.trim());
  if (ids.some((id) => !/^\d+$/.test(id))) throw new UsageError(`--gpus must be comma-separated GPU ids such as 0,1,2,3, got '${value}'`);
  return ids.map(Number);
};

export function registerServe(program: Command): void {
  program
    .command("serve")
    .description("Start an inference engine (embedded CPU engine or SGLang) as a managed child")
    .argument("[engine-args...]", "extra flags for the engine, after --")
    .requiredOption("-e, --engine <kind>", "embedded (PyTorch, CPU or one GPU) or sglang")
    .option("-m, --model <dir|id>", "model folder, or a Hugging Face Hub id org/name[@revision]: resolved through huggingface_hub's cache (HF_HOME, HF_HUB_CACHE; HF_HUB_OFFLINE=1 for the cache only), downloaded if missing")
    .option("-p, --port <port>", "port to serve on; 0 picks a free one", integerAtLeast("--port", 0), 30000)
    .option("--host <host>", "address to bind", "127.0.0.1")
    .option("--gpus <ids>", "GPU ids, e.g. 0,1,2,3 (CUDA_VISIBLE_DEVICES); sglang's tp size defaults to their count", gpuList)
    .option("--tp <n>", "sglang tensor-parallel size (--tp-size)", integerAtLeast("--tp", 1))
    .option("--dp <n>", "sglang data-parallel replicas behind one port (--dp-size)", integerAtLeast("--dp", 1))
    .option("--replicas <n>", "sglang: N separate servers on ports port+1..port+N, each on 1/N of --gpus, behind the sglang router on --port", integerAtLeast("--replicas", 1))
    .option("--colocated", "training shares these GPUs: start sglang with --enable-memory-saver")
    .option("--lora-rank <r>", "serve LoRA adapters up to this rank, as a LoRA run without lora.merge syncs them (the config's actor_rollout_ref.model.lora_rank): --enable-lora --max-lora-rank R --lora-target-modules ...", integerAtLeast("--lora-rank", 1))
    .option("--lora-target-modules <modules>", "with --lora-rank: all-linear (default) or comma-separated module names (the config's target_modules)")
    .option("--api-key <key>", "require this API key (prefer the SGLANG_API_KEY environment variable: flags show in ps)")
    .option("--python <path>", "Python interpreter with the engine installed (default: .venv/bin/python, else python3)")
    .option("--log-file <file>", "append the engine's output here instead of printing it")
    .option("--startup-timeout <s>", "seconds to wait for /health", integerAtLeast("--startup-timeout", 1), 600)
    .option("-q, --quiet", "do not print the engine's output")
    .addHelpText(
      "after",
      `
Prints the URL on stdout once the engine answers /health, then stays in the foreground until Ctrl-C (or SIGTERM),
which it forwards to the engine's whole process group. The engine never outlives agentrl, even if agentrl is killed.
A port something already listens on is refused before the engine starts (exit 2).

Examples:
  $ agentrl serve --engine embedded --model out/tiny --port 30000
  $ agentrl serve --engine sglang --model Qwen/Qwen3-8B --gpus 0,1 --colocated -- --mem-fraction-static 0.6

sglang runs as 'python -m sglang.launch_server' without --tool-call-parser (agentrl parses calls itself).`,
    )
    .action(async (engineArgs: string[], flags: ServeFlags) => {
      const { runServeCommand } = await import("../../serve/command.js");
      await runServeCommand(flags, engineArgs);
    });
}
