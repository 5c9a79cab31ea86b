/**
 * A batch's Kafka step (produce + commit, or the transaction) runs while the next batch is applied in
 * Redis. When that step fails (injected here, on the real broker: an aborted transaction, a commit or a
 * produce that throws), the batch and the one after it are delivered again and the fence answers
 * REEMIT for what they applied: the run still ends with exact state, committed offsets at the end, and
 * (exactly-once) one committed output per order or (at-least-once) at least one.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { defineProcessor, Processor } from '../../src/index.js';
import { ConfluentKafka } from '../../src/kafka/confluent.js';
import type { CommitOffset, ConsumerHandlers, OutRecord } from '../../src/kafka/types.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import {
  committedOffsets,
  createTopics,
  endOffsets,
  pollUntil,
  produce,
  readToEnd,
} from '../helpers/kafka.js';
import { assertPerKey, countOf, countsUpTo } from '../helpers/outputs.js';

const PARTITIONS = 4;
const ORDERS = 2000;

/** The default adapter, failing the Kafka steps whose call numbers are listed (1-based). */
class FailingKafka extends ConfluentKafka {
  calls = 0;
  injected = 0;
  /** Outputs (and dead letters) per Kafka step. */
  readonly stepRecords: number[] = [];
  readonly #failAt: Set<number>;
  readonly #kind: 'transaction' | 'commit' | 'produce';
  /** Set: every Kafka step waits until two more batches have been delivered (or the input is all out). */
  readonly #holdUntilEnds: Map<number, number> | undefined;
  /** Next offset after the highest delivered record, per partition. */
  readonly #delivered = new Map<number, number>();
  #batches = 0;
  #onDelivery: (() => void)[] = [];

  constructor(
    groupId: string,
    kind: 'transaction' | 'commit' | 'produce',
    failAt: number[],
    holdUntilEnds?: Map<number, number>,
  ) {
    super({
      brokers: KAFKA_BROKERS.split(','),
      groupId,
      sessionTimeoutMs: 6000,
      maxBatchSize: 100,
      ...(kind === 'transaction' ? { transactionalId: `${groupId}-t` } : {}),
    });
    this.#kind = kind;
    this.#failAt = new Set(failAt);
    this.#holdUntilEnds = holdUntilEnds;
  }

