/**
 * The KafkaPort contract: cases run unchanged against every side (MemoryKafka's port, and the
 * default adapter on the real broker), so a difference in behaviour fails on one side. Each case
 * asserts exact records and offsets per partition. A side supplies topics, ports, a plain writer and
 * the ways it can make a transaction fail inside the open transaction. The port has no isolation
 * setting (its consumer is always read_committed), so read_uncommitted visibility is not a case here.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import {
  BROKER_TOPICS,
  type CommitOffset,
  type OutRecord,
  type TopicPartition,
} from '../../src/kafka/types.js';
import { partitionFor } from '../../src/partitioner/index.js';
import { uniqueName } from '../helpers/env.js';
import { metadataCases } from './contract-metadata.js';
import { rebalanceCase } from './contract-rebalance.js';
import { resubscribeCase } from './contract-resubscribe.js';
import { asSent, type ContractSide, Recorder, range, waitFor } from './contract-support.js';

export type { ContractSide, PortSpec, TxnFailure } from './contract-support.js';

/** Registers the contract's cases (inside a describe) against one side. */
export function contractCases(side: ContractSide): void {
  it('produce then consume: per partition order, keys, values, headers, timestamps, offsets', async (t) => {
    const topic = uniqueName('contract-pc');
    await side.topics(t, [{ topic, partitions: 3 }]);
    const port = side.port(t, { groupId: uniqueName('contract-pc-g'), maxBatchSize: 4 });
    const rec = new Recorder();
    await port.start([topic], rec.handlers());
    const out: OutRecord[] = [];
    // keyed without a partition: placed by murmur2, the same on both sides
    for (let i = 0; i < 12; i++) out.push({ topic, key: `k${i % 6}`, value: `v${i}` });
    out.push({ topic, key: 'k1', value: null }); // a tombstone
    // no empty value here: the default adapter's client sends one as null on Node 20 and as empty bytes
    // on Node 24 (docs/testing.md, "Empty bytes"), so neither side can promise it
    out.push({
      topic,
      key: Buffer.from([0xc3, 0xa9]),
      value: 'headers',
      partition: 2,
      timestamp: '1700000000123',
      headers: {
        text: 'x',
        bin: Buffer.from([0, 255]),
        multi: [Buffer.from('a'), Buffer.from('b')],
        one: [Buffer.from('z')],
        none: [],
      },
    });
    out.push({ topic, key: null, value: 'no key', partition: 1, timestamp: '1700000000456' });
    out.push({ topic, key: '', value: 'empty key', partition: 1 });
    const before = Date.now();
    await port.produce(out);
    const after = Date.now();
    // what each partition must hold, in produce order, at offsets from 0
    const expected = new Map<number, { key: string | null; value: string | null }[]>([
      [0, []],
      [1, []],
      [2, []],
    ]);
    for (const r of out) {
      const p = r.partition ?? partitionFor(r.key as string, 3);
      expected.get(p)?.push({ key: asSent(r.key, 'key'), value: asSent(r.value, 'value') });
    }
    await waitFor(side, 'every record consumed', () =>
      [...expected].every(([p, list]) => (rec.byPartition.get(p)?.length ?? 0) >= list.length),
    );
    assert.deepEqual(await port.highWatermarks(topic), new Map([...expected].map(([p, l]) => [p, l.length])));
    for (const [p, list] of expected) {
      const got = rec.byPartition.get(p) ?? [];
      assert.deepEqual(
        got.map((r) => ({ offset: r.offset, key: r.key, value: r.value })),
        list.map((r, offset) => ({ offset, ...r })),
        `partition ${p}: records in produce order at offsets 0..${list.length - 1}`,
      );
      for (const r of got) {
        if (r.value === 'headers') {
          assert.deepEqual(
            r.headers,
            { bin: '00ff', multi: ['61', '62'], one: '7a', text: '78' },
            'headers: one value as itself, repeated ones as a list, none left out',
          );
          assert.equal(r.timestamp, '1700000000123');
        } else if (r.value === 'no key') assert.equal(r.timestamp, '1700000000456');
        else {
          assert.deepEqual(r.headers, {}, 'no headers given, none received');
          const ts = Number(r.timestamp);
          assert.ok(
            ts >= before - 1000 && ts <= after + 1000,
            `CreateTime from the producer clock, got ${ts}`,
          );
        }
      }
    }
    assert.deepEqual(rec.violations, []);
    for (const b of rec.batches) {
      assert.ok(
        b.offsets.length >= 1 && b.offsets.length <= 4,
        `batch of ${b.offsets.length} within maxBatchSize 4`,
      );
      assert.deepEqual(b.offsets, range(b.offsets[0] as number, (b.offsets[0] as number) + b.offsets.length));
      const total = expected.get(b.partition)?.length ?? 0;
      assert.ok(
        b.high >= (b.offsets.at(-1) as number) + 1 && b.high <= total,
        `high watermark ${b.high} of a batch ending at ${b.offsets.at(-1)} (partition holds ${total})`,
      );
    }
  });

  it('commit and resume: the next member of the group starts exactly at the committed offset', async (t) => {
    const topic = uniqueName('contract-cr');
    await side.topics(t, [{ topic, partitions: 3 }]);
    await side.write(
      topic,
      [0, 1, 2].flatMap((partition) => range(0, 10).map((i) => ({ partition, value: `p${partition}-${i}` }))),
    );
    const groupId = uniqueName('contract-cr-g');
    const a = side.port(t, { groupId, maxBatchSize: 3 });
    const recA = new Recorder();
    await a.start([topic], recA.handlers('a'));
    await waitFor(side, 'the first member consumed everything', () => recA.count() >= 30);
    const tps: TopicPartition[] = [0, 1, 2].map((partition) => ({ topic, partition }));
    assert.deepEqual(
      await a.committed(tps),
      new Map(tps.map((tp) => [`${topic}/${tp.partition}`, -1])),
      'nothing committed yet',
    );
    await a.commit([
      { topic, partition: 0, offset: 4 },
      { topic, partition: 1, offset: 7 },
    ]);
    assert.deepEqual(
      await a.committed(tps),
      new Map([
        [`${topic}/0`, 4],
        [`${topic}/1`, 7],
        [`${topic}/2`, -1],
      ]),
    );
    await a.stop();
    const b = side.port(t, { groupId, maxBatchSize: 3 });
    const recB = new Recorder();
    await b.start([topic], recB.handlers('b'));
    await waitFor(side, 'the second member consumed from the commits on', () => recB.count() >= 6 + 3 + 10);
    assert.deepEqual(recB.offsets(0), range(4, 10), 'partition 0 from its commit (4)');
    assert.deepEqual(recB.offsets(1), range(7, 10), 'partition 1 from its commit (7)');
    assert.deepEqual(recB.offsets(2), range(0, 10), 'partition 2, never committed, from the log start');
    assert.deepEqual(
      recB.values(1),
      range(7, 10).map((i) => `p1-${i}`),
    );
  });

  it('transactions: a committed one is visible with its offsets, a failed one never', async (t) => {
    const input = uniqueName('contract-tx-in');
    const output = uniqueName('contract-tx-out');
    await side.topics(t, [
      { topic: input, partitions: 1 },
      { topic: output, partitions: 2 },
    ]);
    await side.write(
      input,
      range(0, 6).map((i) => ({ partition: 0, value: `in-${i}` })),
    );
    const groupId = uniqueName('contract-tx-g');
    const port = side.port(t, { groupId, maxBatchSize: 100, transactional: true });
    const rec = new Recorder();
    await port.start([input], rec.handlers());
    await waitFor(side, 'the input consumed', () => rec.count() >= 6);
    const inTp = [{ topic: input, partition: 0 }];
    const committed = async () => (await port.committed(inTp)).get(`${input}/0`);
    const outs = (tag: string): OutRecord[] => [
      { topic: output, key: `${tag}-k`, value: `${tag}0`, partition: 0 },
      { topic: output, key: `${tag}-k`, value: `${tag}1`, partition: 1 },
    ];
    const at = (offset: number): CommitOffset[] => [{ topic: input, partition: 0, offset }];
    await port.produceTransactionally(outs('a'), at(2));
    assert.equal(await committed(), 2, 'a committed transaction commits its offsets');
    for (const [name, failure] of Object.entries(side.txnFailures)) {
      const { beforeCommit, rejects } = failure.arm(port);
      await assert.rejects(port.produceTransactionally(outs(`b-${name}`), at(5), beforeCommit), rejects);
      assert.equal(await committed(), 2, `a failed transaction (${name}) commits no offsets`);
    }
    await port.produceTransactionally(outs('c'), at(3));
    assert.equal(await committed(), 3, 'a transaction after a failed one commits');
    const reader = side.port(t, { groupId: uniqueName('contract-tx-r'), maxBatchSize: 100 });
    const out = new Recorder();
    await reader.start([output], out.handlers('r'));
    await waitFor(side, 'the last transaction read', () =>
      [0, 1].every((p) => out.values(p).includes(`c${p}`)),
    );
    const hw = await reader.highWatermarks(output);
    for (const p of [0, 1]) {
      assert.deepEqual(out.values(p), [`a${p}`, `c${p}`], `partition ${p}: committed transactions only`);
      const [first, last] = out.offsets(p) as [number, number];
      assert.equal(first, 0, 'the first transaction starts the log');
      // after a1's commit marker (offset 1); the aborted records before it may or may not be in the
      // log on a real broker (the client drops what it had not sent yet), so no exact offset
      assert.ok(last >= 2, `partition ${p}: c at ${last}, after the first commit marker`);
      assert.equal(hw.get(p), last + 2, `partition ${p}: the last record, then its commit marker`);
    }
  });

  rebalanceCase(side);
  resubscribeCase(side);
  metadataCases(side);

  it("listTopics: every topic by name, sorted, before start, the broker's own left out", async (t) => {
    const ns = uniqueName('contract-ls');
    // made in reverse order: the listing sorts them
    await side.topics(t, [
      { topic: `${ns}-b`, partitions: 2 },
      { topic: `${ns}-a`, partitions: 1 },
    ]);
    const port = side.port(t, { groupId: uniqueName('contract-ls-g') });
    assert.ok(port.listTopics, 'the port lists topics');
    const list = port.listTopics.bind(port);
    let names: string[] = [];
    await waitFor(side, 'both topics listed', async () => {
      names = await list();
      return names.filter((n) => n.startsWith(ns)).length === 2;
    });
    assert.deepEqual(
      names.filter((n) => n.startsWith(ns)),
      [`${ns}-a`, `${ns}-b`],
    );
    assert.deepEqual(names, [...names].sort(), 'sorted');
    for (const own of BROKER_TOPICS) assert.ok(!names.includes(own), `${own} left out`);
  });

  it('seek: seeking a partition back delivers again from that offset', async (t) => {
    const topic = uniqueName('contract-sk');
    await side.topics(t, [{ topic, partitions: 1 }]);
    await side.write(
      topic,
      range(0, 8).map((i) => ({ partition: 0, value: `s${i}` })),
    );
    const port = side.port(t, { groupId: uniqueName('contract-sk-g'), maxBatchSize: 3 });
    const rec = new Recorder();
    await port.start([topic], rec.handlers());
    await waitFor(side, 'the partition consumed', () => rec.count() >= 8);
    port.seek({ topic, partition: 0 }, 3);
    await waitFor(side, 'the records from 3 on again', () => rec.count() >= 13);
    await side.write(topic, [{ partition: 0, value: 'end' }]);
    await waitFor(side, 'the record written after the seek', () => rec.values(0).includes('end'));
    assert.deepEqual(rec.offsets(0), [...range(0, 8), ...range(3, 8), 8]);
    assert.deepEqual(rec.values(0).slice(8, 13), ['s3', 's4', 's5', 's6', 's7']);
  });
}
