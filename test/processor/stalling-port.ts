/**
 * A Kafka port for watchdog tests: the real adapter, with every delivered batch dropped while `stalled`
 * (a consumer that silently stopped delivering); a seek ends the stall. It counts seeks and reads of the
 * low watermarks (the watchdog makes one per look and topic).
 */
import type { ConfluentKafka } from '../../src/kafka/confluent.js';
import type { ConsumerHandlers, KafkaPort } from '../../src/kafka/types.js';

export class StallingPort implements KafkaPort {
  seeks = 0;
  /** Reads of the low watermarks: the watchdog makes one per look. */
  lowReads = 0;
  constructor(
    readonly inner: ConfluentKafka,
    public stalled = true,
  ) {}
  start(topics: string[], h: ConsumerHandlers) {
    return this.inner.start(topics, {
      ...h,
      onBatch: (t, p, r, hw) => (this.stalled ? Promise.resolve() : h.onBatch(t, p, r, hw)),
    });
  }
  seek(tp: { topic: string; partition: number }, offset: number) {
    this.seeks++;
    this.stalled = false;
    this.inner.seek(tp, offset);
  }
  produce: KafkaPort['produce'] = (r, cb) => this.inner.produce(r, cb);
  commit: KafkaPort['commit'] = (o) => this.inner.commit(o);
  produceTransactionally: KafkaPort['produceTransactionally'] = (r, o, cb) =>
    this.inner.produceTransactionally(r, o, cb);
  committed: KafkaPort['committed'] = (p) => this.inner.committed(p);
  committedWithMetadata: KafkaPort['committedWithMetadata'] = (p) => this.inner.committedWithMetadata(p);
  partitionCount: KafkaPort['partitionCount'] = (t) => this.inner.partitionCount(t);
  highWatermarks: KafkaPort['highWatermarks'] = (t) => this.inner.highWatermarks(t);
  lowWatermarks = (t: string) => {
    this.lowReads++;
    return this.inner.lowWatermarks(t);
  };
  describeTopics: KafkaPort['describeTopics'] = (t) => this.inner.describeTopics(t);
  listTopics = () => this.inner.listTopics();
  createTopics: KafkaPort['createTopics'] = (t) => this.inner.createTopics(t);
  pause: KafkaPort['pause'] = (p) => this.inner.pause(p);
  resume: KafkaPort['resume'] = (p) => this.inner.resume(p);
  stop = () => this.inner.stop();
}
