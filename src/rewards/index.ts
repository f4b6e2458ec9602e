export { extractSolution, computeScore, scoreGsm8k, SOLUTION_CLIP_CHARS, type ExtractMethod, type Gsm8kScore } from "./gsm8k.js";
export {
  computeReward,
  loadRewardModule,
  hasBuiltinScorer,
  type RewardInput,
  type RewardFunction,
  type RewardRecord,
  type RewardResultObject,
} from "./reward.js";
