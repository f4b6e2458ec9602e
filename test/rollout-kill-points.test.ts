/**
 * `agentrl rollout` killed at seeded random moments (issue 9): SIGKILL and SIGINT alternate, and every run after the
 * first is started again with --resume until one exits 0. A fixed-seed PRNG draws 4 to 6 kill points covering the
 * three phases of a run: one during startup (before anything is written), the middle ones spread uniformly over the
 * trajectories still to do (right after the k-th is answered, so the kill races its write and the part flushes), and
 * the last at the final close (the parquet merge, or the JSONL file's last line). Points are drawn over progress, not
 * wall-clock time, so a slow or busy machine moves them very little.
 * Nothing may be lost or duplicated: after every interruption the records on disk are readable and a superset of the
 * previous ones, and the final file holds exactly one record per sample, identical to an uninterrupted run's (the
 * fake server's replies are a pure function of the request and its per-request seed).
 *
 * The chosen points are printed; AGENTRL_KILL_SEED=<n> replays or explores another seed.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  closeSync,
  cpSync,
  existsSync,
  fstatSync,
  openSync,
  readSync,
  readdirSync,
  rmSync,
  statSync,
  watch,
  writeFileSync,
  type FSWatcher,
} from "node:fs";
import path from "node:path";
import { QWEN3_DIR } from "./helpers/qwen3.js";
import {
  GSM8K_TOOLS,
  preprocessGsm8kTrain,
  readAllTrajectories,
  spawnCli,
  tempDir,
  toolThenAnswer,
} from "./helpers/rollout-run.js";
import { seededRandom, startFakeSglang, type FakeSglang } from "./fake-sglang/index.js";
import { loadChatModel } from "../src/chat/index.js";
import { openTrajectoryWriter } from "../src/data/trajectory-store.js";
import { trajectoryKey, type Trajectory } from "../src/data/trajectory.js";
import { makeTrajectory } from "./helpers/trajectories.js";

const SEED = Number(process.env.AGENTRL_KILL_SEED ?? 20261122);
const PROMPTS = 50;
const N = 2;
const TOTAL = PROMPTS * N;
/** No single run may take longer than this: past it the run counts as hung. */
const RUN_LIMIT_MS = 60_000;

type Signal = "SIGKILL" | "SIGINT";
/** Where a kill lands: during startup (`fraction` of it), right after the k-th trajectory still to do is answered
 * (k drawn by `fraction`), or when the final close is seen on disk. */
type KillAt =
  | { kind: "early"; fraction: number }
  | { kind: "during"; fraction: number }
  | { kind: "close"; moment: "merging" | "merged" };
interface KillPoint {
  signal: Signal;
  at: KillAt;
}

/** 4 to 6 kills, alternating signals; the first lands during startup, the last at the final close. */
function killPlan(seed: number): KillPoint[] {
  const random = seededRandom(seed);
  const count = 4 + Math.floor(random() * 3);
  const firstSignal: Signal = random() < 0.5 ? "SIGKILL" : "SIGINT";
  return Array.from({ length: count }, (_, i) => {
    const signal: Signal = (i % 2 === 0) === (firstSignal === "SIGKILL") ? "SIGKILL" : "SIGINT";
    const at: KillAt =
      i === 0
        ? { kind: "early", fraction: random() }
        : i === count - 1
          ? { kind: "close", moment: random() < 0.5 ? "merging" : "merged" }
          : { kind: "during", fraction: random() };
    return { signal, at };
  });
}

/** What must not change between an interrupted-and-resumed run and an uninterrupted one. */
function essence(t: Trajectory) {
  return {
    status: t.status,
    finish_reason: t.finish_reason,
    response_ids: t.response_ids,
    response_mask: t.response_mask,
    reward: t.reward,
    tool_calls: t.tool_calls,
  };
}

/** Reads what a run left (nothing yet is an empty list). Throws if a file is unreadable or corrupt. */
async function onDisk(out: string): Promise<Trajectory[]> {
  if (!existsSync(out) && !existsSync(`${out}.parts`)) return [];
  return readAllTrajectories(out);
}

