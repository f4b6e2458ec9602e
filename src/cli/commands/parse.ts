import type { Command } from "commander";
import { UsageError } from "../../errors.js";

interface ParseFlags {
  format: string;
  tools?: string;
  truncated?: boolean;
  model?: string;
}

/** Model output from stdin, as strict UTF-8: a byte that is not UTF-8 is an error naming its line, not U+FFFD. */
async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const { decodeUtf8 } = await import("../../data/text-file.js");
  return decodeUtf8(Buffer.concat(chunks), "stdin");
}

export function registerParse(program: Command): void {
  program
    .command("parse")
    .description("Parse model output text (stdin) into tool calls with a function-call parser")
    .requiredOption("--format <name>", "function-call format: qwen25, hermes, llama3, mistral, deepseekv3, pythonic, gpt-oss, auto")
    .option("--tools <names>", "comma-separated tool names offered to the model; other names become unknown_tool errors")
    .option("--truncated", "the engine cut the output off (finish reason length): an unclosed last call is truncated")
    .option("--model <dir>", "model folder whose chat template and tokens pick the format, for --format auto")
    .addHelpText(
      "after",
      `
Prints {"normal_text", "calls": [{"name", "arguments"}], "errors": [{"kind", "message", "raw", "name"?}]} as JSON.
Text from stdin has lost the token ids, so a delimiter spelled inside an argument string is taken for a delimiter;
the rollout parses token ids and does not have that problem (docs/parsers.md).

Example:
  $ printf '<tool_call>\\n{"name": "calc", "arguments": {"x": 1}}\\n</tool_call>' | agentrl parse --format qwen25`,
    )
    .action(async (flags: ParseFlags) => {
      const { PARSER_FORMATS, getParser, isParserFormat } = await import("../../parsers/index.js");
      if (!isParserFormat(flags.format)) {
        throw new UsageError(`unknown --format '${flags.format}'`, { hint: `valid formats: ${PARSER_FORMATS.join(", ")}` });
      }
      let model: { chatTemplate?: string; specialTokens?: string[] } = {};
      if (flags.format === "auto") {
        if (flags.model === undefined) {
          throw new UsageError("--format auto needs --model DIR", { hint: "or name the format explicitly" });
        }
        const { readModelHints } = await import("../../parsers/model-hints.js");
        model = await readModelHints(flags.model);
      }
      const parser = getParser(flags.format, model);
      if (process.stdin.isTTY) {
        throw new UsageError("pipe the model output on stdin", { hint: "e.g. agentrl parse --format qwen25 < output.txt" });
      }
      const tools = flags.tools?.split(",").map((t) => t.trim()).filter((t) => t !== "");
      const result = parser.parse(await readStdin(), { tools, truncated: flags.truncated === true });
      const output = {
        normal_text: result.normalText,
        calls: result.calls.map((c) => ({ name: c.name, arguments: c.arguments })),
        errors: result.errors,
      };
      process.stdout.write(`${JSON.stringify(output, null, 2)}\n`);
    });
}
