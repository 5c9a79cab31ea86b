/**
 * The instance registry with a real Redis: a processor (on MemoryKafka) writes `rf:instances:<id>`
 * once running, with its kind, group, store and owned partitions with their epochs, and its id in the
 * index with the heartbeat's expiry; close() deletes both. An entry that stops being refreshed ages out
 * of the console's list; a registry write that fails never reaches the runtime.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { liveInstances } from '../../src/console/instances.js';
import { pollUntil } from '../../src/harness/poll.js';
import { defineProcessor, Processor } from '../../src/index.js';
import { INSTANCE_INDEX_KEY, instanceKey } from '../../src/keys/instances.js';
import { InstanceRegistration } from '../../src/runtime/registry.js';
import { MemoryKafka } from '../../src/testing/index.js';
import { standalone, uniqueName } from '../helpers/env.js';

describe('instance registry (real Redis)', () => {
  const redis = standalone();
  after(() => redis.disconnect());

  it('a processor registers once running, with partitions and epochs, and leaves on close', async () => {
    const ns = uniqueName('reg');
    const kafka = new MemoryKafka({ topics: { [`${ns}-in`]: 2, [`${ns}-out`]: 2, [`${ns}-in.DLT`]: 2 } });
    const groupId = `${ns}-g`;
    const instanceId = uniqueName('inst');
    const p = new Processor<{ n: number }>({
      definition: defineProcessor<{ n: number }>({
        input: `${ns}-in`,
        output: `${ns}-out`,
        store: ns,
        operation: (r) => ({ op: 'add', by: r.n }),
      }),
      redis,
      kafka: kafka.port({ groupId }),
      groupId,
      instanceId,
    });
    assert.equal(await redis.exists(instanceKey(instanceId)), 0, 'nothing before start');
    await p.start();
    try {
      await pollUntil(
        'the entry with both partitions',
        async () =>
          (await redis.hget(instanceKey(instanceId), 'partitions'))?.includes('"partition":1') === true,
        10_000,
      );
      const h = await redis.hgetall(instanceKey(instanceId));
      assert.equal(h.kind, 'processor');
      assert.equal(h.group, groupId);
      assert.equal(h.module, ns);
      const parts = JSON.parse(h.partitions as string) as Array<{
        topic: string;
        partition: number;
        epoch: number;
      }>;
      assert.deepEqual(parts.map((x) => x.partition).sort(), [0, 1]);
      for (const x of parts) assert.ok(x.epoch >= 1, 'each partition with its epoch');
      const ttl = await redis.pttl(instanceKey(instanceId));
      assert.ok(ttl > 0 && ttl <= 15_000, `a heartbeat TTL, got ${ttl}`);
      assert.ok(Number(await redis.zscore(INSTANCE_INDEX_KEY, instanceId)) > Date.now());
      assert.ok((await liveInstances(redis)).some((i) => i.id === instanceId));
    } finally {
      await p.close();
    }
    assert.equal(await redis.exists(instanceKey(instanceId)), 0, 'deleted on close');
    assert.equal(await redis.zscore(INSTANCE_INDEX_KEY, instanceId), null);
  });

  it('an entry no longer refreshed ages out; a failing Redis never reaches the caller', async () => {
    const id = uniqueName('gone');
    await redis.hset(instanceKey(id), { id, kind: 'handler' });
    await redis.pexpire(instanceKey(id), 60_000);
    await redis.zadd(INSTANCE_INDEX_KEY, Date.now() - 1, id); // its heartbeat expired
    after(() => redis.del(instanceKey(id)));
    assert.ok(!(await liveInstances(redis)).some((i) => i.id === id), 'an expired index entry is not listed');
    const failing = {
      hset: () => Promise.reject(new Error('down')),
      pexpire: () => Promise.reject(new Error('down')),
      zadd: () => Promise.reject(new Error('down')),
      zrem: () => Promise.reject(new Error('down')),
      zremrangebyscore: () => Promise.reject(new Error('down')),
      del: () => Promise.reject(new Error('down')),
    };
    const reg = new InstanceRegistration(failing, 'relay', () => ({ id }), 50);
    reg.start();
    await new Promise((r) => setImmediate(r));
    await reg.stop(); // resolves, does not throw
    const hung = new InstanceRegistration(
      { ...failing, hset: () => new Promise(() => undefined) },
      'relay',
      () => ({ id }),
      50,
    );
    hung.start();
    const t0 = Date.now();
    await hung.stop();
    assert.ok(Date.now() - t0 < 3000, 'a Redis that does not answer does not hold stop() up');
  });
});
