/**
 * The default Kafka adapter, over the low-level (librdkafka) API of @confluentinc/kafka-javascript
 * (docs/architecture.md says why this API and not the promise one). One consume loop fetches up to
 * `maxBatchSize` records per assigned partition (in consume calls of a few hundred, src/kafka/fetch.ts),
 * splits them by partition and hands each partition's run to the handler in turn; the next fetch is
 * begun as a hand-over begins, so its consume calls overlap the handler's batches. Rebalances are served
 * by the same loop between batches, with no fetch in flight: the handler's onAssign / onRevoke is
 * awaited before librdkafka is told (incremental assign / unassign), so a revocation always waits for
 * the batch in flight. Consumer: auto-commit off, read_committed,
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
import { checkCommitMetadata } from './commit-metadata.js';
import { nativeOffsets, readCommitted, stored } from './committed-offsets.js';
import { checkClientConfig, connectWatched } from './connect.js';
import { fetchRecords, inRecord, partitionRuns, unhanded } from './fetch.js';
import { checkAssigned, type OffsetResetReport } from './offset-resets.js';
import { authRefusal, narrowRefusal } from './permissions.js';
import { type NativeConsumer as BaseConsumer, DeliveryProducer, fatal } from './producer.js';
import { inTurns, mapInSlices } from './slices.js';
import type {
  AuthorizedOperations,
  CommitOffset,
  CommittedOffset,
  ConsumerHandlers,
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
  /**
   * Told of every assigned partition whose committed offset its log no longer holds (records deleted by
   * retention before the group processed them, or a topic made again): offset-resets.ts. Omitted: no
   * such check is made.
   */
  offsetResets?: OffsetResetReport;
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
/**
 * The assignment's offset check (offset-resets.ts: one committed-offsets read and one watermarks call
 * per topic, in parallel) runs beside the handler's onAssign; once onAssign is done it is waited for
 * until OFFSET_CHECK_MS after it began, or OFFSET_CHECK_GRACE_MS after onAssign when that is later (a
 * committed read that waited with onAssign's own, for the last owner's open transaction, then still
 * gets its answer), at most: its reads are then abandoned and it is reported as failed.
 */
const OFFSET_CHECK_MS = 5000;
const OFFSET_CHECK_GRACE_MS = 1000;

/** A fetch's records and the seek counts when it began (records of a partition sought since are stale). */
interface Fetched {
  readonly messages: RdKafka.Message[];
  readonly seeks: ReadonlyMap<string, number>;
  /** The consumer failed (fatal): the loop ends. */
  readonly fatal?: Error;
}

interface Rebalance {
  readonly assign: boolean;
  readonly partitions: TopicPartition[];
  readonly lost: boolean;
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
  /** The consumer side ending (stop(), resubscribe()): one close however many ask. */
  #closing: Promise<void> | undefined;
  readonly #rebalances: Rebalance[] = [];
  /** Owned partitions (librdkafka told), by tpKey. */
  readonly #assigned = new Map<string, TopicPartition>();
  readonly #paused = new Set<string>();
  /**
   * Per partition, the first offset not handed to the handler yet (known once a batch was handed over
   * or a seek was made): anything fetched below it is handed over already and never handed again.
   */
  readonly #next = new Map<string, number>();
  /**
   * Per partition, how many seeks it has had: records fetched by a fetch that began before the last
   * one are stale and never handed over (the seek moves librdkafka's position to or before the first
   * of them, so they come again).
   */
  readonly #seeks = new Map<string, number>();
  /** Seeks handed to the binding whose callback has not come yet (awaited before a fetch, #run). */
  readonly #seeksInFlight = new Set<Promise<void>>();
  /** A fetch (consume calls) is in progress: seeks asked for meanwhile wait in #deferredSeeks. */
  #fetching = false;
  /**
   * Seeks asked for during a fetch, by tpKey (the last one wins), handed to the binding once the fetch
   * has returned. Made at once, a seek could land while a consume call is waiting, and that call could
   * then return records librdkafka fetched from the new position: dropped as stale with the rest of
   * the fetch, they would never be fetched again. Issued after the fetch, every record it returned
   * was taken from the old position, and the seek brings them (and everything after) again.
   */
  readonly #deferredSeeks = new Map<string, { partition: TopicPartition; offset: number }>();
  /**
   * Per paused partition, the records fetched but not handed over, in offset order: handed over first
   * once it is resumed (see pause()).
   */
  readonly #held = new Map<string, RdKafka.Message[]>();
  #fatal: Error | undefined;
  #commitTimeoutMs = 30_000;
  /**
   * KafkaPort.resubscribe; none for a static member (`groupInstanceId`) under the classic protocol:
   * such a member joining again is handed its last assignment back with no rebalance, so a topic added
   * to its subscription would not be assigned (seen on the broker; KIP-848's protocol assigns it).
   */
  readonly resubscribe?: (topics: string[], between?: () => Promise<void>) => Promise<void>;

