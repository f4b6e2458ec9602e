/**
 * The Ctrl-C resume hint of `agentrl train` and `agentrl sft` (issue 15, item 6) works as printed: it names the run
 * folder's own config.yaml, which holds every --set, --steps and --name of the run. The hint printed to the user
 * used to repeat only --config, so it pointed --resume at another run folder (from the config's experiment_name)
 * with the config's own step count, and failed.
 * - sft end to end: a short run started with --set, --steps and --name, interrupted with SIGINT, then the printed
 *   hint run verbatim by a shell: it resumes the same run and finishes it with each step logged once. train's is
 *   test/train-demo.test.ts, whose interrupted demo run is started so and resumed by its printed hint (a train run
 *   costs the Python start-up of the engine and the worker: the demo test's run does both jobs);
 * - the hint at unit level: quoting, the --api-key note, validating a checkpoint, and that the config.yaml a train
 *   run writes resolves back to the same effective config;
 * - --resume where no run ever started is refused without leaving an empty run folder (a wrong hint used to).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { dump as dumpYaml, load as loadYaml } from "js-yaml";
import { describe, expect, it } from "vitest";
import { CLI, REPO_ROOT, runCli } from "./helpers/cli.js";
import { DEMO_CONFIG, pollUntil } from "./helpers/train.js";
import { repeatCommand, resumeCommand, shellQuote } from "../src/train/resume-hint.js";
import { resolveTrainConfig, trainResumeHint } from "../src/train/command.js";
import { RunDir, runDirOf } from "../src/train/run-dir.js";
import { tempDir } from "./helpers/tmp.js";

const scratch = tempDir("resume-hint");

describe("the resume hint", () => {
  it("quotes a word for the shell only when it needs it", () => {
    expect(shellQuote("runs/my-run_1/config.yaml")).toBe("runs/my-run_1/config.yaml");
    expect(shellQuote("my runs/it's.yaml")).toBe(`'my runs/it'\\''s.yaml'`);
  });

  it("train: names the run folder's config.yaml, which resolves back to the run's effective config", async () => {
    const flags = {
      config: DEMO_CONFIG,
      set: ["actor_rollout_ref.actor.optim.lr=1e-3", "data.train_batch_size=2"],
      steps: 3,
      name: "hint-check",
    };
    const config = await resolveTrainConfig(flags);
    const runDir = runDirOf(config);
    expect(runDir.root).toBe(path.join("runs", "hint-check"));
    expect(trainResumeHint(config, flags, runDir)).toBe(`agentrl train --config ${path.join("runs", "hint-check", "config.yaml")} --resume`);

    // The run writes its config.yaml so (train/command.ts); resolving that file alone gives back every override.
    const stored = new RunDir(path.join(scratch, "train-config"));
    await stored.writeConfig(config);
    const resumed = await resolveTrainConfig({ config: stored.configFile, resume: true });
    expect(resumed).toEqual(config);
    expect(runDirOf(resumed).root).toBe(runDir.root);
    expect(resumed.trainer.total_training_steps).toBe(3);
    expect(resumed.data.train_batch_size).toBe(2);
  });

  it("train: a key passed with --api-key is never printed; the hint says it is needed again", async () => {
    const flags = { config: DEMO_CONFIG, apiKey: "secret-key" };
    const config = await resolveTrainConfig(flags);
    const hint = trainResumeHint(config, flags, runDirOf(config));
    expect(hint).not.toContain("secret-key");
    expect(hint).toContain("--api-key again");
  });

  it("train: validating a checkpoint (val_only with --resume) repeats the command as typed, less the key", async () => {
    const flags = { config: DEMO_CONFIG, set: ["trainer.val_only=true"], resume: true };
    const config = await resolveTrainConfig(flags);
    const argv = ["train", "--config", "my run.yaml", "--set", "trainer.val_only=true", "--resume", "--api-key", "k", "--api-key=k2"];
    expect(trainResumeHint(config, flags, runDirOf(config), argv)).toBe(
      "agentrl train --config 'my run.yaml' --set trainer.val_only=true --resume",
    );
    expect(repeatCommand(["sft", "--config", "a.yaml"])).toBe("agentrl sft --config a.yaml");
    expect(resumeCommand("sft", new RunDir("runs/x"))).toBe(`agentrl sft --config ${path.join("runs", "x", "config.yaml")} --resume`);
  });
});

/**
 * Starts `agentrl <args>` in `cwd`, interrupts it with SIGINT after its first step, and runs the hint it prints
 * verbatim in a shell with `agentrl` on PATH (as an installed CLI is). Returns the hint and the resumed run's result.
 */