/** Counts complete lines of a growing file, reading only the bytes appended since the last call. */
function lineCounter(file: string): () => number {
  let offset = 0;
  let lines = 0;
  return () => {
    if (!existsSync(file)) return lines;
    const fd = openSync(file, "r");
    try {
      const size = fstatSync(fd).size;
      if (size < offset) (offset = 0), (lines = 0);
      const chunk = Buffer.alloc(size - offset);
      readSync(fd, chunk, 0, chunk.length, offset);
      offset = size;
      for (const byte of chunk) if (byte === 0x0a) lines += 1;
    } finally {
      closeSync(fd);
    }
    return lines;
  };
}

/**
 * Arms the trigger of a "close" kill: for parquet, the merge's temporary file appearing (merging) or the final file
 * appearing while the parts folder is still there (merged); for JSONL, the last line reaching the file.
 */
function watchForClose(out: string, moment: "merging" | "merged", fire: () => void): FSWatcher {
  const dir = path.dirname(out);
  const base = path.basename(out);
  if (out.endsWith(".parquet")) {
    return watch(dir, (_event, name) => {
      if (!name) return;
      // Only a file that is there now: a resumed run deletes a stale temporary file, and moves a finished one away.
      if (!existsSync(path.join(dir, name))) return;
      if (moment === "merging" ? name.startsWith(`.${base}.tmp-`) : name === base) fire();
    });
  }
  const count = lineCounter(out);
  return watch(dir, (_event, name) => {
    if (name === base && count() >= TOTAL) fire();
  });
}

interface Attempt {
  point: KillPoint | undefined;
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  /** Whether the kill was sent before the run had ended on its own. */
  killed: boolean;
  records: number;
}

let fake: FakeSglang;
let train: string;
let baseline: Map<string, ReturnType<typeof essence>>;
/** From the uninterrupted run: start to its first record on disk, the span the "early" kills are drawn over. */
let startupMs = 0;

function rolloutArgs(out: string): string[] {
  return [
    "rollout", "--data", train, "--model", QWEN3_DIR, "--server", fake.url, "--tools", GSM8K_TOOLS,
    "--limit", String(PROMPTS), "--n", String(N), "--concurrency", "8", "--seed", "1", "--out", out,
    "--set", "output.row_group_size=16", "--quiet",
  ];
}

const expectedIds = Array.from({ length: PROMPTS }, (_, d) => Array.from({ length: N }, (_, s) => trajectoryKey(d, s))).flat().sort();

beforeAll(async () => {
  const model = await loadChatModel(QWEN3_DIR);
  // Replies differ per sample and turn (the per-request seed) but are a pure function of the request.
  fake = await startFakeSglang({
    respond: toolThenAnswer(model, (params) => String(Number(params.sampling_seed ?? 0) % 997)),
    latencyMs: 30,
  });
  const data = tempDir("kill-points-data");
  const prep = await preprocessGsm8kTrain(data, PROMPTS);
  expect(prep.code, prep.stderr).toBe(0);
  train = path.join(data, "train.parquet");

  // The uninterrupted run: the reference records, and how long startup lasts.
  const out = path.join(tempDir("kill-points-baseline"), "t.jsonl");
  const started = Date.now();
  const run = spawnCli(rolloutArgs(out));
  let firstRecordAt: number | undefined;
  const poll = setInterval(() => {
    if (firstRecordAt === undefined && existsSync(out) && statSync(out).size > 0) firstRecordAt = Date.now();
  }, 5);
  const exit = await run.exited;
  clearInterval(poll);
  expect(exit.code, exit.stderr).toBe(0);
  const ended = Date.now();
  startupMs = (firstRecordAt ?? ended) - started;
  const records = await readAllTrajectories(out);
  expect(records.map((t) => t.id).sort()).toEqual(expectedIds);
  // The replies must really differ between samples, or comparing them would prove little.
  expect(new Set(records.map((t) => t.response_ids.join(","))).size).toBeGreaterThan(TOTAL / 2);
  baseline = new Map(records.map((t) => [t.id, essence(t)]));
  console.log(`kill points: uninterrupted run of ${TOTAL} trajectories: ${startupMs} ms to the first record, ${ended - started} ms in all`);
}, 120_000);

afterAll(async () => fake?.close());

