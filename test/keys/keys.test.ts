import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KeySpace } from '../../src/index.js';

function slotTag(name: string): string {
  const open = name.indexOf('{');
  const close = name.indexOf('}', open + 1);
  return name.slice(open + 1, close);
}

describe('KeySpace', () => {
  const ks = new KeySpace({ store: 'totals' });

  it('builds rf:-prefixed, hash-tagged names', () => {
    assert.equal(ks.state('c-42'), 'rf:{totals:c-42}');
    assert.equal(ks.epoch('orders', 3), 'rf:{totals:orders:3}:epoch');
    assert.equal(ks.pendingIndex('orders', 3), 'rf:{totals:orders:3}:pending');
  });

  it('hashes keys that would break the hash tag, are long, binary, or start with #', () => {
    for (const key of ['a{b', 'a}b', '#raw', 'x'.repeat(129), Buffer.from([0xff, 0x00]), '', 'tab\there']) {
      const name = ks.state(key);
      assert.match(name, /^rf:\{totals:#[A-Za-z0-9_-]{43}\}$/, `key ${JSON.stringify(key)} -> ${name}`);
      assert.equal(slotTag(name), name.slice(4, -1));
    }
  });

  it('stores every key hashed with keyEncoding "hash", never raw', () => {
    const hashed = new KeySpace({ store: 'pii', keyEncoding: 'hash' });
    const name = hashed.state('alice@example.com');
    assert.ok(!name.includes('alice'));
    assert.equal(name, hashed.state(Buffer.from('alice@example.com')));
  });

  it('a fence space keys state apart inside the hash tag; partition keys and the store stay the same', () => {
    const sp = new KeySpace({ store: 'app', tenant: 'acme', space: 'app-by-region-repartition' });
    assert.equal(sp.state('EU'), 'rf:t=acme:{app@app-by-region-repartition:EU}');
    assert.equal(slotTag(sp.state('EU')), 'app@app-by-region-repartition:EU', 'one slot per key and space');
    assert.equal(sp.statePattern(), 'rf:t=acme:{app@app-by-region-repartition:*}');
    assert.equal(
      sp.epoch('app-by-region-repartition', 1),
      'rf:t=acme:{app:app-by-region-repartition:1}:epoch',
    );
    assert.equal(sp.store, 'app');
    // '@' is in no store or topic name: no space's names meet the store's own or another store's
    assert.notEqual(sp.state('EU'), new KeySpace({ store: 'app', tenant: 'acme' }).state('EU'));
    assert.throws(() => new KeySpace({ store: 'app', space: 'a:b' }), /valid Kafka topic name/);
  });

  it('scopes names by tenant outside the hash tag', () => {
    const t = new KeySpace({ store: 'totals', tenant: 'acme' });
    assert.equal(t.state('k'), 'rf:t=acme:{totals:k}');
    assert.equal(t.epoch('orders', 0), 'rf:t=acme:{totals:orders:0}:epoch');
  });

  it('describes keys for logs without their text', () => {
    const d = KeySpace.describeKey('alice@example.com');
    assert.match(d, /^key#[0-9a-f]{12}$/);
  });

  it('rejects bad store, tenant, topic and partition names, naming them', () => {
    assert.throws(() => new KeySpace({ store: 'a:b' }), { code: 'RF_INVALID_ARGUMENT', message: /store/ });
    assert.throws(() => new KeySpace({ store: 's', tenant: '{x}' }), { message: /tenant/ });
    assert.throws(() => ks.epoch('bad topic', 0), { message: /topic/ });
    assert.throws(() => ks.epoch('t', -1), { message: /partition/ });
    assert.throws(() => ks.state(42 as unknown as string), { message: /state key/ });
  });
});
