/**
 * undici's connection-pooling Agent, loaded on its own.
 *
 * Why: `import { Agent } from "undici"` evaluates the whole package (fetch, WebSocket, cookies, the mock agent,
 * caches): about 62 ms of CPU, against 20 ms for the Agent's own module, in a rollout's start-up that issue 20 holds
 * to 1 s. It is the same class the package's index exports. Should a later undici move the file, the package's
 * index is used instead.
 */
import { createRequire } from "node:module";
import type { Agent as AgentClass } from "undici";

const require = createRequire(import.meta.url);

function loadAgent(): typeof AgentClass {
  try {
    return require("undici/lib/dispatcher/agent.js") as typeof AgentClass;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "MODULE_NOT_FOUND") throw err;
    return (require("undici") as { Agent: typeof AgentClass }).Agent;
  }
}

export const Agent = loadAgent();
export type Agent = AgentClass;
