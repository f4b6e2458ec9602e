/**
 * Faults during `agentrl train` on the CPU demo (issue 9, "Worker" and "CLI"): the built CLI runs the demo
 * (embedded engine, training worker, the vault task) into a temporary run folder and the test breaks it, one fault
 * after the other in the same run, resumed with --resume after each (each run costs the Python start-up, so the faults
 * share the resumes):
 * - the CLI SIGKILLed before the run's first checkpoint: --resume starts the run over;
 * - then SIGKILLed, interrupted (SIGINT, exit 130) and SIGKILLed again at seeded random points of rollout and
 *   training (the log says which phase each signal hit); no process of a killed run is left behind;
 * - then (the run resumed with its end set two steps after its checkpoint) a worker rank SIGKILLed in the middle of an
 *   update: the run stops with exit 1, a worker error and the hint to resume from the last checkpoint, leaves no
 *   process behind, and --resume redoes the steps after that checkpoint.
 * After all, the run must lose nothing and duplicate nothing: metrics.jsonl holds each step exactly once, state.json
 * and the last checkpoint are at the last step (the optimizer stepped once per step in the checkpoint's lineage), and
 * every step used the prompts that the seeded data order gives an uninterrupted run.
 * train-demo.test.ts covers SIGKILL between steps and SIGINT after a given step, against an uninterrupted run.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { load as loadYaml } from "js-yaml";
import { afterAll, describe, expect, it } from "vitest";
import { REPO_ROOT, runCli } from "./helpers/cli.js";
import { pythonJson } from "./helpers/python.js";
import {
  DEMO_CONFIG,
  dataOrder,
  isRunning,
  pad6,
  pollUntil,
  readMetrics,
  readStep,
  sleep,
  startCli,
  stateStep,
  trainProcesses,
  type TrainChild,
  type TrainProcesses,
} from "./helpers/train.js";
import { readParquetInfo } from "../src/data/parquet.js";
import { seededRandom } from "../src/data/random.js";
import { DataCursor } from "../src/train/data-cursor.js";
import { tempDir } from "./helpers/tmp.js";

/** Generous limits: a run that hangs fails the test instead of blocking it. No assertion is about time. */
const RUN_TIMEOUT_MS = 300_000;
const EXIT_TIMEOUT_MS = 120_000;
/**
 * How long the processes a SIGKILLed CLI leaves may take to notice and exit: the engine's guardian and the worker
 * ranks (--parent-pid) check each second. Before the ranks watched, one still connecting lived on for about 64 s.
 */
const ORPHAN_GRACE_MS = 30_000;

const scratch = tempDir("train-faults");
/**
 * Each run gets its own TMPDIR, so what a killed run leaves there (the worker's socket folder) stays apart. The loop's
 * step files, which tell the phase it is in, are in the run folder's .scratch (loopFiles below).
 */
function freshTmp(): string {
  mkdirSync(path.join(scratch, "tmp"), { recursive: true });
  return mkdtempSync(path.join(scratch, "tmp", "run-"));
}

const started: TrainChild[] = [];
afterAll(async () => {
  for (const run of started.filter((r) => r.running())) run.child.kill("SIGKILL");
  await Promise.all(started.map((r) => r.exited));
});

/** The demo, shortened: `steps` steps, a checkpoint every `saveFreq`, no validation. */
function trainArgs(runDir: string, steps: number, saveFreq: number): string[] {
  return [
    "train", "--config", DEMO_CONFIG, "--json",
    "--set", `trainer.default_local_dir=${runDir}`,
    "--set", `trainer.total_training_steps=${steps}`,
    "--set", `trainer.save_freq=${saveFreq}`,
    "--set", "trainer.test_freq=-1",
  ];
}

function start(args: string[]): TrainChild & { tmp: string } {
  const tmp = freshTmp();
  const run = { ...startCli(args, { TMPDIR: tmp }), tmp };
  started.push(run);
  return run;
}

/** Runs `agentrl <args>` to its end. */
const finish = (args: string[]) => runCli(args, { env: { TMPDIR: freshTmp() }, timeoutMs: RUN_TIMEOUT_MS });

/** The files in the loop's scratch folder of a run (`<run>/.scratch`): batch-N.safetensors, logprobs-N.safetensors. */
function loopFiles(runDir: string): { name: string; file: string }[] {
  const scratchDir = path.join(runDir, ".scratch");
  try {
    return readdirSync(scratchDir).map((name) => ({ name, file: path.join(scratchDir, name) }));
  } catch {
    return []; // not there yet, or already removed
  }
}

