import type { Command } from "commander";
import { positiveInt } from "../flag-values.js";


export function registerDoctor(program: Command): void {
  program
    .command("doctor")
    .description("Pre-flight checks of a model, its chat template and an inference server")
    .option("-m, --model <dir|id>", "model folder, or Hugging Face Hub id org/name[@revision] (from its cache): tokenizer and chat template (actor_rollout_ref.model.path)")
    .option("-s, --server <url>", "the SGLang or embedded engine URL to check")
    .option("--tools <yaml>", "tool config in verl's format (multi_turn.tool_config_path); default: a probe tool")
    .option("--format <parser>", "function-call format: auto, qwen25, hermes, llama3, mistral, deepseekv3, pythonic, gpt-oss")
    .option("-c, --config <file>", "rollout or train config YAML: reads the model, server, tools, format and budgets")
    .option("--max-prompt-length <n>", "prompt budget in tokens (data.max_prompt_length)", positiveInt("--max-prompt-length"))
    .option("--max-response-length <n>", "response budget in tokens (data.max_response_length)", positiveInt("--max-response-length"))
    .option("--kwargs <json>", "extra chat template variables, e.g. '{\"enable_thinking\": false}'")
    .option("--api-key <key>", "the server's API key (prefer the SGLANG_API_KEY environment variable: flags show in ps)")
    .option("--timeout <s>", "seconds per request", positiveInt("--timeout"))
    .option("--lora-rank <r>", "check the server takes LoRA adapters of this rank (a LoRA run without lora.merge; --config reads actor_rollout_ref.model.lora_rank)", positiveInt("--lora-rank"))
    .option("--json", "print the report as JSON on stdout")
    .addHelpText(
      "after",
      `
Checks: the server answers; its model matches the local tokenizer (vocabulary, special tokens, EOS); /generate with
input_ids keeps the EOS in output_ids and returns aligned logprobs; the chat template renders the tools and keeps
prefixes over a tool-call round trip; the function-call format parses the template's own tool call; the weight-update
endpoint exists; the context length covers the prompt + response budgets.

Examples:
  $ agentrl doctor --model ./Qwen3-0.6B --server http://127.0.0.1:30000 --tools tool-configs/gsm8k_tool_config.yaml
  $ agentrl doctor --config rollout.yaml --json

Exit code: 0 when nothing failed (warnings allowed), 1 when a check failed, 2 for bad flags or input files.`,
    )
    .action(async (flags) => {
      const { runDoctorCommand } = await import("../../doctor/command.js");
      await runDoctorCommand(flags);
    });
}
