/**
 * The fatal latch, on the in-memory Kafka: a fatal Kafka error (RF_KAFKA_FATAL from a transaction,
 * `fatal: true` from a produce) in a step with batches queued behind it, and a batch in its Redis
 * step as it fails, starts no further Kafka step, calls onFatal once and closes the processor. What it
 * had applied in Redis but not committed is answered REEMIT for the next instance, which then finishes
 * exactly. Both halves are observed, not assumed: the failing step throws only once an apply script of
 * the input arriving then has been called (held there until the processor has closed, then let through
 * to Redis), and the next instance's verdict counts show REEMIT.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RedfenceError } from '../../src/errors/index.js';
import type { FenceRedis } from '../../src/fence/redis-port.js';
import { loadScripts } from '../../src/fence/script-loader.js';
import { MODES, pipeline, until, within } from './support.js';

const APPLY_SHAS = new Set(
  [...loadScripts().values()].filter((x) => x.name.startsWith('apply')).map((x) => x.sha),
);

describe('fatal Kafka errors (in-memory Kafka, real Redis)', { timeout: 60_000 }, () => {
  for (const mode of MODES) {
    it(`${mode}: no further Kafka step, onFatal once, closed; the next instance finishes exactly`, async (t) => {
      const p = await pipeline(t, { mode, partitions: 3, records: 240, keys: 9, maxBatchSize: 20 });
      const fatal: Error[] = [];
      const { port, processor } = p.instance({ onFatal: (err) => fatal.push(err) });
      const step = mode === 'exactly-once' ? 'transaction' : 'produce';
      const held = port.hold(step);
      let armed = false;
      // Apply scripts called once the fault is armed wait at this gate (counted) until it opens.
      let gate: Promise<void> | undefined;
      let open = () => {};
      let gated = 0;
      let gatedDone = 0;
      const redis = p.redis as unknown as FenceRedis;
      const evalsha = redis.evalshaBuffer.bind(redis);
      redis.evalshaBuffer = async (sha, ...rest) => {
        if (gate === undefined || !APPLY_SHAS.has(sha)) return evalsha(sha, ...rest);
        gated++;
        await gate;
        return evalsha(sha, ...rest).finally(() => gatedDone++);
      };
      // Input arriving as the step fails: the step throws once that input's batch is in its Redis step.
      const kafkaStep = port[step === 'transaction' ? 'produceTransactionally' : 'produce'].bind(port);
      const wrapped = async (...args: Parameters<typeof kafkaStep>) => {
        try {
          await (kafkaStep as (...a: typeof args) => Promise<void>)(...args);
        } catch (err) {
          if (armed) {
            armed = false;
            gate = new Promise<void>((res) => {
              open = res;
            });
            p.more(20);
            await until('a batch of the new input in its Redis step', () => gated > 0);
          }
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
      // the latch is set and the processor closing while the batch waits in its Redis step; let its
      // apply reach Redis now (applied, never committed), then the close finishes
      // (longer than the wait inside the step, so that a batch never reaching Redis is what is named)
      await until('the processor closing after the fatal error', () => processor.state !== 'running', 30_000);
      assert.ok(gated > 0, 'a batch was in its Redis step when the fatal error was thrown');
      open();
      await until('the held apply scripts answered', () => gatedDone === gated);
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
      const reemit = next.processor.counts().verdicts.REEMIT ?? 0;
      assert.ok(
        reemit > 0,
        `the next instance was answered REEMIT: ${JSON.stringify(next.processor.counts())}`,
      );
    });
  }
});
