/**
 * Java-compatible murmur2, identical to `org.apache.kafka.common.utils.Utils.murmur2`,
 * which Kafka's default partitioner uses for keyed records.
 *
 * All arithmetic is 32-bit with Java's wrap-around semantics: `Math.imul` for
 * multiplication, `>>>` for Java's unsigned shift and `| 0` to return to int32.
 */

const SEED = 0x9747b28c;
const M = 0x5bd1e995;
const R = 24;

/** The signed 32-bit murmur2 hash of `data`, exactly as Kafka's Java client computes it. */
export function murmur2(data: Uint8Array): number {
  const length = data.length;
  let h = (SEED ^ length) | 0;
  const length4 = length >>> 2;

  for (let i = 0; i < length4; i++) {
    const i4 = i << 2;
    let k =
      (data[i4] as number) |
      ((data[i4 + 1] as number) << 8) |
      ((data[i4 + 2] as number) << 16) |
      ((data[i4 + 3] as number) << 24);
    k = Math.imul(k, M);
    k ^= k >>> R;
    k = Math.imul(k, M);
    h = Math.imul(h, M);
    h ^= k;
  }

  const tail = length4 << 2;
  // Java's switch falls through from case 3 to case 1; the same steps as ifs:
  const rest = length & 3;
  if (rest === 3) h ^= (data[tail + 2] as number) << 16;
  if (rest >= 2) h ^= (data[tail + 1] as number) << 8;
  if (rest >= 1) {
    h ^= data[tail] as number;
    h = Math.imul(h, M);
  }

  h ^= h >>> 13;
  h = Math.imul(h, M);
  h ^= h >>> 15;
  return h | 0;
}

/** Kafka's `Utils.toPositive`: clears the sign bit (not `Math.abs`, which overflows on MIN_VALUE). */
export function toPositive(n: number): number {
  return n & 0x7fffffff;
}
