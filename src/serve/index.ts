/** Managed inference engines: the embedded engine, SGLang and the SGLang router. See docs/serve-and-doctor.md. */
export { startEngine, startRouter, startFleet, type StartFleetOptions, type ManagedFleet, defaultPython, freePort, clientUrl, type StartEngineOptions, type StartRouterOptions, type ManagedEngine } from "./start-engine.js";
export { startManagedProcess, type ManagedProcess, type ManagedProcessOptions, type ProcessExit } from "./managed-process.js";
export {
  sglangLaunchCommand,
  embeddedLaunchCommand,
  routerLaunchCommand,
  redactArgs,
  type EngineKind,
  type EngineLaunchOptions,
  type LaunchCommand,
} from "./launch-args.js";
export { EngineStartError } from "./errors.js";
export { GUARDIAN_SOURCE } from "./guardian.js";
