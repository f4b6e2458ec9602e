/**
 * `agentrl inspect` end to end, as a user runs it: the CLI on trajectory files written by the real rollout code
 * (test/inspect-fixtures.ts: a tool call, an unknown tool, bad JSON and interaction turns) and on a run folder built
 * here. The numbers are checked against what the file holds, read back independently with readTrajectories, so a
 * summary that miscounts, a --where field that reads the wrong column or a token view whose shading disagrees with the
 * stored mask fails here.
 *
 * Each behaviour a user relies on runs the built CLI in its own process at least once (runCli: the summary and a list
 * as --json, the text tables within $COLUMNS, colour, the pager on a terminal, the token view, an input error's exit
 * status, a run folder's overview); the many other checks of what a view holds run the same command line through the
 * CLI's main() inside the test process (runCliInProcess: the same flag parsing, views, exit codes and output text,
 * without a Node start-up per check).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { copyFileSync, writeFileSync, mkdirSync } from "node:fs";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { CLI, runCli, SHARED, type CliResult } from "./helpers/cli.js";
import { runCliInProcess } from "./helpers/in-process-cli.js";
import { QWEN3_DIR } from "./helpers/qwen3.js";
import { makeTrajectory } from "./helpers/trajectories.js";
import { makeRolloutFixture, type RolloutFixture } from "./inspect-fixtures.js";
import { openTrajectoryWriter, readTrajectories } from "../src/data/trajectory-store.js";
import type { Trajectory } from "../src/data/trajectory.js";
import { FIELDS } from "../src/inspect/fields.js";
import { parseWhere } from "../src/inspect/where.js";
import { streamTrajectoryColumns } from "../src/inspect/columnar.js";
import { writeParquetRows } from "../src/data/parquet.js";
import { Field, Int32, Schema } from "apache-arrow";
import { tempDir as tmp } from "./helpers/tmp.js";

const ESC = "\u001b[";
const strip = (s: string) => s.replace(/\u001b\[[0-9;]*m/g, "");

async function readAll(file: string): Promise<Trajectory[]> {
  const out: Trajectory[] = [];
  for await (const t of readTrajectories(file)) out.push(t);
  return out;
}

type Runner = (args: string[], options?: { env?: NodeJS.ProcessEnv }) => Promise<CliResult>;

/** `inspect ARGS --json`, in the test process unless `run` is runCli (a process of the built CLI). */
async function inspectJson(args: string[], run: Runner = runCliInProcess) {
  const result = await run(["inspect", ...args, "--json"]);
  expect(result.stderr, result.stderr).toBe("");
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout);
}

const nearestRank = (values: number[], p: number) => {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
};

let fixture: RolloutFixture;
let all: Trajectory[];

beforeAll(async () => {
  fixture = await makeRolloutFixture();
  all = await readAll(fixture.parquet);
}, 120_000);

