/**
 * The chaos workload: `records` orders `{ customer, amount }` keyed by customer, customers drawn with a
 * Zipf-like skew (a few hot keys, so several records of one key land in one batch), poison records mixed
 * in, and a few valid orders padded to just under the broker's default max.message.bytes. Poison is
 * refused at every step of the way: by the key (null, or not on its murmur2 partition), by `decode` (not
 * JSON, a non-integer amount, a null value), or by `reduce` (a `refused` order: a valid integer amount
 * with `"refuse":true`, which no valid order has; src/chaos/customer-totals.ts throws on it, so it is a
 * processing-error dead letter kept in the fence, drawn from the same skewed customers as the valid
 * orders it shares batches with). Record i is a pure function of the seed and i. The feeder produces them while the processors run, paced to a rate.
 */
import type { KafkaJS } from '@confluentinc/kafka-javascript';
import { kafkaPartition } from './murmur2.js';
import { Rng, Zipf } from './rng.js';

export const POISON_KINDS = [
  'not-json',
  'bad-amount',
  'null-value',
  'null-key',
  'wrong-partition',
  'refused',
] as const;
export type PoisonKind = (typeof POISON_KINDS)[number];

/** The dead-letter reason each poison kind must get (the `redfence-reason` header). */
export const EXPECTED_REASON: Readonly<Record<PoisonKind, string>> = {
  'not-json': 'undecodable',
  'bad-amount': 'undecodable',
  'null-value': 'undecodable',
  'null-key': 'null-key',
  'wrong-partition': 'wrong-partition',
  refused: 'processing-error',
};

/** A value of this many bytes stays under the broker's default max.message.bytes (1048588) with overhead. */
export const LARGE_VALUE_BYTES = 1_040_000;

export interface WorkloadOptions {
  seed: number;
  records: number;
  customers: number;
  partitions: number;
  /** Fraction of records that are poison (0..1). */
  poisonRate: number;
  /** How many valid orders are padded to ~1 MB. */
  large: number;
  /** Zipf exponent of customer popularity. */
  skew: number;
}

export interface WorkloadRecord {
  key: string | null;
  value: Buffer | null;
  partition?: number;
  kind: 'valid' | 'large' | PoisonKind;
}

/** What the feeder produces: the built-in workload, or a list of given records. */
export interface RecordSource {
  readonly done: boolean;
  readonly produced: number;
  next(): FeedRecord;
}

export interface FeedRecord {
  /** The topic it goes to; default: the feeder's. */
  topic?: string;
  key: string | Buffer | null;
  value: Buffer | null;
  partition?: number;
  /** CreateTime in ms (as a string); default: the producer's clock. */
  timestamp?: string;
}

/** A given record: its bytes, its CreateTime after the base, the topic it goes to (default: the feeder's). */
export interface ListedRecord {
  key: Buffer | null;
  value: Buffer | null;
  timestamp?: number;
  topic?: string;
}

/**
 * Given records, produced in order. Both runs of a comparison must see the same input: a record without
 * a key goes to partition i % partitions (not a random one), and record i carries the timestamp
 * `timestampBase + i`, so a processor reading its record's partition, offset or timestamp sees the same.
 * A record naming a topic goes there (a topology's several input topics).
 */
export class RecordList implements RecordSource {
  readonly #records: ReadonlyArray<ListedRecord>;
  readonly #partitions: (topic: string | undefined) => number;
  readonly #timestampBase: number;
  #next = 0;

  /** `partitions`: the count of the topic a record names (a null key goes to partition i mod it). */
  constructor(
    records: ReadonlyArray<ListedRecord>,
    partitions: number | ((topic: string | undefined) => number),
    timestampBase: number,
  ) {
    this.#records = records;
    this.#partitions = typeof partitions === 'number' ? () => partitions : partitions;
    this.#timestampBase = timestampBase;
  }

  get produced(): number {
    return this.#next;
  }

  get done(): boolean {
    return this.#next >= this.#records.length;
  }

