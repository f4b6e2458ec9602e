/**
 * Pieces shared by the tests that run `agentrl rollout` against the fake SGLang server and interrupt it: GSM8K data
 * in verl's schema, a tool-then-answer "model", a CLI child that can be signalled, and reading back whatever a run
 * left on disk.
 */
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { CLI, REPO_ROOT, SHARED, runCli } from "./cli.js";
import { IM_END } from "./qwen3.js";
import type { RespondFn, WireSamplingParams } from "../fake-sglang/index.js";
import type { ChatModel } from "../../src/chat/index.js";
import { readTrajectories } from "../../src/data/trajectory-store.js";
import type { Trajectory } from "../../src/data/trajectory.js";

export const GSM8K_DIR = path.join(SHARED, "datasets", "gsm8k");
export const GSM8K_TOOLS = path.join(REPO_ROOT, "tool-configs/gsm8k_tool_config.yaml");

export { tempDir } from "./tmp.js";

export async function readAllTrajectories(file: string): Promise<Trajectory[]> {
  const out: Trajectory[] = [];
  for await (const t of readTrajectories(file)) out.push(t);
  return out;
}

/** Preprocesses the first `limit` GSM8K train rows into `<dir>/train.parquet`; returns the CLI's result. */
export function preprocessGsm8kTrain(dir: string, limit: number) {
  return runCli(["preprocess", "gsm8k", "-i", GSM8K_DIR, "-o", dir, "--split", "train", "--limit", String(limit)]);
}

/**
 * A model that first calls verl's GSM8K tool and, once it has seen a tool response, answers. `answer` picks the
 * number from the request's sampling params (e.g. its per-request seed, to make replies differ per sample while
 * staying a pure function of the request).
 */
export function toolThenAnswer(model: ChatModel, answer: (params: WireSamplingParams) => string = () => "18"): RespondFn {
  const toolResponse = model.tokenToId("<tool_response>")!;
  const encoded = new Map<string, number[]>();
  const encode = (text: string): number[] => {
    let ids = encoded.get(text);
    if (!ids) encoded.set(text, (ids = [...model.encode(text), IM_END]));
    return ids;
  };
  return (ids, params) => {
    const value = answer(params);
    return ids.includes(toolResponse)
      ? encode(`#### ${value}`)
      : encode(`<tool_call>\n{"name": "calc_gsm8k_reward", "arguments": {"answer": "${value}"}}\n</tool_call>`);
  };
}

export interface RolloutChild {
  child: ChildProcess;
  /** Resolves when the process has exited: its code, or the signal that ended it, and everything it wrote on stderr. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>;
}

/** Starts `agentrl <args>` as a child process that the test can signal. */
export function spawnCli(args: string[]): RolloutChild {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, NO_COLOR: "1" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (chunk) => (stderr += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stderr }));
  });
  return { child, exited };
}
