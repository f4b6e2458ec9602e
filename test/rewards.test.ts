// verl's GSM8K scorer (verl/utils/reward_score/gsm8k.py) with its quirks, the data_source routing, the vault scorer
// (correctness only by default, shaped on request), the user reward module hook (custom_reward_function.name and
// reward_kwargs), and the accuracy the metrics read (a scorer's acc, else score >= 1).
import path from "node:path";
import { describe, expect, it } from "vitest";
import { InputError } from "../src/errors.js";
import { computeReward, computeScore, extractSolution, loadRewardModule, scoreGsm8k, scoreVault } from "../src/rewards/index.js";
import { lastCodePoints } from "../src/rewards/gsm8k.js";
import { trajectoryAcc } from "../src/data/trajectory.js";
import { trajectoryMetrics, validationMetrics } from "../src/train/step-metrics.js";
import { validateConfig } from "../src/config/tree.js";
import { trainConfigSchema } from "../src/train/config.js";
import { REPO_ROOT } from "./helpers/cli.js";
import { makeTrajectory } from "./helpers/trajectories.js";

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

  it("counts lone surrogates as one code point each, as Python's str does", () => {
    // Strings of pairs, lone high and low surrogates and ASCII, cut at every length: the same as splitting into code
    // points (Array.from) and keeping the last n.
    const units = ["a", "😀", "\ud800", "\udc00", "\udc00\ud800", "#"];
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
    for (let trial = 0; trial < 200; trial++) {
      const s = Array.from({ length: next() % 40 }, () => units[next() % units.length]).join("");
      for (const n of [0, 1, 2, 5, 17, 300]) {
        const points = Array.from(s);
        expect(lastCodePoints(s, n)).toBe(points.length > n ? points.slice(points.length - n).join("") : s);
      }
    }
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

  it("routes openai/gsm8k to the strict scorer and keeps every part, acc = score >= 1", async () => {
    expect(await computeReward(input("... #### 72"))).toEqual({
      score: 1.0,
      source: "builtin:openai/gsm8k",
      toolRewards: [-0.05, 0.0],
      turnScores: [0.0],
      extra: { acc: true },
    });
    // strict: a bare number is not an answer.
    expect(await computeReward(input("the answer is 72"))).toMatchObject({ score: 0, extra: { acc: false } });
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
      /no exported function compute_score \(or computeScore, or a default export\)/,
    );
  });
});

describe("custom_reward_function.name", () => {
  const input = { dataSource: "my/source", responseText: "7", groundTruth: "7", extraInfo: {}, toolRewards: [], turnScores: [] };
  const named = path.join(FIXTURES, "named-rewards.mjs");

  it("defaults to verl's compute_score, which wins over the JS spelling computeScore", async () => {
    const fn = await loadRewardModule(named);
    expect(fn.exportName).toBe("compute_score");
    expect((await computeReward(input, fn)).score).toBe(0.25);
  });

  it("at the default name, takes a JS module's computeScore, else its default export", async () => {
    const camel = await loadRewardModule(path.join(FIXTURES, "length-reward.mjs"));
    expect(camel.exportName).toBe("computeScore");
    const byDefault = await loadRewardModule(path.join(FIXTURES, "default-reward.mjs"));
    expect(byDefault.exportName).toBe("default");
    expect((await computeReward(input, byDefault)).score).toBe(1);
  });

  it("looks up a configured name, and only that name", async () => {
    const fn = await loadRewardModule(named, "strict_reward");
    expect(fn.exportName).toBe("strict_reward");
    expect(await computeReward(input, fn)).toMatchObject({ score: 1, extra: { acc: false } });
    expect((await computeReward(input, await loadRewardModule(named, "computeScore"))).score).toBe(0.5);
    // No fallback to a default export for a name the user chose.
    await expect(loadRewardModule(path.join(FIXTURES, "default-reward.mjs"), "score_it")).rejects.toThrow(/no exported function score_it/);
  });

  it("a missing name is an input error naming the file and listing the functions it exports", async () => {
    const error = await loadRewardModule(named, "my_reward").catch((err: unknown) => err);
    expect(error).toBeInstanceOf(InputError);
    expect((error as Error).message).toBe(
      `reward module ${named}: no exported function my_reward (custom_reward_function.name); ` +
        "it exports: computeScore, compute_score, kwargs_reward, strict_reward",
    );
  });

  it("names the configured function when it returns a non-number", async () => {
    const fn = { ...(await loadRewardModule(named, "kwargs_reward")), fn: () => "high" as unknown as number };
    await expect(computeReward(input, fn)).rejects.toThrow(/named-rewards\.mjs: kwargs_reward returned "high"/);
  });

  it("merges reward_kwargs into the function's input, as verl merges them into compute_score's kwargs", async () => {
    const fn = await loadRewardModule(named, "kwargs_reward");
    expect(await computeReward(input, fn, { bonus: 0.25 })).toMatchObject({ score: 0.75, extra: { bonus: 0.25 } });
    expect(await computeReward(input, fn)).toMatchObject({ score: 0.5, extra: { bonus: 0 } });
  });
});

