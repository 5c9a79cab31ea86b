/**
 * A topology partition's stream time as commit metadata (src/processor/topology/stream-time.ts): it reads
 * back as written, fits the broker's bound for several aggregations, refuses what this version did not
 * write (RF_STATE_CORRUPT naming the partition, never the text), and the stream time at an offset a
 * seek-back starts from is the one remembered there.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RedfenceError } from '../../src/errors/index.js';
import { checkCommitMetadata } from '../../src/kafka/commit-metadata.js';
import {
  decodeStreamTime,
  encodeStreamTime,
  PartitionTimes,
} from '../../src/processor/topology/stream-time.js';

const T = 1_767_225_600_000;

describe('topology stream time in commit metadata', () => {
  it('reads back as written; empty metadata is no stream time', () => {
    const times = {
      'big-orders': { stream: T + 5, emitted: -1, store: T },
      'KSTREAM-AGGREGATE-0000000007': { stream: T, emitted: T - 60_000, store: T - 20_000 },
    };
    const text = encodeStreamTime(times);
    assert.deepEqual(decodeStreamTime(text, 'orders/0'), times);
    assert.deepEqual(decodeStreamTime('', 'orders/0'), {});
    assert.deepEqual(decodeStreamTime(encodeStreamTime({}), 'orders/0'), {});
    // ten aggregations with long names still fit the broker's bound
    const many = Object.fromEntries(
      Array.from({ length: 10 }, (_, i) => [
        `KSTREAM-AGGREGATE-STATE-STORE-000000000${i}`,
        times['big-orders'],
      ]),
    );
    checkCommitMetadata(
      [{ topic: 'orders', partition: 0, offset: 1, metadata: encodeStreamTime(many) }],
      'commit',
    );
  });

  it('refuses metadata it did not write, naming the partition and not the text', () => {
    for (const bad of [
      'not json',
      '{"v":2,"t":{}}',
      '{"v":1}',
      '{"v":1,"t":{"n":[1,2]}}',
      '{"v":1,"t":{"n":[1,2,-5]}}',
      'null',
    ])
      assert.throws(
        () => decodeStreamTime(bad, 'orders/3'),
        (e: unknown) =>
          RedfenceError.is(e, 'RF_STATE_CORRUPT') &&
          (e as Error).message.includes('orders/3') &&
          !(e as Error).message.includes(bad),
      );
  });

  it('the stream time at an offset: the one remembered at the largest offset not after it', () => {
    const at = (n: number) => ({ c: { stream: n, emitted: -1, store: -1 } });
    const pt = new PartitionTimes();
    pt.restore(0, 10, at(1));
    pt.remember(0, 14, at(2));
    pt.remember(0, 20, at(3));
    assert.deepEqual(pt.at(0, 10), at(1));
    assert.deepEqual(pt.at(0, 14), at(2));
    assert.deepEqual(pt.at(0, 15), at(2), 'a transaction marker at 14: the batch starts at 15');
    pt.committed(0, 14);
    assert.deepEqual(pt.at(0, 14), at(2));
    assert.deepEqual(pt.at(0, 12), {}, 'nothing before the commit is kept');
    pt.forget(0);
    assert.deepEqual(pt.at(0, 20), {});
    const fresh = new PartitionTimes();
    fresh.restore(1, -1, {});
    assert.deepEqual(fresh.at(1, 0), {});
  });
});
