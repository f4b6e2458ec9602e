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
export { REPO_ROOT, WORKER_DIR, VENV_PYTHON, defaultPythonExecutable } from "../repo-paths.js";
export {
  JsonLinesHost,
  helloWithin,
  hostEnv,
  killGroup,
  type HostHello,
  type JsonLinesHostOptions,
} from "./json-lines-host.js";
export { PythonHostProcess, type Launch } from "./python-host-process.js";
export { loopbackNoProxy } from "./no-proxy.js";
export { RestartingHost } from "./restarting-host.js";
export { HostPool } from "./host-pool.js";
