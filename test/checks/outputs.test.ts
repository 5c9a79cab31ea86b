/**
 * The suite's own output checks, against planted faults on the real broker: a correct output stream
 * (running counts 1..20 for six keys, written in transactions like exactly-once outputs) with one output
 * lost, lost and masked by a duplicate elsewhere, duplicated mid-stream, and duplicated by a record
 * arriving after the Nth. readToEnd + the per-key checker reject each, naming the key; the old way (read
 * until N records, then compare the total, or the counts of those N) accepted the masked loss and the
 * late duplicate. readToEnd reads past transaction markers and aborted records, and fails rather than
 * return part of a topic.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { uniqueName } from '../helpers/env.js';
import { createTopics, kafka, type ReadRecord, readAll, readToEnd } from '../helpers/kafka.js';
import { countOf, countsUpTo, perKeyProblem } from '../helpers/outputs.js';

const KEYS = ['k0', 'k1', 'k2', 'k3', 'k4', 'k5'];
const COUNT = 20;
const N = KEYS.length * COUNT;
const expected = countsUpTo(new Map(KEYS.map((k) => [k, COUNT])));

interface Out {
  key: string;
  count: number;
}

/** The correct stream: count 1 of every key, then count 2, ... */
function correct(): Out[] {
  const out: Out[] = [];
  for (let count = 1; count <= COUNT; count++) for (const key of KEYS) out.push({ key, count });
  return out;
}

const without = (s: Out[], key: string, count: number) =>
  s.filter((o) => !(o.key === key && o.count === count));
/** `s` with the output (key, count) written a second time right after the first. */
function doubled(s: Out[], key: string, count: number): Out[] {
  const i = s.findIndex((o) => o.key === key && o.count === count);
  return [...s.slice(0, i + 1), { key, count }, ...s.slice(i + 1)];
}

/**
 * Writes outputs in committed transactions of 25 (on `partition`, or spread by key over `partitions`),
 * then, with `abortedTail`, a transaction of extra outputs that is aborted.
 */
async function write(
  topic: string,
  outs: Out[],
  at: { partition: number } | { partitions: number },
  abortedTail = false,
): Promise<void> {
  const producer = kafka.producer({
    'transactional.id': uniqueName('planted'),
    kafkaJS: { logLevel: KafkaJS.logLevel.NOTHING },
  } as KafkaJS.ProducerConstructorConfig);
  await producer.connect();
  const partitionOf = (key: string) =>
    'partition' in at ? at.partition : KEYS.indexOf(key) % (at.partitions - 1); // last one stays empty
  const send = (tx: KafkaJS.Transaction, chunk: Out[]) =>
    tx.send({
      topic,
      messages: chunk.map((o) => ({
        key: o.key,
        value: JSON.stringify({ count: o.count }),
        partition: partitionOf(o.key),
      })),
    });
  try {
    for (let i = 0; i < outs.length; i += 25) {
      const tx = await producer.transaction();
      await send(tx, outs.slice(i, i + 25));
      await tx.commit();
    }
    if (abortedTail) {
      const tx = await producer.transaction();
      await send(tx, correct().slice(0, 10));
      await tx.abort();
    }
  } finally {
    await producer.disconnect();
  }
}

/** What the old reader returned: the records read until N were there, or what it had after the timeout. */
const oldRead = (topic: string) => readAll(topic, (r) => r.length >= N, 30_000).catch(() => []);

/** The old total check: read until N records (what it has after the timeout), compare the count. */
async function oldTotalAccepts(topic: string): Promise<boolean> {
  const out = await oldRead(topic);
  return out.length === N;
}

/** The old per-key check: read until N records, then each key's sorted counts against 1..20. */
async function oldPerKeyAccepts(topic: string): Promise<boolean> {
  const out = await oldRead(topic);
  const counts = new Map<string, number[]>();
  for (const r of out) counts.set(r.key ?? '', [...(counts.get(r.key ?? '') ?? []), countOf(r)]);
  return (
    out.length === N &&
    KEYS.every(
      (k) => JSON.stringify((counts.get(k) ?? []).sort((a, b) => a - b)) === JSON.stringify(expected.get(k)),
    )
  );
}

const exactly = (records: ReadRecord[]) => perKeyProblem(records, countOf, expected);
const atLeastOnce = (records: ReadRecord[]) =>
  perKeyProblem(records, countOf, expected, { duplicates: 'allowed' });

