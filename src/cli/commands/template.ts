import type { Command } from "commander";
import type { TemplateCommandFlags as TemplateFlags } from "../../chat/template-command.js";

export function registerTemplate(program: Command): void {
  program
    .command("template")
    .description("Render a conversation with a model's chat template: text, token ids and loss mask")
    .requiredOption("--model <dir>", "Hugging Face model folder (tokenizer.json, tokenizer_config.json)")
    .requiredOption("--messages <file>", "JSON file: an array of chat messages, or {messages, tools}")
    .option("--tools <file>", "JSON file: an array of OpenAI function tool schemas")
    .option("--drift <mode>", "drift check against a full re-render: strict, ignore_strippable or off", "strict")
    .option("--kwargs <json>", "extra template variables as a JSON object, e.g. '{\"enable_thinking\": false}'")
    .option("--json", "print {text, ids, mask, segments, drift} as JSON")
    .addHelpText(
      "after",
      `
Messages up to the first assistant message are the prompt (rendered with the generation prompt). Each assistant
message is replayed as if the engine had sampled it as the template renders it (mask 1); tool results and user
messages in between are appended as template deltas (mask 0).

Example:
  $ agentrl template --model ~/models/Qwen2.5-0.5B-Instruct --messages chat.json --tools tools.json`,
    )
    .action(async (flags: TemplateFlags) => {
      const { runTemplate } = await import("../../chat/template-command.js");
      await runTemplate(flags);
    });
}
