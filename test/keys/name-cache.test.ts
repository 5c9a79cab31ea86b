/**
 * The state key name cache (KeySpace `nameCacheSize`, src/keys/cache.ts): bounded, and the same Redis
 * key as an uncached KeySpace for every kind of key (short, long, braces, leading '#', control
 * characters, non-ASCII, empty, binary, sensitive, tenant-scoped), on first use, on a hit and after
 * the cache was emptied.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { BoundedCache } from '../../src/keys/cache.js';
import { KeySpace, NAME_CACHE_SIZE } from '../../src/keys/index.js';

const KEYS: Array<string | Uint8Array> = [
  'c-42',
  'x'.repeat(128), // longest raw
  'x'.repeat(129), // hashed: long
  'é'.repeat(64), // 128 bytes: raw
  'é'.repeat(65), // 130 bytes: hashed
  'a{b',
  'a}b',
  '{tag}',
  '#raw',
  'in#side',
  'tab\there',
  'new\nline',
  '',
  'ключ',
  '🔑',
  Buffer.from([0xff, 0x00]),
  Buffer.from('c-42'),
];

const hashed = (key: string | Uint8Array) => `#${createHash('sha256').update(key).digest('base64url')}`;

describe('the state key name cache', () => {
  const options = [
    { store: 'totals' },
    { store: 'totals', tenant: 'acme' },
    { store: 'pii', keyEncoding: 'hash' as const },
    { store: 'short', maxRawKeyLength: 4 },
  ];

  for (const o of options) {
    it(`gives the uncached name for every kind of key (${JSON.stringify(o)})`, () => {
      const plain = new KeySpace({ ...o, nameCacheSize: 0 });
      const cached = new KeySpace({ ...o, nameCacheSize: 8 });
      for (let pass = 0; pass < 3; pass++)
        for (const key of KEYS) {
          const want = plain.state(key);
          assert.equal(cached.state(key), want, `pass ${pass}: ${JSON.stringify(key)}`);
          assert.equal(want, `${o.tenant ? `rf:t=${o.tenant}:` : 'rf:'}{${o.store}:${plain.keyId(key)}}`);
        }
      assert.equal(plain.cachedNames, 0);
      assert.ok(cached.cachedNames <= 8);
    });
  }

  it('keeps the names of before: raw when safe, hashed when long, odd or sensitive', () => {
    const ks = new KeySpace({ store: 'totals' });
    assert.equal(ks.state('c-42'), 'rf:{totals:c-42}');
    assert.equal(ks.state('c-42'), 'rf:{totals:c-42}'); // a hit
    assert.equal(ks.state('a{b'), `rf:{totals:${hashed('a{b')}}`);
    assert.equal(ks.state('x'.repeat(129)), `rf:{totals:${hashed('x'.repeat(129))}}`);
    const pii = new KeySpace({ store: 'pii', keyEncoding: 'hash' });
    for (let i = 0; i < 2; i++) {
      const name = pii.state('alice@example.com');
      assert.equal(name, `rf:{pii:${hashed('alice@example.com')}}`);
      assert.ok(!name.includes('alice'));
    }
  });

  it('is bounded: emptied when full, the names unchanged after', () => {
    const ks = new KeySpace({ store: 'b', nameCacheSize: 100 });
    const plain = new KeySpace({ store: 'b', nameCacheSize: 0 });
    let most = 0;
    for (let i = 0; i < 1000; i++) {
      const key = i % 3 === 0 ? `{k${i}}` : `k${i}`;
      assert.equal(ks.state(key), plain.state(key));
      most = Math.max(most, ks.cachedNames);
    }
    assert.equal(most, 100);
    assert.ok(ks.cachedNames <= 100);
    for (let i = 0; i < 1000; i++) assert.equal(ks.state(`k${i}`), plain.state(`k${i}`));
    assert.equal(new KeySpace({ store: 'd' }).cachedNames, 0);
    assert.equal(NAME_CACHE_SIZE, 65_536);
  });

  it('does not cache binary keys (their names come from their bytes)', () => {
    const ks = new KeySpace({ store: 'bin', nameCacheSize: 10 });
    ks.state(Buffer.from([0xff]));
    ks.state(Buffer.from('text'));
    assert.equal(ks.cachedNames, 0);
    assert.equal(ks.state(Buffer.from('text')), ks.state('text'));
  });

  it('refuses a bad nameCacheSize', () => {
    for (const n of [-1, 1.5, Number.NaN, '10'])
      assert.throws(() => new KeySpace({ store: 's', nameCacheSize: n as number }), {
        code: 'RF_INVALID_ARGUMENT',
        message: /nameCacheSize/,
      });
  });

  it('BoundedCache never holds more than its bound; 0 holds nothing', () => {
    const c = new BoundedCache<number>(3);
    for (let i = 0; i < 10; i++) {
      c.set(`k${i}`, i);
      assert.ok(c.size <= 3);
      assert.equal(c.get(`k${i}`), i);
    }
    const none = new BoundedCache<number>(0);
    none.set('a', 1);
    assert.equal(none.size, 0);
    assert.equal(none.get('a'), undefined);
  });
});
