/**
 * `agentrl rollout --resume` and failed trajectories (issue 15): a first run against a server that fails every request
 * for two of the prompts ends with their trajectories `failed` (exit 1). Resumed against a healthy server, those are
 * removed and redone: every record completed, one per id, and the report counts them. With --keep-failed they stay
 * as they were and nothing reaches the server. Both output formats.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cpSync, readdirSync } from "node:fs";
import path from "node:path";
import { runCli } from "./helpers/cli.js";
import { QWEN3_DIR } from "./helpers/qwen3.js";
import { GSM8K_TOOLS, preprocessGsm8kTrain, readAllTrajectories, tempDir, toolThenAnswer } from "./helpers/rollout-run.js";
import { startFakeSglang, type FakeSglang, type FaultPlan } from "./fake-sglang/index.js";
import { loadChatModel, type ChatModel } from "../src/chat/index.js";
import { readPrompts } from "../src/rollout/sample.js";
import type { Trajectory } from "../src/data/trajectory.js";

const PROMPTS = 6;
const N = 2;
const TOTAL = PROMPTS * N;
/** Data rows whose every /generate request the first run's server fails. */
const FAILING_ROWS = [1, 4];
const FAILED_IDS = FAILING_ROWS.flatMap((row) => Array.from({ length: N }, (_, sample) => `${row}:${sample}`)).sort();

const data = tempDir("resume-failed-data");
let model: ChatModel;
let fake: FakeSglang;
/** Fails every request whose prompt holds one of FAILING_ROWS' questions (each turn repeats the prompt). */
let failingPlan: FaultPlan;

beforeAll(async () => {
  model = await loadChatModel(QWEN3_DIR);
  expect((await preprocessGsm8kTrain(data, PROMPTS)).code).toBe(0);
  const questions: string[] = [];
  for await (const prompt of readPrompts(path.join(data, "train.parquet"))) {
    if (FAILING_ROWS.includes(prompt.dataIndex)) questions.push(prompt.row.prompt.at(-1)!.content as string);
  }
  expect(questions).toHaveLength(FAILING_ROWS.length);
  failingPlan = {
    decide: ({ body }) => {
      const text = model.decode((body as { input_ids: number[] }).input_ids);
      return questions.some((q) => text.includes(q)) ? { type: "status", status: 503 } : null;
    },
  };
  const respond = toolThenAnswer(model);
  fake = await startFakeSglang({ respond: (ids, params, ctx) => respond(ids, params, ctx) });
});

afterAll(async () => {
  await fake?.close();
});

const rollout = (out: string, extra: string[] = []) =>
  runCli(
    [
      "rollout", "--data", path.join(data, "train.parquet"), "--model", QWEN3_DIR, "--server", fake.url, "--tools", GSM8K_TOOLS,
      "--limit", String(PROMPTS), "--n", String(N), "--concurrency", "4", "--out", out,
      // One try per request: a failing prompt fails at once instead of after backoffs.
      "--set", "actor_rollout_ref.rollout.server.max_attempts=1",
      ...extra,
    ],
    { timeoutMs: 120_000 },
  );

const ids = (records: Trajectory[]) => records.map((t) => t.id).sort();
const failedIds = (records: Trajectory[]) => ids(records.filter((t) => t.status === "failed"));

describe.each(["jsonl", "parquet"])("rollout --resume after failed trajectories (.%s)", (ext) => {
  /** The first run's output, copied into a fresh folder for each resume below. */
  let firstOut: string;
  let firstRecords: Trajectory[];

  beforeAll(async () => {
    firstOut = path.join(tempDir(`resume-failed-first-${ext}`), `t.${ext}`);
    fake.setFaults(failingPlan);
    const first = await rollout(firstOut);
    fake.setFaults({});
    expect(first.code, first.stderr).toBe(1);
    expect(first.stderr).toContain(`${FAILED_IDS.length} of ${TOTAL} trajectories failed`);
    firstRecords = await readAllTrajectories(firstOut);
  }, 120_000);

  const copyOfFirst = (name: string): string => {
    const out = path.join(tempDir(`resume-failed-${name}-${ext}`), `t.${ext}`);
    cpSync(firstOut, out);
    return out;
  };

  it("the first run leaves the failing prompts' trajectories failed on disk", () => {
    expect(ids(firstRecords)).toHaveLength(TOTAL);
    expect(failedIds(firstRecords)).toEqual(FAILED_IDS);
    for (const t of firstRecords.filter((r) => r.status === "failed")) expect(t.error).toContain("503");
  });

  it("--resume redoes them: every record completed, one per id, the report counting the redone ones", async () => {
    const out = copyOfFirst("redo");
    const resumed = await rollout(out, ["--resume", "--json"]);
    expect(resumed.code, resumed.stderr).toBe(0);
    const report = JSON.parse(resumed.stdout);
    expect(report.resumed).toBe(TOTAL - FAILED_IDS.length);
    expect(report.redone_failed).toBe(FAILED_IDS.length);
    expect(report.kept_failed).toBe(0);
    expect(report.summary.count).toBe(FAILED_IDS.length);
    expect(report.summary.byStatus).toEqual({ completed: FAILED_IDS.length });
    const all = await readAllTrajectories(out);
    expect(all).toHaveLength(TOTAL);
    expect(new Set(ids(all)).size).toBe(TOTAL);
    expect(all.filter((t) => t.status !== "completed")).toEqual([]);
    // The records that had not failed are the first run's, untouched.
    const firstById = new Map(firstRecords.map((t) => [t.id, t]));
    for (const t of all.filter((r) => !FAILED_IDS.includes(r.id))) expect(t).toEqual(firstById.get(t.id));
    expect(readdirSync(path.dirname(out))).toEqual([`t.${ext}`]);
  });

  it("--resume --keep-failed keeps them as they are and runs nothing", async () => {
    const out = copyOfFirst("keep");
    fake.resetStats();
    const resumed = await rollout(out, ["--resume", "--keep-failed", "--json"]);
    expect(resumed.code, resumed.stderr).toBe(0);
    const report = JSON.parse(resumed.stdout);
    expect(report.resumed).toBe(TOTAL);
    expect(report.kept_failed).toBe(FAILED_IDS.length);
    expect(report.redone_failed).toBe(0);
    expect(report.summary.count).toBe(0);
    expect(fake.stats.byPath["/generate"] ?? 0).toBe(0);
    const all = await readAllTrajectories(out);
    expect([...all].sort((a, b) => a.id.localeCompare(b.id))).toEqual([...firstRecords].sort((a, b) => a.id.localeCompare(b.id)));
  });
});

describe("rollout --resume's closing summary, and --keep-failed's flag check", () => {
  it("the summary says how many failed trajectories were redone", async () => {
    const out = path.join(tempDir("resume-failed-summary"), "t.jsonl");
    fake.setFaults(failingPlan);
    expect((await rollout(out)).code).toBe(1);
    fake.setFaults({});
    const resumed = await rollout(out, ["--resume", "--quiet"]);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toContain(
      `resumed: ${TOTAL - FAILED_IDS.length} trajectories kept from the file; ${FAILED_IDS.length} failed trajectories redone`,
    );
  }, 120_000);

  it("--keep-failed without --resume is refused before anything runs (exit 2)", async () => {
    const out = path.join(tempDir("resume-failed-flag"), "t.jsonl");
    const result = await rollout(out, ["--keep-failed"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("--keep-failed needs --resume");
    expect(readdirSync(path.dirname(out))).toEqual([]);
  });
});
