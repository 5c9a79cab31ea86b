/**
 * A scripted KafkaPort for lifecycle tests that need no broker: the test decides when start() and stop()
 * finish or fail, drives assignments and batches itself, and reads back what was produced and committed.
 */
import type {
  CommitOffset,
  ConsumerHandlers,
  InRecord,
  KafkaPort,
  OutRecord,
  TopicPartition,
  TopicSpec,
} from '../../src/kafka/types.js';

export interface Gate {
  readonly promise: Promise<void>;
  open(): void;
  fail(err: Error): void;
}

export function gate(): Gate {
  let open: () => void = () => undefined;
  let fail: (err: Error) => void = () => undefined;
  const promise = new Promise<void>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  promise.catch(() => undefined);
  return { promise, open, fail };
}

export class StubKafka implements KafkaPort {
  handlers: ConsumerHandlers | undefined;
  /** start() waits for this when set (and fails when it fails). */
  startGate: Gate | undefined;
  /** stop() waits for this when set. */
  stopGate: Gate | undefined;
  partitionCountError: Error | undefined;
  partitions = 1;
  starts = 0;
  stops = 0;
  readonly produced: OutRecord[] = [];
  readonly commits: CommitOffset[] = [];
  readonly paused: TopicPartition[] = [];

  async start(_topics: string[], handlers: ConsumerHandlers): Promise<void> {
    this.starts++;
    this.handlers = handlers;
    await this.startGate?.promise;
  }

  async produce(records: readonly OutRecord[], handedOver?: () => void): Promise<void> {
    this.produced.push(...records);
    handedOver?.();
  }

  async commit(offsets: readonly CommitOffset[]): Promise<void> {
    this.commits.push(...offsets);
  }

  async produceTransactionally(
    records: readonly OutRecord[],
    offsets: readonly CommitOffset[],
    beforeCommit?: () => void,
  ): Promise<void> {
    this.produced.push(...records);
    beforeCommit?.();
    this.commits.push(...offsets);
  }

  async committed(partitions: readonly TopicPartition[]): Promise<Map<string, number>> {
    return new Map(partitions.map((p) => [`${p.topic}/${p.partition}`, -1]));
  }

  async partitionCount(_topic: string): Promise<number> {
    if (this.partitionCountError) throw this.partitionCountError;
    return this.partitions;
  }

  async describeTopics(topics: readonly string[]): Promise<Map<string, number>> {
    return new Map(topics.map((t) => [t, this.partitions]));
  }

  async createTopics(_topics: readonly TopicSpec[]): Promise<void> {}

  async highWatermarks(_topic: string): Promise<Map<number, number>> {
    return new Map();
  }

  seek(_partition: TopicPartition, _offset: number): void {}

  pause(partitions: readonly TopicPartition[]): void {
    this.paused.push(...partitions);
  }

  resume(_partitions: readonly TopicPartition[]): void {}

  async stop(): Promise<void> {
    this.stops++;
    await this.stopGate?.promise;
  }

  /** A batch of records with these keys and JSON values, from `offset` on. */
  static records(
    topic: string,
    partition: number,
    offset: number,
    items: Array<[string, unknown]>,
  ): InRecord[] {
    return items.map(([key, value], i) => ({
      topic,
      partition,
      offset: String(offset + i),
      key: Buffer.from(key),
      value: Buffer.from(JSON.stringify(value)),
      headers: {},
      timestamp: String(Date.now()),
    }));
  }
}
