/**
 * The fatal latch, on the in-memory Kafka: a fatal Kafka error (RF_KAFKA_FATAL from a transaction,
 * `fatal: true` from a produce) in a step with batches queued behind it, and a batch in its Redis
 * step as it fails, starts no further Kafka step, calls onFatal once and closes the processor. What it had applied in Redis but not committed
 * is answered REEMIT for the next instance, which then finishes exactly.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RedfenceError } from '../../src/errors/index.js';
import { MODES, pipeline, until, within } from './support.js';

describe('fatal Kafka errors (in-memory Kafka, real Redis)', { timeout: 60_000 }, () => {
  for (const mode of MODES) {
    it(`${mode}: no further Kafka step, onFatal once, closed; the next instance finishes exactly`, async (t) => {
      const p = await pipeline(t, { mode, partitions: 3, records: 240, keys: 9, maxBatchSize: 20 });
      const fatal: Error[] = [];
      const { port, processor } = p.instance({ onFatal: (err) => fatal.push(err) });
      const step = mode === 'exactly-once' ? 'transaction' : 'produce';
      const held = port.hold(step);
      let armed = false;
      // Input arriving as the step fails: its batch is in its Redis step when the latch closes.
      const kafkaStep = port[step === 'transaction' ? 'produceTransactionally' : 'produce'].bind(port);
      const wrapped = async (...args: Parameters<typeof kafkaStep>) => {
        try {
          await (kafkaStep as (...a: typeof args) => Promise<void>)(...args);
        } catch (err) {
          if (armed) p.more(20);
          armed = false;
          throw err;
        }
      };
      Object.assign(
        port,
        step === 'transaction' ? { produceTransactionally: wrapped } : { produce: wrapped },
      );
      await processor.start();
      await held.reached;
      await within('batches queued behind the held step', port.idle());
      port.failNext(step, { fatal: true });
      port.failNext(step, { fatal: true }); // never reached: no second step may start
      armed = true;
      held.release();
      await until('the processor closed itself and called onFatal', () => processor.state === 'closed');
      await until('onFatal called', () => fatal.length > 0);
      await processor.close(); // a later close() changes nothing
      assert.equal(fatal.length, 1, 'onFatal once');
      const e = fatal[0] as Error & { fatal?: unknown };
      assert.ok(RedfenceError.is(e, 'RF_KAFKA_FATAL') || e.fatal === true, 'the fatal error is passed on');
      assert.deepEqual(
        port.steps.map((s) => `${s.kind}:${s.outcome}`),
        [`${step}:failed`],
        'no Kafka step after the fatal one',
      );
      assert.equal(port.state, 'stopped');
      assert.equal(p.committedTotal(), 0, 'nothing committed');
      assert.deepEqual(p.kafka.read('out'), [], 'nothing produced');

      const next = p.instance();
      await next.processor.start();
      await p.allCommitted();
      await next.processor.close();
      await p.check(next.processor, true);
    });
  }
});
