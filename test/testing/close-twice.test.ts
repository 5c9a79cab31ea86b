/**
 * close() is memoised: a second caller (a signal handler, the CLI, onFatal) waits for the same
 * drain instead of returning while the batch in flight is still being produced and committed.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pipeline } from './support.js';

describe('close() twice (in-memory Kafka, real Redis)', { timeout: 60_000 }, () => {
  it('a second close() waits for the same drain', async (t) => {
    const p = await pipeline(t, {
      mode: 'exactly-once',
      partitions: 1,
      records: 100,
      keys: 4,
      maxBatchSize: 10,
    });
    const { port, processor } = p.instance();
    const held = port.hold('transaction');
    await processor.start();
    await held.reached;
    const first = processor.close();
    let secondDone = false;
    const second = processor.close().then(() => {
      secondDone = true;
    });
    for (let i = 0; i < 50; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(secondDone, false, 'the second close() resolves only after the drain');
    held.release();
    await Promise.all([first, second]);
    assert.equal(p.committedTotal(), 10);
    await p.check(processor, true);
  });
});
