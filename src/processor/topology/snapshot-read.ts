/**
 * How a topology's snapshot pass reads Redis (snapshot.ts; docs/operations.md, "Snapshots of a
 * topology"): the fence keys of each fence space found by SCAN, each with the keys beside its fence hash
 * (time windows `:w:<store>:<start>`, session hashes `:s:<store>`, sliding-window hashes `:h:<store>`),
 * and one fence key's slot read in one MULTI (its fence hash, every hash beside it and their expiry), so
 * what is read is what Redis held at one instant. Partition keys (epochs, close indexes, partition
 * counts, the snapshot mark) share the SCAN pattern and are left out by their suffix.
 */
import { Cluster, type Redis } from 'ioredis';
import type { KeySpace } from '../../keys/index.js';
import { keyFromHash, type SlotKey, type SnapshotKey } from '../snapshot-codec.js';

/** A fence key's names: its fence hash and the suffixes of the keys beside it. */
export type SlotNames = Map<string, string[]>;

/** A fence space to scan: its keys and the topic whose partitions its fences hold. */
export interface SpaceToScan {
  readonly keys: KeySpace;
  readonly topic: string;
}

/** The suffixes of the keys a key call keeps beside a fence hash (src/store/keys.ts). */
const BESIDE = /^:(?:w:\d+:-?\d+|s:\d+|h:\d+)$/;

function masters(redis: Redis | Cluster): Redis[] {
  return redis instanceof Cluster ? redis.nodes('master') : [redis];
}

/**
 * Splits a key name of a space into its fence hash and suffix ('' for the fence hash itself); null
 * for a key that is neither (a partition's key). Key ids never hold a brace (src/keys: such keys are
 * stored by their hash), so the first `}` ends the hash tag.
 */
export function slotOf(name: string): { fence: string; suffix: string } | null {
  const close = name.indexOf('}');
  if (close < 0) return null;
  const fence = name.slice(0, close + 1);
  const suffix = name.slice(close + 1);
  if (suffix !== '' && !BESIDE.test(suffix)) return null;
  return { fence, suffix };
}

/**
 * Every fence key of `space` (only those in `only`, when given) with the suffixes SCAN found beside it.
 * The whole pass holds these names (a few tens of bytes per Redis key).
 */
export async function scanSlots(
  redis: Redis | Cluster,
  space: KeySpace,
  count: number,
  closed: () => boolean,
  only?: ReadonlySet<string>,
): Promise<SlotNames> {
  // `rf:[t=..:]{<store>[@<space>]:` then anything: the fence hashes and every key beside them
  const pattern = `${space.statePattern().slice(0, -2)}*`;
  const found: SlotNames = new Map();
  for (const node of masters(redis)) {
    let cursor = '0';
    do {
      if (closed()) return found;
      const [next, names] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', count);
      cursor = next;
      for (const name of names) {
        const s = slotOf(name);
        if (s === null || (only !== undefined && !only.has(s.fence))) continue;
        let list = found.get(s.fence);
        if (list === undefined) {
          list = [];
          found.set(s.fence, list);
        }
        if (s.suffix !== '') list.push(s.suffix);
      }
    } while (cursor !== '0');
  }
  return found;
}

const FENCE_FIELDS = new Set(['p', 'o', 'e', 'v']);

/**
 * One fence key's slot read in one MULTI: the fence hash whole and each key beside it with its expiry.
 * null: the fence hash holds no fence (not a fence hash, or gone). Keys gone since the SCAN (expired)
 * are left out, as they are from Redis.
 */
export async function readSlot(
  redis: Redis | Cluster,
  fence: string,
  suffixes: readonly string[],
  asOf: number,
): Promise<SnapshotKey | null> {
  const m = redis.multi();
  m.hgetallBuffer(fence);
  for (const suffix of suffixes) {
    m.hgetallBuffer(fence + suffix);
    m.pttl(fence + suffix);
  }
  const replies = (await m.exec()) ?? [];
  const bad = replies.find(([err]) => err !== null);
  if (bad) throw bad[0] as Error;
  const now = Date.now();
  const flat = (replies[0]?.[1] ?? {}) as Record<string, Buffer>;
  const base = keyFromHash(fence, flat, asOf);
  if (base === null) return null;
  const fields: Array<[string, Buffer]> = [];
  for (const [f, raw] of Object.entries(flat))
    if (!FENCE_FIELDS.has(f) && !f.startsWith('#')) fields.push([f, raw]);
  const slot: SlotKey[] = [];
  suffixes.forEach((suffix, i) => {
    const h = (replies[1 + 2 * i]?.[1] ?? {}) as Record<string, Buffer>;
    const ttl = Number(replies[2 + 2 * i]?.[1] ?? -2);
    const entries = Object.entries(h);
    if (entries.length === 0 || ttl === -2) return;
    slot.push({ suffix, expireAt: ttl < 0 ? -1 : now + ttl, fields: entries });
  });
  slot.sort((a, b) => (a.suffix < b.suffix ? -1 : a.suffix > b.suffix ? 1 : 0));
  return { ...base, fields, slot };
}