describe("the vault reward (data_source agentrl/vault)", () => {
  const CALL = '<tool_call>\n{"name": "open_vault", "arguments": {}}\n</tool_call>';
  const answered = (call: string, code: string) => `${call}\nuser\n<tool_response>\n4\n</tool_response>\nassistant\n${code}`;
  const vault = (responseText: string, toolRewards: number[]) => ({
    dataSource: "agentrl/vault",
    responseText,
    groundTruth: "4",
    extraInfo: {},
    toolRewards,
    turnScores: [],
  });

  it("is correctness only by default: 1 for the code as final answer, else 0, with acc = correct", async () => {
    expect(scoreVault(answered(CALL, "4"), "4", [1])).toMatchObject({ score: 1, correct: true });
    expect(scoreVault(answered(CALL, "5"), "4", [1])).toMatchObject({ score: 0, correct: false });
    expect(scoreVault(CALL, "4", []).score).toBe(0); // a well-formed call earns nothing by itself
    expect(scoreVault("4", "4", []).score).toBe(1); // the answer is what counts
    expect(await computeReward(vault(answered(CALL, "4"), [1]))).toMatchObject({ score: 1, extra: { acc: true } });
    expect(await computeReward(vault(answered(CALL, "5"), [1]))).toMatchObject({ score: 0, extra: { acc: false } });
  });

  it("is the shaped reward with reward_kwargs {shaped: true}, and acc still says whether the answer is right", async () => {
    expect(scoreVault(answered(CALL, "4"), "4", [1], { shaped: true }).score).toBe(1);
    expect(scoreVault(answered(CALL, "5"), "4", [1], { shaped: true }).score).toBe(0.5);
    expect(scoreVault(CALL, "4", [], { shaped: true }).score).toBeCloseTo(0.24 * (1 - 3 / 32));
    const shaped = await computeReward(vault(answered(CALL, "5"), [1]), undefined, { shaped: true });
    expect(shaped).toMatchObject({ score: 0.5, extra: { acc: false } });
    // A lucky guess without the tool: half the shaped reward, yet a correct answer.
    expect(await computeReward(vault("4", []), undefined, { shaped: true })).toMatchObject({ score: 0.5, extra: { acc: true } });
  });

  it("refuses a reward kwarg the built-in rewards do not take", async () => {
    await expect(computeReward(vault("4", []), undefined, { shapd: true })).rejects.toThrow(InputError);
    await expect(computeReward(vault("4", []), undefined, { shaped: "yes" })).rejects.toThrow(/reward_kwargs: shaped: .*expected boolean/);
  });

  it("the config names a misspelled built-in reward kwarg, and lets a module take any", () => {
    const tree = (reward: Record<string, unknown>) => ({
      data: { train_files: "t.parquet" },
      actor_rollout_ref: { model: { path: "m" } },
      custom_reward_function: reward,
    });
    expect(() => validateConfig(trainConfigSchema, "train", tree({ reward_kwargs: { shapd: true } }), "run.yaml")).toThrow(
      /run\.yaml: invalid config\n {2}custom_reward_function\.reward_kwargs\.shapd: not an option of the built-in rewards \(they take: shaped\)/,
    );
    const parsed = validateConfig(trainConfigSchema, "train", tree({ path: "r.mjs", reward_kwargs: { shapd: true } }), "run.yaml");
    expect(parsed.custom_reward_function).toEqual({ path: "r.mjs", name: "compute_score", reward_kwargs: { shapd: true } });
    expect(validateConfig(trainConfigSchema, "train", tree({}), "run.yaml").custom_reward_function.reward_kwargs).toEqual({});
  });
});

