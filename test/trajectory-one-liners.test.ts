/**
 * docs/trajectory-format.md's "Reading the files" one-liners (jq, pandas, HF datasets) run as written, in a folder
 * holding rollouts.jsonl and rollouts.parquet made by the trajectory writer, and print values, not JSON text.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT, VENV_PYTHON } from "./helpers/cli.js";
import { tempDir } from "./helpers/tmp.js";
import { makeTrajectory } from "./helpers/trajectories.js";
import { openTrajectoryWriter } from "../src/data/trajectory-store.js";
import type { Trajectory } from "../src/data/trajectory.js";

/** The lines of the first bash block under the doc's "## Reading the files". */
function oneLiners(): string[] {
  const doc = readFileSync(path.join(REPO_ROOT, "docs", "trajectory-format.md"), "utf8");
  const section = doc.slice(doc.indexOf("## Reading the files"));
  const block = /```bash\n([\s\S]*?)```/.exec(section)![1]!;
  return block.split("\n").filter((line) => line.trim() !== "" && !line.startsWith("#"));
}

/** A GSM8K tool trajectory as the tool agent records it: one call to the tool, then the answer. */
function gsm8kTrajectory(i: number, answer: string, acc: boolean): Trajectory {
  return makeTrajectory(i, {
    messages: [
      { role: "user", content: "What is 8 + 9?" },
      { role: "assistant", content: "", tool_calls: [{ type: "function", function: { name: "calc_gsm8k_reward", arguments: { answer } } }] },
      { role: "tool", content: `Current parsed answer='${answer}' reward=${acc ? "1.0" : "0.0"}` },
      { role: "assistant", content: `#### ${answer}` },
    ],
    reward_extra: { acc },
    tool_scores: { calc_gsm8k_reward: acc ? 1 : 0 },
  });
}

/** What each one-liner prints, in the doc's order. */
const EXPECTED = ["true\nfalse", "1\n0", "17\n18", "0.5", "1.0 #### 17", "0.5", "#### 17"];

describe("docs/trajectory-format.md's one-liners", () => {
  let dir: string;
  beforeAll(async () => {
    dir = tempDir("one-liners");
    for (const name of ["rollouts.jsonl", "rollouts.parquet"]) {
      const writer = await openTrajectoryWriter(path.join(dir, name));
      await writer.write(gsm8kTrajectory(0, "17", true));
      await writer.write(gsm8kTrajectory(1, "18", false));
      await writer.close();
    }
  });

  it("are the ones this test checks", () => {
    expect(oneLiners()).toHaveLength(EXPECTED.length);
  });

  it.each(oneLiners().map((line, i) => [line, EXPECTED[i]]))("%s", (line, expected) => {
    const env = {
      ...process.env,
      PATH: `${path.dirname(VENV_PYTHON)}${path.delimiter}${process.env["PATH"] ?? ""}`,
      // HF datasets' cache in the test's folder, and no network.
      HF_HOME: path.join(dir, "hf"),
      HF_HUB_OFFLINE: "1",
      HF_DATASETS_OFFLINE: "1",
    };
    const run = spawnSync("bash", ["-c", line!], { cwd: dir, env, encoding: "utf8", timeout: 60_000 });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout.trim()).toBe(expected);
  });
});