describe('output checks against planted faults (real broker)', { timeout: 180_000 }, () => {
  const drops: Array<() => Promise<void>> = [];
  /** A fresh topic holding `outs` (one partition: the old readers' stopping point is deterministic). */
  async function topicWith(name: string, outs: Out[]): Promise<string> {
    const topic = uniqueName(`planted-${name}`);
    drops.push(await createTopics([{ topic, partitions: 1 }]));
    await write(topic, outs, { partition: 0 });
    return topic;
  }
  after(async () => {
    for (const drop of drops) await drop();
  });

  it('a correct stream over 3 partitions (one empty, an aborted transaction last) passes, in offset order', async () => {
    const topic = uniqueName('planted-correct');
    drops.push(await createTopics([{ topic, partitions: 3 }]));
    await write(topic, correct(), { partitions: 3 }, true);
    const records = await readToEnd(topic);
    assert.equal(records.length, N, 'every committed output, none of the aborted ones');
    assert.equal(perKeyProblem(records, countOf, expected, { ordered: true }), undefined);
  });

  it('one output lost: rejected, naming the key', async () => {
    const records = await readToEnd(await topicWith('lost', without(correct(), 'k2', 7)));
    assert.equal(exactly(records), 'key "k2": 7 missing (19 records, want 20)');
    assert.match(atLeastOnce(records) ?? '', /^key "k2": 7 missing/);
  });

  it('one output lost and another duplicated (the total stays N): rejected; the old total check accepted it', async () => {
    const topic = await topicWith('masked', doubled(without(correct(), 'k2', 7), 'k4', 3));
    assert.equal(await oldTotalAccepts(topic), true, 'the old total check accepts the planted loss');
    const records = await readToEnd(topic);
    assert.equal(records.length, N);
    assert.equal(exactly(records), 'key "k2": 7 missing (19 records, want 20)');
  });

  it('one output duplicated mid-stream: rejected, naming the key; at-least-once allows it', async () => {
    const records = await readToEnd(await topicWith('dup', doubled(correct(), 'k4', 3)));
    assert.equal(records.length, N + 1, 'read to the end, past the Nth record');
    assert.equal(exactly(records), 'key "k4": 3 duplicated (2 times, want 1)');
    assert.equal(atLeastOnce(records), undefined);
  });

  it('a duplicate arriving after the Nth record: rejected; the old total and per-key checks never saw it', async () => {
    const topic = await topicWith('late-dup', correct());
    // the old checks stop at N records: they accept before the duplicate arrives
    assert.equal(await oldTotalAccepts(topic), true, 'the old total check accepts it');
    assert.equal(await oldPerKeyAccepts(topic), true, 'the old per-key check of N records accepts it');
    await write(topic, [{ key: 'k1', count: 20 }], { partition: 0 });
    const records = await readToEnd(topic);
    assert.equal(exactly(records), 'key "k1": 20 duplicated (2 times, want 1)');
  });

  it('readToEnd fails rather than return part of a topic (a transaction left open)', async () => {
    const topic = uniqueName('planted-open');
    drops.push(await createTopics([{ topic, partitions: 1 }]));
    await write(topic, correct().slice(0, 30), { partition: 0 });
    const producer = kafka.producer({
      'transactional.id': uniqueName('open'),
      kafkaJS: { logLevel: KafkaJS.logLevel.NOTHING },
    } as KafkaJS.ProducerConstructorConfig);
    await producer.connect();
    const tx = await producer.transaction();
    try {
      await tx.send({ topic, messages: [{ key: 'k0', value: '{"count":31}', partition: 0 }] });
      await assert.rejects(
        readToEnd(topic, 3000),
        /timed out after 3000 ms \(partition: position of end 0: \d+ of 33\)/,
      );
    } finally {
      await tx.abort();
      await producer.disconnect();
    }
  });
});

describe('the per-key checker', () => {
  const rec = (key: string | null, count: number, offset = 0): ReadRecord => ({
    key,
    value: JSON.stringify({ count }),
    partition: 0,
    offset: String(offset),
    timestamp: '0',
    headers: {},
  });
  const want = countsUpTo(
    new Map([
      ['a', 3],
      ['b', 2],
    ]),
  );
  const good = [rec('a', 1), rec('b', 1), rec('a', 2), rec('b', 2), rec('a', 3)];

  it('accepts exactly the expected counts, in any order unless asked', () => {
    assert.equal(perKeyProblem(good, countOf, want), undefined);
    assert.equal(perKeyProblem([...good].reverse(), countOf, want), undefined);
    assert.equal(
      perKeyProblem([...good].reverse(), countOf, want, { ordered: true }),
      'key "a": out of order at #1 (want 1, got 3)',
    );
  });

  it('names the first bad key: missing key, unexpected count, extra key, null key', () => {
    assert.equal(
      perKeyProblem(
        good.filter((r) => r.key !== 'b'),
        countOf,
        want,
      ),
      'key "b": no records (want 2)',
    );
    assert.equal(perKeyProblem([...good, rec('b', 3)], countOf, want), 'key "b": 3 not expected');
    assert.equal(perKeyProblem([...good, rec('c', 1)], countOf, want), 'key "c": not expected (1 record)');
    assert.equal(
      perKeyProblem([...good, rec(null, 1)], countOf, want),
      'the null key: not expected (1 record)',
    );
  });

  it('at-least-once: duplicates pass, a lost or unexpected count does not', () => {
    const opts = { duplicates: 'allowed' } as const;
    assert.equal(perKeyProblem([...good, rec('a', 2), rec('a', 3)], countOf, want, opts), undefined);
    assert.equal(
      perKeyProblem([...good.slice(1), rec('a', 2)], countOf, want, opts),
      'key "a": 1 missing (3 records, want 3)',
    );
    assert.equal(perKeyProblem([...good, rec('a', 4)], countOf, want, opts), 'key "a": 4 not expected');
  });

  it('a record without a count fails, naming where it is', () => {
    assert.throws(
      () => countOf({ ...rec('a', 1, 7), value: '"x"' }),
      /record at 0\/7 of key "a" carries no count/,
    );
  });
});