describe("step metrics repeat themselves", () => {
  it("give the same means whatever order the trajectories finished in (a float sum depends on its order)", () => {
    const rewards = [0.7, 0.2, 0.05, 0.9, 0.35, 0.1];
    const list = rewards.map((reward, i) => makeTrajectory(i, { reward, score: reward }));
    const reversed = [...list].reverse();
    // The two orders' plain means differ in their last bit (all six, and the three first samples mean@1 takes), so the
    // metrics only agree when the order of the sum is fixed.
    const mean = (values: number[]) => values.reduce((a, b) => a + b) / values.length;
    const firsts = rewards.filter((_, i) => i % 2 === 0);
    expect(mean(rewards)).not.toBe(mean([...rewards].reverse()));
    expect(mean(firsts)).not.toBe(mean([...firsts].reverse()));
    expect(trajectoryMetrics(reversed, 64)).toEqual(trajectoryMetrics(list, 64));
    expect(validationMetrics(reversed, 2)).toEqual(validationMetrics(list, 2));
  });
});

describe("accuracy: a scorer's acc, else score >= 1", () => {
  it("reads acc from reward_extra (boolean or number) and falls back to score >= 1", () => {
    expect(trajectoryAcc({ score: 0.5, reward_extra: { acc: true } })).toBe(1);
    expect(trajectoryAcc({ score: 1, reward_extra: { acc: false } })).toBe(0);
    expect(trajectoryAcc({ score: 1, reward_extra: { acc: 0.5 } })).toBe(0.5);
    expect(trajectoryAcc({ score: 1, reward_extra: { other: 1 } })).toBe(1);
    expect(trajectoryAcc({ score: 0.99, reward_extra: null })).toBe(0);
  });

  it("train acc/mean and validation acc/mean@1 and pass@k use it", () => {
    // Shaped rewards below 1 with correct answers: score >= 1 would say 0 accuracy.
    const extra = (acc: boolean) => ({ acc });
    const list = [
      makeTrajectory(0, { score: 0.5, reward: 0.5, reward_extra: extra(true) }), // group 0, sample 0
      makeTrajectory(1, { score: 0.5, reward: 0.5, reward_extra: extra(false) }), // group 0, sample 1
      makeTrajectory(2, { score: 1, reward: 1, reward_extra: extra(false) }), // group 1, sample 0
      makeTrajectory(3, { score: 0.2, reward: 0.2, reward_extra: extra(true) }), // group 1, sample 1
    ];
    expect(trajectoryMetrics(list, 64)["acc/mean"]).toBe(0.5);
    const val = validationMetrics(list, 2);
    expect(val["val-core/openai/gsm8k/acc/mean@1"]).toBe(0.5); // sample 0 of each group: true, false
    expect(val["val-core/openai/gsm8k/reward/pass@2"]).toBe(1); // each group has a correct sample
    expect(val["val-core/openai/gsm8k/reward/mean@1"]).toBe(0.75);
  });
});
