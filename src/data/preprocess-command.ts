/** Runs `agentrl preprocess gsm8k` and prints its result: a progress spinner on stderr, then a table or JSON. */
import ora from "ora";
import { downloadGsm8k } from "./download.js";
import { preprocessGsm8k } from "./preprocess-gsm8k.js";
import type { Gsm8kVariant, Split } from "./gsm8k.js";
import { formatBytes, formatDuration, makeTable, style } from "../term.js";

export interface PreprocessGsm8kFlags {
  input?: string;
  out: string;
  variant: Gsm8kVariant;
  split: Split | "all";
  limit?: number;
  force?: boolean;
  skipInvalid?: boolean;
  json?: boolean;
}

export async function runPreprocessGsm8k(flags: PreprocessGsm8kFlags): Promise<void> {
  const splits: Split[] = flags.split === "all" ? ["train", "test"] : [flags.split];
  const spinner = ora({ text: "reading GSM8K", stream: process.stderr, isSilent: !process.stderr.isTTY || Boolean(flags.json) });
  spinner.start();
  const started = performance.now();
  try {
    const results = await preprocessGsm8k({
      ...(flags.input === undefined ? {} : { input: flags.input }),
      out: flags.out,
      variant: flags.variant,
      splits,
      ...(flags.limit === undefined ? {} : { limit: flags.limit }),
      force: flags.force ?? false,
      skipInvalid: flags.skipInvalid ?? false,
      download: (wanted) =>
        downloadGsm8k(wanted, ({ file, received, total }) => {
          spinner.text = total
            ? `downloading ${file}: ${formatBytes(received)} of ${formatBytes(total)} (${Math.floor((100 * received) / total)}%)`
            : `downloading ${file}: ${formatBytes(received)}`;
        }),
      onProgress: ({ split, rows }) => {
        spinner.text = `${split}: ${rows} rows`;
      },
    });
    spinner.stop();
    const totalMs = performance.now() - started;
    if (flags.json) {
      process.stdout.write(`${JSON.stringify({ variant: flags.variant, splits: results, ms: totalMs }, null, 2)}\n`);
      return;
    }
    const table = makeTable(["split", "rows", "skipped", "output", "size", "time"]);
    for (const r of results) {
      table.push([r.split, r.rows, r.skipped, r.output, formatBytes(r.bytes), formatDuration(r.ms)]);
    }
    process.stdout.write(`${table.toString()}\n`);
    for (const r of results) {
      if (r.skipped === 0) continue;
      process.stdout.write(style.yellow(`skipped ${r.skipped} invalid record(s) in ${r.source}, e.g.:\n`));
      for (const bad of r.firstSkipped) process.stdout.write(`  ${bad.place}: ${bad.message}\n`);
    }
    process.stdout.write(`${style.green("done")} in ${formatDuration(totalMs)} (variant: ${flags.variant})\n`);
  } catch (err) {
    spinner.stop();
    throw err;
  }
}
