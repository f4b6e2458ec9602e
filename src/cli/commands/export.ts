import { Command, Option } from "commander";
import { collect, positiveInt } from "../flag-values.js";
import type { ExportFlags } from "../../export/command.js";

export function registerExport(program: Command): void {
  program
    .command("export")
    .description("Write a run's checkpoint as a Hugging Face model folder (a LoRA run's adapter merged in, or alone)")
    .argument("<run>", "the run folder agentrl train or agentrl sft wrote, e.g. runs/cpu-demo")
    .requiredOption("--out <dir>", "the folder to write (config.json, tokenizer files, model.safetensors)")
    .option("--step <n>", "the checkpoint of step N (default: the run's last checkpoint)", positiveInt("--step"))
    .option("--adapter", "LoRA runs: write the adapter alone as a PEFT folder (adapter_config.json, adapter_model.safetensors)")
    .addOption(new Option("--dtype <dtype>", "the model's weights dtype (default: the base model's own)").choices(["bfloat16", "float32", "float16"]))
    .option("--set <key=value>", "override a key of the run's config.yaml, e.g. a moved model path (repeatable)", collect)
    .option("--force", "replace --out when it exists and is not empty")
    .option("--json", "one JSON object on stdout: run, step, checkpoint, out, kind (model | adapter), lora")
    .option("-q, --quiet", "no progress lines on stderr")
    .addHelpText(
      "after",
      `
Examples:
  $ agentrl export runs/cpu-demo --out exported/cpu-demo              # the last checkpoint, as a HF folder
  $ agentrl export runs/cpu-demo-lora --out exported/merged           # LoRA: base + B·A·(alpha/r), merged
  $ agentrl export runs/cpu-demo-lora --out exported/adapter --adapter   # LoRA: the PEFT adapter alone
  $ agentrl export runs/my-run --step 200 --out exported/step-200 --dtype bfloat16

The run's config.yaml says which model the run started from and its LoRA shape; the training worker loads the
checkpoint on one rank (checkpoints hold the full state, whatever the run's world size) and saves the folder as
it does during the run, so the output is what the engine was served: 'agentrl serve --model DIR' and any
config's model path load it. Loading a checkpoint reads its optimizer state too: plan memory for model and
optimizer on one process. The worker's log goes to RUN/logs/export.log.`,
    )
    .action(async (run: string, flags: ExportFlags) => {
      const { runExportCommand } = await import("../../export/command.js");
      await runExportCommand(run, flags);
    });
}