  override async start(topics: string[], handlers: ConsumerHandlers): Promise<void> {
    return super.start(topics, {
      ...handlers,
      onBatch: (topic, partition, records, hw) => {
        this.#batches++;
        const next = Number(records.at(-1)?.offset ?? -1) + 1;
        this.#delivered.set(partition, Math.max(this.#delivered.get(partition) ?? 0, next));
        for (const wake of this.#onDelivery.splice(0)) wake();
        return handlers.onBatch(topic, partition, records, hw);
      },
    });
  }

  #allDelivered(ends: Map<number, number>): boolean {
    for (const [p, end] of ends) if ((this.#delivered.get(p) ?? 0) < end) return false;
    return true;
  }

  /**
   * A slow Kafka step: it goes on only once two more batches were delivered (they are applied
   * meanwhile and go together in the next step), or once the whole input has been delivered.
   */
  async #slow(): Promise<void> {
    const ends = this.#holdUntilEnds;
    if (ends === undefined) return;
    const until = this.#batches + 2;
    while (this.#batches < until && !this.#allDelivered(ends))
      await new Promise<void>((wake) => this.#onDelivery.push(wake));
  }

  #fails(kind: string): boolean {
    if (kind !== this.#kind) return false;
    this.calls++;
    if (!this.#failAt.has(this.calls)) return false;
    this.injected++;
    return true;
  }

  override async produceTransactionally(
    records: readonly OutRecord[],
    offsets: readonly CommitOffset[],
    beforeCommit?: () => void,
  ): Promise<void> {
    const fail = this.#fails('transaction');
    this.stepRecords.push(records.length);
    await this.#slow();
    // the outputs and offsets are in the open transaction; the failure makes the adapter abort it
    return super.produceTransactionally(records, offsets, () => {
      beforeCommit?.();
      if (fail) throw new Error('injected: transaction step failed');
    });
  }

  override async commit(offsets: readonly CommitOffset[]): Promise<void> {
    if (this.#fails('commit')) throw new Error('injected: commit failed');
    return super.commit(offsets);
  }

  override async produce(records: readonly OutRecord[], handedOver?: () => void): Promise<void> {
    this.stepRecords.push(records.length);
    await this.#slow();
    if (this.#fails('produce')) throw new Error('injected: produce failed');
    return super.produce(records, handedOver);
  }
}

interface Totals {
  total: number;
  count: number;
}

describe('a failed Kafka step', { timeout: 180_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  // slow: every Kafka step waits for two more batches (100 records each) to be delivered, so they are
  // applied meanwhile and grouped
  // into the next step, at most groupCommitRecords of them waiting.
  const cases = [
    { mode: 'exactly-once', kind: 'transaction', failAt: [3, 4, 9] },
    { mode: 'at-least-once', kind: 'commit', failAt: [3, 7] },
    { mode: 'at-least-once', kind: 'produce', failAt: [2, 5] },
    { mode: 'exactly-once', kind: 'transaction', failAt: [3, 5], slow: true, groupCommitRecords: 300 },
    { mode: 'at-least-once', kind: 'produce', failAt: [3], slow: true, groupCommitRecords: 300 },
  ] as const;
  for (const c of cases) {
    const grouped = 'slow' in c ? `, slow steps (grouped, at most ${c.groupCommitRecords} waiting)` : '';
    it(`${c.mode}: ${c.kind} failures at steps ${c.failAt.join(', ')}${grouped} redeliver; results stay exact`, async () => {
      const ns = uniqueName(`kfail-${c.kind}`);
      const drop = await createTopics([
        { topic: `${ns}-orders`, partitions: PARTITIONS },
        { topic: `${ns}-totals`, partitions: PARTITIONS },
        { topic: `${ns}-orders.DLT`, partitions: 1 },
      ]);
      try {
        const want = new Map<string, Totals>();
        const messages = [];
        for (let i = 0; i < ORDERS; i++) {
          const customer = `c-${(i * 7) % 60}`;
          const amount = 1 + ((i * 131) % 997);
          const t = want.get(customer) ?? { total: 0, count: 0 };
          want.set(customer, { total: t.total + amount, count: t.count + 1 });
          messages.push({ key: customer, value: JSON.stringify({ customer, amount }) });
        }
        await produce(`${ns}-orders`, messages);
        const kafka = new FailingKafka(
          `${ns}-group`,
          c.kind,
          [...c.failAt],
          'slow' in c ? await endOffsets(`${ns}-orders`) : undefined,
        );
        const warnings: string[] = [];
        const p = new Processor<{ customer: string; amount: number }>({
          definition: defineProcessor<{ customer: string; amount: number }, Totals>({
            input: `${ns}-orders`,
            output: `${ns}-totals`,
            store: ns,
            reduce: (s, o) => ({ state: { total: (s?.total ?? 0) + o.amount, count: (s?.count ?? 0) + 1 } }),
          }) as never,
          redis,
          mode: c.mode,
          groupId: `${ns}-group`,
          kafka,
          // Without the slow steps, every batch gets its own Kafka step (groupCommitRecords 0): grouping
          // by timing would make fewer steps than the last failure's number on a busy machine.
          groupCommitRecords: 'groupCommitRecords' in c ? c.groupCommitRecords : 0,
          logger: {
            debug: () => undefined,
            info: () => undefined,
            warn: (_o, msg) => warnings.push(String(msg)),
            error: (_o, msg) => warnings.push(String(msg)),
          },
        });
        await p.start();
        const ends = await endOffsets(`${ns}-orders`);
        try {
          await pollUntil(
            'committed offsets reach the end offsets',
            async () => {
              const now = await committedOffsets(`${ns}-group`, `${ns}-orders`);
              for (const [partition, end] of ends) if ((now.get(partition) ?? -1) !== end) return false;
              return true;
            },
            120_000,
          );
        } finally {
          await p.close();
        }
        assert.equal(kafka.injected, c.failAt.length, 'every injected failure happened');
        if ('groupCommitRecords' in c) {
          // several 100-record batches went in one step, never more than the limit plus one batch
          const most = Math.max(...kafka.stepRecords);
          assert.ok(most > 100, `batches were grouped (largest step ${most} records)`);
          assert.ok(most <= c.groupCommitRecords + 100, `at most the limit waited (largest step ${most})`);
        }
        assert.equal(
          warnings.filter((w) => w.startsWith('produce/commit failed')).length,
          c.failAt.length,
          `each failure logged once: ${JSON.stringify(warnings)}`,
        );
        assert.ok((p.counts().verdicts.REEMIT ?? 0) > 0, 'the redelivered batches were answered REEMIT');
        for (const [customer, t] of want) {
          const s = await p.fence.read(customer);
          assert.deepEqual(JSON.parse(s?.value?.toString() ?? 'null'), t, `state of ${customer}`);
        }
        // every output written (read to the end offsets): per customer, counts 1..n once each
        // (exactly-once) or each at least once (at-least-once), and no other key
        const outputs = await readToEnd(`${ns}-totals`);
        assertPerKey(
          c.mode === 'exactly-once' ? 'one output per order' : 'at least one output per order',
          outputs,
          countOf,
          countsUpTo(new Map([...want].map(([customer, t]) => [customer, t.count]))),
          c.mode === 'exactly-once' ? {} : { duplicates: 'allowed' },
        );
      } finally {
        await drop();
      }
    });
  }
});
