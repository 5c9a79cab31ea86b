/**
 * (Over 400 lines on purpose: the six checks share one ledger of the input, and split across files they
 * would pass it around for no reader's benefit.)
 *
 * The chaos verifier. It shares no code with the processing path (nothing from src/processor, src/fence,
 * src/definition, src/keys, src/partitioner, src/kafka): its own murmur2, its own reading of Kafka and of the
 * Redis hashes, its own model of the customer-totals processor (src/chaos/customer-totals.ts): a
 * customer's state after n valid orders is `{"total":<sum of their amounts>,"count":n}`, in offset order
 * on the key's partition.
 *
 * Checks:
 * - input: classified record by record (null key; key not on its murmur2 partition; value not JSON or
 *   amount not an integer; else valid) and, when given, matched against what the workload produced;
 * - outputs (read_committed in exactly-once mode, read_uncommitted in at-least-once): each is exactly the
 *   bytes `{"total":T,"count":C}` of its customer after its first C valid orders; every valid order has
 *   one (its count C), exactly one in exactly-once mode;
 * - state in Redis: each customer's hash `rf:{<store>:<customer>}` holds the fold of all its valid
 *   orders applied once (`v`), its fence at its last valid order (`p`, `o`), a writer epoch `e` no
 *   higher than its partition's epoch, no pending entry past the fence; no state for anyone else;
 * - dead letters (`<input>.DLT`): each poison record has one (exactly one in exactly-once mode) with the
 *   right `redfence-reason`, its original topic/partition/offset headers and its key and value bytes;
 *   no valid record is dead-lettered (no record both dead-lettered and applied);
 * - offsets: the group's committed offsets equal the input's end offsets;
 * - verdicts (when scraped): no REBASE, and no more APPLY than valid records.
 */
import { Cluster, Redis } from 'ioredis';
import { type ConnectionConfig, type Isolation, readTopic } from './kafka.js';
import { kafkaPartition } from './murmur2.js';

export type ChaosMode = 'exactly-once' | 'at-least-once';

export interface VerifyOptions {
  brokers: string[];
  /** librdkafka properties of the harness's clients (security). */
  kafkaConfig?: ConnectionConfig;
  /** The state's Redis: a standalone URL, or (instead) the ports of a Redis Cluster's nodes. */
  redisUrl?: string;
  clusterPorts?: number[];
  mode: ChaosMode;
  input: string;
  output: string;
  deadLetter: string;
  group: string;
  store: string;
  partitions: number;
  /** What the workload produced, by kind ('valid', 'large', poison kinds), to match the input against. */
  produced?: Map<string, number>;
  /** Verdict counts scraped from the instances (a lower bound when instances died between scrapes). */
  verdicts?: Map<string, number>;
  /** Reading a topic gives up after this long. Default 300 s. */
  readTimeoutMs?: number;
}

export interface Violation {
  check: 'input' | 'output' | 'state' | 'dead-letter' | 'offsets' | 'verdicts';
  message: string;
}

export interface VerifyResult {
  inputRecords: number;
  validRecords: number;
  poisonRecords: number;
  poisonByReason: Map<string, number>;
  customers: number;
  outputRecords: number;
  duplicateOutputs: number;
  deadLetters: number;
  duplicateDeadLetters: number;
  stateKeys: number;
  pendingEntriesLeft: number;
  committed: number;
  endOffsets: number;
  violations: Violation[];
  /** Violations per check, including those not listed (the list keeps the first 20 of each). */
  violationCounts: Map<string, number>;
  /** Violations by what they mean (KINDS), each counted once per record or key it concerns. */
  kinds: Map<ViolationKind, number>;
  /** Applies beyond the valid orders, summed over the keys whose stored count is too high. */
  extraApplies: number;
  /** Valid orders missing from the stored counts, summed over the keys whose count is too low. */
  missingApplies: number;
}

/**
 * What a violation means, apart from where it was found: an order applied twice or not at all (the
 * stored count above or below the orders), an order with no output, an output whose bytes are not its
 * customer's fold (it was computed on a state that had lost or doubled an order), an order output twice
 * under read_committed, a fence behind the key's last order (it moved back and the order after it was
 * never applied again), a writer epoch above its partition's epoch (the partition epoch moved back).
 */
