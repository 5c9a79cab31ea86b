/**
 * The records of a snapshot topic (docs/operations.md, "Snapshot and rebuild"). Pure.
 *
 * - A key record: Kafka key = the Redis state key (`rf:[t=<tenant>:]{<store>:<key id>}`), value = JSON
 *   `{"v":1,"p":..,"o":..,"e":..,"asOf":..,"value":<base64>|null,"pending":[[offset,<base64>],...]}`:
 *   the key's value, fence (partition, offset) and writer epoch as read from Redis, its pending entries
 *   (the raw `#<offset>` fields: an output or a dead letter not yet committed), and `asOf`: the
 *   partition's committed offset when the pass that read the key began. The state reflects every record
 *   of the key below `asOf` (and maybe more: its fence says how far).
 * - A marker record: Kafka key `marker:<input topic>:<partition>`, value JSON
 *   `{"v":1,"marker":true,"topic":..,"partition":..,"offset":..,"epoch":..,"keys":..,"at":..}`, written
 *   after every key record of a completed pass over the partition: each of the partition's keys with a
 *   record below `offset` has a key record in the topic.
 *
 * State keys start with `rf:`, markers with `marker:`, so the two never share a Kafka key; compaction
 * keeps the latest of each.
 */
import { RedfenceError } from '../errors/index.js';

export const SNAPSHOT_FORMAT = 1;

/** A key's stored state, as a snapshot carries it. */
export interface SnapshotKey {
  readonly redisKey: string;
  readonly partition: number;
  /** The fence: the offset of the last record applied to the key. */
  readonly offset: number;
  /** The epoch of its last writer. */
  readonly epoch: number;
  /** The committed offset of the partition when the pass that read the key began. */
  readonly asOf: number;
  /** null: no value (a tombstone kept for its fence). */
  readonly value: Buffer | null;
  /** The raw pending entries: offset and the field's bytes (`o`+output, `n`, or `d`+reason). */
  readonly pending: ReadonlyArray<readonly [number, Buffer]>;
}

export interface SnapshotMarker {
  readonly topic: string;
  readonly partition: number;
  /** The committed offset the pass is consistent with: replaying from it through the fence is exact. */
  readonly offset: number;
  /** The epoch of the instance that wrote the pass. */
  readonly epoch: number;
  /** Key records the pass wrote. */
  readonly keys: number;
  /** When the pass began (ms since the epoch). */
  readonly at: number;
}

export type SnapshotRecord =
  | { readonly kind: 'key'; readonly key: SnapshotKey }
  | { readonly kind: 'marker'; readonly marker: SnapshotMarker };

const bad = (why: string) => new RedfenceError('RF_STATE_CORRUPT', `snapshot record: ${why}`);
const isOffset = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= -1;

export function markerKey(topic: string, partition: number): string {
  return `marker:${topic}:${partition}`;
}

export function encodeKey(k: SnapshotKey): { key: string; value: Buffer } {
  return {
    key: k.redisKey,
    value: Buffer.from(
      JSON.stringify({
        v: SNAPSHOT_FORMAT,
        p: k.partition,
        o: k.offset,
        e: k.epoch,
        asOf: k.asOf,
        value: k.value === null ? null : k.value.toString('base64'),
        pending: k.pending.map(([off, raw]) => [off, raw.toString('base64')]),
      }),
    ),
  };
}

export function encodeMarker(m: SnapshotMarker): { key: string; value: Buffer } {
  return {
    key: markerKey(m.topic, m.partition),
    value: Buffer.from(
      JSON.stringify({
        v: SNAPSHOT_FORMAT,
        marker: true,
        topic: m.topic,
        partition: m.partition,
        offset: m.offset,
        epoch: m.epoch,
        keys: m.keys,
        at: m.at,
      }),
    ),
  };
}

/**
 * One record of the snapshot topic, or null for a tombstone (nothing to restore). Throws
 * RF_STATE_CORRUPT for a record that is not a snapshot record of this format.
 */
export function decodeRecord(key: Buffer | null, value: Buffer | null): SnapshotRecord | null {
  if (key === null) throw bad('a record without a key');
  if (value === null) return null;
  const k = key.toString('utf8');
  let j: Record<string, unknown>;
  try {
    j = JSON.parse(value.toString('utf8')) as Record<string, unknown>;
  } catch {
    throw bad(`the value of ${JSON.stringify(k.slice(0, 80))} is not JSON`);
  }
  if (typeof j !== 'object' || j === null || j.v !== SNAPSHOT_FORMAT)
    throw bad(
      `format ${String((j as { v?: unknown })?.v)} of ${JSON.stringify(k.slice(0, 80))} is not ${SNAPSHOT_FORMAT}`,
    );
  if (j.marker === true) {
    const { topic, partition, offset, epoch, keys, at } = j;
    if (
      typeof topic !== 'string' ||
      !isOffset(partition) ||
      partition < 0 ||
      !isOffset(offset) ||
      offset < 0 ||
      !isOffset(epoch) ||
      !isOffset(keys) ||
      typeof at !== 'number' ||
      k !== markerKey(topic, partition)
    )
      throw bad(`the marker ${JSON.stringify(k.slice(0, 80))} is malformed`);
    return { kind: 'marker', marker: { topic, partition, offset, epoch, keys, at } };
  }
  const { p, o, e, asOf, pending } = j;
  if (
    !k.startsWith('rf:') ||
    !isOffset(p) ||
    p < 0 ||
    !isOffset(o) ||
    !isOffset(e) ||
    !isOffset(asOf) ||
    !(j.value === null || typeof j.value === 'string') ||
    !Array.isArray(pending) ||
    !pending.every((x) => Array.isArray(x) && isOffset(x[0]) && typeof x[1] === 'string')
  )
    throw bad(`the key record ${JSON.stringify(k.slice(0, 80))} is malformed`);
  return {
    kind: 'key',
    key: {
      redisKey: k,
      partition: p,
      offset: o,
      epoch: e,
      asOf,
      value: j.value === null ? null : Buffer.from(j.value as string, 'base64'),
      pending: (pending as Array<[number, string]>).map(([off, raw]) => [off, Buffer.from(raw, 'base64')]),
    },
  };
}

/**
 * A state hash as HGETALL returns it, as a snapshot key (null: not a state hash of a fence, e.g. no
 * fence fields). `asOf` as for {@link SnapshotKey}.
 */
export function keyFromHash(
  redisKey: string,
  flat: Record<string, Buffer>,
  asOf: number,
): SnapshotKey | null {
  const p = flat.p;
  const o = flat.o;
  if (p === undefined || o === undefined) return null;
  const pending: Array<[number, Buffer]> = [];
  for (const [f, raw] of Object.entries(flat))
    if (f.startsWith('#')) {
      const off = Number(f.slice(1));
      if (Number.isSafeInteger(off)) pending.push([off, raw]);
    }
  pending.sort((a, b) => a[0] - b[0]);
  const partition = Number(p.toString());
  const offset = Number(o.toString());
  const epoch = Number(flat.e?.toString() ?? '0');
  if (!isOffset(partition) || !isOffset(offset) || !isOffset(epoch)) return null;
  return { redisKey, partition, offset, epoch, asOf, value: flat.v ?? null, pending };
}
