/**
 * replay() and the filters on crafted dead letters: pacing under --rate (an injected clock), the
 * filters one by one, the record a replay sends (headers stripped, lineage added), and dead letters
 * whose state changes were made (`redfence-state-applied`: left out unless told). Markers are read
 * from the real Redis.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { buildDeadLetter } from '../../src/dead-letter/build.js';
import { decodeDeadLetter } from '../../src/dead-letter/decode.js';
import { STATE_APPLIED } from '../../src/dead-letter/headers.js';
import type { DltRecord } from '../../src/dead-letter/read.js';
import {
  isStateApplied,
  LINEAGE,
  matches,
  replay,
  replayMarkerKey,
  replayRecord,
} from '../../src/dead-letter/replay.js';
import { standalone, uniqueName } from '../helpers/env.js';
import { connectHeaders, type HeaderList, redfenceHeaders, springHeaders, toMap } from './fixtures.js';

function letter(offset: number, headers: HeaderList, key = `k${offset}`, timestamp = 1_000): DltRecord {
  const map = toMap(headers);
  return {
    partition: 0,
    offset,
    timestamp,
    key: Buffer.from(key),
    value: Buffer.from(`v${offset}`),
    headerList: headers,
    headers: map,
    info: decodeDeadLetter(map),
  };
}

describe('dlq replay: filters, pacing and the replayed record', () => {
  const redis = standalone();
  after(() => redis.disconnect());

  it('each filter keeps exactly what it names', () => {
    const a = letter(1, redfenceHeaders('t', 0, 5, 'rejected'), 'alpha', 1_000);
    const b = letter(2, springHeaders('t', 1, 50), 'beta', 2_000);
    const c = letter(3, connectHeaders('t', 1, 60), 'gamma', 3_000);
    const d = letter(4, redfenceHeaders('u', 1, 70, 'rejected'), 'delta', 4_000);
    const all = [a, b, c, d];
    const pick = (f: Parameters<typeof matches>[1]) => all.filter((r) => matches(r, f)).map((r) => r.offset);
    assert.deepEqual(pick({}), [1, 2, 3, 4]);
    assert.deepEqual(pick({ reasons: ['rejected'] }), [1, 4]);
    assert.deepEqual(pick({ sourceTopic: 'u' }), [4]);
    assert.deepEqual(pick({ sourceTopic: 't', sourcePartition: 1 }), [2, 3]);
    assert.deepEqual(pick({ reasons: ['processing-error'] }), []);
    assert.deepEqual(pick({ exceptions: ['DataException'] }), [3]);
    assert.deepEqual(pick({ exceptions: ['Exception'] }), [], 'a simple name matches whole, not a suffix');
    assert.deepEqual(pick({ exceptions: ['redfence.TypeError'] }), [1, 4]);
    assert.deepEqual(pick({ since: 2_000 }), [2, 3, 4]);
    assert.deepEqual(pick({ until: 2_000 }), [1]);
    assert.deepEqual(pick({ key: 'beta' }), [2]);
    assert.deepEqual(pick({ sourcePartition: 1 }), [2, 3, 4]);
    assert.deepEqual(pick({ sourcePartition: 1, offsetFrom: 55n }), [3, 4]);
    assert.deepEqual(pick({ offsetTo: 50n }), [1, 2]);
  });

  it('the replayed record drops the writer headers and an earlier lineage, keeps the rest', () => {
    const headers: HeaderList = [
      ...springHeaders('orders', 2, 9),
      ['trace', Buffer.from('t1')],
      [LINEAGE.topic, Buffer.from('older-dlt')],
    ];
    const r = letter(7, headers);
    const out = replayRecord(r, 'orders.DLT', 'orders', new Date('2026-12-01T00:00:00Z'));
    assert.equal(out.topic, 'orders');
    assert.deepEqual(Object.keys(out.headers ?? {}).sort(), [
      LINEAGE.at,
      LINEAGE.offset,
      LINEAGE.partition,
      LINEAGE.topic,
      'trace',
    ]);
    const h = out.headers as Record<string, Buffer[]>;
    assert.equal(String(h[LINEAGE.topic]), 'orders.DLT');
    assert.equal(String(h[LINEAGE.offset]), '7');
    assert.equal(String(h[LINEAGE.at]), '2026-12-01T00:00:00.000Z');
  });

  it('--rate paces batches of a tenth of a second: 10 records at 20/s start 100 ms apart', async () => {
    const dlt = uniqueName('dlt-rate');
    const records = Array.from({ length: 10 }, (_, i) => letter(i, springHeaders('t', 0, i)));
    let clock = 0;
    const waits: number[] = [];
    const result = await replay(records, {
      dltTopic: dlt,
      redis,
      dryRun: true,
      rate: 20,
      batch: 100,
      markerTtlSeconds: 60,
      now: () => clock,
      sleep: async (ms) => {
        waits.push(ms);
        clock += ms;
      },
    });
    assert.equal(result.published, 10);
    // batches of 2 start at 0, 100, 200, 300, 400 ms: twenty records per second
    assert.deepEqual(waits, [100, 100, 100, 100]);
    assert.equal(clock, 400);
  });

  it('a record whose marker is set is skipped, the others are sent', async () => {
    const dlt = uniqueName('dlt-mark');
    const records = [0, 1, 2].map((i) => letter(i, springHeaders('t', 0, i)));
    await redis.set(replayMarkerKey(dlt, 0, 1), '{}', 'EX', 60);
    after(() =>
      redis.del(replayMarkerKey(dlt, 0, 0), replayMarkerKey(dlt, 0, 1), replayMarkerKey(dlt, 0, 2)),
    );
    const sent: string[] = [];
    const result = await replay(records, {
      dltTopic: dlt,
      redis,
      dryRun: false,
      batch: 10,
      markerTtlSeconds: 60,
      producer: {
        produce: async (out) => {
          for (const x of out) sent.push(String(x.key));
        },
      },
    });
    assert.equal(result.alreadyReplayed, 1);
    assert.deepEqual(sent, ['k0', 'k2']);
    const ttl = await redis.ttl(replayMarkerKey(dlt, 0, 2));
    assert.ok(ttl > 0 && ttl <= 60, `marker TTL ${ttl}`);
  });

  it('a dead letter whose state was applied is left out unless told; sent, it loses the header', async () => {
    const dlt = uniqueName('dlt-applied');
    const built = (offset: number, stateApplied: boolean): HeaderList => {
      const d = buildDeadLetter({
        source: { topic: 't', partition: 0, offset, timestamp: 1, key: null, value: null, headers: {} },
        consumerGroup: 'g',
        reason: 'processing-error',
        error: new TypeError('refused'),
        stateApplied,
      });
      return Object.entries(d.headers).flatMap(([n, v]) =>
        (Array.isArray(v) ? v : [v]).map((b): [string, Buffer] => [n, b]),
      );
    };
    const plain = letter(0, built(0, false));
    const applied = letter(1, built(1, true));
    assert.deepEqual([isStateApplied(plain), isStateApplied(applied)], [false, true]);
    // dead-lettered again (the record replayed, then failing otherwise): the header is the new failure's
    const again = buildDeadLetter({
      source: {
        topic: 't',
        partition: 0,
        offset: 2,
        timestamp: 1,
        key: null,
        value: null,
        headers: { [STATE_APPLIED]: 'true' },
      },
      consumerGroup: 'g',
      reason: 'rejected',
    });
    assert.equal(again.headers[STATE_APPLIED], undefined);
    after(() => redis.del(replayMarkerKey(dlt, 0, 0), replayMarkerKey(dlt, 0, 1)));
    const sent: Record<string, Buffer[]>[] = [];
    const base = {
      dltTopic: dlt,
      redis,
      dryRun: false,
      batch: 10,
      markerTtlSeconds: 60,
      producer: {
        produce: async (out: readonly { headers?: unknown }[]) => {
          for (const x of out) sent.push(x.headers as Record<string, Buffer[]>);
        },
      },
    };
    const first = await replay([plain, applied], base);
    assert.deepEqual([first.published, first.stateApplied, sent.length], [1, 1, 1]);
    const told = await replay([plain, applied], { ...base, includeStateApplied: true });
    assert.deepEqual([told.published, told.alreadyReplayed, told.stateApplied], [1, 1, 0]);
    assert.equal(sent.length, 2);
    assert.equal(sent[1]?.[STATE_APPLIED], undefined, 'the replayed record does not carry the header');
  });
});
