/** Supervision of the long-running children agentrl owns (the training worker, the inference servers). */
export {
  superviseProcess,
  describeExit,
  StartupFailure,
  type ProcessExit,
  type StartErrorClass,
  type SupervisedProcess,
  type SuperviseOptions,
} from "./supervisor.js";
export { GUARDIAN_SOURCE } from "./guardian.js";
