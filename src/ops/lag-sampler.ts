/**
 * Samples any consumer group's lag through the Kafka admin client (src/kafka/admin.ts, so a secured
 * broker and a refused password behave as for the processor): the group's committed offsets
 * (OffsetFetch), each topic's end (ListOffsets with isolation level READ_COMMITTED: the last stable
 * offset, or READ_UNCOMMITTED: the high watermark), which partitions the group's live members own
 * (DescribeGroups: no owner turns a stuck partition from STALL into STOP) and, when asked, the timestamp
 * of the next unprocessed record (one record fetched at the committed offset by a consumer that only
 * assigns, never joins or commits: a fetch per lagging partition, so it is optional).
 */
import { randomBytes } from 'node:crypto';
import { RdKafka } from '@confluentinc/kafka-javascript';
import { RedfenceError } from '../errors/index.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { connectWatched } from '../kafka/connect.js';
import type { LagSample } from '../metrics/lag.js';

export interface LagSamplerOptions {
  /** librdkafka properties: bootstrap.servers, security, pass-through. */
  properties: Record<string, unknown>;
  group: string;
  /** Topics to sample; default: every topic the group has committed offsets for. */
  topics?: readonly string[];
  /** Lag against the last stable offset (default) or the high watermark. */
  readCommitted?: boolean;
  /** Also read the timestamp of the next unprocessed record of each lagging partition. */
  timeLag?: boolean;
  /** Longest wait for the next records' timestamps. Default 5000. */
  timeLagTimeoutMs?: number;
}

/** One partition's sample, by topic and partition. */
export interface PartitionSample {
  topic: string;
  partition: number;
  sample: LagSample;
}

type Consumer = RdKafka.KafkaConsumer;

export class LagSampler {
  readonly #o: LagSamplerOptions;
  readonly #admin: KafkaAdmin;
  #topics: string[] | undefined;
  #reader: Promise<Consumer> | undefined;
  /** The partitions of the last sample. */
  #known: { topic: string; partition: number }[] = [];

  constructor(o: LagSamplerOptions) {
    this.#o = o;
    this.#admin = new KafkaAdmin(o.properties);
    if (o.topics !== undefined) this.#topics = [...o.topics];
  }

  /** The topics sampled: given, or those the group committed to (fixed at the first sample). */
  async topics(): Promise<string[]> {
    if (this.#topics !== undefined) return this.#topics;
    const committed = await this.#admin.groupOffsets(this.#o.group);
    const topics = [...committed].filter(([, m]) => m.size > 0).map(([t]) => t);
    if (topics.length === 0)
      throw new RedfenceError(
        'RF_INVALID_OPTIONS',
        `group ${JSON.stringify(this.#o.group)} has no committed offsets: name the topics with --topic`,
      );
    this.#topics = topics.sort();
    return this.#topics;
  }

  /** Checks the given topics exist (RF_TOPIC_MISSING otherwise). */
  async checkTopics(): Promise<void> {
    const topics = await this.topics();
    const found = await this.#admin.describeTopics(topics);
    const missing = topics.filter((t) => !found.has(t));
    if (missing.length > 0)
      throw new RedfenceError('RF_TOPIC_MISSING', `no such topic: ${missing.join(', ')}`, {
        details: { topics: missing },
      });
  }

  /** One sample of every partition of the topics; a topic whose offsets cannot be read: `error` set. */
  async sample(): Promise<PartitionSample[]> {
    const topics = await this.topics();
    const at = Date.now();
    let committed: Map<string, Map<number, number>>;
    let owners: { owned: Set<string> } | undefined;
    try {
      [committed, owners] = await Promise.all([
        this.#admin.groupOffsets(this.#o.group, topics),
        this.#admin.groupOwners(this.#o.group).catch(() => undefined),
      ]);
    } catch (err) {
      // a failed read in a window already started (--watch) is ERR for the partitions it had
      if (RedfenceError.is(err, 'RF_KAFKA_AUTH') || this.#known.length === 0) throw err;
      const error = (err as Error)?.message ?? String(err);
      return this.#known.map(({ topic, partition }) => ({
        topic,
        partition,
        sample: { at, committed: undefined, end: undefined, error },
      }));
    }
    const out: PartitionSample[] = [];
    for (const topic of topics) {
      let ends: Map<number, number>;
      try {
        ends = await this.#admin.endOffsets(topic, this.#o.readCommitted !== false);
      } catch (err) {
        if (RedfenceError.is(err, 'RF_KAFKA_AUTH')) throw err;
        const known = committed.get(topic) ?? new Map<number, number>();
        const error = (err as Error)?.message ?? String(err);
        for (const [partition, c] of known)
          out.push({ topic, partition, sample: { at, committed: c, end: undefined, error } });
        continue;
      }
      const c = committed.get(topic);
      for (const [partition, end] of [...ends].sort((a, b) => a[0] - b[0])) {
        const sample: LagSample = {
          at,
          committed: c?.get(partition),
          end,
          ...(owners === undefined ? {} : { owned: owners.owned.has(`${topic}:${partition}`) }),
        };
        out.push({ topic, partition, sample });
      }
    }
    if (this.#o.timeLag === true) await this.#addTimes(out);
    this.#known = out.map(({ topic, partition }) => ({ topic, partition }));
    return out;
  }