async function interruptThenFollowHint(cwd: string, args: string[]) {
  const first = start(process.execPath, [CLI, ...args], cwd);
  const stepped = await pollUntil(() => first.stdout().includes('"event":"step"'), { timeoutMs: 240_000, alive: first.running });
  expect(stepped, first.stderr()).toBe(true);
  first.child.kill("SIGINT");
  const stopped = await first.exited;
  expect(stopped.code, first.stderr()).toBe(130);
  const hint = /^resume with: (.+)$/m.exec(first.stderr())?.[1];
  expect(hint, first.stderr()).toBeDefined();

  const bin = path.join(cwd, "bin");
  mkdirSync(bin, { recursive: true });
  writeFileSync(path.join(bin, "agentrl"), `#!/bin/sh\nexec ${shellQuote(process.execPath)} ${shellQuote(CLI)} "$@"\n`);
  chmodSync(path.join(bin, "agentrl"), 0o755);
  const resumed = await start("sh", ["-c", hint!], cwd, { PATH: `${bin}${path.delimiter}${process.env.PATH ?? ""}` }).exited;
  return { hint, ...resumed };
}

function loggedSteps(runDir: string): number[] {
  return readFileSync(path.join(runDir, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => (JSON.parse(l) as { step: number }).step);
}

// Each run happens in its own folder with absolute paths in its config, so the run folder (runs/<name>, relative as
// a user's would be) lands in the test's scratch folder.
describe("Ctrl-C, then the printed hint run verbatim", () => {
  it("sft: resumes the same run (its --set, --steps and --name) and finishes it with each step once", async () => {
    const cwd = path.join(scratch, "sft");
    mkdirSync(cwd);
    const config = path.join(cwd, "sft.yaml");
    writeFileSync(
      config,
      dumpYaml({
        data: { train_files: path.join(REPO_ROOT, "examples", "cpu-demo", "data", "sft.jsonl"), train_batch_size: 8, max_length: 256 },
        model: { partial_pretrain: path.join(REPO_ROOT, "examples", "cpu-demo", "model") },
        optim: { lr: 5.0e-3, weight_decay: 0.0 },
        trainer: { experiment_name: "from-the-file", total_training_steps: 3000 },
      }),
    );
    const STEPS = 12;
    const resumed = await interruptThenFollowHint(
      cwd,
      ["sft", "--config", config, "--json", "--set", "data.train_batch_size=4", "--set", "trainer.save_freq=-1", "--steps", String(STEPS), "--name", "hint-run"],
    );
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.hint).toBe(`agentrl sft --config ${path.join("runs", "hint-run", "config.yaml")} --resume`);
    expect(resumed.stdout).toMatch(/resumed from checkpoints\/step-\d{6}/);
    const runDir = path.join(cwd, "runs", "hint-run");
    expect(loggedSteps(runDir)).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
    expect((loadYaml(readFileSync(path.join(runDir, "config.yaml"), "utf8")) as { data: { train_batch_size: number } }).data.train_batch_size).toBe(4);
    expect(existsSync(path.join(cwd, "runs", "from-the-file"))).toBe(false);
  }, 300_000);
});

describe("--resume where no run ever started", () => {
  for (const [command, config] of [
    ["train", DEMO_CONFIG],
    ["sft", path.join(REPO_ROOT, "examples", "cpu-demo-sft.yaml")],
  ] as const) {
    it(`${command}: exits 2 and leaves no empty run folder behind`, async () => {
      const runDir = path.join(scratch, `never-started-${command}`);
      const result = await runCli([command, "--config", config, "--set", `trainer.default_local_dir=${runDir}`, "--resume"]);
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toContain(`error: ${runDir}: no run to resume`);
      expect(existsSync(runDir)).toBe(false);
    });
  }
});

interface Child {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  running(): boolean;
  exited: Promise<{ code: number | null; stdout: string; stderr: string }>;
}

/** Starts `command` in `cwd`, collecting its output (the CLI, or a shell running a printed command). */
function start(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Child {
  const child = spawn(command, args, { cwd, env: { ...process.env, NO_COLOR: "1", ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  let running = true;
  child.stdout!.on("data", (chunk) => (stdout += chunk));
  child.stderr!.on("data", (chunk) => (stderr += chunk));
  const exited = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => {
      running = false;
      resolve({ code, stdout, stderr });
    });
  });
  return { child, stdout: () => stdout, stderr: () => stderr, running: () => running, exited };
}