describe("summary of a rollout file", () => {
  it("counts what the file holds, for parquet and JSONL alike", async () => {
    expect(all).toHaveLength(6);
    // The two files come from two runs of the same script: same tokens, different timings. The parquet file's summary
    // comes from a process of the built CLI, the JSONL file's from the same command line in the test process.
    for (const [file, run] of [[fixture.parquet, runCli], [fixture.jsonl, runCliInProcess]] as const) {
      const all = await readAll(file);
      const { summary } = await inspectJson([file], run);
      const o = summary.overall;
      expect(o.count).toBe(6);
      const rewards = all.map((t) => t.reward);
      const mean = rewards.reduce((a, b) => a + b, 0) / 6;
      expect(o.reward.mean).toBeCloseTo(mean, 12);
      expect(o.reward.min).toBe(Math.min(...rewards));
      expect(o.reward.max).toBe(Math.max(...rewards));
      expect(o.reward.std).toBeCloseTo(Math.sqrt(rewards.reduce((a, r) => a + (r - mean) ** 2, 0) / 5), 12);
      expect(summary.byDataSource).toEqual([
        expect.objectContaining({ dataSource: "openai/gsm8k", count: 6, accuracy: all.filter((t) => t.score >= 1).length / 6 }),
      ]);
      const finish: Record<string, number> = {};
      for (const t of all) finish[t.finish_reason] = (finish[t.finish_reason] ?? 0) + 1;
      expect(o.finishReasons).toEqual(finish);
      expect(finish).toEqual({ interaction_done: 2, length: 4 });
      const turns: Record<string, number> = {};
      for (const t of all) turns[t.assistant_turns] = (turns[t.assistant_turns] ?? 0) + 1;
      expect(o.turnsHistogram).toEqual(turns);
      expect(summary.toolCallsHistogram).toEqual({ "1": 6 });
      // Per tool: the good call executes, the unknown tool and the bad JSON are parse failures.
      const calc = summary.tools.find((t: { name: string }) => t.name === "calc_gsm8k_reward");
      const latencies = all.flatMap((t) => t.calls.filter((c) => c.name === "calc_gsm8k_reward").map((c) => c.latency_ms));
      expect(calc).toMatchObject({ attempts: 6, executed: 6, errors: 0, parseErrors: 0 });
      expect(calc.latencyMs.p50).toBeCloseTo(nearestRank(latencies, 50), 9);
      expect(calc.latencyMs.p95).toBeCloseTo(nearestRank(latencies, 95), 9);
      expect(summary.tools.find((t: { name: string }) => t.name === "lookup_table")).toMatchObject({
        attempts: 6, executed: 0, parseErrors: 6, parseErrorRate: 1, errorKinds: { "parse:unknown_tool": 6 },
      });
      expect(summary.tools.find((t: { name: string }) => t.name === "(unparsed)")).toMatchObject({
        parseErrors: 6, errorKinds: { "parse:malformed_json": 6 },
      });
      expect(o.parseErrorRate).toBeCloseTo(12 / 18, 12);
      const lengths = all.map((t) => t.response_ids.length);
      expect(summary.responseLength).toMatchObject({ min: Math.min(...lengths), max: Math.max(...lengths), p50: nearestRank(lengths, 50) });
      expect(summary.responseLength.histogram.reduce((a: number, b: { count: number }) => a + b.count, 0)).toBe(6);
      expect(summary.drift.count).toBe(all.filter((t) => t.drift === "drift").length);
      expect(summary.emptyMask).toEqual({ count: 0, ids: [] });
      expect(o.sampledTokens).toBe(all.reduce((a, t) => a + t.response_mask.reduce((x, y) => x + y, 0), 0));
    }
  });

  it("reads parquet column-projected with the same numbers as whole records", async () => {
    // --grep "" matches everything but needs whole records, so it takes the row-by-row path.
    const projected = await inspectJson([fixture.parquet, "--sort", "-length"]);
    const whole = await inspectJson([fixture.parquet, "--sort", "-length", "--grep", ""]);
    expect(projected.summary).toEqual(whole.summary);
    expect(projected.matches).toEqual(whole.matches);
  });

  it("prints the tables as text, within $COLUMNS and without colour off a terminal", async () => {
    // The file under a path longer than the terminal: its tables and its title line (which names the path) must wrap.
    const longPath = path.join(path.dirname(fixture.parquet), `${"a".repeat(90)}.parquet`);
    copyFileSync(fixture.parquet, longPath);
    const result = await runCli(["inspect", longPath], { env: { COLUMNS: "72", PAGER: "echo PAGED" } });
    expect(result.code).toBe(0);
    // Narrow: wide columns wrap, so only words that fit any layout are looked for here.
    for (const text of ["trajectories", "finish reason", "interaction_done", "assistant turns", "tool calls / traj", "parse", "response tokens", "drift: 6", "mask covers no token: 0"]) {
      expect(result.stdout).toContain(text);
    }
    expect(result.stdout).not.toContain(ESC);
    expect(result.stdout).not.toContain("PAGED"); // stdout is a pipe: never paged
    for (const line of result.stdout.split("\n")) expect([...line].length).toBeLessThanOrEqual(72);
    expect(result.stdout).toContain("aaaaaaaaaa"); // the title line is there, wrapped
    const wide = await runCliInProcess(["inspect", fixture.parquet], { env: { COLUMNS: "140" } });
    for (const text of ["data source", "openai/gsm8k", "lookup_table", "calc_gsm8k_reward", "parse:unknown_tool×6"]) expect(wide.stdout).toContain(text);
    expect(Math.max(...wide.stdout.split("\n").map((line) => [...line].length))).toBeLessThanOrEqual(140);
  });

  it("colours on request (FORCE_COLOR) and never under NO_COLOR", async () => {
    const forced = await runCli(["inspect", fixture.parquet, "show", "0:0"], { env: { NO_COLOR: "", FORCE_COLOR: "1" } });
    expect(forced.stdout).toContain(ESC);
    // The same command line in the test process: NO_COLOR wins, and the text is the built CLI's, colour aside.
    const both = await runCliInProcess(["inspect", fixture.parquet, "show", "0:0"], { env: { NO_COLOR: "1", FORCE_COLOR: "1" } });
    expect(both.stdout).not.toContain(ESC);
    expect(strip(forced.stdout)).toBe(both.stdout);
  });
});