  /** Sets `nextRecordTime` of each lagging partition from the record at its committed offset. */
  async #addTimes(samples: PartitionSample[]): Promise<void> {
    const lagging = samples.filter(
      (s) =>
        s.sample.committed !== undefined && s.sample.end !== undefined && s.sample.end > s.sample.committed,
    );
    if (lagging.length === 0) return;
    const reader = await this.#consumer();
    const key = (t: string, p: number) => `${t}:${p}`;
    const want = new Map(lagging.map((s) => [key(s.topic, s.partition), s]));
    reader.assign(
      lagging.map((s) => ({ topic: s.topic, partition: s.partition, offset: s.sample.committed })),
    );
    const deadline = Date.now() + (this.#o.timeLagTimeoutMs ?? 5000);
    try {
      while (want.size > 0 && Date.now() < deadline) {
        const messages = await new Promise<RdKafka.Message[]>((resolve, reject) =>
          reader.consume(100, (err, m) => (err ? reject(err) : resolve(m))),
        );
        for (const m of messages) {
          const s = want.get(key(m.topic, m.partition));
          if (s === undefined || m.timestamp === undefined) continue;
          (s as { sample: LagSample }).sample = { ...s.sample, nextRecordTime: m.timestamp };
          want.delete(key(m.topic, m.partition));
        }
      }
    } finally {
      reader.unassign();
    }
  }

  /** A consumer that only assigns: a group id of its own, never joined (no subscribe), never committing. */
  #consumer(): Promise<Consumer> {
    this.#reader ??= (async () => {
      const c = new RdKafka.KafkaConsumer(
        {
          ...this.#o.properties,
          'group.id': `redfence-lag-${randomBytes(6).toString('hex')}`,
          'enable.auto.commit': false,
          'enable.auto.offset.store': false,
          'isolation.level': this.#o.readCommitted === false ? 'read_uncommitted' : 'read_committed',
        } as RdKafka.ConsumerGlobalConfig,
        {},
      );
      await connectWatched(c, 'lag reader', {
        brokers: String(this.#o.properties['bootstrap.servers'] ?? 'the bootstrap servers'),
      });
      c.setDefaultConsumeTimeout(200);
      return c;
    })();
    return this.#reader;
  }

  async close(): Promise<void> {
    const reader = this.#reader;
    this.#reader = undefined;
    if (reader !== undefined) {
      const c = await reader.catch(() => undefined);
      if (c !== undefined) await new Promise<void>((r) => c.disconnect(() => r()));
    }
    await this.#admin.close();
  }
}
