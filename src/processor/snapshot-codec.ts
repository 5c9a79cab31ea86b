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
 * A topology's key record (src/processor/topology/snapshot.ts) has the same fence fields and `pending`,
 * and carries the rest of its fence key's slot instead of `value`: `fields` (the fence hash's other
 * fields: `v:<store>`, `g`, as `[name, <base64>]`) and `slot` (the keys beside the fence hash: time
 * windows `:w:`, session `:s:` and sliding `:h:` hashes, as `[suffix, expireAt (-1: none),
 * [[field, <base64>], ...]]`), all read in one MULTI. Its markers carry `streamTime`: the commit metadata
 * (the partition's stream time, src/processor/topology/stream-time.ts) at `offset`. A third kind, the
 * close index of an emit-final store (Kafka key `close:<topic>:<partition>:<store>:<chunk>`, value
 * `{"v":1,"close":true,"topic":..,"partition":..,"store":..,"members":[[score,<base64>],...]}`), holds
 * the partition's index of open windows as the pass found it.
 *
 * State keys start with `rf:`, markers with `marker:`, close indexes with `close:`, so no two kinds share
 * a Kafka key; compaction keeps the latest of each.
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
  /** A topology's: the fence hash's fields other than the fence, `v` and the pending entries. */
  readonly fields?: ReadonlyArray<readonly [string, Buffer]>;
  /** A topology's: the keys beside the fence hash in its slot (windows, session and sliding hashes). */
  readonly slot?: readonly SlotKey[];
}

/** A hash beside a fence hash, in its slot: `<fence hash><suffix>`. */
export interface SlotKey {
  /** `:w:<store>:<start>`, `:s:<store>` or `:h:<store>`. */
  readonly suffix: string;
  /** When it expires (ms since the epoch), -1: never. */
  readonly expireAt: number;
  readonly fields: ReadonlyArray<readonly [string, Buffer]>;
}

/** Part of a partition's close index of an emit-final store (src/store/close-index.ts), as a pass read it. */
export interface SnapshotCloseIndex {
  readonly topic: string;
  readonly partition: number;
  readonly store: number;
  /** Parts of one index have their own Kafka keys (an index may be larger than a record). */
  readonly chunk: number;
  readonly members: ReadonlyArray<readonly [number, Buffer]>;
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
  /** A topology's: the commit metadata (its stream time) at `offset`; '' none yet. */
  readonly streamTime?: string;
}

export type SnapshotRecord =
  | { readonly kind: 'key'; readonly key: SnapshotKey }
  | { readonly kind: 'marker'; readonly marker: SnapshotMarker }
  | { readonly kind: 'close'; readonly close: SnapshotCloseIndex };

const bad = (why: string) => new RedfenceError('RF_STATE_CORRUPT', `snapshot record: ${why}`);
const isOffset = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= -1;

export function markerKey(topic: string, partition: number): string {
  return `marker:${topic}:${partition}`;
}

export function closeKey(c: Pick<SnapshotCloseIndex, 'topic' | 'partition' | 'store' | 'chunk'>): string {
  return `close:${c.topic}:${c.partition}:${c.store}:${c.chunk}`;
}

const b64 = (fields: ReadonlyArray<readonly [string | number, Buffer]>) =>
  fields.map(([f, raw]) => [f, raw.toString('base64')]);

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
        pending: b64(k.pending),
        ...(k.fields === undefined ? {} : { fields: b64(k.fields) }),
        ...(k.slot === undefined ? {} : { slot: k.slot.map((s) => [s.suffix, s.expireAt, b64(s.fields)]) }),
      }),
    ),
  };
}

export function encodeClose(c: SnapshotCloseIndex): { key: string; value: Buffer } {
  return {
    key: closeKey(c),
    value: Buffer.from(
      JSON.stringify({
        v: SNAPSHOT_FORMAT,
        close: true,
        topic: c.topic,
        partition: c.partition,
        store: c.store,
        chunk: c.chunk,
        members: b64(c.members),
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
        ...(m.streamTime === undefined ? {} : { streamTime: m.streamTime }),
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
      !(j.streamTime === undefined || typeof j.streamTime === 'string') ||
      k !== markerKey(topic, partition)
    )
      throw bad(`the marker ${JSON.stringify(k.slice(0, 80))} is malformed`);
    const marker = { topic, partition, offset, epoch, keys, at };
    return {
      kind: 'marker',
      marker: typeof j.streamTime === 'string' ? { ...marker, streamTime: j.streamTime } : marker,
    };
  }
  if (j.close === true) return { kind: 'close', close: decodeClose(k, j) };
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
    !pending.every((x) => Array.isArray(x) && isOffset(x[0]) && typeof x[1] === 'string') ||
    !(j.fields === undefined || isFields(j.fields)) ||
    !(j.slot === undefined || (Array.isArray(j.slot) && j.slot.every(isSlot)))
  )
    throw bad(`the key record ${JSON.stringify(k.slice(0, 80))} is malformed`);
  const stored: SnapshotKey = {
    redisKey: k,
    partition: p,
    offset: o,
    epoch: e,
    asOf,
    value: j.value === null ? null : Buffer.from(j.value as string, 'base64'),
    pending: (pending as Array<[number, string]>).map(([off, raw]) => [off, Buffer.from(raw, 'base64')]),
  };
  if (j.fields === undefined && j.slot === undefined) return { kind: 'key', key: stored };
  return {
    kind: 'key',
    key: {
      ...stored,
      ...(j.fields === undefined ? {} : { fields: unb64(j.fields as Array<[string, string]>) }),
      ...(j.slot === undefined
        ? {}
        : {
            slot: (j.slot as Array<[string, number, Array<[string, string]>]>).map(
              ([suffix, expireAt, f]) => ({
                suffix,
                expireAt,
                fields: unb64(f),
              }),
            ),
          }),
    },
  };
}

const unb64 = <F>(fields: ReadonlyArray<readonly [F, string]>): Array<[F, Buffer]> =>
  fields.map(([f, raw]) => [f, Buffer.from(raw, 'base64')]);

function isFields(v: unknown): v is Array<[string, string]> {
  return (
    Array.isArray(v) &&
    v.every((x) => Array.isArray(x) && x.length === 2 && typeof x[0] === 'string' && typeof x[1] === 'string')
  );
}

function isSlot(v: unknown): boolean {
  return (
    Array.isArray(v) &&
    v.length === 3 &&
    typeof v[0] === 'string' &&
    v[0].startsWith(':') &&
    Number.isSafeInteger(v[1]) &&
    v[1] >= -1 &&
    isFields(v[2])
  );
}

function decodeClose(k: string, j: Record<string, unknown>): SnapshotCloseIndex {
  const { topic, partition, store, chunk, members } = j;
  if (
    typeof topic !== 'string' ||
    !isOffset(partition) ||
    partition < 0 ||
    !Number.isSafeInteger(store) ||
    !isOffset(chunk) ||
    chunk < 0 ||
    !Array.isArray(members) ||
    !members.every(
      (x) => Array.isArray(x) && x.length === 2 && Number.isFinite(x[0]) && typeof x[1] === 'string',
    ) ||
    k !== closeKey({ topic, partition, store: store as number, chunk })
  )
    throw bad(`the close index ${JSON.stringify(k.slice(0, 80))} is malformed`);
  return {
    topic,
    partition,
    store: store as number,
    chunk,
    members: unb64(members as Array<[number, string]>),
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
