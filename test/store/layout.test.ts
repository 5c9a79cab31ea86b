/**
 * The application's layout marker (src/store/layout.ts) on a standalone Redis and on Redis Cluster: a
 * new application claims it; an application that ran before it (its partition epochs exist, no marker)
 * with time windows is refused with RF_STATE_LAYOUT, before and without writing anything; one without
 * time windows claims it; a reader never writes it; a marker of another layout is refused.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { STORE_LAYOUT } from '../../src/store/layout.js';
import { KeyStore } from '../../src/store/store.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';

for (const target of TARGETS.filter((t) => t.mode === 'cluster')) {
  describe(`layout marker on ${target.name}`, () => {
    const redis = target.connect();
    after(() => redis.disconnect());
    const app = () => uniqueName('lay').replace(/-/g, '_');

    it('a new application claims it; a second check reads it', async () => {
      const store = new KeyStore({ redis, app: app() });
      const marker = store.keys.layout();
      assert.match(marker, /^rf:\{lay_[^:}]+\}:layout$/);
      assert.equal(await store.checkLayout({ topics: ['in'], windowed: true, claim: false }), null);
      assert.equal(await redis.exists(marker), 0, 'a reader writes nothing');
      assert.equal(await store.checkLayout({ topics: ['in'], windowed: true, claim: true }), STORE_LAYOUT);
      assert.deepEqual(await redis.hgetall(marker), { l: STORE_LAYOUT });
      // its own epochs exist now: the marker is what lets it start again
      await redis.incr(store.keys.epoch('in', 0));
      assert.equal(await store.checkLayout({ topics: ['in'], windowed: true, claim: true }), STORE_LAYOUT);
      assert.equal(await store.checkLayout({ topics: ['in'], windowed: true, claim: false }), STORE_LAYOUT);
    });

    it('an application that ran before the marker, with time windows: RF_STATE_LAYOUT, nothing written', async () => {
      const name = app();
      const store = new KeyStore({ redis, app: name });
      await redis.incr(store.keys.epoch('repart', 0)); // its second topic's partition 0 was taken
      for (const claim of [true, false])
        await assert.rejects(
          store.checkLayout({ topics: ['in', 'repart'], windowed: true, claim }),
          (err) => {
            assert.equal((err as { code?: string }).code, 'RF_STATE_LAYOUT');
            assert.match(
              (err as Error).message,
              new RegExp(`application ${name}: .*rebuild it from its input`),
            );
            assert.deepEqual((err as { details?: unknown }).details, { app: name, layout: '1' });
            return true;
          },
        );
      assert.equal(await redis.exists(store.keys.layout()), 0, 'no marker written');
      // without time windows its state reads the same: the marker is claimed
      assert.equal(
        await store.checkLayout({ topics: ['in', 'repart'], windowed: false, claim: true }),
        STORE_LAYOUT,
      );
      assert.equal(
        await store.checkLayout({ topics: ['in', 'repart'], windowed: true, claim: true }),
        STORE_LAYOUT,
      );
    });

    it('a marker of another layout is refused', async () => {
      const store = new KeyStore({ redis, app: app(), tenant: 'acme' });
      assert.match(store.keys.layout(), /^rf:t=acme:\{lay_[^:}]+\}:layout$/);
      await redis.hset(store.keys.layout(), 'l', '3');
      await assert.rejects(store.checkLayout({ topics: ['in'], windowed: false, claim: true }), {
        code: 'RF_STATE_LAYOUT',
        message: /layout 3, this version reads layout 2/,
      });
      assert.deepEqual(await redis.hgetall(store.keys.layout()), { l: '3' }, 'left as it was');
    });
  });
}