/** Where the loop is, as far as its scratch files tell: batch-N is written before the log-prob pass, logprobs-N after it. */
function loopPhase(runDir: string): string {
  const files = loopFiles(runDir).map((f) => f.name);
  const logProbs = files.find((name) => name.startsWith("logprobs-"));
  if (logProbs) return `update of step ${Number(/\d+/.exec(logProbs)![0])}`;
  const batch = files.find((name) => name.startsWith("batch-"));
  if (batch) return `log-prob pass of step ${Number(/\d+/.exec(batch)![0])}`;
  return "rollout, weight sync or checkpoint";
}

/** Waits for the CLI to exit; SIGKILLs it if it does not within `timeoutMs` (then `hung`). */
async function exitOf(run: TrainChild, timeoutMs = EXIT_TIMEOUT_MS): Promise<{ code: number | null; signal: NodeJS.Signals | null; hung: boolean }> {
  const hung = !(await pollUntil(() => !run.running(), { timeoutMs, everyMs: 100 }));
  if (hung) run.child.kill("SIGKILL");
  return { ...(await run.exited), hung };
}

/** The pids of `pids` still running once `graceMs` has passed (or as soon as none is). */
async function survivors(pids: number[], graceMs: number): Promise<number[]> {
  await pollUntil(() => pids.every((pid) => !isRunning(pid)), { timeoutMs: graceMs, everyMs: 100 });
  return pids.filter(isRunning);
}

/**
 * The loop's log-prob file of a step after `afterStep`, once the log-prob pass of that step has written it (at
 * `sinceMs` or later: not one a killed run left).
 */
function logProbFileAfter(runDir: string, afterStep: number, sinceMs: number): { step: number; file: string } | undefined {
  for (const { name, file } of loopFiles(runDir)) {
    const match = /^logprobs-(\d+)\.safetensors$/.exec(name);
    if (match && Number(match[1]) > afterStep && modifiedMs(file) >= sinceMs) return { step: Number(match[1]), file };
  }
  return undefined;
}

/** When `file` was last written; -1 when it is gone meanwhile. */
function modifiedMs(file: string): number {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return -1;
  }
}

/** The prompts each step of an uninterrupted run takes: the seeded data order of the run's effective config. */
async function uninterruptedOrder(runDir: string, steps: number): Promise<number[][]> {
  const config = loadYaml(readFileSync(path.join(runDir, "config.yaml"), "utf8")) as {
    data: { train_files: string | string[]; train_batch_size: number; seed: number; shuffle: boolean };
    actor_rollout_ref: { rollout: { n: number } };
  };
  const files = Array.isArray(config.data.train_files) ? config.data.train_files : [config.data.train_files];
  let size = 0;
  for (const file of files) size += (await readParquetInfo(path.resolve(REPO_ROOT, file))).numRows;
  const cursor = new DataCursor(size, config.data.seed, config.data.shuffle);
  const n = config.actor_rollout_ref.rollout.n;
  return Array.from({ length: steps }, () =>
    cursor.next(config.data.train_batch_size).flatMap((index) => new Array<number>(n).fill(index)).sort((a, b) => a - b),
  );
}

/** Loads a checkpoint's files with torch, as the worker does on --resume. */
function loadCheckpoint(dir: string): { step: number; tensors: number; finite: boolean; optimizer: boolean } {
  return pythonJson(
    `import json, sys, torch
d = sys.argv[1]
state = torch.load(d + "/state.pt", weights_only=False)
trainer = torch.load(d + "/trainer.pt", weights_only=False)
model = state["model"]
print(json.dumps({"step": trainer["step"], "tensors": len(model), "optimizer": bool(state["optimizer"].get("state")),
  "finite": all(bool(torch.isfinite(v).all()) for v in model.values())}))`,
    [dir],
  );
}

/** What every finished run must show: each step once, state and checkpoint at the last step, the uninterrupted data order. */
async function expectComplete(runDir: string, total: number): Promise<void> {
  const steps = Array.from({ length: total }, (_, i) => i + 1);
  expect(readMetrics(runDir).map((m) => m.step)).toEqual(steps);
  expect(stateStep(runDir)).toBe(total);
  // The optimizer stepped once per training step (one mini-batch) along the checkpoints this run resumed from: an
  // update lost or applied twice would show here.
  expect(loadCheckpoint(path.join(runDir, "checkpoints", `step-${pad6(total)}`))).toEqual({ step: total, tensors: expect.any(Number), optimizer: true, finite: true });
  const order = await dataOrder(runDir, total);
  expect(order.every((step) => step.length === 4 * 8)).toBe(true);
  expect(order).toEqual(await uninterruptedOrder(runDir, total));
  // Each step sampled from the previous step's weights, also right after a resume (which pushes the checkpoint's).
  expect(readMetrics(runDir).map((m) => m.weight_version)).toEqual(steps);
  for (let step = 2; step <= total; step++) {
    expect(new Set((await readStep(runDir, step)).map((t) => t.weight_version)), `step ${step}`).toEqual(new Set([String(step - 1)]));
  }
}

