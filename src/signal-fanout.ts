/**
 * Many short-lived listeners on one long-lived AbortSignal, at O(1) each. Node's EventTarget keeps a signal's
 * listeners in a list that addEventListener scans for duplicates and removeEventListener scans to unlink: with every
 * trajectory in flight listening on the run's signal, one trajectory's add and remove cost 1.2 µs at 64 in flight and
 * 13.6 µs at 4,096. A fan-out listens once and keeps its subscribers in a Set.
 */
const fanouts = new WeakMap<AbortSignal, Set<(reason: unknown) => void>>();

/**
 * Calls `listener` with the signal's reason when `signal` aborts (at once if it already has); returns the function
 * that unsubscribes it.
 */
export function onAbort(signal: AbortSignal, listener: (reason: unknown) => void): () => void {
  if (signal.aborted) {
    listener(signal.reason);
    return () => undefined;
  }
  let subscribers = fanouts.get(signal);
  if (subscribers === undefined) {
    const set = new Set<(reason: unknown) => void>();
    subscribers = set;
    fanouts.set(signal, set);
    signal.addEventListener(
      "abort",
      () => {
        fanouts.delete(signal);
        for (const subscriber of set) subscriber(signal.reason);
        set.clear();
      },
      { once: true },
    );
  }
  // Wrapped, so each subscription is its own entry, even for a listener subscribed twice.
  const subscriber = (reason: unknown) => listener(reason);
  const set = subscribers;
  set.add(subscriber);
  return () => {
    set.delete(subscriber);
  };
}
