/**
 * Partitions added to the input, on the real broker and Redis. Records are placed by murmur2 under the
 * count the producer saw, so after an expansion a key's old records sit on one partition and its new
 * ones may sit on another. The processor must take both: a backlog written before the expansion (the
 * store remembers every count it was written under), and a partition added while it runs (the count is
 * read again when that partition is assigned). Keys that moved are answered REBASE; none of these
 * records is dead-lettered as "wrong partition", and every key's count is exact.
 * (Before, the count was read once at start: records on an added partition, and a backlog placed under
 * the old count after a restart, all went to the dead-letter topic.)
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { defineProcessor, Processor } from '../../src/index.js';
import { partitionFor } from '../../src/partitioner/index.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { addPartitions, createTopics, pollUntil, produce, readToEnd } from '../helpers/kafka.js';
import { assertPerKey, countOf, countsUpTo } from '../helpers/outputs.js';

describe('partitions added to the input', { timeout: 150_000 }, () => {
  const redis = standalone();
  after(() => redis.disconnect());

  it('a backlog placed under the old count and a partition added while running are both processed exactly', async (t) => {
    const ns = uniqueName('addparts');
    const input = `${ns}-in`;
    t.after(
      await createTopics([
        { topic: input, partitions: 2 },
        { topic: `${ns}-out`, partitions: 2 },
        { topic: `${input}.DLT`, partitions: 2 },
      ]),
    );
    const definition = defineProcessor<{ n: number }, number>({
      input,
      output: `${ns}-out`,
      store: ns,
      operation: () => ({ op: 'add', by: 1 }),
    });
    const processor = (instance: string) =>
      new Processor({
        definition,
        redis,
        kafka: {
          brokers: KAFKA_BROKERS.split(','),
          // the consumer sees added partitions within a second (librdkafka's default is 5 minutes)
          config: { 'topic.metadata.refresh.interval.ms': '1000' },
        },
        instanceId: instance,
        mode: 'exactly-once',
        watchdog: false,
      });
    const keys = Array.from({ length: 40 }, (_, i) => `k-${i}`);
    const round = () => keys.map((key) => ({ key, value: '{"n":1}' }));
    const moved = (from: number, to: number) =>
      keys.filter((k) => partitionFor(Buffer.from(k), from) !== partitionFor(Buffer.from(k), to));
    assert.ok(moved(2, 4).length > 0 && moved(4, 6).length > 0, 'some keys move at each expansion');

    // 1. written and processed under 2 partitions
    await produce(input, round());
    const a = processor('A');
    await a.start();
    await pollUntil('round 1 committed', () => a.counts().records === keys.length, 60_000);
    await a.close();

    // 2. a backlog placed under 2 partitions, then the topic grows to 4 and more is written
    await produce(input, round());
    await addPartitions(input, 4);
    await produce(input, round());

    // 3. a new instance starts on 4 partitions with the backlog still there; while it runs the topic
    // grows to 6 and more is written
    const b = processor('B');
    await b.start();
    try {
      await pollUntil('rounds 2 and 3 committed', () => b.counts().records === 2 * keys.length, 60_000);
      await addPartitions(input, 6);
      await pollUntil('partitions 4 and 5 assigned', () => b.assignment.length === 6, 30_000);
      await produce(input, round());
      await pollUntil('round 4 committed', () => b.counts().records === 3 * keys.length, 60_000);
      const counts = b.counts();
      assert.equal(counts.deadLetters, 0, 'nothing dead-lettered');
      assert.ok(
        (counts.verdicts.REBASE ?? 0) > 0,
        `keys that moved were answered REBASE: ${JSON.stringify(counts)}`,
      );
      assert.equal(b.inputPartitions, 6, 'the count was read again');
    } finally {
      await b.close();
    }
    assert.deepEqual(await readToEnd(`${input}.DLT`), [], 'the dead-letter topic is empty');
    const outputs = await readToEnd(`${ns}-out`);
    assertPerKey('outputs', outputs, countOf, countsUpTo(new Map(keys.map((k) => [k, 4]))));
    const recorded = await redis.zrange(`rf:{${ns}:${input}}:partition-counts`, '0', '-1');
    assert.deepEqual(recorded, ['2', '4', '6'], 'every count the store was written under');
  });
});
