/**
 * verl's Gsm8kTool (`calc_gsm8k_reward`): scores a submitted answer with the flexible GSM8K scorer and
 * answers `Current parsed answer='18' reward=1.0`. The step reward is 0.0 when the submission improves on the
 * instance's last reward and -0.05 otherwise; since the agent loop uses a fresh instance per call, that means
 * 0.0 for a correct answer and -0.05 for anything else.
 */
import { randomUUID } from "node:crypto";
import { scoreGsm8k } from "../rewards/gsm8k.js";
import { BaseTool } from "./base-tool.js";
import { pyNumberRepr, pyStr, pyStrRepr } from "./python-repr.js";
import type { ToolContext, ToolExecuteResult, ToolResponse } from "./types.js";

interface Gsm8kInstance {
  response: string;
  groundTruth: string | null;
  reward: number;
  /** Whether `reward` is verl's int 0 (nothing parsed), which prints as `0` instead of `0.0`. */
  rewardIsInt: boolean;
}

export const GSM8K_NON_IMPROVED_PENALTY = -0.05;

export class Gsm8kTool extends BaseTool {
  private readonly instances = new Map<string, Gsm8kInstance>();

  override async create(instanceId: string | undefined, kwargs: Record<string, unknown>): Promise<{ instanceId: string; response: ToolResponse }> {
    const id = instanceId ?? randomUUID();
    // verl: `ground_truth` keyword, else `create_kwargs["ground_truth"]` (the agent loop passes create_kwargs=...).
    let groundTruth = kwargs["ground_truth"];
    if (groundTruth === undefined || groundTruth === null) {
      const createKwargs = kwargs["create_kwargs"];
      if (createKwargs && typeof createKwargs === "object") groundTruth = (createKwargs as Record<string, unknown>)["ground_truth"];
    }
    this.instances.set(id, {
      response: "",
      // Python compares the extracted string with the ground truth as given: a non-string never matches.
      groundTruth: typeof groundTruth === "string" ? groundTruth : null,
      reward: 0.0,
      rewardIsInt: false,
    });
    return { instanceId: id, response: {} };
  }

  override async execute(instanceId: string, parameters: Record<string, unknown>, _ctx: ToolContext): Promise<ToolExecuteResult> {
    const instance = this.requireInstance(instanceId);
    const raw = Object.hasOwn(parameters, "answer") ? parameters["answer"] : "";
    const answer = pyStr(raw);
    instance.response = answer.startsWith("#### ") ? answer : "#### " + answer;
    const { score, nothingExtracted } = this.scoreInstance(instance);
    const stepReward = score > instance.reward ? 0.0 : GSM8K_NON_IMPROVED_PENALTY;
    instance.reward = score;
    instance.rewardIsInt = nothingExtracted;
    const text = `Current parsed answer=${pyStrRepr(answer)} reward=${pyNumberRepr(score, nothingExtracted)}`;
    return { response: { text }, reward: stepReward, metrics: {} };
  }

  override async calcReward(instanceId: string): Promise<number> {
    return this.scoreInstance(this.requireInstance(instanceId)).score;
  }

  override async release(instanceId: string): Promise<void> {
    this.instances.delete(instanceId);
  }

  private scoreInstance(instance: Gsm8kInstance) {
    // A missing or non-string ground truth never equals an extracted answer (only [-0-9.,] characters), as in verl.
    return scoreGsm8k(instance.response, instance.groundTruth ?? "\u0000no ground truth", "flexible", 0.0, 1.0);
  }

  private requireInstance(instanceId: string): Gsm8kInstance {
    const instance = this.instances.get(instanceId);
    // verl raises KeyError here; the runner turns it into "Error when executing tool: '<id>'".
    if (!instance) throw new Error(pyStrRepr(instanceId));
    return instance;
  }
}
