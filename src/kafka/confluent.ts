/**
 * The default Kafka adapter, over the low-level (librdkafka) API of @confluentinc/kafka-javascript
 * (docs/architecture.md says why this API and not the promise one). One consume loop fetches up to
 * `maxBatchSize` records per assigned partition in one call, splits them by partition and hands each
 * partition's run to the handler in turn. Rebalances are served by the same loop between batches: the
 * handler's onAssign / onRevoke is awaited before librdkafka is told (incremental assign / unassign),
 * so a revocation always waits for the batch in flight. Consumer: auto-commit off, read_committed,
 * cooperative-sticky (or the KIP-848 `consumer` protocol), optional static membership. Producer:
 * idempotent, acks=all, murmur2 (src/kafka/producer.ts).
 * Over 400 lines: the consume loop, the rebalance queue, the pause/seek bookkeeping and the commit
 * read-back share one consumer's state; split, each part would need all of it.
 */
import { RdKafka } from '@confluentinc/kafka-javascript';
import { RedfenceError } from '../errors/index.js';
import { KafkaAdmin } from './admin.js';
import {
  type ClientConfig,
  commonProperties,
  consumerProperties,
  producerProperties,
  type SecuritySettings,
} from './client-config.js';
import { checkClientConfig, connectWatched } from './connect.js';
import { type NativeConsumer as BaseConsumer, DeliveryProducer, fatal } from './producer.js';
import type {
  CommitOffset,
  ConsumerHandlers,
  Headers,
  InRecord,
  KafkaPort,
  OutRecord,
  TopicPartition,
  TopicSpec,
} from './types.js';
import { tpKey } from './types.js';

export interface ConfluentOptions {
  brokers: string[];
  groupId: string;
  clientId?: string;
  /** Exactly-once: the transactional id (unique per instance). Omit for at-least-once. */
  transactionalId?: string;
  /**
   * Exactly-once: how long the broker keeps a dead instance's open transaction before aborting it.
   * Until then read_committed consumers of the output stop at it. Default 10000 (as Kafka Streams).
   */
  transactionTimeoutMs?: number;
  /** 'classic' (cooperative-sticky) by default; 'consumer' is KIP-848. */
  groupProtocol?: 'classic' | 'consumer';
  /** Static membership (`group.instance.id`). */
  groupInstanceId?: string;
  sessionTimeoutMs?: number;
  /** Most records of one partition handed to the handler at once. Default 500. */
  maxBatchSize?: number;
  /** Security protocol, SASL and TLS settings, for all three clients. */
  security?: SecuritySettings;
  /** librdkafka properties for all three clients (checked by the processor's options). */
  config?: ClientConfig;
  /** Extra librdkafka properties for the consumer / producer. */
  consumerConfig?: ClientConfig;
  producerConfig?: ClientConfig;
}

/** Methods of the consumer that its type declarations leave out. */
type NativeConsumer = BaseConsumer & {
  setDefaultIsTimeoutOnlyForFirstMessage(on: boolean): void;
  assignmentLost(): boolean;
  incrementalAssign(partitions: TopicPartition[]): void;
  incrementalUnassign(partitions: TopicPartition[]): void;
};

/** Most records fetched by one consume call, whatever the number of partitions. */
const MAX_FETCH = 20_000;
/** How long one consume call waits for a first record (rebalances are served between calls). */
const CONSUME_WAIT_MS = 100;
const ERR_ASSIGN = -175;

interface Rebalance {
  readonly assign: boolean;
  readonly partitions: TopicPartition[];
  readonly lost: boolean;
}

function inRecord(m: RdKafka.Message): InRecord {
  let h: Headers = {};
  if (m.headers !== undefined && m.headers.length > 0) {
    h = {};
    for (const entry of m.headers) {
      for (const [k, v] of Object.entries(entry)) {
        const prev = h[k];
        const x = v as Buffer;
        h[k] = prev === undefined ? x : Array.isArray(prev) ? [...prev, x] : [prev, x];
      }
    }
  }
  return {
    topic: m.topic,
    partition: m.partition,
    offset: String(m.offset),
    key: m.key === undefined || m.key === null ? null : Buffer.isBuffer(m.key) ? m.key : Buffer.from(m.key),
    value: m.value ?? null,
    headers: h,
    timestamp: String(m.timestamp ?? -1),
  };
}

