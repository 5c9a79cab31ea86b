/**
 * A seek made while a consume call is in progress (the loop is almost always in one when it is idle)
 * must still lead to the records from the sought offset being handed over. Regression: the records of
 * a fetch during which a seek was made were dropped as stale, but a consume call in progress can
 * return records librdkafka fetched after the seek landed, from the new position; dropped, they were
 * never fetched again (the watchdog's recovery, a seek to the committed offsets of an idle consumer,
 * then recovered nothing: test/processor/watchdog-live failed about one run in ten under load). A short
 * `fetch.wait.max.ms` makes librdkafka fetch again within the consume call in progress, so without the
 * fix nearly every round here stays without its records. Real broker.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfluentKafka } from '../../src/kafka/confluent.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil, produce } from '../helpers/kafka.js';

const RECORDS = 40;
const ROUNDS = 8;

describe('ConfluentKafka: a seek during a fetch', { timeout: 120_000 }, () => {
  it('hands the records from the sought offset over again, every time', async (t) => {
    const topic = uniqueName('seek-during-fetch');
    t.after(await createTopics([{ topic, partitions: 1 }]));
    await produce(
      topic,
      Array.from({ length: RECORDS }, (_, i) => ({ key: `k${i}`, value: String(i), partition: 0 })),
    );
    const kafka = new ConfluentKafka({
      brokers: KAFKA_BROKERS.split(','),
      groupId: `${topic}-g`,
      consumerConfig: { 'fetch.wait.max.ms': 5 },
    });
    t.after(() => kafka.stop());
    const offsets: number[] = [];
    let assigned = false;
    await kafka.start([topic], {
      onAssign: async () => {
        assigned = true;
      },
      onRevoke: async () => undefined,
      onBatch: async (_topic, _partition, records) => {
        for (const r of records) offsets.push(Number(r.offset));
      },
    });
    await pollUntil('the first pass over the records', () => assigned && offsets.length >= RECORDS, 30_000);
    for (let round = 1; round <= ROUNDS; round++) {
      const before = offsets.length;
      // the loop is idle: a consume call is waiting for records
      kafka.seek({ topic, partition: 0 }, round);
      await pollUntil(
        `round ${round}: offsets ${round}..${RECORDS - 1} handed over again after the seek`,
        () => offsets.length >= before + RECORDS - round,
        10_000,
      );
      assert.deepEqual(
        offsets.slice(before),
        Array.from({ length: RECORDS - round }, (_, i) => round + i),
        `round ${round}: once each, in order, from the sought offset`,
      );
    }
    await kafka.stop();
  });
});
