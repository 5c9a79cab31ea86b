/**
 * The adapter's at-least-once commit is durable when it resolves: the client's own commitOffsets()
 * resolves once the commit is queued (librdkafka commitAsync), so a process killed right after it could
 * lose the commit. Shown on the real broker by stopping it (SIGSTOP): a commit must not resolve while no
 * coordinator can store it, and must have stored its offsets when it does.
 */

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { ConfluentKafka } from '../../src/kafka/confluent.js';
import type { InRecord } from '../../src/kafka/types.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, pollUntil, produce } from '../helpers/kafka.js';

const run = promisify(execFile);
const kafkaScript = new URL('../../dev/kafka.sh', import.meta.url).pathname;

describe('ConfluentKafka.commit', { timeout: 120_000 }, () => {
  it('resolves only once the coordinator stored the offsets (never while the broker is stopped)', async (t) => {
    if (process.env.KAFKA_BROKERS) {
      t.skip('stops the broker: runs only on the local one from dev/kafka.sh (KAFKA_BROKERS is set)');
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

      await run('bash', [kafkaScript, 'pause']);
      paused = true;
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
      assert.equal(settled, undefined, 'commit() settled while the broker was stopped');
      await run('bash', [kafkaScript, 'resume']);
      paused = false;
      await pending;
      assert.equal(settled, 'resolved', 'the commit went through once the broker was back');
      assert.equal((await committedOffsets(groupId, topic)).get(0), 6, 'stored when commit() resolved');
    } finally {
      if (paused) await run('bash', [kafkaScript, 'resume']);
      await kafka.stop();
    }
  });
});
