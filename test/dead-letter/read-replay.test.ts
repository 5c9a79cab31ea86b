/**
 * `redfence dlq` against the real broker and Redis: dead letters in each writer's scheme on a
 * dead-letter topic of each case's own (no case reads what another replayed); `stats` counts them, `show` decodes them, `replay --dry-run` sends nothing,
 * `replay` with a filter sends exactly the matching ones with lineage headers to the original topic
 * (or --to), a second replay sends nothing more, a failed produce leaves no marker; bad options exit 2
 * before any connection.
 */
import assert from 'node:assert/strict';
import { after, describe, it, type TestContext } from 'node:test';
import type { Redis } from 'ioredis';
import { main } from '../../src/cli/main.js';
import type { DltRecord } from '../../src/dead-letter/read.js';
import { readDeadLetters } from '../../src/dead-letter/read.js';
import { LINEAGE, replay, replayMarkerKey } from '../../src/dead-letter/replay.js';
import { KAFKA_BROKERS, REDIS_URL, standalone, uniqueName } from '../helpers/env.js';
import { createTopics, endOffsets, kafka, readToEnd } from '../helpers/kafka.js';
import {
  connectHeaders,
  type HeaderList,
  redfenceHeaders,
  springHeaders,
  streamsHeaders,
} from './fixtures.js';

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
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

const H10 = Date.parse('2026-11-30T10:15:00Z');
const H12 = Date.parse('2026-11-30T12:30:00Z');

interface Letters {
  dlt: string;
  source: string;
  other: string;
  conn: string[];
  withRedis: string[];
}

/**
 * One case's own dead-letter topic with the eight letters (each writer's scheme, and one plain record),
 * its empty source and other topics; deleted, with the replay markers, when the case ends.
 */
async function letters(t: TestContext, redis: Redis): Promise<Letters> {
  const dlt = uniqueName('dlt');
  const source = uniqueName('orders');
  const other = uniqueName('other');
  const drop = await createTopics([
    { topic: dlt, partitions: 2 },
    { topic: source, partitions: 3 },
    { topic: other, partitions: 1 },
  ]);
  t.after(async () => {
    const keys = await redis.keys(`rf:dlq:{${dlt}}:*`);
    if (keys.length > 0) await redis.del(...keys);
    await drop();
  });
  const all: Array<{ key: string; partition: number; at: number; headers: HeaderList }> = [
    { key: 'r1', partition: 0, at: H10, headers: redfenceHeaders(source, 0, 10, 'rejected') },
    { key: 'r2', partition: 1, at: H10, headers: redfenceHeaders(source, 1, 11, 'rejected') },
    { key: 'r3', partition: 0, at: H12, headers: redfenceHeaders(source, 2, 12, 'processing-error') },
    { key: 's1', partition: 1, at: H12, headers: springHeaders(source, 0, 20) },
    { key: 'c1', partition: 0, at: H12, headers: connectHeaders(source, 1, 30) },
    { key: 'c2', partition: 1, at: H12, headers: connectHeaders(source, 1, 31) },
    { key: 'k1', partition: 0, at: H12, headers: streamsHeaders(source, 2, 40) },
    { key: 'plain', partition: 1, at: H12, headers: [['trace', Buffer.from('t-1')]] },
  ];
  const producer = kafka.producer({ 'enable.idempotence': true });
  await producer.connect();
  try {
    await producer.send({
      topic: dlt,
      messages: all.map((l) => {
        const headers: Record<string, Buffer[]> = {};
        for (const [n, v] of l.headers) {
          const list = headers[n] ?? [];
          headers[n] = list;
          list.push(v);
        }
        return {
          key: l.key,
          value: `value-of-${l.key}`,
          partition: l.partition,
          timestamp: String(l.at),
          headers,
        };
      }),
    });
  } finally {
    await producer.disconnect();
  }
  const conn = ['--topic', dlt, '--brokers', KAFKA_BROKERS, '--json'];
  return { dlt, source, other, conn, withRedis: [...conn, '--redis', REDIS_URL] };
}

