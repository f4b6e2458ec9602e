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
export {
  JsonLinesHost,
  defaultPythonExecutable,
  helloWithin,
  hostEnv,
  killGroup,
  REPO_ROOT,
  WORKER_DIR,
  type HostHello,
  type JsonLinesHostOptions,
} from "./json-lines-host.js";
export { PythonHostProcess, type Launch } from "./python-host-process.js";
