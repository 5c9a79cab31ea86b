/**
 * Group commit on the in-memory Kafka: while the first Kafka step is held, the next batches are
 * applied in Redis and queue up; released, they all go in the next single step (one transaction, or
 * one produce + one commit). With groupCommitRecords 0 every batch has a step of its own.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MODES, pipeline, within } from './support.js';

describe('group commit (in-memory Kafka, real Redis)', { timeout: 60_000 }, () => {
  for (const mode of MODES) {
    it(`${mode}: batches waiting behind a held step go in one step`, async (t) => {
      const p = await pipeline(t, { mode, partitions: 2, records: 200, keys: 8, maxBatchSize: 10 });
      const { port, processor } = p.instance();
      const held = port.hold(mode === 'exactly-once' ? 'transaction' : 'produce');
      await processor.start();
      await held.reached;
      await within('every other batch applied and queued', port.idle());
      held.release();
      await p.allCommitted();
      const ok = port.steps.filter((s) => s.outcome === 'ok');
      if (mode === 'exactly-once') {
        assert.deepEqual(
          ok.map((s) => `${s.kind}:${s.records}`),
          ['transaction:10', 'transaction:190'],
        );
      } else {
        assert.deepEqual(
          ok.map((s) => `${s.kind}:${s.records}`),
          ['produce:10', 'commit:0', 'produce:190', 'commit:0'],
        );
      }
      const last = ok.at(-1);
      assert.deepEqual(
        [...(last?.offsets ?? [])].sort((a, b) => a.partition - b.partition).map((o) => o.offset),
        [...p.kafka.highWatermarks('in').values()],
        'the grouped step commits both partitions to their ends',
      );
      await processor.close();
      await p.check(processor, true);
    });

    it(`${mode}: groupCommitRecords 0 gives every batch its own step`, async (t) => {
      const p = await pipeline(t, { mode, partitions: 2, records: 100, keys: 4, maxBatchSize: 10 });
      const { port, processor } = p.instance({ groupCommitRecords: 0 });
      const held = port.hold(mode === 'exactly-once' ? 'transaction' : 'produce');
      await processor.start();
      await held.reached;
      held.release();
      await p.allCommitted();
      const produced = port.steps.filter((s) => s.kind !== 'commit' && s.outcome === 'ok');
      // one step per batch: a partition of n records is n / 10 batches of 10 and one of the rest
      const batches = [...p.kafka.highWatermarks('in').values()].flatMap((n) =>
        Array.from({ length: Math.ceil(n / 10) }, (_, i) => Math.min(10, n - i * 10)),
      );
      const sizes = (xs: number[]) => [...xs].sort((a, b) => a - b);
      assert.deepEqual(sizes(produced.map((s) => s.records)), sizes(batches));
      await processor.close();
      await p.check(processor, true);
    });
  }
});
