/**
 * The environment agentrl gives the Python processes that run torch (the training worker's ranks, the embedded
 * engine). Unless the user set them, the CPU thread pools get one thread each: on a small machine the worker, the
 * engine and the CLI share the cores, and a pool of N spinning threads that loses one of them to another process
 * waits a whole scheduler slice at every op barrier. Measured on 2 cores with the CPU demo's SFT: 39 ms a step with
 * 1 thread whether or not a second run shares the machine; 67-224 ms a step with 2 threads beside a second run (and
 * 2.7 s in the full test suite), against 39 ms alone. torchrun itself defaults to 1 thread per rank when it starts
 * several ranks. GPU work does not use these pools.
 */
const THREAD_VARIABLES = ["OMP_NUM_THREADS", "MKL_NUM_THREADS"] as const;

export function torchThreadEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of THREAD_VARIABLES) if (!env[name]) out[name] = "1";
  return out;
}
