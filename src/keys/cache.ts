/**
 * A map of at most `max` entries, emptied when full: the hot path's per-key memo (Redis key names,
 * hash slots) without an LRU's bookkeeping per hit. A workload with more distinct keys than `max` pays
 * one rebuild of each name after a clear, never unbounded memory.
 */
export class BoundedCache<V> {
  readonly max: number;
  readonly #map = new Map<string, V>();

  constructor(max: number) {
    this.max = max;
  }

  get(key: string): V | undefined {
    return this.#map.get(key);
  }

  set(key: string, value: V): void {
    if (this.max <= 0) return;
    if (this.#map.size >= this.max) this.#map.clear();
    this.#map.set(key, value);
  }

  get size(): number {
    return this.#map.size;
  }
}