export const KINDS = [
  'double apply',
  'lost apply',
  'state differs',
  'lost output',
  'wrong output',
  'duplicate output',
  'fence behind',
  'epoch behind',
  'other',
] as const;
export type ViolationKind = (typeof KINDS)[number];

const MAX_LISTED = 20;

interface CustomerLedger {
  partition: number;
  offsets: number[];
  /** prefix[c] = total after the first c orders. */
  prefix: number[];
  /** How many times each count 1..n was output. */
  seen: Uint16Array;
}

function classify(
  key: Buffer | null,
  value: Buffer | null,
  partition: number,
  partitions: number,
): { reason: string } | { amount: number } {
  if (key === null) return { reason: 'null-key' };
  if (kafkaPartition(key, partitions) !== partition) return { reason: 'wrong-partition' };
  let order: unknown;
  try {
    order = JSON.parse(value === null ? '' : value.toString('utf8'));
  } catch {
    return { reason: 'undecodable' };
  }
  const amount = (order as { amount?: unknown } | null)?.amount;
  if (order === null || typeof amount !== 'number' || !Number.isInteger(amount))
    return { reason: 'undecodable' };
  return { amount };
}

function be(buf: Buffer | undefined, width: 4 | 8): number | undefined {
  if (!buf || buf.length !== width) return undefined;
  return width === 4 ? buf.readInt32BE(0) : Number(buf.readBigInt64BE(0));
}

