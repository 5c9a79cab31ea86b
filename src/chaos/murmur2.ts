/**
 * The verifier's own copy of Kafka's murmur2 (the Java client's `Utils.murmur2`, seed 0x9747b28c) and
 * its default partitioner (`toPositive(murmur2(keyBytes)) % partitions`). Written independently of
 * src/partitioner so that a bug there cannot hide itself from the chaos verifier.
 */
export function kafkaMurmur2(data: Uint8Array): number {
  const length = data.length;
  const m = 0x5bd1e995;
  let h = (0x9747b28c ^ length) | 0;
  const whole = length & ~3;
  for (let i = 0; i < whole; i += 4) {
    let k =
      ((data[i] as number) & 0xff) |
      (((data[i + 1] as number) & 0xff) << 8) |
      (((data[i + 2] as number) & 0xff) << 16) |
      (((data[i + 3] as number) & 0xff) << 24);
    k = Math.imul(k, m);
    k ^= k >>> 24;
    k = Math.imul(k, m);
    h = Math.imul(h, m);
    h ^= k;
  }
  const rest = length & 3;
  if (rest === 3) h ^= ((data[whole + 2] as number) & 0xff) << 16;
  if (rest >= 2) h ^= ((data[whole + 1] as number) & 0xff) << 8;
  if (rest >= 1) {
    h ^= (data[whole] as number) & 0xff;
    h = Math.imul(h, m);
  }
  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h | 0;
}

/** The partition Kafka's default partitioner gives a non-null key. */
export function kafkaPartition(key: string | Uint8Array, partitions: number): number {
  const bytes = typeof key === 'string' ? Buffer.from(key, 'utf8') : key;
  return (kafkaMurmur2(bytes) & 0x7fffffff) % partitions;
}
