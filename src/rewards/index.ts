export { extractSolution, computeScore, scoreGsm8k, SOLUTION_CLIP_CHARS, type ExtractMethod, type Gsm8kScore } from "./gsm8k.js";
export {
  computeReward,
  loadRewardModule,
  hasBuiltinScorer,
  builtinRewardKwargsSchema,
  DEFAULT_REWARD_NAME,
  type BuiltinRewardKwargs,
  type LoadedRewardFunction,
  type RewardInput,
  type RewardFunction,
  type RewardRecord,
  type RewardResultObject,
} from "./reward.js";
export { scoreVault, vaultAnswer, vaultFormatCredit, VAULT_CALL_CREDIT, VAULT_MESSY_CALL_CREDIT, VAULT_LENGTH_SCALE, VAULT_FORMAT_STEP_CREDIT, VAULT_ANSWER_CREDIT, type VaultScore, type VaultScoreOptions } from "./vault.js";
export {
  PythonRewardPool,
  defaultRewardPython,
  defaultRewardWorkers,
  type PythonRewardOptions,
  type PythonRewardCall,
  type PythonRewardResult,
  type RewardRow,
} from "./python-reward.js";
export { overlongBufferSchema, overlongReward, type OverlongBuffer } from "./overlong.js";
