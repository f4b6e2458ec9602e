/**
 * The environment agentrl gives the Python processes that run torch (the training worker's ranks, the embedded
 * engine), unless the user set each variable.
 *
 * Threads: the CPU thread pools get one thread each. On a small machine the worker, the engine and the CLI share the
 * cores, and a pool of N spinning threads that loses one of them to another process waits a whole scheduler slice at
 * every op barrier. Measured on 2 cores with the CPU demo's SFT: 39 ms a step with 1 thread whether or not a second
 * run shares the machine; 67-224 ms a step with 2 threads beside a second run (and 2.7 s in the full test suite),
 * against 39 ms alone. torchrun itself defaults to 1 thread per rank when it starts several ranks. GPU work does not
 * use these pools.
 *
 * Memory: glibc's malloc keeps freed memory for the next step instead of handing it back to the kernel. By default it
 * serves blocks over a moving threshold (at most 32 MB) with mmap and trims the heap's free top, so every forward
 * pass over a large vocabulary (Qwen's 151,936 logits a token) maps, faults in and unmaps its activations again: a
 * third of the CPU time of the worker's training-math tests was the kernel's (sys 16.7 s of 38 s). With blocks up to
 * 32 MB from the heap, no trimming and a 256 MB pad: sys 5.6 s, 29 s in all, the same results. The cost is memory the
 * process keeps at its peak until it exits. GPU tensors do not come from malloc.
 */
const THREAD_VARIABLES = ["OMP_NUM_THREADS", "MKL_NUM_THREADS"] as const;

export const MALLOC_SETTINGS: Readonly<Record<string, string>> = {
  MALLOC_MMAP_THRESHOLD_: String(32 * 1024 * 1024),
  MALLOC_TRIM_THRESHOLD_: String(4 * 1024 * 1024 * 1024),
  MALLOC_TOP_PAD_: String(256 * 1024 * 1024),
};

export function torchThreadEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of THREAD_VARIABLES) if (!env[name]) out[name] = "1";
  return out;
}

/** The thread pools' settings and malloc's, each where the user has not set it. */
export function torchProcessEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const out = torchThreadEnv(env);
  // The user's malloc tuning is taken whole: one variable of theirs means they chose how malloc behaves.
  if (!Object.keys(MALLOC_SETTINGS).some((name) => env[name])) Object.assign(out, MALLOC_SETTINGS);
  return out;
}
