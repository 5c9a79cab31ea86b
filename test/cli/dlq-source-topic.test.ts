/**
 * `redfence dlq replay --source-topic` (DlqFilter.sourceTopic) against the real broker and Redis: a
 * dead-letter topic holding dead letters of two source topics; `replay --source-topic a` sends only
 * a's back to a (b gets nothing), `stats` and `show` filter the same way, and a bad topic name exits 2
 * before any connection. The option is in each subcommand's help.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { main } from '../../src/cli/main.js';
import { redfenceHeaders } from '../dead-letter/fixtures.js';
import { KAFKA_BROKERS, REDIS_URL, standalone, uniqueName } from '../helpers/env.js';
import { createTopics, endOffsets, kafka, readToEnd } from '../helpers/kafka.js';

async function dlq(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(
    ['dlq', ...args],
    (s) => {
      out += s;
    },
    (s) => {
      err += s;
    },
  );
  return { code, out, err };
}

const total = async (topic: string) => [...(await endOffsets(topic)).values()].reduce((a, b) => a + b, 0);

describe('redfence dlq --source-topic', () => {
  it('replays, counts and shows only the dead letters of that source topic', async (t) => {
    const dlt = uniqueName('dlt-src');
    const a = uniqueName('src-a');
    const b = uniqueName('src-b');
    const drop = await createTopics([
      { topic: dlt, partitions: 1 },
      { topic: a, partitions: 2 },
      { topic: b, partitions: 2 },
    ]);
    const redis = standalone();
    t.after(async () => {
      const keys = await redis.keys(`rf:dlq:{${dlt}}:*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
      await drop();
    });
    const letters: Array<[string, string, number, number]> = [
      ['a1', a, 0, 10],
      ['b1', b, 0, 11],
      ['a2', a, 1, 12],
      ['b2', b, 1, 13],
      ['b3', b, 0, 14],
    ];
    const producer = kafka.producer({ 'enable.idempotence': true });
    await producer.connect();
    try {
      await producer.send({
        topic: dlt,
        messages: letters.map(([key, source, partition, offset]) => {
          const headers: Record<string, Buffer[]> = {};
          for (const [n, v] of redfenceHeaders(source, partition, offset, 'rejected'))
            headers[n] = [...(headers[n] ?? []), v];
          return { key, value: `value-of-${key}`, partition: 0, headers };
        }),
      });
    } finally {
      await producer.disconnect();
    }
    const conn = ['--topic', dlt, '--brokers', KAFKA_BROKERS, '--json'];

    const stats = await dlq(['stats', ...conn, '--source-topic', b]);
    assert.equal(stats.code, 0, stats.err);
    assert.equal(JSON.parse(stats.out).total, 3);
    const shown = await dlq(['show', ...conn, '--source-topic', a]);
    assert.equal(shown.code, 0, shown.err);
    const keys = shown.out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).key);
    assert.deepEqual(keys, ['a1', 'a2']);

    const replayed = await dlq(['replay', ...conn, '--redis', REDIS_URL, '--source-topic', a]);
    assert.equal(replayed.code, 0, replayed.err);
    const r = JSON.parse(replayed.out);
    assert.equal(r.matched, 2);
    assert.deepEqual(r.byTopic, { [a]: 2 });
    assert.deepEqual((await readToEnd(a)).map((x) => x.key).sort(), ['a1', 'a2']);
    assert.equal(await total(b), 0, 'nothing went to the other source topic');
  });

  it('is in the help; a bad topic name exits 2 before any connection', async () => {
    for (const sub of ['stats', 'show', 'replay'])
      assert.match((await dlq([sub, '--help'])).out, /^ {2}--source-topic <topic>/m, sub);
    assert.match((await dlq(['--help'])).out, /--source-topic/);
    const bad = await dlq([
      'replay',
      '--topic',
      'x',
      '--brokers',
      '127.0.0.1:1',
      '--redis',
      'redis://127.0.0.1:1',
      '--source-topic',
      'bad topic',
    ]);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /--source-topic must be/);
  });
});
