/**
 * A memory port's start, stop and admin calls under injected failures and holds, and what it reports
 * about its own calls: a held start or stop waits until released, a failed start leaves nothing
 * running, an admin call fails once as injected, stop cannot be failed, and `calls` / `paused` say
 * what the code under test asked for.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ConsumerHandlers } from '../../src/kafka/types.js';
import { MemoryKafka } from '../../src/testing/index.js';

const quiet: ConsumerHandlers = {
  onAssign: async () => undefined,
  onRevoke: async () => undefined,
  onBatch: async () => undefined,
};

/** Lets every callback that is ready run (no timers). */
async function turns(n = 20): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe('MemoryKafka port calls', () => {
  it('a held start() waits until released; a held stop() too, and every caller of stop() with it', async () => {
    const kafka = new MemoryKafka({ topics: { t: 2 } });
    const port = kafka.port({ groupId: 'g' });
    const starting = port.hold('start');
    let started = false;
    const start = port.start(['t'], quiet).then(() => {
      started = true;
    });
    await starting.reached;
    await turns();
    assert.equal(started, false, 'start() waits at its hold');
    assert.equal(port.state, 'idle');
    await assert.rejects(port.start(['t'], quiet), { code: 'RF_INVALID_STATE', message: /when starting/ });
    starting.release();
    await start;
    assert.equal(port.state, 'running');
    await kafka.settled();
    assert.deepEqual(
      port.assignment.map((tp) => tp.partition),
      [0, 1],
    );
    const stopping = port.hold('stop');
    let stopped = 0;
    const first = port.stop().then(() => stopped++);
    const second = port.stop().then(() => stopped++);
    await stopping.reached;
    await turns();
    assert.equal(stopped, 0, 'both stop() calls wait at the hold');
    assert.equal(port.state, 'running');
    stopping.release();
    await Promise.all([first, second]);
    assert.equal(port.state, 'stopped');
    assert.deepEqual(port.assignment, [], 'the partitions were revoked');
    assert.equal(port.calls.start, 2);
    assert.equal(port.calls.stop, 2);
  });

  it('a failed start() starts nothing; stop() then ends it, and a stop during a held start() fails that start', async () => {
    const kafka = new MemoryKafka({ topics: { t: 1 } });
    const port = kafka.port({ groupId: 'g' });
    const boom = new Error('no brokers');
    port.failNext('start', { error: boom });
    await assert.rejects(port.start(['t'], quiet), boom);
    assert.equal(port.state, 'idle');
    await kafka.settled();
    assert.deepEqual(port.assignment, [], 'never joined the group');
    await port.stop();
    assert.equal(port.state, 'stopped');

    const other = kafka.port({ groupId: 'g' });
    other.hold('start');
    const start = other.start(['t'], quiet);
    await other.stop(); // releases the held start
    await assert.rejects(start, {
      code: 'RF_INVALID_STATE',
      message: /stop\(\) was called during start\(\)/,
    });
    assert.equal(other.state, 'stopped');
  });

  it('admin calls fail once as injected; stop cannot be failed', async () => {
    const kafka = new MemoryKafka({ topics: { t: 3 } });
    const port = kafka.port({ groupId: 'g' });
    port.failNext('partitionCount');
    await assert.rejects(port.partitionCount('t'), {
      name: 'MemoryKafkaError',
      code: 'INJECTED',
      retriable: true,
    });
    assert.equal(await port.partitionCount('t'), 3, 'the next call succeeds');
    const boom = new Error('describe failed');
    port.failNext('describeTopics', { error: boom });
    await assert.rejects(port.describeTopics(['t']), boom);
    assert.deepEqual(await port.describeTopics(['t', 'missing']), new Map([['t', 3]]));
    port.failNext('highWatermarks', { fatal: true });
    await assert.rejects(port.highWatermarks('t'), { code: 'INJECTED_FATAL', fatal: true });
    assert.throws(() => port.failNext('stop'), {
      code: 'RF_INVALID_ARGUMENT',
      message: /stop cannot be failed/,
    });
    assert.throws(() => port.hold('nothing' as 'stop'), { code: 'RF_INVALID_ARGUMENT' });
    assert.equal(port.calls.partitionCount, 2);
    assert.equal(port.calls.describeTopics, 2);
    assert.equal(port.calls.highWatermarks, 1);
  });

  it('calls and paused say what the code under test asked for', async () => {
    const kafka = new MemoryKafka({ topics: { t: 2 } });
    const port = kafka.port({ groupId: 'g' });
    await port.start(['t'], quiet);
    port.pause([
      { topic: 't', partition: 1 },
      { topic: 'u', partition: 0 },
    ]);
    assert.deepEqual(port.paused, [
      { topic: 't', partition: 1 },
      { topic: 'u', partition: 0 },
    ]);
    port.resume([{ topic: 't', partition: 1 }]);
    assert.deepEqual(port.paused, [{ topic: 'u', partition: 0 }]);
    await port.produce([{ topic: 't', key: 'a', value: '1' }]);
    const { pause, resume, produce, commit } = port.calls;
    assert.deepEqual({ pause, resume, produce, commit }, { pause: 1, resume: 1, produce: 1, commit: 0 });
    await port.stop();
  });
});
