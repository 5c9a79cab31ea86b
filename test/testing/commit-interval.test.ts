/**
 * Commit interval on the in-memory Kafka: with commitIntervalMs, applied batches wait for the interval
 * to pass since the last Kafka step started, unless groupCommitRecords are waiting; close() (a drain)
 * does not wait for the interval.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MODES, pipeline, until, within } from './support.js';

describe('commit interval (in-memory Kafka, real Redis)', { timeout: 60_000 }, () => {
  for (const mode of MODES) {
    const stepKind = mode === 'exactly-once' ? 'transaction' : 'produce';

    it(`${mode}: batches wait for the interval; close() sends them at once in one step`, async (t) => {
      const p = await pipeline(t, { mode, partitions: 2, records: 200, keys: 8, maxBatchSize: 10 });
      const { port, processor } = p.instance({ commitIntervalMs: 60_000, groupCommitRecords: 10_000 });
      await processor.start();
      const ok = () => port.steps.filter((s) => s.kind === stepKind && s.outcome === 'ok');
      await until('the first Kafka step', () => ok().length >= 1);
      await within('every batch applied and queued', port.idle());
      const before = port.steps.filter((s) => s.kind === stepKind && s.outcome === 'ok');
      assert.equal(before.length, 1, 'only the first step ran: the others wait for the interval');
      const started = performance.now();
      await processor.close();
      assert.ok(performance.now() - started < 30_000, 'close() did not wait for the 60 s interval');
      const after = port.steps.filter((s) => s.kind === stepKind && s.outcome === 'ok');
      assert.equal(after.length, 2, 'close() drained the waiting batches in one step');
      assert.equal((before[0]?.records ?? 0) + (after[1]?.records ?? 0), 200);
      await p.check(processor, true);
    });

    it(`${mode}: groupCommitRecords waiting start a step before the interval has passed`, async (t) => {
      const p = await pipeline(t, { mode, partitions: 2, records: 200, keys: 8, maxBatchSize: 10 });
      const { port, processor } = p.instance({ commitIntervalMs: 60_000, groupCommitRecords: 50 });
      await processor.start();
      const ok = () => port.steps.filter((s) => s.kind === stepKind && s.outcome === 'ok');
      // 200 records: the first step, then steps of >= 50 records; what is left below 50 waits
      await until('steps of groupCommitRecords within the interval', () => ok().length >= 3);
      for (const s of ok().slice(1)) assert.ok(s.records >= 50, `a step of ${s.records} records`);
      await processor.close();
      await p.check(processor, true);
    });
  }
});