export class ConfluentKafka implements KafkaPort {
  readonly #options: ConfluentOptions;
  readonly #admin: KafkaAdmin;
  #consumer: NativeConsumer | undefined;
  #producer: DeliveryProducer | undefined;
  #handlers: ConsumerHandlers | undefined;
  #stopped = false;
  #stopping = false;
  #loop: Promise<void> | undefined;
  readonly #rebalances: Rebalance[] = [];
  /** Owned partitions (librdkafka told), by tpKey. */
  readonly #assigned = new Map<string, TopicPartition>();
  readonly #paused = new Set<string>();
  /** Per partition, the first offset not yet handed to the handler: a pause seeks back to it. */
  readonly #next = new Map<string, number>();
  /**
   * Per partition, how many seeks (its own, or a pause's) it has had: records fetched before the last
   * one are stale and never handed over (the seek went to or before the first of them, so they come
   * again), even once the partition is resumed.
   */
  readonly #seeks = new Map<string, number>();
  #fatal: Error | undefined;
  #commitTimeoutMs = 30_000;

  constructor(options: ConfluentOptions) {
    if (!Array.isArray(options.brokers) || options.brokers.length === 0) {
      throw new RedfenceError('RF_INVALID_OPTIONS', 'kafka.brokers must list at least one host:port');
    }
    this.#options = options;
    // librdkafka checks the properties when a client is built: built (not connected) here, a property
    // it refuses is an error now, before anything connects
    checkClientConfig(consumerProperties(options), producerProperties(options));
    this.#admin = new KafkaAdmin(commonProperties(options));
  }

