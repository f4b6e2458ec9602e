/**
 * Weights & Biases logging (trainer.logger: wandb): a small Python child (agentrl_worker.wandb_logger) fed the run's
 * effective config, every metrics record at its step, and with trainer.log_val_generations a table of validation
 * samples at each validation. The wandb run id lives in the run folder (`wandb-run-id`), so `--resume` continues the
 * same wandb run and a new run folder is a new one. If wandb cannot log (not installed, wandb.init failing, a log
 * failing) the child exits with one line, the run notes it once and goes on; metrics.jsonl is written either way.
 */
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { sampleOrder, type Trajectory } from "../data/trajectory.js";
import { startPythonSink, type MetricsSink } from "./python-sink.js";

/** The wandb key of the validation samples' table, verl's. */
export const VAL_GENERATIONS_KEY = "val/generations";
export const VAL_GENERATIONS_COLUMNS = ["step", "input", "output", "score"] as const;
/** How long the end of a run waits for wandb to finish (an online run uploads what it has not sent yet). */
const FINISH_TIMEOUT_MS = 120_000;

export interface WandbSink extends MetricsSink {
  /** The table of the first `n` validation samples (by data_index, then sample_index) at `step`. */
  valGenerations(step: number, trajectories: readonly Trajectory[], n: number): void;
}

export interface WandbRun {
  /** The run folder: the id file lives there, and wandb's own folder (wandb/) unless $WANDB_DIR is set. */
  root: string;
  project: string;
  name: string;
  /** Continue the wandb run the folder's id names (--resume from a checkpoint); otherwise a new run and a new id. */
  continueRun: boolean;
  /** The effective config, the wandb run's config. */
  config: unknown;
}

/** The folder's wandb run id: the stored one when continuing, else a new one (written before the run starts). */
export function wandbRunId(root: string, continueRun: boolean): string {
  const file = path.join(root, "wandb-run-id");
  if (continueRun && existsSync(file)) {
    const stored = readFileSync(file, "utf8").trim();
    if (stored) return stored;
  }
  const id = randomId();
  writeFileSync(file, `${id}\n`);
  return id;
}

/** 8 characters of [0-9a-z], as wandb's own run ids. */
function randomId(): string {
  return Array.from(randomBytes(8), (byte) => (byte % 36).toString(36)).join("");
}

export function startWandb(run: WandbRun, note: (message: string) => void): WandbSink {
  const id = wandbRunId(run.root, run.continueRun);
  let syncDir: string | undefined;
  const sink = startPythonSink({
    module: "agentrl_worker.wandb_logger",
    args: ["--project", run.project, "--name", run.name, "--id", id, ...(process.env.WANDB_DIR ? [] : ["--dir", run.root])],
    label: "wandb logging",
    onProblem: (message) => note(syncDir ? `${message} (its local files: wandb sync ${syncDir})` : message),
    onStdoutLine(line) {
      const started = parseStarted(line);
      if (!started) return;
      // run.dir is the run's files/ folder; wandb sync takes the folder above it.
      syncDir = path.dirname(started.dir);
      note(started.offline ? `wandb: offline run ${started.id} in ${syncDir} (upload with: wandb sync ${syncDir})` : `wandb: ${started.url}`);
    },
    closeTimeoutMs: FINISH_TIMEOUT_MS,
  });
  sink.log({ config: run.config });
  return {
    ...sink,
    valGenerations(step, trajectories, n) {
      const rows = valGenerationRows(trajectories, n).map((row) => [step, row.input, row.output, row.score]);
      if (rows.length > 0) sink.log({ table: VAL_GENERATIONS_KEY, step, columns: VAL_GENERATIONS_COLUMNS, rows });
    },
  };
}

interface Started {
  id: string;
  url: string | null;
  dir: string;
  offline: boolean;
}

function parseStarted(line: string): Started | undefined {
  try {
    const event = JSON.parse(line) as Started & { event?: string };
    return event.event === "started" ? event : undefined;
  } catch {
    return undefined; // wandb's own output
  }
}

export interface ValGeneration {
  /** The prompt's messages, one `role: content` line each. */
  input: string;
  /** The response's tokens as text: the model's turns and the tool and user turns between them, template included. */
  output: string;
  score: number;
}

/**
 * verl's log_val_generations: the same `n` samples at every validation (verl sorts by input and shuffles with a fixed
 * seed; here the first n by data_index, then sample_index), so that a table compares the same prompts across steps.
 */
export function valGenerationRows(trajectories: readonly Trajectory[], n: number): ValGeneration[] {
  return [...trajectories]
    .sort(sampleOrder)
    .slice(0, n)
    .map((t) => ({
      input: promptText(t.messages),
      output: t.segments.filter((s) => s.kind !== "prompt").map((s) => s.text).join(""),
      score: t.score,
    }));
}

interface PromptMessage {
  role: string;
  content?: unknown;
}

/** The messages before the first assistant turn. `messages` is the record's list, or its JSON text (format 1). */
function promptText(messages: string | readonly PromptMessage[]): string {
  const list = (typeof messages === "string" ? JSON.parse(messages) : messages) as readonly PromptMessage[];
  const end = list.findIndex((m) => m.role === "assistant");
  return list
    .slice(0, end === -1 ? list.length : end)
    .map((m) => `${m.role}: ${typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? "")}`)
    .join("\n");
}
