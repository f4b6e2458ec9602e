/** trainer.logger: tensorboard: the event files hold the metrics and name the run `<project_name>/<experiment_name>`. */
import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { startTensorboard } from "../src/train/tensorboard.js";
import { tempDir } from "./helpers/tmp.js";
import { VENV_PYTHON } from "./helpers/cli.js";

const READ_EVENTS = `
import json, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
events = EventAccumulator(sys.argv[1]); events.Reload()
print(json.dumps({
    "run": events.Tensors("run/text_summary")[0].tensor_proto.string_val[0].decode(),
    "reward": [[e.step, e.value] for e in events.Scalars("critic/rewards/mean")],
}))
`;

describe("startTensorboard", () => {
  const dir = tempDir("tb");

  it("names the run after trainer.project_name and experiment_name, and logs each record at its step", async () => {
    const problems: string[] = [];
    const sink = startTensorboard(dir, "gsm8k-agents/seed0", (message) => problems.push(message));
    sink.log({ step: 1, "critic/rewards/mean": 0.25 });
    sink.log({ step: 2, "critic/rewards/mean": 0.75 });
    await sink.close();
    expect(problems).toEqual([]);
    const read = JSON.parse(execFileSync(VENV_PYTHON, ["-c", READ_EVENTS, dir], { encoding: "utf8" }));
    expect(read).toEqual({ run: "gsm8k-agents/seed0", reward: [[1, 0.25], [2, 0.75]] });
  });
});