describe('redfence dlq (real broker and Redis)', () => {
  const redis = standalone();
  after(() => redis.disconnect());

  it('stats counts by writer, reason, exception class, source partition and hour', async (t) => {
    const { source, conn } = await letters(t, redis);
    const { code, out, err } = await run(['stats', ...conn]);
    assert.equal(code, 0, err);
    const s = JSON.parse(out);
    assert.equal(s.total, 8);
    assert.equal(s.unrecognised, 1);
    assert.deepEqual(s.byScheme, { redfence: 3, spring: 1, connect: 2, streams: 1, '(none)': 1 });
    assert.deepEqual(s.byReason, { rejected: 2, 'processing-error': 1, '(none)': 5 });
    assert.equal(s.byException['redfence.TypeError'], 3);
    assert.equal(s.byException['org.apache.kafka.connect.errors.DataException'], 2);
    assert.equal(s.byException['org.apache.kafka.common.errors.SerializationException'], 1);
    assert.deepEqual(s.bySourcePartition, {
      [`${source}/0`]: 2,
      [`${source}/1`]: 3,
      [`${source}/2`]: 2,
      '(none)': 1,
    });
    assert.deepEqual(s.byHour, { '2026-11-30T10': 2, '2026-11-30T12': 6 });
  });

  it('stats takes the filters too', async (t) => {
    const { conn } = await letters(t, redis);
    const { code, out } = await run(['stats', ...conn, '--since', '2026-11-30T11:00:00Z']);
    assert.equal(code, 0);
    assert.equal(JSON.parse(out).total, 6);
  });

  it('show prints each record with its headers decoded', async (t) => {
    const { conn } = await letters(t, redis);
    const { code, out, err } = await run(['show', ...conn, '--values']);
    assert.equal(code, 0, err);
    const rows = out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.equal(rows.length, 8);
    const spring = rows.find((r) => r.key === 's1');
    assert.equal(spring.deadLetter.scheme, 'spring');
    assert.equal(spring.deadLetter.originalPartition, 0);
    assert.equal(spring.deadLetter.originalOffset, '20');
    assert.equal(spring.headers['kafka_dlt-original-partition'], '0');
    assert.equal(spring.headers['kafka_dlt-original-offset'], '20');
    assert.equal(spring.value, 'value-of-s1');
    const connect = rows.find((r) => r.key === 'c2');
    assert.equal(connect.deadLetter.stage, 'VALUE_CONVERTER');
    assert.equal(connect.deadLetter.originalOffset, '31');
    assert.equal(rows.find((r) => r.key === 'plain').deadLetter, null);
    const limited = await run(['show', ...conn, '--limit', '2']);
    assert.equal(limited.out.trim().split('\n').length, 2);
    assert.equal(JSON.parse(limited.out.split('\n')[0] as string).value, undefined);
  });

  it('replay --dry-run reports the matching ones and sends nothing, writes no marker', async (t) => {
    const { dlt, source, withRedis } = await letters(t, redis);
    const { code, out, err } = await run(['replay', ...withRedis, '--reason', 'rejected', '--dry-run']);
    assert.equal(code, 0, err);
    const r = JSON.parse(out);
    assert.equal(r.matched, 2);
    assert.equal(r.published, 2);
    assert.deepEqual(r.byTopic, { [source]: 2 });
    assert.equal(await total(source), 0);
    assert.deepEqual(await redis.keys(`rf:dlq:{${dlt}}:*`), []);
  });

  it('replay sends exactly the matching ones to the original topic with lineage, once', async (t) => {
    const { dlt, source, withRedis } = await letters(t, redis);
    const first = await run(['replay', ...withRedis, '--exception', 'DataException']);
    assert.equal(first.code, 0, first.err);
    assert.equal(JSON.parse(first.out).published, 2);
    const records = await readToEnd(source);
    assert.deepEqual(records.map((r) => r.key).sort(), ['c1', 'c2']);
    for (const r of records) {
      assert.equal(r.value, `value-of-${r.key}`);
      assert.equal(String(r.headers[LINEAGE.topic]), dlt);
      assert.match(String(r.headers[LINEAGE.at]), /^\d{4}-\d\d-\d\dT/);
      assert.equal(
        Object.keys(r.headers).some((n) => n.startsWith('__connect.errors.')),
        false,
        'the writer headers are stripped',
      );
    }
    const c2 = records.find((r) => r.key === 'c2');
    assert.equal(String(c2?.headers[LINEAGE.partition]), '1');
    assert.equal(String(c2?.headers[LINEAGE.offset]), '2');
    assert.ok(await redis.get(replayMarkerKey(dlt, 1, 2)));

    const second = await run(['replay', ...withRedis, '--exception', 'DataException']);
    assert.equal(second.code, 0, second.err);
    const r2 = JSON.parse(second.out);
    assert.equal(r2.published, 0);
    assert.equal(r2.alreadyReplayed, 2);
    assert.equal(await total(source), 2);
  });

  it('replay --to sends elsewhere; source partition and offset filters pick one record', async (t) => {
    const { source, other, withRedis } = await letters(t, redis);
    const { code, out, err } = await run([
      'replay',
      ...withRedis,
      '--partition',
      '2',
      '--offsets',
      '40-45',
      '--to',
      other,
    ]);
    assert.equal(code, 0, err);
    assert.deepEqual(JSON.parse(out).byTopic, { [other]: 1 });
    const records = await readToEnd(other);
    assert.deepEqual(
      records.map((r) => r.key),
      ['k1'],
    );
    assert.equal(await total(source), 0, 'nothing went to the original topic');
  });

  it('a dead letter naming no topic is not sent and exits 1', async (t) => {
    const { withRedis } = await letters(t, redis);
    const { code, out } = await run(['replay', ...withRedis, '--key', 'plain']);
    assert.equal(code, 1);
    const r = JSON.parse(out);
    assert.equal(r.noTopic, 1);
    assert.equal(r.published, 0);
  });

  it('a failed produce writes no marker, so the next replay sends the record', async (t) => {
    const { dlt, source } = await letters(t, redis);
    const records: DltRecord[] = [];
    await readDeadLetters({
      client: { brokers: [KAFKA_BROKERS] },
      topic: dlt,
      timeoutMs: 30_000,
      onRecord: (r) => {
        if (r.key?.toString() === 'r3') records.push(r);
      },
    });
    assert.equal(records.length, 1);
    const base = { dltTopic: dlt, redis, dryRun: false, batch: 10, markerTtlSeconds: 600 };
    await assert.rejects(
      replay(records, {
        ...base,
        producer: {
          produce: async () => {
            throw new Error('delivery failed');
          },
        },
      }),
      /delivery failed/,
    );
    const r = records[0] as DltRecord;
    assert.equal(await redis.get(replayMarkerKey(dlt, r.partition, r.offset)), null);
    const sent: string[] = [];
    const ok = await replay(records, {
      ...base,
      producer: {
        produce: async (out) => {
          for (const x of out) sent.push(x.topic);
        },
      },
    });
    assert.equal(ok.published, 1);
    assert.deepEqual(sent, [source]);
    assert.ok(await redis.get(replayMarkerKey(dlt, r.partition, r.offset)));
  });

  it('bad options exit 2 before any connection', async () => {
    const dead = ['--brokers', '127.0.0.1:1', '--redis', 'redis://127.0.0.1:1', '--timeout', '60000'];
    const cases: Array<[string[], RegExp]> = [
      [['replay', '--topic', 'x', ...dead, '--since', 'yesterday'], /--since must be/],
      [['replay', '--topic', 'x', ...dead, '--batch', '0'], /--batch must be/],
      [['replay', '--topic', 'x', ...dead, '--to', 'bad topic'], /--to must be/],
      [['stats', '--topic', 'x', '--brokers', '127.0.0.1:1', '--dry-run'], /unknown option --dry-run/],
      [['show', '--topic', 'x', '--brokers', '127.0.0.1:1', '--reason', 'nope'], /--reason must be/],
      [['replay', ...dead], /--topic <dead-letter topic> is required/],
      [
        [
          'replay',
          '--topic',
          'x',
          ...dead,
          '--since',
          '2026-01-02T00:00:00Z',
          '--until',
          '2026-01-01T00:00:00Z',
        ],
        /--until must be after --since/,
      ],
      [['purge', '--topic', 'x'], /unknown subcommand "purge"/],
    ];
    for (const [args, message] of cases) {
      const started = Date.now();
      const { code, err } = await run(args);
      assert.equal(code, 2, `${args.join(' ')}: ${err}`);
      assert.match(err, message);
      assert.match(err, /\[RF_INVALID_OPTIONS\]/);
      assert.ok(Date.now() - started < 5000, 'answered without trying to connect');
    }
  });

  it('an unreachable broker exits 1 within --timeout, naming --brokers', async () => {
    const { code, err } = await run([
      'stats',
      '--topic',
      'x',
      '--brokers',
      '127.0.0.1:1',
      '--timeout',
      '1000',
    ]);
    assert.equal(code, 1);
    assert.match(err, /Kafka at 127\.0\.0\.1:1 did not answer .*check --brokers .*\[RF_KAFKA_UNAVAILABLE\]/);
  });

  it('a missing dead-letter topic exits 2', async () => {
    const { code, err } = await run(['stats', '--topic', uniqueName('missing'), '--brokers', KAFKA_BROKERS]);
    assert.equal(code, 2);
    assert.match(err, /RF_TOPIC_MISSING/);
  });
});
