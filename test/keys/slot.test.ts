import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { keySlot } from '../../src/keys/index.js';
import { REDIS_CLUSTER_NODES } from '../helpers/env.js';

describe('keySlot', () => {
  it('matches known slots (CRC16/XMODEM, hash tags)', () => {
    assert.equal(keySlot('123456789'), 0x31c3 % 16384);
    assert.equal(keySlot('foo'), 12182);
    // Values from CLUSTER KEYSLOT of Redis 7 (and the examples of the cluster specification).
    assert.equal(keySlot('user1000'), 3443);
    assert.equal(keySlot('{user1000}.following'), 3443, 'the tag alone is hashed');
    assert.equal(keySlot('foo{}{bar}'), 8363, 'empty first tag: the whole key is hashed');
    assert.equal(keySlot('bar'), 5061);
    assert.equal(keySlot('foo{{bar}}zap'), 4015, 'the tag is "{bar"');
    assert.equal(keySlot('{bar'), 4015);
    assert.equal(keySlot(Buffer.from('foo')), 12182);
  });

  it('agrees with CLUSTER KEYSLOT of a real node for arbitrary keys', async () => {
    const seed = REDIS_CLUSTER_NODES[0] as { host: string; port: number };
    const node = new Redis(seed.port, seed.host);
    after(() => node.disconnect());
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.string({ maxLength: 20 }),
          fc.string({ maxLength: 8 }).map((s) => `rf:{st:${s}}`),
        ),
        async (key) => {
          assert.equal(keySlot(key), Number(await node.cluster('KEYSLOT', key)), JSON.stringify(key));
        },
      ),
      { numRuns: 300 },
    );
  });
});