describe.each([
  ["parquet", 0],
  ["jsonl", 1],
])("rollout (.%s) killed at seeded random points, resumed until done", (ext, seedOffset) => {
  it("loses nothing, duplicates nothing, and ends identical to an uninterrupted run", async () => {
    const seed = SEED + seedOffset;
    const plan = killPlan(seed);
    const describePoint = (p: KillPoint | undefined) =>
      !p
        ? "none"
        : `${p.signal} ${p.at.kind !== "close" ? `${p.at.kind} ${p.at.fraction.toFixed(3)}` : ext === "jsonl" ? "at close (last line written)" : `at close (${p.at.moment})`}`;
    console.log(`kill points (.${ext}, seed ${seed}): ${plan.map(describePoint).join(" | ")}`);
    const out = path.join(tempDir(`kill-points-${ext}`), `t.${ext}`);
    const attempts: Attempt[] = [];
    let previousIds = new Set<string>();

    for (let i = 0; i <= plan.length; i++) {
      const point = plan[i];
      const run = spawnCli([...rolloutArgs(out), ...(i > 0 ? ["--resume"] : [])]);
      let killed = false;
      let ended = false;
      const kill = (signal: NodeJS.Signals) => {
        if (ended || killed) return;
        killed = true;
        run.child.kill(signal);
      };
      const timers: NodeJS.Timeout[] = [setTimeout(() => run.child.kill("SIGKILL"), RUN_LIMIT_MS)];
      let watcher: FSWatcher | undefined;
      let trigger = "";
      const remaining = TOTAL - previousIds.size;
      // Progress is read off the fake server: each trajectory is two answered requests (tool call, then answer), and
      // the previous run's requests have all ended before this one starts.
      const requestsAtStart = fake.stats.byPath["/generate"] ?? 0;
      const answeredAtStart = fake.stats.samples;
      if (point?.at.kind === "early") {
        // During startup: after a delay drawn over the uninterrupted run's startup, or at this run's first request
        // if that comes sooner, so that nothing of this run is on disk yet.
        const delayMs = Math.floor(point.at.fraction * startupMs);
        trigger = ` after ${delayMs} ms or at the first request`;
        const startedAt = Date.now();
        const poll = setInterval(() => {
          if (Date.now() - startedAt >= delayMs || (fake.stats.byPath["/generate"] ?? 0) > requestsAtStart) kill(point.signal);
        }, 2);
        timers.push(poll);
      } else if (point?.at.kind === "during") {
        // Uniformly over the trajectories this run still has to do: right after the k-th of them is answered.
        const k = 1 + Math.floor(point.at.fraction * Math.max(remaining - 1, 0));
        trigger = ` at trajectory ${k} of ${remaining}`;
        const poll = setInterval(() => {
          if (fake.stats.samples - answeredAtStart >= 2 * k) kill(point.signal);
        }, 2);
        timers.push(poll);
      } else if (point?.at.kind === "close") {
        watcher = watchForClose(out, point.at.moment, () => kill(point.signal));
      }
      const exit = await run.exited;
      ended = true;
      timers.forEach((timer) => clearTimeout(timer));
      watcher?.close();
      // A killed client's requests end at the server a little later; let them, so they don't count for the next run.
      for (let waited = 0; fake.inFlight() > 0 && waited < 5_000; waited += 10) await new Promise((r) => setTimeout(r, 10));

      const records = await onDisk(out);
      const attempt: Attempt = { point, code: exit.code, signal: exit.signal, stderr: exit.stderr, killed, records: records.length };
      attempts.push(attempt);
      const where = `run ${i} (${describePoint(point)}${trigger}, ` +
        `killed: ${killed}, exit ${exit.code ?? exit.signal}, ${records.length} records on disk, ` +
        `beside them: ${readdirSync(path.dirname(out)).join(" ")})\n${exit.stderr}`;
      console.log(`kill points (.${ext}): ${where.split("\n")[0]}`);

      // Whatever a run left is readable, holds no cut-short trajectory, and keeps everything earlier runs wrote.
      const ids = records.map((t) => t.id);
      expect(new Set(ids).size, where).toBe(ids.length);
      for (const id of previousIds) expect(ids, `${where}: ${id} was lost`).toContain(id);
      for (const t of records) {
        expect(t.finish_reason, where).not.toBe("cancelled");
        expect(essence(t), `${where}: ${t.id}`).toEqual(baseline.get(t.id));
      }
      previousIds = new Set(ids);

      if (exit.code === 0) break;
      expect(killed, `${where}: a run nobody interrupted failed`).toBe(true);
      if (point!.signal === "SIGKILL") {
        expect(exit.signal, where).toBe("SIGKILL");
      } else if (exit.code === 130) {
        // The CLI's handler ran: it finished the file and says how to go on.
        expect(exit.stderr, where).toContain("--resume");
      } else {
        // Before the handler is installed (startup) or after it is removed (the final close), Node's default action
        // ends the process by the signal: a shell reports 130 all the same, and the output stays resumable.
        expect(exit.signal, where).toBe("SIGINT");
      }
    }

    const final = attempts.at(-1)!;
    expect(final.code, `the last run must finish: ${final.stderr}`).toBe(0);
    expect(attempts.filter((a) => a.killed).length).toBeGreaterThanOrEqual(2);
    const all = await readAllTrajectories(out);
    expect(all).toHaveLength(TOTAL);
    expect(all.map((t) => t.id).sort()).toEqual(expectedIds);
    expect(all.every((t) => t.finish_reason !== "cancelled")).toBe(true);
    for (const t of all) expect(essence(t), t.id).toEqual(baseline.get(t.id));
    expect(existsSync(`${out}.parts`)).toBe(false);
    // Nothing else is left beside the output (no temporary file of an interrupted merge).
    expect(readdirSync(path.dirname(out))).toEqual([path.basename(out)]);
  }, 180_000);
});