describe("agentrl train under faults (CPU demo)", () => {
  // One run folder through every fault, resumed after each: a run costs ~10 s of Python start-up before its first
  // step, so the faults share the resumes (and the final checks) instead of each starting its own run.
  it("SIGKILL before the first checkpoint, then SIGKILL, SIGINT, SIGKILL at seeded random points, then a worker rank SIGKILLed mid-update, resumed each time: nothing lost, nothing twice", async () => {
    const runDir = path.join(scratch, "kills");
    // Room for the signals: each resumed run is stopped within 2.5 s of its first step, well before step 10.
    const args = trainArgs(runDir, 10, 2);

    // 1. SIGKILL right after step 1, before the first checkpoint (step 2): nothing to continue from.
    const first = start(args);
    const stepped = await pollUntil(() => first.steps().length > 0, { timeoutMs: RUN_TIMEOUT_MS, alive: first.running });
    expect(stepped, first.stderr()).toBe(true);
    const firstPids = trainProcesses(first.pid).all.map((p) => p.pid);
    first.child.kill("SIGKILL");
    expect((await exitOf(first)).signal).toBe("SIGKILL");
    expect(await survivors(firstPids, ORPHAN_GRACE_MS)).toEqual([]);
    expect(stateStep(runDir)).toBe(0);
    expect(readMetrics(runDir).map((m) => m.step)).toEqual([1]);

    // 2. Resumed each time, then SIGKILL, SIGINT, SIGKILL at random delays after the run's first step line: by then
    //    the engine's first-step warm-up is over, so a delay lands in any phase of the next steps (rollout, log-prob,
    //    update, sync, checkpoint) in proportion to its length.
    const seed = 2;
    const random = seededRandom(seed);
    const plan = (["SIGKILL", "SIGINT", "SIGKILL"] as const).map((signal) => ({ signal, delayMs: Math.round(random() * 2500) }));
    console.log(`seed ${seed}: ${plan.map((p) => `${p.signal} ${p.delayMs} ms`).join(", ")} after the first step`);
    for (const [index, { signal, delayMs }] of plan.entries()) {
      const checkpointBefore = stateStep(runDir);
      const run = start([...args, "--resume"]);
      const running = await pollUntil(() => run.steps().length > 0, { timeoutMs: RUN_TIMEOUT_MS, alive: run.running });
      expect(running, run.stderr()).toBe(true);
      // A resume with no checkpoint to continue from says it starts over; one with a checkpoint does not.
      expect(run.stdout().includes("has no checkpoint yet: starting the run over from step 1")).toBe(checkpointBefore === 0);
      await sleep(delayMs);
      const pids = trainProcesses(run.pid).all.map((p) => p.pid);
      const phase = loopPhase(runDir);
      run.child.kill(signal);
      const exit = await exitOf(run);
      expect(exit.hung, run.stderr()).toBe(false);
      const steps = run.steps();
      console.log(`${signal} ${delayMs} ms in (${phase}): steps done ${steps.join(",") || "none"}, checkpoint step ${checkpointBefore} -> ${stateStep(runDir)}, exit ${exit.code ?? exit.signal}`);
      expect(exit.code, "the run ended before the signal came").not.toBe(0);
      if (signal === "SIGKILL") {
        expect(exit.signal).toBe("SIGKILL");
        expect(await survivors(pids, ORPHAN_GRACE_MS)).toEqual([]);
        // The worker's socket folder went once rank 0 connected: a killed run leaves nothing in its TMPDIR.
        expect(readdirSync(run.tmp).filter((name) => name.startsWith("agentrl-"))).toEqual([]);
      } else {
        expect(exit.code, run.stderr()).toBe(130);
        expect(run.stderr()).toContain("--resume");
        // Ctrl-C checkpoints the last step it finished: nothing finished is done again.
        expect(stateStep(runDir)).toBe(Math.max(checkpointBefore, ...steps));
        expect(await survivors(pids, 10_000)).toEqual([]);
      }
    }

    // 3. Resumed again, and the worker rank SIGKILLed in the middle of an update: the run stops with exit 1, the
    //    worker error and the hint to resume from the last checkpoint, and leaves no process behind. From here on the
    //    run ends two steps after its checkpoint (2 at least), as a 4-step run with a checkpoint every 2 steps would:
    //    the update to kill comes in the first of them, the second is there should the test miss that one.
    const total = Math.max(stateStep(runDir), 2) + 2;
    const finalArgs = trainArgs(runDir, total, 2);
    // The run killed before may have left its scratch files (this run clears them once its loop starts): only files
    // written since this run started count.
    const startedAt = Date.now();
    const run = start([...finalArgs, "--resume"]);
    // logprobs-N appears once the log-prob pass of step N is done and goes once the update has returned: in between,
    // the worker is updating. Kill the rank there, in a step after the run's first checkpoint (step 2); should a busy
    // machine make the test miss one step's update, it takes the next step's.
    let target: { step: number; file: string } | undefined;
    let processes: TrainProcesses | undefined;
    let checkpointAtKill = 0;
    for (let missed = 0; target === undefined; ) {
      const found: { at?: { step: number; file: string } } = {};
      const seen = await pollUntil(
        () => stateStep(runDir) >= 2 && (found.at = logProbFileAfter(runDir, Math.max(stateStep(runDir), missed), startedAt)) !== undefined,
        { timeoutMs: RUN_TIMEOUT_MS, everyMs: 10, alive: run.running },
      );
      expect(seen, `no update phase seen after step ${missed}\n${run.stderr()}`).toBe(true);
      await sleep(20); // past the log-prob reply, into the update
      processes = trainProcesses(run.pid);
      checkpointAtKill = stateStep(runDir);
      const rank = processes.ranks[0];
      if (rank && processes.ranks.length === 1 && existsSync(found.at!.file)) {
        process.kill(rank.pid, "SIGKILL");
        target = found.at!;
        console.log(`killed worker rank ${rank.pid} during the update of step ${target.step} (checkpoint: step ${checkpointAtKill})`);
      } else {
        missed = found.at!.step;
      }
    }
    // The demo runs one rank, which the CLI starts without torchrun.
    expect(processes!.ranks, JSON.stringify(processes!.all)).toHaveLength(1);
    expect(processes!.ranks[0]!.ppid).toBe(run.pid);
    expect(processes!.torchrun, JSON.stringify(processes!.all)).toBeUndefined();
    expect(processes!.engine).toBeDefined();

    const killedAt = Date.now();
    const exit = await exitOf(run);
    console.log(`the CLI exited ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the kill`);
    expect(exit.hung, run.stderr()).toBe(false);
    expect(exit.code, run.stderr()).toBe(1);
    const stderr = run.stderr();
    expect(stderr).toMatch(/^error: .*worker/m); // the worker failure, named
    expect(stderr).toContain("SIGKILL"); // and, from the worker's log tail, how the rank died
    expect(stderr).toContain(
      `hint: resume from checkpoints/step-${pad6(checkpointAtKill)} with: agentrl train --config ${path.join(runDir, "config.yaml")} --resume`,
    );
    expect(await survivors(processes!.all.map((p) => p.pid), 10_000), JSON.stringify(processes!.all)).toEqual([]);
    // The killed step left nothing behind that counts as done.
    expect(stateStep(runDir)).toBe(checkpointAtKill);
    expect(readMetrics(runDir).map((m) => m.step)).toEqual(Array.from({ length: target.step - 1 }, (_, i) => i + 1));
    // (A run killed before may have recorded that step before its own end: a file of this run would be newer.)
    expect(modifiedMs(path.join(runDir, "rollouts", `step-${pad6(target.step)}.parquet`))).toBeLessThan(startedAt);

    // 4. --resume redoes every step after the checkpoint, the killed one included, and none before it, and the run
    //    ends complete.
    const again = await finish([...finalArgs, "--resume"]);
    expect(again.code, again.stderr).toBe(0);
    const events = again.stdout.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as { event: string; step?: number; message?: string });
    expect(events.some((e) => e.event === "note" && e.message?.startsWith(`resumed from checkpoints/step-${pad6(checkpointAtKill)}`))).toBe(true);
    expect(events.filter((e) => e.event === "step").map((e) => e.step)).toEqual(
      Array.from({ length: total - checkpointAtKill }, (_, i) => checkpointAtKill + 1 + i),
    );
    await expectComplete(runDir, total);
  }, 7 * RUN_TIMEOUT_MS);
});
