/**
 * trainer.logger: wandb, offline (WANDB_MODE=offline), read back with wandb's own reader: `wandb leet inspect` (wandb-core,
 * called as that command calls it) prints the records of a run's transaction log (the .wandb file) as protobuf text,
 * which wandb.proto's Record parses. The
 * CPU demo runs 2 small steps with a validation at step 2 and log_val_generations 2: the wandb run holds the effective
 * config, every metrics line at its step, and the table of 2 validation samples. Then, without another training run,
 * the logger itself: continuing the folder's run keeps its id (what --resume does), and a wandb that cannot start is
 * one note, with nothing thrown.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { runCli, VENV_PYTHON, REPO_ROOT } from "./helpers/cli.js";
import { demoTwoSteps, pad6, readMetrics } from "./helpers/train.js";
import { tempDir } from "./helpers/tmp.js";
import { readTrajectories } from "../src/data/trajectory-store.js";
import type { Trajectory } from "../src/data/trajectory.js";
import { startWandb, valGenerationRows, wandbRunId } from "../src/train/wandb.js";

const scratch = tempDir("wandb");
/** Offline, and wandb's own folders (settings, artifact staging, cache) in the test's folder, not in $HOME. */
const WANDB_ENV = {
  WANDB_MODE: "offline",
  WANDB_CONFIG_DIR: path.join(scratch, "wandb-config"),
  WANDB_DATA_DIR: path.join(scratch, "wandb-data"),
  WANDB_CACHE_DIR: path.join(scratch, "wandb-cache"),
  WANDB_SILENT: "true",
};
Object.assign(process.env, WANDB_ENV); // for startWandb's children, started by this process

/** Every offline run under DIR/wandb, in order: its id, config, display name, history rows by step, and tables. */
const READ_RUNS = `
import glob, json, os, re, subprocess, sys
from agentrl_worker.wandb_logger import import_wandb
import_wandb()
from google.protobuf import text_format
from wandb.proto import wandb_internal_pb2 as pb
from wandb.util import get_core_path

def value(item):
    return json.loads(item.value_json)

runs = []
for file in sorted(glob.glob(os.path.join(sys.argv[1], "wandb", "offline-run-*", "run-*.wandb"))):
    # What \`wandb leet inspect FILE\` runs, without a Python start per file.
    inspect = [get_core_path(), "leet", "--no-observability", "--inspect", "--run-file", file, os.path.dirname(file)]
    text = subprocess.run(inspect, capture_output=True, text=True, check=True).stdout
    records = [text_format.Parse(chunk, pb.Record()) for chunk in re.split(r"^# record \\d+: \\S+\\n", text, flags=re.M)[1:]]
    run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    history, tables = {}, {}
    for record in records:
        if record.WhichOneof("record_type") != "history":
            continue
        row = {}
        for item in record.history.item:
            keys = list(item.nested_key) or [item.key]
            if keys[0].startswith("_"):
                continue
            row.setdefault(keys[0], {}) if len(keys) > 1 else None
            if len(keys) > 1:
                row[keys[0]][keys[1]] = value(item)
            else:
                row[keys[0]] = value(item)
        step = record.history.step.num
        for key, entry in list(row.items()):
            if isinstance(entry, dict) and entry.get("_type") == "table-file":
                with open(os.path.join(os.path.dirname(file), "files", entry["path"])) as f:
                    tables.setdefault(key, {})[step] = json.load(f)
                del row[key]
        history[step] = row
    runs.append({
        "id": run.run_id, "project": run.project, "name": run.display_name,
        "config": {u.key: json.loads(u.value_json) for u in run.config.update if u.key != "_wandb"},
        "history": history, "tables": tables,
    })
print(json.dumps(runs))
`;

interface WandbRunRead {
  id: string;
  project: string;
  name: string;
  config: Record<string, Record<string, unknown>>;
  history: Record<string, Record<string, number>>;
  tables: Record<string, Record<string, { columns: string[]; data: unknown[][] }>>;
}

function readRuns(root: string): WandbRunRead[] {
  const out = execFileSync(VENV_PYTHON, ["-c", READ_RUNS, root], {
    encoding: "utf8",
    env: { ...process.env, PYTHONPATH: path.join(REPO_ROOT, "worker") },
  });
  return JSON.parse(out) as WandbRunRead[];
}

const RUN_TIMEOUT_MS = 240_000;
const VAL_REWARD = "val-core/agentrl/vault/reward/mean@1";

