import type { Command } from "commander";
import { collect, nonNegativeInt, positiveInt } from "../flag-values.js";
import type { InspectFlags } from "../../inspect/command.js";


export function registerInspect(program: Command): void {
  program
    .command("inspect")
    .description("Read trajectory files and run folders in the terminal")
    .argument("<path>", "trajectory file (.parquet, .jsonl, an unfinished .parquet.parts folder) or run folder")
    .argument("[view]", "summary (default) | list | show")
    .argument("[id]", "with show: the trajectory id, e.g. 0:1")
    .option("-w, --where <expr>", "keep trajectories where FIELD OP VALUE holds (repeat to AND), e.g. reward<1, turns>=3, finish=length", collect)
    .option("-g, --grep <text>", "keep trajectories whose text (turns, tool calls, errors) contains TEXT")
    .option("--sort <field>", "order the list by a field; -field for descending (e.g. --sort -length)")
    .option("--limit <n>", "list at most N trajectories", positiveInt("--limit"))
    .option("-i, --index <n>", "with show: the Nth matching trajectory (0-based, the # column of list)", nonNegativeInt("--index"))
    .option("-t, --tokens", "with show: token-level view (loss mask shading, log-probs, trainer gap)")
    .option("--model <dir>", "tokenizer folder to decode tokens for --tokens (a run folder's config gives it)")
    .option("--full", "with show: tool responses and prompts in full, not truncated")
    .option("--max-chars <n>", "characters of a tool response shown before truncating (default 400)", positiveInt("--max-chars"))
    .option("--group <id>", "the n samples of one prompt side by side, with rewards and advantages")
    .option("--step <k>", "run folder: inspect the rollouts of step K", nonNegativeInt("--step"))
    .option("--diff <steps...>", "run folder: compare the summaries of two steps, e.g. --diff 1 20")
    .option("--metric <name>", "run folder: draw this metric's curve (reward, accuracy, kl, entropy, response_length, tool_calls, clip_fraction, or any metrics.jsonl key); repeatable", collect)
    .option("--json", "print the view as JSON")
    .option("--no-pager", "never page long output (paging happens only on a terminal)")
    .addHelpText(
      "after",
      `
Examples:
  $ agentrl inspect out/rollout.parquet                          # summary tables
  $ agentrl inspect out/rollout.parquet --where tool_errors>0 --sort -length
  $ agentrl inspect out/rollout.parquet show 3:1                 # one trajectory, turn by turn
  $ agentrl inspect out/rollout.parquet show --index 0 --tokens --model MODEL_DIR
  $ agentrl inspect out/rollout.parquet --group 3                # the samples of prompt 3 side by side
  $ agentrl inspect runs/cpu-demo                                # curves and alerts
  $ agentrl inspect runs/cpu-demo --metric reward --metric kl
  $ agentrl inspect runs/cpu-demo --step 12 --where reward=0
  $ agentrl inspect runs/cpu-demo --diff 1 20

--where fields: id group data_source status finish drift error ground_truth weight_version server tool reward score
advantage turns num_turns user_turns tool_calls tool_errors parse_errors length sampled prompt_length step data_index
sample_index retries gen_ms tool_ms total_ms. Operators: = != < <= > >= ~ (contains) !~. See docs/inspect.md.`,
    )
    .action(async (input: string, view: string | undefined, id: string | undefined, flags: InspectFlags) => {
      const { runInspect } = await import("../../inspect/command.js");
      await runInspect(input, view, id, flags);
    });
}
