/**
 * A node downstream of an aggregation that throws, on the real broker and Redis (exactly-once): a count
 * whose updates go to one topic, then through a mapValues that throws on some keys' second count. Each
 * such record goes to the dead-letter topic with reason `processing-error`, naming the node and the
 * count, marked `redfence-state-applied: true`: its count stays (the key's next count is 3), that
 * update's outputs are not made (in the branch before the throw too). The partition goes on past them
 * (every offset committed), where before this rule the batch failed on every delivery; the outputs equal
 * the reference model's. `dlq replay` leaves these dead letters out unless told (a count counted twice).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { STATE_APPLIED } from '../../src/dead-letter/headers.js';
import { type DltRecord, readDeadLetters } from '../../src/dead-letter/read.js';
import { readDeadLetterHeaders } from '../../src/dead-letter/read-headers.js';
import { replay } from '../../src/dead-letter/replay.js';
import { type BuiltTopology, serdes, topology } from '../../src/topology/index.js';
import { type ModelInput, runModel } from '../../src/topology/model.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { createTopics, produce, readToEnd } from '../helpers/kafka.js';
import { modelRows, perKey, runToCommitted, topicRows } from './topology-helpers.js';

const s = serdes.string();
const T0 = Date.UTC(2026, 0, 1);

/** Counts per customer to `-counts`; then tens of them to `-tens`, refusing a count of 2 for keys starting with `x`. */
function counts(ns: string): BuiltTopology {
  const t = topology({ applicationId: ns });
  const updates = t
    .stream<string, { amount: number }>(`${ns}-orders`, { key: s })
    .groupByKey()
    .count({ name: 'n' })
    .toStream();
  updates.to(`${ns}-counts`, { key: s });
  updates
    .mapValues((n, k) => {
      if (n === 2 && k.startsWith('x')) throw new TypeError('a second count is refused');
      return n * 10;
    })
    .to(`${ns}-tens`, { key: s });
  return t.build();
}

describe('topology processor: a node downstream of an aggregation that throws makes a dead letter, its state kept', {
  timeout: 120_000,
}, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  it('a throwing mapValues after a count: state-applied dead letters naming the node; outputs = model; replay skips them', async () => {
    const ns = uniqueName('tdown');
    const orders = `${ns}-orders`;
    const dlt = `${orders}.DLT`;
    const keep = { 'retention.ms': '-1' };
    const cleanup = await createTopics([
      { topic: orders, partitions: 1, config: keep },
      { topic: `${ns}-counts`, partitions: 1, config: keep },
      { topic: `${ns}-tens`, partitions: 1, config: keep },
      { topic: dlt, partitions: 1, config: keep },
    ]);
    try {
      const keys = ['a', 'x1', 'a', 'x2', 'x1', 'a', 'x2', 'x1', 'b', 'x2'];
      const input: ModelInput[] = keys.map((key, i) => ({
        topic: orders,
        partition: 0,
        offset: i,
        key: Buffer.from(key),
        value: Buffer.from(JSON.stringify({ amount: i })),
        timestamp: T0 + i * 1000,
      }));
      await produce(
        orders,
        input.map((r) => ({
          key: r.key?.toString() as string,
          value: r.value as Buffer,
          partition: 0,
          timestamp: String(r.timestamp),
        })),
      );
      const built = counts(ns);
      const mapper = built.nodes.find((n) => n.kind === 'mapValues')?.name as string;
      const count = built.nodes.find((n) => n.kind === 'aggregate')?.name as string;
      const model = runModel(built, input);
      // x1's second record is at offset 4, x2's at offset 6
      assert.deepEqual(
        model.failed.map((d) => [d.source.offset, d.node, d.stateApplied, d.downstreamOf]),
        [
          [4, mapper, true, count],
          [6, mapper, true, count],
        ],
        'the model: the two second counts of x keys',
      );
      await runToCommitted(built, redis, orders, 'exactly-once', 3);
      const rows = await topicRows([`${ns}-counts`, `${ns}-tens`]);
      assert.deepEqual(perKey(rows), perKey(modelRows(model)), 'counts and tens equal the model');
      const of = (key: string) =>
        rows.filter((r) => r.key === key).map((r) => `${r.topic.slice(ns.length)} ${r.value}`);
      assert.deepEqual(
        of('x1'),
        ['-counts 1', '-counts 3', '-tens 10', '-tens 30'],
        "x1's second count is in neither topic, its third is 3: the count was kept",
      );
      assert.deepEqual(of('a'), ['-counts 1', '-counts 2', '-counts 3', '-tens 10', '-tens 20', '-tens 30']);
      const dead = await readToEnd(dlt);
      const h = dead.map((d) => readDeadLetterHeaders(d.headers));
      assert.deepEqual(
        h.map((x) => [Number(x.originalOffset), x.reason]),
        [
          [4, 'processing-error'],
          [6, 'processing-error'],
        ],
      );
      for (const [i, x] of h.entries()) {
        assert.equal(
          x.exceptionMessage,
          `topology node ${mapper} threw downstream of ${count}; the record's state changes were made, its outputs from there were not; a second count is refused`,
        );
        assert.match(x.exceptionCauseFqcn ?? '', /TypeError/);
        assert.equal(String(dead[i]?.headers[STATE_APPLIED]), 'true');
      }
      const records: DltRecord[] = [];
      await readDeadLetters({
        client: { brokers: [KAFKA_BROKERS] },
        topic: dlt,
        timeoutMs: 30_000,
        onRecord: (r) => {
          records.push(r);
        },
      });
      assert.equal(records.length, 2);
      const sent: string[] = [];
      const base = {
        dltTopic: dlt,
        redis,
        dryRun: false,
        batch: 10,
        markerTtlSeconds: 600,
        producer: {
          produce: async (out: readonly { topic: string }[]) => {
            for (const x of out) sent.push(x.topic);
          },
        },
      };
      const skipped = await replay(records, base);
      assert.deepEqual(
        [skipped.published, skipped.stateApplied, sent.length],
        [0, 2, 0],
        'left out by default',
      );
      const told = await replay(records, { ...base, includeStateApplied: true });
      assert.deepEqual([told.published, told.stateApplied], [2, 0]);
      assert.deepEqual(sent, [orders, orders]);
    } finally {
      await cleanup();
    }
  });
});
