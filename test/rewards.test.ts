// verl's GSM8K scorer (verl/utils/reward_score/gsm8k.py) with its quirks, the data_source routing and the
// user reward module hook.
import path from "node:path";
import { describe, expect, it } from "vitest";
import { InputError } from "../src/errors.js";
import { computeReward, computeScore, extractSolution, loadRewardModule, scoreGsm8k } from "../src/rewards/index.js";
import { REPO_ROOT } from "./helpers/cli.js";

const FIXTURES = path.join(REPO_ROOT, "test", "fixtures", "rewards");

describe("extractSolution strict", () => {
  it("takes the last '#### N' and strips commas", () => {
    expect(extractSolution("so #### 1,234", "strict")).toBe("1234");
    expect(extractSolution("#### 1 and later #### 2", "strict")).toBe("2");
    expect(extractSolution("#### -3.5", "strict")).toBe("-3.5");
    expect(extractSolution("#### 5$", "strict")).toBe("5");
  });

  it("returns null without '#### ' directly followed by a number", () => {
    expect(extractSolution("the answer is 72", "strict")).toBeNull();
    expect(extractSolution("####72", "strict")).toBeNull();
    expect(extractSolution("#### $5", "strict")).toBeNull();
  });

  it("keeps a trailing period, so '#### 18.' is not '18'", () => {
    expect(extractSolution("#### 18.", "strict")).toBe("18.");
    expect(computeScore("#### 18.", "18")).toBe(0);
  });

  it("only looks at the last 300 characters", () => {
    expect(extractSolution("#### 42" + "a".repeat(293), "strict")).toBe("42");
    expect(extractSolution("#### 42" + "a".repeat(294), "strict")).toBeNull();
  });

  it("counts the 300 characters in code points like Python", () => {
    // 6 + 294 = 300 code points, but 600 UTF-16 units: slicing by units would lose the answer.
    expect(extractSolution("#### 7" + "😀".repeat(294), "strict")).toBe("7");
    expect(extractSolution("#### 7" + "😀".repeat(295), "strict")).toBeNull();
  });
});

describe("extractSolution flexible", () => {
  it("takes the last number-like run and keeps commas and periods", () => {
    expect(extractSolution("I think 12 then 18", "flexible")).toBe("18");
    expect(extractSolution("total 1,000", "flexible")).toBe("1,000");
    expect(extractSolution("The answer is 18.", "flexible")).toBe("18.");
    expect(extractSolution("#### -4", "flexible")).toBe("-4");
  });

  it("skips a lone '.' and returns '.' when nothing else matched (the loop-variable quirk)", () => {
    expect(extractSolution("value 5 then .", "flexible")).toBe("5");
    expect(extractSolution("a . b .", "flexible")).toBe(".");
    expect(extractSolution("no digits here", "flexible")).toBeNull();
  });
});

describe("computeScore", () => {
  it("is score on an exact string match, format_score otherwise, and 0 when nothing is extracted", () => {
    expect(computeScore("#### 72", "72")).toBe(1.0);
    expect(computeScore("#### 71", "72")).toBe(0.0);
    expect(computeScore("#### 71", "72", "strict", 0.1, 1.0)).toBe(0.1);
    expect(computeScore("no answer", "72", "strict", 0.1, 1.0)).toBe(0);
    expect(computeScore("#### 72", "72", "strict", 0.1, 2.0)).toBe(2.0);
    expect(computeScore("1,000", "1000", "flexible")).toBe(0.0);
  });

  it("reports whether verl would return its int 0", () => {
    expect(scoreGsm8k("nothing", "1")).toEqual({ score: 0, nothingExtracted: true, extracted: null });
    expect(scoreGsm8k("#### 2", "1")).toEqual({ score: 0, nothingExtracted: false, extracted: "2" });
  });
});

describe("computeReward", () => {
  const input = (responseText: string, dataSource = "openai/gsm8k") => ({
    dataSource,
    responseText,
    groundTruth: "72",
    extraInfo: { split: "test" },
    toolRewards: [-0.05, 0.0],
    turnScores: [0.0],
  });

  it("routes openai/gsm8k to the strict scorer and keeps every part", async () => {
    expect(await computeReward(input("... #### 72"))).toEqual({
      score: 1.0,
      source: "builtin:openai/gsm8k",
      toolRewards: [-0.05, 0.0],
      turnScores: [0.0],
      extra: {},
    });
    // strict: a bare number is not an answer.
    expect((await computeReward(input("the answer is 72"))).score).toBe(0);
  });

  it("refuses a data source without a scorer", async () => {
    await expect(computeReward(input("#### 72", "lighteval/MATH"))).rejects.toThrow(InputError);
    await expect(computeReward(input("#### 72", "lighteval/MATH"))).rejects.toThrow(/no built-in reward for data_source "lighteval\/MATH"/);
  });

  it("lets a user module score any data source and records its extra fields", async () => {
    const fn = await loadRewardModule(path.join(FIXTURES, "length-reward.mjs"));
    const record = await computeReward(input("it is 72", "my/source"), fn);
    expect(record.score).toBe(1.0);
    expect(record.source).toBe(`module:${path.join(FIXTURES, "length-reward.mjs")}`);
    expect(record.extra).toEqual({ source: "my/source", split: "test", nTool: 2, nTurns: 1 });
    expect(record.toolRewards).toEqual([-0.05, 0.0]);
  });

  it("rejects a module whose computeScore returns a non-number", async () => {
    const fn = await loadRewardModule(path.join(FIXTURES, "bad-reward.mjs"));
    await expect(computeReward(input("x"), fn)).rejects.toThrow(/computeScore returned "high"/);
  });

  it("names the module when it cannot be used", async () => {
    await expect(loadRewardModule(path.join(FIXTURES, "missing.mjs"))).rejects.toThrow(/missing\.mjs: cannot be loaded/);
    await expect(loadRewardModule(path.join(FIXTURES, "reward.ts"))).rejects.toThrow(/TypeScript modules cannot be loaded/);
    await expect(loadRewardModule(path.join(REPO_ROOT, "test", "fixtures", "tool-modules", "word-count-tool.mjs"))).rejects.toThrow(
      /no exported function computeScore/,
    );
  });
});
