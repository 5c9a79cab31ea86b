/**
 * close() with a backlog, on the in-memory Kafka: the first Kafka step is held until batches past the
 * group-commit limit wait behind it (the consumer blocked in back-pressure, most input still to
 * deliver); close() is called, then the step released. close() takes no new batch, commits every
 * batch it applied (state per key equals the committed input, outputs exactly 1..n), and a later
 * instance finishes the backlog exactly.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MODES, pipeline, until, within } from './support.js';

describe('close() with a backlog (in-memory Kafka, real Redis)', { timeout: 60_000 }, () => {
  for (const mode of MODES) {
    it(`${mode}: takes no new batch, commits all it applied; the next instance finishes`, async (t) => {
      const p = await pipeline(t, { mode, partitions: 2, records: 1000, keys: 10, maxBatchSize: 20 });
      const { port, processor } = p.instance({ groupCommitRecords: 100 });
      const step = mode === 'exactly-once' ? 'transaction' : 'produce';
      const held = port.hold(step);
      await processor.start();
      await held.reached;
      // 1 batch in the held step, 5 queued (100 records), the 7th waits for room: 140 delivered
      await until('back-pressure holds the consumer', () => port.delivered >= 140);
      const delivered = port.delivered;
      const drainStep = port.hold(step); // the step that takes the queue: held while the consumer goes on
      const closing = processor.close();
      held.release();
      await drainStep.reached;
      // the backlog delivered while closing: every batch of it must be dropped
      await within('the backlog delivered and dropped', port.idle());
      assert.ok(port.delivered > delivered);
      drainStep.release();
      await closing;
      assert.equal(processor.state, 'closed');
      const committed = p.committedTotal();
      assert.ok(committed > 0 && committed <= delivered, `committed ${committed} of ${delivered} delivered`);
      assert.ok(committed < 1000, 'the backlog was left for the next owner');
      assert.deepEqual(
        port.steps.filter((s) => s.outcome === 'failed'),
        [],
      );
      await p.check(processor, true); // state per key == committed input: nothing applied uncommitted

      const next = p.instance();
      await next.processor.start();
      await p.allCommitted();
      await next.processor.close();
      await p.check(next.processor, true);
    });
  }
});