/**
 * The states a kill during parquet's close() leaves, built directly: the CLI test above reaches them only when its
 * kill lands in a window of a few milliseconds. Each failed before trajectory-store.ts handled it.
 */
describe("a parquet output killed during its final close", () => {
  async function closedWithSnapshot(): Promise<{ file: string; snapshot: string; ids: string[] }> {
    const file = path.join(tempDir("kill-close"), "t.parquet");
    const writer = await openTrajectoryWriter(file, { rowGroupSize: 4 });
    const records = Array.from({ length: 10 }, (_, i) => makeTrajectory(i));
    for (const t of records) await writer.write(t);
    await writer.settled();
    // What the parts folder holds just before close() merges it: two parts and two journal lines.
    const snapshot = path.join(tempDir("kill-close-snapshot"), "parts");
    cpSync(`${file}.parts`, snapshot, { recursive: true });
    await writer.close();
    return { file, snapshot, ids: records.map((t) => t.id).sort() };
  }

  it("after the merged file is in place but before the parts folder is removed: --resume adds no duplicates", async () => {
    const { file, snapshot, ids } = await closedWithSnapshot();
    cpSync(snapshot, `${file}.parts`, { recursive: true });
    const resumed = await openTrajectoryWriter(file, { resume: true, rowGroupSize: 4 });
    expect([...resumed.existingIds].sort()).toEqual(ids);
    await resumed.close();
    expect((await readAllTrajectories(file)).map((t) => t.id).sort()).toEqual(ids);
    expect(readdirSync(path.dirname(file))).toEqual(["t.parquet"]);
  });

  it("while the parts folder was half removed: readers still see every trajectory", async () => {
    const { file, snapshot, ids } = await closedWithSnapshot();
    cpSync(snapshot, `${file}.parts`, { recursive: true });
    rmSync(path.join(`${file}.parts`, "part-000002.parquet"));
    rmSync(path.join(`${file}.parts`, "pending.jsonl"));
    expect((await readAllTrajectories(file)).map((t) => t.id).sort()).toEqual(ids);
    const resumed = await openTrajectoryWriter(file, { resume: true, rowGroupSize: 4 });
    expect([...resumed.existingIds].sort()).toEqual(ids);
    await resumed.close();
    expect((await readAllTrajectories(file)).map((t) => t.id).sort()).toEqual(ids);
  });

  it("in the middle of writing the merged file: --resume removes the half-written temporary file", async () => {
    const { file, snapshot, ids } = await closedWithSnapshot();
    rmSync(file);
    cpSync(snapshot, `${file}.parts`, { recursive: true });
    writeFileSync(path.join(path.dirname(file), ".t.parquet.tmp-4242-0badf00d"), "PAR1 torn");
    const resumed = await openTrajectoryWriter(file, { resume: true, rowGroupSize: 4 });
    await resumed.close();
    expect((await readAllTrajectories(file)).map((t) => t.id).sort()).toEqual(ids);
    expect(readdirSync(path.dirname(file))).toEqual(["t.parquet"]);
  });
});
