import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { murmur2, partitionFor, toPositive } from '../../src/partitioner/index.js';

// Apache Kafka's UtilsTest.testMurmur2 vectors (signed 32-bit results of Utils.murmur2).
const KAFKA_VECTORS: Array<[string, number]> = [
  ['21', -973932308],
  ['foobar', -790332482],
  ['a-little-bit-long-string', -985981536],
  ['a-little-bit-longer-string', -1486304829],
  ['lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', -58897971],
  ['abc', 479470107],
];

describe('murmur2', () => {
  for (const [input, expected] of KAFKA_VECTORS) {
    it(`hashes ${JSON.stringify(input)} like the Java client`, () => {
      assert.equal(murmur2(Buffer.from(input, 'utf8')), expected);
    });
  }

  it('returns a signed 32-bit integer and is deterministic for any bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const h = murmur2(bytes);
        assert.ok(Number.isInteger(h) && h >= -(2 ** 31) && h < 2 ** 31);
        assert.equal(murmur2(Uint8Array.from(bytes)), h);
      }),
    );
  });

  it('toPositive clears the sign bit like Kafka (not Math.abs)', () => {
    assert.equal(toPositive(-2147483648), 0);
    assert.equal(toPositive(-1), 2147483647);
    assert.equal(toPositive(-790332482), 1357151166);
  });
});

describe('partitionFor', () => {
  it('is toPositive(murmur2(utf8 bytes)) % partitionCount', () => {
    assert.equal(partitionFor('foobar', 10), 1357151166 % 10);
    assert.equal(partitionFor('foobar', 50), 16);
  });

  it('gives the same partition for a string and its UTF-8 bytes, always in range', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary', maxLength: 40 }),
        fc.integer({ min: 1, max: 1000 }),
        (key, n) => {
          const p = partitionFor(key, n);
          assert.ok(p >= 0 && p < n);
          assert.equal(partitionFor(Buffer.from(key, 'utf8'), n), p);
        },
      ),
    );
  });

  it('rejects a bad partition count or key with a clear error', () => {
    assert.throws(() => partitionFor('k', 0), { code: 'RF_INVALID_ARGUMENT', message: /partitionCount/ });
    assert.throws(() => partitionFor('k', 1.5), { code: 'RF_INVALID_ARGUMENT' });
    assert.throws(() => partitionFor(null as unknown as string, 3), {
      code: 'RF_INVALID_ARGUMENT',
      message: /got null/,
    });
  });
});
