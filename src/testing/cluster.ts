/**
 * The in-memory cluster's state: topics of partition logs, consumer groups, transactional producer
 * epochs, and one change signal that wakes every waiting consumer. Ports and the public MemoryKafka
 * facade share one Cluster; nothing here knows about a processor.
 */
import { RedfenceError } from '../errors/index.js';
import type { CommitOffset, OutRecord } from '../kafka/types.js';
import { partitionFor } from '../partitioner/index.js';
import { MemoryKafkaError } from './errors.js';
import { Group } from './group.js';
import { PartitionLog, type TxnState } from './log.js';

/** A transaction in progress: the logs it wrote to (each gets a marker when it ends). */
export interface Transaction {
  readonly state: TxnState;
  readonly logs: Set<PartitionLog>;
}

/**
 * The bytes as the default adapter's client sends them: a zero-length buffer goes as null (so a ''
 * value, which becomes one, arrives as null too); a '' key is sent as a string and stays empty.
 */
function toBuffer(v: Buffer | string | null, kind: 'key' | 'value'): Buffer | null {
  if (v === null) return null;
  if (v.length === 0 && (kind === 'value' || typeof v !== 'string')) return null;
  return Buffer.from(v); // a copy: the caller may reuse its buffer
}

/**
 * Headers as a consumer of the real broker gets them: one entry per value sent, so a one-value list
 * arrives as that value and an empty list as no header at all.
 */
function headersOf(h: OutRecord['headers']): Record<string, Buffer | Buffer[]> {
  const out: Record<string, Buffer | Buffer[]> = {};
  for (const [name, v] of Object.entries(h ?? {})) {
    if (!Array.isArray(v)) out[name] = Buffer.from(v);
    else if (v.length === 1) out[name] = Buffer.from(v[0] as Buffer | string);
    else if (v.length > 1) out[name] = v.map((x) => Buffer.from(x));
  }
  return out;
}

export class Cluster {
  readonly #topics = new Map<string, PartitionLog[]>();
  readonly #groups = new Map<string, Group>();
  readonly #producerEpochs = new Map<string, number>();
  /** Where the next null-key record of a topic goes (round robin). */
  readonly #nextNullKey = new Map<string, number>();
  #version = 0;
  #waiters: (() => void)[] = [];

  /** Bumped by every change a consumer may be waiting for. */
  get version(): number {
    return this.#version;
  }

  changed(): void {
    this.#version++;
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }

  /** Resolves at the first change after `since` (at once if there was one). */
  waitForChange(since: number): Promise<void> {
    if (since !== this.#version) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  createTopic(topic: string, partitions: number): boolean {
    if (typeof topic !== 'string' || topic.length === 0)
      throw new RedfenceError('RF_INVALID_ARGUMENT', 'a topic name must be a non-empty string');
    if (!Number.isSafeInteger(partitions) || partitions < 1)
      throw new RedfenceError('RF_INVALID_ARGUMENT', `topic ${topic}: partitions must be an integer >= 1`);
    if (this.#topics.has(topic)) return false;
    this.#topics.set(
      topic,
      Array.from({ length: partitions }, () => new PartitionLog()),
    );
    for (const g of this.#groups.values()) g.topicsChanged();
    this.changed();
    return true;
  }

  partitionCount(topic: string): number | undefined {
    return this.#topics.get(topic)?.length;
  }

  /** The names of its topics, in the order they were made. */
  topicNames(): string[] {
    return [...this.#topics.keys()];
  }

  log(topic: string, partition: number): PartitionLog | undefined {
    return this.#topics.get(topic)?.[partition];
  }

  logs(topic: string): readonly PartitionLog[] {
    return this.#topics.get(topic) ?? [];
  }

  group(groupId: string): Group {
    let g = this.#groups.get(groupId);
    if (g === undefined) {
      g = new Group((topic) => this.partitionCount(topic));
      this.#groups.set(groupId, g);
    }
    return g;
  }

  groups(): Iterable<Group> {
    return this.#groups.values();
  }

  /** A new producer epoch for a transactional id: every older producer with that id is fenced. */
  initProducer(transactionalId: string): number {
    const epoch = (this.#producerEpochs.get(transactionalId) ?? 0) + 1;
    this.#producerEpochs.set(transactionalId, epoch);
    return epoch;
  }

  producerEpoch(transactionalId: string): number | undefined {
    return this.#producerEpochs.get(transactionalId);
  }

  /**
   * Appends records (all or none: every topic and partition is checked first). Without a partition
   * a keyed record goes where the murmur2 partitioner puts it, a null key round robin.
   */
  append(records: readonly OutRecord[], txn?: Transaction): CommitOffset[] {
    const placed = records.map((r) => {
      const logs = this.#topics.get(r.topic);
      if (logs === undefined)
        throw new MemoryKafkaError(
          'UNKNOWN_TOPIC_OR_PARTITION',
          `topic ${r.topic} does not exist (the broker would time the message out)`,
          { retriable: true },
        );
      let partition = r.partition;
      if (partition === undefined) {
        if (r.key === null) {
          partition = (this.#nextNullKey.get(r.topic) ?? 0) % logs.length;
          this.#nextNullKey.set(r.topic, partition + 1);
        } else partition = partitionFor(r.key, logs.length);
      }
      const log = logs[partition];
      if (log === undefined || !Number.isInteger(partition))
        throw new MemoryKafkaError(
          'UNKNOWN_TOPIC_OR_PARTITION',
          `topic ${r.topic} has no partition ${partition}`,
          { retriable: false },
        );
      return { r, log, partition };
    });
    const out: CommitOffset[] = [];
    for (const { r, log, partition } of placed) {
      const offset = log.append(
        {
          key: toBuffer(r.key, 'key'),
          value: toBuffer(r.value, 'value'),
          headers: headersOf(r.headers),
          timestamp: r.timestamp ?? String(Date.now()),
        },
        txn?.state,
      );
      txn?.logs.add(log);
      out.push({ topic: r.topic, partition, offset });
    }
    if (records.length > 0) this.changed();
    return out;
  }

  beginTransaction(): Transaction {
    return { state: { status: 'open' }, logs: new Set() };
  }

  /** Commits or aborts a transaction: its records become visible (or skipped) all at once. */
  endTransaction(txn: Transaction, outcome: 'committed' | 'aborted', offsets?: OffsetsCommit): void {
    txn.state.status = outcome;
    for (const log of txn.logs) log.endTransaction(txn.state);
    if (outcome === 'committed' && offsets) this.group(offsets.groupId).commit(offsets.offsets);
    this.changed();
  }
}

export interface OffsetsCommit {
  groupId: string;
  offsets: readonly CommitOffset[];
}
