/**
 * The KEYS of a key call past its fence hash, as the codec (codec.ts) finds them: each window key, window
 * hash and session hash once, by first use.
 */
import type { StoreKeys } from './keys.js';

/** Windows of one call found by a scan up to this many; past it by a Map. */
const SCAN = 16;
const NONE: string[] = [];

/**
 * A call's KEYS after its fence hash: each window key, window hash and session hash once, by first use;
 * a key's index counts from the call's fence hash as 1 (KEYS of a keyCallMany hold several calls). One
 * instance, reset per call (the encoding is synchronous): a call has few windows, so they are found by a
 * scan from the newest (a window's value and time effects follow each other), not a Map per call.
 */
export class Slots {
  #names: StoreKeys | undefined;
  #fence = '';
  #keys: string[] = NONE;
  #base = 0;
  readonly #wStore: number[] = [];
  readonly #wStart: number[] = [];
  readonly #wAt: number[] = [];
  #wN = 0;
  #wMap: Map<string, number> | undefined;
  /** Window hashes (kind 0) and session hashes (kind 1): per store, its index. */
  readonly #oKind: number[] = [];
  readonly #oStore: number[] = [];
  readonly #oAt: number[] = [];
  #oN = 0;

  /** Starts a call: its fence hash is `keys[base]`, its other keys are appended to `keys`. */
  reset(names: StoreKeys, fence: string, keys: string[], base: number): void {
    this.#names = names;
    this.#fence = fence;
    this.#keys = keys;
    this.#base = base;
    this.#wN = 0;
    this.#wMap = undefined;
    this.#oN = 0;
  }

  /** Ends a call: the keys list and names are not held past it. */
  release(): void {
    this.#names = undefined;
    this.#keys = NONE;
  }

  #add(name: string): number {
    this.#keys.push(name);
    return this.#keys.length - this.#base;
  }

  window(store: number, start: number): number {
    const map = this.#wMap;
    if (map !== undefined) {
      const id = `${store}:${start}`;
      let at = map.get(id);
      if (at === undefined) {
        at = this.#add((this.#names as StoreKeys).window(this.#fence, store, start));
        map.set(id, at);
      }
      return at;
    }
    for (let i = this.#wN - 1; i >= 0; i--)
      if (this.#wStart[i] === start && this.#wStore[i] === store) return this.#wAt[i] as number;
    const at = this.#add((this.#names as StoreKeys).window(this.#fence, store, start));
    const n = this.#wN;
    this.#wStore[n] = store;
    this.#wStart[n] = start;
    this.#wAt[n] = at;
    this.#wN = n + 1;
    if (n + 1 > SCAN) {
      const m = new Map<string, number>();
      for (let i = 0; i <= n; i++) m.set(`${this.#wStore[i]}:${this.#wStart[i]}`, this.#wAt[i] as number);
      this.#wMap = m;
    }
    return at;
  }

  #other(kind: number, store: number): number {
    for (let i = 0; i < this.#oN; i++)
      if (this.#oKind[i] === kind && this.#oStore[i] === store) return this.#oAt[i] as number;
    const names = this.#names as StoreKeys;
    const at = this.#add(
      kind === 0 ? names.windowHash(this.#fence, store) : names.session(this.#fence, store),
    );
    const n = this.#oN;
    this.#oKind[n] = kind;
    this.#oStore[n] = store;
    this.#oAt[n] = at;
    this.#oN = n + 1;
    return at;
  }

  hash(store: number): number {
    return this.#other(0, store);
  }

  session(store: number): number {
    return this.#other(1, store);
  }
}
