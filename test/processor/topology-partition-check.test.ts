/**
 * A topology's partition check on the real broker and Redis (docs/streams.md, "The partition check"):
 * orders produced to a 3-partition topic, some with an explicit partition their key does not hash to,
 * run exactly-once through a count per key beside a copy of every order. Each misplaced order is one
 * dead letter with the processor's reason (`wrong-partition`) and words (`key hashes to partition X of
 * 3, record is on P`), its source partition and offset; it is neither counted nor copied; the output
 * topics (read_committed) equal the reference model's per key; the topic's count is recorded in Redis.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { readDeadLetterHeaders } from '../../src/dead-letter/read-headers.js';
import { partitionFor } from '../../src/partitioner/index.js';
import { serdes, topology } from '../../src/topology/index.js';
import { type ModelInput, runModel } from '../../src/topology/model.js';
import { standalone, uniqueName } from '../helpers/env.js';
import { createTopics, readToEnd } from '../helpers/kafka.js';
import { assertOutputsPerKey, PARTITIONS, produceTopic, runToCommitted } from './topology-helpers.js';

const s = serdes.string();

describe('a topology partition check on the real broker', { timeout: 180_000 }, () => {
  const redis = standalone();
  after(() => redis.disconnect());

  it('misplaced orders are dead letters (wrong-partition), neither counted nor copied; the rest equals the model', async () => {
    const ns = uniqueName('tpc');
    const topic = `${ns}-orders`;
    const t = topology({ applicationId: ns });
    const orders = t.stream<string, { amount: number }>(topic, { key: s });
    orders.to(`${ns}-copy`, { key: s });
    orders.groupByKey().count({ name: 'per-customer' }).toStream().to(`${ns}-counts`, { key: s });
    const built = t.build();
    const keep = { 'retention.ms': '-1' };
    const cleanup = await createTopics([
      { topic, partitions: PARTITIONS, config: keep },
      { topic: `${ns}-copy`, partitions: PARTITIONS, config: keep },
      { topic: `${ns}-counts`, partitions: PARTITIONS, config: keep },
      { topic: `${topic}.DLT`, partitions: 1, config: keep },
    ]);
    after(cleanup);

    const next = new Map<number, number>();
    const inputs: ModelInput[] = [];
    for (let i = 0; i < 120; i++) {
      const key = `c${i % 9}`;
      const misplaced = i % 17 === 5;
      const partition = (partitionFor(key, PARTITIONS) + (misplaced ? 1 : 0)) % PARTITIONS;
      const offset = next.get(partition) ?? 0;
      next.set(partition, offset + 1);
      const value = Buffer.from(JSON.stringify({ amount: i }));
      inputs.push({
        topic,
        partition,
        offset,
        key: Buffer.from(key),
        value,
        timestamp: 1_700_000_000_000 + i,
      });
    }
    const model = runModel(built, inputs, { partitions: { [topic]: PARTITIONS } });
    assert.equal(model.misplaced.length, 7);
    await produceTopic(topic, inputs);
    await runToCommitted(built, redis, topic, 'exactly-once');

    await assertOutputsPerKey([`${ns}-copy`, `${ns}-counts`], model);
    const dead = (await readToEnd(`${topic}.DLT`)).map((r) => {
      const h = readDeadLetterHeaders(r.headers);
      return [h.reason, h.originalTopic, h.originalPartition, Number(h.originalOffset), h.exceptionMessage];
    });
    const want = model.misplaced.map((m) => [
      'wrong-partition',
      topic,
      m.source.partition,
      m.source.offset,
      `key hashes to partition ${m.expected} of ${PARTITIONS}, record is on ${m.source.partition}`,
    ]);
    const order = (a: unknown[], b: unknown[]) => String(a).localeCompare(String(b));
    assert.deepEqual(dead.sort(order), want.sort(order));
    assert.deepEqual(await redis.zrange(`rf:{${ns}:${topic}}:partition-counts`, '0', '-1'), [
      String(PARTITIONS),
    ]);
  });
});