/** Runs the CLI on a pseudo-terminal (util-linux `script`), as someone at a terminal would. */
function onTerminal(args: string[], env: NodeJS.ProcessEnv): string {
  const quoted = [process.execPath, CLI, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(" ");
  const { NO_COLOR: _drop, FORCE_COLOR: _drop2, ...rest } = process.env;
  const result = spawnSync("script", ["-qec", `stty rows 20 cols 90; ${quoted}`, "/dev/null"], { encoding: "utf8", env: { ...rest, ...env } });
  return result.stdout;
}
const hasScript = spawnSync("script", ["--version"]).status === 0;

describe.skipIf(!hasScript)("on a terminal", () => {
  it("pages long output through $PAGER, in colour; --no-pager and NO_COLOR turn each off", () => {
    const pager = { PAGER: "echo PAGED-BY-PAGER; cat > /dev/null" };
    const paged = onTerminal(["inspect", fixture.parquet], pager);
    expect(paged).toContain("PAGED-BY-PAGER");
    expect(paged).not.toContain("finish reason"); // the text went to the pager, not the terminal
    const direct = onTerminal(["inspect", fixture.parquet, "--no-pager"], pager);
    expect(direct).not.toContain("PAGED-BY-PAGER");
    expect(direct).toContain("finish reason");
    expect(direct).toContain(ESC);
    const plain = onTerminal(["inspect", fixture.parquet, "--no-pager"], { ...pager, NO_COLOR: "1" });
    expect(plain).not.toContain(ESC);
    // Short output is not paged.
    const short = onTerminal(["inspect", fixture.parquet, "list", "--where", "id=nope"], pager);
    expect(short).not.toContain("PAGED-BY-PAGER");
  });
});

describe("show", () => {
  it("shows a trajectory turn by turn: tool call as JSON, tool errors, interaction turns, reward parts, finish", async () => {
    const result = await runCliInProcess(["inspect", fixture.parquet, "show", "0:0"]);
    expect(result.code, result.stderr).toBe(0);
    const out = result.stdout;
    const order = [
      "── prompt · system", "── prompt · user", "Janet’s ducks",
      "── assistant · turn 0", "→ tool call calc_gsm8k_reward", '"answer": "17"',
      "✗ tool call lookup_table: parse:unknown_tool", "✗ tool call (unparsed): parse:malformed_json",
      "── tool", "calc_gsm8k_reward · ok", "Current parsed answer='17' reward=0.0", "lookup_table · error parse:unknown_tool",
      "── assistant · turn 1", "#### 17",
      "── user (interaction) · after turn 1", "Your response is incorrect!",
      "── assistant · turn 2", "#### 18",
      "── user (interaction) · after turn 2", "Your response is correct!",
      "── reward", "reward 1 (score 1 · tool rewards [-0.050] · turn scores [0, 1] · extra {\"acc\":true})", "finish reason: interaction_done",
    ];
    let at = 0;
    for (const piece of order) {
      const next = out.indexOf(piece, at);
      expect(next, `"${piece}" after position ${at}`).toBeGreaterThanOrEqual(0);
      at = next;
    }
    // The pretty JSON is indented over lines, not the one-line stored text.
    expect(out).toMatch(/\{\n\s+"answer": "17"\n\s+\}/);
  });

  it("truncates tool responses with a flag for the full text", async () => {
    const short = await runCliInProcess(["inspect", fixture.parquet, "show", "0:0", "--max-chars", "12"]);
    expect(short.stdout).toContain("Current pars… [");
    expect(short.stdout).toContain("more characters; --full shows all]");
    const full = await runCliInProcess(["inspect", fixture.parquet, "show", "0:0", "--max-chars", "12", "--full"]);
    expect(full.stdout).toContain("Current parsed answer='17' reward=0.0");
    expect(full.stdout).not.toContain("--full shows all");
  });

  it("--index N picks the Nth matching trajectory; a missing id is an input error", async () => {
    const second = await inspectJson([fixture.jsonl, "show", "--index", "1"]);
    expect(second.id).toBe(all[1]!.id);
    const filtered = await inspectJson([fixture.jsonl, "show", "--index", "0", "--where", "finish=length"]);
    expect(filtered.id).toBe(all.find((t) => t.finish_reason === "length")!.id);
    // parquet finds it by scanning the id column, JSONL by reading whole records: the same trajectory either way.
    const lengthIds = all.filter((t) => t.finish_reason === "length").map((t) => t.id);
    for (const file of [fixture.parquet, fixture.jsonl]) {
      expect((await inspectJson([file, "show", "--index", "2", "--where", "finish=length"])).id).toBe(lengthIds[2]);
    }
    const missing = await runCliInProcess(["inspect", fixture.parquet, "show", "9:9"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`${fixture.parquet}: no trajectory with id '9:9'`);
  });

  it("--tokens shades every token by its stored loss mask, with the behaviour log-prob", async () => {
    const t = all.find((x) => x.id === "0:0")!;
    const view = await inspectJson([fixture.parquet, "show", "0:0", "--tokens", "--model", QWEN3_DIR]);
    expect(view.tokens.map((r: { mask: number }) => r.mask)).toEqual(t.response_mask);
    expect(view.tokens.map((r: { id: number }) => r.id)).toEqual(t.response_ids);
    expect(view.tokens.map((r: { logprob: number }) => r.logprob)).toEqual(t.response_logprobs);
    expect(view.tokens.map((r: { text: string }) => r.text).join("")).toContain('{"name": "calc_gsm8k_reward"');

    const colored = await runCli(["inspect", fixture.parquet, "show", "0:0", "--tokens", "--model", QWEN3_DIR], { env: { NO_COLOR: "", FORCE_COLOR: "1" } });
    const tokenLines = colored.stdout.split("\n").filter((line) => /^\s*\d+\s+[■·] [01]\s/.test(strip(line)));
    expect(tokenLines).toHaveLength(t.response_ids.length);
    tokenLines.forEach((line, i) => {
      const [pos, , mask] = strip(line).trim().split(/\s+/);
      expect(Number(pos)).toBe(i);
      expect(Number(mask)).toBe(t.response_mask[i]);
      // green background on trained tokens, grey on the rest
      expect(line.includes(`${ESC}42m`)).toBe(t.response_mask[i] === 1);
      expect(line.includes(`${ESC}100m`)).toBe(t.response_mask[i] === 0);
    });
    // Without a tokenizer the view still works, with ids for text.
    const bare = await runCliInProcess(["inspect", fixture.parquet, "show", "0:0", "--tokens"]);
    expect(bare.stdout).toContain("pass --model DIR");
    expect(bare.stdout).toContain(`<${t.response_ids[0]}>`);
  });

  it("--tokens shows the trainer log-prob gap and flags the largest", async () => {
    const dir = tmp("inspect-gap");
    const file = path.join(dir, "gap.jsonl");
    const writer = await openTrajectoryWriter(file);
    // mask [1,1,0,0,1]; gaps on sampled tokens: +0.1, -0.75, +0.02
    await writer.write(makeTrajectory(0, { trainer_logprobs: [-0.4, -1.0, 0, 0, -0.98] }));
    await writer.close();
    const view = await inspectJson([file, "show", "0:0", "--tokens"]);
    expect(view.tokens.map((r: { gap: number | null }) => (r.gap === null ? null : Number(r.gap.toFixed(6))))).toEqual([0.1, -0.75, null, null, 0.02]);
    expect(view.tokens.map((r: { gap_rank: number | null }) => r.gap_rank)).toEqual([2, 1, null, null, 3]);
    expect(view.gap).toMatchObject({ max_pos: 1 });
    const text = await runCliInProcess(["inspect", file, "show", "0:0", "--tokens"]);
    const line1 = text.stdout.split("\n").find((l) => /^\s+1\s+■ 1/.test(l))!;
    expect(line1).toContain("-0.7500 ◀ #1");
    const summary = await inspectJson([file]);
    expect(summary.summary.logprobGap).toMatchObject({ tokens: 3, maxAbs: expect.closeTo(0.75, 6), maxId: "0:0" });
  });
});

describe("filtering and sorting", () => {
  /** What each --where field means, written out independently of src/inspect/fields.ts. */
  const meaning: Record<string, (t: Trajectory) => number | string | null> = {
    id: (t) => t.id, group: (t) => t.group_id, data_source: (t) => t.data_source, agent_loop: (t) => t.agent_loop ?? null, status: (t) => t.status,
    finish: (t) => t.finish_reason, drift: (t) => t.drift, error: (t) => t.error ?? null, ground_truth: (t) => t.ground_truth ?? null,
    weight_version: (t) => t.weight_version ?? null, server: (t) => t.server ?? null, tool: (t) => t.calls[0]?.name ?? null,
    reward: (t) => t.reward, score: (t) => t.score,
    acc: (t) => {
      const acc = t.reward_extra?.["acc"]; // the built-in scorers report it
      return typeof acc === "boolean" ? Number(acc) : Number(t.score >= 1);
    },
    advantage: (t) => t.advantage ?? null, turns: (t) => t.assistant_turns,
    num_turns: (t) => t.num_turns, user_turns: (t) => t.user_turns, tool_calls: (t) => t.tool_calls, tool_errors: (t) => t.tool_errors,
    parse_errors: (t) => t.parse_errors, length: (t) => t.response_ids.length,
    sampled: (t) => t.response_mask.filter((m) => m === 1).length, prompt_length: (t) => t.prompt_ids.length,
    step: (t) => t.step ?? null, data_index: (t) => t.data_index, sample_index: (t) => t.sample_index, retries: (t) => t.retries,
    gen_ms: (t) => t.gen_ms, tool_ms: (t) => t.tool_ms, total_ms: (t) => t.total_ms,
  };

  it("covers every field", () => {
    expect(Object.keys(meaning).sort()).toEqual(Object.keys(FIELDS).sort());
  });

  it("every --where field selects exactly the trajectories it names", async () => {
    for (const [field, get] of Object.entries(meaning)) {
      const present = all.map(get).filter((v) => v !== null);
      let expression: string;
      let expected: string[];
      if (present.length === 0) {
        expression = `${field}=null`;
        expected = all.map((t) => t.id);
      } else if (typeof present[0] === "number") {
        const threshold = nearestRank(present as number[], 50);
        expression = `${field}>=${threshold}`;
        expected = all.filter((t) => get(t) !== null && (get(t) as number) >= threshold).map((t) => t.id);
      } else {
        const value = String(present[present.length - 1]);
        expression = `${field}=${value}`;
        expected = all.filter((t) => (field === "tool" ? t.calls.some((c) => c.name === value) : get(t) === value)).map((t) => t.id);
      }
      // The CLI's path is checked on the examples below; here the same parser runs on every field.
      const condition = parseWhere(expression);
      expect(all.filter((t) => condition.test(t)).map((t) => t.id).sort(), expression).toEqual(expected.sort());
    }
    // The column-projected parquet read (what the CLI uses for summaries and lists) gives every field the same value.
    for (const [field, spec] of Object.entries(FIELDS)) {
      const projected: unknown[] = [];
      for await (const record of streamTrajectoryColumns(fixture.parquet, spec.columns)) projected.push(spec.get(record));
      expect(projected, field).toEqual(all.map((t) => spec.get(t)));
      if (spec.all) {
        const names: string[][] = [];
        for await (const record of streamTrajectoryColumns(fixture.parquet, spec.columns)) names.push(spec.all(record));
        expect(names, field).toEqual(all.map((t) => spec.all!(t)));
      }
    }
    // ... and a few through the CLI, one of each kind.
    for (const expression of ["sampled>=100", "ground_truth=18", "tool=calc_gsm8k_reward", "advantage=null"]) {
      const out = await inspectJson([fixture.parquet, "list", "--where", expression]);
      const condition = parseWhere(expression);
      expect(out.matched, expression).toBe(all.filter((t) => condition.test(t)).length);
    }
  });

  it("the issue's examples, ANDed, with text operators", async () => {
    const count = async (...where: string[]) => (await inspectJson([fixture.parquet, "list", ...where.flatMap((w) => ["--where", w])])).matched;
    // The list as --json from a process of the built CLI, with two --where flags ANDed; the others in the test process.
    const both = all.filter((t) => t.finish_reason === "length" && t.sample_index === 0).map((t) => t.id).sort();
    expect(both).toHaveLength(2); // fewer than either condition keeps alone (4 and 3)
    const spawned = await inspectJson([fixture.parquet, "list", "--where", "finish=length", "--where", "sample_index=0"], runCli);
    expect(spawned.matched).toBe(2);
    expect(spawned.rows.map((r: { id: string }) => r.id).sort()).toEqual(both);
    expect(await count("reward<1")).toBe(all.filter((t) => t.reward < 1).length);
    expect(await count("turns>=3")).toBe(all.filter((t) => t.assistant_turns >= 3).length);
    expect(await count("tool_errors>0")).toBe(all.filter((t) => t.tool_errors > 0).length);
    expect(await count("parse_errors>0")).toBe(6);
    expect(await count("finish=length")).toBe(4);
    expect(await count("data_source=openai/gsm8k")).toBe(6);
    expect(await count("reward<1", "finish=interaction_done")).toBe(0);
    expect(await count("tool=lookup_table")).toBe(6);
    expect(await count("tool!=lookup_table")).toBe(0);
    expect(await count("finish~interaction")).toBe(2);
    expect(await count("finish!~interaction")).toBe(4);
  });

  it("--grep, --sort and --limit", async () => {
    expect((await inspectJson([fixture.parquet, "list", "--grep", "LOOKUP_TABLE"])).matched).toBe(6);
    expect((await inspectJson([fixture.parquet, "list", "--grep", "Your response is correct"])).matched).toBe(2);
    expect((await inspectJson([fixture.parquet, "list", "--grep", "no such text anywhere"])).matched).toBe(0);
    const sorted = await inspectJson([fixture.parquet, "list", "--sort", "-length", "--limit", "3"]);
    expect(sorted.matched).toBe(6);
    expect(sorted.rows.map((r: { length: number }) => r.length)).toEqual([...all.map((t) => t.response_ids.length)].sort((a, b) => b - a).slice(0, 3));
    const filtered = await inspectJson([fixture.parquet, "--where", "reward<1", "--sort", "id", "--limit", "2"]);
    expect(filtered.summary.overall.count).toBe(4);
    expect(filtered.matches.count).toBe(4);
    expect(filtered.matches.rows.map((r: { id: string }) => r.id)).toEqual(["1:0", "1:1"]);
  });

  it("--group shows the n samples of one prompt", async () => {
    const group = await inspectJson([fixture.parquet, "--group", "0"]);
    expect(group.samples.map((s: { id: string }) => s.id)).toEqual(["0:0", "0:1"]);
    expect(group.samples[0]).toMatchObject({ reward: 1, finish: "interaction_done", advantage: null });
    expect(group.samples[0].final_text).toContain("#### 18");
    expect(await inspectJson([fixture.jsonl, "--group", "0"])).toEqual({
      ...group,
      samples: group.samples.map((s: object) => ({ ...s, final_text: expect.any(String) })),
    });
    const text = await runCliInProcess(["inspect", fixture.parquet, "--group", "1"]);
    expect(text.stdout).toContain("sample 0");
    expect(text.stdout).toContain("sample 1");
    expect(text.stdout).toContain("no variance");
  });
});

describe("bad input is exit 2 with the place named", () => {
  it.each([
    [["inspect", "/no/such/file.parquet"], "/no/such/file.parquet: no such file"],
    [["inspect", "FILE", "--where", "rewrd<1"], "--where 'rewrd<1': unknown field 'rewrd'"],
    [["inspect", "FILE", "--where", "reward<high"], "'high' is not a number"],
    [["inspect", "FILE", "--where", "finish>3"], "finish is text"],
    [["inspect", "FILE", "--sort", "nope"], "--sort 'nope': unknown field"],
    [["inspect", "FILE", "frobnicate"], "unknown view 'frobnicate'"],
    [["inspect", "FILE", "show"], "show needs a trajectory"],
    [["inspect", "FILE", "--step", "3"], "--step picks a step of a run folder"],
  ])("%j", async (args, message) => {
    // The exit status of a real process once; the other messages and codes from main() in the test process.
    const run = args[1] === "/no/such/file.parquet" ? runCli : runCliInProcess;
    const result = await run(args.map((a) => (a === "FILE" ? fixture.parquet : a)));
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(message);
  });

  it("a file that is not a trajectory file", async () => {
    const dir = tmp("inspect-bad");
    const jsonl = path.join(dir, "other.jsonl");
    writeFileSync(jsonl, '{"question": "what?"}\n');
    const notJsonl = await runCliInProcess(["inspect", jsonl]);
    expect(notJsonl.code).toBe(2);
    expect(notJsonl.stderr).toContain(`${jsonl}: not a trajectory file`);
    const dataset = path.join(SHARED, "datasets", "gsm8k", "test.jsonl");
    const gsm8k = await runCliInProcess(["inspect", dataset]);
    expect(gsm8k.code).toBe(2);
    expect(gsm8k.stderr).toContain(`${dataset}: not a trajectory file`);
    const otherParquet = path.join(dir, "other.parquet");
    await writeParquetRows(otherParquet, [{ id: 1 }], new Schema([new Field("id", new Int32(), false)]));
    const other = await runCliInProcess(["inspect", otherParquet]);
    expect(other.code).toBe(2);
    expect(other.stderr).toContain(`${otherParquet}: not a trajectory file (column 'id' is Int32, expected Utf8)`);
    const otherShow = await runCliInProcess(["inspect", otherParquet, "show", "0:0"]);
    expect(otherShow.code).toBe(2);
    expect(otherShow.stderr).toContain(`${otherParquet}: not a trajectory file`);
    const fakeParquet = path.join(dir, "broken.parquet");
    writeFileSync(fakeParquet, "not parquet at all");
    const broken = await runCliInProcess(["inspect", fakeParquet]);
    expect(broken.code).toBe(2);
    expect(broken.stderr).toContain(fakeParquet);
  });
});

const STEP_TIMINGS = {
  "timing_s/step": 2, "timing_s/gen": 1, "timing_s/gen_engine_busy": 0.75, "timing_s/gen_client": 0.25, "timing_s/old_log_prob": 0.5,
  "timing_s/old_log_prob_actor": 0.3, "timing_s/ref": 0.2, "timing_s/update_actor": 0.4, "timing_s/forward_backward": 0.3,
  "timing_s/optimizer": 0.1, "timing_s/update_weights": 0.05, "timing_s/record": 0.02,
};

describe("a run folder", () => {
  let run: string;
  beforeAll(async () => {
    run = tmp("inspect-run");
    mkdirSync(path.join(run, "rollouts"));
    const lines: string[] = [];
    for (let step = 1; step <= 10; step++) {
      lines.push(JSON.stringify({
        step,
        time: 1_732_233_600 + step,
        "critic/rewards/mean": 0.1 * step,
        "acc/mean": 0.05 * step,
        "actor/entropy": 1 - 0.05 * step,
        "actor/ppo_kl": step === 8 ? 0.2 : 0.001,
        "actor/pg_clipfrac": step === 6 ? 0.25 : 0.02,
        "actor/grad_norm": step === 9 ? 3 : 0.3,
        "response_length/mean": 100 + step,
        // tool use collapses: 1.5 calls per trajectory early, none at the end
        "tool/calls_per_traj": step <= 4 ? 1.5 : Math.max(0, 1.5 - 0.4 * (step - 4)),
        // the step budget: 2 s a step (4 s at step 10, its engine 2 s slower), 0.03 s of it measured by no part
        ...STEP_TIMINGS,
        ...(step === 10 ? { "timing_s/step": 4, "timing_s/gen_engine_busy": 2.75 } : {}),
      }));
    }
    lines.push(JSON.stringify({ step: 10, "val-core/openai/gsm8k/acc/mean@1": 0.5, "timing_s/testing": 4 }));
    writeFileSync(path.join(run, "metrics.jsonl"), `${lines.join("\n")}\n`);
    for (const step of [1, 2]) {
      const writer = await openTrajectoryWriter(path.join(run, "rollouts", `step-00000${step}.parquet`));
      for (let i = 0; i < 4; i++) {
        await writer.write(
          makeTrajectory(i, {
            step, advantage: i % 2 ? -0.5 : 0.5, reward: step === 2 ? 1 : 0, tool_calls: step === 2 ? 0 : 1,
            // behaviour [-0.5, -0.25, 0, 0, -1] on mask [1, 1, 0, 0, 1]: gaps 0.1·i, 0, 0.25
            trainer_logprobs: [-0.5 + 0.1 * i, -0.25, 0, 0, -0.75],
          }),
        );
      }
      await writer.close();
    }
  });

  it("draws the curves and raises the alerts", async () => {
    const result = await runCli(["inspect", run]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/reward\s+[▁▂▃▄▅▆▇█]+/);
    expect(result.stdout).toContain("tool use is collapsing");
    expect(result.stdout).toContain("clip fraction spike at step 6");
    expect(result.stdout).toContain("KL spike at step 8");
    expect(result.stdout).toMatch(/grad_norm\s+[▁▂▃▄▅▆▇█]+/);
    // The greedy validation accuracy has its own curve, found by pattern whatever the data source.
    expect(result.stdout).toMatch(/val_accuracy\s+[▁▂▃▄▅▆▇█]+/);
    expect(result.stdout).toContain("grad norm spike at step 9: actor/grad_norm = 3 vs median 0.3000 of the steps before");
    expect(result.stdout).toContain("rollouts for steps: 1, 2");
    // The step budget: median and mean per part, its share of the mean step; validation outside the step.
    expect(result.stdout).toContain("step budget over 10 steps: median step 2 s (mean 2.200 s)");
    expect(result.stdout).toMatch(/generation: engine busy\s+│ 0\.750\s+│ 0\.950\s+│ 43\.2%/);
    expect(result.stdout).toMatch(/log-probs: reference\s+│ 0\.200\s+│ 0\.200\s+│ 9\.1%/);
    expect(result.stdout).toMatch(/other\s+│ 0\.030\s+│ 0\.030\s+│ 1\.4%/);
    expect(result.stdout).toMatch(/validation \(not in the step\), 1×\s+│ 4\s+│ 4\s+│ –/);
    const json = await inspectJson([run]);
    expect(json.budget.steps).toBe(10);
    expect(json.budget.rows.map((r: { key: string | null }) => r.key)).toEqual([
      "timing_s/gen_engine_busy", "timing_s/gen_client", "timing_s/old_log_prob_actor", "timing_s/ref", "timing_s/forward_backward",
      "timing_s/optimizer", "timing_s/update_weights", "timing_s/record", null, "timing_s/testing",
    ]);
    expect(json.budget.rows.at(-1)).toMatchObject({ median: 4, share: null, steps: 1 });
    expect(json.curves.find((c: { name: string }) => c.name === "reward").points).toHaveLength(10);
    expect(json.curves.find((c: { name: string }) => c.name === "val_accuracy")).toMatchObject({
      key: "val-core/openai/gsm8k/acc/mean@1",
      points: [[10, 0.5]],
    });
    expect(json.alerts.map((a: { kind: string; step: number }) => `${a.kind}@${a.step}`)).toEqual([
      "clip_fraction_spike@6", "kl_spike@8", "grad_norm_spike@9", "tool_use_collapse@10",
    ]);
    const chart = await runCliInProcess(["inspect", run, "--metric", "accuracy", "--metric", "val-core/openai/gsm8k/acc/mean@1"]);
    expect(chart.stdout).toContain("accuracy (acc/mean), 10 steps");
    expect(chart.stdout).toContain("│");
    const unknown = await runCliInProcess(["inspect", run, "--metric", "nope"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("--metric 'nope'");
  });

  it("--step K inspects that step's rollouts; a missing step names the ones there", async () => {
    const step2 = await inspectJson([run, "--step", "2"]);
    expect(step2.summary.overall.count).toBe(4);
    expect(step2.summary.advantage).toMatchObject({ count: 4, min: -0.5, max: 0.5 });
    // Read column-projected in two passes (the gap pass only because trainer log-probs are there).
    expect(step2.summary.logprobGap).toMatchObject({ tokens: 12, maxAbs: expect.closeTo(0.3, 6), maxId: "1:1" });
    expect(step2.summary.logprobGap.meanAbs).toBeCloseTo((0.1 + 0.2 + 0.3 + 4 * 0.25) / 12, 6);
    const shown = await inspectJson([run, "--step", "1", "show", "1:1"]);
    expect(shown.reward.advantage).toBe(-0.5);
    const missing = await runCliInProcess(["inspect", run, "--step", "7"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("no rollouts for step 7");
    expect(missing.stderr).toContain("steps with rollouts: 1, 2");
  });

  it("--diff K1 K2 compares two steps", async () => {
    const diff = await inspectJson([run, "--diff", "1", "2"]);
    const row = (q: string) => diff.rows.find((r: { quantity: string }) => r.quantity === q);
    expect(row("reward mean")).toMatchObject({ a: 0, b: 1, delta: 1 });
    expect(row("tool calls / traj")).toMatchObject({ a: 1, b: 0, delta: -1 });
    expect(row("metric critic/rewards/mean")).toMatchObject({ a: 0.1, b: 0.2 });
    const text = await runCliInProcess(["inspect", run, "--diff", "1", "2"]);
    expect(text.stdout).toContain("step 1 vs step 2");
    expect(text.stdout).toMatch(/reward mean\s+│ 0\s+│ 1\s+│ \+1/);
  });
});