describe("trainer.logger: wandb (offline)", () => {
  const runDir = path.join(scratch, "run");

  it("logs the effective config, every metrics line at its step, and the validation samples' table", async () => {
    const args = demoTwoSteps(runDir, ["--quiet"], {
      "data.val_max_samples": 4, "data.train_batch_size": 2, "actor_rollout_ref.rollout.n": 2,
      "trainer.test_freq": 2, "trainer.logger": "[console,wandb]", "trainer.log_val_generations": 2,
      "trainer.project_name": "vaults", "trainer.experiment_name": "wandb-test",
    });
    const result = await runCli(args, { env: WANDB_ENV, timeoutMs: RUN_TIMEOUT_MS });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).not.toContain("wandb logging stopped");

    const [run, ...others] = readRuns(runDir);
    expect(others).toEqual([]);
    expect(run!.id).toBe(readFileSync(path.join(runDir, "wandb-run-id"), "utf8").trim());
    expect([run!.project, run!.name]).toEqual(["vaults", "wandb-test"]);
    expect(run!.config.trainer).toMatchObject({ project_name: "vaults", logger: ["console", "wandb"], log_val_generations: 2, total_training_steps: 2 });
    expect(run!.config.data).toMatchObject({ train_batch_size: 2, val_max_samples: 4 });

    // metrics.jsonl line by line, at its step, every number in it.
    const lines = readMetrics(runDir);
    expect(lines.map((line) => line.step)).toEqual([1, 2]);
    expect(Object.keys(run!.history).map(Number)).toEqual([1, 2]);
    for (const line of lines) {
      const { step, time, ...metrics } = line;
      expect(time).toBeGreaterThan(0);
      expect(run!.history[step!]).toEqual(metrics);
    }
    expect(run!.history[2]![VAL_REWARD]).toBe(lines[1]![VAL_REWARD]);

    // The table: the first 2 validation samples at step 2, as the validation file has them.
    const validated: Trajectory[] = [];
    for await (const t of readTrajectories(path.join(runDir, "rollouts", `val-${pad6(2)}.parquet`))) validated.push(t);
    const expected = valGenerationRows(validated, 2);
    expect(expected[0]!.input).toMatch(/^user: what is the code of vault \w+\?$/);
    const table = run!.tables["val/generations"]!;
    expect(Object.keys(table)).toEqual(["2"]);
    expect(table[2]!.columns).toEqual(["step", "input", "output", "score"]);
    expect(table[2]!.data).toEqual(expected.map((row) => [2, row.input, row.output, row.score]));
  }, RUN_TIMEOUT_MS);

  it("continues the folder's wandb run where --resume continues the training run; a new run is a new id", async () => {
    const notes: string[] = [];
    const before = readFileSync(path.join(runDir, "wandb-run-id"), "utf8").trim();
    const resumed = startWandb({ root: runDir, project: "vaults", name: "wandb-test", continueRun: true, config: { resumed: true } }, (m) => notes.push(m));
    resumed.log({ step: 3, time: 1, "critic/rewards/mean": 0.5 });
    await resumed.close();
    expect(notes.filter((note) => !note.startsWith("wandb: offline run"))).toEqual([]);
    const runs = readRuns(runDir);
    expect(runs.map((run) => run.id)).toEqual([before, before]);
    expect(runs[1]!.history).toEqual({ 3: { "critic/rewards/mean": 0.5 } });

    // A new run folder, or a --resume that found no checkpoint and starts over: a new wandb run.
    const fresh = tempDir("wandb-fresh");
    expect(wandbRunId(fresh, true)).toMatch(/^[0-9a-z]{8}$/);
    expect(wandbRunId(fresh, true)).toBe(readFileSync(path.join(fresh, "wandb-run-id"), "utf8").trim());
    expect(wandbRunId(runDir, false)).not.toBe(before);
  }, 60_000);

  it("a wandb that cannot start is one note; logging goes on without it and nothing throws", async () => {
    const notes: string[] = [];
    const saved = process.env.WANDB_MODE;
    process.env.WANDB_MODE = "no-such-mode"; // wandb.init refuses it
    try {
      const sink = startWandb({ root: scratch, project: "p", name: "n", continueRun: false, config: {} }, (m) => notes.push(m));
      sink.log({ step: 1, "critic/rewards/mean": 1 });
      sink.valGenerations(1, [], 2);
      await sink.close();
      sink.log({ step: 2, "critic/rewards/mean": 1 });
    } finally {
      process.env.WANDB_MODE = saved;
    }
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatch(/^wandb logging stopped: wandb\.init failed: ValidationError: .*mode/);
  }, 60_000);
});
