/**
 * The parquet writer's crash journal (src/data/trajectory-journal.ts): trajectories with their number lists packed in
 * the parquet file's own types. What a killed run left in pending.jsonl reads back as the finished file would hold
 * it; a damaged packed list is refused naming the file, line and field; `.jsonl` output stays plain JSON.
 */
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { journalLine, unpackJournalRecord } from "../src/data/trajectory-journal.js";
import { openTrajectoryWriter, readTrajectories } from "../src/data/trajectory-store.js";
import type { Trajectory } from "../src/data/trajectory.js";
import { makeTrajectory } from "./helpers/trajectories.js";
import { tempDir } from "./helpers/tmp.js";

async function readAll(file: string): Promise<Trajectory[]> {
  const out: Trajectory[] = [];
  for await (const t of readTrajectories(file)) out.push(t);
  return out;
}

describe("journal lines", () => {
  it("give back ids and masks exactly and logprobs as the parquet file's float32 keeps them", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 2 ** 31 - 1 }), { maxLength: 300 }),
        fc.array(fc.double({ min: -1e4, max: 0, noNaN: true }), { maxLength: 300 }),
        fc.boolean(),
        (ids, logprobs, withTrainer) => {
          const t = makeTrajectory(1, {
            prompt_ids: ids,
            response_ids: ids.map((x) => x % 151_000),
            response_mask: ids.map((x) => x % 2),
            response_logprobs: logprobs,
            trainer_logprobs: withTrainer ? logprobs.map((x) => x / 2) : null,
          });
          const back = unpackJournalRecord(JSON.parse(journalLine(t)), "pending.jsonl:1") as Trajectory;
          expect(back).toEqual({
            ...t,
            response_logprobs: logprobs.map(Math.fround),
            trainer_logprobs: withTrainer ? logprobs.map((x) => Math.fround(x / 2)) : null,
          });
        },
      ),
      { numRuns: 200 },
    );
  });

  it("are packed, and much shorter than the JSON of the same trajectory", () => {
    const logprobs = Array.from({ length: 1000 }, (_, k) => -Math.abs(Math.sin(k)) * 3);
    const t = makeTrajectory(2, { response_ids: logprobs.map((_, k) => 1000 + k), response_mask: logprobs.map(() => 1), response_logprobs: logprobs });
    const line = journalLine(t);
    expect(JSON.parse(line).response_logprobs).toEqual({ packed: "float32", base64: expect.any(String) });
    expect(line.length).toBeLessThan(JSON.stringify(t).length / 2);
  });

  it("refuse a damaged packed list naming the place and the field", () => {
    const record = JSON.parse(journalLine(makeTrajectory(3)));
    record.response_logprobs.base64 = "AAA"; // 2 bytes: not a whole float32
    expect(() => unpackJournalRecord(record, "out.parquet.parts/pending.jsonl:7")).toThrow("out.parquet.parts/pending.jsonl:7: response_logprobs: packed float32 list cut short");
    record.response_logprobs = { packed: "float16", base64: "" };
    expect(() => unpackJournalRecord(record, "x:1")).toThrow("x:1: response_logprobs: not a packed number list");
  });
});

describe("the parquet writer's journal", () => {
  it("a killed run's pending trajectories read back and resume as the finished file holds them", async () => {
    const dir = tempDir("journal");
    const file = path.join(dir, "t.parquet");
    const records = Array.from({ length: 5 }, (_, i) =>
      makeTrajectory(i, { response_logprobs: makeTrajectory(i).response_logprobs.map((x, k) => x - k / 3) }),
    );
    const first = await openTrajectoryWriter(file, { rowGroupSize: 100 });
    for (const t of records) await first.write(t);
    // no close(): everything is still in the journal, packed
    const pending = readFileSync(path.join(`${file}.parts`, "pending.jsonl"), "utf8");
    expect(pending).toContain('"packed":"float32"');
    const unfinished = await readAll(file);
    const resumed = await openTrajectoryWriter(file, { resume: true });
    expect(resumed.existingIds.size).toBe(5);
    await resumed.close();
    const finished = await readAll(file);
    expect(unfinished).toEqual(finished);
    expect(finished.map((t) => t.response_logprobs)).toEqual(records.map((t) => t.response_logprobs.map(Math.fround)));
  });

  it("leaves .jsonl output plain JSON", async () => {
    const file = path.join(tempDir("journal-jsonl"), "t.jsonl");
    const writer = await openTrajectoryWriter(file);
    await writer.write(makeTrajectory(0));
    await writer.close();
    const line = JSON.parse(readFileSync(file, "utf8").trim());
    expect(Array.isArray(line.response_logprobs)).toBe(true);
    // A packed list in a user's .jsonl is not taken for one: the schema refuses it.
    writeFileSync(file, `${journalLine(makeTrajectory(0))}\n`);
    await expect(readAll(file)).rejects.toThrow(/response_logprobs|prompt_ids/);
  });
});
