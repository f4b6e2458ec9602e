/**
 * Files written before format_version 2 held messages, reward_extra, tool_scores, drift_detail and tool-call arguments
 * as JSON text (test/fixtures/trajectories-format1: small .jsonl and .parquet files written by that version's writer,
 * make.mjs says how). Today's readers give the same structured record from them as from a new file: the store,
 * inspect's column reads and `show`, a resume that appends to them, and SFT's trajectory rows.
 */
import { copyFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { DataType } from "apache-arrow";
import { REPO_ROOT } from "./helpers/cli.js";
import { tempDir } from "./helpers/tmp.js";
import { makeTrajectory } from "./helpers/trajectories.js";
import { openTrajectoryWriter, readTrajectories } from "../src/data/trajectory-store.js";
import { readParquetInfo } from "../src/data/parquet.js";
import { trajectoryAcc, type Trajectory } from "../src/data/trajectory.js";
import { readTrajectoryRows, streamTrajectoryColumns } from "../src/inspect/columnar.js";
import { SUMMARY_COLUMNS } from "../src/inspect/record.js";
import { buildShowView } from "../src/inspect/show.js";

const FIXTURES = path.join(REPO_ROOT, "test", "fixtures", "trajectories-format1");
const FILES = ["format1.jsonl", "format1.parquet"] as const;

async function readAll(file: string): Promise<Trajectory[]> {
  const out: Trajectory[] = [];
  for await (const t of readTrajectories(file)) out.push(t);
  return out;
}

/** The structured fields of the fixture's three records, as make.mjs wrote them in JSON text. */
const EXPECTED = [
  {
    id: "0:0",
    messages: [
      { role: "user", content: "What is 8 + 9?" },
      { role: "assistant", content: "", tool_calls: [{ type: "function", function: { name: "calc_gsm8k_reward", arguments: { answer: "17" } } }] },
      { role: "tool", content: "ok" },
      { role: "assistant", content: "#### 17", reasoning_content: "8 + 9 = 17" },
    ],
    segmentArguments: [null, { answer: "17" }],
    callArguments: [{ answer: "17" }],
    tool_scores: { calc_gsm8k_reward: 1 },
    reward_extra: { acc: true },
    drift_detail: null,
    contextMessages: [],
  },
  {
    id: "0:1",
    messages: [
      { role: "system", content: "Use the tool." },
      { role: "user", content: "What is 8 + 9?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_0_0", type: "function", function: { name: "calc", arguments: { answer: "18" } } },
          { id: "call_0_1", type: "function", function: { name: "calc", arguments: { answer: "19" } } },
        ],
      },
      { role: "tool", tool_call_id: "call_0_0", content: "a" },
      { role: "tool", tool_call_id: "call_0_1", content: "b" },
      { role: "assistant", content: "#### 18" },
    ],
    segmentArguments: [null, [{ answer: "18" }, { answer: "19" }]],
    callArguments: [{ answer: "18" }, { answer: "19" }],
    tool_scores: null,
    reward_extra: { acc: false, answer: "18", tools: ["calc"] },
    drift_detail: { status: "drift", mode: "strict", firstDifference: 7, accumulatedLength: 8, renderedLength: 9, accumulatedExcerpt: "a", renderedExcerpt: "b" },
    contextMessages: [[{ role: "user", content: "first try" }]],
  },
  {
    id: "1:0",
    messages: [{ role: "user", content: [{ type: "text", text: "Hi" }], tag: "x" }, { role: "assistant", content: "cut" }],
    segmentArguments: [null],
    callArguments: [],
    tool_scores: null,
    reward_extra: null,
    drift_detail: null,
    contextMessages: [],
  },
];

const structured = (t: Trajectory) => ({
  id: t.id,
  messages: t.messages,
  segmentArguments: t.segments.map((s) => s.arguments ?? null),
  callArguments: t.calls.map((c) => c.arguments),
  tool_scores: t.tool_scores ?? null,
  reward_extra: t.reward_extra ?? null,
  drift_detail: t.drift_detail ?? null,
  contextMessages: (t.context_segments ?? []).map((c) => c.messages),
});

describe("trajectory files of format 1 (JSON text fields)", () => {
  for (const name of FILES) {
    it(`${name}: the store reads them into the structured record`, async () => {
      const all = await readAll(path.join(FIXTURES, name));
      expect(all.map((t) => t.format_version)).toEqual([1, 1, 1]);
      expect(all.map(structured)).toEqual(EXPECTED);
      const shown = buildShowView(all[1]!);
      expect([shown.reward.extra, shown.drift_detail, buildShowView(all[0]!).reward.tool_scores]).toEqual([
        EXPECTED[1]!.reward_extra,
        EXPECTED[1]!.drift_detail,
        EXPECTED[0]!.tool_scores,
      ]);
    });

    it(`${name}: a resume appends format 2 records, and the file reads back whole`, async () => {
      const file = path.join(tempDir("format1-resume"), name);
      copyFileSync(path.join(FIXTURES, name), file);
      const writer = await openTrajectoryWriter(file, { resume: true });
      expect([...writer.existingIds].sort()).toEqual(["0:0", "0:1", "1:0"]);
      const added = makeTrajectory(4);
      await writer.write(added);
      await writer.close();
      const all = await readAll(file);
      expect(all.slice(0, 3).map(structured)).toEqual(EXPECTED);
      expect(all[3]).toEqual(added);
      if (name.endsWith(".parquet")) {
        // The finished file is one schema again: the old part was encoded anew, its messages now list<struct>.
        const messages = (await readParquetInfo(file)).schema.fields.find((f) => f.name === "messages")!;
        expect(DataType.isList(messages.type)).toBe(true);
      }
    });
  }

  it("inspect's column reads take format 1's column types (summary columns, acc from reward_extra)", async () => {
    const file = path.join(FIXTURES, "format1.parquet");
    const records = [];
    for await (const t of streamTrajectoryColumns(file, SUMMARY_COLUMNS)) records.push(t);
    expect(records.map(trajectoryAcc)).toEqual([1, 0, 0]);
    expect(records.map((t) => t.reward_extra)).toEqual(EXPECTED.map((e) => e.reward_extra));
    expect(records.map((t) => t.context_segments?.length)).toEqual([0, 1, 0]);
    expect((await readTrajectoryRows(file, [1])).map(structured)).toEqual([EXPECTED[1]]);
  });
});
