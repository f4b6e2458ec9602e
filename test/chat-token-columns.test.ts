import { describe, expect, it } from "vitest";
import { TokenColumns } from "../src/chat/token-columns.js";
import { generateBody, generateBodyBytes } from "../src/engine/wire.js";

describe("TokenColumns", () => {
  it("keeps every row through its growth: ids, mask, and a logprob only where the mask is 1", () => {
    const columns = new TokenColumns(4);
    const expected: { id: number; mask: number; logprob: number }[] = [];
    for (let turn = 0; turn < 40; turn++) {
      const ids = Array.from({ length: 1 + (turn % 7) }, (_, i) => 151_000 + turn * 10 + i);
      const sampled = turn % 2 === 0;
      const logprobs = turn % 4 === 0 ? undefined : ids.map((_, i) => -(turn + i) / 3);
      columns.append(ids, sampled ? 1 : 0, logprobs);
      ids.forEach((id, i) => expected.push({ id, mask: sampled ? 1 : 0, logprob: sampled ? (logprobs?.[i] ?? 0) : 0 }));
    }
    expect(columns.length).toBe(expected.length);
    expect([...columns.ids()]).toEqual(expected.map((row) => row.id));
    expect([...columns.mask()]).toEqual(expected.map((row) => row.mask));
    // float64: the engine's logprobs exactly, not rounded to float32.
    expect([...columns.logprobs()]).toEqual(expected.map((row) => row.logprob));
    expect(columns.lastId()).toBe(expected.at(-1)!.id);
    expect(columns.idRange(3, 9)).toEqual(expected.slice(3, 9).map((row) => row.id));
    expect(Array.isArray(columns.logprobRange(5))).toBe(true);
  });

  it("a view taken before later appends, and before the columns grow, keeps what it showed", () => {
    const columns = new TokenColumns(16);
    columns.append([1, 2, 3], 0, undefined);
    const view = columns.ids();
    columns.append([4, 5], 1, [-0.5, -0.25]);
    expect([...view]).toEqual([1, 2, 3]);
    const before = columns.ids();
    columns.append(Array.from({ length: 100 }, (_, i) => 100 + i), 1, undefined);
    expect([...before]).toEqual([1, 2, 3, 4, 5]);
    expect(columns.length).toBe(105);
    expect(new TokenColumns(0).lastId()).toBeUndefined();
  });

  it("keeps its ids' JSON text equal to the ids through appends and growth", () => {
    const columns = new TokenColumns(2);
    const text = () => Buffer.from(columns.idsText()).toString("latin1");
    expect(text()).toBe("");
    const all: number[] = [];
    for (let turn = 0; turn < 12; turn++) {
      const ids = Array.from({ length: turn % 5 }, (_, i) => 151_000 + 17 * turn + i);
      columns.append(ids, (turn % 2) as 0 | 1, undefined);
      all.push(...ids);
      if (turn % 3 !== 1) expect(text()).toBe(all.join(","));
    }
    expect(JSON.parse(`[${text()}]`)).toEqual(all);
  });

  it("prints every int32 id as JSON does: zero, each digit count, negatives, the extremes", () => {
    const ids = [0, 7, 10, 99, 100, 151_643, 999_999, 1_000_000, 2 ** 31 - 1, -1, -10, -(2 ** 31), 9, 1_000_000_000, 999_999_999];
    const columns = new TokenColumns(1);
    for (const id of ids) columns.append([id], 0, undefined);
    expect(Buffer.from(columns.idsText()).toString("latin1")).toBe(ids.join(","));
  });

  it("is sent to /generate as the same JSON as the plain ids", () => {
    const ids = [151_644, 872, 198, 0, 151_645];
    const columns = new TokenColumns(2);
    columns.append(ids, 0, undefined);
    const request = { samplingParams: { temperature: 1, maxNewTokens: 8 }, priority: 3, topLogprobs: 2 };
    const attempt = { rid: "r-1", loraPath: "adapter" };
    const typed = generateBody({ ...request, inputIds: columns.ids() }, attempt);
    expect(typed).toBe(generateBody({ ...request, inputIds: ids }, attempt));
    expect(generateBodyBytes({ ...request, inputIds: columns.ids(), inputIdsText: columns.idsText() }, attempt).toString("utf8")).toBe(typed);
    expect(generateBodyBytes({ ...request, inputIds: ids }, attempt).toString("utf8")).toBe(typed);
    expect(JSON.parse(typed)).toMatchObject({ input_ids: ids, rid: "r-1", priority: 3, lora_path: "adapter", top_logprobs_num: 2 });
  });
});
