/**
 * `waitReplicas` for a topology processor on the real broker and a Redis pair of the test's own (a
 * primary and its replica), exactly-once, the fraud topology on generated input over 3 partitions:
 * - the option is checked as the processor's is, before any connection;
 * - with the replica acknowledging, the first two thirds of the input run to their end offsets;
 * - the replica stopped (SIGSTOP): the next batches' key calls are made (the keys' fences move past the
 *   committed offsets), WAIT falls short, the guard pauses consumption and nothing is committed;
 * - the processor's connection killed while it waits (as at a failover), then the replica resumed: the
 *   batch is run again from its stream time (REEMIT) and the alerts (read_committed) equal the reference
 *   model per key, each once, with one dead letter per late record.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { checkTopologyFlags, topologySettings } from '../../src/cli/run-topology.js';
import { RedfenceError } from '../../src/errors/index.js';
import { RedisServer } from '../../src/harness/index.js';
import type { Logger } from '../../src/index.js';
import { resolveTopologyOptions } from '../../src/processor/topology/options.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { committedOffsets, pollUntil, waitCommitted } from '../helpers/kafka.js';
import { assertOutputsEqualModel, FRAUD, prepare } from './topology-helpers.js';

const sum = (m: Map<number, number>) => [...m.values()].reduce((a, b) => a + b, 0);

describe('topology processor: waitReplicas', { timeout: 240_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  it('is checked as the processor checks it, before any connection', () => {
    const base = { topology: FRAUD.build('w'), redis, kafka: { brokers: ['127.0.0.1:1'] } };
    assert.deepEqual(
      resolveTopologyOptions({ ...base, waitReplicas: { replicas: 1, timeoutMs: 50 } }).waitReplicas,
      {
        replicas: 1,
        timeoutMs: 50,
      },
    );
    assert.equal(resolveTopologyOptions(base).waitReplicas, undefined);
    for (const [bad, message] of [
      [{ replicas: 0, timeoutMs: 50 }, /waitReplicas\.replicas/],
      [{ replicas: 1 }, /needs both "replicas" and "timeoutMs"/],
      [{ replicas: 1, timeoutMs: 0 }, /waitReplicas\.timeoutMs/],
    ] as const)
      assert.throws(
        () => resolveTopologyOptions({ ...base, waitReplicas: bad as never }),
        (e: unknown) => RedfenceError.is(e, 'RF_INVALID_OPTIONS') && message.test((e as Error).message),
      );
  });

  it('redfence run <topology module> takes --wait-replicas and --wait-timeout into the options', () => {
    const wait = { replicas: 2, timeoutMs: 700 };
    assert.doesNotThrow(() => checkTopologyFlags({ 'wait-replicas': 'flag', 'wait-timeout': 'env' }));
    assert.throws(() => checkTopologyFlags({ 'sweep-every': 'flag' }), /--sweep-every does not apply/);
    assert.deepEqual(
      topologySettings({ kafka: { brokers: ['b:1'] }, waitReplicas: wait }).waitReplicas,
      wait,
    );
  });

  it('commits only once the replica acknowledged; a batch whose connection closed before WAIT is run again (REEMIT)', async (t) => {
    // a Redis pair of the test's own: its replica is stopped and its clients killed
    const primary = new RedisServer();
    await primary.start();
    t.after(() => primary.stop());
    const replica = new RedisServer({ replicaOf: primary.port });
    await replica.start();
    t.after(async () => {
      replica.signal('SIGCONT');
      await replica.stop();
    });
    const db = new Redis(primary.url);
    db.on('error', () => undefined);
    t.after(() => db.disconnect());
    await pollUntil(
      'the replica linked',
      async () => /connected_slaves:1/.test(await db.info('replication')),
      30_000,
    );
    const ns = uniqueName('twait');
    const orders = `${ns}-orders`;
    const { built, model, records, produce, cleanup } = await prepare(FRAUD, ns, 23);
    t.after(cleanup);
    const warnings: string[] = [];
    const logger: Logger = {
      debug() {},
      info() {},
      error() {},
      warn: (_: object, msg?: string) => {
        warnings.push(msg ?? '');
      },
    };
    const client = new Redis(primary.url, { maxRetriesPerRequest: null });
    client.on('error', () => undefined);
    t.after(() => client.disconnect());
    const p = new TopologyProcessor({
      topology: built,
      redis: client,
      waitReplicas: { replicas: 1, timeoutMs: 300 },
      kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 40 },
      logger,
    });
    const first = Math.floor((records * 2) / 3);
    await produce(0, first);
    await p.start();
    try {
      await waitCommitted(ns, orders, 60_000);
      const before = await committedOffsets(ns, orders);
      assert.equal(sum(before), first, 'WAIT met: the first part committed');
      assert.equal(p.counts().verdicts.REEMIT ?? 0, 0);

      // the replica stops acknowledging: the next batches' key calls are made, WAIT falls short, the
      // guard pauses consumption, nothing is produced or committed
      replica.signal('SIGSTOP');
      await produce(first, records);
      await pollUntil('an unmet WAIT', () => warnings.some((w) => w.startsWith('Redis unavailable')), 60_000);
      // per partition, the lowest offset a key call past the committed offsets was made for
      const past = new Map<number, number>();
      for (const key of await db.keys(`rf:{${ns}:*`)) {
        if ((await db.type(key)) !== 'hash') continue;
        const [partition, offset] = await db.hmget(key, 'p', 'o');
        if (partition === null || offset === null) continue;
        const [pn, on] = [Number(partition), Number(offset)];
        if (on >= (before.get(pn) ?? 0)) past.set(pn, Math.min(on, past.get(pn) ?? on));
      }
      assert.ok(past.size > 0, 'key calls past the committed offsets were made');
      // a batch with no key call (every record filtered out) needs no WAIT and may commit; none may
      // commit past a record whose key call the replica has not acknowledged
      const now = await committedOffsets(ns, orders);
      for (const [pn, lowest] of past)
        assert.ok(
          (now.get(pn) ?? 0) <= lowest,
          `partition ${pn} committed to ${now.get(pn)}, past its unacknowledged key call at ${lowest}`,
        );

      // the connection that carried them closes (as at a failover): once WAIT passes, the batch is run
      // again from its stream time, its key calls answer REEMIT, and the outputs are the model's, once
      await db.call('CLIENT', 'KILL', 'TYPE', 'normal');
      replica.signal('SIGCONT');
      await waitCommitted(ns, orders, 90_000);
    } finally {
      await p.close();
    }
    assert.ok(
      warnings.some((w) => w.startsWith('WAIT: a Redis connection closed')),
      `the batch was made again: ${JSON.stringify([...new Set(warnings)])}`,
    );
    assert.ok((p.counts().verdicts.REEMIT ?? 0) > 0, `re-emitted ${JSON.stringify(p.counts().verdicts)}`);
    await assertOutputsEqualModel(FRAUD, ns, model);
  });
});
