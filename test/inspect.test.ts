/**
 * The pieces of `agentrl inspect` that hold logic of their own, tested directly: --where parsing and its errors,
 * the bounded top-k list (it must equal a full sort cut to the limit, or --sort --limit on a big file lies), the
 * reservoir percentiles (exact below capacity, bounded above), and the run-folder alert rules.
 */
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { makeTrajectory } from "./helpers/trajectories.js";
import { UsageError } from "../src/errors.js";
import { makeFilter, matches, parseWhere } from "../src/inspect/where.js";
import { parseSort, RowCollector } from "../src/inspect/list.js";
import { InspectStats, Reservoir } from "../src/inspect/summary.js";
import { chart, defaultCurves, runAlerts, sparkline, spikeAlerts, toolCollapseAlert, type Curve } from "../src/inspect/curves.js";
import type { MetricsRow } from "../src/inspect/source.js";
import { buildShowView, renderShow, stripTemplate } from "../src/inspect/show.js";
import { renderSummary } from "../src/inspect/summary-view.js";
import { buildTokenView, visibleToken } from "../src/inspect/tokens.js";
import { wrapText } from "../src/inspect/output.js";

describe("--where", () => {
  const t = makeTrajectory(3, { reward: 0.5, finish_reason: "length", advantage: null });

  it("compares numbers as numbers and text exactly or by substring", () => {
    expect(parseWhere("reward<1").test(t)).toBe(true);
    expect(parseWhere("reward < 0.5").test(t)).toBe(false);
    expect(parseWhere("reward<=0.5").test(t)).toBe(true);
    expect(parseWhere("reward==0.5").test(t)).toBe(true);
    expect(parseWhere("turns>=2").test(t)).toBe(true);
    expect(parseWhere("finish=length").test(t)).toBe(true);
    expect(parseWhere("finish='length'").test(t)).toBe(true);
    expect(parseWhere("finish!=length").test(t)).toBe(false);
    expect(parseWhere("data_source~gsm").test(t)).toBe(true);
    expect(parseWhere("source=openai/gsm8k").test(t)).toBe(true); // alias
    expect(parseWhere("length=5").test(t)).toBe(true);
    expect(parseWhere("sampled=3").test(t)).toBe(true); // mask [1,1,0,0,1]
  });

  it("a missing value matches only =null", () => {
    expect(parseWhere("advantage<100").test(t)).toBe(false);
    expect(parseWhere("advantage>-100").test(t)).toBe(false);
    expect(parseWhere("advantage=null").test(t)).toBe(true);
    expect(parseWhere("advantage!=null").test(t)).toBe(false);
  });

  it("conditions AND together, with --grep over the trajectory's text", () => {
    const filter = makeFilter(["reward<1", "tool=calc"], "RESULT");
    expect(matches(filter, t)).toBe(true);
    expect(matches(makeFilter(["reward<1"], "not there"), t)).toBe(false);
    expect(matches(makeFilter(["reward<1", "turns>5"]), t)).toBe(false);
  });

  it.each([
    ["rewrd<1", "unknown field 'rewrd'"],
    ["reward<<1", "'<1' is not a number"],
    ["reward<", "'' is not a number"],
    ["reward~1", "'~' compares text"],
    ["finish>1", "'>' compares numbers"],
    ["just words", "not a FIELD OP VALUE expression"],
  ])("rejects %s naming the expression", (expression, message) => {
    expect(() => parseWhere(expression)).toThrow(UsageError);
    expect(() => parseWhere(expression)).toThrow(`--where '${expression}': ${message}`);
  });
});

describe("--sort with --limit keeps exactly the first rows of a full sort", () => {
  it("for any rewards and any limit", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: -3, max: 3 }), { maxLength: 60 }), fc.integer({ min: 1, max: 20 }), fc.boolean(), (rewards, limit, descending) => {
        const sort = parseSort(descending ? "-reward" : "reward");
        const collector = new RowCollector(sort, limit);
        rewards.forEach((reward, i) => collector.add(makeTrajectory(i, { reward }), i));
        const expected = rewards
          .map((reward, index) => ({ reward, index }))
          .sort((a, b) => (descending ? b.reward - a.reward : a.reward - b.reward) || a.index - b.index)
          .slice(0, limit)
          .map((r) => r.index);
        expect(collector.rows().map((r) => r.index)).toEqual(expected);
        expect(collector.matched).toBe(rewards.length);
      }),
    );
  });
});

describe("Reservoir", () => {
  it("gives exact nearest-rank percentiles below its capacity", () => {
    const r = new Reservoir(100);
    for (const x of [5, 1, 4, 2, 3]) r.add(x);
    expect(r.percentiles([0, 50, 95, 100])).toEqual([1, 3, 5, 5]);
  });

  it("stays within capacity and close to the true percentiles above it", () => {
    const r = new Reservoir(2000);
    for (let i = 0; i < 100_000; i++) r.add(i % 1000);
    const [p50, p95] = r.percentiles([50, 95]);
    expect(Math.abs(p50! - 500)).toBeLessThan(50);
    expect(Math.abs(p95! - 950)).toBeLessThan(30);
  });
});

