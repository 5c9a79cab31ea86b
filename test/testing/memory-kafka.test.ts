/**
 * The in-memory Kafka itself: offsets and the murmur2 partitioner, batches and commits, transactions
 * that commit or abort atomically (read_committed never sees an open or aborted one; markers take
 * offsets), rebalancing between two ports of a group (revocation awaited before the partition moves,
 * never two owners), producer fencing by transactional id, and the injected failures and holds.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RedfenceError } from '../../src/errors/index.js';
import type { ConsumerHandlers, InRecord, TopicPartition } from '../../src/kafka/types.js';
import { partitionFor } from '../../src/partitioner/index.js';
import { MemoryKafka } from '../../src/testing/index.js';

/** Polls a condition on the event loop (no timers to wait out): fails after `turns` turns. */
async function until(what: string, check: () => boolean, turns = 10_000): Promise<void> {
  for (let i = 0; !check(); i++) {
    if (i >= turns) throw new Error(`never happened: ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** Handlers that record what the port did; `onBatch` may be replaced. */
function recorder(name: string, log: string[] = []) {
  const batches: { partition: number; offsets: number[] }[] = [];
  const records: InRecord[] = [];
  const h: ConsumerHandlers & { batch?: (partition: number, records: InRecord[]) => Promise<void> } = {
    onAssign: async (tps) => {
      log.push(`${name} assign ${tps.map((t) => t.partition).join(',')}`);
    },
    onRevoke: async (tps, lost) => {
      log.push(`${name} revoke${lost ? ' lost' : ''} ${tps.map((t) => t.partition).join(',')}`);
    },
    onBatch: async (_topic, partition, rs) => {
      await h.batch?.(partition, rs);
      batches.push({ partition, offsets: rs.map((r) => Number(r.offset)) });
      records.push(...rs);
    },
  };
  return { h, batches, records, log };
}

const text = (rs: InRecord[]) => rs.map((r) => `${r.key?.toString()}=${r.value?.toString()}`);

describe('MemoryKafka', () => {
  it('places keyed records with murmur2, offsets per partition from 0, high watermarks', () => {
    const kafka = new MemoryKafka({ topics: { in: 6 } });
    const keys = Array.from({ length: 50 }, (_, i) => `key-${i}`);
    const placed = kafka.produce(keys.map((k) => ({ topic: 'in', key: k, value: k })));
    const next = new Map<number, number>();
    placed.forEach((p, i) => {
      assert.equal(p.partition, partitionFor(keys[i] as string, 6));
      assert.equal(p.offset, next.get(p.partition) ?? 0, 'offsets grow by one per partition');
      next.set(p.partition, p.offset + 1);
    });
    assert.deepEqual(
      [...kafka.highWatermarks('in')].filter(([, hw]) => hw > 0),
      [...next].sort((a, b) => a[0] - b[0]),
    );
    assert.equal(kafka.read('in').length, 50);
    assert.throws(() => kafka.produce([{ topic: 'nope', key: 'k', value: 'v' }]), /does not exist/);
    assert.throws(
      () => kafka.produce([{ topic: 'in', key: 'k', value: 'v', partition: 6 }]),
      /no partition 6/,
    );
    assert.throws(
      () => new MemoryKafka({ topic: {} } as never),
      (e: unknown) => RedfenceError.is(e, 'RF_INVALID_OPTIONS'),
    );
    assert.throws(
      () => kafka.port({ groupId: 'g', maxBatchSize: 0 }),
      (e: unknown) => RedfenceError.is(e, 'RF_INVALID_OPTIONS'),
    );
    assert.throws(
      () => kafka.port({ groupId: 'g', retries: 1 } as never),
      (e: unknown) => RedfenceError.is(e, 'RF_INVALID_OPTIONS'),
    );
  });

  it('delivers batches of at most maxBatchSize in offset order; a new port resumes at the commit', async () => {
    const kafka = new MemoryKafka({ topics: { in: 1 } });
    kafka.produce(Array.from({ length: 25 }, (_, i) => ({ topic: 'in', key: 'k', value: `${i}` })));
    const a = kafka.port({ groupId: 'g', maxBatchSize: 10 });
    const ra = recorder('a');
    await a.start(['in'], ra.h);
    await until('a read everything', () => ra.records.length === 25);
    assert.deepEqual(
      ra.batches.map((b) => b.offsets.length),
      [10, 10, 5],
    );
    assert.deepEqual(
      ra.records.map((r) => Number(r.offset)),
      Array.from({ length: 25 }, (_, i) => i),
    );
    await a.commit([{ topic: 'in', partition: 0, offset: 20 }]);
    assert.deepEqual(kafka.committedOffsets('g', 'in'), new Map([[0, 20]]));
    assert.deepEqual(await a.committed([{ topic: 'in', partition: 0 }]), new Map([['in/0', 20]]));
    await a.stop();
    const b = kafka.port({ groupId: 'g' });
    const rb = recorder('b');
    await b.start(['in'], rb.h);
    await until('b read from the commit on', () => rb.records.length === 5);
    assert.equal(rb.records[0]?.offset, '20');
    await assert.rejects(a.commit([{ topic: 'in', partition: 0, offset: 25 }]), (e: unknown) =>
      RedfenceError.is(e, 'RF_INVALID_STATE'),
    );
    await b.stop();
  });

  it('a transaction commits records and offsets together; an aborted one leaves neither', async () => {
    const kafka = new MemoryKafka({ topics: { in: 1, out: 2 } });
    kafka.produce([{ topic: 'in', key: 'k', value: 'x' }]);
    const port = kafka.port({ groupId: 'g' });
    const r = recorder('p');
    await port.start(['in'], r.h);
    await until('assigned', () => port.assignment.length === 1);
    const out = (v: string) => ({ topic: 'out', key: 'a', value: v, partition: 0 });
    await port.produceTransactionally(
      [out('1'), out('2')],
      [{ topic: 'in', partition: 0, offset: 1 }],
      () => {
        // inside the open transaction: written, not visible to read_committed
        assert.deepEqual(text(kafka.read('out')), []);
        assert.deepEqual(text(kafka.read('out', { isolation: 'read_uncommitted' })), ['a=1', 'a=2']);
      },
    );
    assert.deepEqual(text(kafka.read('out')), ['a=1', 'a=2']);
    assert.deepEqual(kafka.committedOffsets('g', 'in'), new Map([[0, 1]]));
    assert.equal(kafka.highWatermarks('out').get(0), 3, 'the commit marker takes an offset');

    port.failNext('transaction');
    await assert.rejects(
      port.produceTransactionally([out('3')], [{ topic: 'in', partition: 0, offset: 9 }]),
      (e: unknown) => (e as { retriable?: unknown }).retriable === true,
    );
    assert.deepEqual(text(kafka.read('out')), ['a=1', 'a=2'], 'aborted records are not read_committed');
    assert.deepEqual(text(kafka.read('out', { isolation: 'read_uncommitted' })), ['a=1', 'a=2', 'a=3']);
    assert.deepEqual(kafka.committedOffsets('g', 'in'), new Map([[0, 1]]), 'offsets not committed');
    await port.produceTransactionally([out('4')], [{ topic: 'in', partition: 0, offset: 1 }]);
    assert.deepEqual(text(kafka.read('out')), ['a=1', 'a=2', 'a=4']);
    assert.equal(kafka.highWatermarks('out').get(0), 7, '4 records + 3 markers');
    assert.deepEqual(
      port.steps.map((s) => `${s.kind}:${s.records}:${s.outcome}`),
      ['transaction:2:ok', 'transaction:1:failed', 'transaction:1:ok'],
    );
    await port.stop();
  });

  it('a consumer skips aborted records and transaction markers (offsets have holes)', async () => {
    const kafka = new MemoryKafka({ topics: { in: 1 } });
    const producer = kafka.port({ groupId: 'producer' });
    await producer.start(['in'], recorder('x').h);
    const rec = (v: string) => ({ topic: 'in', key: 'k', value: v });
    await producer.produceTransactionally([rec('a'), rec('b')], []);
    producer.failNext('transaction');
    await producer.produceTransactionally([rec('lost')], []).catch(() => undefined);
    kafka.produce([rec('c')]);
    const consumer = kafka.port({ groupId: 'g' });
    const r = recorder('c');
    await consumer.start(['in'], r.h);
    await until('read a, b, c', () => r.records.length === 3);
    assert.deepEqual(
      r.records.map((x) => `${x.value?.toString()}@${x.offset}`),
      ['a@0', 'b@1', 'c@5'],
    );
    await Promise.all([producer.stop(), consumer.stop()]);
  });

  it('a second port takes half the partitions after the first revokes them; stopping gives them back', async () => {
    const kafka = new MemoryKafka({ topics: { in: 4 } });
    const owner = new Map<number, string>();
    const log: string[] = [];
    const track = (name: string) => {
      const r = recorder(name, log);
      const { onAssign, onRevoke } = r.h;
      r.h.onAssign = async (tps: TopicPartition[]) => {
        for (const tp of tps) {
          assert.equal(owner.get(tp.partition), undefined, `partition ${tp.partition} has one owner`);
          owner.set(tp.partition, name);
        }
        await onAssign(tps);
      };
      r.h.onRevoke = async (tps: TopicPartition[], lost: boolean) => {
        await new Promise((resolve) => setImmediate(resolve)); // an awaited revocation
        for (const tp of tps) owner.delete(tp.partition);
        await onRevoke(tps, lost);
      };
      return r;
    };
    const a = kafka.port({ groupId: 'g', name: 'a' });
    await a.start(['in'], track('a').h);
    await kafka.settled();
    assert.deepEqual(
      a.assignment.map((t) => t.partition),
      [0, 1, 2, 3],
    );
    const b = kafka.port({ groupId: 'g', name: 'b' });
    await b.start(['in'], track('b').h);
    await kafka.settled();
    assert.equal(a.assignment.length, 2);
    assert.equal(b.assignment.length, 2);
    assert.deepEqual(log.slice(0, 3), ['a assign 0,1,2,3', 'a revoke 2,3', 'b assign 2,3']);
    // batches of each partition go to its owner only
    kafka.produce(Array.from({ length: 40 }, (_, i) => ({ topic: 'in', key: `k${i}`, value: `${i}` })));
    await b.stop();
    assert.ok(log.includes('b revoke 2,3'), 'stop() awaits the revocation');
    assert.deepEqual(b.assignment, []);
    await kafka.settled();
    assert.equal(log.at(-1), 'a assign 2,3');
    assert.equal(a.assignment.length, 4);
    await a.expire();
    assert.deepEqual(log.slice(-2), ['a revoke lost 0,1,2,3', 'a assign 0,1,2,3']);
    await a.stop();
    assert.deepEqual([...a.handlerErrors, ...b.handlerErrors], [], 'no handler failed (one owner each time)');
  });

  it('a newer producer with the same transactional id fences the older one', async () => {
    const kafka = new MemoryKafka({ topics: { in: 1, out: 1 } });
    const old = kafka.port({ groupId: 'g', transactionalId: 'same' });
    await old.start(['in'], recorder('old').h);
    const young = kafka.port({ groupId: 'g', transactionalId: 'same' });
    await young.start(['in'], recorder('young').h);
    const rec = [{ topic: 'out', key: 'k', value: 'v' }];
    await assert.rejects(old.produceTransactionally(rec, []), (e: unknown) =>
      RedfenceError.is(e, 'RF_KAFKA_FATAL'),
    );
    await young.produceTransactionally(rec, []);
    assert.equal(kafka.read('out').length, 1);
    await Promise.all([old.stop(), young.stop()]);
  });

  it('injected failures: retriable, fatal, written; a held step waits for its release', async () => {
    const kafka = new MemoryKafka({ topics: { in: 1, out: 1 } });
    const port = kafka.port({ groupId: 'g' });
    await port.start(['in'], recorder('p').h);
    await kafka.settled();
    const rec = [{ topic: 'out', key: 'k', value: 'v' }];
    port.failNext('produce');
    await assert.rejects(
      port.produce(rec),
      (e: unknown) => (e as { retriable?: unknown }).retriable === true,
    );
    assert.equal(kafka.read('out').length, 0, 'nothing written');
    port.failNext('produce', { written: true });
    await assert.rejects(port.produce(rec));
    assert.equal(kafka.read('out').length, 1, 'written though the call failed');
    port.failNext('produce', { fatal: true });
    await assert.rejects(port.produce(rec), (e: unknown) => (e as { fatal?: unknown }).fatal === true);
    port.failNext('commit', { fatal: true });
    await assert.rejects(port.commit([{ topic: 'in', partition: 0, offset: 0 }]), (e: unknown) =>
      Boolean((e as { fatal?: unknown }).fatal),
    );
    port.failNext('transaction', { fatal: true });
    await assert.rejects(port.produceTransactionally(rec, []), (e: unknown) =>
      RedfenceError.is(e, 'RF_KAFKA_FATAL'),
    );
    port.failNext('commit', { error: new Error('exactly this') });
    await assert.rejects(port.commit([{ topic: 'in', partition: 0, offset: 0 }]), /exactly this/);
    assert.throws(
      () => port.failNext('flush' as never),
      (e: unknown) => RedfenceError.is(e, 'RF_INVALID_ARGUMENT'),
    );

    const held = port.hold('commit');
    let done = false;
    const commit = port.commit([{ topic: 'in', partition: 0, offset: 1 }]).then(() => {
      done = true;
    });
    await held.reached;
    for (let i = 0; i < 100; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(done, false, 'held');
    assert.equal(kafka.committedOffsets('g', 'in').get(0), undefined);
    held.release();
    await commit;
    assert.equal(kafka.committedOffsets('g', 'in').get(0), 1);
    await port.stop();
  });

  it('a throwing batch is delivered again from its first record; seek, pause and resume move delivery', async () => {
    const kafka = new MemoryKafka({ topics: { in: 1 } });
    kafka.produce(Array.from({ length: 6 }, (_, i) => ({ topic: 'in', key: 'k', value: `${i}` })));
    const port = kafka.port({ groupId: 'g', maxBatchSize: 3 });
    const r = recorder('p');
    let throws = 1;
    r.h.batch = async (_p, rs) => {
      if (rs[0]?.offset === '3' && throws-- > 0) throw new Error('once');
    };
    await port.start(['in'], r.h);
    await until('all delivered', () => r.records.length === 6);
    assert.deepEqual(
      r.batches.map((b) => b.offsets.join(',')),
      ['0,1,2', '3,4,5'],
    );
    assert.equal(port.handlerErrors.length, 1);
    assert.equal(port.delivered, 9, 'the failed batch counted twice');
    const tp = { topic: 'in', partition: 0 };
    port.pause([tp]);
    port.seek(tp, 1);
    kafka.produce([{ topic: 'in', key: 'k', value: '6' }]);
    for (let i = 0; i < 100; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(r.records.length, 6, 'paused: nothing delivered');
    port.resume([tp]);
    await until('redelivered from 1', () => r.records.length === 12);
    assert.deepEqual(
      r.records.slice(6).map((x) => x.offset),
      ['1', '2', '3', '4', '5', '6'],
    );
    await port.stop();
    await port.stop(); // idempotent
    assert.equal(port.state, 'stopped');
    await assert.rejects(port.start(['in'], r.h), (e: unknown) => RedfenceError.is(e, 'RF_INVALID_STATE'));
  });

  it('topic admin: describe, create (an existing topic is no error), partition counts', async () => {
    const kafka = new MemoryKafka({ topics: { in: 3 } });
    const port = kafka.port({ groupId: 'g' });
    assert.deepEqual(await port.describeTopics(['in', 'out']), new Map([['in', 3]]));
    await port.createTopics([{ topic: 'out', partitions: 3 }]);
    await port.createTopics([{ topic: 'out', partitions: 5 }]);
    assert.equal(await port.partitionCount('out'), 3);
    await assert.rejects(port.partitionCount('nope'), (e: unknown) =>
      RedfenceError.is(e, 'RF_TOPIC_MISSING'),
    );
    await port.stop();
    await assert.rejects(port.describeTopics(['in']), (e: unknown) =>
      RedfenceError.is(e, 'RF_INVALID_STATE'),
    );
  });
});
