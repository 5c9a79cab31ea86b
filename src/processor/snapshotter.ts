/**
 * The periodic snapshot of a processor's owned partitions into a compacted topic (docs/operations.md,
 * "Snapshot and rebuild"). Off the hot path: a timer (and a nudge after each commit) starts a pass when
 * `intervalMs` has passed since the last one began; one pass at a time; a pass reads `pageSize` keys at a
 * time and waits for their delivery before reading more, so its memory and its share of Redis stay
 * bounded. It never blocks or fails a batch: a failed pass is logged and the next one starts afresh.
 *
 * A pass: note each owned partition's committed offset C (its `asOf`) and epoch; check the store's mark;
 * SCAN the store's state keys on every master, HGETALL each, keep those fenced on an owned partition;
 * before producing each page check the mark again (Redis that lost its data must never overwrite a good
 * snapshot); once every page is delivered, produce one marker per partition: (partition, C, epoch).
 *
 * The mark (`rf:{<store>:<input>}:snapshot`) is a token set once (SET NX) and read at start: missing or
 * different later means Redis lost the store, and snapshots stop for good (the processor logs an error;
 * `redfence rebuild` restores Redis and sets a new mark). A mark missing at start while the snapshot
 * topic holds records is the same loss seen from a restart: snapshots stay off.
 *
 * What a pass reads is the context's `pass` (a topology's: src/processor/topology/snapshot.ts), else the
 * processor's store (below); the timer, the mark, the pacing, the producer and the stats are this file's.
 */
import { randomBytes } from 'node:crypto';
import { Cluster, type Redis } from 'ioredis';
import { KafkaAdmin } from '../kafka/admin.js';
import { type ClientSettings, commonProperties, producerProperties } from '../kafka/client-config.js';
import type { DeliveryProducer } from '../kafka/producer.js';
import type { OutRecord } from '../kafka/types.js';
import type { KeySpace } from '../keys/index.js';
import type { Logger } from '../runtime/logger.js';
import type { OwnedPartition } from './partition-table.js';
import { encodeKey, encodeMarker, keyFromHash } from './snapshot-codec.js';
import type { ResolvedSnapshot } from './snapshot-options.js';

export interface SnapshotterContext {
  readonly options: ResolvedSnapshot;
  readonly redis: Redis | Cluster;
  readonly keys: KeySpace;
  readonly input: string;
  readonly client: ClientSettings;
  /** -1: the broker's default. */
  readonly replicationFactor: number;
  /** The partitions owned now (not fenced). */
  partitions(): readonly OwnedPartition[];
  /** True while the processor's Redis guard sees an outage: no pass starts. */
  outage(): boolean;
  readonly log: Logger;
  /** What a pass reads and produces; default: the processor's store (one hash per key). */
  readonly pass?: SnapshotPass;
}

/** What a pass body gets from the snapshotter. */
export interface PassIO {
  readonly producer: DeliveryProducer;
  /** Throws (snapshots stop) when the store's mark is gone or changed: Redis lost the store. */
  checkMark(): Promise<void>;
  /** With `maxKeysPerSecond`: waits until `read` keys are within the rate since `started`. */
  pace(read: number, started: number): Promise<void>;
  /** True once stop() was called: the pass returns without its markers. */
  closed(): boolean;
  /** Counts key records produced. */
  produced(keys: number): void;
}

/**
 * One pass: reads the owned state, produces it and then its markers. Returns false when there was
 * nothing to do (no owned partition, closed), else the partitions it could not mark (0: all marked).
 */
export type SnapshotPass = (io: PassIO) => Promise<false | { readonly unmarked: number }>;

export interface SnapshotStats {
  /** Passes that wrote their markers. */
  readonly passes: number;
  readonly keys: number;
  readonly failures: number;
  /** How long the last completed pass took (ms; 0 before the first). */
  readonly lastPassMs: number;
  /**
   * Passes that left some partition without a new marker (a topology's: a key written through both of
   * its reads, src/processor/topology/snapshot.ts); those partitions keep their last marker.
   */
  readonly incomplete: number;
  /** Set once Redis was seen to have lost the store: no further pass. */
  readonly stopped: string | undefined;
}

