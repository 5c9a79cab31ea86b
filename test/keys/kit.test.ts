import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RedfenceError } from '../../src/errors/index.js';
import { KitKeys } from '../../src/keys/kit.js';
import { keySlot } from '../../src/keys/slot.js';

describe('kit keys', () => {
  it('rf:, the tenant, one hash tag for every part of an entry', () => {
    const keys = new KitKeys('cache', 'quotes');
    const parts = keys.parts({ tenant: 'acme', id: 'q-1' }, 'v', 'g', 'lease');
    assert.deepEqual(parts, [
      'rf:t=acme:{cache.quotes:q-1}:v',
      'rf:t=acme:{cache.quotes:q-1}:g',
      'rf:t=acme:{cache.quotes:q-1}:lease',
    ]);
    assert.equal(new Set(parts.map(keySlot)).size, 1);
    assert.notEqual(keys.base({ tenant: 'other', id: 'q-1' }), keys.base({ tenant: 'acme', id: 'q-1' }));
  });

  it('hashes ids with braces, long ids, and every id under keyEncoding hash; never shows the id', () => {
    const auto = new KitKeys('lock', 'l');
    assert.match(auto.base({ tenant: 't', id: 'a}b{' }), /^rf:t=t:\{lock\.l:#[A-Za-z0-9_-]{43}\}$/);
    assert.match(auto.base({ tenant: 't', id: 'x'.repeat(200) }), /:#/);
    const hashed = new KitKeys('ratelimit', 'r', { keyEncoding: 'hash' });
    const base = hashed.base({ tenant: 't', id: 'jane@example.com' });
    assert.ok(!base.includes('jane'));
    assert.ok(!hashed.describe({ tenant: 't', id: 'jane@example.com' }).includes('jane'));
  });

  it('refuses a key without a tenant, a bad namespace, a bad tenant', () => {
    const keys = new KitKeys('projection', 'p');
    for (const key of [{ tenant: '', id: 'x' }, { id: 'x' }, { tenant: 'a b', id: 'x' }, null]) {
      assert.throws(
        () => keys.base(key as never),
        (e) => RedfenceError.is(e, 'RF_INVALID_ARGUMENT'),
        JSON.stringify(key),
      );
    }
    assert.throws(
      () => new KitKeys('cache', 'bad name'),
      (e) => RedfenceError.is(e, 'RF_INVALID_ARGUMENT'),
    );
    assert.throws(
      () => new KitKeys('nope' as never, 'x'),
      (e) => RedfenceError.is(e, 'RF_INVALID_ARGUMENT'),
    );
  });
});
