/**
 * Commit metadata beyond the contract (test/kafka/contract-metadata.ts runs on both ports): the bound
 * and the refusals at their edges, the commit's confirmation rule, the admin client's read of a group's
 * commits (any process, no membership), and on the real broker why the refusals exist: what the binding
 * does to metadata it is handed without them (a NUL cuts the text; the broker refuses 4096 bytes,
 * because the binding sends a NUL after the text).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RdKafka } from '@confluentinc/kafka-javascript';
import { pollUntil } from '../../src/harness/poll.js';
import { KafkaAdmin } from '../../src/kafka/admin.js';
import { checkCommitMetadata, MAX_COMMIT_METADATA_BYTES } from '../../src/kafka/commit-metadata.js';
import { stored } from '../../src/kafka/committed-offsets.js';
import { ConfluentKafka } from '../../src/kafka/confluent.js';
import type { CommitOffset, InRecord } from '../../src/kafka/types.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, produce } from '../helpers/kafka.js';

const at = (metadata: unknown): CommitOffset[] => [
  { topic: 'orders', partition: 7, offset: 1, metadata } as CommitOffset,
];

describe('checkCommitMetadata', () => {
  it('takes up to 4095 bytes as UTF-8 and refuses one more, naming the partition and not the text', () => {
    assert.equal(MAX_COMMIT_METADATA_BYTES, 4095);
    checkCommitMetadata(at('s'.repeat(4095)), 'commit');
    checkCommitMetadata(at(`${'😀'.repeat(1023)}abc`), 'commit'); // 4092 + 3 bytes
    checkCommitMetadata(at(''), 'commit');
    checkCommitMetadata(at(undefined), 'commit');
    const refused = (m: unknown, message: RegExp) =>
      assert.throws(
        () => checkCommitMetadata(at(m), 'commit'),
        (err: Error & { code?: string }) => {
          assert.equal(err.code, 'RF_INVALID_ARGUMENT');
          assert.match(err.message, /^commit: the metadata of orders\/7 /);
          assert.match(err.message, message);
          assert.doesNotMatch(err.message, /secret/, 'the text is never in the error');
          return true;
        },
      );
    refused(`secret${'s'.repeat(4090)}`, /is 4096 bytes as UTF-8; at most 4095/);
    refused(`secret${'😀'.repeat(1023)}`, /is 4098 bytes/);
    refused('secret\u0000', /NUL/);
    refused('secret\uDC00', /lone surrogate/);
    refused('\uD83Dsecret', /lone surrogate/);
    refused(4095, /must be a string/);
  });
});

describe('the commit confirmation rule', () => {
  const o = (offset: number, metadata?: string): CommitOffset =>
    metadata === undefined
      ? { topic: 't', partition: 0, offset }
      : { topic: 't', partition: 0, offset, metadata };
  it('the same offset is stored only with the same metadata; a later offset always; none: offsets only', () => {
    assert.equal(stored(o(5, 'b'), { offset: 5, metadata: 'a' }), false, 'the old metadata at the offset');
    assert.equal(stored(o(5, 'b'), { offset: 5, metadata: 'b' }), true);
    assert.equal(stored(o(5, ''), { offset: 5, metadata: '' }), true);
    assert.equal(stored(o(5, 'b'), { offset: 6, metadata: 'c' }), true, 'a later commit holds it');
    assert.equal(stored(o(5, 'b'), { offset: 4, metadata: 'b' }), false);
    assert.equal(stored(o(5), { offset: 5, metadata: 'x' }), true, 'no metadata: the offset alone');
    assert.equal(stored(o(5), undefined), false);
  });
});

describe('commit metadata on the broker', { timeout: 90_000 }, () => {
  it('the admin client reads a group’s commits with their metadata; an aborted transaction’s never', async (t) => {
    const topic = uniqueName('cm-admin');
    const groupId = `${topic}-g`;
    t.after(await createTopics([{ topic, partitions: 2 }]));
    await produce(
      topic,
      [0, 1].map((partition) => ({ key: null, value: 'x', partition })),
    );
    const port = new ConfluentKafka({
      brokers: KAFKA_BROKERS.split(','),
      groupId,
      transactionalId: uniqueName('cm-admin-txn'),
    });
    t.after(() => port.stop());
    const seen: InRecord[] = [];
    await port.start([topic], {
      onAssign: async () => undefined,
      onRevoke: async () => undefined,
      onBatch: async (_t, _p, records) => {
        seen.push(...records);
      },
    });
    await pollUntil('both partitions consumed', async () => seen.length >= 2, 30_000);
    const admin = new KafkaAdmin({ 'bootstrap.servers': KAFKA_BROKERS });
    t.after(() => admin.close());
    await port.commit([
      { topic, partition: 0, offset: 1, metadata: '{"st":"1700000000123"}' },
      { topic, partition: 1, offset: 1 },
    ]);
    await port.produceTransactionally([], [{ topic, partition: 1, offset: 1, metadata: 'txn ✓' }]);
    const failed = new Error('failed inside the transaction');
    await assert.rejects(
      port.produceTransactionally([], [{ topic, partition: 1, offset: 1, metadata: 'aborted' }], () => {
        throw failed;
      }),
      failed,
    );
    const commits = await admin.groupCommits(groupId, [topic]);
    assert.deepEqual(
      commits.get(topic),
      new Map([
        [0, { offset: 1, metadata: '{"st":"1700000000123"}' }],
        [1, { offset: 1, metadata: 'txn ✓' }],
      ]),
    );
    assert.deepEqual(
      (await admin.groupOffsets(groupId, [topic])).get(topic),
      new Map([
        [0, 1],
        [1, 1],
      ]),
    );
  });

  it('without the refusals the binding would lose metadata: a NUL cuts it, 4096 bytes the broker refuses', async (t) => {
    const topic = uniqueName('cm-raw');
    t.after(await createTopics([{ topic, partitions: 3 }]));
    const results: { code: number | undefined }[] = [];
    const c = new RdKafka.KafkaConsumer(
      {
        'bootstrap.servers': KAFKA_BROKERS,
        'group.id': `${topic}-g`,
        'enable.auto.commit': false,
        offset_commit_cb: (err: { code?: number } | null) => results.push({ code: err?.code }),
      } as RdKafka.ConsumerGlobalConfig,
      {},
    );
    await new Promise<void>((resolve, reject) => c.connect({}, (err) => (err ? reject(err) : resolve())));
    t.after(() => new Promise<void>((resolve) => c.disconnect(() => resolve())));
    c.setDefaultConsumeTimeout(50);
    c.assign([0, 1, 2].map((partition) => ({ topic, partition })));
    const tps = [0, 1, 2].map((partition) => ({ topic, partition }));
    const committed = () =>
      new Promise<RdKafka.TopicPartitionOffsetAndMetadata[]>((resolve, reject) =>
        c.committed(tps, 10_000, (err, rows) => (err ? reject(err) : resolve(rows))),
      );
    // the commit's outcome comes through the consume call
    const commit = async (offsets: RdKafka.TopicPartitionOffsetAndMetadata[]) => {
      const before = results.length;
      c.commit(offsets);
      await pollUntil(
        'the commit answered',
        () => new Promise<boolean>((r) => c.consume(1, () => r(results.length > before))),
        30_000,
      );
      return results.at(-1)?.code;
    };
    assert.equal(
      await commit([
        { topic, partition: 0, offset: 1, metadata: 'x'.repeat(4095) },
        { topic, partition: 1, offset: 1, metadata: 'st\u0000100' },
      ]),
      undefined,
      'accepted',
    );
    const rows = await committed();
    assert.equal(rows.find((r) => r.partition === 0)?.metadata, 'x'.repeat(4095), '4095 bytes read back');
    assert.equal(rows.find((r) => r.partition === 1)?.metadata, 'st', 'the binding cut the text at the NUL');
    // OFFSET_METADATA_TOO_LARGE (12): 4096 bytes and the binding's NUL are one more than the broker takes
    assert.equal(await commit([{ topic, partition: 2, offset: 1, metadata: 'x'.repeat(4096) }]), 12);
    assert.equal((await committed()).find((r) => r.partition === 2)?.offset, undefined, 'nothing stored');
  });
});
