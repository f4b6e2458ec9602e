/**
 * A map for memoising that holds at most `maxEntries` and starts over when full: the chat layer's caches (renders,
 * encoded pieces, pre-tokenized words). A lookup is a plain Map lookup. An LRU map (lru-map.ts) reorders its entry on
 * every hit, a delete and an insert, and on the rollout's hot path, where most lookups hit, that reordering cost more
 * than what it saved; starting over costs one recomputation of each entry still in use.
 */
export class MemoMap<K, V> {
  private readonly entries = new Map<K, V>();

  constructor(private readonly maxEntries: number) {}

  get(key: K): V | undefined {
    return this.entries.get(key);
  }

  set(key: K, value: V): void {
    if (this.entries.size >= this.maxEntries && !this.entries.has(key)) this.entries.clear();
    this.entries.set(key, value);
  }

  get size(): number {
    return this.entries.size;
  }
}
