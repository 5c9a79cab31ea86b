/**
 * A rebalance callback that throws ends the consume loop. That failure is reported through
 * `onFatal` (so the runtime closes instead of waiting for records that never come) and is never left
 * as an unhandled rejection (regression: a processor closed while its onAssign retried an unmet
 * Redis WAIT failed its test with "WAIT: 1 of 2 replicas acknowledged": the retry, cut short by the
 * close, rejected the loop before stop() was there to observe it). Real broker.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfluentKafka } from '../../src/kafka/confluent.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil, produce } from '../helpers/kafka.js';

describe('ConfluentKafka: a rebalance callback that throws', { timeout: 60_000 }, () => {
  it('is reported once through onFatal as RF_KAFKA_FATAL, never as an unhandled rejection', async (t) => {
    const topic = uniqueName('callback-failure');
    t.after(await createTopics([{ topic, partitions: 2 }]));
    await produce(topic, [{ key: null, value: 'x', partition: 0 }]);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    t.after(() => process.off('unhandledRejection', onUnhandled));

    const kafka = new ConfluentKafka({ brokers: KAFKA_BROKERS.split(','), groupId: `${topic}-g` });
    t.after(() => kafka.stop());
    const fatals: Error[] = [];
    let assigns = 0;
    let batches = 0;
    await kafka.start([topic], {
      onAssign: async () => {
        assigns++;
        throw new Error('epoch could not be raised');
      },
      onRevoke: async () => undefined,
      onBatch: async () => {
        batches++;
      },
      onFatal: (err) => fatals.push(err),
    });
    await pollUntil('onFatal called', () => fatals.length > 0, 30_000);
    // one more turn of the event loop: an unhandled rejection is reported after the microtasks
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(assigns, 1, 'the failed assignment was served');
    assert.equal(fatals.length, 1);
    assert.equal((fatals[0] as { code?: unknown }).code, 'RF_KAFKA_FATAL');
    assert.match(String(fatals[0]?.message), /a rebalance callback failed: epoch could not be raised/);
    assert.deepEqual(unhandled, []);
    assert.equal(batches, 0, 'nothing delivered after the loop ended');
    await kafka.stop();
  });

  it('without onFatal, every later call fails with the reason', async (t) => {
    const topic = uniqueName('callback-failure-plain');
    t.after(await createTopics([{ topic, partitions: 1 }]));
    const kafka = new ConfluentKafka({ brokers: KAFKA_BROKERS.split(','), groupId: `${topic}-g` });
    t.after(() => kafka.stop());
    let assigns = 0;
    await kafka.start([topic], {
      onAssign: async () => {
        assigns++;
        throw new Error('epoch could not be raised');
      },
      onRevoke: async () => undefined,
      onBatch: async () => undefined,
    });
    await pollUntil('the failed assignment was served', () => assigns > 0, 30_000);
    await pollUntil(
      'later calls fail with the reason',
      () =>
        kafka.produce([]).then(
          () => false,
          (err: Error) => /a rebalance callback failed: epoch could not be raised/.test(err.message),
        ),
      10_000,
    );
  });
});
