import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { RedfenceError } from '../../src/errors/index.js';
import { pollUntil, startRedisServer } from '../../src/harness/index.js';
import { DedupWindow } from '../../src/kit/index.js';
import { uniqueName } from '../helpers/env.js';
import { KIT_TARGETS } from './support.js';

for (const target of KIT_TARGETS) {
  describe(`dedup window on ${target.name}`, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    it('the first sighting passes, repeats inside the window are flagged, the window ends', async () => {
      const w = new DedupWindow({ redis, name: uniqueName('d'), tenant: 'acme', windowMs: 300 });
      assert.equal(await w.seen('evt-1'), false);
      assert.equal(await w.seen('evt-1'), true);
      assert.equal(await w.seen('evt-2'), false);
      await pollUntil('window over', async () => !(await w.seen('evt-1')), 10_000, 50);
      const m = (await w.registry.getMetricsAsJSON()).find(
        (x) => x.name === 'redfence_kit_dedup_checks_total',
      );
      assert.ok((m?.values ?? []).some((v) => v.labels.outcome === 'duplicate' && v.value >= 1));
    });

    it('concurrent sightings of one id: exactly one passes', async () => {
      const w = new DedupWindow({ redis, name: uniqueName('d'), tenant: 'acme', windowMs: 60_000 });
      const answers = await Promise.all(Array.from({ length: 50 }, () => w.seen('same')));
      assert.equal(answers.filter((a) => !a).length, 1);
    });

    it('forget lets a failed event through again; tenants do not share marks', async () => {
      const name = uniqueName('d');
      const a = new DedupWindow({ redis, name, tenant: 'acme', windowMs: 60_000 });
      const b = new DedupWindow({ redis, name, tenant: 'globex', windowMs: 60_000 });
      assert.equal(await a.seen('e'), false);
      assert.equal(await b.seen('e'), false);
      assert.equal(await a.forget('e'), true);
      assert.equal(await a.seen('e'), false);
      assert.equal(await a.seen('e'), true);
    });
  });
}

describe('dedup window with Redis down', () => {
  it('fails closed by default; fail-open answers not seen', async () => {
    const server = await startRedisServer();
    after(() => server.stop());
    const redis = new Redis({
      host: '127.0.0.1',
      port: server.port,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 50,
    });
    redis.on('error', () => {}); // it is stopped on purpose
    after(() => redis.disconnect());
    const policy = { timeoutMs: 300, retries: 0 };
    const closed = new DedupWindow({
      redis,
      name: 'c',
      tenant: 'acme',
      windowMs: 60_000,
      redisPolicy: policy,
    });
    const open = new DedupWindow({
      redis,
      name: 'o',
      tenant: 'acme',
      windowMs: 60_000,
      redisPolicy: policy,
      onRedisDown: 'fail-open',
    });
    assert.equal(await open.seen('e'), false);
    assert.equal(await open.seen('e'), true);
    await server.kill();
    await assert.rejects(closed.seen('e'), (e) => RedfenceError.is(e, 'RF_REDIS_UNAVAILABLE'));
    assert.equal(await open.seen('e'), false);
  });

  it('bad options fail before any Redis call', () => {
    const redis = { evalshaBuffer: () => assert.fail('called'), evalBuffer: () => assert.fail('called') };
    for (const [o, msg] of [
      [{ windowMs: undefined }, /"windowMs" \(required\)/],
      [{ windowMs: 0 }, /"windowMs"/],
      [{ tenant: undefined }, /"tenant"/],
      [{ nope: 1 }, /unknown option "nope"/],
    ] as [Record<string, unknown>, RegExp][]) {
      assert.throws(
        () => new DedupWindow({ redis, name: 'x', tenant: 'acme', windowMs: 10, ...o } as never),
        (e) => RedfenceError.is(e, 'RF_INVALID_OPTIONS') && msg.test(e.message),
      );
    }
  });
});
