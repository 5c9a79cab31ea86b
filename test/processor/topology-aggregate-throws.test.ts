/**
 * A reducer that throws on some records, on the real broker and Redis (exactly-once): each such record
 * goes to the dead-letter topic with reason `processing-error`, naming the aggregation and what it threw,
 * and none of its effects is made (neither its reduce nor the count of the same key beside it): the
 * output topics equal the reference model's, which runs again without such a record. The throw depends
 * on the total it meets, so the record made a dead letter changes whether later ones throw. The
 * partition goes on past them (every offset committed), where before this rule the batch failed on
 * every restart.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { readDeadLetterHeaders } from '../../src/dead-letter/read-headers.js';
import { type BuiltTopology, serdes, topology } from '../../src/topology/index.js';
import { type ModelInput, runModel } from '../../src/topology/model.js';
import { standalone, uniqueName } from '../helpers/env.js';
import { createTopics, produce, readToEnd } from '../helpers/kafka.js';
import { modelRows, perKey, runToCommitted, topicRows } from './topology-helpers.js';

const s = serdes.string();
const T0 = Date.UTC(2026, 0, 1);

/** Totals and counts per customer; the reducer refuses 13 on an odd total. */
function totals(ns: string): BuiltTopology {
  const t = topology({ applicationId: ns });
  const g = t.stream<string, { amount: number }>(`${ns}-orders`, { key: s }).groupByKey();
  g.reduce(
    (a, b) => {
      if (b.amount === 13 && a.amount % 2 === 1) throw new RangeError('13 on an odd total is refused');
      return { amount: a.amount + b.amount };
    },
    { name: 'totals' },
  )
    .toStream()
    .to(`${ns}-totals`, { key: s });
  g.count({ name: 'counts' }).toStream().to(`${ns}-counts`, { key: s });
  return t.build();
}

describe('topology processor: a record its reducer throws on is a dead letter, and the partition goes on', {
  timeout: 120_000,
}, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  it('a throwing reducer: processing-error naming the aggregation, none of its effects; counts = model', async () => {
    const ns = uniqueName('tthrow');
    const orders = `${ns}-orders`;
    const keep = { 'retention.ms': '-1' };
    const cleanup = await createTopics([
      { topic: orders, partitions: 1, config: keep },
      { topic: `${ns}-totals`, partitions: 1, config: keep },
      { topic: `${ns}-counts`, partitions: 1, config: keep },
      { topic: `${orders}.DLT`, partitions: 1, config: keep },
    ]);
    try {
      // totals: 1, [13 refused], 5, 7, [13 refused], 10, 23
      const amounts = [1, 13, 4, 2, 13, 3, 13];
      const input: ModelInput[] = amounts.map((amount, i) => ({
        topic: orders,
        partition: 0,
        offset: i,
        key: Buffer.from('c1'),
        value: Buffer.from(JSON.stringify({ amount })),
        timestamp: T0 + i * 1000,
      }));
      await produce(
        orders,
        input.map((r) => ({
          key: 'c1',
          value: r.value as Buffer,
          partition: 0,
          timestamp: String(r.timestamp),
        })),
      );
      const built = totals(ns);
      const reduce = built.nodes.find((n) => n.kind === 'aggregate' && n.store === 'totals')?.name as string;
      const model = runModel(built, input);
      assert.deepEqual(
        model.failed.map((d) => [d.source.offset, d.node]),
        [
          [1, reduce],
          [4, reduce],
        ],
        'the model: the two 13s met on an odd total',
      );
      await runToCommitted(built, redis, orders, 'exactly-once');
      const rows = await topicRows([`${ns}-totals`, `${ns}-counts`]);
      assert.deepEqual(perKey(rows), perKey(modelRows(model)), 'totals and counts equal the model');
      assert.deepEqual(
        rows.filter((r) => r.topic === `${ns}-totals`).map((r) => JSON.parse(r.value ?? 'null').amount),
        [1, 5, 7, 10, 23],
      );
      assert.deepEqual(
        rows.filter((r) => r.topic === `${ns}-counts`).map((r) => r.value),
        ['1', '2', '3', '4', '5'],
        'the refused records counted nothing beside their reduce',
      );
      const dead = await readToEnd(`${orders}.DLT`);
      const h = dead.map((d) => readDeadLetterHeaders(d.headers));
      assert.deepEqual(
        h.map((x) => [Number(x.originalOffset), x.reason]),
        [
          [1, 'processing-error'],
          [4, 'processing-error'],
        ],
      );
      for (const x of h) {
        assert.match(
          x.exceptionMessage ?? '',
          new RegExp(`topology node ${reduce} threw.*13 on an odd total is refused`),
        );
        assert.match(x.exceptionCauseFqcn ?? '', /RangeError/);
      }
      assert.deepEqual(
        dead.map((d) => d.value),
        ['{"amount":13}', '{"amount":13}'],
        'the records as they came',
      );
    } finally {
      await cleanup();
    }
  });
});
