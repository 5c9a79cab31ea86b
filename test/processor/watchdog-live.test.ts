/**
 * The stalled-consumer watchdog on the real broker: a consumer that silently stops delivering batches
 * (simulated by a port that swallows deliveries until the watchdog seeks) is noticed and recovered,
 * with exact results; a healthy consumer running longer than stallMs is never "recovered"; records that
 * retention deleted before the group processed them are not lag (the fetch starts at the log start, so
 * counting them would "recover" and finally give up liveness on a consumer with nothing to read).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { defineProcessor, Processor } from '../../src/index.js';
import { KafkaAdmin } from '../../src/kafka/admin.js';
import { ConfluentKafka } from '../../src/kafka/confluent.js';
import { KAFKA_BROKERS, REDIS_URL, uniqueName } from '../helpers/env.js';
import {
  committedOffsets,
  createTopics,
  endOffsets,
  type Msg,
  pollUntil,
  produce,
  readToEnd,
} from '../helpers/kafka.js';
import { assertPerKey, countOf, countsUpTo } from '../helpers/outputs.js';
import { capturing, commitAt, logStarts } from './offset-resets-helpers.js';
import { StallingPort } from './stalling-port.js';

describe('watchdog on a real consumer', { timeout: 120_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = new Redis(REDIS_URL, { enableAutoPipelining: true });
  });
  after(() => redis.disconnect());

  async function setup(ns: string) {
    return createTopics([
      { topic: `${ns}-in`, partitions: 2 },
      { topic: `${ns}-out`, partitions: 2 },
      { topic: `${ns}-in.DLT`, partitions: 1 },
    ]);
  }
  const definition = (ns: string) =>
    defineProcessor<{ n: number }, number>({
      input: `${ns}-in`,
      output: `${ns}-out`,
      store: ns.replace(/-/g, '_'),
      operation: (r) => ({ op: 'add', by: r.n }),
    });
  const inputs = (n: number): Msg[] =>
    Array.from({ length: n }, (_, i) => ({ key: `k${i % 5}`, value: '{"n":1}' }));

  it('notices a consumer that stopped delivering, seeks back, and finishes exactly', async () => {
    const ns = uniqueName('stall');
    const cleanup = await setup(ns);
    try {
      await produce(`${ns}-in`, inputs(200));
      const port = new StallingPort(
        new ConfluentKafka({ brokers: KAFKA_BROKERS.split(','), groupId: `${ns}-g` }),
      );
      const { logger, warnings } = capturing();
      const p = new Processor({
        definition: definition(ns),
        redis,
        mode: 'at-least-once',
        groupId: `${ns}-g`,
        kafka: port,
        watchdog: { stallMs: 1500, intervalMs: 300, maxRecoveries: 3 },
        logger,
      });
      await p.start();
      try {
        await pollUntil('every input committed after the recovery', async () => {
          const c = await committedOffsets(`${ns}-g`, `${ns}-in`);
          return [...c.values()].reduce((a, b) => a + Math.max(0, b), 0) === 200;
        });
      } finally {
        await p.close();
      }
      assert.ok(port.seeks >= 1, 'the watchdog sought the stalled partitions');
      assert.ok(warnings.some((w) => w.msg.startsWith('consumer stalled')));
      // 200 inputs over k0..k4: 40 each
      for (let i = 0; i < 5; i++)
        assert.equal(
          (await p.fence.read(`k${i}`))?.value?.toString(),
          '40',
          `state of k${i}: every swallowed record was fetched again and applied once`,
        );
      const perKey = new Map(Array.from({ length: 5 }, (_, i) => [`k${i}`, 40]));
      assertPerKey(
        'at least one output per input',
        await readToEnd(`${ns}-out`),
        countOf,
        countsUpTo(perKey),
        {
          duplicates: 'allowed',
        },
      );
    } finally {
      await cleanup();
    }
  });

  it('leaves a healthy consumer alone for longer than stallMs', async () => {
    const ns = uniqueName('healthy');
    const cleanup = await setup(ns);
    try {
      const { logger, warnings } = capturing();
      const p = new Processor({
        definition: definition(ns),
        redis,
        mode: 'at-least-once',
        groupId: `${ns}-g`,
        kafka: { brokers: KAFKA_BROKERS.split(',') },
        watchdog: { stallMs: 1000, intervalMs: 200 },
        logger,
      });
      await p.start();
      try {
        // several waves over ~4 s: more than stallMs of steady work, and idle spells with no lag
        for (let wave = 1; wave <= 4; wave++) {
          await produce(`${ns}-in`, inputs(50));
          await pollUntil(`wave ${wave} processed`, () => p.counts().records >= wave * 50);
          const started = Date.now();
          await pollUntil('an idle spell longer than stallMs', () => Date.now() - started > 1100);
        }
      } finally {
        await p.close();
      }
      assert.deepEqual(
        warnings.filter((w) => w.msg.startsWith('consumer stalled')),
        [],
      );
    } finally {
      await cleanup();
    }
  });

  it('counts no lag for records retention deleted before the group processed them', async () => {
    const ns = uniqueName('gone');
    const cleanup = await setup(ns);
    const admin = new KafkaAdmin({ 'bootstrap.servers': KAFKA_BROKERS });
    try {
      const input = `${ns}-in`;
      await produce(input, inputs(200));
      const ends = await endOffsets(input);
      const end0 = ends.get(0) ?? 0;
      const end1 = ends.get(1) ?? 0;
      assert.ok(end0 >= 20 && end1 >= 20, `both partitions hold records: ${[...ends]}`);
      // the group processed half of each partition; then partition 0 loses everything past its commit
      const group = `${ns}-g`;
      await commitAt(group, input, new Map([...ends].map(([p, end]) => [p, Math.floor(end / 2)])));
      await admin.deleteRecords(input, [{ partition: 0, offset: end0 }]);
      assert.equal((await logStarts(admin, input)).get(0), end0, 'partition 0 starts at its end');
      const port = new StallingPort(
        new ConfluentKafka({ brokers: KAFKA_BROKERS.split(','), groupId: group }),
        false,
      );
      const { logger, warnings } = capturing();
      const p = new Processor({
        definition: definition(ns),
        redis,
        mode: 'at-least-once',
        groupId: group,
        kafka: port,
        watchdog: { stallMs: 1000, intervalMs: 200, maxRecoveries: 1 },
        logger,
      });
      await p.start();
      try {
        await pollUntil('partition 1 committed to its end', async () => {
          return (await committedOffsets(group, input)).get(1) === end1;
        });
        // eight looks at 200 ms: more than stallMs past partition 1's last delivery
        const looked = port.lowReads;
        await pollUntil('eight more looks of the watchdog', () => port.lowReads >= looked + 8);
      } finally {
        await p.close();
      }
      // the fault: partition 0's commit stayed below its end (lag, counted from the commit alone)
      assert.ok(
        ((await committedOffsets(group, input)).get(0) ?? 0) < end0,
        'partition 0 was never committed past the deleted records',
      );
      assert.deepEqual(
        warnings.filter((w) => w.msg.startsWith('consumer stalled')),
        [],
        'no stall seen in records that are gone',
      );
      assert.equal(port.seeks, 0);
    } finally {
      await admin.close();
      await cleanup();
    }
  });
});