describe("InspectStats", () => {
  it("counts per tool, per data source, empty masks and advantages", () => {
    const stats = new InspectStats();
    stats.add(makeTrajectory(0, { advantage: 1 }));
    stats.add(makeTrajectory(1, { data_source: "other", response_mask: [0, 0, 0, 0, 0], advantage: -1 }));
    stats.add(
      makeTrajectory(2, {
        calls: [
          { turn: 0, name: "calc", arguments: {}, response: "boom", latency_ms: 7, step_reward: null, error_kind: "exception", error: "boom" },
          { turn: 0, name: "", arguments: {}, response: "bad", latency_ms: 0, step_reward: null, error_kind: "parse:malformed_json", error: "bad" },
        ],
      }),
    );
    const s = stats.summary();
    expect(s.byDataSource.map((d) => [d.dataSource, d.count])).toEqual([["openai/gsm8k", 2], ["other", 1]]);
    expect(s.tools.find((t) => t.name === "calc")).toMatchObject({ attempts: 3, executed: 3, errors: 1, latencyMs: { p50: 3.5, p95: 7, max: 7 } });
    expect(s.tools.find((t) => t.name === "(unparsed)")).toMatchObject({ attempts: 1, parseErrors: 1, executed: 0 });
    expect(s.emptyMask).toEqual({ count: 1, ids: ["0:1"] });
    expect(s.advantage).toEqual({ count: 2, mean: 0, min: -1, max: 1 });
    expect(s.logprobGap).toBeNull();
  });
});

describe("show and tokens views", () => {
  it("maps tool calls to the assistant turn that made them", () => {
    const view = buildShowView(makeTrajectory(0));
    const kinds = view.conversation.map((turn) => turn.kind);
    expect(kinds).toEqual(["prompt", "assistant", "tool", "assistant"]);
    const assistant = view.conversation[1]!;
    expect(assistant.kind === "assistant" && assistant.calls.map((c) => c.arguments)).toEqual([{ x: 1 }]);
    const second = view.conversation[3]!;
    expect(second.kind === "assistant" && second.calls).toEqual([]);
  });

  it("strips chat markup for reading", () => {
    expect(stripTemplate("\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n")).toBe("Hello");
    expect(stripTemplate("<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>")).toBe("Hi");
  });

  it("labels every token with its segment and keeps the stored mask", () => {
    const t = makeTrajectory(0);
    const view = buildTokenView(t, (id) => `t${id}`);
    expect(view.tokens.map((r) => r.mask)).toEqual(t.response_mask);
    expect(view.tokens.map((r) => r.segment)).toEqual(["assistant turn 0", "assistant turn 0", "tool", "tool", "assistant turn 1"]);
    expect(view.tokens.map((r) => r.text)).toEqual(["t10", "t11", "t12", "t13", "t14"]);
    expect(view.sampled).toBe(3);
    expect(view.gap).toBeNull();
  });
});

describe("run-folder curves and alerts", () => {
  const curve = (values: number[], key = "k"): Curve => ({ name: key, key, points: values.map((v, i) => [i + 1, v]) });

  it("flags tool use falling toward zero, not a steady or noisy level", () => {
    expect(toolCollapseAlert(curve([1.5, 1.4, 1.6, 1.0, 0.3, 0.1, 0.0]))?.kind).toBe("tool_use_collapse");
    expect(toolCollapseAlert(curve([1.5, 1.4, 1.6, 1.5, 1.2, 1.4, 1.3]))).toBeNull();
    expect(toolCollapseAlert(curve([0.1, 0.05, 0.1, 0, 0, 0]))).toBeNull(); // never used tools much
    expect(toolCollapseAlert(curve([1, 0, 0]))).toBeNull(); // too few steps to tell
  });

  it("flags a spike against the median of the steps before it", () => {
    const alerts = spikeAlerts(curve([0.02, 0.03, 0.02, 0.02, 0.2, 0.03]), "clip_fraction_spike", { ratio: 3, floor: 0.05 });
    expect(alerts.map((a) => a.step)).toEqual([5]);
    expect(spikeAlerts(curve([0.02, 0.03, 0.02, 0.04, 0.05]), "clip_fraction_spike", { ratio: 3, floor: 0.05 })).toEqual([]);
    expect(spikeAlerts(curve([0.4]), "clip_fraction_spike", { ratio: 3, floor: 0.05, absolute: 0.3 }).map((a) => a.step)).toEqual([1]);
  });

  it("flags grad-norm spikes, not the first ordinary step after steps with no gradient", () => {
    const rows = (norms: number[]): MetricsRow[] => norms.map((g, i) => ({ step: i + 1, values: { "actor/grad_norm": g } }));
    const spikes = runAlerts(rows([0.3, 0.25, 0.3, 0.28, 2.0, 0.3]));
    expect(spikes.map((a) => `${a.kind}@${a.step}`)).toEqual(["grad_norm_spike@5"]);
    expect(spikes[0]!.message).toBe("grad norm spike at step 5: actor/grad_norm = 2 vs median 0.2900 of the steps before");
    expect(runAlerts(rows([0.3, 0.25, 0.3, 0.28, 1.2, 0.3]))).toEqual([]); // 4× the median: within the rule
    expect(runAlerts(rows([0, 0, 0, 0.001, 0.3]))).toEqual([]); // 300× a near-zero median, but only +0.3
  });

  it("reads the metrics.jsonl keys of docs/run-folder.md", () => {
    const rows: MetricsRow[] = [1, 2, 3, 4, 5].map((step) => ({
      step,
      values: { "actor/ppo_kl": step === 5 ? 0.5 : 0.001, "tool/calls_per_traj": 1 },
    }));
    expect(runAlerts(rows).map((a) => `${a.kind}@${a.step}`)).toEqual(["kl_spike@5"]);
  });

  it("draws sparklines and charts within the width", () => {
    expect(sparkline([0, 1, 2, 3, 4, 5, 6, 7], 8)).toBe("▁▂▃▄▅▆▇█");
    expect([...sparkline(Array.from({ length: 500 }, (_, i) => i), 40)]).toHaveLength(40);
    const drawn = chart(curve(Array.from({ length: 300 }, (_, i) => Math.sin(i / 20))), 60);
    for (const line of drawn.split("\n")) expect([...line].length).toBeLessThanOrEqual(60);
  });
});

