/**
 * "A 30 s call never costs the group membership": on the real broker, with max.poll.interval.ms at 7 s,
 * one record's call takes longer than that (held open for 9 s) while the other keys go on; the consumer
 * keeps its partitions (no revocation, no loss), the other records are committed past nothing held,
 * and the held record is committed once it finishes. The control runs the same call on the consume
 * loop (seed 003's sequential pattern) and loses the partition, so the setting does bite.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createHandler, defineHandler, type Logger } from '../../src/index.js';
import { ConfluentKafka } from '../../src/kafka/confluent.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, pollUntil, produce } from '../helpers/kafka.js';

describe('a call longer than max.poll.interval.ms (real broker)', { timeout: 120_000 }, () => {
  it('keeps the group membership and commits the record once it finishes', async (t) => {
    const topic = uniqueName('slow');
    const groupId = `${topic}-g`;
    t.after(
      await createTopics([
        { topic, partitions: 1 },
        { topic: `${topic}.DLT`, partitions: 1 },
      ]),
    );
    await produce(
      topic,
      Array.from({ length: 50 }, (_, i) => ({ key: `k${i}`, value: JSON.stringify({ i }) })),
    );
    const lines: string[] = [];
    const log = (msg?: string) => {
      if (msg) lines.push(msg);
    };
    const logger: Logger = {
      debug: () => undefined,
      info: (_o, m) => log(m),
      warn: (_o, m) => log(m),
      error: (_o, m) => log(m),
    };
    let heldSince = 0;
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const h = createHandler(
      defineHandler<{ i: number }>({
        input: topic,
        name: 'slow',
        handle: async (r) => {
          if (r.value.i !== 10) return;
          heldSince = Date.now();
          await held;
        },
      }),
      {
        kafka: {
          brokers: KAFKA_BROKERS.split(','),
          sessionTimeoutMs: 6000,
          consumerConfig: { 'max.poll.interval.ms': 7000 },
        },
        groupId,
        commitIntervalMs: 100,
        logger,
      },
    );
    t.after(() => h.close());
    t.after(() => release());
    await h.start();
    await pollUntil('the others done', () => h.counts().done === 49, 60_000, 20);
    await pollUntil(
      'committed up to the held record',
      async () => (await committedOffsets(groupId, topic)).get(0) === 10,
      30_000,
      50,
    );
    // the call outlives max.poll.interval.ms (7 s) with room to spare
    await pollUntil('held for 9 s', () => heldSince > 0 && Date.now() - heldSince >= 9000, 30_000, 100);
    release();
    await pollUntil(
      'committed to the end',
      async () => (await committedOffsets(groupId, topic)).get(0) === 50,
      30_000,
      50,
    );
    assert.deepEqual(
      h.assignment.map((p) => p.partition),
      [0],
    );
    assert.equal(
      lines.filter((m) => m === 'partitions revoked').length,
      0,
      `no revocation: ${lines.join(' | ')}`,
    );
    assert.equal(lines.filter((m) => m === 'partitions assigned').length, 1);
  });

  it('control: the same call on the consume loop (the sequential pattern) loses the partition', async (t) => {
    const topic = uniqueName('slowctl');
    t.after(await createTopics([{ topic, partitions: 1 }]));
    await produce(topic, [{ key: 'k', value: '1' }]);
    const port = new ConfluentKafka({
      brokers: KAFKA_BROKERS.split(','),
      groupId: `${topic}-g`,
      sessionTimeoutMs: 6000,
      consumerConfig: { 'max.poll.interval.ms': 7000 },
    });
    t.after(() => port.stop());
    let revoked = 0;
    let blockedSince = 0;
    await port.start([topic], {
      onAssign: async () => undefined,
      onRevoke: async () => {
        revoked++;
      },
      onBatch: async () => {
        if (blockedSince > 0) return;
        blockedSince = Date.now();
        // the call runs on the consume loop: no consume call for 9 s
        await pollUntil('blocked for 9 s', () => Date.now() - blockedSince >= 9000, 30_000, 100);
      },
    });
    await pollUntil('the partition taken away', () => revoked > 0, 40_000, 100);
  });
});
