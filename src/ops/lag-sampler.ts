/**
 * Samples any consumer group's lag through the Kafka admin client (src/kafka/admin.ts, so a secured
 * broker and a refused password behave as for the processor): the group's committed offsets
 * (OffsetFetch), each topic's end (ListOffsets with isolation level READ_COMMITTED: the last stable
 * offset, or READ_UNCOMMITTED: the high watermark), which partitions the group's live members own
 * (DescribeGroups: no owner turns a stuck partition from STALL into STOP) and, when asked, the timestamp
 * of the next unprocessed record (one record fetched at the committed offset by the library's log
 * reader, src/kafka/log-reader.ts, which only assigns, never joins or commits: a fetch per lagging
 * partition, so it is optional).
 */
import { RedfenceError } from '../errors/index.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { LogReader } from '../kafka/log-reader.js';
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

export class LagSampler {
  readonly #o: LagSamplerOptions;
  readonly #admin: KafkaAdmin;
  #topics: string[] | undefined;
  #reader: Promise<LogReader> | undefined;
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
    const timeoutMs = this.#o.timeLagTimeoutMs ?? 5000;
    // a reader that only assigns: a group id of its own, never joined, never committing
    this.#reader ??= LogReader.open({
      client: { properties: this.#o.properties },
      readCommitted: this.#o.readCommitted !== false,
      timeoutMs: Math.max(timeoutMs, 10_000),
    });
    const reader = await this.#reader;
    const found = await reader.first(
      lagging.map((s) => ({ topic: s.topic, partition: s.partition, offset: s.sample.committed as number })),
      timeoutMs,
    );
    for (const s of lagging) {
      const m = found.get(`${s.topic}:${s.partition}`);
      if (m === undefined || m.timestamp < 0) continue;
      (s as { sample: LagSample }).sample = { ...s.sample, nextRecordTime: m.timestamp };
    }
  }

  async close(): Promise<void> {
    const reader = this.#reader;
    this.#reader = undefined;
    if (reader !== undefined) {
      const r = await reader.catch(() => undefined);
      await r?.close();
    }
    await this.#admin.close();
  }
}