  constructor(options: ConfluentOptions) {
    if (!Array.isArray(options.brokers) || options.brokers.length === 0) {
      throw new RedfenceError('RF_INVALID_OPTIONS', 'kafka.brokers must list at least one host:port');
    }
    this.#options = options;
    if (options.groupInstanceId === undefined || (options.groupProtocol ?? 'classic') === 'consumer')
      this.resubscribe = (topics, between) => this.#resubscribe(topics, between);
    // librdkafka checks the properties when a client is built: built (not connected) here, a property
    // it refuses is an error now, before anything connects
    checkClientConfig(consumerProperties(options), producerProperties(options));
    this.#admin = new KafkaAdmin(commonProperties(options));
  }

  async start(topics: string[], handlers: ConsumerHandlers): Promise<void> {
    const o = this.#options;
    this.#producer = await DeliveryProducer.connect(producerProperties(o), o.transactionTimeoutMs, o.groupId);
    try {
      await this.#consume(topics, handlers);
    } catch (err) {
      await this.#producer.close();
      throw err;
    }
  }

  /**
   * A new subscription as a member leaving the group and joining again (KafkaPort.resubscribe): the
   * consumer side ends as stop() ends it (the batch in flight, the revocation through onRevoke while
   * still connected, the close), then `between`, then a new consumer joins with `topics`. The producer
   * (its transactional id) and the admin client stay. A stop() meanwhile wins: nothing joins again.
   */
  async #resubscribe(topics: string[], between?: () => Promise<void>): Promise<void> {
    const h = this.#handlers;
    if (this.#consumer === undefined || h === undefined || this.#stopping)
      throw new RedfenceError('RF_INVALID_STATE', 'the Kafka adapter is not consuming');
    this.#stopping = true;
    await this.#closeConsumer();
    this.#consumer = undefined;
    this.#closing = undefined;
    this.#deferredSeeks.clear();
    this.#next.clear();
    this.#held.clear();
    if (this.#stopped) return;
    await between?.();
    if (this.#stopped) return;
    this.#stopping = false;
    await this.#consume(topics, h);
  }

  async #consume(topics: string[], handlers: ConsumerHandlers): Promise<void> {
    const o = this.#options;
    const batch = o.maxBatchSize ?? 500;
    const consumer = new RdKafka.KafkaConsumer(
      {
        ...consumerProperties(o),
        rebalance_cb: (err: { code: number }, assignment: TopicPartition[]) =>
          this.#onRebalance(err, assignment),
        // a commit the group's ACL refuses is told only here: commit() fails at once instead of
        // waiting for a read-back that never reaches it
        offset_commit_cb: (err: unknown, offsets: TopicPartition[] | undefined) => {
          const tps = err ? [...new Set((offsets ?? []).map((o) => o.topic))] : [];
          const refused = err ? this.#refusal(err, tps) : undefined;
          if (refused !== undefined) this.#refused(refused);
        },
      } as RdKafka.ConsumerGlobalConfig,
      { 'auto.offset.reset': 'earliest' },
    ) as NativeConsumer;
    consumer.on('event.error', (err) => {
      // refused by the authorizer (the group, a subscribed topic): never waited out (permissions.ts)
      const refused = this.#refusal(err, topics);
      if (refused !== undefined) this.#refused(refused);
      else if ((err as { isFatal?: unknown }).isFatal === true)
        this.#fatal ??= fatal('the consumer failed', err);
    });
    await connectWatched(consumer, 'consumer', { brokers: o.brokers.join(',') });
    if (this.#stopped) {
      // stop() came while a resubscribe() connected: never joins
      await new Promise<void>((resolve) => consumer.disconnect(() => resolve()));
      return;
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
    // Observed at once: a rebalance callback that throws ends the loop, and that rejection must never be
    // left unhandled until stop() (a Redis retry cut short by the close rejects here while draining).
    // With onFatal the runtime closes (its close may still produce and commit what it applied);
    // without, every later call fails with the reason.
    this.#loop = this.#run(consumer, handlers, batch).catch((err: unknown) => {
      if (this.#stopping) return;
      const reason = fatal('a rebalance callback failed', err);
      if (handlers.onFatal) handlers.onFatal(reason);
      else this.#fatal ??= reason;
    });
  }

  /** RF_KAFKA_AUTH for a consumer's authorization refusal (a topic it reads, or its group). */
  #refusal(err: unknown, topics: readonly string[]) {
    // librdkafka's message names the refused topic: only it, when it is one of them
    const text = String((err as Error)?.message ?? '');
    const named = topics.filter(
      (t) => text.includes(t) && !topics.some((u) => u !== t && u.includes(t) && text.includes(u)),
    );
    const shown = named.length > 0 ? named : topics;
    return authRefusal(err, {
      topicOperation: 'Read',
      ...(shown.length > 0 ? { topic: shown.join(', ') } : {}),
      group: this.#options.groupId,
      when: 'refuse the consumer',
    });
  }

