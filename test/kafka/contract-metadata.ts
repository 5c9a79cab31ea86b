/**
 * The contract's commit-metadata cases (run on every side, like the rest of the contract): metadata
 * committed with an offset, at least once and in a transaction, reads back as written, by the member
 * and by the group's next member when its partitions are assigned; a failed transaction's metadata is
 * never visible; metadata the broker could not store is refused before anything is sent.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type {
  CommitOffset,
  CommittedOffset,
  KafkaPort,
  OutRecord,
  TopicPartition,
} from '../../src/kafka/types.js';
import { uniqueName } from '../helpers/env.js';
import { type ContractSide, Recorder, range, waitFor } from './contract-support.js';

/** 4095 bytes as UTF-8 (2047 two-byte characters and one more): the longest metadata allowed. */
const LONGEST = `${'é'.repeat(2047)}x`;

/** The port's committedWithMetadata (optional in the interface; both ports of the contract have it). */
function withMeta(port: KafkaPort, tps: readonly TopicPartition[]): Promise<Map<string, CommittedOffset>> {
  assert.ok(port.committedWithMetadata, 'the port reads commit metadata');
  return port.committedWithMetadata(tps);
}

/** What a member reads on assignment (inside onAssign, before any of the partitions' records). */
function readOnAssign(side: ContractSide, t: Parameters<ContractSide['port']>[0], groupId: string) {
  const port = side.port(t, { groupId });
  const seen = new Map<string, CommittedOffset>();
  const rec = new Recorder();
  const handlers = {
    ...rec.handlers('next'),
    onAssign: async (tps: TopicPartition[]) => {
      for (const [k, c] of await withMeta(port, tps)) seen.set(k, c);
    },
  };
  return { port, seen, rec, start: (topics: string[]) => port.start(topics, handlers) };
}

