/**
 * Seek-back after a failed Kafka step, on the in-memory Kafka: the first step is held while the other
 * batches are applied in Redis and queue behind it, then it fails. Every partition in it and behind
 * it is sought back and delivered again (answered REEMIT from the pending outputs): state per key is
 * exact, nothing is lost, and each key's outputs are exactly 1..n (at least once when the failed step
 * had already written them: a failed at-least-once commit).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KafkaStep } from '../../src/testing/index.js';
import { pipeline, within } from './support.js';

const cases: { mode: 'exactly-once' | 'at-least-once'; step: KafkaStep; exact: boolean }[] = [
  { mode: 'exactly-once', step: 'transaction', exact: true },
  { mode: 'at-least-once', step: 'produce', exact: true },
  { mode: 'at-least-once', step: 'commit', exact: false },
];

describe('seek-back after a failed Kafka step (in-memory Kafka, real Redis)', { timeout: 60_000 }, () => {
  for (const { mode, step, exact } of cases) {
    it(`${mode}: a failed ${step} with batches queued behind it redelivers them all`, async (t) => {
      const p = await pipeline(t, { mode, partitions: 3, records: 300, keys: 12, maxBatchSize: 20 });
      const { port, processor } = p.instance();
      const held = port.hold(step);
      await processor.start();
      await held.reached;
      await within('batches queued behind the held step', port.idle());
      port.failNext(step);
      held.release();
      await p.allCommitted();
      await processor.close();
      const failed = port.steps.filter((s) => s.outcome === 'failed');
      assert.equal(failed.length, 1, 'one step failed');
      assert.ok(port.delivered >= 300 + 20, 'the failed batches were delivered again');
      await p.check(processor, exact);
      if (!exact) {
        const outs = [...p.outputs().values()].flat().length;
        assert.ok(outs > 300, 'the failed commit had produced: its outputs were produced again');
      }
    });
  }

  it('exactly-once: failed transactions again and again still end exact', async (t) => {
    const p = await pipeline(t, {
      mode: 'exactly-once',
      partitions: 2,
      records: 120,
      keys: 5,
      maxBatchSize: 7,
    });
    const { port, processor } = p.instance();
    for (let i = 0; i < 5; i++) port.failNext('transaction');
    await processor.start();
    await p.allCommitted();
    await processor.close();
    assert.equal(port.steps.filter((s) => s.outcome === 'failed').length, 5);
    await p.check(processor, true);
  });
});
