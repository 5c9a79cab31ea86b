/**
 * The adapter's at-least-once commit is durable when it resolves: the client's own commitOffsets()
 * resolves once the commit is queued (librdkafka commitAsync), so a process killed right after it could
 * lose the commit. Shown on the real broker by stopping it (SIGSTOP): a commit must not resolve while no
 * coordinator can store it, and must have stored its offsets when it does.
 *
 * The broker is stopped with `dev/kafka.sh pause` (and resumed with `resume`) when it is the local one;
 * a broker named by KAFKA_BROKERS is stopped by the commands in REDFENCE_TEST_BROKER_PAUSE and
 * REDFENCE_TEST_BROKER_RESUME (run with `sh -c`), and without them the test is skipped: it cannot stop a
 * broker it did not start.
 */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfluentKafka } from '../../src/kafka/confluent.js';
import type { InRecord } from '../../src/kafka/types.js';
import { brokerControl } from '../helpers/broker-pause.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, pollUntil, produce } from '../helpers/kafka.js';

describe('ConfluentKafka.commit', { timeout: 120_000 }, () => {
  it('resolves only once the coordinator stored the offsets (never while the broker is stopped)', async (t) => {
    const broker = brokerControl();
    if ('skip' in broker) {
      t.skip(broker.skip);
      return;
    }
    const topic = uniqueName('commit-ack');
    const groupId = `${topic}-group`;
    const dropTopics = await createTopics([{ topic, partitions: 1 }]);
    t.after(dropTopics);
    await produce(
      topic,
      [1, 2, 3, 4, 5, 6].map((i) => ({ key: `k${i}`, value: String(i) })),
    );
    const seen: InRecord[] = [];
    const kafka = new ConfluentKafka({ brokers: KAFKA_BROKERS.split(','), groupId });
    let paused = false;
    let commitsInHandler = 0;
    let batches = 0;
    try {
      await kafka.start([topic], {
        onAssign: async () => undefined,
        onRevoke: async () => undefined,
        // as the processor does: commit from inside the batch handler (the client's poll loop waits for it)
        onBatch: async (_t, _p, records) => {
          seen.push(...records);
          batches++;
          await kafka.commit([
            { topic, partition: 0, offset: Math.min(3, Number(records.at(-1)?.offset) + 1) },
          ]);
          commitsInHandler++;
        },
      });
      await pollUntil(
        'all six records delivered and committed from the handler',
        async () => seen.length >= 6 && commitsInHandler === batches,
        30_000,
      );
      assert.equal((await committedOffsets(groupId, topic)).get(0), 3, 'the handler committed offset 3');

      await kafka.commit([{ topic, partition: 0, offset: 4 }]);
      assert.equal((await committedOffsets(groupId, topic)).get(0), 4, 'stored when commit() resolved');

      // set first: a pause command that fails half-way still gets its resume
      paused = true;
      await broker.pause();
      let settled: string | undefined;
      const pending = kafka.commit([{ topic, partition: 0, offset: 6 }]).then(
        () => {
          settled = 'resolved';
        },
        (err: Error) => {
          settled = `rejected: ${err.message}`;
        },
      );
      // An observation window, not a synchronisation: a queued-only commit settles within milliseconds.
      await new Promise((r) => setTimeout(r, 1500));
      assert.equal(
        settled,
        undefined,
        'commit() settled while the broker was stopped (or the pause did not stop it)',
      );
      await broker.resume();
      paused = false;
      await pending;
      assert.equal(settled, 'resolved', 'the commit went through once the broker was back');
      assert.equal((await committedOffsets(groupId, topic)).get(0), 6, 'stored when commit() resolved');
    } finally {
      // a failed resume is reported beside the failure that brought the test here, not in its place
      if (paused)
        await broker
          .resume()
          .catch((err: Error) => t.diagnostic(`resuming the broker failed: ${err.message}`));
      await kafka.stop();
    }
  });
});
