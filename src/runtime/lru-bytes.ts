/**
 * A map bounded by bytes, least recently used out first: the store of owner-local state (the topology's
 * src/topology/run/owner-cache.ts and the processor's src/processor/owner-state.ts). Each entry is
 * counted as the caller says (its key's and values' lengths plus a fixed amount); an entry larger than
 * the whole bound is not kept. Ids are `<topic>/<partition>\0<key>`, so a partition's entries go
 * together ({@link LruBytes.dropPrefix}).
 *
 * @example
 * const lru = new LruBytes<Buffer>(16 * 1024 * 1024);
 * lru.set('orders/0\0c1', value, 64 + value.length);
 * lru.get('orders/0\0c1'); // the value, now the most recently used
 * lru.dropPrefix('orders/0\0'); // partition 0 revoked
 */
export class LruBytes<V> {
  readonly #entries = new Map<string, { value: V; bytes: number }>();
  #bytes = 0;

  constructor(readonly maxBytes: number) {}

  /** Entries held. */
  get size(): number {
    return this.#entries.size;
  }

  /** Bytes counted for the entries held, at most maxBytes. */
  get bytes(): number {
    return this.#bytes;
  }

  /** The entry's value, made the most recently used; undefined when not held. */
  get(id: string): V | undefined {
    const e = this.#entries.get(id);
    if (e === undefined) return undefined;
    this.#entries.delete(id);
    this.#entries.set(id, e);
    return e.value;
  }

  /** Its value without touching its place. */
  peek(id: string): V | undefined {
    return this.#entries.get(id)?.value;
  }

  /** Keeps `value` as the most recently used, counted as `bytes`; the least recently used go past the bound. */
  set(id: string, value: V, bytes: number): void {
    this.delete(id);
    if (bytes > this.maxBytes) return;
    this.#entries.set(id, { value, bytes });
    this.#bytes += bytes;
    for (const oldest of this.#entries.keys()) {
      if (this.#bytes <= this.maxBytes) break;
      this.delete(oldest);
    }
  }

  delete(id: string): void {
    const e = this.#entries.get(id);
    if (e === undefined) return;
    this.#entries.delete(id);
    this.#bytes -= e.bytes;
  }

  /** Drops every entry whose id starts with `prefix` (a partition's: `<topic>/<partition>\0`). */
  dropPrefix(prefix: string): void {
    for (const id of this.#entries.keys()) if (id.startsWith(prefix)) this.delete(id);
  }
}
