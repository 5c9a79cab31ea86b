/**
 * The consume loop begins the next fetch as it hands a fetch over (src/kafka/confluent.ts, #run): a
 * handler's batch runs while the next records are being taken off librdkafka's queue. A seek made by
 * the handler then lands while that fetch is in flight: its records of the partition are stale and
 * must never be handed over, and the records from the sought offset must come next, once each, in
 * order. One partition, batches of at most 50 (a fetch is at most one batch), so the fetch ahead holds
 * records after the seeking batch; handing them over would show as a batch starting past the sought
 * offset. The binding's consume calls are counted (a wrapper on its prototype) to show the fetch ahead
 * was in flight when the seek was made. Real broker.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RdKafka } from '@confluentinc/kafka-javascript';
import { ConfluentKafka } from '../../src/kafka/confluent.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil, produce } from '../helpers/kafka.js';

const RECORDS = 1000;
const BATCH = 50;
/** The first batch starting at or past this offset seeks back to SOUGHT (once). */
const SEEK_AT = 400;
const SOUGHT = 120;

describe('ConfluentKafka: a seek while the next fetch is in flight', { timeout: 120_000 }, () => {
  it('never hands the fetch ahead over; the sought records come next, once each, in order', async (t) => {
    const topic = uniqueName('fetch-ahead');
    t.after(await createTopics([{ topic, partitions: 1 }]));
    await produce(
      topic,
      Array.from({ length: RECORDS }, (_, i) => ({ key: `k${i}`, value: String(i), partition: 0 })),
    );
    // consume calls in flight (the binding's worker thread is taking records off librdkafka's queue)
    const proto = RdKafka.KafkaConsumer.prototype as unknown as {
      consume(n: number, cb: (err: unknown, m: unknown[]) => void): void;
    };
    const consume = proto.consume;
    let consuming = 0;
    proto.consume = function (this: unknown, n, cb) {
      consuming++;
      return consume.call(this, n, (err, m) => {
        consuming--;
        cb(err, m);
      });
    };
    t.after(() => {
      proto.consume = consume;
    });
    const kafka = new ConfluentKafka({
      brokers: KAFKA_BROKERS.split(','),
      groupId: `${topic}-g`,
      maxBatchSize: BATCH,
    });
    t.after(() => kafka.stop());
    const batches: number[][] = [];
    let sought = false;
    let fetchingAtSeek = false;
    await kafka.start([topic], {
      onAssign: async () => undefined,
      onRevoke: async () => undefined,
      onBatch: async (_topic, partition, records) => {
        batches.push(records.map((r) => Number(r.offset)));
        if (!sought && Number(records[0]?.offset) >= SEEK_AT) {
          sought = true;
          // the next fetch began as this batch was handed over: it is in flight now
          fetchingAtSeek = consuming > 0;
          kafka.seek({ topic, partition }, SOUGHT);
          // a turn for it to bring its records back while this batch is still running
          await new Promise((r) => setImmediate(r));
        }
      },
    });
    const offsets = () => batches.flat();
    // the seeking batch's end: every record up to it once, then from SOUGHT to the end again
    const seekEnd = () => {
      const b = batches.find((x) => (x[0] ?? -1) >= SEEK_AT);
      return b === undefined ? Number.POSITIVE_INFINITY : (b.at(-1) as number) + 1;
    };
    await pollUntil(
      'every record handed over, and the sought ones again',
      () => offsets().length >= RECORDS + seekEnd() - SOUGHT,
      60_000,
    );
    await kafka.stop();
    assert.ok(sought, 'a batch at or past the seek offset came and sought back');
    assert.ok(fetchingAtSeek, 'the next fetch was in flight when the handler sought');
    const at = batches.findIndex((b) => (b[0] ?? -1) >= SEEK_AT);
    assert.ok(at + 1 < batches.length, 'a batch came after the seeking one');
    assert.equal(
      batches[at + 1]?.[0],
      SOUGHT,
      `the batch after the seek starts at the sought offset ${SOUGHT}, not in the fetch ahead (${seekEnd()}..)`,
    );
    const all = offsets();
    const cut = batches.slice(0, at + 1).flat().length;
    assert.deepEqual(
      all.slice(0, cut),
      Array.from({ length: seekEnd() }, (_, i) => i),
      'before the seek: from 0, once each, in order',
    );
    assert.deepEqual(
      all.slice(cut),
      Array.from({ length: RECORDS - SOUGHT }, (_, i) => SOUGHT + i),
      'after the seek: from the sought offset to the end, once each, in order',
    );
  });
});
