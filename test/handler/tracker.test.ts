/** Contiguous commits: the commit point is never past an unfinished record, whatever the finishing order. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { OffsetTracker } from '../../src/handler/tracker.js';

describe('OffsetTracker', () => {
  it("the seed's example: 100..104 with 102 still running commits 102", () => {
    const t = new OffsetTracker();
    assert.equal(t.commitPoint(), -1);
    for (const o of [100, 101, 102, 103, 104]) t.accept(o);
    for (const o of [100, 101, 103, 104]) t.finish(o);
    assert.equal(t.commitPoint(), 102);
    assert.equal(t.inFlight, 1);
    t.finish(102);
    assert.equal(t.commitPoint(), 105);
    assert.equal(t.inFlight, 0);
  });

  it('random offsets with holes, random finishing order: commit point = lowest unfinished', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 3000 }),
        fc.infiniteStream(fc.nat()),
        (gaps, picks) => {
          const t = new OffsetTracker();
          const offsets: number[] = [];
          let o = 7;
          for (const g of gaps) {
            offsets.push(o);
            t.accept(o);
            o += g;
          }
          const open = new Set(offsets);
          const it = picks[Symbol.iterator]();
          while (open.size > 0) {
            const list = [...open];
            const pick = list[(it.next().value as number) % list.length] as number;
            open.delete(pick);
            t.finish(pick);
            const lowest = Math.min(...open);
            const expected = open.size === 0 ? (offsets.at(-1) as number) + 1 : lowest;
            if (t.commitPoint() !== expected) return false;
            if (t.inFlight !== open.size) return false;
          }
          return true;
        },
      ),
      { numRuns: 30 },
    );
  });
});
