/**
 * What the chaos verifier (src/chaos/verifier.ts) is given and returns, the tally its checks add
 * violations to, and the ledger of the input they all check against: the input read and classified
 * record by record (null key; key not on its murmur2 partition; value not JSON or amount not an integer;
 * `"refuse":true`, refused by the reducer; else a valid order, kept per customer with the running totals
 * of its orders), and matched against what the workload produced. A refused order is poison
 * (`processing-error`) that still moves its customer's fence, so the customer's ledger keeps its offset. Shares no code with the processing path (see src/chaos/verifier.ts).
 */
import { type ConnectionConfig, readTopic } from './kafka.js';
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
  /**
   * Keys the run's `repair` faults drifted on purpose (a wrong total under the key's fence, corrected by
   * `reconcile --repair` later), and the amount added to the total. An owner that reads such a key before
   * its repair (a new owner after a rebalance, a replay) folds on the wrong total and outputs it: an
   * output of one of these customers whose total is its fold plus a positive multiple of `total` (the
   * count right) is the fault's own effect, counted in `driftedOutputs`, not a violation.
   */
  drifted?: { customers: ReadonlySet<string>; total: number };
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
  /** Outputs folded on a value a `repair` fault drifted before its repair (see VerifyOptions.drifted). */
  driftedOutputs: number;
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

/** Violations as the checks find them: the first MAX_LISTED of each check listed, all counted. */
export class Tally {
  readonly violations: Violation[] = [];
  readonly violationCounts = new Map<string, number>();
  readonly kinds = new Map<ViolationKind, number>();

  violate = (check: Violation['check'], message: string, kind: ViolationKind = 'other'): void => {
    this.kinds.set(kind, (this.kinds.get(kind) ?? 0) + 1);
    const n = (this.violationCounts.get(check) ?? 0) + 1;
    this.violationCounts.set(check, n);
    if (n <= MAX_LISTED) this.violations.push({ check, message });
  };
}

export type Violate = Tally['violate'];

export interface CustomerLedger {
  partition: number;
  /** Offsets of the customer's valid orders. */
  offsets: number[];
  /** Offsets of its orders the reducer refuses (no state change, but the fence moves past them). */
  refused: number[];
  /** The offset of its last valid or refused order: where its fence must be at the end. */
  last: number;
  /** prefix[c] = total after the first c orders. */
  prefix: number[];
  /** How many times each count 1..n was output. */
  seen: Uint16Array;
}

/** A poison record of the input, with its key and value (the value only up to 4 KiB) and its dead letters. */
export interface PoisonRecord {
  reason: string;
  key: Buffer | null;
  value: Buffer | null;
  /** Dead letters found for it. */
  dl: number;
}

export interface InputLedger {
  inputRecords: number;
  validRecords: number;
  /** Valid and refused orders by customer (the key); a customer may have refused orders only. */
  customers: Map<string, CustomerLedger>;
  /** Poison by `<partition>/<offset>`. */
  poison: Map<string, PoisonRecord>;
  poisonByReason: Map<string, number>;
  /** The input's end offsets by partition. */
  ends: Map<number, number>;
}

function classify(
  key: Buffer | null,
  value: Buffer | null,
  partition: number,
  partitions: number,
): { reason: string } | { amount: number; refused: boolean } {
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
  return { amount, refused: (order as { refuse?: unknown }).refuse === true };
}

/** The customer's ledger, made on its first valid or refused order. */
function ledgerOf(customers: Map<string, CustomerLedger>, name: string, partition: number): CustomerLedger {
  let l = customers.get(name);
  if (!l) {
    l = { partition, offsets: [], refused: [], last: -1, prefix: [0], seen: new Uint16Array(0) };
    customers.set(name, l);
  }
  return l;
}

/** The input, classified on its own terms; then matched against what the workload produced, when given. */
export async function readInput(o: VerifyOptions, violate: Violate): Promise<InputLedger> {
  const customers = new Map<string, CustomerLedger>();
  const poison = new Map<string, PoisonRecord>();
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
      const reason = 'reason' in c ? c.reason : c.refused ? 'processing-error' : undefined;
      if (reason !== undefined) {
        poison.set(`${m.partition}/${m.offset}`, {
          reason,
          key: m.key,
          value: m.value && m.value.length <= 4096 ? m.value : null,
          dl: 0,
        });
        poisonByReason.set(reason, (poisonByReason.get(reason) ?? 0) + 1);
      }
      if ('reason' in c) return;
      const l = ledgerOf(customers, (m.key as Buffer).toString('utf8'), m.partition);
      l.last = m.offset;
      if (c.refused) {
        l.refused.push(m.offset);
        return;
      }
      if ((m.value?.length ?? 0) > 100_000) byKind.large++;
      else byKind.valid++;
      l.offsets.push(m.offset);
      l.prefix.push((l.prefix.at(-1) as number) + c.amount);
    },
    o.readTimeoutMs ?? 300_000,
    o.kafkaConfig,
  );
  for (const [name, l] of customers) {
    l.seen = new Uint16Array(l.offsets.length + 1);
    for (let i = 1; i < l.offsets.length; i++)
      if ((l.offsets[i] as number) <= (l.offsets[i - 1] as number))
        violate('input', `${name}: offsets not increasing`);
  }
  if (o.produced) checkProduced(o.produced, byKind, poisonByReason, violate);
  const validRecords = byKind.valid + byKind.large;
  return { inputRecords, validRecords, customers, poison, poisonByReason, ends: input.ends };
}

function checkProduced(
  produced: Map<string, number>,
  byKind: { valid: number; large: number },
  poisonByReason: Map<string, number>,
  violate: Violate,
): void {
  const want = (k: string) => produced.get(k) ?? 0;
  const wantUndecodable = want('not-json') + want('bad-amount') + want('null-value');
  const checks: Array<[string, number, number]> = [
    ['valid orders', byKind.valid, want('valid')],
    ['large valid orders', byKind.large, want('large')],
    ['undecodable poison', poisonByReason.get('undecodable') ?? 0, wantUndecodable],
    ['null-key poison', poisonByReason.get('null-key') ?? 0, want('null-key')],
    ['wrong-partition poison', poisonByReason.get('wrong-partition') ?? 0, want('wrong-partition')],
    ['refused (processing-error) poison', poisonByReason.get('processing-error') ?? 0, want('refused')],
  ];
  for (const [what, got, wanted] of checks)
    if (got !== wanted) violate('input', `${what}: ${got} in the input topic, ${wanted} produced`);
}