export function metadataCases(side: ContractSide): void {
  it('commit metadata: stored with the offset, read back by the member and on assignment by the next', async (t) => {
    const topic = uniqueName('contract-md');
    await side.topics(t, [{ topic, partitions: 3 }]);
    await side.write(
      topic,
      [0, 1, 2].flatMap((partition) => range(0, 6).map((i) => ({ partition, value: `p${partition}-${i}` }))),
    );
    const groupId = uniqueName('contract-md-g');
    const a = side.port(t, { groupId });
    const rec = new Recorder();
    await a.start([topic], rec.handlers('a'));
    await waitFor(side, 'the first member consumed everything', () => rec.count() >= 18);
    const tps: TopicPartition[] = [0, 1, 2].map((partition) => ({ topic, partition }));
    const k = (p: number) => `${topic}/${p}`;
    assert.deepEqual(
      await withMeta(a, tps),
      new Map(tps.map((tp) => [k(tp.partition), { offset: -1, metadata: '' }])),
      'nothing committed yet',
    );
    await a.commit([
      { topic, partition: 0, offset: 2, metadata: 'st=100' },
      { topic, partition: 1, offset: 3 },
      { topic, partition: 2, offset: 4, metadata: '' },
    ]);
    assert.deepEqual(
      await withMeta(a, tps),
      new Map([
        [k(0), { offset: 2, metadata: 'st=100' }],
        [k(1), { offset: 3, metadata: '' }],
        [k(2), { offset: 4, metadata: '' }],
      ]),
      'none given and empty both read back as empty',
    );
    // the same offset with new metadata: stored once commit() resolves
    await a.commit([{ topic, partition: 0, offset: 2, metadata: 'st=200' }]);
    assert.deepEqual((await withMeta(a, tps)).get(k(0)), { offset: 2, metadata: 'st=200' });
    await a.commit([
      { topic, partition: 0, offset: 3, metadata: LONGEST },
      { topic, partition: 2, offset: 5, metadata: '{"st":"✓😀"}' },
    ]);
    const last = new Map([
      [k(0), { offset: 3, metadata: LONGEST }],
      [k(1), { offset: 3, metadata: '' }],
      [k(2), { offset: 5, metadata: '{"st":"✓😀"}' }],
    ]);
    assert.deepEqual(await withMeta(a, tps), last, 'the longest metadata and non-ASCII text as written');
    assert.deepEqual(
      await a.committed(tps),
      new Map([
        [k(0), 3],
        [k(1), 3],
        [k(2), 5],
      ]),
      'committed() reads the offsets alone',
    );
    await a.stop();
    const next = readOnAssign(side, t, groupId);
    await next.start([topic]);
    await waitFor(side, 'the next member consumed from the commits', () => next.rec.count() >= 3 + 3 + 1);
    assert.deepEqual(next.seen, last, 'what the next member read in onAssign');
    assert.deepEqual(next.rec.offsets(0), range(3, 6), 'partition 0 from its commit');
  });

  it('transactions: the committed one stores its metadata, a failed one neither offsets nor metadata', async (t) => {
    const input = uniqueName('contract-mdtx-in');
    const output = uniqueName('contract-mdtx-out');
    await side.topics(t, [
      { topic: input, partitions: 1 },
      { topic: output, partitions: 1 },
    ]);
    await side.write(
      input,
      range(0, 6).map((i) => ({ partition: 0, value: `in-${i}` })),
    );
    const groupId = uniqueName('contract-mdtx-g');
    const port = side.port(t, { groupId, transactional: true });
    const rec = new Recorder();
    await port.start([input], rec.handlers());
    await waitFor(side, 'the input consumed', () => rec.count() >= 6);
    const inTp = [{ topic: input, partition: 0 }];
    const read = async () => (await withMeta(port, inTp)).get(`${input}/0`);
    const out = (v: string): OutRecord[] => [{ topic: output, key: null, value: v, partition: 0 }];
    const at = (offset: number, metadata: string): CommitOffset[] => [
      { topic: input, partition: 0, offset, metadata },
    ];
    await port.produceTransactionally(out('a'), at(2, 'st=a'));
    assert.deepEqual(await read(), { offset: 2, metadata: 'st=a' }, 'committed with the transaction');
    for (const [name, failure] of Object.entries(side.txnFailures)) {
      // the same offset (only the metadata would show the failed transaction), then a later one
      for (const [offset, what] of [
        [2, 'its metadata'],
        [4, 'its offset and metadata'],
      ] as const) {
        const { beforeCommit, rejects } = failure.arm(port);
        await assert.rejects(
          port.produceTransactionally(out(`b-${name}`), at(offset, `st=b${offset}`), beforeCommit),
          rejects,
        );
        assert.deepEqual(
          await read(),
          { offset: 2, metadata: 'st=a' },
          `failed (${name}): ${what} not visible`,
        );
      }
    }
    await port.produceTransactionally(out('d'), at(3, LONGEST));
    assert.deepEqual(
      await read(),
      { offset: 3, metadata: LONGEST },
      'a transaction after failed ones commits',
    );
    await port.stop();
    const next = readOnAssign(side, t, groupId);
    await next.start([input]);
    await waitFor(side, 'the next member consumed from the commit', () => next.rec.count() >= 3);
    assert.deepEqual(next.seen, new Map([[`${input}/0`, { offset: 3, metadata: LONGEST }]]));
  });

  it('metadata the broker could not store is refused before anything is sent, naming the partition', async (t) => {
    const input = uniqueName('contract-mdbad-in');
    const output = uniqueName('contract-mdbad-out');
    await side.topics(t, [
      { topic: input, partitions: 2 },
      { topic: output, partitions: 1 },
    ]);
    await side.write(
      input,
      [0, 1].map((partition) => ({ partition, value: 'x' })),
    );
    const groupId = uniqueName('contract-mdbad-g');
    const port = side.port(t, { groupId, transactional: true });
    const rec = new Recorder();
    await port.start([input], rec.handlers());
    await waitFor(side, 'both partitions consumed', () => rec.count() >= 2);
    const bad: [string, unknown, RegExp][] = [
      ['4096 ASCII bytes', 'x'.repeat(4096), /4096 bytes as UTF-8; at most 4095/],
      ['4096 bytes in 2048 characters', 'é'.repeat(2048), /4096 bytes as UTF-8/],
      ['a NUL', 'st\u0000100', /NUL/],
      ['a lone surrogate', 'st\uD800', /lone surrogate/],
      ['not a string', 100, /must be a string/],
    ];
    const tps = [0, 1].map((partition) => ({ topic: input, partition }));
    for (const [what, metadata, message] of bad) {
      const offsets = [
        { topic: input, partition: 0, offset: 1, metadata: 'fine' },
        { topic: input, partition: 1, offset: 1, metadata } as CommitOffset,
      ];
      const refused = { code: 'RF_INVALID_ARGUMENT', message: new RegExp(`${input}/1[^]*${message.source}`) };
      await assert.rejects(port.commit(offsets), refused, `commit, ${what}`);
      await assert.rejects(
        port.produceTransactionally([{ topic: output, key: null, value: what, partition: 0 }], offsets),
        refused,
        `produceTransactionally, ${what}`,
      );
    }
    assert.deepEqual(
      await withMeta(port, tps),
      new Map(tps.map((tp) => [`${tp.topic}/${tp.partition}`, { offset: -1, metadata: '' }])),
      'nothing of the refused calls committed (partition 0 was fine)',
    );
    await port.produceTransactionally([{ topic: output, key: null, value: 'ok', partition: 0 }], []);
    const reader = side.port(t, { groupId: uniqueName('contract-mdbad-r') });
    const got = new Recorder();
    await reader.start([output], got.handlers('r'));
    await waitFor(side, 'the output read', () => got.count() >= 1);
    // a record of a refused transaction sent (and aborted) would sit before it, with its marker
    assert.deepEqual(got.offsets(0), [0], 'the first record of the output is the one after the refusals');
    assert.deepEqual(got.values(0), ['ok']);
  });
}