/** Longest stop() waits for a pass in flight. */
const STOP_WAIT_MS = 10_000;
/** Pages of a pass whose delivery may be awaited at once (bounds memory and the producer's queue). */
const PAGES_IN_FLIGHT = 4;

class StoreLost extends Error {}

export class Snapshotter {
  readonly #ctx: SnapshotterContext;
  #producer: DeliveryProducer | undefined;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #lastStart = Number.NEGATIVE_INFINITY;
  #mark: string | undefined;
  #closed = false;
  #stats = {
    passes: 0,
    keys: 0,
    failures: 0,
    lastPassMs: 0,
    incomplete: 0,
    stopped: undefined as string | undefined,
  };

  constructor(ctx: SnapshotterContext) {
    this.#ctx = ctx;
  }

  stats(): SnapshotStats {
    return { ...this.#stats };
  }

  /** Creates the topic when missing (compacted), reads or sets the mark, connects the producer, starts the timer. */
  async start(inputPartitions: number): Promise<void> {
    const { options, client, log } = this.#ctx;
    const admin = new KafkaAdmin(commonProperties(client));
    let topicRecords = 0;
    try {
      const found = await admin.describeTopics([options.topic]);
      if (!found.has(options.topic)) {
        await admin.createTopics([
          {
            topic: options.topic,
            partitions: inputPartitions,
            ...(this.#ctx.replicationFactor > 0 ? { replicationFactor: this.#ctx.replicationFactor } : {}),
            config: { 'cleanup.policy': 'compact' },
          },
        ]);
        log.info(
          { topic: options.topic, partitions: inputPartitions },
          'created the compacted snapshot topic',
        );
      } else {
        for (const end of (await admin.highWatermarks(options.topic)).values()) topicRecords += end;
      }
    } finally {
      await admin.close();
    }
    const markKey = this.#ctx.keys.snapshotMark(this.#ctx.input);
    const token = randomBytes(12).toString('hex');
    const set = await this.#ctx.redis.set(markKey, token, 'NX');
    if (set === 'OK' && topicRecords > 0) {
      await this.#ctx.redis.del(markKey);
      this.#stop(
        'Redis has no snapshot mark but the snapshot topic has records: Redis lost the store? snapshots stay off (run redfence rebuild)',
      );
      return;
    }
    this.#mark = set === 'OK' ? token : ((await this.#ctx.redis.get(markKey)) ?? undefined);
    const { DeliveryProducer } = await import('../kafka/producer.js');
    this.#producer = await DeliveryProducer.connect(producerProperties(client));
    this.#timer = setInterval(() => this.kick(), Math.min(options.intervalMs, 1000));
    this.#timer.unref();
  }

  /** Starts a pass when one is due (called by the timer and after each commit; returns at once). */
  kick(): void {
    if (this.#closed || this.#running !== undefined || this.#stats.stopped !== undefined) return;
    if (this.#producer === undefined || this.#ctx.outage()) return;
    if (performance.now() - this.#lastStart < this.#ctx.options.intervalMs) return;
    if (this.#ctx.partitions().length === 0) return;
    this.#lastStart = performance.now();
    const started = performance.now();
    const io: PassIO = {
      producer: this.#producer,
      checkMark: () => this.#checkMark(),
      pace: (read, from) => this.#pace(read, from),
      closed: () => this.#closed,
      produced: (n) => {
        this.#stats.keys += n;
      },
    };
    const run = (this.#ctx.pass ?? ((x: PassIO) => this.#pass(x)))(io)
      .then((done) => {
        if (done === false) return;
        this.#stats.passes++;
        if (done.unmarked > 0) this.#stats.incomplete++;
        this.#stats.lastPassMs = Math.round(performance.now() - started);
      })
      .catch((err: unknown) => {
        if (err instanceof StoreLost) return this.#stop(err.message);
        this.#stats.failures++;
        this.#ctx.log.warn(
          { err: (err as Error)?.message },
          'snapshot pass failed; the next one starts afresh',
        );
      })
      .finally(() => {
        this.#running = undefined;
      });
    this.#running = run;
  }

  /** Stops the timer, waits (bounded) for the pass in flight, closes the producer. */
  async stop(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    const running = this.#running;
    if (running !== undefined) {
      let t: NodeJS.Timeout | undefined;
      await Promise.race([running, new Promise((r) => (t = setTimeout(r, STOP_WAIT_MS)))]);
      clearTimeout(t);
    }
    await this.#producer?.close().catch(() => undefined);
    this.#producer = undefined;
  }

  #stop(why: string): void {
    this.#stats.stopped = why;
    this.#ctx.log.error({ topic: this.#ctx.options.topic }, why);
  }

  async #checkMark(): Promise<void> {
    const now = await this.#ctx.redis.get(this.#ctx.keys.snapshotMark(this.#ctx.input));
    if (now !== this.#mark)
      throw new StoreLost(
        'the store snapshot mark is gone from Redis (Redis lost the store): snapshots stop (run redfence rebuild)',
      );
  }

  /** With `maxKeysPerSecond`: waits until `read` keys are within the rate since `started`. */
  async #pace(read: number, started: number): Promise<void> {
    const rate = this.#ctx.options.maxKeysPerSecond;
    if (rate <= 0) return;
    for (;;) {
      const wait = (read * 1000) / rate - (performance.now() - started);
      if (wait <= 0 || this.#closed) return;
      // in steps, so close() does not wait out a long pause
      await new Promise((r) => setTimeout(r, Math.ceil(Math.min(wait, 200))).unref());
    }
  }

  /** The processor's pass: one hash per key, read with HGETALL. */
  async #pass(io: PassIO): Promise<false | { unmarked: number }> {
    const { redis, keys, options, input } = this.#ctx;
    const owned = new Map<number, { asOf: number; epoch: number; keys: number }>();
    for (const e of this.#ctx.partitions())
      if (e.topic === input)
        owned.set(e.partition, { asOf: Math.max(0, e.committed), epoch: e.epoch, keys: 0 });
    if (owned.size === 0) return false;
    const at = Date.now();
    const started = performance.now();
    const producer = io.producer;
    const inFlight: Promise<void>[] = [];
    let read = 0;
    await this.#checkMark();
    const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis];
    const pattern = keys.statePattern();
    for (const node of nodes) {
      let cursor = '0';
      do {
        if (this.#closed) return false;
        const [next, names] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', options.pageSize);
        cursor = next;
        if (names.length === 0) continue;
        await this.#pace(read, started);
        if (this.#closed) return false;
        read += names.length;
        const hashes = await Promise.all(names.map((k) => redis.hgetallBuffer(k)));
        const out: OutRecord[] = [];
        names.forEach((name, i) => {
          const h = hashes[i];
          const p = h?.p === undefined ? -1 : Number(h.p.toString());
          const own = owned.get(p);
          if (h === undefined || own === undefined) return;
          const k = keyFromHash(name, h, own.asOf);
          if (k === null) return;
          own.keys++;
          out.push({ topic: options.topic, ...encodeKey(k) });
        });
        if (out.length === 0) continue;
        await this.#checkMark();
        const delivered = producer.produce(out);
        delivered.catch(() => undefined); // awaited below
        inFlight.push(delivered);
        if (inFlight.length >= PAGES_IN_FLIGHT) await inFlight.shift();
        io.produced(out.length);
      } while (cursor !== '0');
    }
    // every key record delivered before any marker
    for (const d of inFlight.splice(0)) await d;
    await this.#checkMark();
    const markers: OutRecord[] = [...owned].map(([partition, o]) => ({
      topic: options.topic,
      ...encodeMarker({ topic: input, partition, offset: o.asOf, epoch: o.epoch, keys: o.keys, at }),
    }));
    await producer.produce(markers);
    this.#ctx.log.debug(
      { partitions: [...owned.keys()], keys: [...owned.values()].reduce((a, o) => a + o.keys, 0) },
      'snapshot pass written',
    );
    return { unmarked: 0 };
  }
}
