/**
 * An undecodable record too large to be dead-lettered whole (value + headers over the dead-letter
 * limit) must not stick its partition: the dead letter goes out without its value, saying so, and the
 * records after it are processed.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { MAX_DEAD_LETTER_BYTES } from '../../src/dead-letter/record.js';
import { defineProcessor, Processor } from '../../src/index.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil, produce, readToEnd } from '../helpers/kafka.js';

describe('oversized dead letters', { timeout: 120_000 }, () => {
  it('an undecodable record near the size limit is dead-lettered without its value; the partition goes on', async () => {
    const ns = uniqueName('dl-size');
    const drop = await createTopics([
      { topic: `${ns}-orders`, partitions: 1 },
      { topic: `${ns}-totals`, partitions: 1 },
      { topic: `${ns}-orders.DLT`, partitions: 1 },
    ]);
    const redis = standalone();
    after(() => redis.disconnect());
    try {
      const big = Buffer.alloc(MAX_DEAD_LETTER_BYTES + 50_000, 'x'); // not JSON: undecodable
      await produce(`${ns}-orders`, [
        { key: 'k', value: JSON.stringify({ amount: 1 }) },
        { key: 'k', value: big },
        { key: 'k', value: JSON.stringify({ amount: 2 }) },
      ]);
      const p = new Processor<{ amount: number }>({
        definition: defineProcessor<{ amount: number }>({
          input: `${ns}-orders`,
          output: `${ns}-totals`,
          store: ns,
          operation: (o) => ({ op: 'add', by: o.amount }),
          emit: 'state',
        }),
        redis,
        mode: 'exactly-once',
        groupId: `${ns}-group`,
        kafka: { brokers: KAFKA_BROKERS.split(',') },
      });
      await p.start();
      try {
        await pollUntil('all three records processed', () => p.counts().records >= 3, 60_000);
      } finally {
        await p.close();
      }
      assert.equal((await p.fence.read('k'))?.value?.toString(), '3', 'the records around it applied');
      const dls = await readToEnd(`${ns}-orders.DLT`);
      assert.equal(dls.length, 1, 'one dead letter');
      const [dl] = dls;
      assert.equal(dl?.value, null, 'the value is left out');
      const h = dl?.headers ?? {};
      assert.equal(String(h['redfence-value-omitted']), String(big.length));
      assert.equal(String(h['redfence-value-sha256']), createHash('sha256').update(big).digest('hex'));
      assert.equal(String(h['redfence-reason']), 'undecodable');
    } finally {
      await drop();
    }
  });
});
