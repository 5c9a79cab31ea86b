/**
 * When a chaos run counts its group caught up: commits at every partition's end. A partition that never
 * held a record (an input with fewer keys than partitions, as the chaos guide's three-word count over six
 * partitions) needs no commit; the run waited for one forever ("still draining") before.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { committedToEnd } from '../../src/chaos/run-context.js';

const m = (entries: [number, number][]) => new Map(entries);

describe('chaos: committed to the end', () => {
  it('every partition committed at its end', () => {
    assert.equal(
      committedToEnd(
        m([
          [0, 5],
          [1, 7],
        ]),
        m([
          [0, 5],
          [1, 7],
        ]),
      ),
      true,
    );
  });
  it('a partition behind its end, or with records and no commit, is not caught up', () => {
    assert.equal(
      committedToEnd(
        m([
          [0, 5],
          [1, 6],
        ]),
        m([
          [0, 5],
          [1, 7],
        ]),
      ),
      false,
    );
    assert.equal(
      committedToEnd(
        m([[0, 5]]),
        m([
          [0, 5],
          [1, 7],
        ]),
      ),
      false,
    );
  });
  it('a partition that never held a record needs no commit', () => {
    assert.equal(
      committedToEnd(
        m([[0, 5]]),
        m([
          [0, 5],
          [1, 0],
          [2, 0],
        ]),
      ),
      true,
    );
    assert.equal(committedToEnd(m([]), m([[0, 0]])), true);
  });
});
