/**
 * `agentrl export` end to end on a full-weight run (the LoRA side is in test/train-lora.test.ts): a two-step
 * `agentrl sft` of the demo model, whose last checkpoint exported must be byte for byte the model folder the run wrote
 * at its end; and the refusals a user meets before any process starts, each naming the path or flag and exiting 2:
 * no run folder, a step without a checkpoint, --adapter on a run without LoRA, an --out folder that holds files.
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT, runCli } from "./helpers/cli.js";
import { tempDir } from "./helpers/tmp.js";

const scratch = tempDir("export");
const run = path.join(scratch, "sft");

beforeAll(async () => {
  const sft = await runCli(
    ["sft", "--config", path.join(REPO_ROOT, "examples", "cpu-demo-sft.yaml"), "--quiet", "--steps", "2", "--set", `trainer.default_local_dir=${run}`],
    { timeoutMs: 180_000 },
  );
  expect(sft.code, sft.stderr).toBe(0);
}, 180_000);

describe("agentrl export", () => {
  it("writes the run's last checkpoint as the Hugging Face folder the run itself wrote", async () => {
    const out = path.join(scratch, "exported");
    const { code, stdout, stderr } = await runCli(["export", run, "--out", out], { timeoutMs: 180_000 });
    expect(code, stderr).toBe(0);
    expect(stdout).toMatch(/done: step 2's model in /);
    expect(stderr).toMatch(/starting the training worker to load checkpoints\/step-000002/);
    const files = (dir: string) => readdirSync(dir).sort();
    expect(files(out)).toEqual(files(path.join(run, "model")));
    for (const file of files(out)) expect(readFileSync(path.join(out, file)).equals(readFileSync(path.join(run, "model", file))), file).toBe(true);
  }, 180_000);

  it("refuses, exit 2, what cannot be exported, before any process starts", async () => {
    const refused = async (args: string[], message: RegExp) => {
      const { code, stderr } = await runCli(["export", ...args]);
      expect(code, stderr).toBe(2);
      expect(stderr).toMatch(message);
    };
    await refused([scratch, "--out", path.join(scratch, "a")], /not a run folder \(no config\.yaml\)/);
    await refused([run, "--step", "5", "--out", path.join(scratch, "b")], /no checkpoint of step 5[\s\S]*its checkpoints: steps 2/);
    await refused([run, "--adapter", "--out", path.join(scratch, "c")], /--adapter: .* trained every weight \(lora_rank 0\)/);
    const full = path.join(scratch, "full");
    mkdirSync(full);
    writeFileSync(path.join(full, "keep.txt"), "mine");
    await refused([run, "--out", full], /--out .*full: the folder exists and is not empty[\s\S]*--force/);
    expect(readFileSync(path.join(full, "keep.txt"), "utf8")).toBe("mine");
    await refused([run, "--out", run], /export replaces that folder, which holds the run/);
  });
});
