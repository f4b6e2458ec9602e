/**
 * Supervised inference servers (the embedded server, SGLang) and the SGLang router, for `agentrl serve` and for the
 * embedded server of train and rollout. See docs/serve-and-doctor.md.
 */
export {
  startInferenceServer,
  startRouter,
  freePort,
  clientUrl,
  type StartInferenceServerOptions,
  type StartRouterOptions,
  type InferenceServer,
} from "./inference-server.js";
export { startFleet, type StartFleetOptions, type ServerFleet } from "./fleet.js";
export { startServerProcess, type ServerProcess, type ServerProcessOptions } from "./server-process.js";
export {
  sglangLaunchCommand,
  embeddedLaunchCommand,
  loraServerFlags,
  routerLaunchCommand,
  redactArgs,
  type InferenceServerKind,
  type ServerLaunchOptions,
  type LoraServing,
  type LaunchCommand,
} from "./launch-args.js";
export { ServerStartError } from "./errors.js";
