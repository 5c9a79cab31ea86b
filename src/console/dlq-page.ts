/**
 * Paged reads of a dead-letter topic for the console: one partition at a time, from an offset, at most
 * `limit` matching records and at most `scan` records read per page, so a page costs the same with
 * 100 or 100,000 dead letters (no full scan per refresh). One log reader (src/kafka/log-reader.ts:
 * assigned, read_committed, never committing) is kept open and used by one page at a time.
 */

import { type DltRecord, toDltRecord } from '../dead-letter/read.js';
import { type DlqFilter, matches } from '../dead-letter/replay.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { type ClientSettings, commonProperties } from '../kafka/client-config.js';
import { LogReader } from '../kafka/log-reader.js';

export interface DlqPage {
  records: DltRecord[];
  /** The offset the next page starts at; undefined at the end. */
  next: number | undefined;
  low: number;
  high: number;
  scanned: number;
}

const CHUNK = 1000;
const PARTITIONS_TTL_MS = 10_000;

export class DlqPager {
  readonly #client: Omit<ClientSettings, 'groupId'>;
  readonly #timeoutMs: number;
  #reader: Promise<LogReader> | undefined;
  /** The partition list's watermarks (one batched call per topic); opened on first use. */
  #admin: KafkaAdmin | undefined;
  #queue: Promise<unknown> = Promise.resolve();
  readonly #parts = new Map<
    string,
    { at: number; value: Promise<Array<{ partition: number; low: number; high: number }>> }
  >();

  constructor(client: Omit<ClientSettings, 'groupId'>, timeoutMs: number) {
    this.#client = client;
    this.#timeoutMs = timeoutMs;
  }

  /**
   * Each partition's earliest offset and end, at most `PARTITIONS_TTL_MS` old, from the admin client's
   * batched watermarks: a metadata request and two ListOffsets requests however many partitions the
   * topic has (a topic of 1,000 partitions once cost 1,001 calls of the log reader).
   */
  partitions(topic: string): Promise<Array<{ partition: number; low: number; high: number }>> {
    const cached = this.#parts.get(topic);
    if (cached !== undefined && Date.now() - cached.at < PARTITIONS_TTL_MS) return cached.value;
    this.#admin ??= new KafkaAdmin(commonProperties({ ...this.#client, groupId: 'redfence-console' }));
    const value = this.#admin
      .watermarks(topic, { timeoutMs: this.#timeoutMs, missing: `dead-letter topic ${topic} does not exist` })
      .then((w) => [...w].map(([partition, { low, high }]) => ({ partition, low, high })));
    this.#parts.set(topic, { at: Date.now(), value });
    value.catch(() => this.#parts.delete(topic));
    return value;
  }

  /** One page of one partition (see the file comment). */
  page(o: {
    topic: string;
    partition: number;
    from: number | undefined;
    limit: number;
    scan: number;
    filter: DlqFilter;
  }): Promise<DlqPage> {
    return this.#one(async (r) => {
      const { low, high } = await r.watermarks(o.topic, o.partition);
      let at = Math.max(low, o.from ?? low);
      const records: DltRecord[] = [];
      let scanned = 0;
      // a read as long as the records still wanted, doubled (up to CHUNK) after reads that matched none
      let span = Math.max(o.limit, 1);
      while (at < high && records.length < o.limit && scanned < o.scan) {
        const before = records.length;
        const end = Math.min(high, at + Math.min(span, o.scan - scanned));
        let next = end;
        await r.read(o.topic, o.partition, at, end, (m) => {
          scanned++;
          if (records.length >= o.limit) return;
          const d = toDltRecord(m);
          if (matches(d, o.filter)) {
            records.push(d);
            if (records.length >= o.limit) next = m.offset + 1;
          }
        });
        at = next;
        span = records.length === before ? Math.min(CHUNK, span * 2) : Math.max(o.limit - records.length, 1);
      }
      return { records, next: at < high ? at : undefined, low, high, scanned };
    });
  }

  async close(): Promise<void> {
    const r = this.#reader;
    this.#reader = undefined;
    const admin = this.#admin;
    this.#admin = undefined;
    await this.#queue.catch(() => undefined);
    const reader = await r?.catch(() => undefined);
    await Promise.all([reader?.close(), admin?.close()]);
  }

  #one<T>(fn: (r: LogReader) => Promise<T>): Promise<T> {
    const run = this.#queue.then(async () => {
      this.#reader ??= LogReader.open({ client: this.#client, timeoutMs: this.#timeoutMs });
      const reader = await this.#reader.catch((err: unknown) => {
        this.#reader = undefined;
        throw err;
      });
      return fn(reader);
    });
    this.#queue = run.catch(() => undefined);
    return run;
  }
}
