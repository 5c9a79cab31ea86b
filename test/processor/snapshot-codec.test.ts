/**
 * The snapshot records (src/processor/snapshot-codec.ts): key records and markers survive a round trip byte for
 * byte, a state hash becomes a key record with its pending entries, malformed records are refused with
 * RF_STATE_CORRUPT; and bad snapshot options are refused before any connection (the processor's
 * option and `redfence rebuild`'s flags).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { main } from '../../src/cli/main.js';
import { Processor, RedfenceError } from '../../src/index.js';
import { replayStart } from '../../src/ops/rebuild.js';
import {
  decodeRecord,
  encodeClose,
  encodeKey,
  encodeMarker,
  keyFromHash,
  markerKey,
  type SnapshotKey,
} from '../../src/processor/snapshot-codec.js';
import { slotOf } from '../../src/processor/topology/snapshot-read.js';
import { MemoryKafka } from '../../src/testing/index.js';

const definition = { input: 'in', output: 'out', store: 's', operation: () => ({ op: 'delete' as const }) };

describe('snapshot codec', () => {
  const key: SnapshotKey = {
    redisKey: 'rf:{s:c-7}',
    partition: 2,
    offset: 41,
    epoch: 3,
    asOf: 40,
    value: Buffer.from([0, 255, 10, 123]),
    pending: [
      [40, Buffer.from('o{"total":1}')],
      [41, Buffer.from('n')],
    ],
  };

  it('a key record round-trips, binary value and pending entries included', () => {
    const { key: k, value } = encodeKey(key);
    assert.equal(k, 'rf:{s:c-7}');
    assert.deepEqual(decodeRecord(Buffer.from(k), value), { kind: 'key', key });
    const tomb = { ...key, value: null, pending: [] };
    assert.deepEqual(decodeRecord(Buffer.from(k), encodeKey(tomb).value), { kind: 'key', key: tomb });
  });

  it('a marker round-trips under its own key', () => {
    const m = { topic: 'orders', partition: 5, offset: 1200, epoch: 7, keys: 30, at: 1_700_000_000_000 };
    const { key: k, value } = encodeMarker(m);
    assert.equal(k, markerKey('orders', 5));
    assert.equal(k, 'marker:orders:5');
    assert.deepEqual(decodeRecord(Buffer.from(k), value), { kind: 'marker', marker: m });
  });

  it('a tombstone decodes as nothing; malformed records are refused', () => {
    assert.equal(decodeRecord(Buffer.from('rf:{s:x}'), null), null);
    const corrupt = (k: string | null, v: string) =>
      assert.throws(
        () => decodeRecord(k === null ? null : Buffer.from(k), Buffer.from(v)),
        (e: unknown) => RedfenceError.is(e, 'RF_STATE_CORRUPT'),
        `${k} ${v}`,
      );
    corrupt(null, '{}');
    corrupt('rf:{s:x}', 'not json');
    corrupt('rf:{s:x}', JSON.stringify({ v: 2, p: 0, o: 1, e: 1, asOf: 0, value: null, pending: [] }));
    corrupt('rf:{s:x}', JSON.stringify({ v: 1, p: -1, o: 1, e: 1, asOf: 0, value: null, pending: [] }));
    corrupt('rf:{s:x}', JSON.stringify({ v: 1, p: 0, o: 1.5, e: 1, asOf: 0, value: null, pending: [] }));
    corrupt('rf:{s:x}', JSON.stringify({ v: 1, p: 0, o: 1, e: 1, asOf: 0, value: null, pending: [[1]] }));
    corrupt('other:x', JSON.stringify({ v: 1, p: 0, o: 1, e: 1, asOf: 0, value: null, pending: [] }));
    const m = JSON.parse(
      encodeMarker({ topic: 't', partition: 1, offset: 3, epoch: 1, keys: 0, at: 1 }).value.toString(),
    );
    corrupt('marker:t:2', JSON.stringify(m)); // the key names another partition
    corrupt('marker:t:1', JSON.stringify({ ...m, offset: -1 }));
  });

  it('a state hash becomes a key record: fence, epoch, value, pending entries in offset order', () => {
    const h = {
      v: Buffer.from('12'),
      p: Buffer.from('1'),
      o: Buffer.from('90'),
      e: Buffer.from('4'),
      '#90': Buffer.from('o12'),
      '#88': Buffer.from('dadd failed'),
    };
    assert.deepEqual(keyFromHash('rf:{s:a}', h, 85), {
      redisKey: 'rf:{s:a}',
      partition: 1,
      offset: 90,
      epoch: 4,
      asOf: 85,
      value: Buffer.from('12'),
      pending: [
        [88, Buffer.from('dadd failed')],
        [90, Buffer.from('o12')],
      ],
    });
    assert.equal(keyFromHash('rf:{s:a}', { v: Buffer.from('1') }, 0), null, 'no fence: not a state hash');
  });
});

describe('topology snapshot records', () => {
  it("a fence key's slot, a close index and a marker with its stream time round-trip", () => {
    const key: SnapshotKey = {
      redisKey: 'rf:{app:c-1}',
      partition: 1,
      offset: 70,
      epoch: 4,
      asOf: 60,
      value: null,
      pending: [[70, Buffer.from([1, 2, 255])]],
      fields: [['v:3', Buffer.from('12')]],
      slot: [
        {
          suffix: ':w:7:60000',
          expireAt: 1_800_000_000_000,
          fields: [
            ['v', Buffer.from('3')],
            ['f', Buffer.from('1')],
          ],
        },
        { suffix: ':s:9', expireAt: -1, fields: [['1000:2000', Buffer.from([0, 9])]] },
      ],
    };
    const k = encodeKey(key);
    assert.deepEqual(decodeRecord(Buffer.from(k.key), k.value), { kind: 'key', key });
    const close = {
      topic: 'orders',
      partition: 2,
      store: 7,
      chunk: 1,
      members: [[60000, Buffer.from('60000:c-1')]] as const,
    };
    const c = encodeClose({ ...close, members: [[60000, Buffer.from('60000:c-1')]] });
    assert.equal(c.key, 'close:orders:2:7:1');
    assert.deepEqual(decodeRecord(Buffer.from(c.key), c.value), {
      kind: 'close',
      close: { ...close, members: [[60000, Buffer.from('60000:c-1')]] },
    });
    const m = {
      topic: 'app-x-repartition',
      partition: 0,
      offset: 9,
      epoch: 2,
      keys: 1,
      at: 5,
      streamTime: '{"v":1,"t":{}}',
    };
    const mk = encodeMarker(m);
    assert.deepEqual(decodeRecord(Buffer.from(mk.key), mk.value), { kind: 'marker', marker: m });
    // a slot suffix that is not one, or a close index under another key: refused
    const forged = JSON.parse(k.value.toString()) as { slot: unknown[][] };
    (forged.slot[0] as unknown[])[0] = 'w:7:1';
    assert.throws(
      () => decodeRecord(Buffer.from(k.key), Buffer.from(JSON.stringify(forged))),
      (e: unknown) => RedfenceError.is(e, 'RF_STATE_CORRUPT'),
    );
    assert.throws(
      () => decodeRecord(Buffer.from('close:orders:2:7:0'), c.value),
      (e: unknown) => RedfenceError.is(e, 'RF_STATE_CORRUPT'),
    );
  });

  it('names beside a fence hash are told from partition keys', () => {
    assert.deepEqual(slotOf('rf:{app:c-1}'), { fence: 'rf:{app:c-1}', suffix: '' });
    assert.deepEqual(slotOf('rf:{app@t-repartition:c-1}:w:7:-60000'), {
      fence: 'rf:{app@t-repartition:c-1}',
      suffix: ':w:7:-60000',
    });
    assert.deepEqual(slotOf('rf:t=x:{app:c}:h:8'), { fence: 'rf:t=x:{app:c}', suffix: ':h:8' });
    assert.equal(slotOf('rf:{app:orders:0}:epoch'), null);
    assert.equal(slotOf('rf:{app:orders:0}:close:7'), null);
    assert.equal(slotOf('rf:{app}:layout'), null);
  });
});

describe('replay start', () => {
  it("the marker's offset, or the earliest asOf of the partition's key records", () => {
    const marker = { topic: 't', partition: 0, offset: 500, epoch: 3, keys: 2, at: 0 };
    assert.equal(replayStart(marker, []), 500);
    assert.equal(replayStart(marker, [{ asOf: 500 }, { asOf: 500 }]), 500);
    // a former owner's slower pass, begun at 420, produced its record of a key after the newer pass
    assert.equal(replayStart(marker, [{ asOf: 500 }, { asOf: 420 }, { asOf: 510 }]), 420);
  });
});

describe('snapshot options refused before any connection', () => {
  const redis = new Redis({ lazyConnect: true, port: 1 });
  const kafka = { brokers: ['127.0.0.1:1'] };
  const refused = (options: Record<string, unknown>, pattern: RegExp) =>
    assert.throws(
      () => new Processor({ definition, redis, kafka, ...options } as never),
      (e: unknown) => RedfenceError.is(e, 'RF_INVALID_OPTIONS') && pattern.test((e as Error).message),
    );

  it('the processor option: each bad value named', () => {
    refused({ snapshot: 'yes' }, /"snapshot" must be an object/);
    refused({ snapshot: { every: 1 } }, /unknown processor option "snapshot.every"/);
    refused({ snapshot: { intervalMs: 5 } }, /"snapshot.intervalMs" must be an integer from 100/);
    refused({ snapshot: { pageSize: 0 } }, /"snapshot.pageSize"/);
    refused({ snapshot: { maxKeysPerSecond: -1 } }, /"snapshot.maxKeysPerSecond"/);
    refused({ snapshot: { topic: 'bad topic' } }, /"snapshot.topic" must be a Kafka topic name/);
    refused(
      { snapshot: {}, kafka: new MemoryKafka().port({ groupId: 'g' }) },
      /needs the "kafka" option as connection settings/,
    );
    assert.equal(redis.status, 'wait', 'never connected');
    // accepted: defaults, or off
    new Processor({ definition, redis, kafka, snapshot: {} });
    new Processor({ definition, redis, kafka, snapshot: false });
  });

  it('redfence rebuild: exit 2 for bad flags, a missing module, strict fencing on a cluster', async () => {
    const run = async (args: string[]) => {
      let err = '';
      const code = await main(
        ['rebuild', ...args],
        () => undefined,
        (s) => {
          err += s;
        },
      );
      return { code, err };
    };
    const far = ['--brokers', '127.0.0.1:1', '--redis', 'redis://127.0.0.1:1'];
    let r = await run(far);
    assert.equal(r.code, 2);
    assert.match(r.err, /missing <module>/);
    r = await run(['m.ts', ...far, '--epoch-margin', '0']);
    assert.equal(r.code, 2);
    assert.match(r.err, /--epoch-margin must be an integer >= 1/);
    r = await run(['m.ts', ...far, '--snapshot-topic', 'a b']);
    assert.equal(r.code, 2);
    assert.match(r.err, /--snapshot-topic/);
    r = await run(['m.ts', '--brokers', '127.0.0.1:1', '--cluster', '127.0.0.1:1', '--fencing', 'strict']);
    assert.equal(r.code, 2);
    assert.match(r.err, /--fencing strict needs a single Redis/);
    r = await run(['/nonexistent/module.ts', ...far]);
    assert.equal(r.code, 2);
    assert.match(r.err, /RF_MODULE_INVALID|RF_INVALID_OPTIONS/);
  });
});
