/**
 * The one lifecycle (src/runtime/lifecycle.ts) on hand-made steps, without services: start once,
 * a failed start rolls back, close() memoised and graceful, destroy() immediate and idempotent (also
 * during close() and during start()), the fatal latch. The runtimes' own destroy() on the real broker
 * is test/runtime/destroy.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Lifecycle, type LifecycleSteps } from '../../src/runtime/lifecycle.js';
import { silentLogger } from '../../src/runtime/logger.js';

function steps(over: Partial<LifecycleSteps> = {}) {
  const calls: string[] = [];
  const s: LifecycleSteps = {
    name: 'thing',
    log: silentLogger,
    startUp: async () => {
      calls.push('startUp');
    },
    quiesce: () => {
      calls.push('quiesce');
    },
    drain: async () => {
      calls.push('drain');
    },
    stop: async () => {
      calls.push('stop');
    },
    failedStart: () => {
      calls.push('failedStart');
    },
    ...over,
  };
  return { life: new Lifecycle(s), calls };
}

describe('Lifecycle', () => {
  it('starts once; close() drains then stops, once, and every call gets the same promise', async () => {
    const { life, calls } = steps();
    assert.equal(life.state, 'idle');
    await life.start();
    assert.equal(life.state, 'running');
    await assert.rejects(life.start(), {
      code: 'RF_INVALID_STATE',
      message: /called in state running: each thing starts only once/,
    });
    const a = life.close();
    assert.equal(life.close(), a);
    assert.equal(life.state, 'closing');
    assert.ok(life.signal.aborted, 'the signal aborts when closing begins');
    await a;
    assert.equal(life.state, 'closed');
    assert.deepEqual(calls, ['startUp', 'quiesce', 'drain', 'stop']);
    await life.destroy();
    assert.deepEqual(calls, ['startUp', 'quiesce', 'drain', 'stop'], 'destroy after close does nothing more');
  });

  it('destroy() stops without draining, once; a close() after it adds nothing', async () => {
    const { life, calls } = steps();
    await life.start();
    const d = life.destroy(new Error('the reason'));
    assert.equal(life.destroy(), d);
    await d;
    await life.close();
    assert.equal(life.state, 'closed');
    assert.deepEqual(calls, ['startUp', 'quiesce', 'stop']);
  });

  it('destroy() during close() stops at once while the drain still waits', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const { life, calls } = steps({
      drain: async () => {
        calls.push('drain');
        await held;
      },
    });
    await life.start();
    const closing = life.close();
    await new Promise((r) => setImmediate(r));
    await life.destroy();
    assert.deepEqual(calls, ['startUp', 'quiesce', 'drain', 'stop'], 'stopped while the drain waits');
    assert.equal(life.state, 'closed');
    release();
    await closing;
    assert.deepEqual(calls, ['startUp', 'quiesce', 'drain', 'stop'], 'the stop step ran once');
  });

  it('a failed start quiesces, stops, ends closed and rejects with its error', async () => {
    const { life, calls } = steps({
      startUp: async () => {
        calls.push('startUp');
        throw new Error('no broker');
      },
    });
    await assert.rejects(life.start(), /no broker/);
    assert.equal(life.state, 'closed');
    assert.deepEqual(calls, ['startUp', 'quiesce', 'stop', 'failedStart']);
    await life.close();
    assert.deepEqual(calls, ['startUp', 'quiesce', 'stop', 'failedStart'], 'nothing more on close()');
  });

  it('close() or destroy() during start(): start() rejects with RF_INVALID_STATE, nothing keeps running', async () => {
    for (const end of ['close', 'destroy'] as const) {
      let go!: () => void;
      const gate = new Promise<void>((r) => {
        go = r;
      });
      const box: { life?: Lifecycle } = {};
      const made = steps({
        startUp: async () => {
          made.calls.push('startUp');
          await gate;
          box.life?.stillStarting();
          made.calls.push('started');
        },
      });
      box.life = made.life;
      const starting = made.life.start();
      const ending = made.life[end]();
      go();
      await assert.rejects(starting, {
        code: 'RF_INVALID_STATE',
        message: /close\(\) was called while start\(\) was running/,
      });
      await ending;
      assert.equal(made.life.state, 'closed', end);
      assert.deepEqual(made.calls, ['startUp', 'quiesce', 'stop', 'failedStart'], end);
    }
  });

  it('a fatal error closes (gracefully) and then calls onFatal, once', async () => {
    const fatal: Error[] = [];
    const { life, calls } = steps({ onFatal: (e) => fatal.push(e) });
    await life.start();
    const boom = new Error('fenced producer');
    life.fatal(boom);
    life.fatal(new Error('again'));
    await life.close();
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(fatal, [boom]);
    assert.deepEqual(calls, ['startUp', 'quiesce', 'drain', 'stop']);
  });

  it('close() before start() ends closed without any step', async () => {
    const { life, calls } = steps();
    await life.close();
    assert.equal(life.state, 'closed');
    assert.deepEqual(calls, []);
    await assert.rejects(life.start(), { code: 'RF_INVALID_STATE' });
  });
});