  /**
   * A consumer's refusal: latched once narrowed to the topics the brokers say it may not read
   * (librdkafka's error names none; permissions.ts), a round trip later. Meanwhile the other topics are
   * consumed as usual (the refused one delivers nothing).
   */
  #refused(err: RedfenceError): void {
    void narrowRefusal(err, this.#admin).then((named) => {
      this.#fatal ??= named;
    });
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
      // beside onAssign, and settled before librdkafka is told: nothing of these partitions is fetched
      // (or committed) while their committed offsets and watermarks are read
      const started = Date.now();
      let timesOut: () => void = () => undefined;
      const deadline = new Promise<void>((resolve) => {
        timesOut = resolve;
      });
      const checked = this.#checkAssigned(c, r.partitions, deadline);
      try {
        await h.onAssign(r.partitions);
      } finally {
        const left = Math.max(OFFSET_CHECK_GRACE_MS, started + OFFSET_CHECK_MS - Date.now());
        const timer = setTimeout(timesOut, left);
        await checked;
        clearTimeout(timer);
      }
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
          this.#held.delete(k);
          // a fetch in progress has stale records of it (an assignment again starts from the commit)
          this.#seeks.set(k, (this.#seeks.get(k) ?? 0) + 1);
        }
        if (c.isConnected() && r.partitions.length > 0) c.incrementalUnassign(r.partitions);
      }
    }
  }

  /** The offset check of an assignment (offset-resets.ts); never rejects. */
  async #checkAssigned(
    c: NativeConsumer,
    partitions: TopicPartition[],
    deadline: Promise<void>,
  ): Promise<void> {
    const report = this.#options.offsetResets;
    if (report === undefined || partitions.length === 0) return;
    const reads = {
      group: this.#options.groupId,
      // as long as onAssign's own read may take (an open transaction of the last owner holds both back)
      committed: (tps: readonly TopicPartition[]) => readCommitted(c, tps, this.#commitTimeoutMs),
      // short: the admin client's close waits for the calls it has in flight
      watermarks: (topic: string) => this.#admin.watermarks(topic, { timeoutMs: OFFSET_CHECK_MS }),
    };
    await checkAssigned(reads, partitions, report, deadline).catch(() => undefined);
  }

  async #run(c: NativeConsumer, h: ConsumerHandlers, batch: number): Promise<void> {
    // The next fetch, begun when a hand-over begins: librdkafka's consume calls (a worker thread's round
    // trip each) overlap the handler's batches instead of running between them.
    let ahead: Promise<Fetched> | undefined;
    try {
      while (!this.#stopping) {
        // a fetch begun ahead has ended before anything else: no consume call runs while a rebalance
        // is served or while the seeks are awaited
        let fetched = ahead === undefined ? undefined : await ahead;
        ahead = undefined;
        if (fetched?.fatal) return void h.onFatal?.(fetched.fatal);
        // nothing came: fetched again below, as when idle
        if (fetched?.messages.length === 0) fetched = undefined;
        while (this.#rebalances.length > 0) await this.#serve(this.#rebalances.shift() as Rebalance);
        if (this.#stopping) break;
        // records held by a pause and resumed since: handed over before anything is fetched
        if (fetched === undefined && !this.#heldReady()) {
          fetched = await this.#fetch(c, batch);
          if (fetched.fatal) return void h.onFatal?.(fetched.fatal);
          if (fetched.messages.length === 0 && !this.#heldReady()) continue;
          while (this.#rebalances.length > 0) await this.#serve(this.#rebalances.shift() as Rebalance);
        }
        const { messages, seeks } = fetched ?? { messages: [], seeks: new Map(this.#seeks) };
        // Fetched ahead only with nothing to serve first (a rebalance, a seek landing): those are
        // waited for at the top of the loop, with no consume call in flight.
        if (!this.#stopping && this.#rebalances.length === 0 && this.#seeksInFlight.size === 0)
          ahead = this.#fetch(c, batch);
        await this.#handOver(c, h, messages, batch, seeks);
      }
    } finally {
      // stopping: a fetch begun ahead ends before the consumer is closed (its records are never handed over)
      await ahead?.catch(() => undefined);
    }
  }

  /**
   * One fetch (fetch.ts), with the seek counts when it began. The binding seeks on a worker thread:
   * until its callback, librdkafka may still hand over records from the old position with nothing to
   * tell them apart. Every seek made so far has landed before the fetch begins; one asked for during
   * the fetch marks its partition's records stale (the count) and is made once the fetch has returned
   * (#deferredSeeks). A fatal consumer error is returned (the loop ends); any other ends the fetch
   * empty (e.g. a subscribed topic that does not exist yet: reported, consumption goes on).
   */
  async #fetch(c: NativeConsumer, batch: number): Promise<Fetched> {
    if (this.#seeksInFlight.size > 0) await Promise.all(this.#seeksInFlight);
    const seeks = new Map(this.#seeks);
    // an authorization refusal heard as an error event: the loop ends (never an endless empty fetch)
    if (RedfenceError.is(this.#fatal, 'RF_KAFKA_AUTH')) return { messages: [], seeks, fatal: this.#fatal };
    const n = Math.min(MAX_FETCH, batch * Math.max(1, this.#assigned.size));
    this.#fetching = true;
    try {
      return { messages: await fetchRecords(c, n, CONSUME_WAIT_MS, () => this.#stopping), seeks };
    } catch (err) {
      const refused = this.#refusal(err, [...new Set([...this.#assigned.values()].map((tp) => tp.topic))]);
      if (refused !== undefined) {
        this.#fatal ??= await narrowRefusal(refused, this.#admin);
        return { messages: [], seeks, fatal: this.#fatal };
      }
      if ((err as { isFatal?: unknown }).isFatal === true) {
        this.#fatal ??= fatal('the consumer failed', err);
        return { messages: [], seeks, fatal: this.#fatal };
      }
      return { messages: [], seeks };
    } finally {
      this.#fetching = false;
      this.#issueDeferredSeeks(c);
    }
  }

  /** Some partition holds records and is not paused (any more). */
  #heldReady(): boolean {
    for (const k of this.#held.keys()) if (!this.#paused.has(k)) return true;
    return false;
  }

  /**
   * Each partition's records in offset order, at most `batch` at a time, partitions in turn (up to the
   * handlers' `partitionsInFlight` partitions at once, each one's batches still one after another). The
   * messages are split and turned into the port's records in slices (slices.ts), so Redis replies are
   * not held up behind a large fetch. `seeks`: the seek counts when the fetch began.
   */
  async #handOver(
    c: NativeConsumer,
    h: ConsumerHandlers,
    messages: RdKafka.Message[],
    batch: number,
    seeks: ReadonlyMap<string, number>,
  ) {
    const runs = await partitionRuns(messages);
    for (const k of this.#held.keys()) if (!runs.has(k)) runs.set(k, []);
    // Sought since the fetch began: its records are stale (and the seek dropped what was held).
    // Stopping or revoked: nothing handed over.
    const current = (k: string) =>
      !this.#stopping && this.#assigned.has(k) && (this.#seeks.get(k) ?? 0) === (seeks.get(k) ?? 0);
    const turns = [...runs].map(
      ([k, fetched]) =>
        () =>
          this.#handOverRun(c, h, k, fetched, batch, current),
    );
    await inTurns(turns, h.partitionsInFlight ?? 1);
  }

  /** One partition's records of a fetch, `batch` at a time, each batch awaited before the next. */
  async #handOverRun(
    c: NativeConsumer,
    h: ConsumerHandlers,
    k: string,
    fetched: RdKafka.Message[],
    batch: number,
    current: (k: string) => boolean,
  ): Promise<void> {
    if (!current(k)) return;
    const run = unhanded(this.#held.get(k), fetched, this.#next.get(k) ?? -1);
    this.#held.delete(k);
    for (let i = 0; i < run.length; i += batch) {
      if (!current(k)) break;
      // paused (before, or by an earlier batch's handler): the rest waits for the resume
      if (this.#hold(k, run, i)) break;
      const part = run.slice(i, i + batch);
      const records = await mapInSlices(part, inRecord);
      // the conversion gave the event loop turns: a pause or a seek may have come meanwhile
      if (!current(k) || this.#hold(k, run, i)) break;
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
        await h.onBatch(first.topic, first.partition, records, String(high));
      } catch {
        // redelivered from its first record
        this.seek({ topic: first.topic, partition: first.partition }, first.offset);
        break;
      }
    }
  }

  /** A paused partition's records from `from` on are held for its resume; false when not paused. */
  #hold(k: string, run: RdKafka.Message[], from: number): boolean {
    if (!this.#paused.has(k)) return false;
    if (from < run.length) this.#held.set(k, run.slice(from));
    return true;
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
   * ones (and hold their metadata). Typically one round trip. Metadata the broker could not store is
   * refused before anything is sent (commit-metadata.ts).
   */
  async commit(offsets: readonly CommitOffset[]): Promise<void> {
    checkCommitMetadata(offsets, 'commit');
    if (offsets.length === 0) return;
    const { consumer } = this.#ready();
    const send = () => consumer.commit(nativeOffsets(offsets));
    send();
    const started = Date.now();
    const deadline = started + this.#commitTimeoutMs;
    let sentAt = started;
    for (let delay = 0; ; delay = Math.min(250, delay === 0 ? 5 : delay * 2)) {
      if (delay > 0) await new Promise((r) => setTimeout(r, delay));
      // the group's Read refused (heard by the consumer, or by the read-back): not waited out
      if (RedfenceError.is(this.#fatal, 'RF_KAFKA_AUTH')) throw this.#fatal;
      const held = await readCommitted(consumer, offsets, Math.max(1, deadline - Date.now())).catch(
        (err: unknown) => {
          throw authRefusal(err, { group: this.#options.groupId, when: 'refuse the commit' }) ?? err;
        },
      );
      const behind = offsets.filter((o) => !stored(o, held.get(tpKey(o.topic, o.partition))));
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
    checkCommitMetadata(offsets, 'produceTransactionally');
    const { consumer, producer } = this.#ready();
    await producer.transaction(records, offsets, consumer, beforeCommit);
  }

  async committed(partitions: readonly TopicPartition[]): Promise<Map<string, number>> {
    const held = await this.committedWithMetadata(partitions);
    return new Map([...held].map(([k, c]) => [k, c.offset]));
  }

  async committedWithMetadata(partitions: readonly TopicPartition[]): Promise<Map<string, CommittedOffset>> {
    if (partitions.length === 0) return new Map();
    return readCommitted(this.#ready().consumer, partitions, this.#commitTimeoutMs);
  }

  async partitionCount(topic: string): Promise<number> {
    const n = (await this.describeTopics([topic])).get(topic);
    if (n === undefined) throw new RedfenceError('RF_TOPIC_MISSING', `topic ${topic} does not exist`);
    return n;
  }

  describeTopics(topics: readonly string[]): Promise<Map<string, number>> {
    return this.#admin.describeTopics(topics);
  }

  listTopics(): Promise<string[]> {
    return this.#admin.listTopics();
  }

  unwritableTopics(topics: readonly string[]): Promise<string[]> {
    return this.#admin.unwritableTopics(topics);
  }

  authorizedOperations(r: { topics: readonly string[]; group?: string }): Promise<AuthorizedOperations> {
    return this.#admin.authorizedOperations(r);
  }

  createTopics(topics: readonly TopicSpec[]): Promise<void> {
    return this.#admin.createTopics(topics);
  }

  highWatermarks(topic: string): Promise<Map<number, number>> {
    return this.#admin.highWatermarks(topic);
  }

  lowWatermarks(topic: string): Promise<Map<number, number>> {
    return this.#admin.lowWatermarks(topic);
  }

  deleteRecords(topic: string, below: readonly { partition: number; offset: number }[]): Promise<void> {
    return this.#admin.deleteRecords(topic, below);
  }

  positions(partitions: readonly TopicPartition[]): Map<string, number> {
    const c = this.#consumer;
    const out = new Map<string, number>();
    const mine = partitions.filter((p) => this.#assigned.has(tpKey(p.topic, p.partition)));
    if (!c?.isConnected() || mine.length === 0) return out;
    try {
      // librdkafka's application position: past the control records and aborted records it skipped
      for (const p of c.position(mine.map((x) => ({ topic: x.topic, partition: x.partition }))))
        if (typeof p.offset === 'number' && p.offset >= 0) out.set(tpKey(p.topic, p.partition), p.offset);
    } catch {
      // not known now (a rebalance): the caller falls back to the committed offsets
    }
    return out;
  }

  seek(partition: TopicPartition, offset: number): void {
    const c = this.#consumer;
    const k = tpKey(partition.topic, partition.partition);
    if (!c || !this.#assigned.has(k)) return;
    this.#next.set(k, offset);
    this.#held.delete(k);
    this.#seeks.set(k, (this.#seeks.get(k) ?? 0) + 1);
    if (this.#fetching) this.#deferredSeeks.set(k, { partition, offset });
    else this.#issueSeek(c, partition, offset);
  }

  #issueDeferredSeeks(c: NativeConsumer): void {
    for (const [k, s] of this.#deferredSeeks)
      if (this.#assigned.has(k)) this.#issueSeek(c, s.partition, s.offset);
    this.#deferredSeeks.clear();
  }

  /**
   * Run on a worker thread (the binding waits 10 ms at most for librdkafka's answer): the callback comes
   * once librdkafka has its version barrier (records from the old position are dropped from then on).
   * A partition that went meanwhile is not an error. librdkafka refuses a seek of a partition whose
   * fetcher has not started yet ("Erroneous state", right after an assignment); that fetcher then
   * starts from the committed offset, which is where the consumer is still.
   */
  #issueSeek(c: NativeConsumer, partition: TopicPartition, offset: number): void {
    const landed = new Promise<void>((resolve) =>
      c.seek({ topic: partition.topic, partition: partition.partition, offset }, 0, () => resolve()),
    );
    this.#seeksInFlight.add(landed);
    void landed.then(() => this.#seeksInFlight.delete(landed));
  }

  /**
   * Remembered for partitions not assigned yet (applied when they are); librdkafka told for owned ones.
   *
   * No seek: librdkafka's pause sets the partition's next fetch position to the application position
   * (the record after the last one a consume call took off its queue) and drops what it had fetched
   * beyond it, so on resume it fetches from right after the records this adapter has taken but not
   * handed over. Those are held (#held) and handed over first on resume. (A seek back to the first
   * of them, as was done before, raced: the binding seeks on a worker thread, so records taken off the
   * queue from the old position before the seek landed were handed over as current, and then again
   * from the seek's offset; and a fetch in progress when the pause came was not known to be stale.)
   */
  pause(partitions: readonly TopicPartition[]): void {
    const c = this.#consumer;
    if (!c) return;
    for (const p of partitions) this.#paused.add(tpKey(p.topic, p.partition));
    const owned = partitions.filter((p) => this.#assigned.has(tpKey(p.topic, p.partition)));
    if (owned.length === 0) return;
    c.pause(owned.map((p) => ({ topic: p.topic, partition: p.partition })));
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
    await this.#closeConsumer();
    await this.#producer?.close();
    await this.#admin.close();
  }

  /** Ends the consumer side (#stopping set): the loop, the rebalances queued, the owned partitions' revocation, the close. Memoised until resubscribe() forgets it. */
  #closeConsumer(): Promise<void> {
    this.#closing ??= this.#endConsumer();
    return this.#closing;
  }

  async #endConsumer(): Promise<void> {
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
  }
}