describe("token text", () => {
  it("shows whitespace and control characters", () => {
    expect(visibleToken(" me")).toBe("␣me");
    expect(visibleToken(".\n")).toBe(".\\n");
    expect(visibleToken('{"')).toBe('{"');
    expect(visibleToken("a\\b\t\u0001")).toBe("a\\\\b\\t\\u0001");
  });
});

describe("wrapText", () => {
  it("wraps at spaces within the width and wraps coloured text like plain text", () => {
    const plain = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu";
    const wrapped = wrapText(plain, 20);
    for (const line of wrapped.split("\n")) expect(line.length).toBeLessThanOrEqual(20);
    expect(wrapped.replace(/\n/g, " ")).toBe(plain);
    const coloured = plain.replace(/(gamma|kappa)/g, "\u001b[33m$1\u001b[39m");
    expect(wrapText(coloured, 20).replace(/\u001b\[[0-9;]*m/g, "")).toBe(wrapped);
    expect(wrapText("x".repeat(25), 20)).toBe(`${"x".repeat(20)}\n${"x".repeat(5)}`);
  });
});

describe("weight versions (partial rollouts, async training)", () => {
  const look = { color: false, width: 200 } as unknown as Parameters<typeof renderShow>[1];

  it("show names the versions that sampled a trajectory continued across a weight update, and its staleness", () => {
    const continued = makeTrajectory(3, { step: 3 }); // spans: 1 (0–1), 2 (1–2), 2 (4–5)
    const text = renderShow(buildShowView(continued), look, { full: false, maxChars: 100 });
    expect(text).toContain("sampled by weights 1 (0–1), 2 (1–2), 2 (4–5) (continued across a weight update) · staleness 0–1 versions at step 3");
    const plain = renderShow(buildShowView(makeTrajectory(0, { step: 3 })), look, { full: false, maxChars: 100 });
    expect(plain).not.toContain("sampled by weights");
  });

  it("the summary counts sampled tokens per version, continued trajectories and token staleness", () => {
    const stats = new InspectStats();
    for (let i = 0; i < 4; i++) stats.add(makeTrajectory(i, { step: 3 }));
    const s = stats.summary();
    // Three trajectories of 3 "default" tokens; one of 1 token of version 1 and 2 of version 2.
    expect(s.weightVersions).toEqual({
      tokens: [{ version: "default", tokens: 9 }, { version: "1", tokens: 1 }, { version: "2", tokens: 2 }],
      continued: 1,
      // Trained from version 2: default (0) lags 2 on 9 tokens, version 1 lags 1 on 1 token, version 2 none.
      staleness: { mean: (9 * 2 + 1) / 12, max: 2 },
    });
    const text = renderSummary(s, look, "step 3");
    expect(text).toContain("weight versions: default 75% · 1 8% · 2 17% · 1 trajectory continued across a weight update · token staleness mean 1.58, max 2");
  });

  it("a run overview adds the staleness curves only when samples were ever stale", () => {
    const row = (step: number, values: Record<string, number>): MetricsRow => ({ step, values });
    const sync = [row(1, { "async/staleness_max": 0, "async/staleness_mean": 0 }), row(2, { "async/staleness_max": 0 })];
    expect(defaultCurves(sync)).not.toContain("staleness");
    const ahead = [row(1, { "async/staleness_max": 0 }), row(2, { "async/staleness_max": 1, "async/staleness_mean": 0.5 })];
    expect(defaultCurves(ahead)).toEqual(expect.arrayContaining(["staleness", "token_staleness", "dropped_stale", "partial_rollouts"]));
  });
});
