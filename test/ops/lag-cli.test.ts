/**
 * `redfence lag` against the real broker: a group whose committed offsets are behind (committed by a
 * plain consumer that never joins) is STOP on that partition and exit 1; committed to the end, every
 * partition is OK and exit 0. Bad input exits 2 before any sample.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RdKafka } from '@confluentinc/kafka-javascript';
import { main } from '../../src/cli/main.js';
import { runCli } from '../helpers/cli.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil, produce } from '../helpers/kafka.js';

interface Report {
  group: string;
  status: string;
  partitions: {
    topic: string;
    partition: number;
    status: string;
    reasons: string[];
    lag: number;
    committed: number;
    timeLagSeconds: number | null;
  }[];
}

const runLag = (args: string[]) => runCli(['lag', '--brokers', KAFKA_BROKERS, '--json', ...args]);

/** Commits offsets for a group from a consumer that never subscribes (no member, no assignment). */
async function commit(group: string, offsets: { topic: string; partition: number; offset: number }[]) {
  const c = new RdKafka.KafkaConsumer({ 'bootstrap.servers': KAFKA_BROKERS, 'group.id': group }, {});
  await new Promise<void>((resolve, reject) => c.connect({}, (e) => (e ? reject(e) : resolve())));
  try {
    c.commitSync(offsets);
  } finally {
    await new Promise<void>((r) => c.disconnect(() => r()));
  }
}

describe('redfence lag (real broker)', () => {
  const topic = uniqueName('lag');
  let drop: () => Promise<void> = async () => undefined;
  const oldTime = Date.now() - 120_000;

  before(async () => {
    drop = await createTopics([{ topic, partitions: 2 }]);
    const msgs = [];
    for (let i = 0; i < 20; i++) {
      msgs.push({ key: `a${i}`, value: 'x', partition: 0, timestamp: String(oldTime + i) });
      msgs.push({ key: `b${i}`, value: 'y', partition: 1 });
    }
    await produce(topic, msgs);
  });
  after(() => drop());

  it('a partition behind with no owner is STOP (seed 003: dead), exit 1; the time lag read', async () => {
    const group = uniqueName('lag-dead');
    await commit(group, [
      { topic, partition: 0, offset: 5 },
      { topic, partition: 1, offset: 20 },
    ]);
    const r = await runLag(['--group', group, '--samples', '2', '--interval', '200', '--time-lag']);
    assert.equal(r.code, 1, r.err);
    const report = JSON.parse(r.out) as Report;
    assert.equal(report.status, 'STOP');
    const [p0, p1] = report.partitions;
    assert.equal(p0?.status, 'STOP');
    assert.deepEqual(p0?.reasons, ['no-owner', 'dead']);
    assert.equal(p0?.lag, 15);
    assert.equal(p0?.committed, 5);
    // the record at offset 5 was written with a timestamp two minutes old
    assert.ok((p0?.timeLagSeconds ?? 0) >= 115, `time lag ${p0?.timeLagSeconds}`);
    assert.equal(p1?.status, 'OK');
    assert.equal(p1?.lag, 0);
    assert.equal(p1?.timeLagSeconds, 0);
  });

  it('committed to the end: every partition OK, exit 0; the topics found from the commits', async () => {
    // behind on partition 0 first, then caught up: every partition at the end
    const group = uniqueName('lag-end');
    await commit(group, [
      { topic, partition: 0, offset: 5 },
      { topic, partition: 1, offset: 20 },
    ]);
    await commit(group, [{ topic, partition: 0, offset: 20 }]);
    const r = await runLag(['--group', group, '--samples', '2', '--interval', '100']);
    assert.equal(r.code, 0, r.err);
    const report = JSON.parse(r.out) as Report;
    assert.equal(report.status, 'OK');
    assert.deepEqual(
      report.partitions.map((p) => [p.topic, p.partition, p.status, p.lag]),
      [
        [topic, 0, 'OK', 0],
        [topic, 1, 'OK', 0],
      ],
    );
  });

  it('a partition behind whose owner does not commit is STALL; the table on request', async () => {
    const g = uniqueName('lag-stall');
    await commit(g, [
      { topic, partition: 0, offset: 2 },
      { topic, partition: 1, offset: 20 },
    ]);
    const member = new RdKafka.KafkaConsumer(
      { 'bootstrap.servers': KAFKA_BROKERS, 'group.id': g, 'enable.auto.commit': false },
      {},
    );
    await new Promise<void>((resolve, reject) => member.connect({}, (e) => (e ? reject(e) : resolve())));
    try {
      member.subscribe([topic]);
      // consumes (never commits) until the group assigned it both partitions
      await pollUntil(
        'the member to own the partitions',
        async () => {
          await new Promise<void>((r) => member.consume(10, () => r()));
          return member.assignments().length === 2;
        },
        30_000,
      );
      const r = await runLag(['--group', g, '--samples', '2', '--interval', '200']);
      assert.equal(r.code, 1, r.err);
      const report = JSON.parse(r.out) as Report;
      assert.equal(report.partitions[0]?.status, 'STALL');
      assert.deepEqual(report.partitions[0]?.reasons, ['committed-stuck', 'dead']);
      assert.equal(report.partitions[1]?.status, 'OK');
      const t = await runLag(['--group', g, '--samples', '2', '--interval', '100', '--no-json']);
      assert.equal(t.code, 1);
      assert.match(t.out, /^TOPIC\s+PART\s+STATUS/m);
      assert.match(t.out, new RegExp(`^${topic}\\s+0\\s+STALL\\s+2\\s+20\\s+18\\s`, 'm'));
    } finally {
      await new Promise<void>((r) => member.disconnect(() => r()));
    }
  });

  it('--watch prints a report per interval over a sliding window until SIGTERM', async () => {
    // a group at the end: every report OK, so the watch exits 0 when stopped
    const group = uniqueName('lag-watch');
    await commit(group, [
      { topic, partition: 0, offset: 20 },
      { topic, partition: 1, offset: 20 },
    ]);
    const lines: string[] = [];
    const done = main(
      [
        'lag',
        '--brokers',
        KAFKA_BROKERS,
        '--json',
        '--group',
        group,
        '--samples',
        '2',
        '--interval',
        '50',
        '--watch',
      ],
      (s) => {
        lines.push(s);
      },
      () => undefined,
    );
    await pollUntil('three reports', async () => lines.length >= 3, 30_000);
    process.emit('SIGTERM');
    assert.equal(await done, 0);
    for (const l of lines) {
      const report = JSON.parse(l) as Report;
      assert.equal(report.status, 'OK');
      assert.equal(report.partitions.length, 2);
    }
    assert.equal(process.listenerCount('SIGTERM'), 0);
  });

  it('bad input exits 2: no --group, a bad option value, a missing topic', async () => {
    const group = uniqueName('lag-bad');
    const none = await runLag([]);
    assert.equal(none.code, 2);
    assert.match(none.err, /--group <id> is required .*\[RF_INVALID_OPTIONS\]/);
    const bad = await runLag(['--group', group, '--samples', '0']);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /--samples must be an integer >= 1/);
    const missing = await runLag(['--group', group, '--topic', uniqueName('nope')]);
    assert.equal(missing.code, 2);
    assert.match(missing.err, /no such topic: .*\[RF_TOPIC_MISSING\]/);
    const empty = await runLag(['--group', uniqueName('never')]);
    assert.equal(empty.code, 2);
    assert.match(empty.err, /has no committed offsets/);
  });
});