  next(): FeedRecord {
    const i = this.#next++;
    const r = this.#records[i] as ListedRecord;
    return {
      ...(r.topic === undefined ? {} : { topic: r.topic }),
      key: r.key,
      value: r.value,
      ...(r.key === null ? { partition: i % this.#partitions(r.topic) } : {}),
      timestamp: String(this.#timestampBase + (r.timestamp ?? i)),
    };
  }
}

export class Workload implements RecordSource {
  readonly options: WorkloadOptions;
  readonly #rng: Rng;
  readonly #zipf: Zipf;
  readonly #largeAt: Set<number>;
  /** Records generated so far by kind. */
  readonly counts = new Map<WorkloadRecord['kind'], number>();
  #next = 0;

  constructor(options: WorkloadOptions) {
    this.options = options;
    this.#rng = new Rng(options.seed, 'workload');
    this.#zipf = new Zipf(options.customers, options.skew);
    const large = new Rng(options.seed, 'large');
    this.#largeAt = new Set(Array.from({ length: options.large }, () => large.int(options.records)));
  }

  get produced(): number {
    return this.#next;
  }

  get done(): boolean {
    return this.#next >= this.options.records;
  }

  #customer(): string {
    return `c-${this.#zipf.sample(this.#rng)}`;
  }

  /** The next record (i = produced). */
  next(): WorkloadRecord {
    const i = this.#next++;
    const rng = this.#rng;
    const customer = this.#customer();
    const amount = rng.range(-50, 1000);
    const poison = rng.next() < this.options.poisonRate;
    const kindPick = rng.int(POISON_KINDS.length);
    let r: WorkloadRecord;
    if (poison) {
      const kind = POISON_KINDS[kindPick] as PoisonKind;
      const home = kafkaPartition(customer, this.options.partitions);
      switch (kind) {
        case 'not-json':
          r = { key: customer, value: Buffer.from(`{not json ${i}`), kind };
          break;
        case 'bad-amount':
          r = { key: customer, value: Buffer.from(JSON.stringify({ customer, amount: amount + 0.5 })), kind };
          break;
        case 'null-value':
          r = { key: customer, value: null, kind };
          break;
        case 'null-key':
          r = {
            key: null,
            value: Buffer.from(JSON.stringify({ customer, amount })),
            partition: rng.int(this.options.partitions),
            kind,
          };
          break;
        case 'wrong-partition':
          r = {
            key: customer,
            value: Buffer.from(JSON.stringify({ customer, amount })),
            partition:
              (home + 1 + rng.int(Math.max(1, this.options.partitions - 1))) % this.options.partitions,
            kind,
          };
          break;
        case 'refused':
          r = { key: customer, value: Buffer.from(JSON.stringify({ customer, amount, refuse: true })), kind };
          break;
      }
    } else if (this.#largeAt.has(i)) {
      const head = JSON.stringify({ customer, amount, pad: '' });
      const pad = 'x'.repeat(LARGE_VALUE_BYTES - head.length);
      r = { key: customer, value: Buffer.from(JSON.stringify({ customer, amount, pad })), kind: 'large' };
    } else {
      r = { key: customer, value: Buffer.from(JSON.stringify({ customer, amount })), kind: 'valid' };
    }
    this.counts.set(r.kind, (this.counts.get(r.kind) ?? 0) + 1);
    return r;
  }
}

/**
 * Produces the workload to `topic` (or the topic a record names) at `rate` records per second (0: as
 * fast as acknowledgements come), in chunks, each acknowledged (acks=all, idempotent) before it counts
 * as produced; a chunk's records of one topic in one send, the topics one after another, so each
 * partition gets its records in the workload's order. `limit`, if given, is how many records may have
 * been produced by now (the input slows while the harness's faults run late: src/chaos/run-steps.ts
 * `productionLimit`). `before`, if given, is awaited before each send to a topic (the harness makes a
 * late topic there: src/chaos/late-topic.ts).
 */
export class Feeder {
  readonly #producer: KafkaJS.Producer;
  readonly #topic: string;
  readonly #workload: RecordSource;
  readonly #rate: number;
  readonly #limit: (() => number) | undefined;
  readonly #before: ((topic: string) => Promise<void>) | undefined;
  #loop: Promise<void> | undefined;
  #stopped = false;
  /** Records acknowledged by the broker. */
  acked = 0;
  startedAt = 0;
  finishedAt = 0;

  constructor(
    producer: KafkaJS.Producer,
    topic: string,
    workload: RecordSource,
    rate: number,
    limit?: () => number,
    before?: (topic: string) => Promise<void>,
  ) {
    this.#producer = producer;
    this.#topic = topic;
    this.#workload = workload;
    this.#rate = rate;
    this.#limit = limit;
    this.#before = before;
  }

  start(): void {
    this.startedAt = Date.now();
    this.#loop = this.#run();
    this.#loop.catch(() => undefined);
  }

  async #run(): Promise<void> {
    await this.#producer.connect();
    const w = this.#workload;
    while (!w.done && !this.#stopped) {
      let room = 500;
      if (this.#rate > 0 || this.#limit) {
        let due =
          this.#rate > 0
            ? Math.floor(((Date.now() - this.startedAt) / 1000) * this.#rate)
            : Number.POSITIVE_INFINITY;
        if (this.#limit) due = Math.min(due, this.#limit());
        due -= w.produced;
        if (due <= 0) {
          await new Promise((r) => setTimeout(r, 20)); // pacing only
          continue;
        }
        room = Math.min(room, due);
      }
      const byTopic = new Map<string, KafkaJS.Message[]>();
      let count = 0;
      let bytes = 0;
      while (count < room && !w.done && bytes < 2_000_000) {
        const r = w.next();
        bytes += r.value?.length ?? 0;
        count++;
        const topic = r.topic ?? this.#topic;
        const messages = byTopic.get(topic) ?? [];
        byTopic.set(topic, messages);
        messages.push({
          key: r.key,
          value: r.value,
          ...(r.partition === undefined ? {} : { partition: r.partition }),
          ...(r.timestamp === undefined ? {} : { timestamp: r.timestamp }),
        });
      }
      for (const [topic, messages] of byTopic) {
        await this.#before?.(topic);
        await this.#producer.send({ topic, messages });
      }
      this.acked += count;
    }
    this.finishedAt = Date.now();
  }

  /** True once every record has been acknowledged. */
  get done(): boolean {
    return this.finishedAt > 0;
  }

  /** Resolves when every record has been acknowledged; rethrows a failed send. */
  async finished(): Promise<void> {
    await this.#loop;
  }

  async close(): Promise<void> {
    this.#stopped = true;
    await this.#loop?.catch(() => undefined);
    await this.#producer.disconnect().catch(() => undefined);
  }
}
