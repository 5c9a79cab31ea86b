/**
 * The chaos verifier's check of the state in Redis (src/chaos/verifier.ts runs it), read with its own
 * client and its own reading of the hashes: each customer's hash `rf:{<store>:<customer>}` holds the
 * fold of all its valid orders applied once (`v`; none for a customer whose orders were all refused: a
 * refused order changes no state), its fence at its last valid or refused order (`p`, `o`: the fence
 * moves past a refused order), a writer epoch `e` no higher than its partition's epoch, no pending entry
 * past the fence; no state for anyone else. A cluster's keys are scanned master by master.
 */
import { Cluster, Redis } from 'ioredis';
import type { CustomerLedger, InputLedger, VerifyOptions, Violate } from './verify-ledger.js';

export interface StateCounts {
  stateKeys: number;
  pendingEntriesLeft: number;
  /** Applies beyond the valid orders, summed over the keys whose stored count is too high. */
  extraApplies: number;
  /** Valid orders missing from the stored counts, summed over the keys whose count is too low. */
  missingApplies: number;
}

type Hash = Record<string, Buffer>;

/** Every state hash of the store against the ledger, and every customer with valid orders has one. */
export async function checkState(
  o: VerifyOptions,
  ledger: InputLedger,
  violate: Violate,
): Promise<StateCounts> {
  const redis: Redis | Cluster = o.clusterPorts
    ? new Cluster(
        o.clusterPorts.map((port) => ({ host: '127.0.0.1', port })),
        { lazyConnect: true, redisOptions: { maxRetriesPerRequest: 3 } },
      )
    : new Redis(o.redisUrl ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 3, lazyConnect: true });
  const counts: StateCounts = { stateKeys: 0, pendingEntriesLeft: 0, extraApplies: 0, missingApplies: 0 };
  try {
    await redis.connect();
    const prefix = `rf:{${o.store}:`;
    const epochs = await readEpochs(redis, o, prefix);
    const stored = new Set<string>();
    // a cluster's keys are scanned master by master
    const scanned = redis instanceof Cluster ? redis.nodes('master') : [redis];
    for (const node of scanned) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
        cursor = next;
        for (const k of keys) {
          if (!k.endsWith('}')) continue; // epoch and pending-index keys
          counts.stateKeys++;
          const name = k.slice(prefix.length, -1);
          stored.add(name);
          const l = ledger.customers.get(name);
          const hash = await redis.hgetallBuffer(k);
          if (!l) {
            const v = hash.v?.toString('utf8');
            violate('state', `${name}: state ${v} stored, but it has no valid order`, 'double apply');
            continue;
          }
          checkHash(name, l, hash, epochs, counts, violate);
        }
      } while (cursor !== '0');
    }
    for (const [name, l] of ledger.customers)
      if (!stored.has(name)) {
        counts.missingApplies += l.offsets.length;
        violate(
          'state',
          `${name}: no state stored for ${l.offsets.length} orders (${l.refused.length} refused besides)`,
          l.offsets.length > 0 ? 'lost apply' : 'fence behind',
        );
      }
  } finally {
    redis.disconnect();
  }
  return counts;
}

/** Each input partition's epoch (0 when none is stored). */
async function readEpochs(
  redis: Redis | Cluster,
  o: VerifyOptions,
  prefix: string,
): Promise<Map<number, number>> {
  const epochs = new Map<number, number>();
  for (let p = 0; p < o.partitions; p++) {
    const e = await redis.get(`${prefix}${o.input}:${p}}:epoch`);
    epochs.set(p, e === null ? 0 : Number(e));
  }
  return epochs;
}

/** One customer's hash: value, fence, writer epoch, pending entries, in that order. */
function checkHash(
  name: string,
  l: CustomerLedger,
  hash: Hash,
  epochs: Map<number, number>,
  counts: StateCounts,
  violate: Violate,
): void {
  const field = (f: string) => hash[f]?.toString('utf8');
  checkValue(name, l, field('v'), counts, violate);
  checkFence(name, l, field('p'), field('o'), violate);
  checkEpoch(name, l, field('e'), epochs, violate);
  checkPending(name, hash, field('o'), counts, violate);
}

/**
 * The stored fold against all the customer's valid orders applied once, its refused orders not at all
 * (no value for a customer with refused orders only); a count off counts applies extra or missing.
 */
function checkValue(
  name: string,
  l: CustomerLedger,
  v: string | undefined,
  counts: StateCounts,
  violate: Violate,
): void {
  const n = l.offsets.length;
  if (n === 0 && v === undefined) return;
  const want = n === 0 ? 'no value (its orders were all refused)' : `{"total":${l.prefix[n]},"count":${n}}`;
  if (v === want) return;
  const count = Number(/"count":(-?\d+)/.exec(v ?? '')?.[1] ?? Number.NaN);
  const kind = count > n ? 'double apply' : count < n ? 'lost apply' : 'state differs';
  if (count > n) counts.extraApplies += count - n;
  if (count < n) counts.missingApplies += n - count;
  violate('state', `${name}: value ${v}, expected ${want}`, kind);
}

/** The fence at the customer's last order, valid or refused: its partition and offset. */
function checkFence(
  name: string,
  l: CustomerLedger,
  p: string | undefined,
  offset: string | undefined,
  violate: Violate,
): void {
  if (Number(p) !== l.partition) violate('state', `${name}: fence partition ${p}, expected ${l.partition}`);
  if (Number(offset) !== l.last)
    violate(
      'state',
      `${name}: fence offset ${offset}, expected ${l.last} (its last order${l.refused.at(-1) === l.last ? ', refused' : ''})`,
      Number(offset) < l.last ? 'fence behind' : 'other',
    );
}

/** The writer epoch: at least 1, no higher than its partition's epoch. */
function checkEpoch(
  name: string,
  l: CustomerLedger,
  field: string | undefined,
  epochs: Map<number, number>,
  violate: Violate,
): void {
  const e = Number(field);
  if (!(e >= 1 && e <= (epochs.get(l.partition) ?? 0)))
    violate(
      'state',
      `${name}: writer epoch ${field} vs partition epoch ${epochs.get(l.partition)}`,
      e > (epochs.get(l.partition) ?? 0) ? 'epoch behind' : 'other',
    );
}

/** Pending entries left in the hash (counted), none past the fence offset. */
function checkPending(
  name: string,
  hash: Hash,
  offset: string | undefined,
  counts: StateCounts,
  violate: Violate,
): void {
  for (const f of Object.keys(hash)) {
    if (!f.startsWith('#')) continue;
    counts.pendingEntriesLeft++;
    if (Number(f.slice(1)) > Number(offset))
      violate('state', `${name}: pending entry ${f} past the fence offset ${offset}`);
  }
}
