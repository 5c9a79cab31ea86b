/**
 * The console's Lag view against the real broker: a group committed behind the end (by a consumer
 * that never joins) shows each partition's lag and status as `redfence lag` gives them, and the trend
 * graph of the topic's total lag; the console samples in the background (a page read calls no broker).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RdKafka } from '@confluentinc/kafka-javascript';
import { Redis } from 'ioredis';
import { startConsole } from '../../src/console/server.js';
import { runCli } from '../helpers/cli.js';
import { KAFKA_BROKERS, REDIS_URL, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil, produce } from '../helpers/kafka.js';

async function commit(group: string, offsets: { topic: string; partition: number; offset: number }[]) {
  const c = new RdKafka.KafkaConsumer({ 'bootstrap.servers': KAFKA_BROKERS, 'group.id': group }, {});
  await new Promise<void>((resolve, reject) => c.connect({}, (e) => (e ? reject(e) : resolve())));
  try {
    c.commitSync(offsets);
  } finally {
    await new Promise<void>((r) => c.disconnect(() => r()));
  }
}

describe('console lag view (real broker)', () => {
  it('shows the lag and status of each partition and the trend of the total', async (t) => {
    const topic = uniqueName('console-lag');
    const group = uniqueName('console-lag-group');
    const drop = await createTopics([{ topic, partitions: 2 }]);
    t.after(drop);
    await produce(topic, [
      ...Array.from({ length: 8 }, (_, i) => ({ key: `a${i}`, value: 'x', partition: 0 })),
      ...Array.from({ length: 4 }, (_, i) => ({ key: `b${i}`, value: 'y', partition: 1 })),
    ]);
    await commit(group, [
      { topic, partition: 0, offset: 3 },
      { topic, partition: 1, offset: 4 },
    ]);
    const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 2 });
    t.after(() => redis.disconnect());
    const c = await startConsole({
      redis,
      kafka: { brokers: KAFKA_BROKERS.split(','), clientId: 'console-lag-test' },
      groups: [group],
      port: 0,
      lagIntervalMs: 300,
      lagWindow: 3,
    });
    t.after(() => c.close());
    await pollUntil(
      'three lag samples',
      async () => (c.lag.groups()[0]?.trend.get(topic)?.length ?? 0) >= 3,
      30_000,
    );
    const res = await fetch(`${c.url}lag?group=${group}`);
    assert.equal(res.status, 200);
    const page = await res.text();
    const row = (p: number) =>
      new RegExp(
        `<td>${topic}</td><td class="num">${p}</td><td class="status status-(\\w+)">\\w+</td><td class="num">(\\d+)</td><td class="num">(\\d+)</td><td class="num">(\\d+)</td>`,
      ).exec(page);
    const p0 = row(0);
    const p1 = row(1);
    assert.ok(p0 && p1, page);
    assert.deepEqual(p0.slice(2, 5), ['3', '8', '5']);
    assert.deepEqual(p1.slice(2, 5), ['4', '4', '0']);
    assert.match(page, /<svg class="trend" role="img" aria-label="[^"]*now 5, peak 5"/);
    // the same evaluation as redfence lag
    const cli = await runCli([
      'lag',
      '--brokers',
      KAFKA_BROKERS,
      '--json',
      '--group',
      group,
      '--samples',
      '3',
      '--interval',
      '100',
    ]);
    const report = JSON.parse(cli.out) as { partitions: Array<{ partition: number; status: string }> };
    const status = (p: number) => report.partitions.find((x) => x.partition === p)?.status;
    assert.equal(p0[1], status(0));
    assert.equal(p1[1], status(1));
  });
});
