/**
 * A small seeded random source (SplitMix32-style), so a chaos run's workload and fault schedule are a
 * function of its seed alone. Separate streams (workload, faults) are derived from the seed and a label,
 * so changing one never shifts the other.
 */
export class Rng {
  #state: number;

  constructor(seed: number, stream = '') {
    let h = seed >>> 0;
    for (let i = 0; i < stream.length; i++) h = Math.imul(h ^ stream.charCodeAt(i), 0x9e3779b1) >>> 0;
    this.#state = h;
  }

  /** A uniform 32-bit unsigned integer. */
  nextU32(): number {
    this.#state = (this.#state + 0x9e3779b9) >>> 0;
    let z = this.#state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  }

  /** A uniform float in [0, 1). */
  next(): number {
    return this.nextU32() / 2 ** 32;
  }

  /** A uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** A uniform integer in [lo, hi]. */
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[this.int(items.length)] as T;
  }

  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [items[i], items[j]] = [items[j] as T, items[i] as T];
    }
    return items;
  }
}

/**
 * Zipf-like ranks over [0, n): rank r has weight 1 / (r + 1)^s. Sampled by binary search over the
 * cumulative weights, so a few keys are hot and a long tail is cold.
 */
export class Zipf {
  readonly #cumulative: Float64Array;

  constructor(n: number, s = 1.1) {
    this.#cumulative = new Float64Array(n);
    let sum = 0;
    for (let r = 0; r < n; r++) {
      sum += 1 / (r + 1) ** s;
      this.#cumulative[r] = sum;
    }
    for (let r = 0; r < n; r++) this.#cumulative[r] = (this.#cumulative[r] as number) / sum;
  }

  sample(rng: Rng): number {
    const u = rng.next();
    let lo = 0;
    let hi = this.#cumulative.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((this.#cumulative[mid] as number) < u) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/** A fresh seed when none is given: 31 bits, printable, reusable with --seed. */
export function randomSeed(): number {
  return Math.floor(Math.random() * 0x7fffffff);
}
