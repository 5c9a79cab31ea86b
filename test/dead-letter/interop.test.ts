/**
 * Dead letters written by the real JVM writers, read by `redfence dlq show` and sent back by
 * `redfence dlq replay`; and redfence's own dead letters read by a Spring consumer.
 *
 * The set-up makes the source records, writes two redfence dead letters the way the processor does
 * (deadLetterRecord + DeliveryProducer), then runs test/interop/java/DlqInterop.java once (jars from
 * Maven Central, fetched by scripts/interop-jars.sh; dev/up fetches them first): Spring Kafka's
 * DeadLetterPublishingRecoverer, Kafka Streams' dead-letter queue (KIP-1034) and Kafka Connect's
 * DeadLetterQueueReporter dead-letter the bad records, and a Spring MessagingMessageConverter reads the
 * redfence dead letters by the KafkaHeaders constants. The JVM prints what each writer was handed (the
 * consumed record's coordinates, the exception thrown) and what Spring read; the test checks redfence
 * reads the same. Skipped, saying why, only when there is no Java.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { deadLetterRecord } from '../../src/dead-letter/record.js';
import { LINEAGE } from '../../src/dead-letter/replay.js';
import { producerProperties } from '../../src/kafka/client-config.js';
import { DeliveryProducer } from '../../src/kafka/producer.js';
import { KAFKA_BROKERS, REDIS_URL, standalone, uniqueName } from '../helpers/env.js';
import { createTopics, produce, type ReadRecord, readToEnd } from '../helpers/kafka.js';
import { cli, type Line, long, NO_JAVA, runJava, shown, springMessage } from './interop-jvm.js';

describe('dead letters of the real Java writers (Spring Kafka, Kafka Streams, Kafka Connect)', {
  skip: NO_JAVA,
}, () => {
  const p = uniqueName('interop');
  const t = (s: string) => `${p}-${s}`;
  const redis = standalone();
  const stateDir = mkdtempSync(join(tmpdir(), 'rf-interop-'));
  let drop: () => Promise<void> = async () => undefined;
  let lines: Line[] = [];
  /** Source records by topic, then key, as consumed before any replay. */
  const sources = new Map<string, Map<string, ReadRecord>>();
  /** What redfence wrote to <p>-redfence-dlt, by key. */
  const redfenceWrote = new Map<string, { source: ReadRecord; error: unknown }>();
  const T0 = 1_764_000_000_000;

  before(async () => {
    drop = await createTopics([
      { topic: t('spring-src'), partitions: 3 },
      { topic: t('spring-dlt'), partitions: 3 },
      { topic: t('streams-src'), partitions: 2 },
      { topic: t('streams-dlt'), partitions: 1 },
      { topic: t('connect-src'), partitions: 2 },
      { topic: t('connect-dlt'), partitions: 1 },
      { topic: t('redfence-src'), partitions: 2 },
      { topic: t('redfence-dlt'), partitions: 2 },
      { topic: t('twice-dlt'), partitions: 2 },
    ]);
    const ts = (i: number) => String(T0 + i * 1000);
    await produce(
      t('spring-src'),
      [0, 1, 2, 3, 4, 5].map((i) => ({
        key: `s-${i}`,
        value: i === 1 ? `bad:s-${i} prix 12 €` : i === 5 ? `bad-listener:s-${i}` : `{"amount":${i}}`,
        partition: i % 3,
        timestamp: ts(i),
      })),
    );
    await produce(
      t('streams-src'),
      [0, 1, 2, 3, 4, 5].map((i) => ({
        key: `k-${i}`,
        value: i === 2 ? 'not-a-long' : long(i === 3 ? 13n : BigInt(100 + i)),
        partition: i % 2,
        timestamp: ts(i),
      })),
    );
    await produce(
      t('connect-src'),
      [0, 1, 2, 3].map((i) => ({
        key: `c-${i}`,
        value: i === 1 ? '{not json' : i === 2 ? '[1, 2' : `{"a":${i}}`,
        partition: i % 2,
        timestamp: ts(i),
      })),
    );
    await produce(
      t('redfence-src'),
      [0, 1].map((i) => ({ key: `r-${i}`, value: `order ${i}`, partition: i, timestamp: ts(i) })),
    );
    for (const s of ['spring-src', 'streams-src', 'connect-src', 'redfence-src']) {
      sources.set(t(s), new Map((await readToEnd(t(s))).map((r) => [r.key as string, r])));
    }
    // redfence's own dead letters, as the processor and the handler runtime write them
    const errors: Record<string, unknown> = {
      'r-0': new TypeError('amount is not a number', { cause: new RangeError('negative') }),
      'r-1': undefined,
    };
    const out = [];
    for (const [key, r] of sources.get(t('redfence-src')) ?? []) {
      const error = errors[key];
      redfenceWrote.set(key, { source: r, error });
      const inRecord = {
        topic: t('redfence-src'),
        partition: r.partition,
        offset: r.offset,
        timestamp: r.timestamp,
        key: Buffer.from(key),
        value: Buffer.from(r.value ?? ''),
        headers: { trace: 't-1' },
      };
      const reason = error === undefined ? 'rejected' : 'processing-error';
      out.push(deadLetterRecord(t('redfence-dlt'), `${p}-group`, inRecord, reason, error));
    }
    const producer = await DeliveryProducer.connect(
      producerProperties({ brokers: [KAFKA_BROKERS], groupId: `${p}-group` }),
    );
    try {
      await producer.produce(out);
    } finally {
      await producer.close();
    }
    const started = Date.now();
    lines = await runJava(p, stateDir);
    console.log(`# the JVM writers ran in ${Date.now() - started} ms`);
  });

  after(async () => {
    const keys = await redis.keys(`rf:dlq:{${p}-*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    rmSync(stateDir, { recursive: true, force: true });
    await drop();
  });

  const written = (writer: string) => lines.filter((l) => l.writer === writer);

  it('each writer dead-lettered exactly the bad records of its source topic', () => {
    const keys = (w: string) =>
      written(w)
        .map((l) => l.key)
        .sort();
    assert.deepEqual(keys('spring'), ['s-1', 's-5']);
    assert.deepEqual(keys('streams'), ['k-2', 'k-3']);
    assert.deepEqual(keys('connect'), ['c-1', 'c-2']);
    assert.deepEqual(keys('spring-reads'), ['r-0', 'r-1']);
    assert.deepEqual(keys('spring-twice'), ['r-0', 'r-1']);
    // what the writers were handed is what the topic holds
    for (const l of lines.filter((x) => !x.writer.startsWith('spring-'))) {
      const r = sources.get(l.topic as string)?.get(l.key);
      assert.ok(r, `${l.writer} ${l.key}: a source record`);
      assert.equal(l.partition, r.partition, `${l.key} partition`);
      assert.equal(String(l.offset), r.offset, `${l.key} offset`);
      assert.equal(String(l.timestamp), r.timestamp, `${l.key} timestamp`);
    }
  });

  for (const [writer, scheme] of [
    ['spring', 'spring'],
    ['streams', 'streams'],
    ['connect', 'connect'],
  ] as const) {
    it(`dlq show reads the ${writer} layout: original topic, partition, offset, exception`, async () => {
      const { code, out, err } = await cli([
        'show',
        '--topic',
        t(`${writer}-dlt`),
        '--brokers',
        KAFKA_BROKERS,
        '--json',
        '--values',
      ]);
      assert.equal(code, 0, err);
      const rows = out
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      const want = written(writer);
      assert.equal(rows.length, want.length, 'one dead letter per failure');
      for (const l of want) {
        const row = rows.find((r) => r.key === l.key);
        assert.ok(row, `${l.key} is in the dead-letter topic`);
        const d = row.deadLetter;
        assert.equal(d.scheme, scheme, l.key);
        assert.equal(d.originalTopic, l.topic, l.key);
        assert.equal(d.originalPartition, l.partition, l.key);
        assert.equal(d.originalOffset, String(l.offset), l.key);
        assert.equal(d.exceptionClass, l.exceptionClass, l.key);
        assert.equal(d.exceptionMessage, springMessage(l), l.key);
        assert.equal(d.consumerGroup, l.group, l.key);
        assert.ok(String(d.stacktrace).startsWith(String(l.exceptionClass)), `${l.key} stack trace`);
        assert.deepEqual(row.problems, undefined, `${l.key}: nothing unreadable`);
        const source = sources.get(l.topic as string)?.get(l.key);
        assert.equal(shown(row.value).toString(), source?.value, `${l.key}: the original value`);
        if (writer === 'spring') assert.equal(d.originalTimestamp, String(l.timestamp), l.key);
        if (writer === 'connect') {
          assert.equal(d.stage, 'VALUE_CONVERTER');
          assert.equal(d.connector, 'interop-sink');
          assert.equal(d.task, '0');
        }
      }
    });
  }

  it('the writers failed the way the test meant (so the layouts above are the real ones)', () => {
    const cls = (w: string, k: string) => written(w).find((l) => l.key === k)?.exceptionClass;
    assert.equal(cls('spring', 's-1'), 'java.lang.IllegalArgumentException');
    assert.equal(cls('spring', 's-5'), 'org.springframework.kafka.listener.ListenerExecutionFailedException');
    assert.equal(cls('streams', 'k-2'), 'org.apache.kafka.common.errors.SerializationException');
    assert.equal(cls('streams', 'k-3'), 'java.lang.IllegalStateException');
    assert.equal(cls('connect', 'c-1'), 'org.apache.kafka.connect.errors.DataException');
  });

  it('dlq replay puts each original key and value back on its original topic, once', async () => {
    for (const writer of ['spring', 'streams', 'connect']) {
      const dlt = t(`${writer}-dlt`);
      const { code, out, err } = await cli([
        'replay',
        '--topic',
        dlt,
        '--brokers',
        KAFKA_BROKERS,
        '--redis',
        REDIS_URL,
        '--json',
      ]);
      assert.equal(code, 0, err);
      const src = t(`${writer}-src`);
      const failed = new Set(written(writer).map((l) => l.key));
      assert.deepEqual(JSON.parse(out).byTopic, { [src]: failed.size }, writer);
      // the whole source topic, per key: the dead-lettered ones twice (original, then the replay)
      const byKey = new Map<string, ReadRecord[]>();
      for (const r of await readToEnd(src)) {
        const list = byKey.get(r.key as string) ?? [];
        byKey.set(r.key as string, list);
        list.push(r);
      }
      const before = sources.get(src) as Map<string, ReadRecord>;
      assert.deepEqual([...byKey.keys()].sort(), [...before.keys()].sort(), `${src}: no key lost or added`);
      for (const [key, original] of before) {
        const got = byKey.get(key) as ReadRecord[];
        if (!failed.has(key)) {
          assert.equal(got.length, 1, `${key}: not dead-lettered, not replayed`);
          continue;
        }
        assert.equal(got.length, 2, `${key}: the original and one replay`);
        const replayed = got.find((r) => r.headers[LINEAGE.topic] !== undefined);
        assert.ok(replayed, `${key}: a replayed record with lineage`);
        assert.equal(replayed.value, original.value, `${key}: the original value`);
        assert.equal(String(replayed.headers[LINEAGE.topic]), dlt);
        for (const name of Object.keys(replayed.headers))
          assert.ok(!/^(kafka_dlt-|__connect\.errors\.|__streams\.errors\.)/.test(name), `${name} stripped`);
      }
    }
  });

  it("a Spring consumer reads redfence's dead letters as Spring's own", async () => {
    const { code, out, err } = await cli([
      'show',
      '--topic',
      t('redfence-dlt'),
      '--brokers',
      KAFKA_BROKERS,
      '--json',
    ]);
    assert.equal(code, 0, err);
    const ours = new Map(
      out
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
        .map((r) => [r.key, r.deadLetter]),
    );
    for (const l of written('spring-reads')) {
      const w = redfenceWrote.get(l.key);
      assert.ok(w, l.key);
      const mine = ours.get(l.key);
      // Spring's widths: partition 4 bytes, offset and timestamp 8 (big-endian, as ByteBuffer reads)
      assert.deepEqual([l.partitionBytes, l.offsetBytes, l.timestampBytes], [4, 8, 8], l.key);
      assert.equal(l.originalTopic, t('redfence-src'), l.key);
      assert.equal(l.originalPartition, w.source.partition, l.key);
      assert.equal(String(l.originalOffset), w.source.offset, l.key);
      assert.equal(String(l.originalTimestamp), w.source.timestamp, l.key);
      assert.equal(l.originalTimestampType, 'CREATE_TIME', l.key);
      assert.equal(l.consumerGroup, `${p}-group`, l.key);
      // and Spring reads the same as redfence does
      assert.equal(l.exceptionClass, mine.exceptionClass, l.key);
      assert.equal(l.exceptionMessage, mine.exceptionMessage, l.key);
      assert.equal(l.stacktrace, mine.stacktrace, l.key);
      assert.equal(mine.originalOffset, String(l.originalOffset), l.key);
    }
    const r0 = written('spring-reads').find((l) => l.key === 'r-0');
    assert.equal(r0?.exceptionClass, 'redfence.TypeError');
    assert.equal(r0?.exceptionCauseClass, 'redfence.RangeError');
    assert.equal(r0?.exceptionMessage, 'amount is not a number; negative');
    const r1 = written('spring-reads').find((l) => l.key === 'r-1');
    assert.equal(r1?.exceptionClass, 'redfence.Rejected');
    // a known difference (docs/dead-letters.md): Spring always writes the cause header, redfence only
    // for an error with a cause
    assert.equal(r1?.exceptionCauseClass, null);
  });

  it('a second hop: Spring dead-letters redfence dead letters again; dlq show reads the newest hop', async () => {
    const { code, out, err } = await cli([
      'show',
      '--topic',
      t('twice-dlt'),
      '--brokers',
      KAFKA_BROKERS,
      '--json',
    ]);
    assert.equal(code, 0, err);
    const rows = new Map(
      out
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
        .map((r) => [r.key, r]),
    );
    for (const l of written('spring-twice')) {
      const row = rows.get(l.key);
      assert.ok(row, l.key);
      const d = row.deadLetter;
      // both hops are in the headers, in order; the reader takes the newest (Kafka's lastHeader)
      assert.deepEqual(row.headers['kafka_dlt-original-topic'], [t('redfence-src'), t('redfence-dlt')]);
      assert.equal(d.originalTopic, t('redfence-dlt'), l.key);
      assert.equal(d.originalPartition, l.partition, l.key);
      assert.equal(d.originalOffset, String(l.offset), l.key);
      assert.equal(d.originalTimestamp, String(l.timestamp), l.key);
      assert.equal(d.consumerGroup, 'spring-audit', l.key);
      // Spring replaced the exception headers; redfence-reason stays but tells of the older hop
      assert.equal(d.exceptionClass, l.exceptionClass, l.key);
      assert.equal(row.headers['redfence-reason'], l.key === 'r-0' ? 'processing-error' : 'rejected');
      assert.equal(d.scheme, 'spring', `${l.key}: the newest hop is Spring's`);
      assert.equal(d.reason, undefined, `${l.key}: no redfence reason for Spring's hop`);
      assert.equal(d.exceptionMessage, springMessage(l), l.key);
    }
  });
});
