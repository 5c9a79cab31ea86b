/**
 * Records a topology cannot walk, on the real broker and Redis (exactly-once): a value the source's JSON
 * serde cannot read, and a value whose flatMapValues throws after its first record already reached the
 * count. Each goes to the dead-letter topic with reason `processing-error`, naming the node that threw
 * and what it threw (its class in `kafka_dlt-exception-cause-fqcn`), and none of its effects is made: the
 * output topics equal the reference model's, which runs again without such a record. The partition goes
 * on past both (every offset committed), where before this rule the batch failed and the processor
 * stopped on the same record after every restart.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { readDeadLetterHeaders } from '../../src/dead-letter/read-headers.js';
import { type BuiltTopology, serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { type ModelInput, runModel } from '../../src/topology/model.js';
import { standalone, uniqueName } from '../helpers/env.js';
import { createTopics, produce, readToEnd, waitCommitted } from '../helpers/kafka.js';
import { perKey, processor } from './topology-helpers.js';

const s = serdes.string();
const MIN = 60_000;
const T0 = Date.UTC(2026, 0, 1);

/** Orders counted per customer in 5-minute windows; amount 13 counts twice, and throws before its second. */
function counts(ns: string): BuiltTopology {
  const t = topology({ applicationId: ns });
  t.stream<string, { amount: number }>(`${ns}-orders`, { key: s })
    .flatMapValues(
      function* (o) {
        yield o;
        if (o?.amount === 13) throw new RangeError('amount 13 is refused');
      },
      { name: 'explode' },
    )
    .groupByKey()
    .windowedBy(TimeWindows.ofSizeWithNoGrace(5 * MIN))
    .count({ name: 'order-counts' })
    .toStream()
    .map((w, n) => [w.key, { start: w.start, n }] as const)
    .to(`${ns}-counts`, { key: s });
  return t.build();
}

describe('topology processor: a record it cannot walk is a dead letter, and the partition goes on', {
  timeout: 120_000,
}, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  it('an unreadable value and a throwing flatMapValues: processing-error, none of their effects', async () => {
    const ns = uniqueName('tbad');
    const orders = `${ns}-orders`;
    const keep = { 'retention.ms': '-1' };
    const cleanup = await createTopics([
      { topic: orders, partitions: 1, config: keep },
      { topic: `${ns}-counts`, partitions: 1, config: keep },
      { topic: `${orders}.DLT`, partitions: 1, config: keep },
    ]);
    try {
      const values = ['{"amount":1}', '{"amount":2', '{"amount":13}', '{"amount":4}', '{"amount":5}'];
      const input: ModelInput[] = values.map((v, i) => ({
        topic: orders,
        partition: 0,
        offset: i,
        key: Buffer.from('c1'),
        value: Buffer.from(v),
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
      const built = counts(ns);
      const model = runModel(built, input);
      assert.deepEqual(
        model.failed.map((d) => [d.source.offset, d.node]),
        [
          [1, 'KSTREAM-SOURCE-0000000000'],
          [2, 'explode'],
        ],
        'the model: the unreadable value at its source, 13 at its flatMapValues',
      );
      const p = processor(built, redis, 'exactly-once');
      await p.start();
      try {
        await waitCommitted(p.groupId, orders, 60_000);
      } finally {
        await p.close();
      }
      const rows = (await readToEnd(`${ns}-counts`)).map((r) => ({
        ...r,
        topic: `${ns}-counts`,
        ts: r.timestamp,
      }));
      const expected = model.outputs.map((o) => ({
        topic: o.topic,
        key: o.key?.toString() ?? null,
        value: o.value?.toString() ?? null,
        ts: String(o.timestamp),
      }));
      assert.deepEqual(perKey(rows), perKey(expected), 'the counts: 1, 4 and 5 only (n = 1, 2, 3)');
      assert.deepEqual(
        rows.map((r) => JSON.parse(r.value ?? 'null').n),
        [1, 2, 3],
        'the throwing record counted nothing, its first flatMapValues record included',
      );
      const dead = await readToEnd(`${orders}.DLT`);
      assert.equal(dead.length, 2, 'two dead letters');
      const h = dead.map((d) => readDeadLetterHeaders(d.headers));
      assert.deepEqual(
        h.map((x) => [Number(x.originalOffset), x.reason]),
        [
          [1, 'processing-error'],
          [2, 'processing-error'],
        ],
      );
      assert.match(h[0]?.exceptionMessage ?? '', /topology node KSTREAM-SOURCE-0000000000 threw/);
      assert.match(h[0]?.exceptionCauseFqcn ?? '', /SyntaxError/);
      assert.match(h[1]?.exceptionMessage ?? '', /topology node explode threw.*amount 13 is refused/);
      assert.match(h[1]?.exceptionCauseFqcn ?? '', /RangeError/);
      assert.deepEqual(
        dead.map((d) => d.value),
        ['{"amount":2', '{"amount":13}'],
        'the records as they came',
      );
    } finally {
      await cleanup();
    }
  });
});