  async start(topics: string[], handlers: ConsumerHandlers): Promise<void> {
    const o = this.#options;
    this.#producer = await DeliveryProducer.connect(producerProperties(o), o.transactionTimeoutMs);
    const batch = o.maxBatchSize ?? 500;
    const consumer = new RdKafka.KafkaConsumer(
      {
        ...consumerProperties(o),
        rebalance_cb: (err: { code: number }, assignment: TopicPartition[]) =>
          this.#onRebalance(err, assignment),
      } as RdKafka.ConsumerGlobalConfig,
      { 'auto.offset.reset': 'earliest' },
    ) as NativeConsumer;
    consumer.on('event.error', (err) => {
      if ((err as { isFatal?: unknown }).isFatal === true) this.#fatal ??= fatal('the consumer failed', err);
    });
    try {
      await connectWatched(consumer, 'consumer', { brokers: o.brokers.join(',') });
    } catch (err) {
      await this.#producer.close();
      throw err;
    }
    consumer.setDefaultConsumeTimeout(CONSUME_WAIT_MS);
    // return what is fetched already once a first record is there, instead of waiting to fill the call
    consumer.setDefaultIsTimeoutOnlyForFirstMessage(true);
    this.#consumer = consumer;
    this.#handlers = handlers;
    this.#commitTimeoutMs = Math.max(
      30_000,
      Number(o.consumerConfig?.['socket.timeout.ms'] ?? 0),
      2 * (o.sessionTimeoutMs ?? 10_000),
    );
    consumer.subscribe(topics);
    this.#loop = this.#run(consumer, handlers, batch);
  }

  /** Called by librdkafka (through the consume call); queued for the loop, or served now when closing. */
  #onRebalance(err: { code: number }, assignment: TopicPartition[]): void {
    const partitions = assignment.map((a) => ({ topic: a.topic, partition: a.partition }));
    const lost = this.#consumer?.assignmentLost() ?? false;
    const r: Rebalance = { assign: err.code === ERR_ASSIGN, partitions, lost };
    if (this.#stopping) {
      // the loop has ended (or is ending): librdkafka's close waits for this rebalance to be answered
      void this.#serveStopping(r).catch(() => undefined);
      return;
    }
    this.#rebalances.push(r);
  }

  /**
   * A rebalance while stopping: an assignment is acknowledged to librdkafka without reaching the
   * handler (nothing of it will be consumed; the close revokes it next); a revocation is served as usual.
   */
  async #serveStopping(r: Rebalance): Promise<void> {
    const c = this.#consumer;
    if (!r.assign) return this.#serve(r);
    if (c?.isConnected()) c.incrementalAssign(r.partitions);
  }

  async #serve(r: Rebalance): Promise<void> {
    const c = this.#consumer;
    const h = this.#handlers;
    if (!c || !h) return;
    if (r.assign) {
      await h.onAssign(r.partitions);
      for (const tp of r.partitions) this.#assigned.set(tpKey(tp.topic, tp.partition), tp);
      c.incrementalAssign(r.partitions);
      // librdkafka keeps a partition's pause across a revocation and a new assignment: apply what the
      // handler wants now (it pauses or resumes during onAssign, before the partition is assigned)
      const paused = r.partitions.filter((p) => this.#paused.has(tpKey(p.topic, p.partition)));
      const running = r.partitions.filter((p) => !this.#paused.has(tpKey(p.topic, p.partition)));
      if (paused.length > 0) c.pause(paused);
      if (running.length > 0) c.resume(running);
    } else {
      // only what the handler was given (stop() revokes the handler's partitions before the close)
      const given = r.partitions.filter((tp) => this.#assigned.has(tpKey(tp.topic, tp.partition)));
      try {
        if (given.length > 0) await h.onRevoke(given, r.lost);
      } finally {
        for (const tp of r.partitions) {
          const k = tpKey(tp.topic, tp.partition);
          this.#assigned.delete(k);
          this.#next.delete(k);
        }
        if (c.isConnected() && r.partitions.length > 0) c.incrementalUnassign(r.partitions);
      }
    }
  }

  async #run(c: NativeConsumer, h: ConsumerHandlers, batch: number): Promise<void> {
    while (!this.#stopping) {
      while (this.#rebalances.length > 0) await this.#serve(this.#rebalances.shift() as Rebalance);
      if (this.#stopping) break;
      const n = Math.min(MAX_FETCH, batch * Math.max(1, this.#assigned.size));
      let messages: RdKafka.Message[];
      try {
        messages = await new Promise((resolve, reject) =>
          c.consume(n, (err, m) => (err ? reject(err) : resolve(m))),
        );
      } catch (err) {
        if ((err as { isFatal?: unknown }).isFatal === true) {
          this.#fatal ??= fatal('the consumer failed', err);
          return;
        }
        // e.g. a subscribed topic that does not exist (yet): reported, consumption goes on
        continue;
      }
      if (messages.length === 0) continue;
      while (this.#rebalances.length > 0) await this.#serve(this.#rebalances.shift() as Rebalance);
      await this.#dispatch(c, h, messages, batch, new Map(this.#seeks));
    }
  }

  /** Each partition's records in offset order, at most `batch` at a time, partitions in turn. */
  async #dispatch(
    c: NativeConsumer,
    h: ConsumerHandlers,
    messages: RdKafka.Message[],
    batch: number,
    seeks: ReadonlyMap<string, number>,
  ) {
    const runs = new Map<string, RdKafka.Message[]>();
    for (const m of messages) {
      const k = tpKey(m.topic, m.partition);
      const run = runs.get(k);
      if (run === undefined) runs.set(k, [m]);
      else run.push(m);
    }
    // Until handed over, a run's records are "fetched, not handed over": a pause during this dispatch
    // (from an earlier partition's handler) must seek such a partition back to its run's first record,
    // since librdkafka's position is already past the run.
    for (const [k, run] of runs)
      if (this.#assigned.has(k) && !this.#paused.has(k) && (this.#seeks.get(k) ?? 0) === (seeks.get(k) ?? 0))
        this.#next.set(k, (run[0] as RdKafka.Message).offset);
    for (const [k, run] of runs) {
      for (let i = 0; i < run.length; i += batch) {
        if (this.#stopping || !this.#assigned.has(k) || this.#paused.has(k)) break;
        if ((this.#seeks.get(k) ?? 0) !== (seeks.get(k) ?? 0)) break; // sought since: stale
        const part = run.slice(i, i + batch);
        const first = part[0] as RdKafka.Message;
        const last = part[part.length - 1] as RdKafka.Message;
        this.#next.set(k, last.offset + 1);
        let high = last.offset + 1;
        try {
          const w = c.getWatermarkOffsets(first.topic, first.partition);
          if (w.highOffset > high) high = w.highOffset;
        } catch {
          // not known yet: the batch's own end
        }
        try {
          await h.onBatch(first.topic, first.partition, part.map(inRecord), String(high));
        } catch {
          // redelivered from its first record
          this.seek({ topic: first.topic, partition: first.partition }, first.offset);
          break;
        }
      }
    }
  }

  #ready(): { consumer: NativeConsumer; producer: DeliveryProducer } {
    if (this.#fatal) throw this.#fatal;
    if (!this.#consumer || !this.#producer)
      throw new RedfenceError('RF_INVALID_STATE', 'the Kafka adapter is not started');
    return { consumer: this.#consumer, producer: this.#producer };
  }

  async produce(records: readonly OutRecord[], handedOver?: () => void): Promise<void> {
    await this.#ready().producer.produce(records, handedOver);
  }

  /**
   * Commits and resolves only once the group coordinator has stored the offsets. librdkafka commits
   * asynchronously and reports the outcome through the consume call, which waits for the batch handler
   * that is calling this, so the outcome is read back instead: committed offsets are fetched from the
   * coordinator (which answers from what it has appended to __consumer_offsets) until they reach these
   * ones. Typically one round trip.
   */
  async commit(offsets: readonly CommitOffset[]): Promise<void> {
    if (offsets.length === 0) return;
    const { consumer } = this.#ready();
    const send = () =>
      consumer.commit(offsets.map((o) => ({ topic: o.topic, partition: o.partition, offset: o.offset })));
    send();
    const started = Date.now();
    const deadline = started + this.#commitTimeoutMs;
    let sentAt = started;
    for (let delay = 0; ; delay = Math.min(250, delay === 0 ? 5 : delay * 2)) {
      if (delay > 0) await new Promise((r) => setTimeout(r, delay));
      const stored = await this.#committedRaw(consumer, offsets, Math.max(1, deadline - Date.now()));
      const behind = offsets.filter((o) => (stored.get(tpKey(o.topic, o.partition)) ?? -1) < o.offset);
      if (behind.length === 0) return;
      if (Date.now() >= deadline)
        throw new RedfenceError(
          'RF_COMMIT_UNCONFIRMED',
          `Kafka: the group coordinator did not store the commit within ${this.#commitTimeoutMs} ms (` +
            behind.map((o) => `${o.topic}/${o.partition}@${o.offset}`).join(', ') +
            ')',
        );
      // A refused commit (e.g. REBALANCE_IN_PROGRESS while the group changes generation) is reported
      // only through the consume call: send it again (commits are idempotent) until the coordinator has it.
      if (Date.now() - sentAt >= 1000) {
        sentAt = Date.now();
        send();
      }
    }
  }

  async produceTransactionally(
    records: readonly OutRecord[],
    offsets: readonly CommitOffset[],
    beforeCommit?: () => void,
  ): Promise<void> {
    const { consumer, producer } = this.#ready();
    await producer.transaction(records, offsets, consumer, beforeCommit);
  }

  #committedRaw(
    c: NativeConsumer,
    partitions: readonly TopicPartition[],
    timeoutMs: number,
  ): Promise<Map<string, number>> {
    return new Promise((resolve, reject) =>
      c.committed(
        partitions.map((p) => ({ topic: p.topic, partition: p.partition })),
        timeoutMs,
        (err, rows) => {
          if (err) return reject(err);
          const out = new Map<string, number>();
          for (const r of rows) {
            const n = Number(r.offset);
            out.set(tpKey(r.topic, r.partition), Number.isFinite(n) && n >= 0 ? n : -1);
          }
          resolve(out);
        },
      ),
    );
  }

  async committed(partitions: readonly TopicPartition[]): Promise<Map<string, number>> {
    if (partitions.length === 0) return new Map();
    return this.#committedRaw(this.#ready().consumer, partitions, this.#commitTimeoutMs);
  }

  async partitionCount(topic: string): Promise<number> {
    const n = (await this.describeTopics([topic])).get(topic);
    if (n === undefined) throw new RedfenceError('RF_TOPIC_MISSING', `topic ${topic} does not exist`);
    return n;
  }

  describeTopics(topics: readonly string[]): Promise<Map<string, number>> {
    return this.#admin.describeTopics(topics);
  }

  createTopics(topics: readonly TopicSpec[]): Promise<void> {
    return this.#admin.createTopics(topics);
  }

  highWatermarks(topic: string): Promise<Map<number, number>> {
    return this.#admin.highWatermarks(topic);
  }

  seek(partition: TopicPartition, offset: number): void {
    const c = this.#consumer;
    const k = tpKey(partition.topic, partition.partition);
    if (!c || !this.#assigned.has(k)) return;
    this.#next.set(k, offset);
    this.#seeks.set(k, (this.#seeks.get(k) ?? 0) + 1);
    // asynchronous (timeout 0); a partition that went meanwhile is not an error
    c.seek({ topic: partition.topic, partition: partition.partition, offset }, 0, () => undefined);
  }

  /** Remembered for partitions not assigned yet (applied when they are); librdkafka told for owned ones. */
  pause(partitions: readonly TopicPartition[]): void {
    const c = this.#consumer;
    if (!c) return;
    for (const p of partitions) this.#paused.add(tpKey(p.topic, p.partition));
    const owned = partitions.filter((p) => this.#assigned.has(tpKey(p.topic, p.partition)));
    if (owned.length === 0) return;
    c.pause(owned.map((p) => ({ topic: p.topic, partition: p.partition })));
    for (const p of owned) {
      const k = tpKey(p.topic, p.partition);
      // records fetched but not handed over are dropped: fetch again from the first of them on resume
      // (nothing handed over yet: no seek, and the fetched records stay valid for after the resume)
      const next = this.#next.get(k);
      if (next !== undefined) {
        this.#seeks.set(k, (this.#seeks.get(k) ?? 0) + 1);
        c.seek({ topic: p.topic, partition: p.partition, offset: next }, 0, () => undefined);
      }
    }
  }

  resume(partitions: readonly TopicPartition[]): void {
    const c = this.#consumer;
    if (!c) return;
    for (const p of partitions) this.#paused.delete(tpKey(p.topic, p.partition));
    const owned = partitions.filter((p) => this.#assigned.has(tpKey(p.topic, p.partition)));
    if (owned.length === 0) return;
    c.resume(owned.map((p) => ({ topic: p.topic, partition: p.partition })));
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#stopping = true;
    await this.#loop?.catch(() => undefined);
    const c = this.#consumer;
    if (c) {
      // rebalances queued but not served: answered now (librdkafka's close waits for them)
      for (const r of this.#rebalances.splice(0)) await this.#serveStopping(r).catch(() => undefined);
      // The handler's partitions are revoked while the client is still connected: its onRevoke can
      // commit, and the group hands them to another member only after it returns (librdkafka's close
      // would call it after the client has begun disconnecting, and not wait for it).
      const owned = [...this.#assigned.values()];
      if (owned.length > 0 && c.isConnected())
        await this.#serve({ assign: false, partitions: owned, lost: c.assignmentLost() }).catch(
          () => undefined,
        );
      await new Promise<void>((resolve) => {
        try {
          c.unsubscribe();
        } catch {
          // not subscribed
        }
        c.disconnect(() => resolve());
      });
    }
    await this.#producer?.close();
    await this.#admin.close();
  }
}