export async function verify(o: VerifyOptions): Promise<VerifyResult> {
  const violations: Violation[] = [];
  const violationCounts = new Map<string, number>();
  const kinds = new Map<ViolationKind, number>();
  let extraApplies = 0;
  let missingApplies = 0;
  const violate = (check: Violation['check'], message: string, kind: ViolationKind = 'other'): void => {
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    const n = (violationCounts.get(check) ?? 0) + 1;
    violationCounts.set(check, n);
    if (n <= MAX_LISTED) violations.push({ check, message });
  };
  const timeout = o.readTimeoutMs ?? 300_000;
  const isolation: Isolation = o.mode === 'exactly-once' ? 'read_committed' : 'read_uncommitted';

  // 1. The input, classified on its own terms.
  const customers = new Map<string, CustomerLedger>();
  const poison = new Map<string, { reason: string; key: Buffer | null; value: Buffer | null; dl: number }>();
  const poisonByReason = new Map<string, number>();
  const byKind = { valid: 0, large: 0 };
  let inputRecords = 0;
  const input = await readTopic(
    o.brokers,
    o.input,
    'read_uncommitted',
    (m) => {
      inputRecords++;
      const c = classify(m.key, m.value, m.partition, o.partitions);
      if ('reason' in c) {
        poison.set(`${m.partition}/${m.offset}`, {
          reason: c.reason,
          key: m.key,
          value: m.value && m.value.length <= 4096 ? m.value : null,
          dl: 0,
        });
        poisonByReason.set(c.reason, (poisonByReason.get(c.reason) ?? 0) + 1);
        return;
      }
      if ((m.value?.length ?? 0) > 100_000) byKind.large++;
      else byKind.valid++;
      const name = (m.key as Buffer).toString('utf8');
      let l = customers.get(name);
      if (!l) {
        l = { partition: m.partition, offsets: [], prefix: [0], seen: new Uint16Array(0) };
        customers.set(name, l);
      }
      l.offsets.push(m.offset);
      l.prefix.push((l.prefix.at(-1) as number) + c.amount);
    },
    timeout,
    o.kafkaConfig,
  );
  for (const [name, l] of customers) {
    l.seen = new Uint16Array(l.offsets.length + 1);
    for (let i = 1; i < l.offsets.length; i++)
      if ((l.offsets[i] as number) <= (l.offsets[i - 1] as number))
        violate('input', `${name}: offsets not increasing`);
  }
  const validRecords = byKind.valid + byKind.large;
  if (o.produced) {
    const want = (k: string) => o.produced?.get(k) ?? 0;
    const wantUndecodable = want('not-json') + want('bad-amount') + want('null-value');
    const checks: Array<[string, number, number]> = [
      ['valid orders', byKind.valid, want('valid')],
      ['large valid orders', byKind.large, want('large')],
      ['undecodable poison', poisonByReason.get('undecodable') ?? 0, wantUndecodable],
      ['null-key poison', poisonByReason.get('null-key') ?? 0, want('null-key')],
      ['wrong-partition poison', poisonByReason.get('wrong-partition') ?? 0, want('wrong-partition')],
    ];
    for (const [what, got, wanted] of checks)
      if (got !== wanted) violate('input', `${what}: ${got} in the input topic, ${wanted} produced`);
  }

  // 2. Outputs.
  let outputRecords = 0;
  let duplicateOutputs = 0;
  await readTopic(
    o.brokers,
    o.output,
    isolation,
    (m) => {
      outputRecords++;
      const name = m.key?.toString('utf8') ?? '<null>';
      const l = customers.get(name);
      const text = m.value?.toString('utf8') ?? '<null>';
      const where = `output ${m.partition}/${m.offset}`;
      if (!l)
        return violate('output', `${where}: ${text} for ${name}, who has no valid order`, 'wrong output');
      const count = Number(/"count":(-?\d+)/.exec(text)?.[1] ?? Number.NaN);
      if (!Number.isInteger(count) || count < 1 || count > l.offsets.length)
        return violate(
          'output',
          `${where}: ${name} ${text}: count outside 1..${l.offsets.length}`,
          'wrong output',
        );
      const want = `{"total":${l.prefix[count]},"count":${count}}`;
      if (text !== want) violate('output', `${where}: ${name} ${text}, expected ${want}`, 'wrong output');
      const seen = l.seen[count] as number;
      if (seen >= 1) duplicateOutputs++;
      l.seen[count] = Math.min(65535, seen + 1);
    },
    timeout,
    o.kafkaConfig,
  );
  for (const [name, l] of customers) {
    for (let c = 1; c <= l.offsets.length; c++) {
      const n = l.seen[c] as number;
      if (n === 0)
        violate(
          'output',
          `${name}: no output for order ${c} of ${l.offsets.length} (offset ${l.offsets[c - 1]})`,
          'lost output',
        );
      else if (n > 1 && o.mode === 'exactly-once')
        violate('output', `${name}: order ${c} output ${n} times under read_committed`, 'duplicate output');
    }
  }

  // 3. Dead letters.
  let deadLetters = 0;
  let duplicateDeadLetters = 0;
  await readTopic(
    o.brokers,
    o.deadLetter,
    isolation,
    (m) => {
      deadLetters++;
      const h = (name: string) => m.headers.get(name)?.at(-1);
      const topic = h('kafka_dlt-original-topic')?.toString('utf8');
      const partition = be(h('kafka_dlt-original-partition'), 4);
      const offset = be(h('kafka_dlt-original-offset'), 8);
      const reason = h('redfence-reason')?.toString('utf8');
      const where = `dead letter ${m.partition}/${m.offset}`;
      if (topic !== o.input || partition === undefined || offset === undefined)
        return violate(
          'dead-letter',
          `${where}: original topic/partition/offset headers ${topic}/${partition}/${offset}`,
        );
      const source = poison.get(`${partition}/${offset}`);
      if (!source) {
        const key = m.key?.toString('utf8') ?? '<null>';
        return violate(
          'dead-letter',
          `${where}: valid record ${partition}/${offset} (${key}) dead-lettered (reason ${reason}) and applied`,
        );
      }
      if (reason !== source.reason)
        violate(
          'dead-letter',
          `${where}: ${partition}/${offset} reason ${reason}, expected ${source.reason}`,
        );
      if ((m.key === null) !== (source.key === null) || (m.key && source.key && !m.key.equals(source.key)))
        violate('dead-letter', `${where}: key differs from the source record's`);
      if (source.value !== null && !m.value?.equals(source.value))
        violate('dead-letter', `${where}: value differs from the source record's`);
      if (source.dl >= 1) duplicateDeadLetters++;
      source.dl++;
    },
    timeout,
    o.kafkaConfig,
  );
  for (const [where, p] of poison) {
    if (p.dl === 0) violate('dead-letter', `poison ${where} (${p.reason}) has no dead letter`);
    else if (p.dl > 1 && o.mode === 'exactly-once')
      violate('dead-letter', `poison ${where} dead-lettered ${p.dl} times under read_committed`);
  }

  // 4. State in Redis.
  const redis: Redis | Cluster = o.clusterPorts
    ? new Cluster(
        o.clusterPorts.map((port) => ({ host: '127.0.0.1', port })),
        { lazyConnect: true, redisOptions: { maxRetriesPerRequest: 3 } },
      )
    : new Redis(o.redisUrl ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 3, lazyConnect: true });
  let stateKeys = 0;
  let pendingEntriesLeft = 0;
  try {
    await redis.connect();
    const prefix = `rf:{${o.store}:`;
    const epochs = new Map<number, number>();
    for (let p = 0; p < o.partitions; p++) {
      const e = await redis.get(`${prefix}${o.input}:${p}}:epoch`);
      epochs.set(p, e === null ? 0 : Number(e));
    }
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
          stateKeys++;
          const name = k.slice(prefix.length, -1);
          stored.add(name);
          const l = customers.get(name);
          const hash = await redis.hgetallBuffer(k);
          const field = (f: string) => hash[f]?.toString('utf8');
          if (!l) {
            violate(
              'state',
              `${name}: state ${field('v')} stored, but it has no valid order`,
              'double apply',
            );
            continue;
          }
          const n = l.offsets.length;
          const want = `{"total":${l.prefix[n]},"count":${n}}`;
          if (field('v') !== want) {
            const count = Number(/"count":(-?\d+)/.exec(field('v') ?? '')?.[1] ?? Number.NaN);
            const kind = count > n ? 'double apply' : count < n ? 'lost apply' : 'state differs';
            if (count > n) extraApplies += count - n;
            if (count < n) missingApplies += n - count;
            violate('state', `${name}: value ${field('v')}, expected ${want}`, kind);
          }
          if (Number(field('p')) !== l.partition)
            violate('state', `${name}: fence partition ${field('p')}, expected ${l.partition}`);
          if (Number(field('o')) !== l.offsets[n - 1])
            violate(
              'state',
              `${name}: fence offset ${field('o')}, expected ${l.offsets[n - 1]} (its last order)`,
              Number(field('o')) < (l.offsets[n - 1] as number) ? 'fence behind' : 'other',
            );
          const e = Number(field('e'));
          if (!(e >= 1 && e <= (epochs.get(l.partition) ?? 0)))
            violate(
              'state',
              `${name}: writer epoch ${field('e')} vs partition epoch ${epochs.get(l.partition)}`,
              e > (epochs.get(l.partition) ?? 0) ? 'epoch behind' : 'other',
            );
          for (const f of Object.keys(hash)) {
            if (!f.startsWith('#')) continue;
            pendingEntriesLeft++;
            if (Number(f.slice(1)) > Number(field('o')))
              violate('state', `${name}: pending entry ${f} past the fence offset ${field('o')}`);
          }
        }
      } while (cursor !== '0');
    }
    for (const [name, l] of customers)
      if (!stored.has(name)) {
        missingApplies += l.offsets.length;
        violate('state', `${name}: no state stored for ${l.offsets.length} orders`, 'lost apply');
      }
  } finally {
    redis.disconnect();
  }

  // 5. Committed offsets.
  const { ChaosKafka } = await import('./kafka.js');
  const kafka = new ChaosKafka(o.brokers, o.kafkaConfig);
  let committed = 0;
  let endOffsets = 0;
  try {
    const offsets = await kafka.committedOffsets(o.group, o.input);
    for (const [p, end] of input.ends) {
      endOffsets += end;
      const c = offsets.get(p) ?? -1;
      committed += Math.max(0, c);
      if (c !== end) violate('offsets', `partition ${p}: committed ${c}, end offset ${end}`);
    }
  } finally {
    await kafka.close();
  }

  // 6. Verdicts, when scraped.
  if (o.verdicts) {
    const rebase = o.verdicts.get('REBASE') ?? 0;
    if (rebase > 0) violate('verdicts', `${rebase} REBASE verdicts: a key moved partitions`);
    const apply = o.verdicts.get('APPLY') ?? 0;
    if (apply > validRecords)
      violate('verdicts', `${apply} APPLY verdicts for ${validRecords} valid records`, 'double apply');
  }

  return {
    inputRecords,
    validRecords,
    poisonRecords: poison.size,
    poisonByReason,
    customers: customers.size,
    outputRecords,
    duplicateOutputs,
    deadLetters,
    duplicateDeadLetters,
    stateKeys,
    pendingEntriesLeft,
    committed,
    endOffsets,
    violations,
    violationCounts,
    kinds,
    extraApplies,
    missingApplies,
  };
}
