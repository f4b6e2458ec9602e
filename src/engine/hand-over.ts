/**
 * Engine answers go to their callers together: every outcome settled in one turn of the event loop (while undici
 * reads the sockets that were ready) is handed over in that turn's check phase (setImmediate), in the order settled.
 *
 * Why: resolved at once, each /generate answer ran its trajectory's whole turn (JSON, tokens, tool calls, template,
 * the next request) in the middle of undici reading the sockets, one answer at a time. Handed over together, the
 * callers' continuations interleave at each of their awaits, so every trajectory does one stage of its turn before
 * any does the next, on caches still warm from the previous trajectory's same stage: the rollout client's CPU per turn
 * on distinct conversations fell by a fifth, its CPU over a bare HTTP loop by 28% (bench/rollout-overhead.mjs, seven
 * alternating pairs, docs/benchmarks.md). Handing over
 * each answer in a check-phase callback of its own (its continuations run to the end before the next answer's) did
 * not pay. The cost is at most one turn of the event loop of latency per answer.
 */
let settledThisTurn: (() => void)[] = [];

/** Calls `deliver(value)` in this turn's check phase, after every value handed over before it in the same turn. */
export function handOverTogether<T>(deliver: (value: T) => void, value: T): void {
  if (settledThisTurn.length === 0) setImmediate(handOverSettled);
  settledThisTurn.push(() => deliver(value));
}

function handOverSettled(): void {
  const batch = settledThisTurn;
  settledThisTurn = [];
  for (const handOver of batch) handOver();
}
