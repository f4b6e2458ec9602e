/**
 * `items.map(fn)` as a list V8 always stores packed. The builtin map's result is packed while its caller runs
 * unoptimized and holey once the optimizing compiler has inlined the map (it allocates the whole result before filling
 * it), so code that reads such lists sees two array maps, one per tier of the code that made them, and is
 * deoptimized whenever the other one turns up. On a hot path that was a recompile of the reader in every rollout
 * (bench/jit-churn.mjs: the tool turn's observations, the gateway's request messages and history keys).
 */
export function mapPacked<T, U>(items: readonly T[], fn: (item: T, index: number) => U): U[] {
  const out: U[] = [];
  for (let i = 0; i < items.length; i++) out.push(fn(items[i]!, i));
  return out;
}
